// Tests for reductions, arg reductions and scans against float64 / exact references.
#include <algorithm>
#include <cstring>
#include <limits>

#include "test_utils.h"

namespace smelt {
namespace {

using test::all_close;
using test::as_doubles;
using test::bit_equal;
using test::random_array;
using test::tolerance_for;

const std::vector<Dtype> kAllDtypes = {bool_,  int8,    int16,   int32,    int64,   uint8,  uint16,
                                       uint32, uint64,  float16, bfloat16, float32, float64};

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// ---- Reference helpers -----------------------------------------------------------------------

std::vector<int> norm_axes(const Axes& axes, int nd) {
  std::vector<int> out;
  if (axes.empty())
    for (int i = 0; i < nd; ++i) out.push_back(i);
  for (int a : axes) out.push_back(a < 0 ? a + nd : a);
  std::sort(out.begin(), out.end());
  return out;
}

Shape reduced_shape(const Shape& s, const std::vector<int>& axes, bool keepdims) {
  Shape out;
  for (int i = 0; i < static_cast<int>(s.size()); ++i) {
    bool red = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!red) out.push_back(s[i]);
    else if (keepdims) out.push_back(1);
  }
  return out;
}

/// Row-major offset of x's element i within the output (reduced axes dropped).
int64_t out_index(int64_t i, const Shape& s, const std::vector<int>& axes) {
  int64_t o = 0, mul = 1;
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
    int64_t idx = i % s[d];
    i /= s[d];
    if (std::find(axes.begin(), axes.end(), d) != axes.end()) continue;
    o += idx * mul;
    mul *= s[d];
  }
  return o;
}

struct RefResult {
  std::vector<double> value;
  std::vector<double> abs_sum;  // scale for the tolerance of sums
};

template <class F>
RefResult ref_reduce(const std::vector<double>& x, const Shape& s, const std::vector<int>& axes, double init, F f) {
  Shape os = reduced_shape(s, axes, false);
  int64_t n = 1;
  for (auto d : os) n *= d;
  RefResult r{std::vector<double>(n, init), std::vector<double>(n, 0.0)};
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    int64_t o = out_index(i, s, axes);
    r.value[o] = f(r.value[o], x[i]);
    r.abs_sum[o] += std::fabs(x[i]);
  }
  return r;
}

::testing::AssertionResult close_scaled(Array got, const RefResult& ref, double tol) {
  auto g = as_doubles(got);
  if (g.size() != ref.value.size())
    return ::testing::AssertionFailure() << "size " << g.size() << " != " << ref.value.size();
  for (size_t i = 0; i < g.size(); ++i) {
    double e = ref.value[i];
    bool ok = std::isnan(e) ? std::isnan(g[i]) : std::fabs(g[i] - e) <= tol * (std::fabs(e) + ref.abs_sum[i]);
    if (!ok) return ::testing::AssertionFailure() << "[" << i << "] got " << g[i] << " expected " << e;
  }
  return ::testing::AssertionSuccess();
}

/// Random values of `dt`; unsigned dtypes draw from [max(lo, 0), hi) so the float64 reference
/// stays exact.
Array rand_of(const Shape& s, Dtype dt, double lo, double hi, uint32_t seed) {
  if (is_unsigned_integral(dt) || dt == bool_) lo = std::max(lo, 0.0);
  return random_array(s, dt, lo, hi, seed);
}

const std::vector<Axes> kAxesCases = {{}, {0}, {1}, {2}, {-1}, {0, 2}, {-3, -1}, {2, 0}, {0, 1, 2}, {1, 2}};

Dtype expected_sum_dtype(Dtype d) {
  if (d == bool_ || is_signed_integral(d)) return int64;
  if (is_unsigned_integral(d)) return uint64;
  return d;
}

// ---- Sum, prod, max, min, all, any over every dtype and axis set -------------------------------

TEST(Reduce, SumEveryDtypeAndAxes) {
  const Shape s{3, 4, 5};
  for (Dtype dt : kAllDtypes) {
    Array x = rand_of(s, dt, -50, 50, 1);
    auto xv = as_doubles(x);
    for (const auto& axes : kAxesCases) {
      auto ax = norm_axes(axes, 3);
      auto ref = ref_reduce(xv, s, ax, 0.0, [](double a, double b) { return a + b; });
      for (bool keep : {false, true}) {
        Array r = sum(x, axes, keep);
        SCOPED_TRACE(std::string(dtype_name(dt)) + " axes " + shape_to_string(Shape(axes.begin(), axes.end())) +
                     (keep ? " keepdims" : ""));
        EXPECT_EQ(r.dtype(), expected_sum_dtype(dt));
        EXPECT_EQ(r.shape(), reduced_shape(s, ax, keep));
        EXPECT_TRUE(close_scaled(r, ref, 2 * tolerance_for(dt)));
      }
    }
  }
}

TEST(Reduce, ProdEveryDtypeAndAxes) {
  const Shape s{3, 4, 5};
  for (Dtype dt : kAllDtypes) {
    // Factors near 1 keep float products in range; integers in {1, 2} fit every product.
    Array x = is_floating(dt) ? random_array(s, dt, 0.8, 1.25, 2) : random_array(s, dt, 1, 3, 2);
    auto xv = as_doubles(x);
    for (const auto& axes : kAxesCases) {
      auto ax = norm_axes(axes, 3);
      auto ref = ref_reduce(xv, s, ax, 1.0, [](double a, double b) { return a * b; });
      for (auto& v : ref.abs_sum) v = 0;  // products: relative tolerance only
      for (bool keep : {false, true}) {
        Array r = prod(x, axes, keep);
        SCOPED_TRACE(std::string(dtype_name(dt)) + (keep ? " keepdims" : ""));
        EXPECT_EQ(r.dtype(), expected_sum_dtype(dt));
        EXPECT_EQ(r.shape(), reduced_shape(s, ax, keep));
        double tol = dt == float32 ? 2e-5 : 2 * tolerance_for(dt);
        EXPECT_TRUE(close_scaled(r, ref, tol));
      }
    }
  }
}

