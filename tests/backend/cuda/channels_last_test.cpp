// Channels-last convolutions on the GPU: which ones run so (the rules), and compiled chains of them
// that keep activations NHWC (conv_prepack and conv_layout on a GPU) against the eager path bit
// for bit, with cuDNN and with the direct kernel, NaN and infinities included. (The eager
// channels-last convolutions against the CPU: conv_test.cpp.)
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "smelt/compile.h"
#include "tests/backend/cuda/cuda_test_utils.h"

#if SMELT_HAS_CUDA
#include "compile/tape_helpers.h"
#include "src/backend/cuda/channels_last.h"
#include "src/backend/cuda/conv_sources.h"
#include "src/backend/cuda/cudnn.h"
#endif

namespace smelt {
namespace {

using namespace smelt::test;

#if SMELT_HAS_CUDA

ConvParams conv_params(int64_t pad_lo, int64_t pad_hi, int64_t groups = 1) {
  return ConvParams{{1, 1}, {pad_lo, pad_lo}, {pad_hi, pad_hi}, {1, 1}, groups};
}

TEST(ChannelsLastRules, HalfTwoDimensionalConvolutionsWithWideChannels) {
  const ConvParams p = conv_params(1, 1);
  EXPECT_TRUE(cuda::conv_runs_channels_last(float16, {2, 64, 8, 8}, {128, 64, 3, 3}, p));
  EXPECT_TRUE(cuda::conv_runs_channels_last(bfloat16, {2, 8, 8, 8}, {8, 8, 1, 1}, p));
  EXPECT_FALSE(cuda::conv_runs_channels_last(float32, {2, 64, 8, 8}, {128, 64, 3, 3}, p)) << "float32 stays NCHW";
  EXPECT_TRUE(cuda::conv_runs_channels_last(float16, {2, 3, 8, 8}, {64, 3, 7, 7}, p)) << "an RGB input";
  EXPECT_FALSE(cuda::conv_runs_channels_last(float16, {2, 12, 8, 8}, {64, 12, 3, 3}, p)) << "12 inputs";
  EXPECT_FALSE(cuda::conv_runs_channels_last(float16, {2, 64, 8, 8}, {12, 64, 3, 3}, p)) << "12 outputs";
  EXPECT_FALSE(cuda::conv_runs_channels_last(float16, {2, 64, 8, 8}, {64, 32, 3, 3}, conv_params(1, 1, 2)));
  EXPECT_FALSE(cuda::conv_runs_channels_last(float16, {2, 64, 8, 8}, {64, 64, 3, 3}, conv_params(1, 0)))
      << "asymmetric padding";
  EXPECT_FALSE(cuda::conv_runs_channels_last(float16, {2, 64, 8}, {64, 64, 3}, ConvParams{{1}, {1}, {1}, {1}, 1}));
  ConvParams with_add = p;
  with_add.adds = {ConvAdd::Channel};
  EXPECT_FALSE(cuda::conv_runs_channels_last(float16, {2, 64, 8, 8}, {64, 64, 3, 3}, with_add));

  PoolParams max{PoolKind::Max, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false};
  EXPECT_TRUE(cuda::pool_runs_channels_last(float16, {32, 64, 112, 112}, max));
  EXPECT_TRUE(cuda::pool_runs_channels_last(float32, {1, 8, 5, 5}, max));
  PoolParams avg = max;
  avg.kind = PoolKind::Avg;
  EXPECT_FALSE(cuda::pool_runs_channels_last(float16, {1, 8, 5, 5}, avg));
  PoolParams dilated = max;
  dilated.dilations = {2, 1};
  EXPECT_FALSE(cuda::pool_runs_channels_last(float16, {1, 8, 5, 5}, dilated));
  EXPECT_FALSE(cuda::pool_runs_channels_last(float64, {1, 8, 5, 5}, max));
  EXPECT_FALSE(cuda::pool_runs_channels_last(float16, {1 << 12, 1 << 10, 16, 16}, max)) << "past 32-bit offsets";
  // Whatever the rule takes, the 32-bit kernel takes (eval_pool asserts it), up to its limits.
  for (const Shape& xs : {Shape{32, 64, 112, 112}, Shape{1, 1, (1 << 29) - 1, 1}, Shape{3, 5, 7, 9}}) {
    ASSERT_TRUE(cuda::pool_runs_channels_last(float16, xs, max)) << shape_to_string(xs);
    Shape ys = xs;
    for (size_t i = 0; i < 2; ++i)
      ys[i + 2] = (xs[i + 2] + max.padding_lo[i] + max.padding_hi[i] - max.kernel[i]) / max.strides[i] + 1;
    const Strides nhwc{xs[1] * xs[2] * xs[3], 1, xs[3] * xs[1], xs[1]};
    EXPECT_TRUE(cuda::max_pool2d_args(cuda::pool_kernel_args(xs, nhwc, ys, max), xs, float16).has_value())
        << shape_to_string(xs);
  }
}

/// A ResNet bottleneck's shapes in small: a 3 x 3 convolution from 16 channels with a bias and a
/// ReLU, a 3 x 3 max pool of stride 2, a 1 x 1 and a 3 x 3 convolution, a residual add, a global
/// average pool. (A function's outputs are row-major: a second output inside the chain would end
/// it there.)
struct Block {
  Array w1, b1, w2, b2, w3, b3;

