// Tests for max_pool and avg_pool against a naive float64 reference.
#include <bit>

#include "ops/conv_reference.h"
#include "smelt/compile.h"

namespace smelt {
namespace {

using test::as_doubles;
using test::random_array;

PoolOptions pool_opts(std::vector<int64_t> kernel = {}, std::vector<int64_t> strides = {}, std::vector<int64_t> lo = {},
                      std::vector<int64_t> hi = {}, std::vector<int64_t> dil = {}, bool ceil_mode = false,
                      bool count_include_pad = false) {
  PoolOptions o;
  o.kernel = std::move(kernel);
  o.strides = std::move(strides);
  o.padding_lo = std::move(lo);
  o.padding_hi = std::move(hi);
  o.dilations = std::move(dil);
  o.ceil_mode = ceil_mode;
  o.count_include_pad = count_include_pad;
  return o;
}

struct PoolCase {
  const char* name;
  Shape x;
  PoolOptions o;
};

std::vector<PoolCase> pool_cases() {
  return {
      {"1d_plain", {2, 3, 10}, pool_opts({3})},
      {"1d_stride_pad", {2, 2, 11}, pool_opts({3}, {2}, {1}, {1})},
      {"1d_ceil", {1, 2, 10}, pool_opts({3}, {2}, {}, {}, {}, true)},
      {"1d_ceil_pad_include", {1, 2, 6}, pool_opts({3}, {2}, {1}, {1}, {}, true, true)},
      {"1d_dilated_asym", {2, 2, 13}, pool_opts({3}, {2}, {2}, {0}, {3})},
      {"2d_plain", {2, 3, 8, 9}, pool_opts({2, 2}, {2, 2})},
      {"2d_pad_include", {1, 4, 7, 7}, pool_opts({3, 3}, {2, 2}, {1, 1}, {1, 1}, {}, false, true)},
      {"2d_ceil_include", {2, 2, 9, 8}, pool_opts({3, 2}, {2, 3}, {1, 0}, {1, 1}, {}, true, true)},
      {"2d_ceil_exclude", {2, 2, 9, 8}, pool_opts({3, 2}, {2, 3}, {1, 0}, {1, 1}, {}, true, false)},
      {"2d_dilated", {1, 3, 10, 11}, pool_opts({2, 3}, {1, 2}, {1, 2}, {2, 0}, {3, 2})},
      {"2d_dilated_ceil", {1, 2, 10, 9}, pool_opts({2, 2}, {3, 2}, {1, 1}, {0, 1}, {2, 3}, true, true)},
      {"2d_global", {2, 5, 6, 7}, pool_opts({6, 7})},
      {"3d_plain", {1, 2, 4, 5, 6}, pool_opts({2, 2, 2}, {2, 2, 2})},
      {"3d_all_options", {2, 2, 7, 6, 8}, pool_opts({2, 3, 2}, {2, 1, 3}, {1, 1, 0}, {0, 1, 1}, {2, 1, 2}, true, true)},
  };
}

void check_case(const PoolCase& c, Dtype dtype, bool is_max, uint32_t seed) {
  SCOPED_TRACE(std::string(c.name) + " " + dtype_name(dtype) + (is_max ? " max" : " avg"));
  // Max pools negative values (where unsigned allows): padding must never win a max.
  const bool u = is_unsigned_integral(dtype);
  Array x = is_max ? random_array(c.x, dtype, u ? 0 : -20, u ? 200 : -0.5, seed)
                   : random_array(c.x, dtype, u ? 0 : -20, u ? 40 : 20, seed);
  Shape shape;
  auto want = test::ref_pool(as_doubles(x), c.x, c.o, is_max, is_integral(dtype), &shape);
  Array y = is_max ? max_pool(x, c.o) : avg_pool(x, c.o);
  EXPECT_EQ(y.dtype(), dtype);
  double tol = is_integral(dtype) ? 0.0 : test::tolerance_for(dtype);
  EXPECT_TRUE(test::close_to(y, shape, want, std::vector<double>(want.size(), 0.0), tol));
}

TEST(Pool, MaxMatchesReference) {
  uint32_t seed = 1;
  for (auto& c : pool_cases())
    for (Dtype d : {float32, float64, float16, bfloat16, int32, int8, uint8, int64, uint64})
      check_case(c, d, true, seed++);
}

TEST(Pool, AvgMatchesReference) {
  uint32_t seed = 500;
  for (auto& c : pool_cases())
    for (Dtype d : {float32, float64, float16, bfloat16, int32, int16, uint16, int64, uint32})
      check_case(c, d, false, seed++);
}

TEST(Pool, KernelsWiderThanTheInputReadOnlyTheInput) {
  // Only the kernel columns that read the input are walked (a kernel of 2^32 with SAME padding
  // walked every column per row): windows mostly of padding, kernels whose reading columns have
  // gaps (stride beyond the input), dilated ones, and more reading columns (70,000) than the
  // kernel keeps a table of, against the naive reference over every window position. Every
  // window reads the input (windows of only padding: Pool.WindowsOfOnlyPadding).
  const std::vector<PoolCase> cases{
      {"1d_wide_same", {1, 2, 5}, pool_opts({40}, {}, {19}, {20})},
      {"1d_wide_gaps", {2, 1, 3}, pool_opts({20}, {9}, {19}, {19})},
      {"1d_wide_gaps_dilated", {1, 2, 4}, pool_opts({9}, {11}, {20}, {20}, {3})},
      {"2d_wide_ceil", {1, 2, 3, 4}, pool_opts({7, 30}, {2, 13}, {3, 30}, {3, 30}, {1, 2}, true, true)},
      {"1d_many_columns", {1, 1, 256}, pool_opts({70000}, {256}, {69999}, {69999})},
  };
  uint32_t seed = 900;
  for (const auto& c : cases)
    for (bool is_max : {true, false})
      for (Dtype d : {float32, int32}) check_case(c, d, is_max, seed++);
  for (bool include_pad : {false, true}) {
    PoolCase c{"1d_many_columns_f64", {1, 1, 256}, pool_opts({70000}, {256}, {69999}, {69999}, {}, false, include_pad)};
    check_case(c, float64, false, seed++);
  }
}

TEST(Pool, OutputShapesFollowTheCeilModeRule) {
  // ceil((10 - 3) / 2) + 1 = 5 windows: the last starts at 8, inside the input.
  EXPECT_EQ(max_pool(zeros({1, 1, 10}), pool_opts({3}, {2}, {}, {}, {}, true)).shape(), (Shape{1, 1, 5}));
  EXPECT_EQ(max_pool(zeros({1, 1, 10}), pool_opts({3}, {2})).shape(), (Shape{1, 1, 4}));
  // ceil((5 + 2 - 2) / 2) + 1 = 4, but the 4th window would start at 6 - 1 = 5, past the input: 3.
  EXPECT_EQ(avg_pool(zeros({1, 1, 5}), pool_opts({2}, {2}, {1}, {1}, {}, true)).shape(), (Shape{1, 1, 3}));
  // Strides default to 1.
  EXPECT_EQ(max_pool(zeros({2, 3, 6, 5}), pool_opts({2, 2})).shape(), (Shape{2, 3, 5, 4}));
}

TEST(Pool, KnownValues) {
  Array x(std::vector<float>{1, 2, 3, 4, 5, 6}, {1, 1, 6});
  // Windows start at -1, 1, 3, 5; the last covers 5, right padding 6 and 7 beyond it.
  PoolOptions o = pool_opts({3}, {2}, {1}, {1}, {}, true, true);
  EXPECT_EQ(avg_pool(x, o).to_vector<float>(), (std::vector<float>{1.0f, 3.0f, 5.0f, 3.0f}));
  o.count_include_pad = false;
  EXPECT_EQ(avg_pool(x, o).to_vector<float>(), (std::vector<float>{1.5f, 3.0f, 5.0f, 6.0f}));
  EXPECT_EQ(max_pool(x, o).to_vector<float>(), (std::vector<float>{2, 4, 6, 6}));
  // Padding never wins a max, even over negative values.
  Array neg(std::vector<float>{-5, -4, -3}, {1, 1, 3});
  EXPECT_EQ(max_pool(neg, pool_opts({2}, {1}, {1}, {1})).to_vector<float>(), (std::vector<float>{-5, -4, -3, -3}));
  // Integer averages round toward zero.
  Array xi(std::vector<int32_t>{-3, -4, 3, 4}, {1, 1, 4});
  EXPECT_EQ(avg_pool(xi, pool_opts({2}, {2})).to_vector<int32_t>(), (std::vector<int32_t>{-3, 3}));
}

// Windows wholly inside the input with a column stride above 1 (or short rows) take their own
// loop (pool_max_inside); it must give the general loop's bits: equal values keep the first one
// (-0 before +0 stays -0), and of several NaNs in a window the last one wins.
TEST(Pool, MaxOfInnerWindowsKeepsTheGeneralLoopsBits) {
  const float nan1 = std::bit_cast<float>(0x7fc00001u), nan2 = std::bit_cast<float>(0xffc00002u);
  Array x(std::vector<float>{-0.0f, 0.0f, 0.0f, -0.0f, nan1, 1.0f, nan2, 2.0f, 3.0f, nan1}, {1, 1, 10});
  const std::vector<float> got = max_pool(x, pool_opts({2}, {2})).to_vector<float>();
  const std::vector<uint32_t> want{std::bit_cast<uint32_t>(-0.0f), 0u, std::bit_cast<uint32_t>(nan1),
                                   std::bit_cast<uint32_t>(nan2), std::bit_cast<uint32_t>(nan1)};
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), want[i]) << "output " << i;
  // Against the general loop (column stride 1 over rows longer than 8): the stride-2 outputs are
  // every second output of the stride-1 pooling, bit for bit, NaNs and signed zeros included;
  // rows of 10 outputs and of 75 (more than one tile of 64 outputs).
  for (int64_t w : {21, 151})
    for (Dtype d : {float32, float64, float16, int32, uint8}) {
      SCOPED_TRACE(dtype_name(d) + std::string(" width ") + std::to_string(w));
      const bool u = is_unsigned_integral(d);
      std::vector<float> v = random_array({2, 3, 6, w}, float32, u ? 0 : -4, 4, 21).to_vector<float>();
      if (is_floating(d))
        for (size_t i = 0; i < v.size(); i += 7) v[i] = i % 3 == 0 ? (i % 2 ? nan1 : nan2) : (i % 2 ? -0.0f : 0.0f);
      const Array xs = astype(Array(v, {2, 3, 6, w}), d);
      const Array fast = max_pool(xs, pool_opts({2, 3}, {2, 2}));
      const Array general = max_pool(xs, pool_opts({2, 3}, {2, 1}));
      ASSERT_EQ(general.shape(), (Shape{2, 3, 3, w - 2}));
      EXPECT_TRUE(test::bit_equal(fast, slice(general, {0, 0, 0, 0}, {2, 3, 3, w - 2}, {1, 1, 1, 2})));
    }
}