TEST(Reduce, MaxMinEveryDtypeAndAxes) {
  const Shape s{3, 4, 5};
  for (Dtype dt : kAllDtypes) {
    Array x = rand_of(s, dt, -100, 100, 3);
    auto xv = as_doubles(x);
    for (const auto& axes : kAxesCases) {
      auto ax = norm_axes(axes, 3);
      auto rmax = ref_reduce(xv, s, ax, -kInf, [](double a, double b) { return std::max(a, b); });
      auto rmin = ref_reduce(xv, s, ax, kInf, [](double a, double b) { return std::min(a, b); });
      for (bool keep : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + (keep ? " keepdims" : ""));
        Array a = max(x, axes, keep), b = min(x, axes, keep);
        EXPECT_EQ(a.dtype(), dt);
        EXPECT_EQ(b.dtype(), dt);
        EXPECT_EQ(a.shape(), reduced_shape(s, ax, keep));
        EXPECT_TRUE(all_close(a, rmax.value, 0, 0));
        EXPECT_TRUE(all_close(b, rmin.value, 0, 0));
      }
    }
  }
}

TEST(Reduce, AllAnyEveryDtypeAndAxes) {
  const Shape s{3, 4, 5};
  for (Dtype dt : kAllDtypes) {
    // Values in {-1, 0, 1} (floored in float64 first so floats get zeros too).
    auto v = test::random_values(60, -1, 2, 4);
    for (auto& e : v) e = std::floor(e);
    Array x = astype(Array(v, s), dt);
    auto xv = as_doubles(x);
    for (const auto& axes : kAxesCases) {
      auto ax = norm_axes(axes, 3);
      auto rall = ref_reduce(xv, s, ax, 1.0, [](double a, double b) { return (a != 0 && b != 0) ? 1.0 : 0.0; });
      auto rany = ref_reduce(xv, s, ax, 0.0, [](double a, double b) { return (a != 0 || b != 0) ? 1.0 : 0.0; });
      for (bool keep : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + (keep ? " keepdims" : ""));
        Array a = all(x, axes, keep), b = any(x, axes, keep);
        EXPECT_EQ(a.dtype(), bool_);
        EXPECT_EQ(b.dtype(), bool_);
        EXPECT_EQ(b.shape(), reduced_shape(s, ax, keep));
        EXPECT_TRUE(all_close(a, rall.value, 0, 0));
        EXPECT_TRUE(all_close(b, rany.value, 0, 0));
      }
    }
  }
}

TEST(Reduce, AllAnyTreatNaNAsTrue) {
  Array x = Array({0.0f, std::numeric_limits<float>::quiet_NaN()});
  EXPECT_FALSE(all(x).item<bool>());
  EXPECT_TRUE(any(x).item<bool>());
  EXPECT_TRUE(all(slice(x, {1}, {2})).item<bool>());
}

// ---- mean, var, std, logsumexp --------------------------------------------------------------

Dtype float_result(Dtype d) { return is_floating(d) ? d : float32; }

TEST(Reduce, MeanEveryDtypeAndAxes) {
  const Shape s{3, 4, 5};
  for (Dtype dt : kAllDtypes) {
    Array x = rand_of(s, dt, -50, 50, 5);
    auto xv = as_doubles(x);
    for (const auto& axes : kAxesCases) {
      auto ax = norm_axes(axes, 3);
      auto ref = ref_reduce(xv, s, ax, 0.0, [](double a, double b) { return a + b; });
      int64_t n = 1;
      for (int a : ax) n *= s[a];
      for (auto& v : ref.value) v /= static_cast<double>(n);
      for (auto& v : ref.abs_sum) v /= static_cast<double>(n);
      for (bool keep : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + (keep ? " keepdims" : ""));
        Array r = mean(x, axes, keep);
        EXPECT_EQ(r.dtype(), float_result(dt));
        EXPECT_EQ(r.shape(), reduced_shape(s, ax, keep));
        EXPECT_TRUE(close_scaled(r, ref, 2 * tolerance_for(float_result(dt))));
      }
    }
  }
}

TEST(Reduce, VarStdEveryDtypeAndAxes) {
  const Shape s{3, 4, 5};
  for (Dtype dt : kAllDtypes) {
    Array x = rand_of(s, dt, -20, 20, 6);
    auto xv = as_doubles(x);
    for (const auto& axes : kAxesCases) {
      auto ax = norm_axes(axes, 3);
      int64_t n = 1;
      for (int a : ax) n *= s[a];
      auto sums = ref_reduce(xv, s, ax, 0.0, [](double a, double b) { return a + b; });
      for (int ddof : {0, 1}) {
        std::vector<double> ev(sums.value.size(), 0.0), sd(ev.size());
        for (int64_t i = 0; i < static_cast<int64_t>(xv.size()); ++i) {
          int64_t o = out_index(i, s, ax);
          double d = xv[i] - sums.value[o] / static_cast<double>(n);
          ev[o] += d * d;
        }
        for (size_t o = 0; o < ev.size(); ++o) {
          ev[o] /= static_cast<double>(n - ddof);
          sd[o] = std::sqrt(ev[o]);
        }
        for (bool keep : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " ddof " + std::to_string(ddof) + (keep ? " keepdims" : ""));
          Array v = var(x, axes, keep, ddof), d = std(x, axes, keep, ddof);
          EXPECT_EQ(v.dtype(), float_result(dt));
          EXPECT_EQ(d.dtype(), float_result(dt));
          EXPECT_EQ(v.shape(), reduced_shape(s, ax, keep));
          double tol = 4 * tolerance_for(float_result(dt));
          EXPECT_TRUE(all_close(v, ev, tol, 1e-3 * tol));
          EXPECT_TRUE(all_close(d, sd, tol, 1e-3 * tol));
        }
      }
    }
  }
}

