// Tests for conv, conv1d and conv2d against a naive float64 / wrapping-integer reference.
#include "ops/conv_reference.h"

namespace smelt {
namespace {

using test::as_doubles;
using test::random_array;

struct ConvCase {
  const char* name;
  Shape x, w;
  ConvOptions o;
};

std::vector<ConvCase> float_cases() {
  return {
      {"1d_plain", {2, 3, 11}, {4, 3, 3}, {}},
      {"1d_stride_dil_asym_pad", {2, 4, 17}, {6, 2, 4}, {{3}, {2}, {5}, {2}, 2}},
      {"1d_depthwise", {3, 5, 9}, {10, 1, 3}, {{1}, {1}, {1}, {1}, 5}},
      {"2d_plain", {1, 3, 8, 9}, {5, 3, 3, 3}, {}},
      {"2d_batch_stride_pad", {3, 4, 10, 7}, {6, 4, 3, 2}, {{2, 1}, {1, 0}, {2, 1}, {1, 1}, 1}},
      {"2d_dilated_groups", {2, 6, 12, 11}, {9, 2, 3, 3}, {{1, 2}, {2, 1}, {0, 3}, {2, 3}, 3}},
      {"2d_depthwise_stride", {2, 8, 9, 9}, {8, 1, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, {1, 1}, 8}},
      {"2d_pointwise", {2, 16, 6, 5}, {7, 16, 1, 1}, {}},
      {"2d_pointwise_groups", {2, 8, 6, 5}, {6, 4, 1, 1}, {{}, {}, {}, {}, 2}},
      {"2d_pointwise_strided_padded", {1, 4, 7, 6}, {3, 4, 1, 1}, {{2, 3}, {1, 0}, {0, 2}, {}, 1}},
      {"2d_kernel_larger_than_input_with_pad", {1, 2, 3, 3}, {2, 2, 5, 5}, {{}, {2, 2}, {2, 2}, {}, 1}},
      {"3d_plain", {1, 2, 5, 6, 7}, {3, 2, 2, 3, 2}, {}},
      {"3d_all_options", {2, 4, 7, 6, 8}, {4, 2, 3, 2, 3}, {{2, 1, 3}, {1, 0, 2}, {0, 1, 1}, {1, 2, 2}, 2}},
      {"3d_depthwise", {1, 3, 4, 5, 6}, {6, 1, 2, 2, 2}, {{1, 2, 1}, {1, 1, 0}, {0, 1, 1}, {2, 1, 1}, 3}},
  };
}

std::vector<double> abs_ref(const ConvCase& c, const std::vector<double>& x, const std::vector<double>& w) {
  Shape s;
  return test::ref_conv<double>(test::abs_all(x), c.x, test::abs_all(w), c.w, c.o, &s);
}

void check_float_case(const ConvCase& c, Dtype dtype, double tol, uint32_t seed) {
  SCOPED_TRACE(std::string(c.name) + " " + dtype_name(dtype));
  Array x = random_array(c.x, dtype, -2, 2, seed);
  Array w = random_array(c.w, dtype, -1, 1, seed + 100);
  auto xv = as_doubles(x), wv = as_doubles(w);
  Shape shape;
  auto want = test::ref_conv<double>(xv, c.x, wv, c.w, c.o, &shape);
  Array y = conv(x, w, c.o);
  EXPECT_EQ(y.dtype(), dtype);
  EXPECT_TRUE(test::close_to(y, shape, want, abs_ref(c, xv, wv), tol));
}

TEST(Conv, Float32MatchesReference) {
  uint32_t seed = 1;
  for (auto& c : float_cases()) check_float_case(c, float32, 1e-6, seed++);
}

TEST(Conv, Float64MatchesReference) {
  uint32_t seed = 20;
  for (auto& c : float_cases()) check_float_case(c, float64, 1e-14, seed++);
}

TEST(Conv, HalvesMatchReference) {
  uint32_t seed = 40;
  for (auto& c : float_cases()) {
    check_float_case(c, float16, test::tolerance_for(float16), seed++);
    check_float_case(c, bfloat16, test::tolerance_for(bfloat16), seed++);
  }
}

TEST(Conv, IntegersAreExact) {
  uint32_t seed = 60;
  for (auto& c : float_cases()) {
    SCOPED_TRACE(c.name);
    Array x = random_array(c.x, int32, -50, 50, seed++);
    Array w = random_array(c.w, int32, -50, 50, seed++);
    auto to_u = [](Array a) { return test::as_wrapping(a); };
    Shape shape;
    auto want = test::ref_conv<uint64_t>(to_u(x), c.x, to_u(w), c.w, c.o, &shape);
    Array y = conv(x, w, c.o);
    EXPECT_EQ(y.dtype(), int32);
    EXPECT_TRUE(test::equal_wrapped(y, shape, want));
  }
}

TEST(Conv, EveryIntegerDtypeWrapsAround) {
  // Large values overflow every width: the result is the exact sum modulo 2^bits.
  const ConvCase c{"2d", {2, 4, 6, 5}, {4, 2, 3, 2}, {{2, 1}, {1, 0}, {1, 1}, {1, 2}, 2}};
  uint32_t seed = 80;
  for (Dtype d : {int8, int16, int32, int64, uint8, uint16, uint32, uint64}) {
    SCOPED_TRACE(dtype_name(d));
    double lo = is_signed_integral(d) ? -1e12 : 0.0;
    Array x = astype(random_array(c.x, int64, lo, 1e12, seed++), d);
    Array w = astype(random_array(c.w, int64, lo, 1e12, seed++), d);
    Shape shape;
    auto want = test::ref_conv<uint64_t>(test::as_wrapping(x), c.x, test::as_wrapping(w), c.w, c.o, &shape);
    Array y = conv(x, w, c.o);
    EXPECT_EQ(y.dtype(), d);
    EXPECT_TRUE(test::equal_wrapped(y, shape, want));
  }
}

TEST(Conv, Int8WrapsLikeNarrowing) {
  // 4 * 100 * 100 = 40000 = 64 mod 256.
  Array x(std::vector<int8_t>{100, 100, 100, 100}, {1, 1, 4});
  Array w(std::vector<int8_t>{100, 100, 100, 100}, {1, 1, 4});
  EXPECT_EQ(conv1d(x, w).to_vector<int64_t>(), (std::vector<int64_t>{static_cast<int8_t>(40000)}));
}

TEST(Conv, PromotesInputAndWeight) {
  Array x = random_array({1, 2, 5}, int8, -5, 5, 1);
  Array w = random_array({3, 2, 2}, float32, -1, 1, 2);
  EXPECT_EQ(conv(x, w).dtype(), float32);
  Shape shape;
  auto want = test::ref_conv<double>(as_doubles(x), {1, 2, 5}, as_doubles(w), {3, 2, 2}, {}, &shape);
  EXPECT_TRUE(test::all_close(conv(x, w), want, 1e-6, 1e-6));
  Array xu = random_array({1, 2, 5}, uint8, 0, 5, 3);
  Array wi = random_array({3, 2, 2}, int8, -5, 5, 4);
  EXPECT_EQ(conv(xu, wi).dtype(), int16);
  EXPECT_EQ(conv(random_array({1, 2, 5}, float16), random_array({3, 2, 2}, bfloat16)).dtype(), float32);
  EXPECT_EQ(conv(random_array({1, 2, 5}, int64), random_array({3, 2, 2}, uint64, 0, 3)).dtype(), float64);
}

TEST(Conv, Conv1dAndConv2dMatchConv) {
  Array x1 = random_array({2, 4, 13}, float32, -1, 1, 5);
  Array w1 = random_array({6, 2, 3}, float32, -1, 1, 6);
  EXPECT_TRUE(test::bit_equal(conv1d(x1, w1, 2, 1, 2, 2), conv(x1, w1, {{2}, {1}, {1}, {2}, 2})));
  Array x2 = random_array({2, 4, 9, 8}, float64, -1, 1, 7);
  Array w2 = random_array({4, 1, 3, 2}, float64, -1, 1, 8);
  EXPECT_TRUE(
      test::bit_equal(conv2d(x2, w2, {2, 1}, {1, 0}, {1, 2}, 4), conv(x2, w2, {{2, 1}, {1, 0}, {1, 0}, {1, 2}, 4})));
  EXPECT_EQ(conv2d(x2, random_array({3, 4, 2, 2}, float64)).shape(), (Shape{2, 3, 8, 7}));
}

TEST(Conv, LargeInputIsTiled) {
  // The im2col buffer of this problem exceeds the kernel's memory budget: tiles over output rows.
  const ConvCase c{"tiled", {1, 16, 130, 131}, {2, 16, 3, 3}, {{}, {1, 1}, {0, 1}, {}, 1}};
  check_float_case(c, float32, 1e-6, 90);
}

TEST(Conv, ZeroSizeBatchAndChannels) {
  Array y = conv(zeros({0, 3, 8}), zeros({4, 3, 3}));
  EXPECT_EQ(y.shape(), (Shape{0, 4, 6}));
  EXPECT_TRUE(as_doubles(y).empty());
  // No output channels.
  EXPECT_EQ(conv(random_array({2, 3, 5, 5}, float32), zeros({0, 3, 2, 2})).shape(), (Shape{2, 0, 4, 4}));
  // No input channels: every sum is empty.
  Array z = conv(zeros({2, 0, 5}), zeros({3, 0, 2}), {{}, {}, {}, {}, 1});
  EXPECT_EQ(z.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(as_doubles(z), std::vector<double>(24, 0.0));
  // An empty spatial axis with padding: the windows see only padding.
  Array p = conv(zeros({1, 2, 0}, int32), ones({1, 2, 1}, int32), {{}, {1}, {1}, {}, 1});
  EXPECT_EQ(p.to_vector<int32_t>(), (std::vector<int32_t>{0, 0}));
}

TEST(Conv, NonContiguousInputsMatchContiguous) {
  // A transposed input, a reversed (negative-stride) weight and a strided slice.
  Array base = random_array({2, 9, 3, 8}, float32, -1, 1, 11);  // [N, W, C, H]
  Array x = transpose(base, {0, 2, 3, 1});                      // [N, C, H, W], non-contiguous
  Array wbase = random_array({4, 3, 3, 3}, float32, -1, 1, 12);
  Array w = flip(wbase, {2, 3});
  ConvOptions o{{1, 2}, {1, 0}, {0, 1}, {1, 1}, 1};
  Array want = conv(copy(x), copy(w), o);
  EXPECT_TRUE(test::bit_equal(conv(x, w, o), want));
  Array xi = transpose(astype(base, int32), {0, 2, 3, 1});
  Array wi = flip(astype(wbase, int32), {2, 3});
  EXPECT_TRUE(test::bit_equal(conv(xi, wi, o), conv(copy(xi), copy(wi), o)));
  Array base3 = random_array({2, 6, 20}, float64, -1, 1, 13);
  Array sl = slice(base3, {0, 0, 19}, {2, 6, -21}, {1, 2, -2});
  Array ws = random_array({2, 3, 3}, float64, -1, 1, 14);
  EXPECT_EQ(sl.shape(), (Shape{2, 3, 10}));
  EXPECT_TRUE(test::bit_equal(conv(sl, ws), conv(copy(sl), ws)));
  Array sh = slice(astype(base3, float16), {0, 0, 19}, {2, 6, -21}, {1, 2, -2});
  Array wh = astype(ws, float16);
  EXPECT_TRUE(test::bit_equal(conv(sh, wh), conv(copy(sh), wh)));
  // A broadcast (zero-stride) input.
  Array bx = broadcast_to(random_array({1, 3, 1, 7}, float32, -1, 1, 15), {2, 3, 5, 7});
  Array bw = random_array({2, 3, 2, 2}, float32, -1, 1, 16);
  EXPECT_TRUE(test::bit_equal(conv(bx, bw), conv(copy(bx), bw)));
}

TEST(Conv, ResultDoesNotDependOnThreadCount) {
  const int saved = cpu_threads();
  std::vector<ConvCase> cases = float_cases();
  cases.push_back({"many_tasks", {8, 6, 12, 12}, {6, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, {1, 1}, 2}});
  cases.push_back({"many_rows_depthwise", {4, 8, 32, 32}, {8, 1, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, {1, 1}, 8}});
  // One big GEMM per image, cut into tiles (src/backend/cpu/gemm.h), and a pointwise one.
  cases.push_back({"tiled_gemm", {1, 32, 24, 24}, {64, 32, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, {1, 1}, 1}});
  cases.push_back({"tiled_pointwise", {2, 128, 16, 16}, {96, 128, 1, 1}, {{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1}});
  for (Dtype d : {float32, float64, bfloat16, int32}) {
    for (auto& c : cases) {
      SCOPED_TRACE(std::string(c.name) + " " + dtype_name(d));
      Array x = random_array(c.x, d, -2, 2, 3);
      Array w = random_array(c.w, d, -2, 2, 4);
      set_cpu_threads(1);
      Array one = conv(x, w, c.o);
      one.eval();
      set_cpu_threads(3);
      Array three = conv(x, w, c.o);
      three.eval();
      EXPECT_TRUE(test::bit_equal(one, three));
    }
  }
  set_cpu_threads(saved);
}

TEST(Conv, NanAndInfPropagate) {
  std::vector<float> xv{1, 2, std::nanf(""), 4, 5, INFINITY, 7};
  Array x(xv, {1, 1, 7});
  Array w(std::vector<float>{1, 1}, {1, 1, 2});
  auto y = conv(x, w).to_vector<float>();
  ASSERT_EQ(y.size(), 6u);
  EXPECT_EQ(y[0], 3.0f);
  EXPECT_TRUE(std::isnan(y[1]) && std::isnan(y[2]));
  EXPECT_EQ(y[3], 9.0f);
  EXPECT_EQ(y[4], INFINITY);
  EXPECT_EQ(y[5], INFINITY);
  // The GEMM path (two input channels) propagates them too.
  std::vector<float> x2v{1, 2, std::nanf(""), 4, 1, 1, 1, 1};
  auto y2 = conv(Array(x2v, {1, 2, 4}), Array(std::vector<float>{1, 1, 1, 1}, {1, 2, 2})).to_vector<float>();
  ASSERT_EQ(y2.size(), 3u);
  EXPECT_EQ(y2[0], 5.0f);
  EXPECT_TRUE(std::isnan(y2[1]) && std::isnan(y2[2]));
  std::vector<float> x3v{1, 2, 3, 4, -INFINITY, 1, 1, 1};
  auto y3 = conv(Array(x3v, {1, 2, 4}), Array(std::vector<float>{1, 1, 1, 1}, {1, 2, 2})).to_vector<float>();
  EXPECT_EQ(y3, (std::vector<float>{-INFINITY, 7.0f, 9.0f}));
}

TEST(Conv, KnownValues) {
  // [1..5] * [1, 0, -1] with padding 1: y[i] = x[i-1] - x[i+1].
  Array x(std::vector<float>{1, 2, 3, 4, 5}, {1, 1, 5});
  Array w(std::vector<float>{1, 0, -1}, {1, 1, 3});
  EXPECT_EQ(conv1d(x, w, 1, 1).to_vector<float>(), (std::vector<float>{-2, -2, -2, -2, 4}));
  EXPECT_EQ(conv1d(x, w, 2, 1).to_vector<float>(), (std::vector<float>{-2, -2, 4}));
}

// ---- conv_transpose ------------------------------------------------------------------------------

ConvTransposeOptions transpose_opts(std::vector<int64_t> strides = {}, std::vector<int64_t> lo = {},
                                    std::vector<int64_t> hi = {}, std::vector<int64_t> dil = {},
                                    std::vector<int64_t> output_padding = {}, int64_t groups = 1) {
  ConvTransposeOptions o;
  o.strides = std::move(strides);
  o.padding_lo = std::move(lo);
  o.padding_hi = std::move(hi);
  o.dilations = std::move(dil);
  o.output_padding = std::move(output_padding);
  o.groups = groups;
  return o;
}

struct TransposeCase {
  const char* name;
  Shape x, w;
  ConvTransposeOptions o;
};

std::vector<TransposeCase> transpose_cases() {
  return {
      {"1d_plain", {2, 3, 7}, {3, 4, 3}, transpose_opts()},
      {"1d_stride_pad_outpad", {2, 4, 9}, {4, 3, 4}, transpose_opts({3}, {2}, {1}, {}, {2}, 1)},
      {"1d_groups_dilation", {1, 6, 8}, {6, 2, 3}, transpose_opts({2}, {0}, {3}, {2}, {1}, 3)},
      {"1d_depthwise", {2, 4, 6}, {4, 1, 3}, transpose_opts({2}, {1}, {1}, {1}, {}, 4)},
      {"2d_plain", {1, 3, 5, 6}, {3, 2, 3, 3}, transpose_opts()},
      {"2d_all_options", {2, 4, 6, 5}, {4, 3, 3, 2}, transpose_opts({2, 3}, {1, 0}, {2, 1}, {1, 2}, {1, 2}, 2)},
      {"2d_pointwise_strided", {2, 5, 4, 4}, {5, 3, 1, 1}, transpose_opts({2, 2}, {}, {}, {}, {1, 0}, 1)},
      {"2d_large_padding", {1, 2, 6, 6}, {2, 2, 3, 3}, transpose_opts({1, 1}, {2, 3}, {3, 2}, {}, {}, 1)},
      {"3d_plain", {1, 2, 3, 4, 3}, {2, 3, 2, 2, 2}, transpose_opts()},
      {"3d_all_options",
       {2, 4, 3, 4, 5},
       {4, 2, 2, 3, 2},
       transpose_opts({2, 1, 2}, {1, 0, 1}, {0, 1, 2}, {1, 2, 1}, {1, 0, 1}, 2)},
  };
}

void check_transpose_case(const TransposeCase& c, Dtype dtype, double tol, uint32_t seed) {
  SCOPED_TRACE(std::string(c.name) + " " + dtype_name(dtype));
  Array x = random_array(c.x, dtype, -2, 2, seed);
  Array w = random_array(c.w, dtype, -1, 1, seed + 100);
  auto xv = as_doubles(x), wv = as_doubles(w);
  Shape shape, s2;
  auto want = test::ref_conv_transpose<double>(xv, c.x, wv, c.w, c.o, &shape);
  auto mag = test::ref_conv_transpose<double>(test::abs_all(xv), c.x, test::abs_all(wv), c.w, c.o, &s2);
  Array y = conv_transpose(x, w, c.o);
  EXPECT_EQ(y.dtype(), dtype);
  EXPECT_TRUE(test::close_to(y, shape, want, mag, tol));
}

TEST(ConvTranspose, FloatsMatchReference) {
  uint32_t seed = 200;
  for (auto& c : transpose_cases()) {
    check_transpose_case(c, float32, 1e-6, seed++);
    check_transpose_case(c, float64, 1e-14, seed++);
    check_transpose_case(c, float16, test::tolerance_for(float16), seed++);
    check_transpose_case(c, bfloat16, test::tolerance_for(bfloat16), seed++);
  }
}

TEST(ConvTranspose, IntegersAreExact) {
  uint32_t seed = 300;
  for (auto& c : transpose_cases()) {
    for (Dtype d : {int32, int8, uint16, int64}) {
      SCOPED_TRACE(std::string(c.name) + " " + dtype_name(d));
      double lo = is_signed_integral(d) ? -1e9 : 0.0;
      Array x = astype(random_array(c.x, int64, lo, 1e9, seed++), d);
      Array w = astype(random_array(c.w, int64, lo, 1e9, seed++), d);
      Shape shape;
      auto want = test::ref_conv_transpose<uint64_t>(test::as_wrapping(x), c.x, test::as_wrapping(w), c.w, c.o, &shape);
      Array y = conv_transpose(x, w, c.o);
      EXPECT_EQ(y.dtype(), d);
      EXPECT_TRUE(test::equal_wrapped(y, shape, want));
    }
  }
}

TEST(ConvTranspose, KnownValuesAndShape) {
  // Stride 2 spreads each input over the kernel: [1, 2] * [1, 1, 1] -> [1, 1, 3, 2, 2].
  Array x(std::vector<float>{1, 2}, {1, 1, 2});
  Array w(std::vector<float>{1, 1, 1}, {1, 1, 3});
  EXPECT_EQ(conv_transpose(x, w, transpose_opts({2})).to_vector<float>(), (std::vector<float>{1, 1, 3, 2, 2}));
  // Output padding adds a zero row at the end.
  EXPECT_EQ(conv_transpose(x, w, transpose_opts({2}, {}, {}, {}, {1})).to_vector<float>(),
            (std::vector<float>{1, 1, 3, 2, 2, 0}));
  // Padding crops: (in-1)*s - lo - hi + d*(k-1) + op + 1.
  EXPECT_EQ(conv_transpose(zeros({2, 4, 5, 6}), zeros({4, 3, 3, 2}),
                           transpose_opts({2, 3}, {1, 0}, {2, 1}, {1, 2}, {1, 2}, 2))
                .shape(),
            (Shape{2, 6, 9, 19}));
}

TEST(ConvTranspose, IsTheAdjointOfConv) {
  // <conv(x, w), y> == <x, conv_transpose(y, w)> for the same weight and options (ints: exact).
  Array x = random_array({2, 4, 9, 8}, int64, -9, 9, 31);
  Array w = random_array({6, 2, 3, 2}, int64, -9, 9, 32);
  ConvOptions co{{2, 1}, {1, 0}, {0, 1}, {1, 2}, 2};
  Array cx = conv(x, w, co);
  Array y = random_array(cx.shape(), int64, -9, 9, 33);
  // Output padding recovers the input size the stride lost.
  ConvTransposeOptions to = transpose_opts({2, 1}, {1, 0}, {0, 1}, {1, 2}, {0, 0}, 2);
  Shape want_shape = x.shape();
  int64_t lost = want_shape[2] - conv_transpose(y, w, to).shape(2);
  to.output_padding = {lost, 0};
  Array ty = conv_transpose(y, w, to);
  ASSERT_EQ(ty.shape(), want_shape);
  auto a = cx.to_vector<int64_t>(), b = y.to_vector<int64_t>(), c = x.to_vector<int64_t>(), d = ty.to_vector<int64_t>();
  int64_t lhs = 0, rhs = 0;
  for (size_t i = 0; i < a.size(); ++i) lhs += a[i] * b[i];
  for (size_t i = 0; i < c.size(); ++i) rhs += c[i] * d[i];
  EXPECT_EQ(lhs, rhs);
}

TEST(ConvTranspose, LargeInputIsTiled) {
  // The col buffer of this problem exceeds the kernel's memory budget: tiles over input rows.
  check_transpose_case(
      {"tiled", {1, 2, 128, 129}, {2, 16, 3, 3}, transpose_opts({2, 2}, {1, 1}, {1, 0}, {}, {1, 1}, 1)}, float32, 1e-6,
      400);
}

TEST(ConvTranspose, ZeroSizeAndNonContiguous) {
  EXPECT_EQ(conv_transpose(zeros({0, 3, 4}), zeros({3, 2, 3})).shape(), (Shape{0, 2, 6}));
  Array e = conv_transpose(zeros({2, 0, 4}), zeros({0, 2, 3}));
  EXPECT_EQ(e.shape(), (Shape{2, 2, 6}));
  EXPECT_EQ(as_doubles(e), std::vector<double>(24, 0.0));
  Array base = random_array({2, 7, 4, 6}, float32, -1, 1, 41);  // [N, W, C, H]
  Array x = transpose(base, {0, 2, 3, 1});
  Array w = flip(random_array({4, 3, 2, 3}, float32, -1, 1, 42), {3});
  ConvTransposeOptions o = transpose_opts({2, 1}, {1, 0}, {0, 1}, {1, 1}, {1, 0}, 1);
  EXPECT_TRUE(test::bit_equal(conv_transpose(x, w, o), conv_transpose(copy(x), copy(w), o)));
  Array xi = astype(x, int16);
  EXPECT_TRUE(test::bit_equal(conv_transpose(transpose(astype(base, int16), {0, 2, 3, 1}), astype(w, int16), o),
                              conv_transpose(copy(xi), astype(w, int16), o)));
}

TEST(ConvTranspose, ResultDoesNotDependOnThreadCount) {
  const int saved = cpu_threads();
  auto cases = transpose_cases();
  cases.push_back(
      {"many_tasks", {8, 6, 12, 12}, {6, 4, 3, 3}, transpose_opts({2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2)});
  // One big GEMM (cut into tiles, src/backend/cpu/gemm.h) for a single image.
  cases.push_back(
      {"tiled_gemm", {1, 64, 20, 20}, {64, 32, 3, 3}, transpose_opts({1, 1}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, 1)});
  for (Dtype d : {float32, float64, float16, int32}) {
    for (auto& c : cases) {
      SCOPED_TRACE(std::string(c.name) + " " + dtype_name(d));
      Array x = random_array(c.x, d, -2, 2, 5);
      Array w = random_array(c.w, d, -2, 2, 6);
      set_cpu_threads(1);
      Array one = conv_transpose(x, w, c.o);
      one.eval();
      set_cpu_threads(3);
      Array three = conv_transpose(x, w, c.o);
      three.eval();
      EXPECT_TRUE(test::bit_equal(one, three));
    }
  }
  set_cpu_threads(saved);
}

TEST(ConvTransposeErrors, Messages) {
  Array x = zeros({1, 4, 5, 5});
  Array w = zeros({4, 3, 3, 3});
  EXPECT_THROW_MSG(conv_transpose(Array(), w), InvalidArgument, "conv_transpose: an input is an empty handle");
  EXPECT_THROW_MSG(conv_transpose(zeros({4, 5}), w), ShapeError, "conv_transpose: input must have rank 3 to 5");
  EXPECT_THROW_MSG(
      conv_transpose(x, zeros({4, 3, 3})), ShapeError,
      "conv_transpose: weight float32[4,3,3] must have the rank of input float32[1,4,5,5] ([C, O/groups, K...])");
  EXPECT_THROW_MSG(conv_transpose(x, astype(w, bool_)), DtypeError, "conv_transpose: bool is not supported");
  EXPECT_THROW_MSG(conv_transpose(x, w, transpose_opts({}, {}, {}, {}, {}, 0)), InvalidArgument,
                   "conv_transpose: groups must be positive, got 0");
  EXPECT_THROW_MSG(conv_transpose(x, w, transpose_opts({2})), InvalidArgument,
                   "conv_transpose: strides [2] has 1 entries but input float32[1,4,5,5] has 2 spatial dimensions");
  EXPECT_THROW_MSG(conv_transpose(x, w, transpose_opts({}, {}, {}, {}, {1})), InvalidArgument,
                   "conv_transpose: output_padding [1] has 1 entries");
  EXPECT_THROW_MSG(conv_transpose(x, w, transpose_opts({}, {}, {}, {}, {0, -1})), InvalidArgument,
                   "conv_transpose: output_padding must be non-negative, got [0,-1]");
  EXPECT_THROW_MSG(conv_transpose(x, w, transpose_opts({0, 1})), InvalidArgument,
                   "conv_transpose: strides must be positive");
  EXPECT_THROW_MSG(conv_transpose(x, w, transpose_opts({}, {}, {}, {1, 0})), InvalidArgument,
                   "conv_transpose: dilations must be positive");
  EXPECT_THROW_MSG(conv_transpose(x, w, transpose_opts({}, {-1, 0})), InvalidArgument,
                   "conv_transpose: padding_lo must be non-negative");
  EXPECT_THROW_MSG(conv_transpose(x, w, transpose_opts({}, {}, {0, -2})), InvalidArgument,
                   "conv_transpose: padding_hi must be non-negative");
  EXPECT_THROW_MSG(conv_transpose(x, w, transpose_opts({}, {}, {}, {}, {}, 3)), ShapeError,
                   "conv_transpose: input channels 4 of float32[1,4,5,5] are not divisible by groups 3");
  EXPECT_THROW_MSG(conv_transpose(x, zeros({3, 3, 3, 3})), ShapeError,
                   "conv_transpose: weight float32[3,3,3,3] expects 3 input channels ([C, O/groups, K...]), input "
                   "float32[1,4,5,5] has 4");
  EXPECT_THROW_MSG(conv_transpose(x, zeros({4, 3, 3, 0})), ShapeError,
                   "conv_transpose: kernel sizes must be positive, weight is float32[4,3,3,0]");
  EXPECT_THROW_MSG(
      conv_transpose(x, w, transpose_opts({}, {4, 0}, {3, 0})), ShapeError,
      "conv_transpose: output size 0 < 1 on spatial axis 0 for input float32[1,4,5,5] (kernel 3, stride 1, "
      "padding 4+3, output_padding 0)");
}

// ---- Errors -------------------------------------------------------------------------------------

TEST(ConvErrors, Messages) {
  Array x = zeros({1, 4, 8, 8});
  Array w = zeros({6, 2, 3, 3});
  EXPECT_THROW_MSG(conv(Array(), w), InvalidArgument, "conv: an input is an empty handle");
  EXPECT_THROW_MSG(conv(x, Array()), InvalidArgument, "conv: an input is an empty handle");
  EXPECT_THROW_MSG(conv(zeros({4, 8}), zeros({6, 4})), ShapeError,
                   "conv: input must have rank 3 to 5 ([N, C, D...] with 1 to 3 spatial dimensions), got float32[4,8]");
  EXPECT_THROW_MSG(conv(zeros({1, 1, 2, 2, 2, 2}), zeros({1, 1, 1, 1, 1, 1})), ShapeError,
                   "conv: input must have rank 3 to 5");
  EXPECT_THROW_MSG(conv(x, zeros({6, 4, 3})), ShapeError,
                   "conv: weight float32[6,4,3] must have the rank of input float32[1,4,8,8]");
  EXPECT_THROW_MSG(conv(astype(x, bool_), w), DtypeError,
                   "conv: bool is not supported (input bool[1,4,8,8], weight float32[6,2,3,3])");
  EXPECT_THROW_MSG(conv(x, astype(w, bool_)), DtypeError, "conv: bool is not supported");
  EXPECT_THROW_MSG(conv(x, w, {{}, {}, {}, {}, 0}), InvalidArgument, "conv: groups must be positive, got 0");
  EXPECT_THROW_MSG(conv(x, w, {{}, {}, {}, {}, -2}), InvalidArgument, "conv: groups must be positive, got -2");
  EXPECT_THROW_MSG(conv(x, w, {{1}, {}, {}, {}, 2}), InvalidArgument,
                   "conv: strides [1] has 1 entries but input float32[1,4,8,8] has 2 spatial dimensions");
  EXPECT_THROW_MSG(conv(x, w, {{}, {1, 1, 1}, {}, {}, 2}), InvalidArgument, "conv: padding_lo [1,1,1] has 3 entries");
  EXPECT_THROW_MSG(conv(x, w, {{}, {}, {1}, {}, 2}), InvalidArgument, "conv: padding_hi [1] has 1 entries");
  EXPECT_THROW_MSG(conv(x, w, {{}, {}, {}, {1, 1, 1}, 2}), InvalidArgument, "conv: dilations [1,1,1] has 3 entries");
  EXPECT_THROW_MSG(conv(x, w, {{1, 0}, {}, {}, {}, 2}), InvalidArgument, "conv: strides must be positive, got [1,0]");
  EXPECT_THROW_MSG(conv(x, w, {{-1, 1}, {}, {}, {}, 2}), InvalidArgument, "conv: strides must be positive, got [-1,1]");
  EXPECT_THROW_MSG(conv(x, w, {{}, {}, {}, {0, 1}, 2}), InvalidArgument, "conv: dilations must be positive, got [0,1]");
  EXPECT_THROW_MSG(conv(x, w, {{}, {-1, 0}, {}, {}, 2}), InvalidArgument,
                   "conv: padding_lo must be non-negative, got [-1,0]");
  EXPECT_THROW_MSG(conv(x, w, {{}, {}, {0, -3}, {}, 2}), InvalidArgument,
                   "conv: padding_hi must be non-negative, got [0,-3]");
  EXPECT_THROW_MSG(conv(x, w, {{}, {}, {}, {}, 3}), ShapeError,
                   "conv: input channels 4 of float32[1,4,8,8] are not divisible by groups 3");
  EXPECT_THROW_MSG(conv(zeros({1, 4, 8, 8}), zeros({5, 2, 3, 3}), {{}, {}, {}, {}, 2}), ShapeError,
                   "conv: output channels 5 of weight float32[5,2,3,3] are not divisible by groups 2");
  EXPECT_THROW_MSG(
      conv(x, w), ShapeError,
      "conv: weight float32[6,2,3,3] expects 2 x 1 groups = 2 input channels, input float32[1,4,8,8] has 4");
  EXPECT_THROW_MSG(conv(x, zeros({6, 4, 0, 3})), ShapeError,
                   "conv: kernel sizes must be positive, weight is float32[6,4,0,3]");
  EXPECT_THROW_MSG(conv(x, zeros({6, 4, 9, 3})), ShapeError,
                   "conv: output size 0 < 1 on spatial axis 0 for input float32[1,4,8,8] (kernel 9 dilated to 9, "
                   "padding 0+0)");
  EXPECT_THROW_MSG(conv(x, zeros({6, 4, 3, 3}), {{}, {}, {}, {1, 4}, 1}), ShapeError,
                   "conv: output size 0 < 1 on spatial axis 1 for input float32[1,4,8,8] (kernel 3 dilated to 9");
  EXPECT_THROW_MSG(conv1d(x, w), ShapeError, "conv1d: input must have rank 3 ([N, C, W]), got float32[1,4,8,8]");
  EXPECT_THROW_MSG(conv1d(zeros({1, 4, 8}), zeros({2, 4, 3}), 0), InvalidArgument,
                   "conv1d: strides must be positive, got [0]");
  EXPECT_THROW_MSG(conv2d(zeros({1, 4, 8}), zeros({2, 4, 3})), ShapeError,
                   "conv2d: input must have rank 4 ([N, C, H, W]), got float32[1,4,8]");
  EXPECT_THROW_MSG(conv2d(x, w, {1, 1}, {-1, 0}), InvalidArgument, "conv2d: padding_lo must be non-negative");
}

}  // namespace
}  // namespace smelt
