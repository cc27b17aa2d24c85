// Every primitive's vjp and jvp rule against central finite differences in float64, and the rules table.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <set>
#include <string>

#include "smelt/attention.h"
#include "smelt/compile.h"
#include "smelt/transforms.h"
#include "src/core/node.h"
#include "src/transforms/rules.h"
#include "test_utils.h"

namespace smelt {
namespace {

using Fn = std::function<Array(const std::vector<Array>&)>;

struct Case {
  std::string name;
  PrimKind kind;              // the primitive whose rules the case exercises
  std::vector<Shape> shapes;  // float64 inputs
  double lo = -2.0, hi = 2.0; // input domain (kept away from singularities and kinks)
  Fn f;
  bool vjp = true, jvp = true;
};

Array idx(std::vector<int64_t> v, Shape s) { return Array(v, std::move(s)); }

/// A Pad node with any widths: the public pad rejects negative (cropping) ones, which other
/// builders (ONNX's Pad) and rules may make.
Array pad_node(const Array& x, std::vector<int64_t> low, std::vector<int64_t> high, PadMode mode) {
  Shape out = x.shape();
  for (size_t i = 0; i < out.size(); ++i) out[i] += low[i] + high[i];
  PadParams p{std::move(low), std::move(high), mode, Scalar::of_int(0).cast(x.dtype())};
  return make_array(out, x.dtype(), x.device(), make_prim(PrimKind::Pad, p), {x});
}

/// An exclusive cummax/cummin (the public ops are inclusive), with the first output of the scan
/// (the identity, ±inf) cut off.
Array exclusive_scan(const Array& x, ScanOp op, int axis, bool reverse) {
  Array s = make_array(x.shape(), x.dtype(), x.device(), make_prim(PrimKind::Scan, ScanParams{op, axis, reverse, true}), {x});
  std::vector<int64_t> start(2, 0), stop = {s.shape(0), s.shape(1)};
  (reverse ? stop : start)[static_cast<size_t>(axis)] += reverse ? -1 : 1;
  return slice(s, start, stop);
}

std::vector<Case> cases() {
  using V = const std::vector<Array>&;
  auto u = [](const char* name, Array (*op)(const Array&), double lo = -2.0, double hi = 2.0) {
    return Case{name, PrimKind::Unary, {{3, 4}}, lo, hi, [op](V x) { return op(x[0]); }};
  };
  auto b = [](const char* name, Array (*op)(const Array&, const Array&), double lo = -2.0, double hi = 2.0) {
    // Broadcasting: [3, 4] with [4].
    return Case{name, PrimKind::Binary, {{3, 4}, {4}}, lo, hi, [op](V x) { return op(x[0], x[1]); }};
  };
  std::vector<Case> all = {
      u("abs", abs), u("negative", negative), u("sign", sign), u("square", square),
      u("reciprocal", reciprocal, 0.5, 2.0), u("sqrt", sqrt, 0.5, 2.0), u("rsqrt", rsqrt, 0.5, 2.0), u("exp", exp),
      u("exp2", exp2), u("expm1", expm1), u("log", log, 0.5, 2.0), u("log2", log2, 0.5, 2.0),
      u("log10", log10, 0.5, 2.0), u("log1p", log1p, -0.5, 2.0), u("sin", sin), u("cos", cos),
      u("tan", tan, -1.0, 1.0), u("arcsin", arcsin, -0.9, 0.9), u("arccos", arccos, -0.9, 0.9), u("arctan", arctan),
      u("sinh", sinh), u("cosh", cosh), u("tanh", tanh), u("arcsinh", arcsinh), u("arccosh", arccosh, 1.5, 3.0),
      u("arctanh", arctanh, -0.9, 0.9), u("erf", erf), u("erfinv", erfinv, -0.9, 0.9), u("sigmoid", sigmoid),
      u("relu", relu), u("floor", floor), u("ceil", ceil), u("round", round),
      b("add", add), b("subtract", subtract), b("multiply", multiply), b("divide", divide, 0.5, 2.0),
      b("remainder", remainder, 0.5, 2.0), b("fmod", fmod, 0.5, 2.0), b("maximum", maximum), b("minimum", minimum),
      b("arctan2", arctan2), b("floor_divide", floor_divide, 0.5, 2.0),
      {"power", PrimKind::Binary, {{3, 4}, {3, 1}}, 0.5, 2.0, [](V x) { return power(x[0], x[1]); }},
      {"where", PrimKind::Select, {{3, 4}, {4}}, -2, 2,
       [](V x) { return where(Array({true, false, true, true}), x[0], x[1]); }},
      {"copy", PrimKind::Copy, {{3, 4}}, -2, 2, [](V x) { return copy(x[0]) * x[0]; }},
      {"reshape", PrimKind::Reshape, {{3, 4}}, -2, 2, [](V x) { return reshape(x[0], {2, 6}) * reshape(x[0], {2, 6}); }},
      {"transpose", PrimKind::Transpose, {{3, 4}}, -2, 2, [](V x) { return sin(transpose(x[0])); }},
      {"broadcast_to", PrimKind::Broadcast, {{4}}, -2, 2, [](V x) { return broadcast_to(x[0], {3, 4}) * reshape(arange(12.0, 24.0, 1.0, float64), {3, 4}); }},
      {"slice", PrimKind::Slice, {{5, 4}}, -2, 2, [](V x) { return exp(slice(x[0], {4, 1}, {0, 4}, {-2, 2})); }},
      {"slice_update", PrimKind::SliceUpdate, {{5, 4}, {2, 2}}, -2, 2,
       [](V x) { return sin(slice_update(x[0], x[1], {1, 0}, {5, 4}, {2, 2})); }},
      {"concatenate", PrimKind::Concatenate, {{2, 4}, {3, 4}}, -2, 2, [](V x) { return sin(concatenate({x[0], x[1]}, 0)); }},
      {"pad", PrimKind::Pad, {{3, 4}}, -2, 2, [](V x) { return exp(pad(x[0], {{1, 2}, {0, 1}})); }},
      {"pad_edge", PrimKind::Pad, {{3, 4}}, -2, 2, [](V x) { return exp(pad(x[0], {{1, 2}, {0, 3}}, PadMode::Edge)); }},
      {"pad_reflect", PrimKind::Pad, {{3, 5}}, -2, 2, [](V x) { return exp(pad(x[0], {{2, 1}, {3, 2}}, PadMode::Reflect)); }},
      {"sum", PrimKind::Reduce, {{3, 4}}, -2, 2, [](V x) { return sum(x[0] * x[0], {1}); }},
      {"mean", PrimKind::Reduce, {{3, 4}}, -2, 2, [](V x) { return mean(sin(x[0]), {0}); }},
      {"var", PrimKind::Reduce, {{3, 4}}, -2, 2, [](V x) { return var(x[0], {1}, false, 1); }},
      {"prod", PrimKind::Reduce, {{3, 4}}, 0.5, 1.5, [](V x) { return prod(x[0], {0}); }},
      {"max", PrimKind::Reduce, {{3, 4}}, -2, 2, [](V x) { return max(x[0], {1}); }},
      {"min", PrimKind::Reduce, {{3, 4}}, -2, 2, [](V x) { return min(x[0]); }},
      {"logsumexp", PrimKind::Reduce, {{3, 4}}, -2, 2, [](V x) { return logsumexp(x[0], {1}); }},
      {"cumsum", PrimKind::Scan, {{3, 4}}, -2, 2, [](V x) { return sin(cumsum(x[0], 1)); }},
      {"cumsum_reverse_exclusive", PrimKind::Scan, {{3, 4}}, -2, 2, [](V x) { return sin(cumsum(x[0], 0, true, true)); }},
      {"cumprod", PrimKind::Scan, {{3, 4}}, 0.5, 1.5, [](V x) { return cumprod(x[0], 1); }},
      {"cummax", PrimKind::Scan, {{3, 5}}, -2, 2, [](V x) { return cummax(x[0], 1); }},
      {"cummin_reverse", PrimKind::Scan, {{4, 3}}, -2, 2, [](V x) { return cummin(x[0], 0, true); }},
      {"matmul", PrimKind::Matmul, {{3, 4}, {4, 2}}, -2, 2, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul_batched", PrimKind::Matmul, {{2, 3, 4}, {4, 2}}, -2, 2, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul_vector", PrimKind::Matmul, {{4}, {4, 2}}, -2, 2, [](V x) { return matmul(x[0], x[1]); }},
      {"take", PrimKind::Gather, {{3, 4}}, -2, 2, [](V x) { return take(x[0], idx({2, 0, 2, -1}, {2, 2}), 1); }},
      {"take_along_axis", PrimKind::GatherElements, {{3, 4}}, -2, 2,
       [](V x) { return take_along_axis(x[0], idx({0, 2, 1, 1, 0, 2, 2, 2}, {2, 4}), 0); }},
      {"gather_nd", PrimKind::GatherND, {{3, 4}}, -2, 2, [](V x) { return gather_nd(x[0], idx({2, 1, 0, 3, 2, 1}, {3, 2})); }},
      {"scatter", PrimKind::Scatter, {{3, 4}, {2, 3}}, -2, 2,
       [](V x) { return sin(scatter(x[0], idx({1, 0, 2, 2, 1, 0}, {2, 3}), x[1], 0)); }},
      {"scatter_add", PrimKind::Scatter, {{3, 4}, {2, 3}}, -2, 2,
       [](V x) { return sin(scatter(x[0], idx({1, 0, 1, 1, 0, 1}, {2, 3}), x[1], 0, ScatterReduce::Add)); }},
      {"scatter_nd", PrimKind::ScatterND, {{3, 4}, {2, 4}}, -2, 2,
       [](V x) { return sin(scatter_nd(x[0], idx({2, 0}, {2, 1}), x[1])); }},
      {"scatter_nd_add", PrimKind::ScatterND, {{3, 4}, {3, 4}}, -2, 2,
       [](V x) { return sin(scatter_nd(x[0], idx({2, 0, 2}, {3, 1}), x[1], ScatterReduce::Add)); }},
      {"scatter_mul", PrimKind::Scatter, {{3, 4}, {2, 3}}, 0.5, 1.5,
       [](V x) { return scatter(x[0], idx({1, 0, 1, 1, 0, 1}, {2, 3}), x[1], 0, ScatterReduce::Mul); }},
      {"scatter_max", PrimKind::Scatter, {{3, 4}, {2, 3}}, -2, 2,
       [](V x) { return scatter(x[0], idx({1, 0, 1, 1, 0, 1}, {2, 3}), x[1], 0, ScatterReduce::Max); }},
      {"scatter_min", PrimKind::Scatter, {{3, 4}, {2, 3}}, -2, 2,
       [](V x) { return scatter(x[0], idx({1, 0, 1, 1, 0, 1}, {2, 3}), x[1], 0, ScatterReduce::Min); }},
      {"scatter_nd_mul", PrimKind::ScatterND, {{3, 4}, {3, 4}}, 0.5, 1.5,
       [](V x) { return scatter_nd(x[0], idx({2, 0, 2}, {3, 1}), x[1], ScatterReduce::Mul); }},
      {"scatter_nd_max", PrimKind::ScatterND, {{3, 4}, {3, 4}}, -2, 2,
       [](V x) { return scatter_nd(x[0], idx({2, 0, 2}, {3, 1}), x[1], ScatterReduce::Max); }},
      {"scatter_nd_min", PrimKind::ScatterND, {{3, 4}, {3, 4}}, -2, 2,
       [](V x) { return scatter_nd(x[0], idx({2, 0, 2}, {3, 1}), x[1], ScatterReduce::Min); }},
      {"gather_nd_batch_dims", PrimKind::GatherND, {{2, 3, 4}}, -2, 2,
       [](V x) { return gather_nd(x[0], idx({2, 0, 2, 1, 2, 0}, {2, 3, 1}), 1); }},
      // Cropping on the leading axes: the CPU Pad kernel's last-axis path assumes non-negative
      // widths there (its row loop writes [low, low + width) of each row).
      {"pad_cropping", PrimKind::Pad, {{4, 5, 2}}, -2, 2,
       [](V x) { return exp(pad_node(x[0], {-1, 2, 0}, {1, -2, 1}, PadMode::Constant)); }},
      {"pad_cropping_reflect", PrimKind::Pad, {{4, 5, 2}}, -2, 2,
       [](V x) { return exp(pad_node(x[0], {2, -1, 1}, {-1, 3, 0}, PadMode::Reflect)); }},
      {"pad_cropping_edge", PrimKind::Pad, {{4, 5, 2}}, -2, 2,
       [](V x) { return exp(pad_node(x[0], {-2, 1, 0}, {2, -3, 1}, PadMode::Edge)); }},
      {"cummax_exclusive", PrimKind::Scan, {{3, 5}}, -2, 2, [](V x) { return exclusive_scan(x[0], ScanOp::Max, 1, false); }},
      {"cummin_exclusive_reverse", PrimKind::Scan, {{4, 3}}, -2, 2,
       [](V x) { return exclusive_scan(x[0], ScanOp::Min, 0, true); }},
      {"sort", PrimKind::Sort, {{3, 4}}, -2, 2, [](V x) { return sort(x[0], 1) * arange(0.0, 4.0, 1.0, float64); }},
      {"topk", PrimKind::TopK, {{3, 5}}, -2, 2, [](V x) { return topk(x[0], 2, 1).first * Array({1.0, 3.0}); }},
      {"conv", PrimKind::Conv, {{2, 2, 6, 5}, {3, 2, 3, 2}}, -2, 2, [](V x) { return conv2d(x[0], x[1], {2, 1}, {1, 0}, {1, 2}); }},
      {"conv_grouped", PrimKind::Conv, {{1, 4, 7}, {6, 2, 3}}, -2, 2,
       [](V x) { return conv(x[0], x[1], {.strides = {2}, .padding_lo = {1}, .padding_hi = {2}, .groups = 2}); }},
      {"conv_transpose", PrimKind::ConvTranspose, {{2, 2, 3, 4}, {2, 3, 2, 3}}, -2, 2,
       [](V x) { return conv_transpose(x[0], x[1], {.strides = {2, 1}, .padding_lo = {1, 0}, .padding_hi = {0, 1}, .dilations = {1, 2}, .output_padding = {1, 0}}); }},
      {"conv_transpose_grouped", PrimKind::ConvTranspose, {{1, 4, 5}, {4, 2, 3}}, -2, 2,
       [](V x) { return conv_transpose(x[0], x[1], {.strides = {3}, .groups = 2}); }},
      {"avg_pool", PrimKind::Pool, {{2, 3, 6, 5}}, -2, 2,
       [](V x) { return avg_pool(x[0], {.kernel = {3, 2}, .strides = {2, 2}, .padding_lo = {1, 0}, .padding_hi = {1, 1}}); }},
      {"avg_pool_ceil_count_pad", PrimKind::Pool, {{1, 2, 7}}, -2, 2,
       [](V x) { return avg_pool(x[0], {.kernel = {3}, .strides = {2}, .padding_lo = {1}, .padding_hi = {1}, .ceil_mode = true, .count_include_pad = true}); }},
      {"avg_pool_ceil_dilated", PrimKind::Pool, {{1, 2, 8}}, -2, 2,
       [](V x) { return avg_pool(x[0], {.kernel = {2}, .strides = {3}, .dilations = {2}, .ceil_mode = true}); }},
      {"max_pool", PrimKind::Pool, {{2, 2, 6, 5}}, -2, 2,
       [](V x) { return max_pool(x[0], {.kernel = {3, 2}, .strides = {2, 1}, .padding_lo = {1, 0}, .padding_hi = {1, 1}, .dilations = {1, 2}}); }},
      {"max_pool_ceil", PrimKind::Pool, {{1, 2, 8}}, -2, 2,
       [](V x) { return max_pool(x[0], {.kernel = {3}, .strides = {2}, .ceil_mode = true}); }},
      {"softmax", PrimKind::Reduce, {{3, 4}}, -2, 2, [](V x) { return softmax(x[0]); }},
      {"layer_norm", PrimKind::Reduce, {{3, 4}, {4}}, -2, 2, [](V x) { return layer_norm(x[0], x[1], std::nullopt); }},
      // Two query heads share one key/value head; the additive mask gets a cotangent too.
      {"attention_gqa_causal_mask", PrimKind::Attention, {{1, 2, 3, 2}, {1, 1, 4, 2}, {1, 1, 4, 2}, {1, 4}}, -2, 2,
       [](V x) {
         return scaled_dot_product_attention(x[0], x[1], x[2], {.mask = x[3], .causal = CausalMask::LowerRight});
       }},
      {"attention_scale_softcap", PrimKind::Attention, {{1, 1, 3, 2}, {1, 1, 3, 2}, {1, 1, 3, 3}}, -2, 2,
       [](V x) { return scaled_dot_product_attention(x[0], x[1], x[2], {.scale = 0.7, .softcap = 1.5}); }},
  };
  // Several shapes: every element-wise rule again on a 0-d input and on rank 3, and every binary
  // rule with both operands broadcast ([2,1,3] with [4,1]) and a 0-d operand against a vector.
  const size_t n = all.size();
  for (size_t i = 0; i < n; ++i) {
    const Case c = all[i];
    if (c.kind == PrimKind::Unary && c.shapes == std::vector<Shape>{{3, 4}}) {
      for (const Shape& s : {Shape{}, Shape{2, 3, 2}}) {
        Case v = c;
        v.name += " " + shape_to_string(s);
        v.shapes = {s};
        all.push_back(v);
      }
    }
    if (c.kind == PrimKind::Binary && c.shapes == std::vector<Shape>{{3, 4}, {4}}) {
      for (const auto& s : {std::vector<Shape>{{2, 1, 3}, {4, 1}}, std::vector<Shape>{{}, {3}}}) {
        Case v = c;
        v.name += " " + shape_to_string(s[0]) + "," + shape_to_string(s[1]);
        v.shapes = s;
        all.push_back(v);
      }
    }
  }
  return all;
}

double dot(const Array& a, const Array& b) { return sum(a * b).item<double>(); }

// Central differences: (F(h) - F(-h)) / 2h with F(s) = <w, f(x + s u)>, |u|, |w| <= 1. The
// truncation error is at most h²/6 · max|F'''| and the rounding error about ε · max|F| / h. On
// these domains (at most 30 elements, kept away from singularities) |F| <= ~1e3 and
// |F'''| <= ~1e4 (arctanh near ±0.9 is the steepest: (2+6x²)/(1-x²)³ ≈ 1e3 per element), so with
// h = 1e-5 in float64 the difference is within 1e-10·1e4/6 + 2.2e-16·1e3/1e-5 ≈ 2e-7 of the
// derivative. kTol = 1e-6 (relative to 1 + |derivative|) is above that bound, while a wrong rule
// is off by O(1).
constexpr double kStep = 1e-5;
constexpr double kTol = 1e-6;

void check_case(const Case& c, bool transposed_inputs, uint32_t seed) {
  SCOPED_TRACE(c.name + (transposed_inputs ? " (transposed inputs)" : ""));
  std::vector<Array> x, u;
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    Shape s = c.shapes[i];
    if (transposed_inputs && s.size() == 2) {
      // A non-contiguous input: the transpose of an array of the reversed shape.
      x.push_back(transpose(test::random_array({s[1], s[0]}, float64, c.lo, c.hi, seed + static_cast<uint32_t>(i))));
    } else {
      x.push_back(test::random_array(s, float64, c.lo, c.hi, seed + static_cast<uint32_t>(i)));
    }
    u.push_back(test::random_array(s, float64, -1, 1, seed + 50 + static_cast<uint32_t>(i)));
  }
  ArrayFn fn = [&](const std::vector<Array>& in) { return std::vector<Array>{c.f(in)}; };
  Array out = c.f(x);
  Array w = test::random_array(out.shape(), float64, -1, 1, seed + 99);
  auto shifted = [&](double h) {
    std::vector<Array> xs;
    for (size_t i = 0; i < x.size(); ++i) xs.push_back(x[i] + u[i] * h);
    return dot(w, c.f(xs));
  };
  const double fd = (shifted(kStep) - shifted(-kStep)) / (2 * kStep);
  const double tol = kTol * (1.0 + std::abs(fd));
  double vjp_dot = 0, jvp_dot = 0;
  if (c.vjp) {
    auto [outs, grads] = vjp(fn, x, {w});
    EXPECT_TRUE(test::bit_equal(outs[0], out));
    ASSERT_EQ(grads.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(grads[i].shape(), x[i].shape());
      vjp_dot += dot(grads[i], u[i]);
    }
    EXPECT_NEAR(vjp_dot, fd, tol) << "vjp";
  }
  if (c.jvp) {
    auto [outs, tangents] = jvp(fn, x, u);
    ASSERT_EQ(tangents[0].shape(), out.shape());
    jvp_dot = dot(w, tangents[0]);
    EXPECT_NEAR(jvp_dot, fd, tol) << "jvp";
  }
  // <w, J u> both ways: the two modes agree to rounding (a few ulps of the terms summed).
  if (c.vjp && c.jvp) {
    EXPECT_NEAR(vjp_dot, jvp_dot, 1e-10 * (1.0 + std::abs(jvp_dot)));
  }
}

TEST(AutodiffRules, EveryRuleMatchesFiniteDifferences) {
  for (const auto& c : cases()) check_case(c, false, 7);
}

TEST(AutodiffRules, RulesHoldOnNonContiguousInputs) {
  for (const auto& c : cases()) check_case(c, true, 21);
}

// The batching rules of every backward and forward graph: vmap of each case's vjp and jvp over a
// batch of inputs, cotangents and tangents equals the loop of unbatched calls bit for bit.
TEST(AutodiffRules, VmapOfEveryVjpAndJvpEqualsTheLoop) {
  constexpr int64_t kB = 2;
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    const size_t k = c.shapes.size();
    ArrayFn fn = [&](const std::vector<Array>& in) { return std::vector<Array>{c.f(in)}; };
    ArrayFn rules = [&](const std::vector<Array>& in) {
      std::vector<Array> x(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(k));
      std::vector<Array> u(in.begin() + static_cast<std::ptrdiff_t>(k), in.begin() + static_cast<std::ptrdiff_t>(2 * k));
      std::vector<Array> r;
      if (c.vjp) r = vjp(fn, x, {in[2 * k]}).second;
      if (c.jvp) r.push_back(jvp(fn, x, u).second[0]);
      return r;
    };
    std::vector<Array> inputs;
    std::vector<Array> first;  // example 0, to find the output's shape
    for (size_t i = 0; i < k; ++i) {
      Shape s = c.shapes[i];
      s.insert(s.begin(), kB);
      inputs.push_back(test::random_array(s, float64, c.lo, c.hi, 300 + static_cast<uint32_t>(i)));
      first.push_back(reshape(slice(inputs.back(), Axes{0}, {0}, {1}, {1}), c.shapes[i]));
    }
    for (size_t i = 0; i < k; ++i) {
      Shape s = c.shapes[i];
      s.insert(s.begin(), kB);
      inputs.push_back(test::random_array(s, float64, -1, 1, 400 + static_cast<uint32_t>(i)));
    }
    Shape ws = c.f(first).shape();
    ws.insert(ws.begin(), kB);
    inputs.push_back(test::random_array(ws, float64, -1, 1, 500));
    std::vector<Array> got = detail::vmap_flat(rules, inputs, std::vector<std::optional<int>>(inputs.size(), 0), {0});
    std::vector<std::vector<Array>> loop;
    for (int64_t b = 0; b < kB; ++b) {
      std::vector<Array> ex;
      for (const auto& a : inputs) {
        Shape rest(a.shape().begin() + 1, a.shape().end());
        ex.push_back(reshape(slice(a, Axes{0}, {b}, {b + 1}, {1}), rest));
      }
      loop.push_back(rules(ex));
    }
    ASSERT_EQ(got.size(), loop[0].size());
    for (size_t j = 0; j < got.size(); ++j) {
      std::vector<Array> parts;
      for (const auto& l : loop) parts.push_back(l[j]);
      EXPECT_TRUE(test::bit_equal(got[j], stack(parts, 0))) << "result " << j;
    }
  }
}

