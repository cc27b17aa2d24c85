// oneDNN convolutions (src/backend/cpu/dnnl.h): the float64 rounding bound, the same bits and the
// same implementation at any thread count, primitives planned once, add post-ops bit-identical to
// separate adds, concurrent callers.
#include "src/backend/cpu/dnnl.h"
#include "src/backend/cpu/elementwise_math.h"
#include "src/backend/cpu/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "smelt/compile.h"
#include "smelt/memory.h"
#include "test_utils.h"

namespace smelt {
namespace {

using cpu::DnnlAdd;
using cpu::DnnlAddKind;
using cpu::DnnlConv;

struct Case {
  const char* name;
  DnnlConv c;
};

DnnlConv make(int spatial, int64_t n, int64_t ci, int64_t co, std::vector<int64_t> in, std::vector<int64_t> k,
              int64_t stride = 1, int64_t pad = 0, int64_t dil = 1, int64_t groups = 1, int64_t pad_hi_extra = 0) {
  DnnlConv c;
  c.spatial = spatial;
  c.batch = n;
  c.in_ch = ci;
  c.out_ch = co;
  c.groups = groups;
  for (int i = 0; i < spatial; ++i) {
    const int d = 3 - spatial + i;
    c.in[d] = in[i];
    c.k[d] = k[i];
    c.stride[d] = stride;
    c.pad_lo[d] = pad;
    c.pad_hi[d] = pad + (i == spatial - 1 ? pad_hi_extra : 0);
    c.dil[d] = dil;
    c.out[d] = (in[i] + c.pad_lo[d] + c.pad_hi[d] - dil * (k[i] - 1) - 1) / stride + 1;
  }
  return c;
}

// ResNet-like layers (3x3 and 1x1, batch 1 and 4), a stem (7x7 stride 2, 3 channels), grouped,
// depthwise, dilated, asymmetric padding, 1-D and 3-D: shapes where oneDNN picks different
// kernels and blockings (brgconv, 1x1, depthwise, plain-source stems).
std::vector<Case> cases() {
  return {
      {"3x3_c64_b1", make(2, 1, 64, 64, {14, 14}, {3, 3}, 1, 1)},
      {"3x3_c64_b4", make(2, 4, 64, 64, {14, 14}, {3, 3}, 1, 1)},
      {"3x3_c512_7x7", make(2, 1, 512, 64, {7, 7}, {3, 3}, 1, 1)},
      {"1x1_c256_to_64", make(2, 2, 256, 64, {14, 14}, {1, 1})},
      {"1x1_stride2", make(2, 1, 64, 128, {14, 14}, {1, 1}, 2)},
      {"stem_7x7_s2", make(2, 1, 3, 16, {32, 32}, {7, 7}, 2, 3)},
      {"first_layer_3_to_16", make(2, 2, 3, 16, {17, 18}, {3, 3}, 2, 1)},
      {"first_layer_3_to_8", make(2, 1, 3, 8, {16, 16}, {3, 3}, 2, 1)},
      {"first_layer_3_to_64", make(2, 1, 3, 64, {20, 20}, {7, 7}, 2, 3)},
      {"grouped_g4", make(2, 2, 32, 48, {9, 11}, {3, 3}, 1, 1, 1, 4)},
      {"depthwise_s2", make(2, 2, 32, 32, {15, 15}, {3, 3}, 2, 1, 1, 32)},
      {"dilated_asym_pad", make(2, 1, 16, 24, {13, 12}, {3, 3}, 1, 2, 2, 1, 1)},
      {"odd_channels", make(2, 3, 5, 7, {9, 8}, {3, 2}, 1, 1)},
      {"conv1d", make(1, 2, 24, 40, {50}, {5}, 2, 2)},
      {"conv3d", make(3, 1, 8, 16, {6, 7, 8}, {3, 3, 3}, 1, 1)},
  };
}

int64_t numel(const DnnlConv& c, bool out) {
  int64_t n = c.batch * (out ? c.out_ch : c.in_ch);
  for (int i = 0; i < 3; ++i) n *= out ? c.out[i] : c.in[i];
  return n;
}
int64_t kernel_size(const DnnlConv& c) { return c.k[0] * c.k[1] * c.k[2]; }

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(gen);
  return v;
}

struct Data {
  DnnlConv c;
  std::vector<float> x, w;
  Data(const DnnlConv& cs, uint32_t seed)
      : c(cs),
        x(random_floats(static_cast<size_t>(numel(cs, false)), seed, -2, 2)),
        w(random_floats(static_cast<size_t>(cs.out_ch * (cs.in_ch / cs.groups) * kernel_size(cs)), seed + 1)) {}
  std::vector<float> run(const std::vector<DnnlAdd>& adds = {}) const {
    std::vector<float> y(static_cast<size_t>(numel(c, true)), -7.0f);
    EXPECT_TRUE(cpu::dnnl_conv_f32(c, x.data(), w.data(), y.data(), adds)) << "oneDNN did not take the convolution";
    return y;
  }
  /// With adds oneDNN may decline (another implementation would run): empty then.
  std::vector<float> run_if_taken(const std::vector<DnnlAdd>& adds) const {
    std::vector<float> y(static_cast<size_t>(numel(c, true)), -7.0f);
    if (!cpu::dnnl_conv_f32(c, x.data(), w.data(), y.data(), adds)) return {};
    return y;
  }
};

/// The exact sum (long double over float inputs: exact products, 64-bit mantissa sums) and the sum
/// of magnitudes of one output element.
void reference(const Data& d, int64_t n, int64_t o, const int64_t* pos, long double* exact, long double* mag) {
  const DnnlConv& c = d.c;
  const int64_t cg = c.in_ch / c.groups, og = c.out_ch / c.groups, grp = o / og;
  *exact = 0;
  *mag = 0;
  for (int64_t ci = 0; ci < cg; ++ci)
    for (int64_t a = 0; a < c.k[0]; ++a)
      for (int64_t b = 0; b < c.k[1]; ++b)
        for (int64_t e = 0; e < c.k[2]; ++e) {
          const int64_t kk[3] = {a, b, e};
          int64_t at[3];
          bool inside = true;
          for (int i = 0; i < 3; ++i) {
            at[i] = pos[i] * c.stride[i] - c.pad_lo[i] + kk[i] * c.dil[i];
            inside = inside && at[i] >= 0 && at[i] < c.in[i];
          }
          if (!inside) continue;
          const int64_t ch = grp * cg + ci;
          const long double xv = d.x[static_cast<size_t>((((n * c.in_ch + ch) * c.in[0] + at[0]) * c.in[1] + at[1]) *
                                                             c.in[2] +
                                                         at[2])];
          const long double wv =
              d.w[static_cast<size_t>((((o * cg + ci) * c.k[0] + a) * c.k[1] + b) * c.k[2] + e)];
          *exact += xv * wv;
          *mag += std::fabs(xv * wv);
        }
}

// Every element within the bound of a dot product of length K = (C/groups)·kernel in float32,
// whatever the order of the sum and with or without fused multiply-adds (Higham 3.1):
// |y - exact| <= gamma_K · Σ|x||w|, gamma_K = K u / (1 - K u), u = 2^-24.
TEST(DnnlConv, WithinTheFloat32RoundingBound) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF)";
  const double u = std::ldexp(1.0, -24);
  uint32_t seed = 1;
  for (const Case& cs : cases()) {
    SCOPED_TRACE(cs.name);
    Data d(cs.c, seed += 2);
    const auto y = d.run();
    const DnnlConv& c = d.c;
    const double K = static_cast<double>(c.in_ch / c.groups * kernel_size(c));
    const double gamma = K * u / (1 - K * u);
    int bad = 0;
    size_t i = 0;
    for (int64_t n = 0; n < c.batch; ++n)
      for (int64_t o = 0; o < c.out_ch; ++o)
        for (int64_t p0 = 0; p0 < c.out[0]; ++p0)
          for (int64_t p1 = 0; p1 < c.out[1]; ++p1)
            for (int64_t p2 = 0; p2 < c.out[2]; ++p2, ++i) {
              const int64_t pos[3] = {p0, p1, p2};
              long double exact, mag;
              reference(d, n, o, pos, &exact, &mag);
              const double err = std::fabs(static_cast<double>(y[i] - exact));
              if (err > gamma * static_cast<double>(mag) && bad++ < 3)
                ADD_FAILURE() << "y[" << i << "] = " << y[i] << ", exact " << static_cast<double>(exact) << ", error "
                              << err << " > bound " << gamma * static_cast<double>(mag);
            }
  }
}

