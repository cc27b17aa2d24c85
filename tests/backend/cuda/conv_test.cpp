// CUDA Conv, ConvTranspose and Pool against the CPU backend, on both convolution paths (cuDNN and
// the direct kernel, by switching cuDNN off): float dtypes within a bound relative to the sum of
// |w|*|x| over each window, integers and pooling bit for bit, groups, dilations, strides,
// asymmetric and output padding, 1-D/2-D/3-D, strided operands, NaN and inf, empty arrays.
#include <cmath>
#include <string>
#include <vector>

#include "tests/backend/cuda/cuda_test_utils.h"

#if SMELT_HAS_CUDA
#include "src/backend/cpu/dnnl.h"
#include "src/backend/cuda/conv_sources.h"
#include "src/backend/cuda/cudnn.h"
#endif

namespace smelt {
namespace {

using namespace smelt::test;

#if SMELT_HAS_CUDA

/// Turns cuDNN on or off for one scope (the direct kernel runs whenever it is off).
class CudnnSwitch {
 public:
  explicit CudnnSwitch(bool on) : saved_(cuda::cudnn_enabled()) { cuda::set_cudnn_enabled(on); }
  ~CudnnSwitch() { cuda::set_cudnn_enabled(saved_); }
  CudnnSwitch(const CudnnSwitch&) = delete;
  CudnnSwitch& operator=(const CudnnSwitch&) = delete;

