// Tests for the compositions (softmax, log_softmax, layer_norm, rms_norm, gelu, silu) against float64 references.
#include <cmath>
#include <limits>

#include "test_utils.h"

namespace smelt {
namespace {

using test::all_close;
using test::as_doubles;
using test::random_array;
using test::tolerance_for;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

const std::vector<Dtype> kFloatLike = {float16, bfloat16, float32, float64, int32, uint8, bool_};

Dtype result_of(Dtype d) { return is_floating(d) ? d : float32; }

// Reference softmax / log_softmax over `axes` (normalized) of a row-major [d0, d1, d2] array.
std::vector<double> ref_softmax(const std::vector<double>& x, const Shape& s, const std::vector<int>& axes, bool log) {
  auto group = [&](int64_t i) {  // index with the reduced axes zeroed
    int64_t idx[3] = {i / (s[1] * s[2]), (i / s[2]) % s[1], i % s[2]};
    for (int a : axes) idx[a] = 0;
    return (idx[0] * s[1] + idx[1]) * s[2] + idx[2];
  };
  std::vector<double> mx(x.size(), -kInf), sum(x.size(), 0.0), out(x.size());
  for (size_t i = 0; i < x.size(); ++i) mx[group(i)] = std::max(mx[group(i)], x[i]);
  for (size_t i = 0; i < x.size(); ++i) sum[group(i)] += std::exp(x[i] - mx[group(i)]);
  for (size_t i = 0; i < x.size(); ++i) {
    double sh = x[i] - mx[group(i)];
    out[i] = log ? sh - std::log(sum[group(i)]) : std::exp(sh) / sum[group(i)];
  }
  return out;
}

TEST(Softmax, EveryDtypeAndAxes) {
  const Shape s{3, 4, 5};
  const std::vector<std::pair<Axes, std::vector<int>>> cases = {
      {{-1}, {2}}, {{0}, {0}}, {{1}, {1}}, {{0, 2}, {0, 2}}, {{2, -2}, {1, 2}}, {{}, {0, 1, 2}}};
  uint32_t seed = 1;
  for (Dtype dt : kFloatLike) {
    double lo = is_unsigned_integral(dt) || dt == bool_ ? 0 : -4;
    Array x = random_array(s, dt, lo, 4, seed++);
    auto xv = as_doubles(x);
    for (const auto& [axes, norm] : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " axes " + shape_to_string(Shape(norm.begin(), norm.end())));
      Array sm = softmax(x, axes), ls = log_softmax(x, axes);
      EXPECT_EQ(sm.dtype(), result_of(dt));
      EXPECT_EQ(ls.dtype(), result_of(dt));
      EXPECT_EQ(sm.shape(), s);
      double tol = 4 * tolerance_for(result_of(dt));
      EXPECT_TRUE(all_close(sm, ref_softmax(xv, s, norm, false), tol, tol * 1e-2));
      EXPECT_TRUE(all_close(ls, ref_softmax(xv, s, norm, true), tol, tol));
    }
  }
}

TEST(Softmax, DefaultAxisIsLast) {
  Array x = random_array({2, 3, 6}, float32, -3, 3, 10);
  EXPECT_TRUE(test::bit_equal(softmax(x), softmax(x, {2})));
  EXPECT_TRUE(test::bit_equal(log_softmax(x), log_softmax(x, {-1})));
}

TEST(Softmax, StableAndNonFinite) {
  // exp(1000) overflows without the max shift.
  Array big = Array({1000.0f, 1001.0f, 999.0f});
  double e0 = std::exp(-1.0), e2 = std::exp(-2.0), tot = 1 + e0 + e2;
  EXPECT_TRUE(all_close(softmax(big), {e0 / tot, 1 / tot, e2 / tot}, 1e-6, 1e-7));
  EXPECT_TRUE(all_close(log_softmax(big), {-1 - std::log(tot), -std::log(tot), -2 - std::log(tot)}, 1e-6, 1e-6));
  Array ninf = Array({0.0f, -INFINITY, 0.0f});
  EXPECT_TRUE(all_close(softmax(ninf), {0.5, 0.0, 0.5}));
  EXPECT_TRUE(all_close(log_softmax(ninf), {-std::log(2.0), -kInf, -std::log(2.0)}));
  // A row of only -inf has no distribution (NaN, as in PyTorch); NaN propagates.
  EXPECT_TRUE(all_close(softmax(Array({-INFINITY, -INFINITY})), {kNaN, kNaN}));
  EXPECT_TRUE(all_close(softmax(Array({1.0f, NAN})), {kNaN, kNaN}));
  // float16 inputs near the top of their range.
  Array h = astype(Array({60000.0f, 60000.0f}), float16);
  EXPECT_TRUE(all_close(softmax(h), {0.5, 0.5}));
}

TEST(Softmax, NonContiguousAndEmpty) {
  Array base = random_array({5, 7}, float64, -3, 3, 11);
  Array t = transpose(base);
  EXPECT_TRUE(all_close(softmax(t), as_doubles(softmax(copy(t))), 1e-15, 1e-15));
  Array f = slice(base, {4, 6}, {-6, -8}, {-1, -2});
  EXPECT_TRUE(all_close(log_softmax(f, {0}), as_doubles(log_softmax(copy(f), {0})), 1e-15, 1e-15));
  Array e = zeros({2, 0}, float16);
  EXPECT_EQ(softmax(e).shape(), (Shape{2, 0}));
  EXPECT_EQ(softmax(e).dtype(), float16);
  EXPECT_EQ(log_softmax(zeros({0, 3}, int32), {0}).dtype(), float32);
}

// ---- layer_norm / rms_norm -------------------------------------------------------------------

std::vector<double> ref_norm(const std::vector<double>& x, int64_t d, const std::vector<double>* w,
                             const std::vector<double>* b, double eps, bool rms) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mean += x[r * d + j];
    mean = rms ? 0.0 : mean / d;
    for (int64_t j = 0; j < d; ++j) var += (x[r * d + j] - mean) * (x[r * d + j] - mean);
    var /= d;
    for (int64_t j = 0; j < d; ++j) {
      double y = (x[r * d + j] - mean) / std::sqrt(var + eps);
      if (w) y *= (*w)[j];
      if (b) y += (*b)[j];
      out[r * d + j] = y;
    }
  }
  return out;
}

