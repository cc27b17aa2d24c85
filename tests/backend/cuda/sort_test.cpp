// CUDA Sort, ArgSort and TopK against the CPU, bit for bit: every dtype, axis and order, ties
// (stable order, lower index first), NaN payloads and signed zeros in input order, short rows
// (block bitonic sort) and long ones (radix sort, row passes), non-contiguous and empty inputs.
#include <cstring>
#include <optional>
#include <string>

#include "tests/backend/cuda/cuda_test_utils.h"

namespace smelt {
namespace {

using namespace smelt::test;

/// Few distinct values (many ties): halves in [-3, 3) (integers truncate them), and for floats
/// NaN, ±inf, ±0 and ±1 every 7th element from position 3.
Array tied_array(const Shape& shape, Dtype dtype, uint32_t seed) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  auto v = random_values(static_cast<size_t>(n), -3.0, 3.0, seed);
  for (auto& x : v) x = std::floor(x * 2.0) / 2.0;
  if (is_floating(dtype)) {
    const double specials[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                               -std::numeric_limits<double>::infinity(), 0.0, -0.0, 1.0, -1.0};
    for (size_t i = 3, j = 0; i < v.size(); i += 7, ++j) v[i] = specials[j % 7];
  }
  Array r = astype(Array(v, shape), dtype);
  r.eval();
  return r;
}

/// The GPU result is on the GPU and equals the CPU's in shape, dtype and every bit (sorting moves
/// the input's own bits: NaN payloads and the signs of zeros included).
::testing::AssertionResult exact(const Array& g, const Array& c) {
  if (g.device() != gpu()) return ::testing::AssertionFailure() << "the result lives on " << g.device().str();
  return bit_equal(on_cpu(g), c);
}

/// Sort, argsort (both orders) and topk (k = 1, 3 and the whole axis, largest and smallest) of
/// `x` (CPU) and `g` (the same values on the GPU, any layout) along `axis`.
void check_all(const Array& x, const Array& g, int axis) {
  const int ax = axis < 0 ? axis + x.ndim() : axis;
  SCOPED_TRACE(std::string(dtype_name(x.dtype())) + " " + shape_to_string(x.shape()) + " axis " +
               std::to_string(axis));
  EXPECT_TRUE(exact(sort(g, axis), sort(x, axis))) << "sort";
  for (bool desc : {false, true}) EXPECT_TRUE(exact(argsort(g, axis, desc), argsort(x, axis, desc))) << "argsort";
  const int64_t n = x.shape()[ax];
  for (int64_t k : {int64_t{1}, int64_t{3}, n}) {
    if (k > n) continue;
    for (bool largest : {true, false}) {
      auto [gv, gi] = topk(g, k, axis, largest);
      auto [cv, ci] = topk(x, k, axis, largest);
      EXPECT_TRUE(exact(gv, cv)) << "topk values k " << k << (largest ? " largest" : " smallest");
      EXPECT_TRUE(exact(gi, ci)) << "topk indices k " << k << (largest ? " largest" : " smallest");
    }
  }
}

TEST(CudaSort, EveryDtypeAxisAndOrder) {
  SMELT_REQUIRE_GPU();
  uint32_t seed = 100;
  for (Dtype dt : all_dtypes()) {
    Array x = tied_array({4, 6, 50}, dt, ++seed);
    Array g = on_gpu(x);
    for (int axis : {0, 1, 2, -1, -3}) check_all(x, g, axis);
    // Transposed (the sorted axis strided, the rows not contiguous).
    check_all(transpose(x, {2, 0, 1}), transpose(g, {2, 0, 1}), 0);
    check_all(transpose(x, {2, 0, 1}), transpose(g, {2, 0, 1}), -1);
    // Negative steps along the sorted axis and another one.
    const std::vector<int64_t> start = {3, 0, 49}, stop = {-5, 6, -51}, step = {-1, 2, -2};
    check_all(slice(x, start, stop, step), slice(g, start, stop, step), 2);
    check_all(slice(x, start, stop, step), slice(g, start, stop, step), 0);
  }
}

TEST(CudaSort, LongRowsTakeTheRadixSort) {
  SMELT_REQUIRE_GPU();
  uint32_t seed = 200;
  for (Dtype dt : all_dtypes()) {
    // Rows of 5000 (> 4096): every key width, both orders, ties across tiles of 4096.
    Array x = tied_array({3, 5000}, dt, ++seed);
    Array g = on_gpu(x);
    SCOPED_TRACE(dtype_name(dt));
    EXPECT_TRUE(exact(sort(g, 1), sort(x, 1)));
    EXPECT_TRUE(exact(argsort(g, -1, true), argsort(x, -1, true)));
    EXPECT_TRUE(exact(argsort(g, -1, false), argsort(x, -1, false)));
    auto [gv, gi] = topk(g, 17, 1, true);
    auto [cv, ci] = topk(x, 17, 1, true);
    EXPECT_TRUE(exact(gv, cv));
    EXPECT_TRUE(exact(gi, ci));
  }
  // The sorted axis outermost and strided (rows read with stride 3), smallest k.
  Array y = tied_array({6000, 3}, float32, 230);
  check_all(y, on_gpu(y), 0);
  // One long row of continuous values (few ties) in float64 and int64.
  for (Dtype dt : {float64, int64}) {
    Array z = astype(random_array({100003}, float64, -1e6, 1e6, 231), dt);
    z.eval();
    check_all(z, on_gpu(z), 0);
  }
  // 300 rows: the row number takes two extra 8-bit passes.
  Array w = tied_array({300, 4100}, int16, 232);
  Array wg = on_gpu(w);
  EXPECT_TRUE(exact(sort(wg, 1), sort(w, 1)));
  EXPECT_TRUE(exact(argsort(wg, 1, true), argsort(w, 1, true)));
  // Transposed long rows.
  Array t = tied_array({4500, 5}, bfloat16, 233);
  check_all(transpose(t), transpose(on_gpu(t)), 1);
}

/// A float array of `n` elements cycling through bit patterns that stress the comparator: both
/// zeros, NaNs with different payloads and signs, infinities, subnormals, ties.
Array float_specials(Dtype dtype, int64_t n) {
  std::vector<uint64_t> pats;
  switch (dtype) {
    case Dtype::Float16: pats = {0x0000, 0x8000, 0x7e00, 0xfe01, 0x7c01, 0x7c00, 0xfc00, 0x3c00, 0xbc00, 0x0001, 0x8001, 0x3c00, 0x8000, 0x0000}; break;
    case Dtype::BFloat16: pats = {0x0000, 0x8000, 0x7fc0, 0xffc1, 0x7f81, 0x7f80, 0xff80, 0x3f80, 0xbf80, 0x0001, 0x8001, 0x3f80, 0x8000, 0x0000}; break;
    case Dtype::Float32:
      pats = {0x00000000, 0x80000000, 0x7fc00000, 0xffc00001, 0x7f800001, 0x7f800000, 0xff800000, 0x3f800000,
              0xbf800000, 0x00000001, 0x80000001, 0x3f800000, 0x80000000, 0x00000000};
      break;
    default:
      pats = {0x0000000000000000ull, 0x8000000000000000ull, 0x7ff8000000000000ull, 0xfff8000000000001ull,
              0x7ff0000000000001ull, 0x7ff0000000000000ull, 0xfff0000000000000ull, 0x3ff0000000000000ull,
              0xbff0000000000000ull, 0x0000000000000001ull, 0x8000000000000001ull, 0x3ff0000000000000ull,
              0x8000000000000000ull, 0x0000000000000000ull};
      break;
  }
  const size_t isz = size_of(dtype);
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * isz);
  auto noise = random_values(static_cast<size_t>(n), 0, 1, 7);
  for (int64_t i = 0; i < n; ++i) {
    // Mostly the patterns in a scrambled order, so equal values are far apart.
    const uint64_t p = pats[static_cast<size_t>(noise[i] * static_cast<double>(pats.size()))];
    std::memcpy(bytes.data() + static_cast<size_t>(i) * isz, &p, isz);  // little-endian low bytes
  }
  return Array(bytes.data(), {n}, dtype);
}