  std::vector<Array> operator()(const std::vector<Array>& in) const {
    auto bias = [](const Array& b) { return reshape(b, {1, b.shape(0), 1, 1}); };
    Array y1 = relu(conv2d(in[0], w1, {1, 1}, {1, 1}) + bias(b1));
    PoolOptions po;
    po.kernel = {3, 3};
    po.strides = {2, 2};
    po.padding_lo = po.padding_hi = {1, 1};
    Array p = max_pool(y1, po);
    Array y2 = relu(conv2d(p, w2, {1, 1}, {0, 0}) + bias(b2));
    Array y3 = relu(conv2d(y2, w3, {1, 1}, {1, 1}) + bias(b3) + y2);
    return {mean(y3, {2, 3}, true)};
  }
};

Block make_block(Dtype dt, uint32_t seed) {
  auto r = [&](const Shape& s, double lo, double hi) { return on_gpu(random_array(s, dt, lo, hi, ++seed)); };
  return {r({32, 16, 3, 3}, -0.3, 0.3), r({32}, -1, 1), r({64, 32, 1, 1}, -0.2, 0.2),
          r({64}, -1, 1),               r({64, 64, 3, 3}, -0.1, 0.1), r({64}, -1, 1)};
}

int channels_last_convs(const compiler::Tape& tape) {
  int n = 0;
  for (const auto& s : tape.steps)
    if (s.prim.kind == PrimKind::Conv) {
      const auto& p = s.prim.get<ConvParams>();
      n += p.src_block != 0 && p.dst_block != 0 && !p.packed_weight.empty();
    }
  return n;
}

TEST(ChannelsLastCompile, ABottleneckStaysChannelsLastBetweenItsConvolutions) {
  SMELT_REQUIRE_GPU();
  const Block block = make_block(float16, 10);
  const std::vector<Array> inputs{on_gpu(random_array({2, 16, 18, 18}, float16, -1, 1, 3))};
  const compiler::Tape tape = optimized_tape(block, inputs);
  const std::string text = compiler::dump_tape(tape);
  int convs = 0, first_reads_nchw = 0, pools = 0;
  for (const auto& s : tape.steps) {
    if (s.prim.kind == PrimKind::Conv) {
      const auto& p = s.prim.get<ConvParams>();
      ++convs;
      EXPECT_FALSE(p.packed_weight.empty()) << "every weight is a constant: transposed at compile time\n" << text;
      EXPECT_NE(p.dst_block, 0) << text;
      first_reads_nchw += p.src_block == 0;
    }
    if (s.prim.kind == PrimKind::Pool) {
      ++pools;
      EXPECT_EQ(s.prim.get<PoolParams>().block, 32) << text;
    }
  }
  EXPECT_EQ(convs, 3) << text;
  EXPECT_EQ(first_reads_nchw, 1) << "only the chain's input is NCHW\n" << text;
  EXPECT_EQ(pools, 1) << text;
  EXPECT_EQ(channels_last_convs(tape), 2) << text;
}

TEST(ChannelsLastCompile, CompiledEqualsEagerBitForBitOnBothPaths) {
  SMELT_REQUIRE_GPU();
  uint32_t seed = 40;
  for (bool cudnn_on : {true, false}) {
    const bool saved = cuda::cudnn_enabled();
    cuda::set_cudnn_enabled(cudnn_on);
    for (Dtype dt : {float16, bfloat16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (cudnn_on ? ", cuDNN" : ", direct kernel"));
      const Block block = make_block(dt, seed += 10);
      // A NaN in the first sample, +inf in the second, -inf in the third (the convolutions
      // spread each over its sample), the fourth finite.
      std::vector<float> xv = random_array({4, 16, 17, 15}, float32, -2, 2, ++seed).to_vector<float>();
      const size_t sample = 16 * 17 * 15;
      xv[17] = std::numeric_limits<float>::quiet_NaN();
      xv[sample + 400] = std::numeric_limits<float>::infinity();
      xv[2 * sample + 901] = -std::numeric_limits<float>::infinity();
      const std::vector<Array> inputs{on_gpu(astype(Array(xv, {4, 16, 17, 15}), dt))};
      const auto fn = std::function<std::vector<Array>(const std::vector<Array>&)>(block);
      const auto eager = fn(inputs);
      auto compiled = compile_flat(fn);
      for (int call = 0; call < 3; ++call) {  // the first call traces, the later ones replay
        const auto got = compiled(inputs);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].device(), gpu());
        EXPECT_EQ(got[0].shape(), (Shape{4, 64, 1, 1}));
        EXPECT_TRUE(bit_equal(got[0], eager[0])) << "call " << call;
      }
      // And the pass off: the convolutions transpose their own operands, the same bits.
      CompileOptions off;
      off.disabled_passes = {"conv_layout", "conv_prepack"};
      auto plain = compile_flat(fn, off);
      const auto got = plain(inputs);
      EXPECT_TRUE(bit_equal(got[0], eager[0])) << "passes off";
    }
    cuda::set_cudnn_enabled(saved);
  }
}

#endif

}  // namespace
}  // namespace smelt