TEST(Reduce, VarWithTooFewElements) {
  // NumPy divides by max(n - ddof, 0): 0 / 0 is NaN, x / 0 is inf.
  Array x = Array({1.0f, 2.0f});
  EXPECT_EQ(var(x, {}, false, 2).item<float>(), INFINITY);
  EXPECT_EQ(var(x, {}, false, 3).item<float>(), INFINITY);
  EXPECT_TRUE(std::isnan(var(Array({5.0f}), {}, false, 1).item<float>()));
  EXPECT_TRUE(std::isnan(std(Array({5.0f}), {}, false, 1).item<float>()));
  EXPECT_EQ(var(x, {}, false, -2).item<float>(), 0.125f);  // negative ddof divides by n + 2
  EXPECT_TRUE(std::isnan(var(Array(std::vector<float>{}, {0})).item<float>()));
}

TEST(Reduce, LogSumExpEveryDtypeAndAxes) {
  const Shape s{3, 4, 5};
  for (Dtype dt : kAllDtypes) {
    Array x = rand_of(s, dt, -5, 5, 7);
    auto xv = as_doubles(x);
    for (const auto& axes : kAxesCases) {
      auto ax = norm_axes(axes, 3);
      auto ref = ref_reduce(xv, s, ax, 0.0, [](double a, double b) { return a + std::exp(b); });
      for (auto& v : ref.value) v = std::log(v);
      for (bool keep : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + (keep ? " keepdims" : ""));
        Array r = logsumexp(x, axes, keep);
        EXPECT_EQ(r.dtype(), float_result(dt));
        EXPECT_EQ(r.shape(), reduced_shape(s, ax, keep));
        double tol = 4 * tolerance_for(float_result(dt));
        EXPECT_TRUE(all_close(r, ref.value, tol, tol));
      }
    }
  }
}

TEST(Reduce, LogSumExpIsStableAndHandlesInfinities) {
  Array big = Array({1000.0f, 1000.0f});
  EXPECT_NEAR(logsumexp(big).item<double>(), 1000.0 + std::log(2.0), 1e-3);
  Array ninf = Array({-INFINITY, -INFINITY}, {1, 2});
  EXPECT_EQ(logsumexp(ninf, {1}).item<float>(), -INFINITY);
  Array pinf = Array({INFINITY, 1.0f});
  EXPECT_EQ(logsumexp(pinf).item<float>(), INFINITY);
  Array withnan = Array({NAN, 1.0f});
  EXPECT_TRUE(std::isnan(logsumexp(withnan).item<float>()));
  // An empty reduction is log(0) = -inf.
  Array e = logsumexp(zeros({2, 0}), {1});
  EXPECT_EQ(e.shape(), (Shape{2}));
  EXPECT_TRUE(all_close(e, {-kInf, -kInf}));
}

// ---- Dtype rules, wraparound, empty, NaN, 0-d -------------------------------------------------

TEST(Reduce, DtypeRules) {
  for (Dtype dt : kAllDtypes) {
    Array x = zeros({2, 3}, dt);
    SCOPED_TRACE(dtype_name(dt));
    EXPECT_EQ(sum(x).dtype(), expected_sum_dtype(dt));
    EXPECT_EQ(prod(x).dtype(), expected_sum_dtype(dt));
    EXPECT_EQ(cumsum(x, 0).dtype(), expected_sum_dtype(dt));
    EXPECT_EQ(cumprod(x, 1).dtype(), expected_sum_dtype(dt));
    EXPECT_EQ(max(x).dtype(), dt);
    EXPECT_EQ(min(x).dtype(), dt);
    EXPECT_EQ(cummax(x, 0).dtype(), dt);
    EXPECT_EQ(cummin(x, 0).dtype(), dt);
    EXPECT_EQ(all(x).dtype(), bool_);
    EXPECT_EQ(any(x).dtype(), bool_);
    EXPECT_EQ(mean(x).dtype(), float_result(dt));
    EXPECT_EQ(var(x).dtype(), float_result(dt));
    EXPECT_EQ(std(x).dtype(), float_result(dt));
    EXPECT_EQ(logsumexp(x).dtype(), float_result(dt));
    EXPECT_EQ(argmax(x, 0).dtype(), int64);
    EXPECT_EQ(argmin(x).dtype(), int64);
  }
}

TEST(Reduce, IntegerSumsWiden) {
  // Narrow integers accumulate in 64 bits: no overflow at their own width.
  EXPECT_EQ(sum(Array({int8_t(127), int8_t(127), int8_t(127)})).item<int64_t>(), 381);
  EXPECT_EQ(sum(Array({uint8_t(255), uint8_t(255)})).item<uint64_t>(), 510u);
  EXPECT_EQ(sum(Array({2147483647, 2147483647})).item<int64_t>(), 4294967294LL);
  EXPECT_EQ(sum(Array({true, true, false, true})).item<int64_t>(), 3);
  EXPECT_EQ(prod(Array({int16_t(300), int16_t(300)})).item<int64_t>(), 90000);
}

TEST(Reduce, IntegerSumsAndProductsWrap) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(sum(Array({big, int64_t(1)})).item<int64_t>(), std::numeric_limits<int64_t>::min());
  const uint64_t ubig = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(sum(Array({ubig, uint64_t(2)})).item<uint64_t>(), 1u);
  // A long wrapping sum on the vectorized path: 10000 copies of 2^62.
  Array many = full({10000}, Array(int64_t(1) << 62));
  uint64_t expect = 0;
  for (int i = 0; i < 10000; ++i) expect += uint64_t(1) << 62;
  EXPECT_EQ(sum(many).item<int64_t>(), static_cast<int64_t>(expect));
  // Products wrap modulo 2^64.
  EXPECT_EQ(prod(Array({int64_t(1) << 32, int64_t(1) << 32})).item<int64_t>(), 0);
  std::vector<int32_t> threes(45, 3);
  uint64_t p = 1;
  for (int i = 0; i < 45; ++i) p *= 3;
  EXPECT_EQ(prod(Array(threes, {45})).item<int64_t>(), static_cast<int64_t>(p));
  std::vector<int8_t> negs(41, -3);
  uint64_t q = 1;
  for (int i = 0; i < 41; ++i) q *= static_cast<uint64_t>(int64_t(-3));
  EXPECT_EQ(prod(Array(negs, {41})).item<int64_t>(), static_cast<int64_t>(q));
  // Integer cumsum wraps the same way.
  EXPECT_EQ(cumsum(Array({big, int64_t(1), int64_t(1)}), 0).to_vector<int64_t>(),
            (std::vector<int64_t>{big, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::min() + 1}));
}