// oneDNN plans a primitive for the thread count it is created under (blockings, loop orders):
// the implementation and every output bit must stay the same at 1, 2 and 3 threads.
TEST(DnnlConv, SameBitsAndImplementationAtAnyThreadCount) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF)";
  const int saved = cpu_threads();
  uint32_t seed = 50;
  auto all = cases();
  all.push_back({"3x3_c64_56x56_b2", make(2, 2, 64, 64, {56, 56}, {3, 3}, 1, 1)});
  all.push_back({"1x1_c64_to_256_56x56", make(2, 1, 64, 256, {56, 56}, {1, 1})});
  for (const Case& cs : all) {
    SCOPED_TRACE(cs.name);
    Data d(cs.c, seed += 2);
    set_cpu_threads(1);
    const std::string impl = cpu::dnnl_conv_impl(d.c);
    const auto one = d.run();
    for (int threads : {2, 3}) {
      set_cpu_threads(threads);
      EXPECT_EQ(cpu::dnnl_conv_impl(d.c), impl) << threads << " threads";
      const auto many = d.run();
      EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)), 0) << threads << " threads";
    }
  }
  set_cpu_threads(saved);
}

TEST(DnnlConv, PlansEachGeometryOnce) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF)";
  Data d(make(2, 1, 8, 8, {10, 10}, {3, 3}, 1, 1), 7);
  d.run();
  const int64_t before = cpu::dnnl_conv_primitives_created();
  for (int i = 0; i < 3; ++i) d.run();
  EXPECT_EQ(cpu::dnnl_conv_primitives_created(), before);
  // A new shape: one more, and at more than one thread also the 1-thread plan its blocking is
  // checked against (choose_plan). 1.8M multiply-adds: above the one-thread size.
  Data other(make(2, 2, 16, 16, {20, 20}, {3, 3}, 1, 1), 8);
  other.run();
  EXPECT_EQ(cpu::dnnl_conv_primitives_created(), before + (cpu_threads() > 1 ? 2 : 1));
}