TEST(Pool, NanAndInfinities) {
  float nan = std::nanf("");
  Array x(std::vector<float>{1, nan, 3, -INFINITY, -INFINITY, INFINITY, 2}, {1, 1, 7});
  auto m = max_pool(x, pool_opts({2})).to_vector<float>();
  ASSERT_EQ(m.size(), 6u);
  EXPECT_TRUE(std::isnan(m[0]) && std::isnan(m[1]));
  EXPECT_EQ(m[2], 3.0f);
  EXPECT_EQ(m[3], -INFINITY);
  EXPECT_EQ(m[4], INFINITY);
  EXPECT_EQ(m[5], INFINITY);
  // NaN first in the window, then larger values: still NaN.
  Array y(std::vector<double>{std::nan(""), 5, 7}, {1, 1, 3});
  EXPECT_TRUE(std::isnan(max_pool(y, pool_opts({3})).item<double>()));
  auto a = avg_pool(x, pool_opts({2})).to_vector<float>();
  EXPECT_TRUE(std::isnan(a[0]) && std::isnan(a[1]));
  EXPECT_EQ(a[3], -INFINITY);
  EXPECT_TRUE(std::isnan(a[4]));  // -inf + inf
}

TEST(Pool, WindowsOfOnlyPadding) {
  // With dilation 2 the middle window reads positions -1 and 1: outside a length-1 input.
  Array x(std::vector<float>{4}, {1, 1, 1});
  PoolOptions o = pool_opts({2}, {1}, {2}, {2}, {2});
  EXPECT_EQ(max_pool(x, o).to_vector<float>(), (std::vector<float>{4, -INFINITY, 4}));
  auto a = avg_pool(x, o).to_vector<float>();
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0], 4.0f);
  EXPECT_TRUE(std::isnan(a[1]));
  EXPECT_EQ(a[2], 4.0f);
  EXPECT_EQ(max_pool(astype(x, int16), o).to_vector<int16_t>(), (std::vector<int16_t>{4, INT16_MIN, 4}));
  EXPECT_EQ(avg_pool(astype(x, int16), o).to_vector<int16_t>(), (std::vector<int16_t>{4, 0, 4}));
  o.count_include_pad = true;
  EXPECT_EQ(avg_pool(x, o).to_vector<float>(), (std::vector<float>{2.0f, 0.0f, 2.0f}));
  // An empty spatial axis that only padding covers.
  Array e = avg_pool(zeros({1, 2, 0}), pool_opts({2}, {1}, {1}, {1}, {}, false, true));
  EXPECT_EQ(as_doubles(e), (std::vector<double>{0, 0}));
}