TEST(Reduce, EmptyReductions) {
  Array e = zeros({3, 0}, float32);
  EXPECT_EQ(sum(e, {1}).shape(), (Shape{3}));
  EXPECT_TRUE(all_close(sum(e, {1}), {0, 0, 0}));
  EXPECT_TRUE(all_close(prod(e, {1}), {1, 1, 1}));
  EXPECT_EQ(all(e, {1}).to_vector<bool>(), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(any(e, {1}).to_vector<bool>(), (std::vector<bool>{false, false, false}));
  EXPECT_TRUE(all_close(mean(e, {1}), {kNaN, kNaN, kNaN}));
  EXPECT_EQ(sum(e).item<float>(), 0.0f);
  EXPECT_EQ(sum(e).shape(), Shape{});
  EXPECT_EQ(sum(e, {}, true).shape(), (Shape{1, 1}));
  EXPECT_EQ(sum(zeros({0}, int8)).item<int64_t>(), 0);
  EXPECT_EQ(prod(zeros({0}, uint16)).item<uint64_t>(), 1u);
  // Reducing a non-empty axis of an empty array gives an empty result (max included).
  EXPECT_EQ(sum(e, {0}).shape(), (Shape{0}));
  EXPECT_EQ(max(e, {0}).shape(), (Shape{0}));
  EXPECT_EQ(min(e, {0}, true).shape(), (Shape{1, 0}));
  EXPECT_EQ(argmax(e, 0).shape(), (Shape{0}));
  EXPECT_EQ(cumsum(e, 1).shape(), (Shape{3, 0}));
  EXPECT_EQ(cumsum(e, 0).shape(), (Shape{3, 0}));
  EXPECT_EQ(cumprod(zeros({0}, int8), 0).dtype(), int64);
}

TEST(Reduce, ZeroDimInputs) {
  Array s = Array(int8_t(-5));
  EXPECT_EQ(sum(s).item<int64_t>(), -5);
  EXPECT_EQ(sum(s).shape(), Shape{});
  EXPECT_EQ(sum(s, {}, true).shape(), Shape{});
  EXPECT_EQ(max(Array(2.5f)).item<float>(), 2.5f);
  EXPECT_EQ(prod(Array(3.0)).item<double>(), 3.0);
  EXPECT_FALSE(all(Array(0)).item<bool>());
  EXPECT_EQ(mean(Array(7)).item<float>(), 7.0f);
  EXPECT_EQ(argmax(Array(1.0f)).item<int64_t>(), 0);
  EXPECT_EQ(argmax(Array(1.0f), true).shape(), Shape{});
}

TEST(Reduce, NaNAndInfinities) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Array x = Array({1.0f, nan, 3.0f, -INFINITY, 2.0f, 0.0f}, {2, 3});
  EXPECT_TRUE(all_close(max(x, {1}), {kNaN, 2.0}));
  EXPECT_TRUE(all_close(min(x, {1}), {kNaN, -kInf}));
  EXPECT_TRUE(all_close(max(x, {0}), {1.0, kNaN, 3.0}));
  EXPECT_TRUE(all_close(sum(x, {1}), {kNaN, -kInf}));
  EXPECT_TRUE(std::isnan(sum(Array({INFINITY, -INFINITY})).item<float>()));
  EXPECT_EQ(max(Array({-INFINITY, -INFINITY})).item<float>(), -INFINITY);
  // NaN propagates whatever its position on the vectorized paths (halves too).
  for (Dtype dt : {float16, bfloat16, float32, float64}) {
    for (int pos : {0, 7, 8, 100, 999}) {
      auto v = test::random_values(1000, -1, 1, 9);
      v[pos] = kNaN;
      Array a = astype(Array(v, {1000}), dt);
      EXPECT_TRUE(std::isnan(max(a).item<double>())) << dtype_name(dt) << " " << pos;
      EXPECT_TRUE(std::isnan(min(a).item<double>())) << dtype_name(dt) << " " << pos;
      EXPECT_EQ(argmax(a).item<int64_t>(), pos);
      EXPECT_EQ(argmin(a).item<int64_t>(), pos);
      Array col = reshape(a, {100, 10});
      auto mx = as_doubles(max(col, {0}));
      for (int j = 0; j < 10; ++j) EXPECT_EQ(std::isnan(mx[j]), j == pos % 10);
    }
  }
}

TEST(Reduce, Float16WideningIsExact) {
  // Every float16 bit pattern through the kernels' inline widening (short rows, and the
  // vectorized block path with -inf padding): max gives the element back bit for bit.
  const int64_t n = 65536;
  std::vector<uint16_t> bits(n);
  for (int64_t i = 0; i < n; ++i) bits[i] = static_cast<uint16_t>(i);
  Array x(bits.data(), {n, 1}, float16);
  std::vector<uint16_t> padded(n * 16, 0xfc00);  // -inf
  for (int64_t i = 0; i < n; ++i) padded[i * 16] = bits[i];
  Array p(padded.data(), {n, 16}, float16);
  for (Array r : {max(x, {1}), max(p, {1}), min(x, {1})}) {
    r.eval();
    const uint16_t* got = static_cast<const uint16_t*>(r.data());
    for (int64_t i = 0; i < n; ++i) {
      bool nan = (bits[i] & 0x7c00) == 0x7c00 && (bits[i] & 0x3ff) != 0;
      if (nan) ASSERT_TRUE((got[i] & 0x7c00) == 0x7c00 && (got[i] & 0x3ff) != 0) << i;
      else ASSERT_EQ(got[i], bits[i]) << i;
    }
  }
}

// ---- Non-contiguous inputs and large sizes ---------------------------------------------------