// A convolution of fewer than 2^18 multiply-adds (a batch-1 MobileNet layer) runs on one thread
// whatever the caller's count: one plan, the 1-thread bits.
TEST(DnnlConv, ASmallConvolutionRunsOnOneThread) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF)";
  const int saved = cpu_threads();
  Data d(make(2, 1, 24, 120, {8, 8}, {1, 1}), 21);  // 184,320 multiply-adds
  set_cpu_threads(1);
  const auto one = d.run();
  set_cpu_threads(3);
  const int64_t before = cpu::dnnl_conv_primitives_created();
  const auto three = d.run();
  EXPECT_EQ(cpu::dnnl_conv_primitives_created(), before) << "planned again for three threads";
  EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size() * sizeof(float)), 0);
  set_cpu_threads(saved);
}

// Bias (per channel) and residual (whole tensor) adds as post-ops give, bit for bit, the
// convolution followed by float32 adds in the same order: oneDNN applies post-ops once, on the
// final accumulator, also where the reduction over input channels runs in several passes
// (512 and 1024 channels below). Where the post-ops would make oneDNN switch implementations
// (a grouped convolution with bias and residual falls to its reference kernel), the call declines
// and the caller adds separately; the ResNet-style layers must take them.
TEST(DnnlConv, AddPostOpsEqualSeparateAddsBitForBit) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF)";
  auto all = cases();
  all.push_back({"3x3_c512_deep", make(2, 2, 512, 64, {8, 8}, {3, 3}, 1, 1)});
  all.push_back({"1x1_c1024_deep", make(2, 1, 1024, 128, {7, 7}, {1, 1})});
  uint32_t seed = 90;
  int taken = 0;
  bool any_brgemm = false;
  for (const Case& cs : all) {
    SCOPED_TRACE(cs.name);
    Data d(cs.c, seed += 3);
    const auto plain = d.run();
    const auto bias = random_floats(static_cast<size_t>(d.c.out_ch), seed + 10, -3, 3);
    const auto bias2 = random_floats(static_cast<size_t>(d.c.out_ch), seed + 11, -3, 3);
    const auto residual = random_floats(plain.size(), seed + 12, -3, 3);
    const int64_t plane = static_cast<int64_t>(plain.size()) / (d.c.batch * d.c.out_ch);
    auto channel = [&](size_t i) { return static_cast<size_t>((static_cast<int64_t>(i) / plane) % d.c.out_ch); };
    std::vector<float> want_bias(plain.size()), want_bias_res(plain.size()), want_res_bias2(plain.size());
    for (size_t i = 0; i < plain.size(); ++i) {
      want_bias[i] = plain[i] + bias[channel(i)];
      want_bias_res[i] = want_bias[i] + residual[i];
      want_res_bias2[i] = (plain[i] + residual[i]) + bias2[channel(i)];
    }
    std::vector<float> want_res(plain.size());
    for (size_t i = 0; i < plain.size(); ++i) want_res[i] = plain[i] + residual[i];
    const std::string name = cs.name;
    // With AVX-512 the ResNet-style layers run brgemm kernels, which take every add; the older
    // JIT kernels (AVX2) take the bias only, and the residual is added separately.
    const bool brgemm = cpu::dnnl_conv_impl(d.c).rfind("brgconv", 0) == 0;
    const bool resnet = brgemm && (name.rfind("3x3_", 0) == 0 || name.rfind("1x1_", 0) == 0);
    any_brgemm = any_brgemm || brgemm;
    auto check = [&](const std::vector<DnnlAdd>& adds, const std::vector<float>& want, const char* what) {
      const std::vector<float> got = d.run_if_taken(adds);
      if (got.empty()) {
        EXPECT_FALSE(resnet) << what << ": oneDNN declined a ResNet-style layer";
        return;
      }
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << what;
      ++taken;
    };
    check({{DnnlAddKind::Channel, bias.data()}}, want_bias, "conv + bias");
    check({{DnnlAddKind::Tensor, residual.data()}}, want_res, "conv + residual");
    check({{DnnlAddKind::Channel, bias.data()}, {DnnlAddKind::Tensor, residual.data()}}, want_bias_res,
          "conv + bias + residual");
    check({{DnnlAddKind::Tensor, residual.data()}, {DnnlAddKind::Channel, bias2.data()}}, want_res_bias2,
          "conv + residual + bias");
  }
  if (any_brgemm) {
    EXPECT_GE(taken, 40) << "most geometries take their adds as post-ops";
  }
  EXPECT_GT(taken, 0);
}