 private:
  bool saved_;
};

std::string path_name(bool cudnn_on) { return cudnn_on ? "cuDNN allowed" : "direct kernel"; }

/// Relative bound of a float result: float32 1e-5, float16 2e-3, bfloat16 1e-2 (as matmul's).
double rel_for(Dtype dt) { return dt == float16 ? 2e-3 : dt == bfloat16 ? 1e-2 : dt == float32 ? 1e-5 : 1e-12; }

/// |gpu - cpu| <= rel * bound per element, bound = the same convolution of |x| and |w| in
/// float64 (the sum of |w|*|x| over the window); NaN must match NaN and an infinity the same
/// infinity. A tiny absolute term covers results that are single products near zero.
::testing::AssertionResult on_gpu_within_window_bound(const Array& gpu_result, const Array& cpu_result,
                                                      const Array& bound, double rel) {
  if (gpu_result.device() != gpu()) return ::testing::AssertionFailure() << "the result is not on the GPU";
  return within_window_bound(gpu_result, cpu_result, bound, rel);
}

struct ConvCase {
  Shape x, w;
  ConvOptions o;
};

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> c = {
      {{2, 4, 9}, {6, 4, 3}, {}},                                         // 1-D, batch 2
      {{1, 4, 11}, {4, 2, 3}, {{2}, {1}, {2}, {2}, 2}},                   // groups, stride, dilation, asymmetric
      {{1, 3, 8, 8}, {4, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, {1, 1}, 1}},  // symmetric: straight to cuDNN
      {{2, 3, 7, 6}, {5, 3, 3, 2}, {{1, 2}, {1, 0}, {2, 1}, {1, 1}, 1}},  // asymmetric padding
      {{1, 6, 8, 7}, {6, 1, 3, 3}, {{2, 1}, {1, 1}, {1, 1}, {2, 1}, 6}},  // depthwise
      {{2, 4, 4, 5, 3}, {4, 2, 2, 3, 2}, {{1, 2, 1}, {1, 0, 1}, {0, 2, 1}, {1, 1, 2}, 2}},  // 3-D, groups
      {{1, 2, 3, 3}, {3, 2, 3, 3}, {{1, 1}, {3, 3}, {3, 3}, {1, 1}, 1}},  // windows of only padding
      {{4, 16, 20, 18}, {32, 16, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, {1, 1}, 1}},  // big enough for cuDNN's own algorithms
      {{2, 8, 9, 10}, {8, 2, 3, 3}, {{2, 2}, {0, 1}, {1, 0}, {1, 1}, 4}},
      // Channels-last in float16/bfloat16 (channels_last.h): a strided 1 x 1 (a ResNet
      // downsample), a strided 3 x 3 on odd sizes, a dilated one, a 7 x 7 on 3 channels.
      {{2, 64, 14, 14}, {128, 64, 1, 1}, {{2, 2}, {0, 0}, {0, 0}, {1, 1}, 1}},
      {{2, 24, 15, 13}, {16, 24, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, {1, 1}, 1}},
      {{1, 8, 12, 11}, {8, 8, 3, 3}, {{1, 1}, {2, 2}, {2, 2}, {2, 2}, 1}},
      {{2, 3, 20, 22}, {16, 3, 7, 7}, {{2, 2}, {3, 3}, {3, 3}, {1, 1}, 1}},  // an image stem
  };
  return c;
}

Array abs64(const Array& a) { return abs(astype(a, float64)); }

struct TransposeCase {
  Shape x, w;
  ConvTransposeOptions o;
};

const std::vector<TransposeCase>& transpose_cases() {
  static const std::vector<TransposeCase> c = {
      {{2, 4, 5}, {4, 3, 3}, {}},
      {{1, 4, 6}, {4, 2, 3}, {{2}, {1}, {2}, {2}, {1}, 2}},                     // groups, asymmetric
      {{2, 3, 5, 5}, {3, 4, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1}},  // the usual upsampling
      {{2, 3, 4, 3}, {3, 2, 3, 2}, {{2, 3}, {1, 0}, {0, 2}, {1, 2}, {1, 4}, 1}},  // output_padding past the stride
      {{1, 4, 3, 4}, {4, 1, 2, 3}, {{2, 1}, {0, 1}, {1, 0}, {1, 1}, {0, 0}, 4}},  // depthwise
      {{1, 4, 2, 3, 2}, {4, 2, 2, 2, 3}, {{2, 1, 2}, {0, 1, 1}, {1, 0, 2}, {1, 2, 1}, {1, 0, 2}, 2}},  // 3-D
      {{2, 16, 9, 8}, {16, 8, 4, 4}, {{2, 2}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, 1}},
  };
  return c;
}

#endif

// ---- Conv ----------------------------------------------------------------------------------------

TEST(CudaConv, FloatsMatchTheCpuOnBothPaths) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  uint32_t seed = 10;
  for (bool on : {true, false}) {
    CudnnSwitch sw(on);
    for (Dtype dt : {float32, float64, float16, bfloat16})
      for (const auto& c : conv_cases()) {
        SCOPED_TRACE(path_name(on) + " " + dtype_name(dt) + " x " + shape_to_string(c.x) + " w " +
                     shape_to_string(c.w));
        Array x = random_array(c.x, dt, -1, 1, ++seed), w = random_array(c.w, dt, -1, 1, ++seed);
        Array g = conv(on_gpu(x), on_gpu(w), c.o);
        EXPECT_TRUE(on_gpu_within_window_bound(g, conv(x, w, c.o), conv(abs64(x), abs64(w), c.o), rel_for(dt)));
      }
  }
#endif
}

