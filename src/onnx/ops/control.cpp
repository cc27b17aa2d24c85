// ONNX control flow: If, Loop, Scan and SequenceMap, whose bodies are subgraphs that see outer values.
#include <algorithm>

#include "src/onnx/ops/op_helpers.h"

namespace smelt::onnx {

namespace {

std::vector<Value> op_if(OpContext& c) {
  const Array& cond = c.tensor(0);
  if (cond.size() != 1) c.fail("cond must hold one value, got " + c.input(0).describe());
  // Both branches are checked whichever is taken: a model whose branches disagree is malformed
  // even on inputs that never reach the bad one.
  const Graph& then_g = c.attr_graph("then_branch");
  const Graph& else_g = c.attr_graph("else_branch");
  if (then_g.outputs.size() != else_g.outputs.size())
    c.fail("then_branch has " + std::to_string(then_g.outputs.size()) + " outputs and else_branch " +
           std::to_string(else_g.outputs.size()) + "; they must match");
  if (c.num_outputs() > then_g.outputs.size())
    c.fail("the node has " + std::to_string(c.num_outputs()) + " outputs but its branches produce " +
           std::to_string(then_g.outputs.size()));
  for (size_t i = 0; i < then_g.outputs.size(); ++i) {
    const TypeInfo& t = then_g.outputs[i].type;
    const TypeInfo& e = else_g.outputs[i].type;
    bool both_tensors = t.kind == TypeInfo::Kind::Tensor && e.kind == TypeInfo::Kind::Tensor;
    if (both_tensors && t.elem_type != ElemType::Undefined && e.elem_type != ElemType::Undefined &&
        t.elem_type != e.elem_type)
      c.fail("output " + std::to_string(i) + " is " + t.to_string() + " in then_branch ('" + then_g.outputs[i].name +
             "') but " + e.to_string() + " in else_branch ('" + else_g.outputs[i].name + "')");
  }
  bool taken = c.host_tensor(0).item<bool>();  // read once even if the value is read again
  return c.run_graph(taken ? then_g : else_g, {});
}

/// Stacks per-iteration values along a new axis 0 (tensors), or collects them in a sequence.
Value stack_values(OpContext& c, const std::vector<Value>& parts, const ValueInfo& info) {
  if (parts.empty()) {
    ElemType t = info.type.elem_type == ElemType::Undefined ? ElemType::Float : info.type.elem_type;
    auto dt = storage_dtype(t);
    Shape shape{0};
    if (info.type.shape)
      for (size_t i = 1; i < info.type.shape->size(); ++i) shape.push_back(std::max<int64_t>((*info.type.shape)[i].value, 0));
    return tv(zeros(shape, dt ? *dt : float32));
  }
  std::vector<Array> arrays;
  for (const auto& p : parts) {
    if (!p.is_tensor()) c.fail("scan output '" + info.name + "' must be a tensor, got " + p.describe());
    arrays.push_back(p.array());
  }
  return tv(stack(arrays, 0));
}

std::vector<Value> op_loop(OpContext& c) {
  const Graph& body = c.attr_graph("body");
  std::optional<int64_t> trip;
  if (c.has(0)) trip = c.scalar_int(0);
  bool cond = c.has(1) ? c.host_tensor(1).item<bool>() : true;
  size_t n_state = c.num_inputs() >= 2 ? c.num_inputs() - 2 : 0;
  std::vector<Value> state(c.inputs().begin() + 2, c.inputs().end());
  if (body.inputs.size() != n_state + 2)
    c.fail("the body takes " + std::to_string(body.inputs.size()) + " inputs; expected " + std::to_string(n_state + 2));
  if (body.outputs.size() < n_state + 1)
    c.fail("the body has " + std::to_string(body.outputs.size()) + " outputs; expected at least " + std::to_string(n_state + 1));
  size_t n_scan = body.outputs.size() - 1 - n_state;
  std::vector<std::vector<Value>> scans(n_scan);
  // A trip count of 2^62 or a condition that stays true runs until the run's deadline,
  // cancellation or memory budget stops it: the states and the scan outputs gathered so far count
  // against the budget, so a growing loop ends with OutOfMemory instead of taking the machine.
  detail::RunGuard::Charge held(c.guard());
  const bool budgeted = c.guard() && c.guard()->budget() > 0;
  int64_t scan_bytes = 0;
  for (int64_t i = 0; (!trip || i < *trip) && cond; ++i) {
    c.check_stop(i);
    std::vector<Value> in{tv(Array(i)), tv(Array(cond))};
    in.insert(in.end(), state.begin(), state.end());
    std::vector<Value> out = c.run_graph(body, in);
    const Value& cv = out[0];
    if (!cv.is_tensor() || cv.array().size() != 1) c.fail("the body's condition output must hold one bool");
    cond = cv.host_array().item<bool>();
    for (size_t k = 0; k < n_state; ++k) state[k] = out[1 + k];
    for (size_t k = 0; k < n_scan; ++k) scans[k].push_back(out[1 + n_state + k]);
    // Evaluate per iteration so a long loop doesn't build one ever-growing lazy graph.
    std::vector<Array> pending;
    for (const auto& v : state)
      if (v.is_tensor()) pending.push_back(v.array());
    eval(pending);
    if (budgeted) {
      int64_t state_bytes = 0;
      for (const auto& v : state) state_bytes += detail::value_bytes(v);
      for (size_t k = 0; k < n_scan; ++k) scan_bytes += detail::value_bytes(scans[k].back());
      held.set(state_bytes + scan_bytes, c.node());
    }
  }
  std::vector<Value> result = state;
  for (size_t k = 0; k < n_scan; ++k) result.push_back(stack_values(c, scans[k], body.outputs[1 + n_state + k]));
  return result;
}

/// One Scan over the given states and scan inputs (opset 9 semantics, no batch axis).
std::vector<Value> scan_core(OpContext& c, const Graph& body, std::vector<Value> state, const std::vector<Array>& inputs,
                             const std::vector<int64_t>& in_axes, const std::vector<int64_t>& in_dirs,
                             const std::vector<int64_t>& out_axes, const std::vector<int64_t>& out_dirs) {
  size_t n_state = state.size();
  if (in_axes.size() < inputs.size() || in_dirs.size() < inputs.size())
    c.fail("scan_input_axes and scan_input_directions (or directions) need one entry per scan input (" +
           std::to_string(inputs.size()) + "), got " + std::to_string(in_axes.size()) + " and " +
           std::to_string(in_dirs.size()));
  std::vector<Array> scan_in;
  int64_t steps = -1;
  for (size_t j = 0; j < inputs.size(); ++j) {
    const Array& x = inputs[j];
    int axis = onnx_axis(c, in_axes[j], x.ndim(), "scan_input_axes");
    Array moved = moveaxis(x, axis, 0);
    if (steps >= 0 && moved.shape()[0] != steps) c.fail("scan inputs have different lengths");
    steps = moved.shape()[0];
    if (in_dirs[j]) moved = flip(moved, {0});
    scan_in.push_back(moved);
  }
  if (body.outputs.size() < n_state) c.fail("the body has fewer outputs than there are states");
  size_t n_scan_out = body.outputs.size() - n_state;
  std::vector<std::vector<Value>> scans(n_scan_out);
  detail::RunGuard::Charge held(c.guard());
  const bool budgeted = c.guard() && c.guard()->budget() > 0;
  int64_t scan_bytes = 0;
  for (int64_t t = 0; t < steps; ++t) {
    c.check_stop(t);
    std::vector<Value> in = state;
    for (const auto& x : scan_in) in.push_back(tv(reshape(slice(x, {t}, {t + 1}), Shape(x.shape().begin() + 1, x.shape().end()))));
    std::vector<Value> out = c.run_graph(body, in);
    for (size_t k = 0; k < n_state; ++k) state[k] = out[k];
    for (size_t k = 0; k < n_scan_out; ++k) scans[k].push_back(out[n_state + k]);
    if (budgeted) {
      int64_t state_bytes = 0;
      for (const auto& v : state) state_bytes += detail::value_bytes(v);
      for (size_t k = 0; k < n_scan_out; ++k) scan_bytes += detail::value_bytes(scans[k].back());
      held.set(state_bytes + scan_bytes, c.node());
    }
  }
  std::vector<Value> result = state;
  for (size_t k = 0; k < n_scan_out; ++k) {
    Value stacked = stack_values(c, scans[k], body.outputs[n_state + k]);
    Array a = stacked.array();
    if (k < out_dirs.size() && out_dirs[k]) a = flip(a, {0});
    int axis = onnx_axis(c, k < out_axes.size() ? out_axes[k] : 0, a.ndim(), "scan_output_axes");
    if (axis != 0) a = moveaxis(a, 0, axis);
    result.push_back(tv(a));
  }
  return result;
}

std::vector<Value> op_scan(OpContext& c) {
  const Graph& body = c.attr_graph("body");
  int64_t m = c.attr_int("num_scan_inputs", 0);
  size_t total = c.num_inputs();
  if (m <= 0 || static_cast<size_t>(m) > total) c.fail("num_scan_inputs " + std::to_string(m) + " does not fit the inputs");
  size_t n_state = total - static_cast<size_t>(m);
  std::vector<Value> state(c.inputs().begin(), c.inputs().begin() + static_cast<long>(n_state));
  std::vector<Array> inputs;
  for (size_t j = n_state; j < total; ++j) inputs.push_back(c.tensor(j));
  size_t n_out = body.outputs.size() >= n_state ? body.outputs.size() - n_state : 0;
  return scan_core(c, body, state, inputs, c.attr_ints("scan_input_axes", std::vector<int64_t>(static_cast<size_t>(m), 0)),
                   c.attr_ints("scan_input_directions", std::vector<int64_t>(static_cast<size_t>(m), 0)),
                   c.attr_ints("scan_output_axes", std::vector<int64_t>(n_out, 0)),
                   c.attr_ints("scan_output_directions", std::vector<int64_t>(n_out, 0)));
}

/// Opset 8 Scan: inputs carry a batch axis 0 (scanned along axis 1), after an optional
/// sequence_lens input; each batch element is scanned on its own and the results stacked.
std::vector<Value> op_scan_8(OpContext& c) {
  const Graph& body = c.attr_graph("body");
  int64_t m = c.attr_int("num_scan_inputs", 0);
  size_t total = c.num_inputs();
  if (m <= 0 || static_cast<size_t>(m) + 1 > total) c.fail("num_scan_inputs " + std::to_string(m) + " does not fit the inputs");
  size_t n_state = total - 1 - static_cast<size_t>(m);
  // Every state has the batch axis 0 and every scan input also the scanned axis 1 (found by the
  // fuzzer: a 0-d state was read at shape()[0]).
  for (size_t i = 1; i < total; ++i) {
    const Array& t = c.tensor(i);
    const size_t need = i > n_state ? 2 : 1;
    if (static_cast<size_t>(t.ndim()) < need)
      c.fail("input " + std::to_string(i) + " (" + c.input(i).describe() + ") must have " +
             (need == 2 ? "a batch axis and a scanned axis" : "a batch axis"));
    if (t.shape()[0] != c.tensor(1).shape()[0])
      c.fail("inputs 1 and " + std::to_string(i) + " have different batch sizes (" + c.input(1).describe() + ", " +
             c.input(i).describe() + ")");
  }
  if (c.has(0)) {
    auto lens = c.ints(0);
    int64_t full_len = c.tensor(total - static_cast<size_t>(m)).shape()[1];
    for (auto len : lens)
      if (len != full_len) c.fail("sequence_lens shorter than the scanned axis are not supported");
  }
  int64_t batch = c.tensor(1).shape()[0];
  std::vector<int64_t> dirs = c.attr_ints("directions", std::vector<int64_t>(static_cast<size_t>(m), 0));
  std::vector<std::vector<Array>> per_output;
  for (int64_t b = 0; b < batch; ++b) {
    auto pick = [&](size_t i) { return squeeze(slice(c.tensor(i), Axes{0}, {b}, {b + 1}, {1}), Axes{0}); };
    std::vector<Value> state;
    for (size_t i = 0; i < n_state; ++i) state.push_back(tv(pick(1 + i)));
    std::vector<Array> inputs;
    for (size_t j = 0; j < static_cast<size_t>(m); ++j) inputs.push_back(pick(1 + n_state + j));
    auto out = scan_core(c, body, state, inputs, std::vector<int64_t>(static_cast<size_t>(m), 0), dirs, {}, {});
    per_output.resize(out.size());
    for (size_t k = 0; k < out.size(); ++k) per_output[k].push_back(out[k].array());
  }
  std::vector<Value> result;
  for (auto& parts : per_output) result.push_back(tv(stack(parts, 0)));
  return result;
}

std::vector<Value> op_sequence_map(OpContext& c) {
  const Graph& body = c.attr_graph("body");
  const Value& seq = c.input(0);
  if (!seq.is_sequence()) c.fail("input 0 must be a sequence, got " + seq.describe());
  size_t n = seq.items().size();
  std::vector<std::vector<Value>> outs(body.outputs.size());
  detail::RunGuard::Charge held(c.guard());
  const bool budgeted = c.guard() && c.guard()->budget() > 0;
  int64_t out_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    c.check_stop(static_cast<int64_t>(i));
    std::vector<Value> in{seq.items()[i]};
    for (size_t k = 1; k < c.num_inputs(); ++k) {
      const Value& extra = c.input(k);
      if (extra.is_sequence()) {
        if (extra.items().size() != n) c.fail("the sequence inputs have different lengths");
        in.push_back(extra.items()[i]);
      } else {
        in.push_back(extra);
      }
    }
    auto out = c.run_graph(body, in);
    for (size_t k = 0; k < out.size(); ++k) outs[k].push_back(out[k]);
    if (budgeted) {
      for (const auto& v : out) out_bytes += detail::value_bytes(v);
      held.set(out_bytes, c.node());
    }
  }
  std::vector<Value> result;
  for (size_t k = 0; k < outs.size(); ++k) {
    TypeInfo elem = body.outputs[k].type;
    if (!outs[k].empty()) elem = outs[k][0].type();
    result.push_back(Value::sequence(outs[k], elem));
  }
  return result;
}

}  // namespace

void register_control_ops(OpRegistry& r) {
  r.add("", "If", 1, op_if);
  r.add("", "Loop", 1, op_loop);
  r.add("", "Scan", 8, op_scan_8);
  r.add("", "Scan", 9, op_scan);
  r.add("", "SequenceMap", 17, op_sequence_map);
}

}  // namespace smelt::onnx