/// a + b as an x86 addition of a and b in this order: a NaN operand's payload, the first one's when
/// both are NaN (the compiler may swap the operands of `a + b`, which changes nothing else).
float x86_add(float a, float b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return a + b;
}

// Where the kernel adds a bias itself (oneDNN's brgemm convolutions: dnnl_conv_bias_free), it does
// so after the whole reduction, as conv + bias: the separate add's bits, with NaN and infinite
// inputs and biases and a NaN payload, followed by a residual or a second bias as post-ops.
TEST(DnnlConv, ABiasTheKernelAddsItselfKeepsTheSeparateAddsBits) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF)";
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  float payload;
  const uint32_t bits = 0x7fc12345u;
  std::memcpy(&payload, &bits, sizeof payload);
  const std::vector<Case> layers = {
      {"1x1_24_to_96", make(2, 1, 24, 96, {8, 8}, {1, 1})},
      {"depthwise_5x5", make(2, 1, 96, 96, {8, 8}, {5, 5}, 1, 2, 1, 96)},
      {"3x3_c64_b2", make(2, 2, 64, 64, {14, 14}, {3, 3}, 1, 1)},
      {"1x1_c1024_deep", make(2, 1, 1024, 64, {7, 7}, {1, 1})},
  };
  int free_count = 0;
  uint32_t seed = 300;
  for (const Case& cs : layers) {
    SCOPED_TRACE(cs.name);
    Data d(cs.c, seed += 5);
    d.x[5] = nan;  // a NaN reaching several outputs of every channel
    const std::string impl = cpu::dnnl_conv_impl(d.c);
    const bool brgemm = impl.rfind("brgconv", 0) == 0 || impl.rfind("brdgmm", 0) == 0;
    EXPECT_EQ(cpu::dnnl_conv_bias_free(d.c), brgemm) << impl;
    free_count += brgemm ? 1 : 0;
    auto bias = random_floats(static_cast<size_t>(d.c.out_ch), seed + 1, -3, 3);
    bias[1] = inf;
    bias[2] = -inf;
    bias[3] = nan;
    bias[4] = payload;
    const auto bias2 = random_floats(static_cast<size_t>(d.c.out_ch), seed + 2, -3, 3);
    const auto plain = d.run();
    auto residual = random_floats(plain.size(), seed + 3, -3, 3);
    const int64_t plane = static_cast<int64_t>(plain.size()) / (d.c.batch * d.c.out_ch);
    auto channel = [&](size_t i) { return static_cast<size_t>((static_cast<int64_t>(i) / plane) % d.c.out_ch); };
    std::vector<float> want(plain.size()), want_res(plain.size()), want_bias2(plain.size());
    for (size_t i = 0; i < plain.size(); ++i) {
      want[i] = x86_add(plain[i], bias[channel(i)]);
      want_res[i] = x86_add(want[i], residual[i]);
      want_bias2[i] = x86_add(want[i], bias2[channel(i)]);
    }
    auto check = [&](const std::vector<DnnlAdd>& adds, const std::vector<float>& w, const char* what) {
      const auto got = d.run_if_taken(adds);
      if (got.empty()) {  // a residual is a post-op of the brgconv kernels only (as in AddPostOps...)
        EXPECT_FALSE(impl.rfind("brgconv", 0) == 0) << what << ": declined";
        return;
      }
      EXPECT_EQ(std::memcmp(got.data(), w.data(), w.size() * sizeof(float)), 0) << what;
    };
    check({{DnnlAddKind::Channel, bias.data()}}, want, "conv + bias");
    check({{DnnlAddKind::Channel, bias.data()}, {DnnlAddKind::Tensor, residual.data()}}, want_res,
          "conv + bias + residual");
    check({{DnnlAddKind::Channel, bias.data()}, {DnnlAddKind::Channel, bias2.data()}}, want_bias2,
          "conv + bias + bias");
  }
  if (cpu::dnnl_conv_impl(layers[2].c).rfind("brgconv", 0) == 0) {
    EXPECT_EQ(free_count, 4);
  }
}

