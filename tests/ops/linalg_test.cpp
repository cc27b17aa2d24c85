// Tests for matmul: NumPy shape semantics, every dtype against float64 / exact references, strided operands.
#include <limits>

#include "src/core/allocator.h"
#include "test_utils.h"

namespace smelt {
namespace {

using test::all_close;
using test::as_doubles;
using test::bit_equal;
using test::random_array;
using test::tolerance_for;

/// Reference NumPy matmul in float64 (inputs already of the result dtype's values).
std::vector<double> ref_matmul(Array a, Array b, Shape* out_shape) {
  Shape sa = a.shape(), sb = b.shape();
  bool row = sa.size() == 1, col = sb.size() == 1;
  if (row) sa.insert(sa.begin(), 1);
  if (col) sb.push_back(1);
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  Shape batch = broadcast_shapes(ba, bb);
  Shape fa = batch, fb = batch;
  fa.insert(fa.end(), {m, k});
  fb.insert(fb.end(), {k, n});
  auto av = as_doubles(broadcast_to(reshape(a, sa), fa));
  auto bv = as_doubles(broadcast_to(reshape(b, sb), fb));
  int64_t nb = 1;
  for (auto d : batch) nb *= d;
  std::vector<double> out(static_cast<size_t>(nb * m * n), 0.0);
  for (int64_t t = 0; t < nb; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += av[t * m * k + i * k + p] * bv[t * k * n + p * n + j];
        out[t * m * n + i * n + j] = acc;
      }
  *out_shape = batch;
  if (!row) out_shape->push_back(m);
  if (!col) out_shape->push_back(n);
  return out;
}

/// Checks matmul(a, b) against the float64 reference with a tolerance scaled by sum |a||b|.
::testing::AssertionResult matches_reference(Array a, Array b, double tol) {
  Shape expect_shape;
  auto ref = ref_matmul(a, b, &expect_shape);
  Shape dummy;
  auto scale = ref_matmul(abs(astype(a, float64)), abs(astype(b, float64)), &dummy);
  Array r = matmul(a, b);
  if (r.shape() != expect_shape)
    return ::testing::AssertionFailure() << "shape " << shape_to_string(r.shape()) << " != " << shape_to_string(expect_shape);
  if (r.dtype() != promote_types(a.dtype(), b.dtype()))
    return ::testing::AssertionFailure() << "dtype " << dtype_name(r.dtype());
  if (is_integral(r.dtype())) {
    // Integer products wrap at the result's width: wrap the exact reference the same way.
    std::vector<int64_t> exact(ref.begin(), ref.end());
    ref = as_doubles(astype(Array(exact, Shape{static_cast<int64_t>(exact.size())}), r.dtype()));
  }
  auto got = as_doubles(r);
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - ref[i]) <= tol * (std::fabs(ref[i]) + scale[i])))
      return ::testing::AssertionFailure() << "[" << i << "] got " << got[i] << " expected " << ref[i];
  return ::testing::AssertionSuccess();
}

const std::vector<std::pair<Shape, Shape>> kShapeCases = {
    {{3, 4}, {4, 5}},          // matrix @ matrix
    {{4}, {4, 5}},             // vector @ matrix
    {{3, 4}, {4}},             // matrix @ vector
    {{4}, {4}},                // vector @ vector -> 0-d
    {{2, 3, 4}, {2, 4, 5}},    // batched
    {{2, 1, 3, 4}, {5, 4, 6}}, // batch broadcasting both ways
    {{2, 3, 4}, {4, 5}},       // one matrix broadcast over a batch (stride 0)
    {{3, 4}, {2, 4, 5}},       // the left matrix broadcast
    {{4}, {2, 4, 5}},          // vector @ batch
    {{2, 3, 4}, {4}},          // batch @ vector
    {{1, 7}, {7, 1}},
    {{17, 33}, {33, 9}},       // sizes past the blocking of the loop kernels
};

