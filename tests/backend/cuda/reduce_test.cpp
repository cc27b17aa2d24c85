// CUDA reductions and arg reductions against the CPU: every op, dtype and axis set, row and
// column layouts, long reductions split into groups, empty axes, NaN propagation.
#include <functional>

#include "tests/backend/cuda/cuda_test_utils.h"

namespace smelt {
namespace {

using namespace smelt::test;

struct ReduceCase {
  const char* name;
  std::function<Array(const Array&, const Axes&)> fn;
};

const std::vector<ReduceCase>& reduce_cases() {
  static const std::vector<ReduceCase> c = {
      {"sum", [](const Array& a, const Axes& ax) { return sum(a, ax); }},
      {"prod", [](const Array& a, const Axes& ax) { return prod(a, ax); }},
      {"max", [](const Array& a, const Axes& ax) { return max(a, ax); }},
      {"min", [](const Array& a, const Axes& ax) { return min(a, ax); }},
      {"all", [](const Array& a, const Axes& ax) { return all(a, ax); }},
      {"any", [](const Array& a, const Axes& ax) { return any(a, ax); }},
      {"mean", [](const Array& a, const Axes& ax) { return mean(a, ax); }},
  };
  return c;
}

/// Float sums and products are summed in another order on the GPU (a tree, not the CPU's
/// pairwise blocks): compared within a relative tolerance of the magnitude sum. Everything else
/// (integers, max/min, all/any) is exact.
::testing::AssertionResult reduce_matches(const std::string& op, const Array& g, const Array& c, const Array& x,
                                          const Axes& axes) {
  const bool inexact = is_floating(c.dtype()) && (op == "sum" || op == "prod" || op == "mean");
  if (!inexact) return same_as_cpu(g, c);
  if (g.shape() != c.shape() || g.dtype() != c.dtype()) return same_as_cpu(g, c);
  auto gv = as_doubles(on_cpu(g)), cv = as_doubles(c);
  // Scale: the sum of magnitudes (for prod, the magnitude of the result) in float64.
  auto scale = as_doubles(op == "prod" ? abs(astype(c, float64)) : sum(abs(astype(x, float64)), axes));
  const double eps = tolerance_for(c.dtype());
  for (size_t i = 0; i < cv.size(); ++i) {
    if (std::isnan(cv[i]) || std::isnan(gv[i])) {
      if (std::isnan(cv[i]) != std::isnan(gv[i])) return ::testing::AssertionFailure() << "element " << i << " NaN on one side";
      continue;
    }
    if (std::isinf(cv[i]) || std::isinf(gv[i])) {
      if (cv[i] != gv[i]) return ::testing::AssertionFailure() << "element " << i << ": " << gv[i] << " vs " << cv[i];
      continue;
    }
    const double n = op == "mean" ? std::max<double>(1.0, static_cast<double>(x.size()) / std::max<size_t>(1, cv.size())) : 1.0;
    if (std::abs(gv[i] - cv[i]) > 4 * eps * (scale[i] / n) + 1e-300)
      return ::testing::AssertionFailure() << "element " << i << ": GPU " << gv[i] << ", CPU " << cv[i];
  }
  return ::testing::AssertionSuccess();
}

TEST(CudaReduce, EveryOpDtypeAndAxes) {
  SMELT_REQUIRE_GPU();
  const std::vector<Axes> axes_sets = {{}, {0}, {1}, {2}, {-1}, {0, 2}, {1, 2}, {0, 1}};
  int checked = 0;
  for (Dtype dt : all_dtypes()) {
    // Prod over small values so that it neither overflows nor underflows much.
    Array x = special_array({6, 7, 40}, dt, -2, 2, 61);
    Array xp = special_array({6, 7, 40}, dt, 0.5, 1.5, 62);
    for (auto& c : reduce_cases()) {
      const Array& in = std::string(c.name) == "prod" ? xp : x;
      Array g = on_gpu(in);
      for (const Axes& ax : axes_sets) {
        SCOPED_TRACE(std::string(c.name) + " " + dtype_name(dt) + " axes " + std::to_string(ax.size()) +
                     (ax.empty() ? "" : " first " + std::to_string(ax[0])));
        Array expected;
        try {
          expected = c.fn(in, ax);
          expected.eval();
        } catch (const Error&) {
          EXPECT_THROW(c.fn(g, ax).eval(), Error);
          continue;
        }
        EXPECT_TRUE(reduce_matches(c.name, c.fn(g, ax), expected, in, ax));
        // Non-contiguous input: the same reduction over a transposed view.
        Array tx = transpose(in, {2, 0, 1});
        EXPECT_TRUE(reduce_matches(c.name, c.fn(transpose(g, {2, 0, 1}), ax), c.fn(tx, ax), tx, ax));
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 500);
}

TEST(CudaReduce, LongReductionsAndManyOutputs) {
  SMELT_REQUIRE_GPU();
  // One output over 3M elements (split into groups), and 4096 column outputs.
  Array x = random_array({3 << 20}, float32, -1, 1, 71);
  EXPECT_TRUE(reduce_matches("sum", sum(on_gpu(x)), sum(x), x, {}));
  EXPECT_TRUE(same_as_cpu(max(on_gpu(x)), max(x)));
  Array i = random_array({3 << 20}, int32, -100, 100, 72);
  EXPECT_TRUE(same_as_cpu(sum(on_gpu(i)), sum(i)));
  Array y = random_array({300, 4096}, float32, -1, 1, 73);
  EXPECT_TRUE(reduce_matches("sum", sum(on_gpu(y), {0}), sum(y, {0}), y, {0}));
  EXPECT_TRUE(same_as_cpu(min(on_gpu(y), {0}), min(y, {0})));
  Array z = random_array({4096, 300}, float64, -1, 1, 74);
  EXPECT_TRUE(reduce_matches("mean", mean(on_gpu(z), {1}), mean(z, {1}), z, {1}));
  EXPECT_TRUE(same_as_cpu(var(on_gpu(z), {1}), var(z, {1}), 64));
}

/// The columns plan splits a group's rows over a block's eight warps; a column's order depends
/// on the row count and the group size only, so the vector kernel (inner a multiple of 16 bytes)
/// and the element kernel (inner 4099) give the same bits for the same column. Row counts that
/// leave warps without rows (5) or a short last group (20000), NaN and infinities, and the CPU's
/// result within the summation bound.
TEST(CudaReduce, ColumnsGiveTheSameBitsWithAndWithoutVectorLoads) {
  SMELT_REQUIRE_GPU();
  for (Dtype dt : {float32, bfloat16, float16, float64, int32}) {
    for (int64_t m : {5, 1000, 20000}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " m " + std::to_string(m));
      Array wide = astype(random_array({m, 4099}, float32, -2, 2, 91), dt);
      Array narrow = copy(slice(wide, {0, 0}, {m, 4096}));  // contiguous, 16-byte aligned rows
      Array wg = on_gpu(wide), ng = on_gpu(narrow);
      Array by_elements = slice(sum(wg, {0}), {0}, {4096});
      EXPECT_TRUE(same_as_cpu(sum(ng, {0}), on_cpu(by_elements)));
      EXPECT_TRUE(reduce_matches("sum", sum(ng, {0}), sum(narrow, {0}), narrow, {0}));
      Array special = special_array({m, 4096}, dt, -2, 2, 92);
      Array sg = on_gpu(special);
      EXPECT_TRUE(same_as_cpu(max(sg, {0}), max(special, {0})));
      EXPECT_TRUE(reduce_matches("sum", sum(sg, {0}), sum(special, {0}), special, {0}));
      Array x3 = astype(random_array({3, m, 40}, float32, -2, 2, 93), dt);
      EXPECT_TRUE(reduce_matches("sum", sum(on_gpu(x3), {1}), sum(x3, {1}), x3, {1}));
      // Again: the split plan's counters were left at zero by the last call.
      EXPECT_TRUE(same_as_cpu(sum(ng, {0}), on_cpu(by_elements)));
    }
  }
  // One-byte accumulators (all, any) combined by the last block of each tile (three groups).
  Array b = random_array({4000, 700}, float32, -2, 2, 94) > 1.9f;
  Array bg = on_gpu(b);
  EXPECT_TRUE(same_as_cpu(any(bg, {0}), any(b, {0})));
  EXPECT_TRUE(same_as_cpu(all(logical_not(bg), {0}), all(logical_not(b), {0})));
}

/// Rows of 2048 to 16383 elements take a block of 256 threads in the row order, longer ones 512;
/// with 1024 rows or more one warp replays each row's block. The replay gives the block's bits:
/// compared with the same rows reduced 550 at a time (the block kernel), for row lengths that
/// leave rows unaligned (3001 two-byte elements) or a partial last vector.
TEST(CudaReduce, WarpReplayOfLongRowsGivesTheBlockBits) {
  SMELT_REQUIRE_GPU();
  struct Case {
    Dtype dt;
    int64_t n;
  };
  for (const Case& c : {Case{float32, 3001}, Case{bfloat16, 3001}, Case{float16, 4096}, Case{float64, 2500},
                        Case{int32, 5000}, Case{float32, 20000}, Case{bfloat16, 16384}}) {
    const int64_t rows = 1100;
    Array x = astype(random_array({rows, c.n}, float32, -2, 2, 81), c.dt);
    Array xs = special_array({rows, c.n}, c.dt, -2, 2, 82);  // NaN and infinities for max/min
    for (auto& r : reduce_cases()) {
      const std::string op = r.name;
      if (op == "prod" || op == "all" || op == "any") continue;
      SCOPED_TRACE(op + " " + dtype_name(c.dt) + " n " + std::to_string(c.n));
      const Array& in = op == "sum" || op == "mean" ? x : xs;
      Array g = on_gpu(in);
      Array whole = r.fn(g, {1});
      Array halves = concatenate({r.fn(slice(g, {0, 0}, {550, c.n}), {1}), r.fn(slice(g, {550, 0}, {rows, c.n}), {1})});
      EXPECT_TRUE(same_as_cpu(whole, on_cpu(halves)));
      Array expected = r.fn(in, {1});
      EXPECT_TRUE(reduce_matches(op, whole, expected, in, {1}));
    }
  }
}

TEST(CudaReduce, EmptyAndNaN) {
  SMELT_REQUIRE_GPU();
  Array e = zeros({3, 0}, float32);
  EXPECT_TRUE(same_as_cpu(sum(on_gpu(e), {1}), sum(e, {1})));
  EXPECT_TRUE(same_as_cpu(prod(on_gpu(e), {1}), prod(e, {1})));
  EXPECT_TRUE(same_as_cpu(all(on_gpu(e), {1}), all(e, {1})));
  EXPECT_TRUE(same_as_cpu(mean(on_gpu(e), {1}), mean(e, {1})));
  EXPECT_TRUE(same_as_cpu(sum(on_gpu(e), {0}), sum(e, {0})));
  EXPECT_THROW(max(on_gpu(e), {1}), InvalidArgument);
  Array n = Array({1.0f, NAN, 3.0f, -INFINITY});
  EXPECT_TRUE(same_as_cpu(max(on_gpu(n)), max(n)));
  EXPECT_TRUE(same_as_cpu(min(on_gpu(n)), min(n)));
  EXPECT_TRUE(same_as_cpu(sum(on_gpu(n)), sum(n)));
  EXPECT_TRUE(same_as_cpu(sum(on_gpu(Array(5))), sum(Array(5))));
}

TEST(CudaArgReduce, EveryDtypeAxisAndTieRule) {
  SMELT_REQUIRE_GPU();
  for (Dtype dt : all_dtypes()) {
    // Few distinct values: many ties, so first/last occurrence matters.
    Array x = special_array({5, 6, 7}, dt, -2, 2, 81);
    Array g = on_gpu(x);
    for (int axis : {0, 1, 2, -1}) {
      for (bool last : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " axis " + std::to_string(axis) + (last ? " last" : " first"));
        EXPECT_TRUE(same_as_cpu(argmax(g, axis, false, last), argmax(x, axis, false, last)));
        EXPECT_TRUE(same_as_cpu(argmin(g, axis, true, last), argmin(x, axis, true, last)));
        EXPECT_TRUE(same_as_cpu(argmax(transpose(g), axis, false, last), argmax(transpose(x), axis, false, last)));
      }
    }
    EXPECT_TRUE(same_as_cpu(argmin(g), argmin(x)));
  }
  EXPECT_THROW(argmax(on_gpu(zeros({3, 0}, float32)), 1), InvalidArgument);
  EXPECT_TRUE(same_as_cpu(argmax(on_gpu(zeros({0, 3}, float32)), 1), argmax(zeros({0, 3}, float32), 1)));
}

}  // namespace
}  // namespace smelt