TEST(DnnlConv, SpecialValuesPropagate) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF)";
  Data d(make(2, 1, 16, 16, {6, 6}, {3, 3}, 1, 1), 3);
  d.x[0] = std::numeric_limits<float>::quiet_NaN();   // channel 0, corner: reaches 4 outputs per channel
  d.x[35] = std::numeric_limits<float>::infinity();  // channel 0, opposite corner
  const auto y = d.run();
  for (int64_t o = 0; o < 16; ++o) {
    EXPECT_TRUE(std::isnan(y[static_cast<size_t>(o * 36)])) << "channel " << o;
    EXPECT_TRUE(std::isinf(y[static_cast<size_t>(o * 36 + 35)]) || std::isnan(y[static_cast<size_t>(o * 36 + 35)]))
        << "channel " << o;
  }
}

// Several threads convolving at once (each with its own stream, scratch buffers and OpenMP
// team) get the single-threaded bits.
TEST(DnnlConv, ConcurrentCallersGetTheSameBits) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF)";
  Data d(make(2, 2, 32, 32, {16, 16}, {3, 3}, 1, 1), 11);
  const auto want = d.run();
  std::vector<std::vector<float>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 3; ++r) got[static_cast<size_t>(t)] = d.run();
    });
  for (auto& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(std::memcmp(g.data(), want.data(), want.size() * sizeof(float)), 0);
}

// A thread's later calls of one geometry reuse the memory objects of its first (only their
// buffers change): each call must read its own input, weights and bias and write its own output,
// bit for bit what a first call on a fresh thread gives. Covered: a source reorder (3 channels),
// blocked layouts on both sides, a bias post-op, weights packed at compile time.
TEST(DnnlConv, ARepeatedCallReadsAndWritesItsOwnBuffers) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF)";
  DnnlConv blocked = make(2, 1, 16, 32, {12, 12}, {3, 3}, 1, 1);
  int64_t src_block = 0, dst_block = 0;
  cpu::dnnl_conv_blocks(blocked, {DnnlAddKind::Channel}, &src_block, &dst_block);
  blocked.src_block = src_block;
  blocked.dst_block = dst_block;
  const std::vector<Case> geometries = {
      {"stem_c3", make(2, 1, 3, 16, {32, 32}, {3, 3}, 1, 1)},
      {"3x3_c16", make(2, 2, 16, 16, {10, 10}, {3, 3}, 1, 1)},
      {"blocked", blocked},
  };
  uint32_t seed = 300;
  for (const Case& cs : geometries) {
    for (const bool packed : {false, true}) {
      SCOPED_TRACE(std::string(cs.name) + (packed ? " packed" : ""));
      const Data a(cs.c, seed += 5), b(cs.c, seed += 5);
      const auto bias_a = random_floats(static_cast<size_t>(cs.c.out_ch), seed + 1, -3, 3);
      const auto bias_b = random_floats(static_cast<size_t>(cs.c.out_ch), seed + 2, -3, 3);
      int threads_a = 0, threads_b = 0;
      auto pack = [&](const std::vector<float>& w, int* threads) {
        std::vector<float> out;
        const bool ok = cpu::dnnl_pack_conv_weights(cs.c, w.data(), [&](size_t n) { out.resize(n); return out.data(); }, threads);
        EXPECT_EQ(ok, !out.empty());
        return out;
      };
      const std::vector<float> wa = packed ? pack(a.w, &threads_a) : a.w;
      const std::vector<float> wb = packed ? pack(b.w, &threads_b) : b.w;
      ASSERT_FALSE(wa.empty());
      auto run = [&](const Data& d, const std::vector<float>& w, int threads, const std::vector<float>& bias) {
        std::vector<float> y(static_cast<size_t>(numel(cs.c, true)), -7.0f);
        const std::vector<DnnlAdd> adds{{DnnlAddKind::Channel, bias.data()}};
        if (!cpu::dnnl_conv_f32(cs.c, d.x.data(), w.data(), y.data(), adds, threads)) {
          std::fill(y.begin(), y.end(), -7.0f);  // declined as a post-op: the plain convolution and the add
          EXPECT_TRUE(cpu::dnnl_conv_f32(cs.c, d.x.data(), w.data(), y.data(), {}, threads));
        }
        return y;
      };
      // First calls of this geometry, each on a thread of its own.
      std::vector<float> want_a, want_b;
      std::thread([&] { want_a = run(a, wa, threads_a, bias_a); }).join();
      std::thread([&] { want_b = run(b, wb, threads_b, bias_b); }).join();
      ASSERT_NE(std::memcmp(want_a.data(), want_b.data(), want_a.size() * sizeof(float)), 0);
      for (int r = 0; r < 3; ++r) {
        const auto got_a = run(a, wa, threads_a, bias_a), got_b = run(b, wb, threads_b, bias_b);
        EXPECT_EQ(std::memcmp(got_a.data(), want_a.data(), want_a.size() * sizeof(float)), 0) << "round " << r;
        EXPECT_EQ(std::memcmp(got_b.data(), want_b.data(), want_b.size() * sizeof(float)), 0) << "round " << r;
      }
    }
  }
}

