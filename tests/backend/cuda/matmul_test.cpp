// CUDA matmul against the CPU: cuBLASLt for float32/float16/bfloat16, the exact kernel for the
// other dtypes; batches, broadcast batches, transposed operands, empty and K = 0 products.
#include <tuple>

#include "src/core/allocator.h"
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

/// Evaluates matmul(a, b) on evaluated operands and returns how many buffers it allocated: one
/// (the result) unless an operand was copied.
size_t allocations_of(const Array& a, const Array& b, Array* result) {
  eval({a, b});
  Allocator& alloc = allocator_for(gpu());
  const size_t before = alloc.stats().num_allocs;
  Array r = matmul(a, b);
  r.eval();
  *result = r;
  return alloc.stats().num_allocs - before;
}

/// `x` broadcast to `full` and copied, its matrices kept in x's layout: a transposed operand
/// stays transposed (cuBLASLt's NN and NT kernels need not sum in the same order).
Array materialized(const Array& x, const Shape& full) {
  const Strides& st = x.strides();
  const int nd = x.ndim();
  const bool transposed = st[nd - 2] == 1 && x.shape()[nd - 1] > 1 && x.shape()[nd - 2] > 1;
  if (!transposed) return copy(broadcast_to(x, full));
  return swapaxes(copy(swapaxes(broadcast_to(x, full), -1, -2)), -1, -2);
}

// Broadcast batch axes are strided batches with stride 0 (or a loop of calls), swapped matrix
// axes are transpose flags: nothing is copied, and the bits are those of the product of the
// operands materialized in the same matrix layout.
TEST(CudaMatmul, BroadcastBatchesAndTransposesAreReadInPlace) {
  SMELT_REQUIRE_GPU();
  uint32_t seed = 120;
  for (Dtype dt : {float32, float16, bfloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const double tol = dt == float32 ? 1e-5 : (dt == float16 ? 2e-3 : 1e-2);
    auto r = [&](const Shape& s) { return on_gpu(random_array(s, dt, -1, 1, seed++)); };
    Array warm;
    allocations_of(r({2, 8, 8}), r({8, 8}), &warm);  // the stream's cuBLASLt workspace
    Array q = r({2, 2, 3, 5, 8}), k = r({2, 2, 1, 5, 8}), v = r({2, 2, 1, 5, 8});
    std::vector<std::pair<Array, Array>> cases = {
        {r({2, 3, 5, 7}), r({1, 3, 7, 4})},                 // [B,H,M,K] @ [1,H,K,N]: a loop over B
        {r({4, 33, 70}), r({70, 20})},                       // [B,M,K] @ [K,N]: stride 0
        {r({1, 3, 9, 7}), r({2, 3, 7, 6})},                 // the left operand broadcast
        {q, swapaxes(k, -1, -2)},                            // GQA scores: k shared by 3 query heads
        {r({2, 2, 3, 5, 5}), v},                             // GQA values
        {r({6, 300, 40}), transpose(r({50, 40}))},           // x @ w^T
        {swapaxes(r({3, 40, 30}), 1, 2), r({1, 40, 20})},    // a transposed and b broadcast
    };
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE("case " + std::to_string(i));
      const Array& a = cases[i].first;
      const Array& b = cases[i].second;
      Array got;
      EXPECT_EQ(allocations_of(a, b, &got), 1u);
      Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2), Shape(b.shape().begin(), b.shape().end() - 2));
      Shape fa = batch, fb = batch;
      fa.insert(fa.end(), a.shape().end() - 2, a.shape().end());
      fb.insert(fb.end(), b.shape().end() - 2, b.shape().end());
      EXPECT_TRUE(bit_equal(got, matmul(materialized(a, fa), materialized(b, fb))));
      EXPECT_LT(rel_error(got, matmul(on_cpu(a), on_cpu(b))), tol);
    }
  }
}

