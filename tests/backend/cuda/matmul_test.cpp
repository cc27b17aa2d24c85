// CUDA matmul against the CPU: cuBLASLt for float32/float16/bfloat16, the exact kernel for the
// other dtypes; batches, broadcast batches, transposed operands, empty and K = 0 products.
#include <tuple>

#include "tests/backend/cuda/cuda_test_utils.h"

namespace smelt {
namespace {

using namespace smelt::test;

/// Relative error of the whole product in float64 (the CPU's result as the reference).
double rel_error(const Array& g, const Array& c) {
  auto gv = as_doubles(on_cpu(g)), cv = as_doubles(c);
  double num = 0, den = 0;
  for (size_t i = 0; i < cv.size(); ++i) {
    num += (gv[i] - cv[i]) * (gv[i] - cv[i]);
    den += cv[i] * cv[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

TEST(CudaMatmul, FloatTypesThroughCublasLt) {
  SMELT_REQUIRE_GPU();
  for (Dtype dt : {float32, float16, bfloat16, float64}) {
    SCOPED_TRACE(dtype_name(dt));
    const double tol = dt == float64 ? 1e-12 : (dt == float32 ? 1e-5 : (dt == float16 ? 2e-3 : 1e-2));
    for (auto [m, k, n] : {std::tuple{1, 1, 1}, {7, 13, 5}, {64, 128, 96}, {129, 257, 65}}) {
      Array a = random_array({m, k}, dt, -1, 1, 91), b = random_array({k, n}, dt, -1, 1, 92);
      Array g = matmul(on_gpu(a), on_gpu(b));
      Array c = matmul(a, b);
      ASSERT_EQ(g.shape(), c.shape());
      ASSERT_EQ(g.dtype(), c.dtype());
      EXPECT_LT(rel_error(g, c), tol) << m << "x" << k << "x" << n;
    }
    // Batches, one operand broadcast over the batch, transposed operands.
    Array a = random_array({3, 4, 33, 17}, dt, -1, 1, 93), b = random_array({17, 9}, dt, -1, 1, 94);
    EXPECT_LT(rel_error(matmul(on_gpu(a), on_gpu(b)), matmul(a, b)), tol);
    Array bt = random_array({3, 4, 9, 17}, dt, -1, 1, 95);
    EXPECT_LT(rel_error(matmul(on_gpu(a), transpose(on_gpu(bt), {0, 1, 3, 2})), matmul(a, transpose(bt, {0, 1, 3, 2}))),
              tol);
    Array v = random_array({17}, dt, -1, 1, 96);
    EXPECT_LT(rel_error(matmul(on_gpu(a), on_gpu(v)), matmul(a, v)), tol);
  }
}

TEST(CudaMatmul, ExactKernelForIntegersAndBool) {
  SMELT_REQUIRE_GPU();
  for (Dtype dt : {bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64}) {
    SCOPED_TRACE(dtype_name(dt));
    Array a = random_array({2, 19, 23}, dt, -100, 100, 101), b = random_array({2, 23, 11}, dt, -100, 100, 102);
    EXPECT_TRUE(same_as_cpu(matmul(on_gpu(a), on_gpu(b)), matmul(a, b)));  // wraps exactly as the CPU
    EXPECT_TRUE(same_as_cpu(matmul(transpose(on_gpu(b), {0, 2, 1}), transpose(on_gpu(a), {0, 2, 1})),
                            matmul(transpose(b, {0, 2, 1}), transpose(a, {0, 2, 1}))));
  }
}

TEST(CudaMatmul, EmptyAndZeroInnerDimension) {
  SMELT_REQUIRE_GPU();
  for (Dtype dt : {float32, int32}) {
    Array a = zeros({4, 0}, dt), b = zeros({0, 3}, dt);
    EXPECT_TRUE(same_as_cpu(matmul(on_gpu(a), on_gpu(b)), matmul(a, b)));  // zeros [4, 3]
    Array c = zeros({0, 5}, dt), d = zeros({5, 3}, dt);
    EXPECT_TRUE(same_as_cpu(matmul(on_gpu(c), on_gpu(d)), matmul(c, d)));
  }
}

}  // namespace
}  // namespace smelt