// A first layer (3 input channels to 16 or 8) whose primitive reads a row-major source and
// writes channels-last data (oneDNN's direct kernels on AVX-512: nChw16c with 16 channels, nChw8c
// with 8): the layouts it asks for are those, a call in them runs no reorder, and a caller
// holding other layouts (row-major output, channels-last input: eager calls, other passes) gets
// the same bits through exact reorders, so eager and compiled results agree.
TEST(DnnlConv, AFirstLayerReadsItsRowMajorSourceInAnyCallersLayout) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF)";
  for (const int64_t co : {16, 8}) {
    SCOPED_TRACE(std::to_string(co) + " output channels");
    const Data d(make(2, 2, 3, co, {24, 20}, {3, 3}, 1, 1), 400 + static_cast<uint32_t>(co));
    int64_t src_block = -1, dst_block = -1;
    ASSERT_TRUE(cpu::dnnl_conv_blocks(d.c, {}, &src_block, &dst_block));
    const std::string impl = cpu::dnnl_conv_impl(d.c);
    // On AVX-512 (unless oneDNN is capped below it) the direct kernels write both blocks as
    // channels-last; with AVX2 a 16-channel output is nChw8c, which is not, and the plan stays.
    const bool avx512 = __builtin_cpu_supports("avx512f") && std::getenv("ONEDNN_MAX_CPU_ISA") == nullptr &&
                        std::getenv("DNNL_MAX_CPU_ISA") == nullptr;
    if (avx512) {
      EXPECT_EQ(impl.rfind("jit:", 0), 0u) << "AVX-512 has oneDNN's first-layer kernels, got " << impl;
      EXPECT_EQ(src_block, 0) << impl;
      EXPECT_EQ(dst_block, co) << impl;
    }
    const auto want = d.run();  // row-major both sides
    const int64_t hw = d.c.out[1] * d.c.out[2], in_hw = d.c.in[1] * d.c.in[2];
    // Channels-last output: element (n, o, p) at (n * hw + p) * co + o.
    DnnlConv last_out = d.c;
    last_out.dst_block = co;
    std::vector<float> y(want.size(), -7.0f);
    const int64_t reorders = cpu::dnnl_activation_reorders();
    ASSERT_TRUE(cpu::dnnl_conv_f32(last_out, d.x.data(), d.w.data(), y.data()));
    if (src_block == 0 && dst_block == co) {
      EXPECT_EQ(cpu::dnnl_activation_reorders(), reorders) << "the primitive's own layouts need no reorder";
    }
    int bad = 0;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t o = 0; o < co; ++o)
        for (int64_t p = 0; p < hw; ++p)
          if (std::memcmp(&y[static_cast<size_t>((n * hw + p) * co + o)],
                          &want[static_cast<size_t>((n * co + o) * hw + p)], sizeof(float)) != 0 &&
              bad++ < 3)
            ADD_FAILURE() << "channels-last output differs at n " << n << " channel " << o << " position " << p;
    // Channels-last input (3 channels), row-major output.
    DnnlConv last_in = d.c;
    last_in.src_block = 3;
    std::vector<float> x_last(d.x.size());
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t ch = 0; ch < 3; ++ch)
        for (int64_t p = 0; p < in_hw; ++p)
          x_last[static_cast<size_t>((n * in_hw + p) * 3 + ch)] = d.x[static_cast<size_t>((n * 3 + ch) * in_hw + p)];
    std::vector<float> y2(want.size(), -7.0f);
    ASSERT_TRUE(cpu::dnnl_conv_f32(last_in, x_last.data(), d.w.data(), y2.data()));
    EXPECT_EQ(std::memcmp(y2.data(), want.data(), want.size() * sizeof(float)), 0);
  }
}

