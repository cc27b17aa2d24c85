// Gradients on the GPU: equal to the CPU's within float64 rounding, and compiled equal to uncompiled bit for bit.
#include "smelt/compile.h"
#include "smelt/transforms.h"
#include "tests/backend/cuda/cuda_test_utils.h"

namespace smelt {
namespace {

using namespace smelt::test;

// Matmul, broadcasting, reductions (mean, max, logsumexp), a gather and element-wise math: the
// backward graph uses transposed matmuls, scatter-add, where and broadcasts.
Array loss_fn(const Array& w, const Array& x) {
  Array h = tanh(matmul(x, w));
  Array picked = take(h, Array({0, 2, 2}), 1);
  return mean(square(h - 0.25)) + sum(logsumexp(h, {1})) * 0.1 + sum(max(picked, {1})) + sum(sigmoid(w)) * 0.01;
}

TEST(CudaGrad, GradientsMatchTheCpu) {
  SMELT_REQUIRE_GPU();
  Array w = random_array({8, 4}, float64, -1, 1, 1), x = random_array({16, 8}, float64, -2, 2, 2);
  auto g = grad(loss_fn, argnums<0, 1>);
  auto [gw_cpu, gx_cpu] = g(w, x);
  auto [gw_gpu, gx_gpu] = g(on_gpu(w), on_gpu(x));
  EXPECT_EQ(gw_gpu.device(), gpu());
  // float64 throughout: each of the ~20 ops of the forward and backward graph may round
  // differently on the GPU (libdevice's tanh, exp, log are within 2 ulps), and no step cancels
  // more than a factor of 10, so the results agree to 20 · 2 ulps · 10 < 1e-12 relative.
  EXPECT_TRUE(all_close(on_cpu(gw_gpu), as_doubles(gw_cpu), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(on_cpu(gx_gpu), as_doubles(gx_cpu), 1e-12, 1e-12));
}

TEST(CudaGrad, CompiledGradientEqualsUncompiledBitForBit) {
  SMELT_REQUIRE_GPU();
  Array w = on_gpu(random_array({8, 4}, float32, -1, 1, 3)), x = on_gpu(random_array({16, 8}, float32, -2, 2, 4));
  auto g = grad(loss_fn);
  EXPECT_TRUE(bit_equal(on_cpu(compile(g)(w, x)), on_cpu(g(w, x))));
}

}  // namespace
}  // namespace smelt