TEST(CudaConv, EachPathRunsWhereItShould) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  Array x = random_array({2, 8, 12, 12}, float32, -1, 1, 1), w = random_array({16, 8, 3, 3}, float32, -1, 1, 2);
  ConvOptions o{{1, 1}, {1, 1}, {1, 1}, {1, 1}, 1};
  {
    CudnnSwitch sw(false);
    const auto before = cuda::conv_path_counts();
    conv(on_gpu(x), on_gpu(w), o).eval();
    conv_transpose(on_gpu(x), on_gpu(random_array({8, 4, 3, 3}, float32, -1, 1, 3)), {}).eval();
    const auto after = cuda::conv_path_counts();
    EXPECT_EQ(after.direct - before.direct, 2);
    EXPECT_EQ(after.cudnn, before.cudnn);
  }
  {
    // Integers never go to cuDNN.
    CudnnSwitch sw(true);
    const auto before = cuda::conv_path_counts();
    conv(on_gpu(astype(x, int32)), on_gpu(astype(w, int32)), o).eval();
    EXPECT_EQ(cuda::conv_path_counts().direct - before.direct, 1);
  }
  std::string why;
  if (!cuda::cudnn(&why)) GTEST_SKIP() << "cuDNN is not installed here, only the direct path was tested: " << why;
  CudnnSwitch sw(true);
  const auto before = cuda::conv_path_counts();
  conv(on_gpu(x), on_gpu(w), o).eval();
  conv_transpose(on_gpu(x), on_gpu(random_array({8, 4, 4, 4}, float32, -1, 1, 4)),
                 {{2, 2}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, 1})
      .eval();
  EXPECT_EQ(cuda::conv_path_counts().cudnn - before.cudnn, 2)
      << "cuDNN loaded but declined a plain float32 convolution (handle creation or algorithm choice failed)";
  // A float16 convolution that runs channels-last (channels_last.h): cuDNN takes its NHWC problem.
  const auto before_half = cuda::conv_path_counts();
  conv(on_gpu(astype(x, float16)), on_gpu(astype(w, float16)), o).eval();
  EXPECT_EQ(cuda::conv_path_counts().cudnn - before_half.cudnn, 1) << "cuDNN declined an NHWC float16 convolution";
#endif
}

TEST(CudaConv, ResultsAreDeterministic) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  Array x = on_gpu(random_array({4, 16, 20, 18}, float32, -1, 1, 5));
  Array w = on_gpu(random_array({32, 16, 3, 3}, float32, -1, 1, 6));
  ConvOptions o{{1, 1}, {1, 2}, {2, 1}, {1, 1}, 1};
  Array a = conv(x, w, o), b = conv(x, w, o);
  EXPECT_TRUE(bit_equal(on_cpu(a), on_cpu(b)));
  Array wt = on_gpu(random_array({16, 8, 3, 3}, float32, -1, 1, 7));
  ConvTransposeOptions t{{2, 2}, {1, 0}, {0, 1}, {1, 1}, {1, 1}, 1};
  EXPECT_TRUE(bit_equal(on_cpu(conv_transpose(x, wt, t)), on_cpu(conv_transpose(x, wt, t))));
#endif
}

TEST(CudaConv, IntegersWrapExactlyAsOnTheCpu) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  uint32_t seed = 200;
  for (Dtype dt : {int8, int16, int32, int64, uint8, uint16, uint32, uint64})
    for (const auto& c : conv_cases()) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " x " + shape_to_string(c.x) + " w " + shape_to_string(c.w));
      // Products and sums overflow the narrow types: the wraparound must equal the CPU's.
      Array x = random_array(c.x, dt, -120, 120, ++seed), w = random_array(c.w, dt, -120, 120, ++seed);
      EXPECT_TRUE(same_as_cpu(conv(on_gpu(x), on_gpu(w), c.o), conv(x, w, c.o)));
    }
#endif
}

TEST(CudaConv, DirectKernelIsBitExactWithOneChannelPerGroup) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  // With one input channel per group the CPU's own kernel sums in the direct kernel's order:
  // equal bits, NaN and infinities included. A CPU build with oneDNN runs float32 convolutions
  // through it (src/backend/cpu/dnnl.h), in its own order: float32 is then held to the window
  // bound of the other tests, on finite inputs.
  CudnnSwitch sw(false);
  const bool own_f32 = !cpu::dnnl_enabled();
  uint32_t seed = 300;
  for (Dtype dt : {float32, float64, float16, bfloat16})
    for (const auto& c : conv_cases()) {
      if (c.w[1] != 1) continue;
      SCOPED_TRACE(std::string(dtype_name(dt)) + " x " + shape_to_string(c.x));
      if (dt == float32 && !own_f32) {
        Array x = random_array(c.x, dt, -3, 3, ++seed), w = random_array(c.w, dt, -3, 3, ++seed);
        EXPECT_TRUE(on_gpu_within_window_bound(conv(on_gpu(x), on_gpu(w), c.o), conv(x, w, c.o),
                                               conv(abs64(x), abs64(w), c.o), rel_for(dt)));
        continue;
      }
      Array x = special_array(c.x, dt, -3, 3, ++seed), w = special_array(c.w, dt, -3, 3, ++seed);
      EXPECT_TRUE(same_as_cpu(conv(on_gpu(x), on_gpu(w), c.o), conv(x, w, c.o)));
    }
  // A single input channel (groups 1), in float64 (and float32 with the CPU's own kernel).
  ConvOptions o{{2, 1}, {1, 0}, {2, 1}, {1, 2}, 1};
  for (Dtype dt : {float32, float64}) {
    if (dt == float32 && !own_f32) continue;
    Array x = special_array({2, 1, 9, 8}, dt, -3, 3, 1), w = special_array({3, 1, 3, 2}, dt, -3, 3, 2);
    EXPECT_TRUE(same_as_cpu(conv(on_gpu(x), on_gpu(w), o), conv(x, w, o))) << dtype_name(dt);
  }