TEST(DnnlConv, DeclinesWhatItCannotRun) {
  DnnlConv c = make(2, 1, 4, 4, {6, 6}, {3, 3}, 1, 1);
  c.pad_lo[2] = -1;  // negative padding stays with smelt's kernel
  std::vector<float> x(144), w(144), y(144);
  EXPECT_FALSE(cpu::dnnl_conv_f32(c, x.data(), w.data(), y.data()));
  const DnnlConv ok = make(2, 1, 4, 4, {6, 6}, {3, 3}, 1, 1);
  std::vector<float> r(144);
  EXPECT_FALSE(cpu::dnnl_conv_f32(ok, x.data(), w.data(), y.data(),
                                  {{DnnlAddKind::Tensor, r.data()}, {DnnlAddKind::Tensor, r.data()}}))
      << "two residuals";
  if (!cpu::dnnl_enabled()) {
    EXPECT_FALSE(cpu::dnnl_conv_f32(ok, x.data(), w.data(), y.data()));
  }
}

// The public op takes the oneDNN path for float32 and keeps the float64 reference's bound; the
// same call with 1 and 3 threads gives the same bits (tests/ops/conv_test.cpp covers the rest).
TEST(DnnlConv, PublicConvUsesItAndMatchesItself) {
  Array x = test::random_array({2, 32, 20, 20}, float32, -2, 2, 5);
  Array w = test::random_array({48, 32, 3, 3}, float32, -1, 1, 6);
  const int saved = cpu_threads();
  set_cpu_threads(1);
  Array one = conv2d(x, w, {1, 1}, {1, 1});
  one.eval();
  set_cpu_threads(3);
  Array three = conv2d(x, w, {1, 1}, {1, 1});
  three.eval();
  set_cpu_threads(saved);
  EXPECT_TRUE(test::bit_equal(one, three));
  Array ref = conv2d(astype(x, float64), astype(w, float64), {1, 1}, {1, 1});
  Array mag = conv2d(abs(astype(x, float64)), abs(astype(w, float64)), {1, 1}, {1, 1});
  const double u = std::ldexp(1.0, -24), K = 32 * 9, gamma = K * u / (1 - K * u);
  const auto got = test::as_doubles(one), want = test::as_doubles(ref), m = test::as_doubles(mag);
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - want[i]) > gamma * m[i] && bad++ < 3) ADD_FAILURE() << "element " << i;
}

// A 1x1 convolution of a 1x1 image (squeeze-excitation layers) is a matrix-vector product per
// image: oneDNN declines it (its per-call set-up cost several times the product) and smelt's
// dot products run it, with the float32 rounding bound, the same bits at any thread count and
// compiled as eager (the compile passes neither pack its weight nor block its layouts).
// Its dot products give the same bits on every instruction set the CPU has (a fixed order of
// lanes and adds, no fused multiply-adds), for channel counts around the 32 lanes and a tail,
// NaN and infinities included; each within the float32 rounding bound of a dot product.
TEST(DnnlConv, TheMatrixVectorDotProductsAreTheSameOnEveryIsa) {
  for (int64_t c : {1, 7, 31, 32, 33, 100, 576}) {
    SCOPED_TRACE(c);
    const int64_t o = 13;
    auto x = random_floats(static_cast<size_t>(c), 40 + static_cast<uint32_t>(c), -2, 2);
    auto w = random_floats(static_cast<size_t>(o * c), 41 + static_cast<uint32_t>(c));
    w[static_cast<size_t>(c)] = std::numeric_limits<float>::quiet_NaN();        // row 1
    w[static_cast<size_t>(2 * c)] = std::numeric_limits<float>::infinity();     // row 2
    std::vector<float> want(static_cast<size_t>(o));
    cpu::dot_rows_for(cpu::CpuIsa::Baseline)(w.data(), x.data(), want.data(), c, 0, o);
    EXPECT_TRUE(std::isnan(want[1]));
    EXPECT_TRUE(std::isinf(want[2]));
    for (int64_t r = 3; r < o; ++r) {
      long double exact = 0, mag = 0;
      for (int64_t i = 0; i < c; ++i) {
        const long double p = static_cast<long double>(w[static_cast<size_t>(r * c + i)]) * x[static_cast<size_t>(i)];
        exact += p;
        mag += std::fabs(p);
      }
      const double u = std::ldexp(1.0, -24), gamma = c * u / (1 - c * u);
      EXPECT_LE(std::fabs(static_cast<double>(want[static_cast<size_t>(r)] - exact)), gamma * static_cast<double>(mag))
          << "row " << r;
    }
    for (cpu::CpuIsa isa : {cpu::CpuIsa::Avx2, cpu::CpuIsa::Avx512}) {
      std::vector<float> got(static_cast<size_t>(o), -1.0f);
      cpu::dot_rows_for(isa)(w.data(), x.data(), got.data(), c, 0, o);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << cpu::cpu_isa_name(isa);
      // A range of rows is those rows alone.
      std::vector<float> part(static_cast<size_t>(o), -1.0f);
      cpu::dot_rows_for(isa)(w.data(), x.data(), part.data(), c, 5, 9);
      EXPECT_EQ(std::memcmp(part.data() + 5, want.data() + 5, 4 * sizeof(float)), 0) << cpu::cpu_isa_name(isa);
      EXPECT_EQ(part[4], -1.0f);
      EXPECT_EQ(part[9], -1.0f);
    }
  }
}

