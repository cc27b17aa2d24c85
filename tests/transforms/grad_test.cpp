// grad, value_and_grad, vjp, jvp and stop_gradient: trees and argnums, higher order, compile, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "smelt/compile.h"
#include "smelt/transforms.h"
#include "test_utils.h"

namespace smelt {
namespace {

struct Linear {
  Array w, b;
  float scale;  // a static leaf: kept as is in the gradient tree
};

}  // namespace
}  // namespace smelt

SMELT_TREE(smelt::Linear, w, b, scale)

namespace smelt {
namespace {

using test::all_close;
using test::as_doubles;
using test::bit_equal;
using test::random_array;

// float64 references: the rules compute in float64 here, so a few ulps of rounding per op.
constexpr double kTol = 1e-12;

TEST(Grad, MatchesTheAnalyticGradient) {
  Array x = random_array({5}, float64, -2, 2, 1);
  Array g = grad([](const Array& x) { return sum(sin(x) * x); })(x);
  std::vector<double> want;
  for (double v : as_doubles(x)) want.push_back(std::cos(v) * v + std::sin(v));
  EXPECT_TRUE(all_close(g, want, kTol, kTol));
}

TEST(Grad, ValueAndGradOverTreesWithArgnums) {
  Linear p{random_array({3, 2}, float64, -1, 1, 2), random_array({2}, float64, -1, 1, 3), 2.0f};
  Array x = random_array({4, 3}, float64, -1, 1, 4);
  auto loss = [](const Linear& p, const Array& x) { return sum(square(matmul(x, p.w) + p.b)) * p.scale; };
  auto [value, grads] = value_and_grad(loss, argnums<0, 1>)(p, x);
  auto& [gp, gx] = grads;
  EXPECT_TRUE(bit_equal(value, loss(p, x)));
  // d/dW = 2·scale·xᵀ(xW + b), d/db = 2·scale·Σ_rows(xW + b), d/dx = 2·scale·(xW + b)Wᵀ.
  Array r = (matmul(x, p.w) + p.b) * 4.0;
  EXPECT_TRUE(all_close(gp.w, as_doubles(matmul(transpose(x), r)), kTol, kTol));
  EXPECT_TRUE(all_close(gp.b, as_doubles(sum(r, {0})), kTol, kTol));
  EXPECT_TRUE(all_close(gx, as_doubles(matmul(r, transpose(p.w))), kTol, kTol));
  EXPECT_EQ(gp.scale, 2.0f);
  // The default differentiates the first argument only.
  Linear g0 = grad(loss)(p, x);
  EXPECT_TRUE(bit_equal(g0.w, gp.w));
}

TEST(Grad, HasAuxReturnsTheAuxiliaryTreeUndifferentiated) {
  Array x = random_array({4}, float64, -1, 1, 5);
  auto f = [](const Array& x) { return std::pair<Array, Array>{sum(x * x), x * 3.0}; };
  auto [value, g] = value_and_grad(f, has_aux)(x);
  EXPECT_TRUE(bit_equal(value.first, sum(x * x)));
  EXPECT_TRUE(bit_equal(value.second, x * 3.0));
  EXPECT_TRUE(all_close(g, as_doubles(x * 2.0), kTol, kTol));
}

TEST(Grad, StopGradientBlocksTheGradient) {
  Array x = random_array({4}, float64, -1, 1, 6);
  Array g = grad([](const Array& x) { return sum(x * stop_gradient(x)); })(x);
  EXPECT_TRUE(all_close(g, as_doubles(x), kTol, kTol));  // not 2x
  EXPECT_TRUE(bit_equal(stop_gradient(x), x));
}

TEST(Grad, UnusedInputsGetZeros) {
  Array x = random_array({3}, float64, -1, 1, 7), y = random_array({2}, float64, -1, 1, 8);
  auto [gx, gy] = grad([](const Array& x, const Array&) { return sum(x); }, argnums<0, 1>)(x, y);
  EXPECT_TRUE(all_close(gx, {1, 1, 1}, 0, 0));
  EXPECT_TRUE(all_close(gy, {0, 0}, 0, 0));
}

TEST(Grad, CastGradientIsCastBack) {
  Array x = random_array({4}, float32, -1, 1, 9);
  Array y = random_array({4}, float64, -1, 1, 10);
  Array g = grad([&](const Array& x) { return sum(astype(x, float64) * y); })(x);
  EXPECT_EQ(g.dtype(), float32);
  EXPECT_TRUE(bit_equal(g, astype(y, float32)));
}

// Second derivatives: the backward graph is made of differentiable ops.
TEST(Grad, SecondDerivativesMatchAnalyticOnes) {
  Array x = random_array({6}, float64, -1.5, 1.5, 11);
  auto second = [](auto f) {
    auto df = grad(f);
    // The Hessian of a sum of element-wise terms is diagonal: the gradient of sum(f') is f''.
    return grad([df](const Array& x) { return sum(df(x)); });
  };
  const auto xs = as_doubles(x);
  std::vector<double> sin2, cube2, tanh2;
  for (double v : xs) {
    sin2.push_back(-std::sin(v));
    cube2.push_back(6 * v);
    double t = std::tanh(v);
    tanh2.push_back(-2 * t * (1 - t * t));
  }
  EXPECT_TRUE(all_close(second([](const Array& x) { return sum(sin(x)); })(x), sin2, kTol, kTol));
  EXPECT_TRUE(all_close(second([](const Array& x) { return sum(x * x * x); })(x), cube2, kTol, kTol));
  EXPECT_TRUE(all_close(second([](const Array& x) { return sum(power(x, Array(3.0))); })(x), cube2, 1e-10, 1e-10));
  EXPECT_TRUE(all_close(second([](const Array& x) { return sum(tanh(x)); })(x), tanh2, kTol, kTol));
}

TEST(Grad, LogSumExpHessianVectorProduct) {
  // H = diag(p) - p pᵀ with p = softmax(x), so H v = p ⊙ v - p (p·v).
  Array x = random_array({5}, float64, -2, 2, 12), v = random_array({5}, float64, -1, 1, 13);
  auto dlse = grad([](const Array& x) { return logsumexp(x); });
  Array hv = grad([&](const Array& x) { return sum(dlse(x) * v); })(x);
  auto p = as_doubles(softmax(x));
  auto vs = as_doubles(v);
  double pv = 0;
  for (size_t i = 0; i < p.size(); ++i) pv += p[i] * vs[i];
  std::vector<double> want;
  for (size_t i = 0; i < p.size(); ++i) want.push_back(p[i] * vs[i] - p[i] * pv);
  EXPECT_TRUE(all_close(hv, want, 1e-11, 1e-11));
}

TEST(Jvp, PushesTangentsForward) {
  Array x = random_array({4}, float64, -1, 1, 14), t = random_array({4}, float64, -1, 1, 15);
  auto [outs, tangents] = jvp([](const std::vector<Array>& in) { return std::vector<Array>{exp(in[0]) * in[0]}; }, {x}, {t});
  std::vector<double> want;
  auto xs = as_doubles(x), ts = as_doubles(t);
  for (size_t i = 0; i < xs.size(); ++i) want.push_back(std::exp(xs[i]) * (1 + xs[i]) * ts[i]);
  EXPECT_TRUE(all_close(tangents[0], want, kTol, kTol));
}

TEST(Vjp, MultipleOutputsAndAnEmptyCotangent) {
  Array x = random_array({3}, float64, -1, 1, 16);
  Array w = random_array({3}, float64, -1, 1, 17);
  ArrayFn f = [](const std::vector<Array>& in) { return std::vector<Array>{in[0] * 2.0, sin(in[0])}; };
  auto [outs, grads] = vjp(f, {x}, {w, Array()});
  EXPECT_TRUE(all_close(grads[0], as_doubles(w * 2.0), 0, 0));
}

TEST(Grad, DeepGraphsNeedNoRecursion) {
  Array x = random_array({2}, float64, 0.5, 1, 18);
  const int depth = 20000;
  Array g = grad([&](const Array& x) {
    Array y = x;
    for (int i = 0; i < depth; ++i) y = y * 1.0 + 0.0;
    return sum(y);
  })(x);
  EXPECT_TRUE(all_close(g, {1, 1}, 0, 0));
}

// ---- Composition with compile ------------------------------------------------------------------

Array mlp_loss(const Array& w, const Array& x) { return mean(square(tanh(matmul(x, w)) - 0.5)) + sum(abs(w)) * 0.01; }

TEST(GradCompile, CompiledGradientEqualsUncompiledBitForBit) {
  Array w = random_array({8, 4}, float32, -1, 1, 19), x = random_array({16, 8}, float32, -2, 2, 20);
  auto g = grad(mlp_loss);
  auto cg = compile(g);
  Array want = g(w, x);
  Array got = cg(w, x);
  EXPECT_TRUE(bit_equal(got, want));
  Array got2 = cg(w * 2.0f, x);  // a replay
  EXPECT_TRUE(bit_equal(got2, g(w * 2.0f, x)));
  EXPECT_EQ(cg.stats().traces, 1u);
  // Second order, compiled.
  auto gg = grad([g](const Array& w, const Array& x) { return sum(g(w, x)); });
  EXPECT_TRUE(bit_equal(compile(gg)(w, x), gg(w, x)));
}

TEST(GradCompile, GradOfACompiledFunctionDifferentiatesItsOps) {
  Array w = random_array({8, 4}, float32, -1, 1, 21), x = random_array({16, 8}, float32, -2, 2, 22);
  auto compiled = compile(mlp_loss);
  compiled(w, x);  // traced once outside the transform
  Array got = grad(compiled)(w, x);
  EXPECT_TRUE(bit_equal(got, grad(mlp_loss)(w, x)));
}

TEST(GradCompile, CompileMutTrainingStepTracesOnceAndConverges) {
  auto step = compile_mut([](Array& w, const std::pair<Array, Array>& xy) {
    auto loss = [&](const Array& w) {
      Array r = w * xy.first - xy.second;
      return sum(r * r);
    };
    auto [l, g] = value_and_grad(loss)(w);
    w = w - g * 0.1f;
    return l;
  });
  Array w = zeros({1});
  for (int i = 0; i < 50; ++i) step(w, {Array({1.0f}), Array({2.0f})});
  EXPECT_NEAR(w.item<float>(), 2.0f, 1e-4);
  EXPECT_EQ(step.stats().traces, 1u);
  EXPECT_EQ(step.stats().hits, 49u);
}

// ---- Errors --------------------------------------------------------------------------------------

TEST(GradErrors, NonScalarOutput) {
  Array x = random_array({3}, float32, -1, 1, 23);
  EXPECT_THROW_MSG(grad([](const Array& x) { return x * 2.0f; })(x), ShapeError,
                   "grad: the function must return a scalar (one element), got float32[3]");
}

TEST(GradErrors, IntegerInputsAndOutputs) {
  EXPECT_THROW_MSG(grad([](const Array& x) { return sum(astype(x, float32)); })(Array({1, 2})), DtypeError,
                   "grad: argument 0 leaf 0 is int32[2]; only floating-point arrays can be differentiated");
  EXPECT_THROW_MSG(grad([](const Array& x) { return sum(astype(x, int32)); })(Array({1.0f})), DtypeError,
                   "grad: the function must return a floating-point scalar, got int64");
}

TEST(Grad, ThroughAMultiplyingScatter) {
  // out[r_j, j] = x[r_j, j] * u_j with u = 2 x[0, :]: every element gets 1 except the written ones
  // (u_j), and row 0 gets 2 x[r_j, j] more through the updates (rows r_j: 1, 0, 2, 2).
  Array x = random_array({3, 4}, float64, -1, 1, 24);
  Array indices = Array({1, 0, 2, 2}, {1, 4});
  auto scattered = [&](const Array& x) { return sum(scatter(x, indices, slice(x, {0, 0}, {1, 4}) * 2.0, 0, ScatterReduce::Mul)); };
  const auto xs = as_doubles(x);
  std::vector<double> want(12, 1.0);
  const int rows[] = {1, 0, 2, 2};
  for (int j = 0; j < 4; ++j) {
    want[static_cast<size_t>(rows[j] * 4 + j)] = 2 * xs[static_cast<size_t>(j)];
    want[static_cast<size_t>(j)] += 2 * xs[static_cast<size_t>(rows[j] * 4 + j)];
  }
  EXPECT_TRUE(all_close(grad(scattered)(x), want, kTol, kTol));
  // stop_gradient: no gradient through the scatter.
  Array g = grad([&](const Array& x) { return sum(stop_gradient(scattered(x))) + sum(x); })(x);
  EXPECT_TRUE(all_close(g, std::vector<double>(12, 1.0), 0, 0));
}

TEST(GradErrors, VjpAndJvpArgumentChecks) {
  ArrayFn f = [](const std::vector<Array>& in) { return std::vector<Array>{in[0] * 2.0f}; };
  Array x = zeros({3});
  EXPECT_THROW_MSG(vjp(f, {x}, {}), InvalidArgument, "vjp: 0 cotangents given for 1 outputs");
  EXPECT_THROW_MSG(vjp(f, {x}, {zeros({2})}), ShapeError, "vjp: cotangent 0 float32[2] does not match output float32[3]");
  EXPECT_THROW_MSG(jvp(f, {x}, {zeros({4})}), ShapeError, "jvp: tangent 0 float32[4] does not match primal float32[3]");
  EXPECT_THROW_MSG(jvp(f, {x}, {}), InvalidArgument, "jvp: 0 tangents given for 1 primals");
}

}  // namespace
}  // namespace smelt