TEST(LayerNorm, EveryDtypeWithAndWithoutParams) {
  uint32_t seed = 20;
  for (Dtype dt : kFloatLike) {
    double lo = is_unsigned_integral(dt) || dt == bool_ ? 0 : -3;
    Array x = random_array({4, 3, 16}, dt, lo, 3, seed++);
    Dtype pd = is_floating(dt) ? dt : float32;
    Array w = random_array({16}, pd, 0.5, 1.5, seed++), b = random_array({16}, pd, -1, 1, seed++);
    auto xv = as_doubles(x), wv = as_doubles(w), bv = as_doubles(b);
    double tol = 8 * tolerance_for(result_of(dt));
    for (double eps : {1e-5, 0.1}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " eps " + std::to_string(eps));
      Array plain = layer_norm(x, std::nullopt, std::nullopt, eps);
      EXPECT_EQ(plain.dtype(), result_of(dt));
      EXPECT_EQ(plain.shape(), x.shape());
      EXPECT_TRUE(all_close(plain, ref_norm(xv, 16, nullptr, nullptr, eps, false), tol, tol));
      EXPECT_TRUE(all_close(layer_norm(x, w, std::nullopt, eps), ref_norm(xv, 16, &wv, nullptr, eps, false), tol, tol));
      EXPECT_TRUE(all_close(layer_norm(x, w, b, eps), ref_norm(xv, 16, &wv, &bv, eps, false), tol, tol));
      EXPECT_TRUE(all_close(layer_norm(x, std::nullopt, b, eps), ref_norm(xv, 16, nullptr, &bv, eps, false), tol, tol));
      EXPECT_TRUE(all_close(rms_norm(x, std::nullopt, eps), ref_norm(xv, 16, nullptr, nullptr, eps, true), tol, tol));
      Array rw = rms_norm(x, w, eps);
      EXPECT_EQ(rw.dtype(), result_of(dt));
      EXPECT_TRUE(all_close(rw, ref_norm(xv, 16, &wv, nullptr, eps, true), tol, tol));
    }
  }
}

TEST(LayerNorm, MixedDtypesAndEdgeCases) {
  Array x = random_array({2, 8}, float16, -2, 2, 30);
  Array w = random_array({8}, float32, 0.5, 1.5, 31);
  // The result dtype promotes x with its parameters.
  EXPECT_EQ(layer_norm(x, w, std::nullopt).dtype(), float32);
  EXPECT_EQ(rms_norm(x, w).dtype(), float32);
  auto wv = as_doubles(w);
  EXPECT_TRUE(all_close(layer_norm(x, w, std::nullopt), ref_norm(as_doubles(x), 8, &wv, nullptr, 1e-5, false), 1e-5, 1e-5));
  // A constant row normalizes to zero (variance 0, eps keeps it finite).
  Array c = full({3, 5}, Array(2.5f));
  EXPECT_TRUE(all_close(layer_norm(c, std::nullopt, std::nullopt), std::vector<double>(15, 0.0)));
  // 1-d input, non-contiguous input, empty rows.
  Array v = random_array({6}, float64, -3, 3, 32);
  EXPECT_TRUE(all_close(layer_norm(v, std::nullopt, std::nullopt), ref_norm(as_doubles(v), 6, nullptr, nullptr, 1e-5, false),
                        1e-12, 1e-12));
  Array t = transpose(random_array({7, 4}, float64, -3, 3, 33));
  EXPECT_TRUE(all_close(rms_norm(t, std::nullopt), ref_norm(as_doubles(t), 7, nullptr, nullptr, 1e-5, true), 1e-12, 1e-12));
  EXPECT_EQ(layer_norm(zeros({0, 4}), std::nullopt, std::nullopt).shape(), (Shape{0, 4}));
  EXPECT_EQ(rms_norm(zeros({3, 0}), std::nullopt).shape(), (Shape{3, 0}));
}