TEST(Reduce, NonContiguousInputs) {
  Array base = random_array({6, 8, 10}, float64, -3, 3, 11);
  std::vector<Array> views = {
      transpose(base, {2, 0, 1}),
      slice(base, {5, 0, 9}, {-7, 8, -11}, {-1, 2, -3}),
      broadcast_to(random_array({1, 8, 1}, float64, -3, 3, 12), {4, 8, 3}),
      swapaxes(base, 0, 1),
  };
  for (const auto& v : views) {
    auto xv = as_doubles(v);
    const Shape& s = v.shape();
    for (const auto& axes : kAxesCases) {
      auto ax = norm_axes(axes, 3);
      auto rs = ref_reduce(xv, s, ax, 0.0, [](double a, double b) { return a + b; });
      auto rm = ref_reduce(xv, s, ax, -kInf, [](double a, double b) { return std::max(a, b); });
      EXPECT_TRUE(close_scaled(sum(v, axes), rs, 1e-14));
      EXPECT_TRUE(all_close(max(v, axes), rm.value, 0, 0));
    }
    // A float32 copy exercises the half/float kernels on the same views.
    EXPECT_TRUE(close_scaled(sum(astype(v, float16), {0, 2}),
                             ref_reduce(as_doubles(astype(v, float16)), s, {0, 2}, 0.0,
                                        [](double a, double b) { return a + b; }),
                             4e-3));
  }
}

// A reduction over trailing axes follows the row order whatever the layout: a view whose reduced
// axes nest as row-major ones (one run at a stride, as the global average pool of a blocked
// activation reads) is reduced in place, the others through a row-major copy; both give the bits
// of the same reduction of a contiguous copy. Row lengths below, at and past the pairwise leaves
// (128) and their splits, every float dtype, several operations.
TEST(Reduce, TrailingReductionsOfViewsEqualThoseOfCopies) {
  for (Dtype dt : {float32, float64, float16, bfloat16})
    for (const Shape& hw : std::vector<Shape>{{3, 5}, {7, 7}, {12, 25}, {25, 40}, {56, 56}}) {
      // [n, blocks, h, w, 16] seen as [n, blocks, 16, h, w]: h and w nest at a stride of 16 (the
      // channels, contiguous, are reduced eight at a time); with 20 channels, 4 are left over.
      Array blocked = random_array({2, 3, hw[0], hw[1], 16}, dt, -3, 3, 21);
      Array nested = transpose(blocked, {0, 1, 4, 2, 3});
      Array nested20 = transpose(random_array({2, 1, hw[0], hw[1], 20}, dt, -3, 3, 23), {0, 1, 4, 2, 3});
      // h and w swapped: they do not nest, the copy is read.
      Array crossed = transpose(blocked, {0, 1, 4, 3, 2});
      // Every other column: the columns at stride 2, the rows at stride 2w: they nest.
      Array stepped = slice(random_array({2, 3, hw[0], 2 * hw[1]}, dt, -3, 3, 22), {0, 0, 0, 1}, {2, 3, hw[0], 2 * hw[1]},
                            {1, 1, 1, 2});
      for (const Array& v : {nested, nested20, crossed, stepped}) {
        const int nd = v.ndim();
        const std::vector<int> axes{nd - 2, nd - 1};
        const Array c = copy(v);
        EXPECT_TRUE(bit_equal(sum(v, axes), sum(c, axes))) << dtype_name(dt) << shape_to_string(v.shape());
        EXPECT_TRUE(bit_equal(mean(v, axes), mean(c, axes))) << dtype_name(dt) << shape_to_string(v.shape());
        EXPECT_TRUE(bit_equal(max(v, axes), max(c, axes))) << dtype_name(dt) << shape_to_string(v.shape());
        EXPECT_TRUE(bit_equal(prod(multiply(v, 0.1), axes, true), prod(multiply(c, 0.1), axes, true)))
            << dtype_name(dt) << shape_to_string(v.shape());
        EXPECT_TRUE(bit_equal(sum(v, {nd - 1}), sum(c, {nd - 1}))) << dtype_name(dt) << shape_to_string(v.shape());
      }
    }
  // Zeros of both signs as the row's largest values (-0 at position 1, +0 at 4, -1 elsewhere):
  // which one max returns depends on the order its lanes meet, so strided rows of max and min
  // are read through the copy, as contiguous ones are.
  for (Dtype dt : {float32, float64, float16, bfloat16}) {
    std::vector<double> row(20, -1.0);  // 16 or more: shorter rows are combined in sequence
    row[1] = -0.0;
    row[4] = 0.0;
    std::vector<double> v;
    for (double x : row)
      for (int c = 0; c < 16; ++c) v.push_back(x);
    Array blocked = astype(Array(v, Shape{1, 1, 4, 5, 16}), dt);
    Array zv = transpose(blocked, {0, 1, 4, 2, 3}), zc = copy(zv);
    EXPECT_TRUE(bit_equal(max(zv, {3, 4}), max(zc, {3, 4}))) << dtype_name(dt) << " signed zeros";
    EXPECT_TRUE(bit_equal(min(negative(zv), {3, 4}), min(negative(zc), {3, 4}))) << dtype_name(dt) << " signed zeros";
  }
}

TEST(Reduce, LargeFloatSumsArePairwise) {
  // 2^22 values of 0.1f: a naive float32 running sum drifts by ~10%; pairwise stays within 1e-6.
  const int64_t n = int64_t(1) << 22;
  Array x = full({n}, Array(0.1f));
  double exact = static_cast<double>(0.1f) * static_cast<double>(n);
  EXPECT_NEAR(sum(x).item<double>(), exact, exact * 1e-6);
  // Column reduction (over the outer axis) of the same data.
  Array cols = reshape(x, {n / 16, 16});
  auto c = as_doubles(sum(cols, {0}));
  for (double v : c) EXPECT_NEAR(v, exact / 16, exact / 16 * 1e-6);
  // Outer and inner reduced together, with a strided reduced run.
  Array three = reshape(x, {1024, 16, 256});
  auto m = as_doubles(sum(three, {0, 2}));
  for (double v : m) EXPECT_NEAR(v, exact / 16, exact / 16 * 1e-6);
  // float16 accumulates in float32: 4096 ones sum exactly (a float16 accumulator stops at 2048).
  EXPECT_EQ(sum(ones({4096}, float16)).item<float>(), 4096.0f);
  EXPECT_EQ(sum(ones({4096, 3}, bfloat16), {0}).to_vector<float>(), (std::vector<float>{4096, 4096, 4096}));
}

