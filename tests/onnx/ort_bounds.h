// Error bounds for comparing the bundled models' float32 outputs with ONNX Runtime's fixtures.
//
// smelt and ONNX Runtime evaluate the same float32 model with different kernels (BLAS on one CPU
// or another, erf, exp) and different summation orders, so their outputs differ by up to the sum
// of their forward errors. The tolerances below are those bounds, stated and computed from the
// operands of this very run (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed.,
// ch. 3: a sum of n products in precision u is within gamma_n = n u / (1 - n u) times the sum of
// the products' magnitudes), never from the differences one CPU happened to show (issue #11).
//
// - A product whose input both implementations output too (logits = last_hidden_state @ E^T):
//     |fl(h_s E) - fl(h_o E)| <= |h_s - h_o| |E| + gamma_K (|h_s| + |h_o|) |E|     (rigorous)
// - An output whose inputs only smelt exposes (the final LayerNorm, the CNN's classifier) has an
//   a-priori bound: each implementation's error in the residual stream (or the features) is at
//   most g_C times the magnitude of the operands of its last sum, where C, the model's
//   accumulation depth, adds up the lengths of every reduction on the longest path from the
//   inputs (each matmul's K, LayerNorm's width, softmax's length, each convolution's window),
//   plus a few roundings per element-wise step, and that error is carried to the output to
//   first order. It takes every layer's gain as at most 1 (LayerNorm's 1/sigma times its scale,
//   weights scaled by 1/sqrt(fan_in), as in these models and trained ones); the two
//   implementations together differ by twice it. Over thousands of roundings the worst case
//   gamma_C is thousands of times the errors seen, loose enough to let a real bug of 1e-3
//   through, so g_C is Higham and Mary's probabilistic bound (A New Approach to Probabilistic
//   Rounding Error Analysis, SIAM J. Sci. Comput. 41(5), 2019, Theorem 2.4): for rounding
//   errors that are independent and of mean zero, lambda sqrt(C) u (to first order) holds with
//   probability at least 1 - 2C exp(-lambda^2 (1-u)^2 / 2); lambda = 10 makes that 1 - 4e-22 C.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "smelt/onnx.h"
#include "smelt/smelt.h"