TEST(AutodiffRules, EveryPrimitiveKindDeclaresItsRules) {
  std::set<PrimKind> covered;
  for (const auto& c : cases()) covered.insert(c.kind);
  // A cast changes the precision, so finite differences cannot check it to kTol: grad_test checks
  // its rule exactly (the cotangent cast back).
  covered.insert(PrimKind::Cast);
  auto check = [&](PrimKind kind) {
    transforms::RuleInfo info = transforms::rule_info(kind);
    EXPECT_NE(std::string(info.note), "?") << prim_name(kind);
    EXPECT_FALSE(std::string(info.note).empty()) << prim_name(kind);
    // A kind with a (full or partial) rule in either mode has a finite-difference case above.
    bool has_rule = info.vjp == transforms::Rule::Full || info.vjp == transforms::Rule::Partial ||
                    info.jvp == transforms::Rule::Full || info.jvp == transforms::Rule::Partial;
    if (has_rule) {
      EXPECT_TRUE(covered.count(kind)) << prim_name(kind) << " has rules but no finite-difference case";
    }
  };
  check(PrimKind::None);
#define X(name, ...) check(PrimKind::name);
  SMELT_PRIMITIVES(X)
#undef X
}

// The compile engine's fused node exists only in compiled tapes (a compiled function called inside
// a transform runs its function), so no rule can meet it; if one did, each says so by name.
TEST(AutodiffRules, AFusedNodeHasNoRulesAndSaysWhy) {
  CompileOptions o;
  o.tiered = false;  // fused from the first call (tiered execution would run it unfused first)
  auto cf = compile([](const Array& x) { return exp(x) * 2.0f + 1.0f; }, o);
  Array x = test::random_array({3, 4}, float32, -1, 1, 5);
  Array y = cf(x);
  ASSERT_EQ(y.node().prim.kind, PrimKind::Fused) << "the replay should return the fused kernel's lazy output";
  const std::string why = "exists only in compiled tapes";
  EXPECT_THROW_MSG(transforms::vjp_rule(y, ones_like(y)), UnsupportedError, "vjp: Fused(");
  EXPECT_THROW_MSG(transforms::vjp_rule(y, ones_like(y)), UnsupportedError,
                   "has no vjp rule (" + why);
  EXPECT_THROW_MSG(transforms::vjp_rule(y, ones_like(y)), UnsupportedError, "inputs float32[3,4], output float32[3,4]");
  EXPECT_THROW_MSG(transforms::jvp_rule(y, {ones_like(x)}), UnsupportedError, "has no jvp rule (" + why);
  EXPECT_THROW_MSG(transforms::batch_rule(y, {ones({2, 3, 4})}, 2), UnsupportedError,
                   "vmap: Fused(");
  EXPECT_THROW_MSG(transforms::batch_rule(y, {ones({2, 3, 4})}, 2), UnsupportedError, "has no batching rule (" + why);
}