TEST(Reduce, ResultsDoNotDependOnThreadCount) {
  const int saved = cpu_threads();
  Array x = random_array({512, 1024}, float32, -1, 1, 21);
  Array xt = transpose(x);
  Array h = astype(x, float16);
  Array i8 = random_array({512, 1024}, int8, -100, 100, 22);
  auto compute = [&] {
    return std::vector<Array>{sum(x),           sum(x, {0}),       sum(x, {1}),          sum(xt, {0}),
                              sum(reshape(x, {64, 8, 1024}), {0, 2}), mean(x, {0}),  prod(x, {0}),
                              max(x),           min(x, {0}),       sum(h),               sum(h, {0}),
                              sum(i8),          argmax(x),         argmin(x, 0),         argmax(xt, 1, false, true),
                              cumsum(x, 0),     cumsum(x, 1),      cumprod(h, 0, true),  cummax(xt, 1),
                              sum(reshape(x, {-1, 2}), {0}),       logsumexp(x, {1})};
  };
  set_cpu_threads(1);
  auto one = compute();
  eval(one);
  for (int t : {2, 3}) {
    set_cpu_threads(t);
    auto many = compute();
    eval(many);
    for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(bit_equal(many[i], one[i])) << "result " << i << ", " << t << " threads";
  }
  set_cpu_threads(saved);
}

// ---- argmax / argmin ---------------------------------------------------------------------------

TEST(ArgReduce, EveryDtypeAndAxis) {
  const Shape s{4, 5, 6};
  for (Dtype dt : kAllDtypes) {
    // Few distinct values, so ties are common.
    Array x = rand_of(s, dt, -3, 3, 31);
    auto xv = as_doubles(x);
    for (int axis : {0, 1, 2, -1, -3}) {
      int ax = axis < 0 ? axis + 3 : axis;
      for (bool last : {false, true}) {
        for (bool keep : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " axis " + std::to_string(axis) + (last ? " last" : "") +
                       (keep ? " keepdims" : ""));
          Shape os = reduced_shape(s, {ax}, keep);
          Array amax = argmax(x, axis, keep, last), amin = argmin(x, axis, keep, last);
          EXPECT_EQ(amax.dtype(), int64);
          EXPECT_EQ(amax.shape(), os);
          EXPECT_EQ(amin.shape(), os);
          std::vector<double> emax(xv.size() / s[ax]), emin(emax.size());
          std::vector<double> bmax(emax.size(), -kInf), bmin(emax.size(), kInf);
          std::vector<bool> seen(emax.size(), false);
          for (int64_t i = 0; i < static_cast<int64_t>(xv.size()); ++i) {
            int64_t o = out_index(i, s, {ax});
            int64_t k = (i / (ax == 2 ? 1 : (ax == 1 ? 6 : 30))) % s[ax];
            double v = xv[i];
            if (!seen[o] || (last ? v >= bmax[o] : v > bmax[o])) bmax[o] = v, emax[o] = static_cast<double>(k);
            if (!seen[o] || (last ? v <= bmin[o] : v < bmin[o])) bmin[o] = v, emin[o] = static_cast<double>(k);
            seen[o] = true;
          }
          EXPECT_TRUE(all_close(amax, emax, 0, 0));
          EXPECT_TRUE(all_close(amin, emin, 0, 0));
        }
      }
    }
  }
}

TEST(ArgReduce, TiesFirstAndLast) {
  Array x = Array({1, 3, 3, 2, 3});
  EXPECT_EQ(argmax(x, 0).item<int64_t>(), 1);
  EXPECT_EQ(argmax(x, 0, false, true).item<int64_t>(), 4);
  Array y = Array({2.0f, 1.0f, 5.0f, 1.0f});
  EXPECT_EQ(argmin(y, 0).item<int64_t>(), 1);
  EXPECT_EQ(argmin(y, 0, false, true).item<int64_t>(), 3);
  // -0.0 and 0.0 tie.
  Array z = Array({-0.0, 0.0});
  EXPECT_EQ(argmax(z, 0).item<int64_t>(), 0);
  EXPECT_EQ(argmax(z, 0, false, true).item<int64_t>(), 1);
  // Columns: the vectorized path over the inner axis.
  Array m = Array({1, 5, 5, 1, 5, 1, 1, 5, 5, 1, 0, 5, 1, 1, 5, 5, 5, 5, 5, 5}, {2, 10});
  EXPECT_EQ(argmax(m, 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0, 0, 1, 1, 0, 0, 1}));
  EXPECT_EQ(argmax(m, 0, false, true).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(argmin(m, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(argmin(m, 0, false, true).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 1, 1, 0, 0, 1, 1, 0}));
  // Long rows split into groups: ties across group boundaries still resolve in order.
  const int64_t n = 1 << 20;
  Array flat = zeros({n}, float32);
  EXPECT_EQ(argmax(flat).item<int64_t>(), 0);
  EXPECT_EQ(argmax(flat, 0, false, true).item<int64_t>(), n - 1);
  EXPECT_EQ(argmin(flat, 0, false, true).item<int64_t>(), n - 1);
  std::vector<float> tv(n, 0.0f);
  tv[100] = tv[n - 100] = 7.0f;
  Array two(tv, {n});
  EXPECT_EQ(argmax(two).item<int64_t>(), 100);
  EXPECT_EQ(argmax(two, 0, false, true).item<int64_t>(), n - 100);
}