namespace smelt::test {

/// float32's unit roundoff.
inline constexpr double kUnit32 = 0x1p-24;
/// gamma_n for float32.
inline double gamma32(double n) { return n * kUnit32 / (1.0 - n * kUnit32); }
/// Higham and Mary's probabilistic gamma~_n(lambda) = exp(lambda sqrt(n) u + n u^2 / (1 - u)) - 1
/// for float32, lambda = 10 (see above).
inline double gamma_tilde32(double n) {
  constexpr double kLambda = 10.0;
  return std::expm1(kLambda * std::sqrt(n) * kUnit32 + n * kUnit32 * kUnit32 / (1.0 - kUnit32));
}

/// |got - want| <= bound element by element (NaN nowhere); the message gives the count and the
/// worst elements by their ratio to the bound.
inline ::testing::AssertionResult within_bound(const Array& got, const Array& want, const Array& bound) {
  const std::vector<double> g = astype(got, float64).to_vector<double>();
  const std::vector<double> w = astype(want, float64).to_vector<double>();
  const std::vector<double> b = astype(broadcast_to(bound, want.shape()), float64).to_vector<double>();
  if (g.size() != w.size()) return ::testing::AssertionFailure() << "sizes differ: " << g.size() << " vs " << w.size();
  size_t bad = 0, worst = 0;
  double worst_ratio = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double err = std::fabs(g[i] - w[i]);
    const double ratio = err / b[i];
    if (!(err <= b[i])) ++bad;
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess() << "largest error / bound " << worst_ratio;
  return ::testing::AssertionFailure() << bad << " of " << g.size() << " elements outside the bound; worst at "
                                       << worst << ": got " << g[worst] << ", expected " << w[worst] << ", error "
                                       << std::fabs(g[worst] - w[worst]) << ", bound " << b[worst];
}

/// The rigorous bound for out = x @ w computed in float32 by two implementations from inputs xs
/// and xo (any batch axes, last axis K), w [K, N].
inline Array product_pair_bound(const Array& xs, const Array& xo, const Array& w) {
  const Array s = astype(xs, float64), o = astype(xo, float64), aw = abs(astype(w, float64));
  const double k = static_cast<double>(w.shape()[0]);
  return add(matmul(abs(subtract(s, o)), aw), multiply(Array(gamma32(k)), matmul(add(abs(s), abs(o)), aw)));
}

/// The model's constant called `name`.
inline Array initializer(const onnx::Model& m, const std::string& name) {
  for (const auto& [n, v] : m.graph->initializers)
    if (n == name) return v.array();
  ADD_FAILURE() << "no initializer " << name;
  return Array(0.0f);
}

/// Runs `m` with `extra` intermediate values added to the graph's outputs.
inline std::map<std::string, onnx::Value> run_with_intermediates(const onnx::Model& m,
                                                                 const std::map<std::string, onnx::Value>& inputs,
                                                                 const std::vector<std::string>& extra) {
  onnx::Model copy = m;
  auto g = std::make_shared<onnx::Graph>(*m.graph);
  for (const auto& name : extra) g->outputs.push_back(onnx::ValueInfo{name, {}});
  copy.graph = g;
  return onnx::run_named(copy, inputs);
}

/// The tolerances for tiny_transformer's outputs on `ids` against ONNX Runtime's
/// last_hidden_state `hidden_ort` (models/README.md: d_model 128, 2 layers, 4 heads of 32, MLP
/// 512, LayerNorm epsilon 1e-5).
struct TransformerBounds {
  Array logits, last_hidden_state;
};

inline TransformerBounds transformer_bounds(const onnx::Model& m, const Array& ids, const Array& hidden_ort) {
  constexpr int64_t kLayers = 2, kModel = 128, kHead = 32, kMlp = 512;
  constexpr double kEps = 1e-5;
  const int64_t seq = ids.shape().back();
  // Per layer: LayerNorm, QKV (K = d), scores (K = head), softmax and probs @ V (K = seq), output
  // projection, LayerNorm, MLP in (K = d) and out (K = 512), and 8 element-wise roundings (bias
  // adds, the scale, GELU, residual adds); then the final LayerNorm.
  const double depth = kLayers * (4 * kModel + kHead + 2 * seq + kModel + kMlp + 8) + kModel;

  auto out = run_with_intermediates(m, {{"input_ids", onnx::Value::tensor(ids)}},
                                    {"layers.1.attn.residual", "layers.1.mlp.gelu"});
  const Array hidden = astype(out.at("last_hidden_state").array(), float64);
  const Array resid_in = astype(out.at("layers.1.attn.residual").array(), float64);
  const Array gelu = astype(out.at("layers.1.mlp.gelu").array(), float64);
  const Array w_out = astype(initializer(m, "layers.1.mlp.fc_out.weight"), float64);
  const Array b_out = astype(initializer(m, "layers.1.mlp.fc_out.bias"), float64);
  const Array scale = astype(initializer(m, "ln_f.weight"), float64);
  const Array shift = astype(initializer(m, "ln_f.bias"), float64);

  // The residual stream r = resid_in + (gelu @ W + b): each implementation's error in r_i is at
  // most g_depth times the magnitude of the operands of its last sum.
  const Array magnitude = add(add(abs(resid_in), matmul(abs(gelu), abs(w_out))), abs(b_out));
  const Array r_err = multiply(Array(gamma_tilde32(depth)), magnitude);
  // LayerNorm: y = scale * z + shift, z = (r - mean) / sigma. An error e in r moves z_i by
  // (e_i - mean(e) - z_i mean(z e)) / sigma to first order.
  const Array r = add(resid_in, add(matmul(gelu, w_out), b_out));
  const Array sigma = sqrt(add(var(r, {-1}, true), Array(kEps)));
  const Array z = divide(subtract(hidden, shift), scale);
  const Array mixed = add(mean(r_err, {-1}, true), multiply(abs(z), mean(multiply(abs(z), r_err), {-1}, true)));
  const Array z_err = divide(add(r_err, mixed), sigma);
  const Array per_impl = multiply(abs(scale), z_err);
  TransformerBounds b;
  b.last_hidden_state = multiply(Array(2.0), per_impl);
  b.logits = product_pair_bound(out.at("last_hidden_state").array(), hidden_ort,
                                transpose(initializer(m, "embed_tokens.weight")));
  return b;
}

/// The tolerance for tiny_cnn's probabilities on `input` (3 stages of 3x3 convolutions with 3,
/// 16 and 32 input channels and 2x2 pooling from 32x32, global average over 4x4, a 64-to-10
/// classifier, softmax).
inline Array cnn_probs_bound(const onnx::Model& m, const Array& input) {
  // Convolution windows 3*9, 16*9, 32*9, their bias adds and batch norms (4 roundings each), the
  // average of 16, the classifier's 64 and bias, softmax over 10 (exp, sum, divide).
  const double depth = 3 * 9 + 16 * 9 + 32 * 9 + 3 * 4 + 16 + 64 + 1 + 10 + 4;
  auto out = run_with_intermediates(m, {{"input", onnx::Value::tensor(input)}}, {"flatten_14"});
  const Array features = astype(out.at("flatten_14").array(), float64);
  // The classifier's weight as the GEMM reads it, [64, 10]: the load stores fc.weight ([10, 64],
  // read with transB) transposed once (fusions.h, gemm_weights).
  const Array wt = astype(initializer(m, "fc.weight_transposed"), float64);
  const Array bias = astype(initializer(m, "fc.bias"), float64);
  const Array p = astype(out.at("probs").array(), float64);
  // Each implementation's logits are within g_depth * (|f| |W|^T + |b|) of exact; softmax
  // moves p_i by at most p_i (|dl_i| + max_j |dl_j|) to first order.
  const Array dl = multiply(Array(gamma_tilde32(depth)), add(matmul(abs(features), abs(wt)), abs(bias)));
  const Array per_impl = multiply(p, add(dl, max(dl, {-1}, true)));
  return multiply(Array(2.0), per_impl);
}

}  // namespace smelt::test