TEST(CudaSort, NaNPayloadsAndSignedZerosKeepTheCpusOrder) {
  SMELT_REQUIRE_GPU();
  for (Dtype dt : {float16, bfloat16, float32, float64}) {
    for (int64_t n : {int64_t{29}, int64_t{5003}}) {  // block and radix paths
      Array x = float_specials(dt, n);
      x.eval();
      check_all(x, on_gpu(x), 0);
      // The same values as rows of a 2-D array, sorted along the other axis too.
      if (n == 29) {
        Array m = reshape(concatenate({x, x, x}), {3, 29});
        check_all(m, on_gpu(m), 1);
        check_all(m, on_gpu(m), 0);
      }
    }
  }
}

TEST(CudaSort, RowLengthsAroundTheBlockLimit) {
  SMELT_REQUIRE_GPU();
  // Powers of two and their neighbours (padding of the bitonic network), the 4096 limit, rows
  // per block for short rows, and many short rows.
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{5}, int64_t{31}, int64_t{33}, int64_t{1000},
                    int64_t{2048}, int64_t{2049}, int64_t{4095}, int64_t{4096}, int64_t{4097}, int64_t{8192}}) {
    Array x = tied_array({3, n}, float32, static_cast<uint32_t>(300 + n));
    check_all(x, on_gpu(x), 1);
  }
  Array many = tied_array({20000, 7}, int32, 301);
  Array mg = on_gpu(many);
  EXPECT_TRUE(exact(sort(mg, 1), sort(many, 1)));
  EXPECT_TRUE(exact(argsort(mg, 1, true), argsort(many, 1, true)));
  auto [gv, gi] = topk(mg, 2, 1, false);
  auto [cv, ci] = topk(many, 2, 1, false);
  EXPECT_TRUE(exact(gv, cv));
  EXPECT_TRUE(exact(gi, ci));
}