TEST(Pool, ZeroSizeBatch) {
  EXPECT_EQ(max_pool(zeros({0, 3, 8, 8}), pool_opts({2, 2}, {2, 2})).shape(), (Shape{0, 3, 4, 4}));
  EXPECT_EQ(avg_pool(zeros({2, 0, 8}), pool_opts({2})).shape(), (Shape{2, 0, 7}));
  EXPECT_TRUE(as_doubles(max_pool(zeros({0, 3, 8, 8}), pool_opts({2, 2}))).empty());
}

TEST(Pool, NonContiguousInput) {
  Array base = random_array({2, 9, 3, 10}, float32, -5, 5, 7);  // [N, W, C, H]
  Array x = transpose(base, {0, 2, 3, 1});
  PoolOptions o = pool_opts({3, 2}, {2, 2}, {1, 0}, {1, 1}, {1, 2}, true, true);
  EXPECT_TRUE(test::bit_equal(max_pool(x, o), max_pool(copy(x), o)));
  EXPECT_TRUE(test::bit_equal(avg_pool(x, o), avg_pool(copy(x), o)));
  Array s = slice(random_array({2, 3, 21}, int32, -9, 9, 8), {0, 0, 20}, {2, 3, -22}, {1, 1, -3});
  EXPECT_TRUE(test::bit_equal(max_pool(s, pool_opts({2})), max_pool(copy(s), pool_opts({2}))));
  Array b = broadcast_to(random_array({1, 2, 1, 6}, float64, -1, 1, 9), {3, 2, 4, 6});
  EXPECT_TRUE(test::bit_equal(avg_pool(b, pool_opts({2, 2})), avg_pool(copy(b), pool_opts({2, 2}))));
}