TEST(Matmul, ShapesFloat32AndFloat64) {
  uint32_t seed = 1;
  for (Dtype dt : {float32, float64}) {
    for (const auto& [sa, sb] : kShapeCases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_to_string(sa) + " @ " + shape_to_string(sb));
      Array a = random_array(sa, dt, -2, 2, seed++), b = random_array(sb, dt, -2, 2, seed++);
      EXPECT_TRUE(matches_reference(a, b, 4 * tolerance_for(dt)));
    }
  }
}

TEST(Matmul, HalfPrecision) {
  uint32_t seed = 100;
  for (Dtype dt : {float16, bfloat16}) {
    for (const auto& [sa, sb] : kShapeCases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_to_string(sa) + " @ " + shape_to_string(sb));
      Array a = random_array(sa, dt, -2, 2, seed++), b = random_array(sb, dt, -2, 2, seed++);
      // float32 accumulation, one rounding to the half type.
      EXPECT_TRUE(matches_reference(a, b, tolerance_for(dt)));
    }
  }
}

TEST(Matmul, IntegersAreExact) {
  uint32_t seed = 200;
  for (Dtype dt : {int8, int16, int32, int64, uint8, uint16, uint32, uint64}) {
    for (const auto& [sa, sb] : kShapeCases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_to_string(sa) + " @ " + shape_to_string(sb));
      double lo = is_unsigned_integral(dt) ? 0 : -5;
      Array a = random_array(sa, dt, lo, 5, seed++), b = random_array(sb, dt, lo, 5, seed++);
      EXPECT_TRUE(matches_reference(a, b, 0.0));
    }
  }
}

TEST(Matmul, IntegersWrap) {
  // int8: 100 * 100 = 10000 wraps to 16 (NumPy keeps the operand dtype).
  Array a = Array({int8_t(100)}, {1, 1});
  EXPECT_EQ(matmul(a, a).item<int8_t>(), static_cast<int8_t>(10000));
  Array v = Array({int8_t(100), int8_t(100), int8_t(-100)});
  EXPECT_EQ(matmul(v, v).item<int8_t>(), static_cast<int8_t>(30000));
  EXPECT_EQ(matmul(v, v).dtype(), int8);
  const int64_t big = int64_t(1) << 62;
  Array l = Array({big, big, int64_t(3)}, {1, 3});
  Array r = Array({int64_t(4), int64_t(2), int64_t(5)}, {3, 1});
  uint64_t expect = uint64_t(big) * 4 + uint64_t(big) * 2 + 15;
  EXPECT_EQ(matmul(l, r).item<int64_t>(), static_cast<int64_t>(expect));
  Array u = Array({std::numeric_limits<uint32_t>::max(), 2u}, {1, 2});
  Array w = Array({2u, 3u}, {2, 1});
  EXPECT_EQ(matmul(u, w).item<uint32_t>(), static_cast<uint32_t>(uint64_t(0xffffffffu) * 2 + 6));
}

TEST(Matmul, BoolIsOrOfAnds) {
  Array a = Array({true, false, false, false, true, true}, {2, 3});
  Array b = Array({false, true, true, false, false, true}, {3, 2});
  Array r = matmul(a, b);
  EXPECT_EQ(r.dtype(), bool_);
  // row 0 = [1,0,0] -> b row 0 = [0,1]; row 1 = [0,1,1] -> b rows 1|2 = [1,0]|[0,1] = [1,1]
  EXPECT_EQ(r.to_vector<bool>(), (std::vector<bool>{false, true, true, true}));
  Array x = random_array({5, 19}, bool_, -1, 1, 300), y = random_array({19, 7}, bool_, -1, 1, 301);
  Shape s;
  auto ref = ref_matmul(x, y, &s);
  for (auto& v : ref) v = v != 0 ? 1 : 0;
  EXPECT_TRUE(all_close(matmul(x, y), ref, 0, 0));
}

