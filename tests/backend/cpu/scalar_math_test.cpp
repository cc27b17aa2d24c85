// Tests for the scalar math header used by the CPU kernels and generated fused kernels.
// It is included first: the header must compile on its own (standard headers and smelt/dtype.h).
#include "src/backend/cpu/scalar_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace smelt {
namespace {

namespace s = smelt::scalar;

TEST(ScalarMath, IntegerWraparoundWithoutUndefinedBehaviour) {
  // uint16 * uint16 would promote to int and overflow; the header computes in unsigned.
  EXPECT_EQ(s::multiply<uint16_t>(65535, 65535), 1);
  EXPECT_EQ(s::square<uint16_t>(65535), 1);
  EXPECT_EQ(s::square<int16_t>(-32768), 0);
  EXPECT_EQ(s::add<int32_t>(std::numeric_limits<int32_t>::max(), 1), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(s::subtract<int64_t>(std::numeric_limits<int64_t>::min(), 1), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(s::negative<int8_t>(-128), -128);
  EXPECT_EQ(s::abs<int64_t>(std::numeric_limits<int64_t>::min()), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(s::negative<uint32_t>(1), 0xffffffffu);
  EXPECT_EQ(s::bitwise_not<uint8_t>(0), 255);
  EXPECT_EQ(s::bitwise_not<bool>(true), false);
}

TEST(ScalarMath, IntegerDivisionFamily) {
  const int32_t mn = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(s::floor_divide<int32_t>(mn, -1), mn);
  EXPECT_EQ(s::remainder<int32_t>(mn, -1), 0);
  EXPECT_EQ(s::fmod<int32_t>(mn, -1), 0);
  EXPECT_EQ(s::floor_divide<int32_t>(5, 0), 0);
  EXPECT_EQ(s::remainder<uint8_t>(5, 0), 0);
  EXPECT_EQ(s::fmod<int64_t>(-5, 0), 0);
  EXPECT_EQ(s::floor_divide<int8_t>(-7, 2), -4);
  EXPECT_EQ(s::floor_divide<int8_t>(7, -2), -4);
  EXPECT_EQ(s::floor_divide<int8_t>(-8, 2), -4);
  EXPECT_EQ(s::remainder<int8_t>(-7, 2), 1);
  EXPECT_EQ(s::remainder<int8_t>(7, -2), -1);
  EXPECT_EQ(s::fmod<int8_t>(-7, 2), -1);
  EXPECT_EQ(s::floor_divide<uint64_t>(~0ull, 2), (~0ull) / 2);
}

TEST(ScalarMath, IntegerPowerAndShifts) {
  EXPECT_EQ(s::power<int32_t>(2, 30), 1 << 30);
  EXPECT_EQ(s::power<int32_t>(2, 31), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(s::power<int32_t>(2, 32), 0);
  EXPECT_EQ(s::power<int32_t>(5, -1), 0);
  EXPECT_EQ(s::power<int32_t>(1, -7), 1);
  EXPECT_EQ(s::power<int32_t>(-1, -7), -1);
  EXPECT_EQ(s::power<int32_t>(-1, -8), 1);
  EXPECT_EQ(s::power<int8_t>(-2, 7), -128);
  EXPECT_EQ(s::power<uint16_t>(3, 11), static_cast<uint16_t>(177147));
  EXPECT_EQ(s::power<int64_t>(0, 0), 1);
  EXPECT_EQ(s::left_shift<int8_t>(1, 7), -128);
  EXPECT_EQ(s::left_shift<int8_t>(1, 8), 0);
  EXPECT_EQ(s::left_shift<int64_t>(1, 63), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(s::left_shift<int64_t>(1, 64), 0);
  EXPECT_EQ(s::left_shift<int32_t>(1, -1), 0);
  EXPECT_EQ(s::right_shift<int16_t>(-5, 1), -3);
  EXPECT_EQ(s::right_shift<int16_t>(-5, 16), -1);
  EXPECT_EQ(s::right_shift<int16_t>(5, 16), 0);
  EXPECT_EQ(s::right_shift<int16_t>(-5, -3), -1);
  EXPECT_EQ(s::right_shift<uint64_t>(~0ull, 64), 0u);
  EXPECT_EQ(s::right_shift<uint64_t>(~0ull, 63), 1u);
}

TEST(ScalarMath, FloatSemantics) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isnan(s::maximum(nan, 1.0)));
  EXPECT_TRUE(std::isnan(s::maximum(1.0, nan)));
  EXPECT_TRUE(std::isnan(s::minimum(1.0f, std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(s::relu(nan)));
  EXPECT_FALSE(std::signbit(s::relu(-0.0)));
  EXPECT_FALSE(std::signbit(s::sign(-0.0)));  // NumPy: sign(-0.0) = 0.0
  EXPECT_TRUE(std::isnan(s::sign(nan)));
  EXPECT_EQ(s::floor_divide(-5.0, inf), -1.0);
  EXPECT_EQ(s::remainder(-5.0, inf), inf);
  EXPECT_TRUE(std::signbit(s::floor_divide(-0.0, 3.0)));
  EXPECT_FALSE(std::signbit(s::remainder(-0.0, 3.0)));
  EXPECT_EQ(s::round(2.5), 2.0);
  EXPECT_EQ(s::round(-3.5f), -4.0f);
  EXPECT_EQ(s::sigmoid(-800.0), 0.0);
  EXPECT_EQ(s::sigmoid(800.0), 1.0);
  EXPECT_EQ(s::erfinv(1.0), inf);
  EXPECT_TRUE(std::isnan(s::erfinv(1.0000001)));
  EXPECT_TRUE(s::isfinite<int32_t>(7));
  EXPECT_FALSE(s::isnan<uint8_t>(7));
  EXPECT_TRUE(s::logical_not(-0.0));
  EXPECT_FALSE(s::logical_not(nan));
}

TEST(ScalarMath, HalvesComputeInFloatAndRoundOnce) {
  const float16_t a(1.0f), b(static_cast<float>(std::ldexp(1.0, -11)));
  EXPECT_EQ(static_cast<float>(s::add(a, b)), 1.0f);  // tie to even
  const bfloat16_t x(3.0f);
  EXPECT_EQ(s::sqrt(x).bits, bfloat16_t(std::sqrt(3.0f)).bits);
  EXPECT_EQ(s::negative(float16_t(0.0f)).bits, 0x8000u);
  EXPECT_EQ(s::abs(float16_t::from_bits(0xfc00u)).bits, 0x7c00u);  // |-inf| = inf
  EXPECT_TRUE(s::isnan(float16_t::from_bits(0x7e00u)));
  EXPECT_TRUE(s::less(bfloat16_t(1.0f), bfloat16_t(2.0f)));
  // maximum returns an operand's exact bits.
  const float16_t nz = float16_t::from_bits(0x8000u), pz = float16_t(0.0f);
  EXPECT_EQ(s::maximum(nz, pz).bits, 0x8000u);
  EXPECT_EQ(s::maximum(pz, nz).bits, 0x0000u);
}

TEST(ScalarMath, ErfinvRoundTripsThroughErf) {
  for (int i = -999; i <= 999; ++i) {
    double y = i / 1000.0;
    double x = s::erfinv(y);
    EXPECT_NEAR(std::erf(x), y, 6e-16) << y;
    // float computes in float64 and rounds once.
    const float yf = static_cast<float>(y);
    EXPECT_EQ(s::erfinv(yf), static_cast<float>(s::erfinv(static_cast<double>(yf)))) << y;
  }
}

}  // namespace
}  // namespace smelt