TEST(CudaSort, BroadcastInputsAreAllTies) {
  SMELT_REQUIRE_GPU();
  // Along the broadcast axis every element is equal: the stable order is the index order.
  Array row = tied_array({1, 40}, float16, 400);
  Array x = broadcast_to(row, {9, 40});
  Array g = broadcast_to(on_gpu(row), {9, 40});
  check_all(x, g, 0);
  check_all(x, g, 1);
  Array col = tied_array({5000, 1}, uint16, 401);  // long broadcast rows: radix
  check_all(broadcast_to(col, {5000, 2}), broadcast_to(on_gpu(col), {5000, 2}), 0);
}

// unique on a GPU array (ONNX Unique on cuda): computed on the host from one read-back, its four
// results on the array's device and equal to the CPU's, with and without an axis, sorted or not.
TEST(CudaSort, UniqueOfAGpuArrayMatchesTheCpu) {
  SMELT_REQUIRE_GPU();
  Array x = tied_array({6, 4}, float32, 402);
  Array g = on_gpu(x);
  for (std::optional<int> axis : {std::optional<int>{}, std::optional<int>{0}, std::optional<int>{-1}})
    for (bool sorted : {true, false}) {
      SCOPED_TRACE(std::string(axis ? "axis " + std::to_string(*axis) : "no axis") + (sorted ? " sorted" : ""));
      const UniqueResult gr = unique(g, axis, sorted), cr = unique(x, axis, sorted);
      for (const Array* a : {&gr.values, &gr.indices, &gr.inverse, &gr.counts}) EXPECT_EQ(a->device(), g.device());
      EXPECT_TRUE(exact(gr.values, cr.values));
      EXPECT_TRUE(exact(gr.indices, cr.indices));
      EXPECT_TRUE(exact(gr.inverse, cr.inverse));
      EXPECT_TRUE(exact(gr.counts, cr.counts));
    }
}

TEST(CudaSort, EmptyArraysAndZeroK) {
  SMELT_REQUIRE_GPU();
  for (const Shape& s : {Shape{0, 5}, Shape{5, 0}, Shape{0}, Shape{2, 0, 3}}) {
    Array x = zeros(s, float32);
    Array g = on_gpu(x);
    for (int axis = 0; axis < static_cast<int>(s.size()); ++axis) {
      SCOPED_TRACE(shape_to_string(s) + " axis " + std::to_string(axis));
      EXPECT_TRUE(exact(sort(g, axis), sort(x, axis)));
      EXPECT_TRUE(exact(argsort(g, axis), argsort(x, axis)));
      auto [gv, gi] = topk(g, 0, axis);
      auto [cv, ci] = topk(x, 0, axis);
      EXPECT_TRUE(exact(gv, cv));
      EXPECT_TRUE(exact(gi, ci));
    }
  }
  Array x = tied_array({4, 9}, int8, 500);
  auto [gv, gi] = topk(on_gpu(x), 0, 1);
  auto [cv, ci] = topk(x, 0, 1);
  EXPECT_TRUE(exact(gv, cv));
  EXPECT_TRUE(exact(gi, ci));
}

TEST(CudaSort, ErrorsMatchTheCpu) {
  SMELT_REQUIRE_GPU();
  // Argument errors are the ops' own, the same for both devices.
  Array s = on_gpu(Array(3.0f));
  EXPECT_THROW_MSG(argsort(s), InvalidArgument, "argsort: axis -1 is out of range for an array of rank 0");
  EXPECT_THROW_MSG(topk(on_gpu(zeros({2, 3})), 4, 1), InvalidArgument, "topk: k = 4 is outside [0, 3]");
  // A layout that the CUDA kernels cannot index: 11 other axes that do not merge (a reversed
  // transpose of a 12-d array) raises UnsupportedError naming the primitive.
  Array big = on_gpu(zeros(Shape(12, 2), float32));
  Axes rev;
  for (int i = 11; i >= 0; --i) rev.push_back(i);
  EXPECT_THROW_MSG(sort(transpose(big, rev), -1).eval(), UnsupportedError,
                   "Sort: CUDA kernels take at most 10 non-mergeable axes");
  EXPECT_THROW_MSG(argsort(transpose(big, rev), 0).eval(), UnsupportedError,
                   "ArgSort: CUDA kernels take at most 10 non-mergeable axes");
  EXPECT_THROW_MSG(topk(transpose(big, rev), 1, 0).first.eval(), UnsupportedError,
                   "TopK: CUDA kernels take at most 10 non-mergeable axes");
}

}  // namespace
}  // namespace smelt
