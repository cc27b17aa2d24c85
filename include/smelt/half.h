// The 16-bit float storage types float16_t and bfloat16_t and their conversions.
//
// Kept apart from dtype.h, with only light standard headers, because generated fused kernels
// paste it into their source: every header here costs compile time on each kernel build.
#pragma once

#include <cstdint>
#include <cstring>

namespace smelt {

/// IEEE binary16, stored as its bits. Arithmetic goes through float, as NumPy does.
struct float16_t {
  uint16_t bits = 0;
  float16_t() = default;
  float16_t(float f);  // round to nearest even, overflow to inf, NaN kept quiet
  explicit float16_t(double d);
  operator float() const;
  static float16_t from_bits(uint16_t b) {
    float16_t h;
    h.bits = b;
    return h;
  }
};

/// bfloat16 (the upper half of a float32), stored as its bits, round to nearest even.
struct bfloat16_t {
  uint16_t bits = 0;
  bfloat16_t() = default;
  bfloat16_t(float f);
  explicit bfloat16_t(double d);
  operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  static bfloat16_t from_bits(uint16_t b) {
    bfloat16_t h;
    h.bits = b;
    return h;
  }
};

float half_to_float(uint16_t bits);
uint16_t float_to_half(float f);
/// float to bfloat16 bits, round to nearest even, NaN kept quiet. Inline and branch-free: loops
/// of casts (eager and fused) vectorize instead of calling a function per element.
inline uint16_t float_to_bfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t quiet = (x >> 16) | 0x40u;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}
uint16_t double_to_half(double d);      // rounded once, not through float
uint16_t double_to_bfloat16(double d);  // rounded once, not through float

inline float16_t::float16_t(float f) : bits(float_to_half(f)) {}
inline float16_t::float16_t(double d) : bits(double_to_half(d)) {}
inline float16_t::operator float() const { return half_to_float(bits); }
inline bfloat16_t::bfloat16_t(float f) : bits(float_to_bfloat16(f)) {}
inline bfloat16_t::bfloat16_t(double d) : bits(double_to_bfloat16(d)) {}

}  // namespace smelt