TEST(Matmul, MixedDtypesPromote) {
  Array a = random_array({3, 4}, int32, -5, 5, 400), b = random_array({4, 2}, float32, -1, 1, 401);
  // promote_types: an integer with a float gives the float's dtype (as MLX and JAX).
  EXPECT_EQ(matmul(a, b).dtype(), promote_types(int32, float32));
  EXPECT_TRUE(bit_equal(matmul(a, b), matmul(astype(a, float32), b)));
  EXPECT_TRUE(matches_reference(a, astype(b, float64), 1e-13));
  EXPECT_EQ(matmul(astype(a, int8), astype(b, int16)).dtype(), int16);
  EXPECT_EQ(matmul(astype(a, float16), astype(b, bfloat16)).dtype(), float32);
  EXPECT_EQ(matmul(astype(a, bool_), astype(transpose(a), uint8)).dtype(), uint8);
}

TEST(Matmul, StridedOperands) {
  // Transposed operands go to BLAS as Trans (no copy); sliced and broadcast ones are packed.
  uint32_t seed = 500;
  for (Dtype dt : {float32, float64, float16, int32}) {
    Array a = random_array({6, 5}, dt, -2, 2, seed++);
    Array b = random_array({7, 6}, dt, -2, 2, seed++);
    Array big = random_array({12, 14}, dt, -2, 2, seed++);
    std::vector<std::pair<Array, Array>> cases = {
        {transpose(a), transpose(b)},                                        // [5,6] @ [6,7]
        {transpose(a), random_array({6, 3}, dt, -2, 2, seed++)},
        {random_array({3, 6}, dt, -2, 2, seed++), a},
        // [6,5] @ ([6,5] with negative steps, transposed below): both packed
        {slice(big, {0, 0}, {12, 14}, {2, 3}), slice(big, {11, 13}, {-13, -15}, {-2, -3})},
        {broadcast_to(random_array({1, 6}, dt, -2, 2, seed++), {4, 6}), transpose(b)},
        {swapaxes(random_array({6, 2, 5}, dt, -2, 2, seed), 0, 1), random_array({5, 3}, dt, -2, 2, seed + 1)},
        {random_array({2, 4, 6}, dt, -2, 2, seed + 2), swapaxes(random_array({2, 7, 6}, dt, -2, 2, seed + 3), 1, 2)},
    };
    for (size_t i = 0; i < cases.size(); ++i) {
      Array x = cases[i].first, y = cases[i].second;
      if (x.shape().back() != y.shape()[y.ndim() - 2]) y = transpose(y);
      SCOPED_TRACE(std::string(dtype_name(dt)) + " case " + std::to_string(i));
      double tol = is_floating(dt) ? (dt == float16 ? tolerance_for(dt) : 4 * tolerance_for(dt)) : 0.0;
      EXPECT_TRUE(matches_reference(x, y, tol));
    }
  }
}

TEST(Matmul, EmptyAndZeroInner) {
  for (Dtype dt : {float32, float64, float16, int32, bool_}) {
    SCOPED_TRACE(dtype_name(dt));
    Array k0 = matmul(zeros({3, 0}, dt), zeros({0, 4}, dt));
    EXPECT_EQ(k0.shape(), (Shape{3, 4}));
    EXPECT_TRUE(all_close(k0, std::vector<double>(12, 0.0), 0, 0));
    // K = 0 with garbage-free zeros even when the output buffer is recycled.
    Array junk = random_array({2, 5, 6}, dt, 1, 3, 600);
    junk.eval();
    junk = Array();
    Array kb = matmul(zeros({2, 5, 0}, dt), zeros({0, 6}, dt));
    EXPECT_TRUE(all_close(kb, std::vector<double>(60, 0.0), 0, 0));
    EXPECT_EQ(matmul(zeros({0, 3}, dt), zeros({3, 4}, dt)).shape(), (Shape{0, 4}));
    EXPECT_EQ(matmul(zeros({2, 3}, dt), zeros({3, 0}, dt)).shape(), (Shape{2, 0}));
    EXPECT_EQ(matmul(zeros({0, 2, 3}, dt), zeros({3, 4}, dt)).shape(), (Shape{0, 2, 4}));
    EXPECT_EQ(matmul(zeros({0}, dt), zeros({0}, dt)).shape(), Shape{});
    EXPECT_EQ(matmul(zeros({0}, dt), zeros({0}, dt)).item<double>(), 0.0);
  }
}