TEST(Pool, ResultDoesNotDependOnThreadCount) {
  const int saved = cpu_threads();
  auto cases = pool_cases();
  cases.push_back({"big", {4, 8, 64, 64}, pool_opts({3, 3}, {1, 1}, {1, 1}, {1, 1}, {}, false, true)});
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    Array x = random_array(c.x, float32, -2, 2, 10);
    set_cpu_threads(1);
    Array m1 = max_pool(x, c.o), a1 = avg_pool(x, c.o);
    eval({m1, a1});
    set_cpu_threads(3);
    Array m3 = max_pool(x, c.o), a3 = avg_pool(x, c.o);
    eval({m3, a3});
    EXPECT_TRUE(test::bit_equal(m1, m3));
    EXPECT_TRUE(test::bit_equal(a1, a3));
  }
  set_cpu_threads(saved);
}

TEST(PoolErrors, Messages) {
  Array x = zeros({1, 2, 6, 6});
  EXPECT_THROW_MSG(max_pool(Array(), pool_opts({2})), InvalidArgument, "max_pool: an input is an empty handle");
  EXPECT_THROW_MSG(
      max_pool(zeros({6, 6}), pool_opts({2})), ShapeError,
      "max_pool: input must have rank 3 to 5 ([N, C, D...] with 1 to 3 spatial dimensions), got float32[6,6]");
  EXPECT_THROW_MSG(avg_pool(zeros({1, 1, 1, 1, 1, 1}), pool_opts({1, 1, 1, 1})), ShapeError,
                   "avg_pool: input must have rank 3 to 5");
  EXPECT_THROW_MSG(max_pool(astype(x, bool_), pool_opts({2, 2})), DtypeError,
                   "max_pool: bool is not supported (input bool[1,2,6,6])");
  EXPECT_THROW_MSG(avg_pool(astype(x, bool_), pool_opts({2, 2})), DtypeError, "avg_pool: bool is not supported");
  EXPECT_THROW_MSG(max_pool(x, pool_opts({2})), InvalidArgument,
                   "max_pool: kernel [2] has 1 entries but input float32[1,2,6,6] has 2 spatial dimensions");
  EXPECT_THROW_MSG(avg_pool(x, pool_opts()), InvalidArgument, "avg_pool: kernel [] has 0 entries");
  EXPECT_THROW_MSG(max_pool(x, pool_opts({2, 0})), InvalidArgument, "max_pool: kernel must be positive, got [2,0]");
  EXPECT_THROW_MSG(max_pool(x, pool_opts({2, 2}, {2})), InvalidArgument, "max_pool: strides [2] has 1 entries");
  EXPECT_THROW_MSG(max_pool(x, pool_opts({2, 2}, {}, {1})), InvalidArgument, "max_pool: padding_lo [1] has 1 entries");
  EXPECT_THROW_MSG(max_pool(x, pool_opts({2, 2}, {}, {}, {1, 1, 1})), InvalidArgument,
                   "max_pool: padding_hi [1,1,1] has 3 entries");
  EXPECT_THROW_MSG(max_pool(x, pool_opts({2, 2}, {}, {}, {}, {2})), InvalidArgument,
                   "max_pool: dilations [2] has 1 entries");
  EXPECT_THROW_MSG(avg_pool(x, pool_opts({2, 2}, {0, 1})), InvalidArgument,
                   "avg_pool: strides must be positive, got [0,1]");
  EXPECT_THROW_MSG(avg_pool(x, pool_opts({2, 2}, {}, {}, {}, {1, -1})), InvalidArgument,
                   "avg_pool: dilations must be positive, got [1,-1]");
  EXPECT_THROW_MSG(avg_pool(x, pool_opts({2, 2}, {}, {-1, 0})), InvalidArgument,
                   "avg_pool: padding_lo must be non-negative");
  EXPECT_THROW_MSG(avg_pool(x, pool_opts({2, 2}, {}, {}, {0, -1})), InvalidArgument,
                   "avg_pool: padding_hi must be non-negative");
  EXPECT_THROW_MSG(max_pool(x, pool_opts({7, 2})), ShapeError,
                   "max_pool: output size 0 < 1 on spatial axis 0 for input float32[1,2,6,6] (kernel 7 dilated to 7, "
                   "padding 0+0)");
  EXPECT_THROW_MSG(max_pool(x, pool_opts({2, 3}, {}, {}, {}, {1, 3}, true)), ShapeError,
                   "max_pool: output size 0 < 1 on spatial axis 1 for input float32[1,2,6,6] (kernel 3 dilated to 7");
  // An average divides by a window's position count, which must fit in int64 (found by the
  // fuzzer under UBSan); checked where the node is made, so compiled functions raise it too.
  const int64_t big = int64_t{1} << 62;
  const PoolOptions wide = pool_opts({big, 2}, {}, {big / 2, 0}, {big / 2, 0});
  EXPECT_THROW_MSG(avg_pool(x, wide), ShapeError,
                   "avg_pool: kernel [4611686018427387904,2] has more window positions than an int64 can count");
  auto f = compile([&](const Array& a) { return max_pool(a, wide); });
  EXPECT_THROW_MSG(f(x), ShapeError,
                   "max_pool: kernel [4611686018427387904,2] has more window positions than an int64 can count");
}

}  // namespace
}  // namespace smelt
