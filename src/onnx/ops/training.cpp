// ai.onnx.preview.training: Gradient (smelt's autodiff over the node's graph) and the optimizers
// Momentum, Adagrad and Adam, written over arrays so R and T may be traced values.
#include <algorithm>
#include <set>
#include <unordered_map>

#include "smelt/transforms.h"
#include "src/onnx/executor.h"
#include "src/onnx/ops/op_helpers.h"

namespace smelt::onnx {

namespace {

// ---------------------------------------------------------------------------------------------
// Optimizers. Inputs: R (learning rate), T (update count), then the n optimized tensors X, their
// gradients G and `states` groups of per-tensor state (Momentum: V; Adagrad: H; Adam: V, H).
// Outputs: the new X, then each new state group. Coefficients are computed in float64 and
// rounded once to X's type, as the reference does in NumPy.
// ---------------------------------------------------------------------------------------------

struct OptimizerArgs {
  size_t n = 0;   // tensors optimized
  Array r;        // float64 []
  Array t;        // int64 []
};

OptimizerArgs optimizer_args(const OpContext& c, size_t groups) {
  const size_t in = c.num_inputs();
  if (in < 2 + groups || (in - 2) % groups != 0)
    c.fail("takes R, T and " + std::to_string(groups) + " inputs per optimized tensor, got " + std::to_string(in) +
           " inputs");
  OptimizerArgs a;
  a.n = (in - 2) / groups;
  c.require_types(0, {ElemType::Float, ElemType::Double});
  c.require_types(1, {ElemType::Int64});
  if (c.tensor(0).size() != 1) c.fail("R must be a scalar, got " + c.input(0).describe());
  if (c.tensor(1).size() != 1) c.fail("T must be a scalar, got " + c.input(1).describe());
  a.r = astype(reshape(c.tensor(0), {}), float64);
  a.t = reshape(c.tensor(1), {});
  if (c.num_outputs() > a.n * (groups - 1))
    c.fail(std::to_string(c.num_outputs()) + " outputs named; it has " + std::to_string(a.n * (groups - 1)));
  for (size_t i = 0; i < a.n; ++i) {
    c.require_types(2 + i, {ElemType::Float, ElemType::Double});
    for (size_t g = 1; g < groups; ++g) {
      size_t j = 2 + g * a.n + i;
      c.require_same_type(2 + i, j);
      if (c.tensor(j).shape() != c.tensor(2 + i).shape())
        c.fail("input " + std::to_string(j) + " is " + c.input(j).describe() + "; optimized tensor " +
               std::to_string(i) + " (input " + std::to_string(2 + i) + ") is " + c.input(2 + i).describe());
    }
  }
  return a;
}

Array f64(double v) { return full({}, Array(v), float64); }
/// A float64 coefficient rounded to X's type.
Array coef(const Array& v, Dtype dt) { return astype(v, dt); }
Array coef(double v, Dtype dt) { return full({}, Array(v), dt); }

std::vector<Value> op_momentum(OpContext& c) {
  OptimizerArgs a = optimizer_args(c, 3);
  const double alpha = c.attr_float("alpha", 0), beta = c.attr_float("beta", 0);
  const double norm = c.attr_float("norm_coefficient", 0);
  const std::string mode = c.attr_string("mode", "standard");
  if (mode != "standard" && mode != "nesterov") c.fail("mode must be 'standard' or 'nesterov', got '" + mode + "'");
  // The first update (T = 0) takes the gradient whole: V starts as G.
  Array beta_t = where(greater(a.t, zeros({}, int64)), f64(beta), f64(1.0));
  std::vector<Value> xs, vs;
  for (size_t i = 0; i < a.n; ++i) {
    const Array& x = c.tensor(2 + i);
    const Dtype dt = x.dtype();
    Array g = add(multiply(coef(norm, dt), x), c.tensor(2 + a.n + i));
    Array v_new = add(multiply(coef(alpha, dt), c.tensor(2 + 2 * a.n + i)), multiply(coef(beta_t, dt), g));
    Array step = mode == "nesterov" ? add(g, multiply(coef(alpha, dt), v_new)) : v_new;
    xs.push_back(tv(subtract(x, multiply(coef(a.r, dt), step))));
    vs.push_back(tv(v_new));
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  return xs;
}

std::vector<Value> op_adagrad(OpContext& c) {
  OptimizerArgs a = optimizer_args(c, 3);
  const double decay = c.attr_float("decay_factor", 0), eps = c.attr_float("epsilon", 1e-6f);
  const double norm = c.attr_float("norm_coefficient", 0);
  // The learning rate decays with the update count: R / (1 + T * decay_factor).
  Array r_adj = divide(a.r, add(f64(1.0), multiply(astype(a.t, float64), f64(decay))));
  std::vector<Value> xs, hs;
  for (size_t i = 0; i < a.n; ++i) {
    const Array& x = c.tensor(2 + i);
    const Dtype dt = x.dtype();
    Array g = add(multiply(coef(norm, dt), x), c.tensor(2 + a.n + i));
    Array h_new = add(c.tensor(2 + 2 * a.n + i), multiply(g, g));
    xs.push_back(tv(subtract(x, multiply(coef(r_adj, dt), divide(g, add(sqrt(h_new), coef(eps, dt)))))));
    hs.push_back(tv(h_new));
  }
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

std::vector<Value> op_adam(OpContext& c) {
  OptimizerArgs a = optimizer_args(c, 4);
  const double alpha = c.attr_float("alpha", 0.9f), beta = c.attr_float("beta", 0.999f);
  const double eps = c.attr_float("epsilon", 1e-6f), norm = c.attr_float("norm_coefficient", 0);
  const double post = c.attr_float("norm_coefficient_post", 0);
  // Bias correction from the second update on: R * sqrt(1 - beta^T) / (1 - alpha^T); T = 0 uses R.
  Array tf = astype(a.t, float64);
  Array corrected = divide(multiply(a.r, sqrt(subtract(f64(1.0), power(f64(beta), tf)))),
                           subtract(f64(1.0), power(f64(alpha), tf)));
  Array r_adj = where(greater(a.t, zeros({}, int64)), corrected, a.r);
  std::vector<Value> xs, vs, hs;
  for (size_t i = 0; i < a.n; ++i) {
    const Array& x = c.tensor(2 + i);
    const Dtype dt = x.dtype();
    Array g = add(multiply(coef(norm, dt), x), c.tensor(2 + a.n + i));
    Array v_new = add(multiply(coef(alpha, dt), c.tensor(2 + 2 * a.n + i)), multiply(coef(1 - alpha, dt), g));
    Array h_new = add(multiply(coef(beta, dt), c.tensor(2 + 3 * a.n + i)), multiply(coef(1 - beta, dt), multiply(g, g)));
    Array x_new = subtract(x, multiply(coef(r_adj, dt), divide(v_new, add(sqrt(h_new), coef(eps, dt)))));
    // Weight decay after the step: X_final = (1 - norm_coefficient_post) * X_new.
    xs.push_back(tv(multiply(coef(1 - post, dt), x_new)));
    vs.push_back(tv(v_new));
    hs.push_back(tv(h_new));
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

// ---------------------------------------------------------------------------------------------
// Gradient: the derivatives of the tensor `y` with respect to the tensors `xs`, through the nodes
// of this node's graph that compute `y` from `xs` and `zs`. The node's inputs are the values to
// evaluate at (xs, then zs); its outputs are dy/dx for each x. A non-scalar y is differentiated
// as the sum of its elements (the cotangent is all ones), as a loss would be.
// ---------------------------------------------------------------------------------------------

/// The nodes of `nodes` that `y` depends on without passing through a name of `bound`, in graph
/// order. Fails when y is neither bound nor made by a node, or when the Gradient node itself is
/// among them.
std::vector<Node> nodes_computing(const OpContext& c, const std::vector<Node>& nodes, const std::string& y,
                                  const std::set<std::string>& bound) {
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto& o : nodes[i].outputs)
      if (!o.empty()) producer[o] = i;
  std::vector<char> needed(nodes.size(), 0);
  std::vector<std::string> work{y};
  std::set<std::string> seen;
  while (!work.empty()) {
    std::string name = std::move(work.back());
    work.pop_back();
    if (bound.count(name) || !seen.insert(name).second) continue;
    auto it = producer.find(name);
    if (it == producer.end()) continue;  // a graph input, an initializer or an outer value
    if (needed[it->second]) continue;
    if (&nodes[it->second] == &c.node())
      c.fail("y '" + y + "' depends on this Gradient node's own output '" + name + "'");
    needed[it->second] = 1;
    for (const auto& r : detail::node_reads(nodes[it->second])) work.push_back(r);
  }
  if (!bound.count(y) && !producer.count(y))
    c.fail("y '" + y + "' is not computed by a node of this graph");
  std::vector<Node> out;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (needed[i]) out.push_back(nodes[i]);
  return out;
}

std::vector<Value> op_gradient(OpContext& c) {
  const std::vector<std::string> xs = c.attr_strings("xs"), zs = c.attr_strings("zs");
  const std::string y = c.attr_string("y", "");
  if (xs.empty()) c.fail("attribute 'xs' (the tensors to differentiate with respect to) is missing or empty");
  if (y.empty()) c.fail("attribute 'y' (the tensor to differentiate) is missing");
  if (c.num_inputs() != xs.size() + zs.size())
    c.fail("takes one input per name of 'xs' then 'zs' (" + std::to_string(xs.size() + zs.size()) + "), got " +
           std::to_string(c.num_inputs()));
  if (c.num_outputs() > xs.size())
    c.fail(std::to_string(c.num_outputs()) + " outputs named; it has one per name of 'xs' (" +
           std::to_string(xs.size()) + ")");
  std::set<std::string> bound(xs.begin(), xs.end());
  bound.insert(zs.begin(), zs.end());
  if (bound.size() != xs.size() + zs.size()) c.fail("a name appears twice in 'xs' and 'zs'");
  if (!c.graph_nodes()) c.fail("the runner did not give this node its graph");
  std::vector<Array> primals;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!c.input(i).is_tensor() || is_storage_type(c.elem_type(i)) || !is_floating(c.tensor(i).dtype()))
      c.fail("xs '" + xs[i] + "' (input " + std::to_string(i) + ") is " + c.input(i).describe() +
             "; only floating-point tensors can be differentiated");
    primals.push_back(c.tensor(i));
  }
  // The forward part as a graph of its own: xs and zs are its inputs, y its output; it reads
  // initializers and other values through this node's scope.
  Graph forward;
  forward.name = "Gradient of " + y;
  forward.nodes = nodes_computing(c, *c.graph_nodes(), y, bound);
  for (const auto& name : xs) forward.inputs.push_back({name, {}});
  for (const auto& name : zs) forward.inputs.push_back({name, {}});
  forward.outputs.push_back({y, {}});
  ArrayFn f = [&](const std::vector<Array>& p) {
    std::vector<Value> in;
    for (size_t i = 0; i < p.size(); ++i) in.push_back(Value::tensor(p[i]));
    for (size_t j = 0; j < zs.size(); ++j) in.push_back(c.input(xs.size() + j));
    std::vector<Value> out = c.run_graph(forward, in);
    if (!out[0].is_tensor() || !is_floating(out[0].array().dtype()))
      c.fail("y '" + y + "' is " + out[0].describe() + "; only a floating-point tensor can be differentiated");
    return std::vector<Array>{sum(astype(out[0].array(), float64))};
  };
  auto [outs, grads] = vjp(f, primals, {ones({}, float64)});
  std::vector<Value> result;
  for (size_t i = 0; i < c.num_outputs(); ++i) result.push_back(tv(grads[i]));
  return result;
}

}  // namespace

void register_training_ops(OpRegistry& r) {
  r.add("ai.onnx.preview.training", "Gradient", 1, op_gradient);
  r.add("ai.onnx.preview.training", "Momentum", 1, op_momentum);
  r.add("ai.onnx.preview.training", "Adagrad", 1, op_adagrad);
  r.add("ai.onnx.preview.training", "Adam", 1, op_adam);
}

}  // namespace smelt::onnx