TEST(Matmul, NaNAndInfPropagate) {
  Array a = Array({1.0f, NAN, 2.0f, 3.0f}, {2, 2});
  Array b = Array({1.0f, 0.0f, 0.0f, INFINITY}, {2, 2});
  auto r = as_doubles(matmul(a, b));
  EXPECT_TRUE(std::isnan(r[0]) && std::isnan(r[1]));
  EXPECT_EQ(r[2], 2.0);
  EXPECT_EQ(r[3], std::numeric_limits<double>::infinity());
}

TEST(Matmul, ResultsDoNotDependOnThreadCount) {
  const int saved = cpu_threads();
  Array big_a = random_array({300, 257}, float32, -1, 1, 700), big_b = random_array({257, 311}, float32, -1, 1, 701);
  Array bat_a = random_array({64, 24, 40}, float64, -1, 1, 702), bat_b = random_array({64, 40, 16}, float64, -1, 1, 703);
  Array half_a = random_array({8, 33, 65}, float16, -1, 1, 704), half_b = random_array({65, 17}, float16, -1, 1, 705);
  Array int_a = random_array({5, 70, 90}, int32, -50, 50, 706), int_b = random_array({5, 90, 60}, int32, -50, 50, 707);
  // Products the GEMM cuts into tiles (src/backend/cpu/gemm.h): square, transformer-like, a
  // matrix broadcast over a batch, a batch of separate tiled products, halves through float32.
  Array sq_a = random_array({512, 512}, float32, -1, 1, 708), sq_b = random_array({512, 512}, float32, -1, 1, 709);
  Array tr_a = random_array({4, 64, 128}, float32, -1, 1, 710), tr_b = random_array({128, 512}, float32, -1, 1, 711);
  Array sep_a = random_array({3, 100, 300}, float32, -1, 1, 712), sep_b = random_array({3, 300, 200}, float32, -1, 1, 713);
  Array bh_a = random_array({200, 300}, bfloat16, -1, 1, 714), bh_b = random_array({300, 400}, bfloat16, -1, 1, 715);
  auto compute = [&] {
    return std::vector<Array>{matmul(big_a, big_b),   matmul(transpose(big_b), transpose(big_a)),
                              matmul(bat_a, bat_b),   matmul(half_a, half_b),
                              matmul(int_a, int_b),   matmul(sq_a, sq_b),
                              matmul(tr_a, tr_b),     matmul(transpose(sq_b), sq_a),
                              matmul(sep_a, sep_b),   matmul(astype(sep_a, float64), astype(sep_b, float64)),
                              matmul(bh_a, bh_b)};
  };
  set_cpu_threads(1);
  auto one = compute();
  eval(one);
  for (int t : {2, 3, 5}) {
    set_cpu_threads(t);
    auto many = compute();
    eval(many);
    for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(bit_equal(many[i], one[i])) << "result " << i << ", " << t << " threads";
  }
  set_cpu_threads(saved);
}

/// Evaluates matmul(a, b) with its operands already evaluated and returns how many buffers the
/// product allocated: one (its result) unless an operand was copied (every copy of an array goes
/// through the allocator).
size_t allocations_of(const Array& a, const Array& b, Array* result) {
  eval({a, b});
  const size_t before = cpu_allocator().stats().num_allocs;
  Array r = matmul(a, b);
  r.eval();
  *result = r;
  return cpu_allocator().stats().num_allocs - before;
}