#endif
}

TEST(CudaConv, NanAndInfinityPropagateOnBothPaths) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  // Specials in the input (finite weights): a window with a NaN, or with infinities of both
  // signs, gives NaN; one with infinities of one sign gives that infinity, whatever the order.
  for (bool on : {true, false}) {
    CudnnSwitch sw(on);
    for (Dtype dt : {float32, float64, float16}) {
      SCOPED_TRACE(path_name(on) + " " + dtype_name(dt));
      Array x = special_array({2, 4, 10, 9}, dt, -1, 1, 41), w = random_array({6, 4, 2, 2}, dt, 0.25, 1, 42);
      ConvOptions o{{1, 1}, {1, 0}, {0, 1}, {1, 1}, 1};
      Array c = conv(x, w, o);
      EXPECT_TRUE(on_gpu_within_window_bound(conv(on_gpu(x), on_gpu(w), o), c, conv(abs64(x), abs64(w), o), rel_for(dt)));
    }
  }
#endif
}

TEST(CudaConv, StridedAndBroadcastOperandsOnBothPaths) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  for (bool on : {true, false}) {
    CudnnSwitch sw(on);
    for (Dtype dt : {float32, int32}) {
      SCOPED_TRACE(path_name(on) + " " + dtype_name(dt));
      const double lo = dt == int32 ? -50 : -1, hi = dt == int32 ? 50 : 1;
      Array xb = random_array({2, 9, 3, 5}, dt, lo, hi, 51), wb = random_array({4, 6, 2, 3}, dt, lo, hi, 52);
      // Transposed on the host and on the GPU alike: the GPU kernels read the strided views.
      Array x = transpose(xb, {0, 2, 3, 1}), xg = transpose(on_gpu(xb), {0, 2, 3, 1});  // [2, 3, 5, 9]
      Array w = slice(wb, {0, 5, 0, 0}, {4, -7, 2, 3}, {1, -2, 1, 1});                   // channels reversed
      Array wg = slice(on_gpu(wb), {0, 5, 0, 0}, {4, -7, 2, 3}, {1, -2, 1, 1});
      ConvOptions o{{1, 2}, {1, 0}, {0, 1}, {2, 1}, 1};
      Array c = conv(x, w, o), g = conv(xg, wg, o);
      if (dt == int32)
        EXPECT_TRUE(same_as_cpu(g, c));
      else
        EXPECT_TRUE(on_gpu_within_window_bound(g, c, conv(abs64(x), abs64(w), o), rel_for(dt)));
      Array wbc = broadcast_to(random_array({1, 3, 2, 3}, dt, lo, hi, 53), {4, 3, 2, 3});
      Array wbcg = broadcast_to(on_gpu(random_array({1, 3, 2, 3}, dt, lo, hi, 53)), {4, 3, 2, 3});
      Array c2 = conv(x, wbc, o), g2 = conv(xg, wbcg, o);
      if (dt == int32)
        EXPECT_TRUE(same_as_cpu(g2, c2));
      else
        EXPECT_TRUE(on_gpu_within_window_bound(g2, c2, conv(abs64(x), abs64(wbc), o), rel_for(dt)));
    }
  }