// docs/transforms.md's table of rules is generated from rule_info, so it cannot drift: this test
// fails when they differ (SMELT_UPDATE_GOLDEN=1 rewrites the table in the file).
std::string rules_table() {
  auto cell = [](transforms::Rule r) -> std::string {
    switch (r) {
      case transforms::Rule::Full: return "yes";
      case transforms::Rule::Partial: return "partial";
      case transforms::Rule::Loop: return "loop";
      case transforms::Rule::Zero: return "zero";
      case transforms::Rule::NoInputs: return "-";
      case transforms::Rule::None: return "**none**";
    }
    return "?";
  };
  std::ostringstream os;
  os << "| primitive | vjp | jvp | vmap | differentiation | batching |\n|---|---|---|---|---|---|\n";
  auto row = [&](PrimKind kind) {
    transforms::RuleInfo info = transforms::rule_info(kind);
    os << "| " << prim_name(kind) << " | " << cell(info.vjp) << " | " << cell(info.jvp) << " | " << cell(info.batch)
       << " | " << info.note << " | " << info.batch_note << " |\n";
  };
#define X(name, ...) row(PrimKind::name);
  SMELT_PRIMITIVES(X)
#undef X
  return os.str();
}

TEST(AutodiffRules, TheDocsTableIsTheRulesTable) {
  const std::filesystem::path doc = std::filesystem::path(__FILE__).parent_path() / "../../docs/transforms.md";
  std::ifstream in(doc);
  ASSERT_TRUE(in) << doc;
  std::stringstream buf;
  buf << in.rdbuf();
  std::string text = buf.str();
  const std::string begin = "<!-- rules-table:begin (generated by tests/transforms/rules_test.cpp) -->\n";
  const std::string end = "<!-- rules-table:end -->";
  const size_t b = text.find(begin), e = text.find(end);
  ASSERT_NE(b, std::string::npos) << doc << " has no generated rules table";
  ASSERT_NE(e, std::string::npos) << doc << " has no end of the generated rules table";
  const std::string current = text.substr(b + begin.size(), e - b - begin.size());
  const std::string want = rules_table();
  if (current != want && std::getenv("SMELT_UPDATE_GOLDEN")) {
    text.replace(b + begin.size(), e - b - begin.size(), want);
    std::ofstream(doc) << text;
    return;
  }
  EXPECT_EQ(current, want) << "docs/transforms.md's rules table differs from rule_info; run with SMELT_UPDATE_GOLDEN=1";
}

}  // namespace
}  // namespace smelt
