// vmap and checkpoint on the GPU: batched equals the loop of unbatched calls bit for bit on the
// device, checkpointed gradients equal plain ones bit for bit, and both agree with the CPU.
#include "smelt/compile.h"
#include "smelt/transforms.h"
#include "tests/backend/cuda/cuda_test_utils.h"

namespace smelt {
namespace {

using namespace smelt::test;

constexpr int64_t kBatch = 4;

// Element-wise math, a broadcast, reductions, a scan, a gather, a scatter-add, a sort and a 2-D
// matmul: the batching rules of the common primitives, on device kernels.
Array per_example(const Array& x, const Array& w) {
  Array h = tanh(matmul(x, w));                        // [5, 3]
  Array s = softmax(h, {-1}) + cumsum(h, 0) * 0.5f;
  Array picked = take(s, Array({2, 0, 1}), 1);
  Array sc = scatter(zeros_like(s), Array({1, 0, 2, 2, 4, 3}, {2, 3}), slice(picked, {0, 0}, {2, 3}), 0,
                     ScatterReduce::Add);
  return sum(sort(s + sc, 1), {0}) + max(h);
}

Array example(const Array& x, int64_t i) { return squeeze(slice(x, Axes{0}, {i}, {i + 1}, {1}), {0}); }

TEST(CudaVmap, BatchedEqualsTheLoopBitForBitOnTheDevice) {
  SMELT_REQUIRE_GPU();
  Array xs = on_gpu(random_array({kBatch, 5, 8}, float32, -1, 1, 1)), w = on_gpu(random_array({8, 3}, float32, -1, 1, 2));
  Array got = vmap(per_example, {0, not_mapped})(xs, w);
  EXPECT_EQ(got.device(), gpu());
  std::vector<Array> parts;
  for (int64_t i = 0; i < kBatch; ++i) parts.push_back(per_example(example(xs, i), w));
  EXPECT_TRUE(bit_equal(on_cpu(got), on_cpu(stack(parts, 0))));
  // Compiled: the batched graph fused into device kernels, the same bits.
  EXPECT_TRUE(bit_equal(on_cpu(compile(vmap(per_example, {0, not_mapped}))(xs, w)), on_cpu(got)));
}

TEST(CudaVmap, ConvolutionAndPoolingEqualTheLoopBitForBit) {
  SMELT_REQUIRE_GPU();
  auto f = [](const Array& x, const Array& w) {
    return max_pool(relu(conv2d(x, w, {1, 1}, {1, 1})), {.kernel = {2, 2}, .strides = {2, 2}});
  };
  Array xs = on_gpu(random_array({kBatch, 2, 3, 8, 8}, float32, -1, 1, 7)), w = on_gpu(random_array({4, 3, 3, 3}, float32, -1, 1, 8));
  Array got = vmap(f, {0, not_mapped})(xs, w);
  std::vector<Array> parts;
  for (int64_t i = 0; i < kBatch; ++i) parts.push_back(f(example(xs, i), w));
  EXPECT_TRUE(bit_equal(on_cpu(got), on_cpu(stack(parts, 0))));
}

TEST(CudaVmap, PerExampleGradientsMatchTheCpu) {
  SMELT_REQUIRE_GPU();
  Array xs = random_array({kBatch, 5, 8}, float64, -1, 1, 3), w = random_array({8, 3}, float64, -1, 1, 4);
  auto g = vmap(grad([](const Array& w, const Array& x) { return sum(per_example(x, w)); }), {not_mapped, 0});
  Array cpu = g(w, xs), dev = g(on_gpu(w), on_gpu(xs));
  // float64: ~30 ops forward and backward, each within 2 ulps on the device (libdevice's tanh and
  // exp), none cancelling more than a factor of 10: 30 · 2 ulps · 10 < 1e-12 relative.
  EXPECT_TRUE(all_close(on_cpu(dev), as_doubles(cpu), 1e-12, 1e-12));
}

TEST(CudaCheckpoint, GradientsEqualThePlainOnesBitForBit) {
  SMELT_REQUIRE_GPU();
  Array x = on_gpu(random_array({5, 8}, float32, -1, 1, 5)), w = on_gpu(random_array({8, 3}, float32, -1, 1, 6));
  auto f = [](const Array& w, const Array& x) { return per_example(x, w); };
  auto cf = checkpoint(f);
  Array g0 = grad([&](const Array& w) { return sum(square(f(w, x))); })(w);
  Array g1 = grad([&](const Array& w) { return sum(square(cf(w, x))); })(w);
  EXPECT_EQ(g1.device(), gpu());
  EXPECT_TRUE(bit_equal(on_cpu(g1), on_cpu(g0)));
}

}  // namespace
}  // namespace smelt
