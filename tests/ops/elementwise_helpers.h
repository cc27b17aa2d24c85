// Helpers shared by the element-wise op tests: typed arrays, integer edge values, exact references.
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "test_utils.h"

namespace smelt::test {

/// Calls f.template operator()<T>() for each T.
template <class... Ts, class F>
void for_types(F&& f) {
  (f.template operator()<Ts>(), ...);
}

#define SMELT_INT_TYPES int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
#define SMELT_FLOAT_DTYPES \
  { Dtype::Float16, Dtype::BFloat16, Dtype::Float32, Dtype::Float64 }

inline const std::vector<Dtype>& all_dtypes() {
  static const std::vector<Dtype> d = {bool_,  int8,    int16,    int32,   int64,  uint8,  uint16,
                                       uint32, uint64,  float16,  bfloat16, float32, float64};
  return d;
}

/// A 1-d array holding `v` (bool through a byte buffer: std::vector<bool> has no data()).
template <class T>
Array array_of(const std::vector<T>& v) {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> b(v.begin(), v.end());
    return Array(b.data(), Shape{static_cast<int64_t>(v.size())}, Dtype::Bool);
  } else {
    return Array(v, Shape{static_cast<int64_t>(v.size())});
  }
}

/// Minimum, maximum, 0, ±1, ±2 and their neighbours for an integer type.
template <class T>
std::vector<T> int_edges() {
  using L = std::numeric_limits<T>;
  std::vector<T> e{L::min(), static_cast<T>(L::min() + 1), T(0), T(1), T(2), T(3), T(7),
                   static_cast<T>(L::max() - 1), L::max()};
  if constexpr (std::is_signed_v<T>) {
    e.push_back(T(-1));
    e.push_back(T(-2));
    e.push_back(T(-3));
    e.push_back(T(-7));
  }
  return e;
}

/// Random values mixing full-range bit patterns and small magnitudes.
template <class T>
std::vector<T> random_ints(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed * 31u + 7u);
  std::vector<T> v(n);
  for (auto& x : v) {
    uint64_t r = rng();
    x = (r & 1) ? static_cast<T>(r >> 1) : static_cast<T>(static_cast<int64_t>((r >> 8) % 41) - 20);
  }
  return v;
}

/// Pairs: every edge against every edge, then random pairs.
template <class T>
std::pair<std::vector<T>, std::vector<T>> int_pairs(size_t random_count, uint32_t seed) {
  auto e = int_edges<T>();
  std::vector<T> a, b;
  for (T x : e)
    for (T y : e) {
      a.push_back(x);
      b.push_back(y);
    }
  auto ra = random_ints<T>(random_count, seed), rb = random_ints<T>(random_count, seed + 1000);
  a.insert(a.end(), ra.begin(), ra.end());
  b.insert(b.end(), rb.begin(), rb.end());
  return {a, b};
}

/// Two's complement wrap of an exact value to T.
template <class T>
T wrap(__int128 v) {
  return static_cast<T>(static_cast<uint64_t>(static_cast<unsigned __int128>(v)));
}

/// a * b modulo 2^128: the exact product's low bits without signed overflow (uint64 * uint64
/// overflows __int128), which is all wrap<T> keeps.
inline __int128 mul_mod(__int128 a, __int128 b) {
  return static_cast<__int128>(static_cast<unsigned __int128>(a) * static_cast<unsigned __int128>(b));
}

/// Elements of an evaluated array as T (exact when T is the array's element type).
template <class T>
std::vector<T> values(Array a) {
  return a.to_vector<T>();
}

}  // namespace smelt::test