// Broadcast batch axes are read with stride 0 and swapped matrix axes go to BLAS as a
// transpose flag: no operand is materialized, and the result has the bits of the product of the
// materialized (contiguous) operands.
TEST(Matmul, BroadcastBatchesAndTransposesAreReadInPlace) {
  uint32_t seed = 800;
  for (Dtype dt : {float32, float64, bfloat16, float16}) {
    SCOPED_TRACE(dtype_name(dt));
    auto r = [&](const Shape& s) { return random_array(s, dt, -1, 1, seed++); };
    Array q = r({2, 2, 3, 5, 8}), k = r({2, 2, 1, 5, 8}), v = r({2, 2, 1, 5, 8});
    std::vector<std::pair<Array, Array>> cases = {
        {r({2, 3, 5, 7}), r({1, 3, 7, 4})},              // [B,H,M,K] @ [1,H,K,N]
        {r({4, 33, 70}), r({70, 20})},                    // [B,M,K] @ [K,N]: one GEMM per matrix, not folded
        {r({1, 3, 9, 7}), r({2, 3, 7, 6})},              // the left operand broadcast
        {q, swapaxes(k, -1, -2)},                         // GQA scores: k shared by 3 query heads
        {r({2, 2, 3, 5, 5}), v},                          // GQA values
        {r({6, 300, 40}), transpose(r({50, 40}))},        // x @ w^T as in a linear layer
        {swapaxes(r({3, 40, 30}), 1, 2), r({1, 40, 20})}, // a transposed and b broadcast
    };
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE("case " + std::to_string(i));
      const Array& a = cases[i].first;
      const Array& b = cases[i].second;
      Array got;
      EXPECT_EQ(allocations_of(a, b, &got), 1u);
      // The same product over contiguous copies of the operands broadcast to the full batch.
      Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2), Shape(b.shape().begin(), b.shape().end() - 2));
      Shape fa = batch, fb = batch;
      fa.insert(fa.end(), a.shape().end() - 2, a.shape().end());
      fb.insert(fb.end(), b.shape().end() - 2, b.shape().end());
      EXPECT_TRUE(bit_equal(got, matmul(copy(broadcast_to(a, fa)), copy(broadcast_to(b, fb)))));
      EXPECT_TRUE(matches_reference(a, b, dt == float32 || dt == float64 ? 4 * tolerance_for(dt) : tolerance_for(dt)));
    }
  }
}

TEST(MatmulErrors, Messages) {
  EXPECT_THROW_MSG(matmul(zeros({2, 3}), zeros({4, 5})), ShapeError,
                   "matmul: inner dimensions differ: float32[2,3] @ float32[4,5] (3 != 4)");
  EXPECT_THROW_MSG(matmul(zeros({3}), zeros({4})), ShapeError, "matmul: inner dimensions differ: float32[3] @ float32[4] (3 != 4)");
  EXPECT_THROW_MSG(matmul(zeros({2, 3}, int32), zeros({2}, float64)), ShapeError,
                   "matmul: inner dimensions differ: int32[2,3] @ float64[2] (3 != 2)");
  EXPECT_THROW_MSG(matmul(zeros({2, 3, 4}), zeros({3, 4, 5})), ShapeError,
                   "matmul: batch dimensions cannot be broadcast: float32[2,3,4] @ float32[3,4,5] ([2] vs [3])");
  EXPECT_THROW_MSG(matmul(Array(1.0f), zeros({2, 2})), InvalidArgument, "matmul: 0-d operand in float32[] @ float32[2,2]");
  EXPECT_THROW_MSG(matmul(zeros({2}), Array(2)), InvalidArgument, "matmul: 0-d operand in float32[2] @ int32[]");
  EXPECT_THROW_MSG(matmul(Array(), zeros({2})), InvalidArgument, "matmul: an input is an empty handle");
  EXPECT_THROW_MSG(matmul(zeros({2}), Array()), InvalidArgument, "matmul: an input is an empty handle");
}

}  // namespace
}  // namespace smelt