// ---- gelu / silu -----------------------------------------------------------------------------

TEST(Activations, GeluAndSiluEveryDtype) {
  uint32_t seed = 40;
  for (Dtype dt : kFloatLike) {
    double lo = is_unsigned_integral(dt) || dt == bool_ ? 0 : -6;
    Array x = random_array({5, 41}, dt, lo, 6, seed++);
    auto xv = as_doubles(x);
    std::vector<double> ge(xv.size()), gt(xv.size()), si(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) {
      double v = xv[i];
      ge[i] = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
      gt[i] = 0.5 * v * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
      si[i] = v / (1 + std::exp(-v));
    }
    SCOPED_TRACE(dtype_name(dt));
    double tol = 4 * tolerance_for(result_of(dt));
    Array a = gelu(x), b = gelu(x, true), c = silu(x);
    EXPECT_EQ(a.dtype(), result_of(dt));
    EXPECT_EQ(b.dtype(), result_of(dt));
    EXPECT_EQ(c.dtype(), result_of(dt));
    EXPECT_EQ(a.shape(), x.shape());
    EXPECT_TRUE(all_close(a, ge, tol, tol));
    EXPECT_TRUE(all_close(b, gt, tol, tol));
    EXPECT_TRUE(all_close(c, si, tol, tol));
  }
}

TEST(Activations, SpecialValues) {
  Array x = Array({0.0f, -INFINITY, INFINITY, NAN, -30.0f, 30.0f});
  // -inf gives NaN (-inf * 0), as the same formula does in PyTorch, JAX and ONNX's reference.
  EXPECT_TRUE(all_close(gelu(x), {0, kNaN, kInf, kNaN, 0, 30}));
  EXPECT_TRUE(all_close(gelu(x, true), {0, kNaN, kInf, kNaN, 0, 30}));
  EXPECT_TRUE(all_close(silu(x), {0, kNaN, kInf, kNaN, -30 / (1 + std::exp(30.0)), 30}, 1e-6, 1e-10));
  EXPECT_EQ(gelu(Array(1.0)).shape(), Shape{});
  EXPECT_NEAR(gelu(Array(1.0)).item<double>(), 0.5 * (1 + std::erf(1 / std::sqrt(2.0))), 1e-15);
  EXPECT_EQ(silu(zeros({0, 2}, bfloat16)).shape(), (Shape{0, 2}));
}

TEST(CompositeErrors, Messages) {
  Array x = zeros({2, 4});
  EXPECT_THROW_MSG(softmax(x, {2}), InvalidArgument, "softmax: axis 2 is out of range for an array of rank 2");
  EXPECT_THROW_MSG(softmax(x, {1, -1}), InvalidArgument, "softmax: repeated axis");
  EXPECT_THROW_MSG(softmax(Array(1.0f)), InvalidArgument, "softmax: axis -1 is out of range for an array of rank 0");
  EXPECT_THROW_MSG(log_softmax(x, {-3}), InvalidArgument, "log_softmax: axis -3 is out of range");
  EXPECT_THROW_MSG(layer_norm(Array(1.0f), std::nullopt, std::nullopt), InvalidArgument,
                   "layer_norm: needs at least 1 dimension to normalize over, got float32[]");
  EXPECT_THROW_MSG(rms_norm(Array(1.0f), std::nullopt), InvalidArgument,
                   "rms_norm: needs at least 1 dimension to normalize over, got float32[]");
  EXPECT_THROW_MSG(layer_norm(x, zeros({5}), std::nullopt), ShapeError,
                   "layer_norm: weight float32[5] must have shape [4] (the last axis of float32[2,4])");
  EXPECT_THROW_MSG(layer_norm(x, std::nullopt, zeros({2, 4})), ShapeError,
                   "layer_norm: bias float32[2,4] must have shape [4] (the last axis of float32[2,4])");
  EXPECT_THROW_MSG(rms_norm(x, zeros({1}, float16)), ShapeError,
                   "rms_norm: weight float16[1] must have shape [4] (the last axis of float32[2,4])");
  EXPECT_THROW_MSG(softmax(Array()), InvalidArgument, "softmax: an input is an empty handle");
  EXPECT_THROW_MSG(log_softmax(Array()), InvalidArgument, "log_softmax: an input is an empty handle");
  EXPECT_THROW_MSG(layer_norm(Array(), std::nullopt, std::nullopt), InvalidArgument, "layer_norm: an input is an empty handle");
  EXPECT_THROW_MSG(layer_norm(x, Array(), std::nullopt), InvalidArgument, "layer_norm: an input is an empty handle");
  EXPECT_THROW_MSG(rms_norm(Array(), std::nullopt), InvalidArgument, "rms_norm: an input is an empty handle");
  EXPECT_THROW_MSG(gelu(Array()), InvalidArgument, "gelu: an input is an empty handle");
  EXPECT_THROW_MSG(silu(Array()), InvalidArgument, "silu: an input is an empty handle");
}

}  // namespace
}  // namespace smelt