TEST(ArgReduce, NaNIsTheExtreme) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Array x = Array({1.0f, nan, 9.0f, nan, -9.0f});
  // NumPy: the first NaN wins for both argmax and argmin; `last` picks the last NaN.
  EXPECT_EQ(argmax(x, 0).item<int64_t>(), 1);
  EXPECT_EQ(argmin(x, 0).item<int64_t>(), 1);
  EXPECT_EQ(argmax(x, 0, false, true).item<int64_t>(), 3);
  EXPECT_EQ(argmin(x, 0, false, true).item<int64_t>(), 3);
  Array c = Array({1.0f, 2.0f, nan, 0.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f,  //
                   nan, 3.0f, 0.0f, 8.0f, 9.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f},
                  {2, 10});
  EXPECT_EQ(argmax(c, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 0, 1, 1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(argmin(c, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0, 0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(argmax(c, 1).to_vector<int64_t>(), (std::vector<int64_t>{2, 0}));
  // Two NaNs in a column (vectorized column path): first vs last.
  std::vector<float> d(24, 1.0f);
  d[0] = d[16] = nan;  // column 0, rows 0 and 2
  d[9] = 5.0f;         // column 1, row 1
  d[17] = 5.0f;        // column 1, row 2 (a tie)
  Array dd(d, {3, 8});
  EXPECT_EQ(argmax(dd, 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(argmax(dd, 0, false, true).to_vector<int64_t>(), (std::vector<int64_t>{2, 2, 2, 2, 2, 2, 2, 2}));
  EXPECT_EQ(argmin(dd, 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(argmin(dd, 0, false, true).to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 2, 2, 2, 2, 2, 2}));
  EXPECT_EQ(argmin(c, 1, false, true).to_vector<int64_t>(), (std::vector<int64_t>{2, 0}));
}

TEST(ArgReduce, FlattenedForms) {
  Array x = Array({3, 9, 2, 9, 1, 0}, {2, 3});
  EXPECT_EQ(argmax(x).item<int64_t>(), 1);
  EXPECT_EQ(argmin(x).item<int64_t>(), 5);
  EXPECT_EQ(argmax(x).shape(), Shape{});
  EXPECT_EQ(argmax(x, true).shape(), (Shape{1, 1}));
  EXPECT_EQ(argmin(transpose(x)).item<int64_t>(), 5);  // flattened in the view's order
  EXPECT_EQ(argmax(transpose(x)).item<int64_t>(), 1);  // 3 9 9 1 2 0
}

// ---- Scans ---------------------------------------------------------------------------------

TEST(Scan, Examples) {
  Array x = Array({1, 2, 3, 4});
  EXPECT_EQ(cumsum(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 6, 10}));
  EXPECT_EQ(cumsum(x, 0, false, true).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 3, 6}));
  EXPECT_EQ(cumsum(x, 0, true).to_vector<int64_t>(), (std::vector<int64_t>{10, 9, 7, 4}));
  EXPECT_EQ(cumsum(x, 0, true, true).to_vector<int64_t>(), (std::vector<int64_t>{9, 7, 4, 0}));
  EXPECT_EQ(cumprod(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 6, 24}));
  EXPECT_EQ(cumprod(x, 0, false, true).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 2, 6}));
  EXPECT_EQ(cumprod(x, 0, true, true).to_vector<int64_t>(), (std::vector<int64_t>{24, 12, 4, 1}));
  Array y = Array({3.0f, 1.0f, 4.0f, 1.0f, 5.0f});
  EXPECT_EQ(cummax(y, 0).to_vector<float>(), (std::vector<float>{3, 3, 4, 4, 5}));
  EXPECT_EQ(cummin(y, 0).to_vector<float>(), (std::vector<float>{3, 1, 1, 1, 1}));
  EXPECT_EQ(cummax(y, 0, true).to_vector<float>(), (std::vector<float>{5, 5, 5, 5, 5}));
  EXPECT_EQ(cummin(y, -1, true).to_vector<float>(), (std::vector<float>{1, 1, 1, 1, 5}));
  Array n = Array({1.0f, NAN, 3.0f});
  EXPECT_TRUE(all_close(cummax(n, 0), {1, kNaN, kNaN}));
  EXPECT_TRUE(all_close(cumsum(n, 0, true), {kNaN, kNaN, 3}));
  EXPECT_EQ(cumsum(Array({true, true, false}), 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 2}));
}

TEST(Scan, EveryDtypeAxisAndDirection) {
  const Shape s{4, 9, 10};  // the last two axes long enough for the vectorized column path
  for (Dtype dt : kAllDtypes) {
    Array x = is_floating(dt) ? random_array(s, dt, 0.5, 1.5, 41) : rand_of(s, dt, -3, 4, 41);
    auto xv = as_doubles(x);
    for (int axis : {0, 1, 2, -1}) {
      int ax = axis < 0 ? axis + 3 : axis;
      int64_t stride = ax == 2 ? 1 : (ax == 1 ? 10 : 90);
      for (bool reverse : {false, true}) {
        for (bool exclusive : {false, true}) {
          std::vector<double> es(xv.size()), ep(xv.size()), emx(xv.size()), emn(xv.size());
          for (int64_t i = 0; i < static_cast<int64_t>(xv.size()); ++i) {
            int64_t k = (i / stride) % s[ax], line = i - k * stride;
            double as = 0, ap = 1, amx = -kInf, amn = kInf;
            for (int64_t j = 0; j < s[ax]; ++j) {
              bool before = reverse ? j > k : j < k;
              bool incl = before || j == k;
              if (!(exclusive ? before : incl)) continue;
              double v = xv[line + j * stride];
              as += v, ap *= v, amx = std::max(amx, v), amn = std::min(amn, v);
            }
            es[i] = as, ep[i] = ap, emx[i] = amx, emn[i] = amn;
          }
          SCOPED_TRACE(std::string(dtype_name(dt)) + " axis " + std::to_string(axis) + (reverse ? " reverse" : "") +
                       (exclusive ? " exclusive" : ""));
          Array cs = cumsum(x, axis, reverse, exclusive), cp = cumprod(x, axis, reverse, exclusive);
          EXPECT_EQ(cs.shape(), s);
          EXPECT_EQ(cs.dtype(), expected_sum_dtype(dt));
          double tol = 4 * tolerance_for(dt) + (dt == float32 ? 1e-6 : 0.0);
          EXPECT_TRUE(all_close(cs, es, tol, tol));
          EXPECT_TRUE(all_close(cp, ep, tol, tol));
          if (!exclusive) {
            EXPECT_TRUE(all_close(cummax(x, axis, reverse), emx, 0, 0));
            EXPECT_TRUE(all_close(cummin(x, axis, reverse), emn, 0, 0));
          }
        }
      }
    }
  }
}