// Views that start one element into a buffer: cuBLASLt is told the real alignment (it would
// otherwise assume 256 bytes), reads them in place, and matches the CPU. (Kernels for other
// alignments may order the sums differently: no bit comparison with aligned copies here.)
TEST(CudaMatmul, MisalignedViewsAreReadInPlace) {
  SMELT_REQUIRE_GPU();
  for (Dtype dt : {float32, float16, bfloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const double tol = dt == float32 ? 1e-5 : (dt == float16 ? 2e-3 : 1e-2);
    Array wide = on_gpu(random_array({6, 64, 48}, dt, -1, 1, 130));
    Array w = on_gpu(random_array({49, 16}, dt, -1, 1, 131));
    Array warm;
    allocations_of(wide, slice(w, {0, 0}, {48, 16}), &warm);
    Array a = slice(wide, {0, 0, 1}, {6, 64, 48});  // [6,64,47], rows 48 apart, 1 element in
    Array b = slice(w, {1, 0}, {48, 16});            // [47,16], 16 elements in
    for (auto [x, y] : {std::pair{a, b}, std::pair{a, transpose(slice(on_gpu(random_array({17, 48}, dt, -1, 1, 132)), {0, 1}, {16, 48}))}}) {
      Array got;
      EXPECT_EQ(allocations_of(x, y, &got), 1u);
      EXPECT_LT(rel_error(got, matmul(on_cpu(x), on_cpu(y))), tol);
    }
  }
}

// Rows that are not a multiple of 16 bytes long (an odd vocabulary: GPT-2's 50257 logits) in a
// large product: b's matrix and the product go through padded copies (matmul.cpp), b shared by a
// batch; transposed and small products keep the direct call. All match the CPU.
TEST(CudaMatmul, UnalignedRowsOfLargeProducts) {
  SMELT_REQUIRE_GPU();
  for (Dtype dt : {float32, float16, bfloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const double tol = dt == float32 ? 1e-5 : (dt == float16 ? 2e-3 : 1e-2);
    Array a = random_array({2, 150, 96}, dt, -1, 1, 140), b = random_array({96, 301}, dt, -1, 1, 141);
    Array got = matmul(on_gpu(a), on_gpu(b));
    EXPECT_EQ(got.shape(), (Shape{2, 150, 301}));
    EXPECT_LT(rel_error(got, matmul(a, b)), tol);
    Array bt = random_array({301, 96}, dt, -1, 1, 142);  // read transposed: b's rows are aligned
    EXPECT_LT(rel_error(matmul(on_gpu(a), transpose(on_gpu(bt))), matmul(a, transpose(bt))), tol);
    Array small = random_array({5, 96}, dt, -1, 1, 143);  // too small to pay for copies
    EXPECT_LT(rel_error(matmul(on_gpu(small), on_gpu(b)), matmul(small, b)), tol);
  }
}

// An operand cuBLASLt cannot read (both matrix strides past 1) is copied, but only its distinct
// matrices: a broadcast batch axis stays broadcast in the copy.
TEST(CudaMatmul, UnreadableOperandCopiesOnlyItsDistinctMatrices) {
  SMELT_REQUIRE_GPU();
  Array base = on_gpu(random_array({1, 14, 12}, float32, -1, 1, 140));
  Array every_other = slice(base, {0, 0, 0}, {1, 14, 12}, {1, 2, 2});  // [1,7,6], strides (.., 24, 2)
  Array a = on_gpu(random_array({64, 5, 7}, float32, -1, 1, 141));
  eval({a, every_other});
  Array warm;
  allocations_of(a, copy(every_other), &warm);
  Allocator& alloc = allocator_for(gpu());
  alloc.reset_peak();
  const size_t before = alloc.stats().active_bytes;
  Array got = matmul(a, every_other);
  got.eval();
  // The result and one [1,7,6] copy (size classes round both up), never 64 copies of it.
  EXPECT_LT(alloc.stats().peak_bytes - before, got.nbytes() + 64 * 7 * 6 * 4);
  EXPECT_LT(rel_error(got, matmul(on_cpu(a), on_cpu(every_other))), 1e-5);
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