#endif
}

TEST(CudaConv, EmptyArraysAndZeroChannels) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  for (bool on : {true, false}) {
    CudnnSwitch sw(on);
    for (Dtype dt : {float32, int32}) {
      SCOPED_TRACE(path_name(on) + " " + dtype_name(dt));
      ConvOptions pad{{1, 1}, {1, 1}, {1, 1}, {1, 1}, 1};
      // Empty batch.
      Array x0 = zeros({0, 3, 5, 5}, dt), w = random_array({4, 3, 3, 3}, dt, -2, 2, 61);
      EXPECT_TRUE(same_as_cpu(conv(on_gpu(x0), on_gpu(w), pad), conv(x0, w, pad)));
      // No input channels: every sum is empty (zeros).
      Array xc = zeros({2, 0, 5, 5}, dt), wc = zeros({4, 0, 3, 3}, dt);
      EXPECT_TRUE(same_as_cpu(conv(on_gpu(xc), on_gpu(wc), pad), conv(xc, wc, pad)));
      // No output channels.
      Array x = random_array({2, 3, 5, 5}, dt, -2, 2, 62), wo = zeros({0, 3, 3, 3}, dt);
      EXPECT_TRUE(same_as_cpu(conv(on_gpu(x), on_gpu(wo), pad), conv(x, wo, pad)));
      // An empty spatial axis with enough padding: windows of only padding.
      Array xs = zeros({2, 3, 0, 4}, dt);
      ConvOptions pad2{{1, 1}, {2, 1}, {2, 1}, {1, 1}, 1};
      EXPECT_TRUE(same_as_cpu(conv(on_gpu(xs), on_gpu(w), pad2), conv(xs, w, pad2)));
    }
  }
#endif
}

TEST(CudaConv, HostOperandsAndErrorsAsOnTheCpu) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  Array x = random_array({1, 4, 6, 6}, float32, -1, 1, 71), w = random_array({2, 4, 3, 3}, float32, -1, 1, 72);
  // A host weight moves to the GPU by itself.
  Array g = conv(on_gpu(x), w);
  EXPECT_TRUE(on_gpu_within_window_bound(g, conv(x, w), conv(abs64(x), abs64(w)), rel_for(float32)));
  // Argument errors do not depend on the device.
  EXPECT_THROW_MSG(conv(on_gpu(x), on_gpu(random_array({2, 3, 3, 3}, float32))), ShapeError,
                   "conv: weight float32[2,3,3,3] expects 3 x 1 groups = 3 input channels, input float32[1,4,6,6] "
                   "has 4");
  EXPECT_THROW_MSG(conv(on_gpu(astype(x, bool_)), on_gpu(w)), DtypeError, "conv: bool is not supported");
  EXPECT_THROW_MSG(conv_transpose(on_gpu(x), on_gpu(w)), ShapeError, "conv_transpose: weight float32[2,4,3,3]");
  EXPECT_THROW_MSG(max_pool(on_gpu(astype(x, bool_)), {{2, 2}}), DtypeError, "max_pool: bool is not supported");
  EXPECT_THROW_MSG(avg_pool(on_gpu(x), {{8, 8}}), ShapeError, "avg_pool: output size");
#endif
}

// ---- ConvTranspose -------------------------------------------------------------------------------

TEST(CudaConvTranspose, FloatsMatchTheCpuOnBothPaths) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  uint32_t seed = 400;
  for (bool on : {true, false}) {
    CudnnSwitch sw(on);
    for (Dtype dt : {float32, float64, float16, bfloat16})
      for (const auto& c : transpose_cases()) {
        SCOPED_TRACE(path_name(on) + " " + dtype_name(dt) + " x " + shape_to_string(c.x) + " w " +
                     shape_to_string(c.w));
        Array x = random_array(c.x, dt, -1, 1, ++seed), w = random_array(c.w, dt, -1, 1, ++seed);
        Array g = conv_transpose(on_gpu(x), on_gpu(w), c.o);
        EXPECT_TRUE(on_gpu_within_window_bound(g, conv_transpose(x, w, c.o), conv_transpose(abs64(x), abs64(w), c.o),
                                        rel_for(dt)));
      }
  }