TEST(Scan, NonContiguousAndInPlace) {
  Array base = random_array({6, 20}, float64, -3, 3, 51);
  Array t = transpose(base);                       // [20, 6], axis 0 walks the contiguous rows
  Array f = slice(base, {0, 19}, {6, -21}, {1, -1});  // flipped columns
  for (const Array& v : {t, f}) {
    auto xv = as_doubles(v);
    const Shape& s = v.shape();
    std::vector<double> e0(xv.size()), e1(xv.size());
    for (int64_t r = 0; r < s[0]; ++r)
      for (int64_t c = 0; c < s[1]; ++c) {
        e0[r * s[1] + c] = xv[r * s[1] + c] + (r > 0 ? e0[(r - 1) * s[1] + c] : 0.0);
        e1[r * s[1] + c] = xv[r * s[1] + c] + (c > 0 ? e1[r * s[1] + c - 1] : 0.0);
      }
    EXPECT_TRUE(all_close(cumsum(v, 0), e0, 1e-13, 1e-13));
    EXPECT_TRUE(all_close(cumsum(v, 1), e1, 1e-13, 1e-13));
  }
  // A temporary input can be reused as the output buffer.
  auto xv = as_doubles(base);
  Array c = cumsum(base * 1.0, 1);
  std::vector<double> e(xv.size());
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t k = 0; k < 20; ++k) e[r * 20 + k] = xv[r * 20 + k] + (k > 0 ? e[r * 20 + k - 1] : 0.0);
  EXPECT_TRUE(all_close(c, e, 1e-13, 1e-13));
}

// ---- Errors -------------------------------------------------------------------------------

TEST(ReduceErrors, Messages) {
  Array x = zeros({3, 0});
  EXPECT_THROW_MSG(max(x, {1}), InvalidArgument, "max: zero-size reduction over axis 1 of float32[3,0] has no identity");
  EXPECT_THROW_MSG(min(x), InvalidArgument, "min: zero-size reduction over axis 1 of float32[3,0] has no identity");
  EXPECT_THROW_MSG(max(zeros({0}, int8)), InvalidArgument, "max: zero-size reduction over axis 0 of int8[0]");
  EXPECT_THROW_MSG(argmax(x, 1), InvalidArgument, "argmax: zero-size reduction over axis 1 of float32[3,0]");
  EXPECT_THROW_MSG(argmin(x, -1, true), InvalidArgument, "argmin: zero-size reduction over axis 1 of float32[3,0]");
  EXPECT_THROW_MSG(argmax(x), InvalidArgument, "argmax: zero-size reduction over the flattened float32[3,0]");
  EXPECT_THROW_MSG(argmin(x, true), InvalidArgument, "argmin: zero-size reduction over the flattened float32[3,0]");
  EXPECT_THROW_MSG(cummax(x, 2), InvalidArgument, "cummax: axis 2 is out of range for an array of rank 2");
  Array y = zeros({2, 3});
  EXPECT_THROW_MSG(sum(y, {2}), InvalidArgument, "sum: axis 2 is out of range for an array of rank 2 (shape [2,3])");
  EXPECT_THROW_MSG(sum(y, {0, -2}), InvalidArgument, "sum: repeated axis");
  EXPECT_THROW_MSG(mean(y, {-3}), InvalidArgument, "mean: axis -3 is out of range");
  EXPECT_THROW_MSG(prod(y, {5}), InvalidArgument, "prod: axis 5 is out of range");
  EXPECT_THROW_MSG(all(y, {1, 1}), InvalidArgument, "all: repeated axis");
  EXPECT_THROW_MSG(any(y, {9}), InvalidArgument, "any: axis 9 is out of range");
  EXPECT_THROW_MSG(var(y, {2}), InvalidArgument, "var: axis 2 is out of range");
  EXPECT_THROW_MSG(std(y, {2}), InvalidArgument, "std: axis 2 is out of range");
  EXPECT_THROW_MSG(logsumexp(y, {2}), InvalidArgument, "logsumexp: axis 2 is out of range");
  EXPECT_THROW_MSG(argmax(y, 2), InvalidArgument, "argmax: axis 2 is out of range");
  EXPECT_THROW_MSG(argmin(y, -3), InvalidArgument, "argmin: axis -3 is out of range");
  EXPECT_THROW_MSG(cumsum(y, 2), InvalidArgument, "cumsum: axis 2 is out of range");
  EXPECT_THROW_MSG(cumprod(Array(1.0f), 0), InvalidArgument, "cumprod: axis 0 is out of range for an array of rank 0");
  EXPECT_THROW_MSG(cummin(y, -3), InvalidArgument, "cummin: axis -3 is out of range");
  EXPECT_THROW_MSG(sum(Array()), InvalidArgument, "sum: an input is an empty handle");
  EXPECT_THROW_MSG(mean(Array()), InvalidArgument, "mean: an input is an empty handle");
  EXPECT_THROW_MSG(var(Array()), InvalidArgument, "var: an input is an empty handle");
  EXPECT_THROW_MSG(logsumexp(Array()), InvalidArgument, "logsumexp: an input is an empty handle");
  EXPECT_THROW_MSG(argmax(Array(), 0), InvalidArgument, "argmax: an input is an empty handle");
  EXPECT_THROW_MSG(argmin(Array()), InvalidArgument, "argmin: an input is an empty handle");
  EXPECT_THROW_MSG(cumsum(Array(), 0), InvalidArgument, "cumsum: an input is an empty handle");
}

}  // namespace
}  // namespace smelt
