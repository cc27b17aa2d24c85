// Tests for dtype metadata, promotion, and the float16/bfloat16 conversions (exhaustive where cheap).
#include <bit>
#include <cmath>
#include <limits>

#include "test_utils.h"

namespace smelt {
namespace {

const Dtype kAllDtypes[] = {bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                            float16, bfloat16, float32, float64};

float f32(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }
double next_up(double d) { return std::nextafter(d, std::numeric_limits<double>::infinity()); }
double next_down(double d) { return std::nextafter(d, -std::numeric_limits<double>::infinity()); }
float next_up(float f) { return std::nextafter(f, std::numeric_limits<float>::infinity()); }
float next_down(float f) { return std::nextafter(f, -std::numeric_limits<float>::infinity()); }

bool half_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bf16_is_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

// The value of a half bit pattern computed from its definition, in double.
double half_value(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * std::ldexp(m, -24);
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : s * std::numeric_limits<double>::infinity();
  return s * std::ldexp(1024 + m, e - 25);
}

// Reference rounding of a double to the nearest value in a sorted table of non-negative finite
// values (ties to the even bit pattern), overflowing to `inf_bits` past the last value's half ulp.
template <class ValueOf>
uint16_t reference_round(double x, uint16_t max_finite_bits, uint16_t inf_bits, double overflow_at, ValueOf value_of) {
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  double a = std::fabs(x);
  if (a >= overflow_at) return sign | inf_bits;
  // Binary search for the largest finite pattern with value <= a.
  uint16_t lo = 0, hi = max_finite_bits;
  while (lo < hi) {
    uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (value_of(mid) <= a) lo = mid;
    else hi = static_cast<uint16_t>(mid - 1);
  }
  if (lo == max_finite_bits) return sign | lo;
  double below = value_of(lo), above = value_of(static_cast<uint16_t>(lo + 1));
  uint16_t r;
  if (a - below < above - a) r = lo;
  else if (a - below > above - a) r = static_cast<uint16_t>(lo + 1);
  else r = (lo & 1) ? static_cast<uint16_t>(lo + 1) : lo;
  return sign | r;
}

uint16_t reference_half(double x) {
  return reference_round(x, 0x7bff, 0x7c00, 65520.0, [](uint16_t h) { return half_value(h); });
}
uint16_t reference_bf16(double x) {
  const double max_bf16 = static_cast<double>(f32(0x7f7f0000u));
  const double overflow_at = max_bf16 + std::ldexp(1.0, 127 - 8);  // halfway to 2^128
  return reference_round(x, 0x7f7f, 0x7f80, overflow_at,
                         [](uint16_t b) { return static_cast<double>(f32(static_cast<uint32_t>(b) << 16)); });
}

// ---- metadata -------------------------------------------------------------------------------

TEST(Dtype, SizesNamesKinds) {
  const struct {
    Dtype d;
    size_t size;
    const char* name;
    DtypeKind kind;
  } table[] = {
      {bool_, 1, "bool", DtypeKind::Bool},           {int8, 1, "int8", DtypeKind::SignedInt},
      {int16, 2, "int16", DtypeKind::SignedInt},     {int32, 4, "int32", DtypeKind::SignedInt},
      {int64, 8, "int64", DtypeKind::SignedInt},     {uint8, 1, "uint8", DtypeKind::UnsignedInt},
      {uint16, 2, "uint16", DtypeKind::UnsignedInt}, {uint32, 4, "uint32", DtypeKind::UnsignedInt},
      {uint64, 8, "uint64", DtypeKind::UnsignedInt}, {float16, 2, "float16", DtypeKind::Float},
      {bfloat16, 2, "bfloat16", DtypeKind::Float},   {float32, 4, "float32", DtypeKind::Float},
      {float64, 8, "float64", DtypeKind::Float},
  };
  ASSERT_EQ(std::size(table), static_cast<size_t>(kNumDtypes));
  for (size_t i = 0; i < std::size(table); ++i) {
    const auto& t = table[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(static_cast<size_t>(t.d), i);  // the enum order indexes tables
    EXPECT_EQ(size_of(t.d), t.size);
    EXPECT_STREQ(dtype_name(t.d), t.name);
    EXPECT_EQ(to_string(t.d), t.name);
    EXPECT_EQ(kind_of(t.d), t.kind);
    EXPECT_EQ(is_floating(t.d), t.kind == DtypeKind::Float);
    EXPECT_EQ(is_integral(t.d), t.kind == DtypeKind::SignedInt || t.kind == DtypeKind::UnsignedInt);
    EXPECT_EQ(is_signed_integral(t.d), t.kind == DtypeKind::SignedInt);
    EXPECT_EQ(is_unsigned_integral(t.d), t.kind == DtypeKind::UnsignedInt);
  }
}

TEST(Dtype, DtypeOfCppTypes) {
  static_assert(dtype_of<bool>() == bool_);
  static_assert(dtype_of<int8_t>() == int8);
  static_assert(dtype_of<int16_t>() == int16);
  static_assert(dtype_of<int32_t>() == int32);
  static_assert(dtype_of<int64_t>() == int64);
  static_assert(dtype_of<long long>() == int64);
  static_assert(dtype_of<uint8_t>() == uint8);
  static_assert(dtype_of<uint16_t>() == uint16);
  static_assert(dtype_of<uint32_t>() == uint32);
  static_assert(dtype_of<uint64_t>() == uint64);
  static_assert(dtype_of<unsigned long long>() == uint64);
  static_assert(dtype_of<float16_t>() == float16);
  static_assert(dtype_of<bfloat16_t>() == bfloat16);
  static_assert(dtype_of<float>() == float32);
  static_assert(dtype_of<double>() == float64);
  SUCCEED();
}

TEST(Dtype, Promotion) {
  for (Dtype a : kAllDtypes)
    for (Dtype b : kAllDtypes) {
      EXPECT_EQ(promote_types(a, b), promote_types(b, a)) << dtype_name(a) << " " << dtype_name(b);
      EXPECT_EQ(promote_types(a, promote_types(a, b)), promote_types(a, b));
    }
  for (Dtype a : kAllDtypes) {
    EXPECT_EQ(promote_types(a, a), a);
    EXPECT_EQ(promote_types(bool_, a), a);
  }
  EXPECT_EQ(promote_types(int8, int32), int32);
  EXPECT_EQ(promote_types(uint8, uint64), uint64);
  EXPECT_EQ(promote_types(int8, uint8), int16);
  EXPECT_EQ(promote_types(int16, uint16), int32);
  EXPECT_EQ(promote_types(int32, uint32), int64);
  EXPECT_EQ(promote_types(int64, uint32), int64);
  EXPECT_EQ(promote_types(int8, uint32), int64);
  EXPECT_EQ(promote_types(int64, uint64), float64);
  EXPECT_EQ(promote_types(int8, uint64), float64);
  EXPECT_EQ(promote_types(float16, bfloat16), float32);
  EXPECT_EQ(promote_types(float16, float32), float32);
  EXPECT_EQ(promote_types(bfloat16, float64), float64);
  // Integers with floats keep the float's dtype (MLX/JAX/PyTorch rule, see dtype.h).
  EXPECT_EQ(promote_types(int64, float16), float16);
  EXPECT_EQ(promote_types(uint32, bfloat16), bfloat16);
  EXPECT_EQ(promote_types(int32, float32), float32);
}

// ---- float16 --------------------------------------------------------------------------------

TEST(Float16, EveryBitPatternRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    uint16_t h = static_cast<uint16_t>(b);
    float f = half_to_float(h);
    if (half_is_nan(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      ASSERT_TRUE(half_is_nan(float_to_half(f))) << std::hex << b;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0);
      if (h & 0x200) {
        ASSERT_EQ(float_to_half(f), h) << std::hex << b;  // quiet NaNs keep their payload
      }
      continue;
    }
    double expected = half_value(h);
    ASSERT_EQ(static_cast<double>(f), expected) << std::hex << b;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << b;
    ASSERT_EQ(float_to_half(f), h) << std::hex << b;
    ASSERT_EQ(double_to_half(expected), h) << std::hex << b;
    ASSERT_EQ(float16_t::from_bits(h).bits, h);
    ASSERT_EQ(float16_t(f).bits, h);
    ASSERT_EQ(static_cast<float>(float16_t::from_bits(h)), f);
  }
}

TEST(Float16, TiesRoundToEvenAtEveryBoundary) {
  // Between every pair of adjacent finite halves: the midpoint rounds to the even pattern, a
  // float just above it rounds up and one just below rounds down.
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    float lo = half_to_float(h), hi = half_to_float(static_cast<uint16_t>(h + 1));
    float mid = lo + (hi - lo) / 2;  // exact: halves have 11 significant bits
    ASSERT_EQ(static_cast<double>(mid) * 2, static_cast<double>(lo) + hi);
    uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : h;
    ASSERT_EQ(float_to_half(mid), even) << std::hex << h;
    ASSERT_EQ(float_to_half(-mid), even | 0x8000) << std::hex << h;
    ASSERT_EQ(float_to_half(next_up(mid)), h + 1) << std::hex << h;
    ASSERT_EQ(float_to_half(next_down(mid)), h) << std::hex << h;
    ASSERT_EQ(double_to_half(mid), even) << std::hex << h;
    ASSERT_EQ(double_to_half(next_up(static_cast<double>(mid))), h + 1) << std::hex << h;
    ASSERT_EQ(double_to_half(next_down(static_cast<double>(mid))), h) << std::hex << h;
  }
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie, even is 1.0
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
}

TEST(Float16, OverflowUnderflowAndSpecials) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.99f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // the tie above the max rounds to even = inf
  EXPECT_EQ(float_to_half(1e10f), 0x7c00);
  EXPECT_EQ(float_to_half(-1e10f), 0xfc00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(float_to_half(inf), 0x7c00);
  EXPECT_EQ(float_to_half(-inf), 0xfc00);
  EXPECT_EQ(double_to_half(65520.0), 0x7c00);
  EXPECT_EQ(double_to_half(next_down(65520.0)), 0x7bff);
  EXPECT_EQ(double_to_half(1e300), 0x7c00);
  EXPECT_EQ(double_to_half(-1e300), 0xfc00);
  // Subnormals: 2^-24 is the smallest; half of it is a tie that rounds to zero.
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(float_to_half(next_up(std::ldexp(1.0f, -25))), 0x0001);
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp: tie to even (2)
  EXPECT_EQ(float_to_half(-std::ldexp(1.0f, -26)), 0x8000);  // -0 keeps its sign
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(float_to_half(next_down(std::ldexp(1.0f, -14))), 0x0400);  // rounds up into normals
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(double_to_half(-0.0), 0x8000);
  EXPECT_EQ(double_to_half(std::ldexp(1.0, -25)), 0x0000);
  EXPECT_EQ(double_to_half(next_up(std::ldexp(1.0, -25))), 0x0001);
  EXPECT_EQ(double_to_half(-std::ldexp(1.0, -1074)), 0x8000);
  // NaN stays NaN (quiet), with its sign.
  EXPECT_TRUE(half_is_nan(float_to_half(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(half_is_nan(float_to_half(std::numeric_limits<float>::signaling_NaN())));
  EXPECT_TRUE(half_is_nan(float_to_half(f32(0x7f800001u))));  // payload only in the low bits
  EXPECT_TRUE(half_is_nan(float_to_half(f32(0xff800001u))));
  EXPECT_EQ(float_to_half(f32(0xff800001u)) & 0x8000, 0x8000);
  EXPECT_TRUE(half_is_nan(double_to_half(std::numeric_limits<double>::quiet_NaN())));
}

TEST(Float16, MatchesAReferenceOnManyFloats) {
  // Random bit patterns across the whole float range, plus a dense sweep of the half range.
  std::mt19937 rng(42);
  for (int i = 0; i < 300000; ++i) {
    float f = f32(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), reference_half(f)) << f;
  }
  for (uint32_t b = 0x33000000u; b < 0x47800000u; b += 997) {
    float f = f32(b);
    ASSERT_EQ(float_to_half(f), reference_half(f)) << std::hexfloat << f;
  }
}

TEST(Float16, DoubleRoundsOnce) {
  // Just above a tie of halves: rounding to float first would land exactly on the tie, which
  // then goes to even (down); a single rounding goes up.
  double just_above_tie = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(float_to_half(static_cast<float>(just_above_tie)), 0x3c00);
  EXPECT_EQ(double_to_half(just_above_tie), 0x3c01);
  EXPECT_EQ(float16_t(just_above_tie).bits, 0x3c01);
  EXPECT_EQ(double_to_half(-just_above_tie), 0xbc01);
  // The same at the overflow boundary and in the subnormals.
  EXPECT_EQ(double_to_half(65520.0 - std::ldexp(1.0, -30)), 0x7bff);
  EXPECT_EQ(double_to_half(std::ldexp(1.0, -25) + std::ldexp(1.0, -60)), 0x0001);
  EXPECT_EQ(float_to_half(static_cast<float>(std::ldexp(1.0, -25) + std::ldexp(1.0, -60))), 0x0000);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    double d = std::ldexp(static_cast<double>(rng() >> 11) / 9007199254740992.0 + 0.5, static_cast<int>(rng() % 48) - 30);
    if (rng() & 1) d = -d;
    ASSERT_EQ(double_to_half(d), reference_half(d)) << std::hexfloat << d;
  }
}

// ---- bfloat16 -------------------------------------------------------------------------------

TEST(BFloat16, EveryBitPatternRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    uint16_t h = static_cast<uint16_t>(b);
    float f = bfloat16_t::from_bits(h);
    EXPECT_EQ(bits_of(f), b << 16);
    if (bf16_is_nan(h)) {
      ASSERT_TRUE(std::isnan(f));
      ASSERT_TRUE(bf16_is_nan(float_to_bfloat16(f))) << std::hex << b;
      ASSERT_TRUE(bf16_is_nan(double_to_bfloat16(static_cast<double>(f)))) << std::hex << b;
      if (h & 0x40) {
        ASSERT_EQ(float_to_bfloat16(f), h) << std::hex << b;
      }
      continue;
    }
    ASSERT_EQ(float_to_bfloat16(f), h) << std::hex << b;
    ASSERT_EQ(double_to_bfloat16(static_cast<double>(f)), h) << std::hex << b;
    ASSERT_EQ(bfloat16_t(f).bits, h);
  }
}

TEST(BFloat16, TiesOverflowSubnormals) {
  for (uint16_t h = 0; h < 0x7f7f; h = static_cast<uint16_t>(h + 1)) {
    float lo = bfloat16_t::from_bits(h), hi = bfloat16_t::from_bits(static_cast<uint16_t>(h + 1));
    float mid = f32((static_cast<uint32_t>(h) << 16) | 0x8000u);  // exactly halfway
    ASSERT_EQ(static_cast<double>(mid) * 2, static_cast<double>(lo) + hi);
    uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : h;
    ASSERT_EQ(float_to_bfloat16(mid), even) << std::hex << h;
    ASSERT_EQ(float_to_bfloat16(next_up(mid)), h + 1) << std::hex << h;
    ASSERT_EQ(float_to_bfloat16(next_down(mid)), h) << std::hex << h;
    ASSERT_EQ(double_to_bfloat16(mid), even) << std::hex << h;
    ASSERT_EQ(double_to_bfloat16(next_up(static_cast<double>(mid))), h + 1) << std::hex << h;
    ASSERT_EQ(double_to_bfloat16(next_down(static_cast<double>(mid))), h) << std::hex << h;
  }
  const float max = std::numeric_limits<float>::max();
  EXPECT_EQ(float_to_bfloat16(max), 0x7f80);  // past the last bf16 tie
  EXPECT_EQ(float_to_bfloat16(f32(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(float_to_bfloat16(f32(0x7f7f8000u)), 0x7f80);  // tie above the max: to even = inf
  EXPECT_EQ(double_to_bfloat16(1e300), 0x7f80);
  EXPECT_EQ(double_to_bfloat16(-1e300), 0xff80);
  EXPECT_EQ(double_to_bfloat16(static_cast<double>(max)), 0x7f80);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_bfloat16(f32(0x00010000u)), 0x0001);  // smallest bf16 subnormal
  EXPECT_EQ(float_to_bfloat16(-0.0f), 0x8000);
  EXPECT_EQ(double_to_bfloat16(-1e-300), 0x8000);
  EXPECT_EQ(double_to_bfloat16(std::ldexp(1.0, -133)), 0x0001);
  EXPECT_EQ(double_to_bfloat16(std::ldexp(1.0, -134)), 0x0000);  // tie to even
  EXPECT_EQ(double_to_bfloat16(next_up(std::ldexp(1.0, -134))), 0x0001);
  EXPECT_TRUE(bf16_is_nan(float_to_bfloat16(f32(0x7f800001u))));  // low payload bits only
  EXPECT_TRUE(bf16_is_nan(float_to_bfloat16(f32(0xffc00000u))));
  EXPECT_TRUE(bf16_is_nan(double_to_bfloat16(std::numeric_limits<double>::quiet_NaN())));
}

TEST(BFloat16, DoubleRoundsOnce) {
  double just_above_tie = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  EXPECT_EQ(float_to_bfloat16(static_cast<float>(just_above_tie)), 0x3f80);
  EXPECT_EQ(double_to_bfloat16(just_above_tie), 0x3f81);
  EXPECT_EQ(bfloat16_t(just_above_tie).bits, 0x3f81);
  EXPECT_EQ(double_to_bfloat16(-just_above_tie), 0xbf81);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200000; ++i) {
    double d = std::ldexp(static_cast<double>(rng() >> 11) / 9007199254740992.0 + 0.5, static_cast<int>(rng() % 280) - 140);
    if (rng() & 1) d = -d;
    ASSERT_EQ(double_to_bfloat16(d), reference_bf16(d)) << std::hexfloat << d;
  }
  for (int i = 0; i < 200000; ++i) {
    float f = f32(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bfloat16(f), reference_bf16(f)) << std::hexfloat << f;
  }
}

}  // namespace
}  // namespace smelt