#endif
}

TEST(CudaConvTranspose, IntegersWrapExactlyAsOnTheCpu) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  uint32_t seed = 500;
  for (Dtype dt : {int8, int16, int32, int64, uint8, uint16, uint32, uint64})
    for (const auto& c : transpose_cases()) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " x " + shape_to_string(c.x) + " w " + shape_to_string(c.w));
      Array x = random_array(c.x, dt, -120, 120, ++seed), w = random_array(c.w, dt, -120, 120, ++seed);
      EXPECT_TRUE(same_as_cpu(conv_transpose(on_gpu(x), on_gpu(w), c.o), conv_transpose(x, w, c.o)));
    }
#endif
}

TEST(CudaConvTranspose, DirectKernelIsBitExactWithOneChannelPerGroup) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  CudnnSwitch sw(false);
  uint32_t seed = 600;
  for (Dtype dt : {float32, float64, float16, bfloat16})
    for (const auto& c : transpose_cases()) {
      if (c.x[1] / std::max<int64_t>(1, c.o.groups) != 1) continue;
      SCOPED_TRACE(std::string(dtype_name(dt)) + " x " + shape_to_string(c.x));
      Array x = special_array(c.x, dt, -3, 3, ++seed), w = special_array(c.w, dt, -3, 3, ++seed);
      EXPECT_TRUE(same_as_cpu(conv_transpose(on_gpu(x), on_gpu(w), c.o), conv_transpose(x, w, c.o)));
    }
#endif
}

TEST(CudaConvTranspose, StridedOperandsAndEmptyArrays) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  for (bool on : {true, false}) {
    CudnnSwitch sw(on);
    SCOPED_TRACE(path_name(on));
    Array xb = random_array({2, 5, 4, 3}, float32, -1, 1, 81), wb = random_array({3, 2, 3, 3}, float32, -1, 1, 82);
    Array x = transpose(xb, {0, 3, 2, 1}), xg = transpose(on_gpu(xb), {0, 3, 2, 1});  // [2, 3, 4, 5]
    Array w = slice(wb, {2, 0, 0, 0}, {-4, 2, 3, 3}, {-1, 1, 1, 1});                   // [3, 2, 3, 3] reversed
    Array wg = slice(on_gpu(wb), {2, 0, 0, 0}, {-4, 2, 3, 3}, {-1, 1, 1, 1});
    ConvTransposeOptions o{{2, 1}, {1, 0}, {0, 2}, {1, 2}, {1, 0}, 1};
    EXPECT_TRUE(on_gpu_within_window_bound(conv_transpose(xg, wg, o), conv_transpose(x, w, o),
                                    conv_transpose(abs64(x), abs64(w), o), rel_for(float32)));
    // Empty batch, no input channels (zeros), no output channels.
    Array x0 = zeros({0, 3, 4, 5}, float32);
    EXPECT_TRUE(same_as_cpu(conv_transpose(on_gpu(x0), on_gpu(w), o), conv_transpose(x0, w, o)));
    Array xc = zeros({2, 0, 4, 5}, float32), wc = zeros({0, 2, 3, 3}, float32);
    EXPECT_TRUE(same_as_cpu(conv_transpose(on_gpu(xc), on_gpu(wc), o), conv_transpose(xc, wc, o)));
    Array wo = zeros({3, 0, 3, 3}, float32);
    EXPECT_TRUE(same_as_cpu(conv_transpose(on_gpu(x), on_gpu(wo), o), conv_transpose(x, wo, o)));
  }
#endif
}

// ---- Pool ----------------------------------------------------------------------------------------

#if SMELT_HAS_CUDA
struct PoolCase {
  Shape x;
  PoolOptions o;
};

