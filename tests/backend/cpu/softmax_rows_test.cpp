// The attention kernel's float softmax row loops: every ISA build gives the same bits, the
// exponential is within 1 ulp of e^x, and NaN, -inf and underflow behave as documented.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "src/backend/cpu/softmax_rows.h"

namespace smelt {
namespace {

using cpu::CpuIsa;

std::vector<float> scores(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-30.0f, 30.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(gen);
  // Masked keys, a NaN, values past the underflow threshold, and exact zeros.
  for (size_t i = 5; i < n; i += 17) v[i] = -std::numeric_limits<float>::infinity();
  if (n > 40) v[40] = std::numeric_limits<float>::quiet_NaN();
  for (size_t i = 11; i < n; i += 29) v[i] = -95.0f;
  for (size_t i = 3; i < n; i += 31) v[i] = 0.0f;
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(SoftmaxRows, EveryIsaGivesTheSameBits) {
  const cpu::SoftmaxRows& base = cpu::softmax_rows_for(CpuIsa::Baseline);
  for (CpuIsa isa : {CpuIsa::Avx2, CpuIsa::Avx512}) {
    SCOPED_TRACE(cpu::cpu_isa_name(isa));
    const cpu::SoftmaxRows& k = cpu::softmax_rows_for(isa);  // the best the CPU has at or below
    for (size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 24, 33, 100, 257}) {
      const std::vector<float> in = scores(n, static_cast<uint32_t>(n) + 1);
      std::vector<float> a = in, b = in;
      const float ma = base.scale_max(a.data(), static_cast<int64_t>(n), 0.17677669f);
      const float mb = k.scale_max(b.data(), static_cast<int64_t>(n), 0.17677669f);
      EXPECT_TRUE(same_bits(a, b)) << n;
      EXPECT_EQ(std::memcmp(&ma, &mb, sizeof(float)), 0) << n;
      const float sa = base.exp_shifted_sum(a.data(), static_cast<int64_t>(n), 1.5f);
      const float sb = k.exp_shifted_sum(b.data(), static_cast<int64_t>(n), 1.5f);
      EXPECT_TRUE(same_bits(a, b)) << n;
      EXPECT_EQ(std::memcmp(&sa, &sb, sizeof(float)), 0) << n;
      // A mask with -inf, -3.4e38 (a padding mask's) and NaN entries added to the scaled scores.
      std::vector<float> mask = scores(n, static_cast<uint32_t>(n) + 7);
      for (size_t j = 2; j < n; j += 13) mask[j] = -3.4028235e38f;
      a = in, b = in;
      const float aa = base.scale_add_max(a.data(), mask.data(), static_cast<int64_t>(n), 0.125f);
      const float ab = k.scale_add_max(b.data(), mask.data(), static_cast<int64_t>(n), 0.125f);
      EXPECT_TRUE(same_bits(a, b)) << n;
      EXPECT_EQ(std::memcmp(&aa, &ab, sizeof(float)), 0) << n;
      a = in, b = in;
      base.scale_add(a.data(), mask.data(), static_cast<int64_t>(n), 0.75f);
      k.scale_add(b.data(), mask.data(), static_cast<int64_t>(n), 0.75f);
      EXPECT_TRUE(same_bits(a, b)) << n;
    }
  }
}

// Which of -0 and +0 a lane keeps depends on the order it sees them: the AVX-512 loops, sixteen
// elements a step, must take elements l and l + 8 of a step in that order, as the others do.
TEST(SoftmaxRows, SignedZerosKeepTheElementOrderOnEveryIsa) {
  for (CpuIsa isa : {CpuIsa::Baseline, CpuIsa::Avx2, CpuIsa::Avx512}) {
    SCOPED_TRACE(cpu::cpu_isa_name(isa));
    const cpu::SoftmaxRows& k = cpu::softmax_rows_for(isa);
    for (const bool negative_first : {true, false}) {
      std::vector<float> v(32, -1.0f);
      v[2] = negative_first ? -0.0f : 0.0f;  // lane 2 of the first step, then of its second half
      v[10] = negative_first ? 0.0f : -0.0f;
      const float m = k.scale_max(v.data(), 32, 1.0f);
      EXPECT_EQ(std::signbit(m), negative_first) << "the first zero of lane 2 stays";
    }
  }
}

TEST(SoftmaxRows, ScaleMaxSkipsNaNAndGivesMinusInfinityForNone) {
  const cpu::SoftmaxRows& k = cpu::softmax_rows();
  std::vector<float> v{1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f, -2.0f};
  EXPECT_EQ(k.scale_max(v.data(), 4, 2.0f), 6.0f);
  EXPECT_EQ(v[0], 2.0f);
  EXPECT_EQ(k.scale_max(v.data(), 0, 2.0f), -std::numeric_limits<float>::infinity());
}

// The masked pass is the scaling, then the addition (two roundings, no fused multiply-add), and
// the maximum of scale_max over the results, -0/+0 order included; scale_add the same two steps.
TEST(SoftmaxRows, ScaleAddMaxIsTheScalingThenTheMaskThenTheMaximum) {
  for (CpuIsa isa : {CpuIsa::Baseline, CpuIsa::Avx2, CpuIsa::Avx512}) {
    SCOPED_TRACE(cpu::cpu_isa_name(isa));
    const cpu::SoftmaxRows& k = cpu::softmax_rows_for(isa);
    for (size_t n : {0, 5, 16, 37, 128}) {
      const std::vector<float> in = scores(n, static_cast<uint32_t>(n) + 3), mask = scores(n, static_cast<uint32_t>(n) + 4);
      const float scale = 0.3f;  // x * 0.3f + m rounds differently fused: 1 + 2^-23 below shows it
      std::vector<float> got = in, want = in, o = in;
      const float m = k.scale_add_max(got.data(), mask.data(), static_cast<int64_t>(n), scale);
      for (size_t j = 0; j < n; ++j) {
        volatile float product = in[j] * scale;  // rounded once, alone
        want[j] = product + mask[j];
      }
      const float want_max = k.scale_max(want.data(), static_cast<int64_t>(n), 1.0f);
      EXPECT_TRUE(same_bits(got, want)) << n;
      EXPECT_EQ(std::memcmp(&m, &want_max, sizeof(float)), 0) << n;
      k.scale_add(o.data(), mask.data(), static_cast<int64_t>(n), scale);
      EXPECT_TRUE(same_bits(o, want)) << n;
    }
    // (1 + 2^-23) * (1 + 2^-23) - 1 is 2^-22 rounded alone, 2^-22 + 2^-46 fused.
    std::vector<float> x(16, 1.0f + 0x1p-23f), minus_one(16, -1.0f);
    EXPECT_EQ(k.scale_add_max(x.data(), minus_one.data(), 16, 1.0f + 0x1p-23f), 0x1p-22f);
    EXPECT_EQ(x[15], 0x1p-22f);
    for (const bool negative_first : {true, false}) {
      std::vector<float> v(32, -1.0f), zero(32, -0.0f);  // x + (-0) keeps the sign of a zero x
      v[2] = negative_first ? -0.0f : 0.0f;
      v[10] = negative_first ? 0.0f : -0.0f;
      EXPECT_EQ(std::signbit(k.scale_add_max(v.data(), zero.data(), 32, 1.0f)), negative_first);
    }
  }
}

TEST(SoftmaxRows, ExpIsWithinOneUlp) {
  // Every 4099th float of [-87.3, 88] against the double exponential: the error bound is one ulp
  // of the float result (the rounding of a float result within about 0.5 ulp of the polynomial's).
  double worst = 0;
  for (uint32_t bits = 0; bits < 0xFFFFFFFFu - 4099; bits += 4099) {
    float x;
    std::memcpy(&x, &bits, sizeof x);
    if (!(x >= -87.3f && x <= 88.0f)) continue;
    const double want = std::exp(static_cast<double>(x));
    const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(want)) - 23);
    worst = std::max(worst, std::abs(static_cast<double>(cpu::softmax_exp(x)) - want) / ulp);
  }
  EXPECT_LE(worst, 1.0);
  EXPECT_EQ(cpu::softmax_exp(0.0f), 1.0f);
  EXPECT_EQ(cpu::softmax_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(cpu::softmax_exp(-100.0f), 0.0f);  // below 2^-126: 0
  EXPECT_TRUE(std::isnan(cpu::softmax_exp(std::numeric_limits<float>::quiet_NaN())));
}

TEST(SoftmaxRows, ExpShiftedSumAddsTheExponentials) {
  const cpu::SoftmaxRows& k = cpu::softmax_rows();
  std::vector<float> v = scores(100, 9);
  v[40] = 0.0f;  // no NaN here
  std::vector<float> in = v;
  const float sum = k.exp_shifted_sum(v.data(), 100, 30.0f);
  double want = 0;
  for (size_t j = 0; j < 100; ++j) {
    want += std::exp(static_cast<double>(in[j]) - 30.0);
    EXPECT_EQ(v[j], cpu::softmax_exp(in[j] - 30.0f)) << j;
  }
  // 100 terms in 8 lanes: each sum within 13 roundings, plus 1 ulp per term (relative 2^-23).
  EXPECT_NEAR(sum, want, want * (13 + 2) * 0x1p-24 + 1e-30);
}

}  // namespace
}  // namespace smelt