TEST(DnnlConv, AOneByOneImageIsLeftToTheMatrixVectorProduct) {
  for (const DnnlConv& c : {make(2, 1, 576, 144, {1, 1}, {1, 1}), make(1, 5, 64, 240, {1}, {1}),
                            make(3, 2, 40, 24, {1, 1, 1}, {1, 1, 1})}) {
    std::vector<float> x(static_cast<size_t>(numel(c, false))), w(static_cast<size_t>(c.out_ch * c.in_ch)),
        y(static_cast<size_t>(numel(c, true)));
    EXPECT_FALSE(cpu::dnnl_conv_f32(c, x.data(), w.data(), y.data())) << c.in_ch << " -> " << c.out_ch;
    EXPECT_EQ(cpu::dnnl_conv_impl(c), "");
    int64_t src_block = -1, dst_block = -1;
    EXPECT_FALSE(cpu::dnnl_conv_blocks(c, {}, &src_block, &dst_block));
    EXPECT_EQ(src_block, 0);
    EXPECT_EQ(dst_block, 0);
  }
  if (cpu::dnnl_enabled()) {
    // A 2x2 image, and a 1x1 image padded to 3x3, are still oneDNN's.
    EXPECT_NE(cpu::dnnl_conv_impl(make(2, 1, 64, 32, {2, 2}, {1, 1})), "");
    EXPECT_NE(cpu::dnnl_conv_impl(make(2, 1, 64, 32, {1, 1}, {1, 1}, 1, 1)), "");
  }
  auto block = [](const std::vector<Array>& in) {
    Shape per_channel{1, in[1].shape()[0], 1, 1};
    return std::vector<Array>{maximum(add(conv2d(in[0], in[1]), reshape(in[2], per_channel)), 0.0f)};
  };
  auto compiled = compile(block);
  const int saved = cpu_threads();
  for (int64_t n : {1, 3}) {
    Array x = test::random_array({n, 576, 1, 1}, float32, -2, 2, 11);
    Array w = test::random_array({144, 576, 1, 1}, float32, -1, 1, 12);
    Array b = test::random_array({144}, float32, -1, 1, 13);
    set_cpu_threads(1);
    Array one = conv2d(x, w);
    std::vector<Array> want = block({x, w, b});
    eval({one, want[0]});
    for (int threads : {2, 3}) {
      set_cpu_threads(threads);
      EXPECT_TRUE(test::bit_equal(conv2d(x, w), one)) << n << " images, " << threads << " threads";
      EXPECT_TRUE(test::bit_equal(compiled({x, w, b})[0], want[0])) << n << " images, " << threads << " threads, compiled";
    }
    Array ref = conv2d(astype(x, float64), astype(w, float64));
    Array mag = conv2d(abs(astype(x, float64)), abs(astype(w, float64)));
    const double u = std::ldexp(1.0, -24), K = 576, gamma = K * u / (1 - K * u);
    const auto got = test::as_doubles(one), exact = test::as_doubles(ref), m = test::as_doubles(mag);
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (std::fabs(got[i] - exact[i]) > gamma * m[i] && bad++ < 3) ADD_FAILURE() << "element " << i;
  }
  set_cpu_threads(saved);
}

}  // namespace
}  // namespace smelt