const std::vector<PoolCase>& pool_cases() {
  static const std::vector<PoolCase> c = {
      {{2, 3, 10}, {{3}, {2}, {1}, {0}, {1}, false, false}},
      {{2, 3, 10}, {{3}, {2}, {1}, {2}, {1}, true, false}},                     // ceil_mode overhang
      {{1, 2, 7, 8}, {{3, 2}, {2, 3}, {1, 0}, {0, 1}, {1, 2}, true, false}},    // asymmetric, dilation
      {{2, 3, 9, 11}, {{3, 3}, {2, 2}, {1, 1}, {2, 2}, {2, 1}, true, false}},
      {{2, 2, 4, 5, 3}, {{2, 3, 2}, {1, 2, 2}, {1, 1, 0}, {0, 1, 1}, {2, 1, 1}, true, false}},  // 3-D
      {{1, 1, 3, 3}, {{2, 2}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, false}},   // a window of only padding
      {{4, 8, 33, 35}, {{2, 2}, {2, 2}, {}, {}, {}, false, false}},             // many blocks
  };
  return c;
}

Array run_pool(const Array& x, const PoolOptions& o, PoolKind kind) {
  return kind == PoolKind::Max ? max_pool(x, o) : avg_pool(x, o);
}
#endif

TEST(CudaPool, EveryDtypeAndModeIsBitExact) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  uint32_t seed = 700;
  for (Dtype dt : {int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32, float64})
    for (const auto& c : pool_cases())
      for (int mode = 0; mode < 3; ++mode) {  // max, avg, avg counting the padding
        const PoolKind kind = mode == 0 ? PoolKind::Max : PoolKind::Avg;
        PoolOptions o = c.o;
        o.count_include_pad = mode == 2;
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_to_string(c.x) + " mode " + std::to_string(mode));
        // NaN, ±inf and ±0 among the floats; integers large enough that sums leave int8's range.
        Array x = special_array(c.x, dt, -120, 120, ++seed);
        EXPECT_TRUE(same_as_cpu(run_pool(on_gpu(x), o, kind), run_pool(x, o, kind)));
      }
#endif
}

TEST(CudaPool, StridedInputsAndEmptyArrays) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  for (Dtype dt : {float32, float16, int32}) {
    SCOPED_TRACE(dtype_name(dt));
    PoolOptions o{{3, 2}, {2, 1}, {1, 1}, {1, 0}, {1, 1}, true, false};
    Array xb = special_array({5, 2, 6, 3}, dt, -50, 50, 91);
    for (PoolKind kind : {PoolKind::Max, PoolKind::Avg}) {
      EXPECT_TRUE(same_as_cpu(run_pool(transpose(on_gpu(xb), {1, 3, 0, 2}), o, kind),
                              run_pool(transpose(xb, {1, 3, 0, 2}), o, kind)));
      auto sl = [](const Array& a) { return slice(a, {0, 0, 5, 0}, {2, 3, -7, 3}, {1, 1, -1, 1}); };  // rows reversed
      EXPECT_TRUE(same_as_cpu(run_pool(sl(on_gpu(xb)), o, kind), run_pool(sl(xb), o, kind)));
    }
    // Empty batch; an empty spatial axis whose windows are only padding (-inf / lowest, NaN / 0).
    Array x0 = zeros({0, 2, 5, 5}, dt);
    EXPECT_TRUE(same_as_cpu(max_pool(on_gpu(x0), o), max_pool(x0, o)));
    Array xs = zeros({2, 2, 0}, dt);
    for (bool include_pad : {false, true}) {
      PoolOptions p{{2}, {1}, {1}, {1}, {}, false, include_pad};
      EXPECT_TRUE(same_as_cpu(max_pool(on_gpu(xs), p), max_pool(xs, p)));
      EXPECT_TRUE(same_as_cpu(avg_pool(on_gpu(xs), p), avg_pool(xs, p)));
    }
  }
#endif
}

}  // namespace
}  // namespace smelt
