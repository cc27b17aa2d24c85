// Building, checking, printing and replaying tapes.
#include "src/compile/tape.h"

#include <algorithm>
#include <limits>
#include <sstream>
#include <unordered_map>

#include "smelt/compile.h"
#include "smelt/errors.h"
#include "smelt/ops.h"
#include "src/core/node.h"
#include "src/core/node_state.h"
#include "src/primitives/dtype_rules.h"
#include "src/primitives/shape_rules.h"

namespace smelt::compiler {

using detail::Node;

namespace {

// A broadcast of a captured 0-d value (the C++ number in `x * 2.0f` after the op broadcasts it)
// is kept as a step over the 0-d constant: equal scalars then merge, fused kernels get them as
// literals, and no constant of the traced shape is frozen.
bool is_scalar_broadcast(const Node& n) {
  return !detail::is_evaluated(n) && n.prim.kind == PrimKind::Broadcast && n.inputs.size() == 1 && n.inputs[0].ndim() == 0;
}

/// Recomputes step `i`'s output shapes and dtypes from its inputs' by the primitive's rules
/// (shape_rules.h, dtype_rules.h) and compares them with the recorded ones: a pass that rewires
/// a step, or records the wrong type for a value it makes, is caught right after it runs.
template <class Fail>
void check_step_types(const Tape& tape, size_t i, const Fail& fail) {
  const Step& s = tape.steps[i];
  const std::string step = "step " + std::to_string(i) + " (" + s.prim.str() + ")";
  std::vector<Shape> in_shapes, recorded_shapes;
  std::vector<Dtype> in_dtypes, recorded_dtypes;
  for (int in : s.inputs) {
    in_shapes.push_back(tape.values[in].shape);
    in_dtypes.push_back(tape.values[in].dtype);
  }
  for (int out : s.outputs) {
    recorded_shapes.push_back(tape.values[out].shape);
    recorded_dtypes.push_back(tape.values[out].dtype);
  }
  auto type = [](Dtype d, const Shape& shape) { return std::string(dtype_name(d)) + shape_to_string(shape); };
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  try {
    std::vector<Shape> rule_in = in_shapes;
    if ((s.prim.kind == PrimKind::Scatter || s.prim.kind == PrimKind::ScatterND) && rule_in.size() == 3) {
      // Updates broadcast to the shape the indices give (as a shapeless replay reads them).
      const Shape want = scatter_updates_shape(s.prim.kind, rule_in[0], rule_in[1]);
      if (broadcast_shape_of(rule_in[2], want, s.prim) == want) rule_in[2] = want;
    }
    shapes = infer_output_shapes(s.prim, rule_in, recorded_shapes);
    dtypes = infer_output_dtypes(s.prim, in_dtypes, recorded_dtypes);
  } catch (const Error& e) {
    fail(step + ": its inputs do not fit its shape and dtype rules: " + e.what());
  }
  if (shapes.size() != s.outputs.size() || dtypes.size() != s.outputs.size())
    fail(step + " has " + std::to_string(s.outputs.size()) + " outputs but its rules give " +
         std::to_string(shapes.size()));
  for (size_t o = 0; o < s.outputs.size(); ++o)
    if (shapes[o] != recorded_shapes[o] || dtypes[o] != recorded_dtypes[o])
      fail(step + ": output %" + std::to_string(s.outputs[o]) + " is recorded as " +
           type(recorded_dtypes[o], recorded_shapes[o]) + " but its inputs give " + type(dtypes[o], shapes[o]));
}

}  // namespace

Tape build_tape(const std::vector<Array>& placeholders, const std::vector<Array>& outputs, Device device,
                std::vector<const Node*>* step_nodes) {
  Tape tape;
  tape.device = device;
  std::unordered_map<const Node*, int> ids;
  for (auto& p : placeholders) {
    ids[&p.node()] = tape.add_value(p.shape(), p.dtype(), p.device());
  }
  tape.num_inputs = static_cast<int>(placeholders.size());

  std::vector<Array> to_freeze;  // constants, evaluated together at the end
  // Post-order walk with an explicit stack.
  struct Frame {
    Array array;
    size_t next;
  };
  std::vector<Frame> stack;
  auto visit_root = [&](const Array& root) {
    if (ids.count(&root.node())) return;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      Frame& f = stack.back();
      Node& n = f.array.node();
      if (ids.count(&n)) {
        stack.pop_back();
        continue;
      }
      if (!n.tracer && !is_scalar_broadcast(n)) {  // does not depend on a placeholder: a captured constant
        int id = tape.add_value(n.shape, n.dtype, n.device);
        ids[&n] = id;
        tape.constants.emplace_back(id, f.array);
        to_freeze.push_back(f.array);
        stack.pop_back();
        continue;
      }
      SMELT_ASSERT(n.prim.kind != PrimKind::None, "build_tape: a traced leaf that is not an input of this trace");
      if (f.next < n.inputs.size()) {
        Array in = n.inputs[f.next++];
        if (!ids.count(&in.node())) stack.push_back({in, 0});
        continue;
      }
      Step step;
      step.prim = n.prim;
      step.device = n.device;  // where the eager op put it, not where input 0 lives
      for (auto& in : n.inputs) step.inputs.push_back(ids.at(&in.node()));
      if (n.group) {
        auto& g = *n.group;
        for (size_t i = 0; i < g.nodes.size(); ++i) {
          int id = tape.add_value(g.shapes[i], g.dtypes[i], n.device);
          if (auto sib = g.nodes[i].lock()) ids[sib.get()] = id;
          step.outputs.push_back(id);
        }
      } else {
        int id = tape.add_value(n.shape, n.dtype, n.device);
        ids[&n] = id;
        step.outputs.push_back(id);
      }
      tape.steps.push_back(std::move(step));
      if (step_nodes) step_nodes->push_back(&n);
      stack.pop_back();
    }
  };
  for (auto& o : outputs) visit_root(o);
  for (auto& o : outputs) tape.outputs.push_back(ids.at(&o.node()));
  if (!to_freeze.empty()) eval(to_freeze);
  return tape;
}

void verify_tape(const Tape& tape, const std::string& after_pass) {
  auto fail = [&](const std::string& what) {
    throw Error("internal error: the tape is invalid after pass '" + after_pass + "': " + what);
  };
  std::vector<char> defined(tape.values.size(), 0);
  for (int i = 0; i < tape.num_inputs; ++i) defined[i] = 1;
  for (auto& [id, a] : tape.constants) {
    if (id < 0 || id >= static_cast<int>(defined.size()) || defined[id]) fail("constant %" + std::to_string(id));
    if (!(tape.values[id].device == a.device()))
      fail("constant %" + std::to_string(id) + " is recorded on " + tape.values[id].device.str() + " but lives on " +
           a.device().str());
    defined[id] = 1;
  }
  for (size_t i = 0; i < tape.steps.size(); ++i) {
    const Step& s = tape.steps[i];
    for (int in : s.inputs)
      if (in < 0 || in >= static_cast<int>(defined.size()) || !defined[in])
        fail(s.prim.str() + " reads %" + std::to_string(in) + " before it is defined");
    int arity = prim_num_outputs(s.prim.kind);
    if ((arity > 0 && static_cast<int>(s.outputs.size()) != arity) || s.outputs.empty())
      fail(s.prim.str() + " has " + std::to_string(s.outputs.size()) + " outputs");
    for (int out : s.outputs) {
      if (out < 0 || out >= static_cast<int>(defined.size()) || defined[out])
        fail(s.prim.str() + " redefines %" + std::to_string(out));
      if (!(tape.values[out].device == s.device))
        fail(s.prim.str() + " runs on " + s.device.str() + " but its output %" + std::to_string(out) + " is on " +
             tape.values[out].device.str());
      defined[out] = 1;
    }
    check_step_types(tape, i, fail);
  }
  for (int o : tape.outputs)
    if (o < 0 || o >= static_cast<int>(defined.size()) || !defined[o]) fail("output %" + std::to_string(o) + " is undefined");
}

std::string dump_tape(const Tape& tape) {
  std::ostringstream os;
  auto type = [&](int id) {
    const auto& v = tape.values[id];
    return std::string(dtype_name(v.dtype)) + shape_to_string(v.shape);
  };
  auto where = [&](Device d) { return d == tape.device ? std::string() : " on " + d.str(); };
  for (int i = 0; i < tape.num_inputs; ++i)
    os << "%" << i << " = input " << i << " : " << type(i) << where(tape.values[i].device) << "\n";
  for (auto& [id, a] : tape.constants) os << "%" << id << " = constant : " << type(id) << where(tape.values[id].device) << "\n";
  for (auto& s : tape.steps) {
    for (size_t i = 0; i < s.outputs.size(); ++i) os << (i ? ", " : "") << "%" << s.outputs[i];
    os << " = " << s.prim.str() << "(";
    for (size_t i = 0; i < s.inputs.size(); ++i) os << (i ? ", " : "") << "%" << s.inputs[i];
    os << ") : ";
    for (size_t i = 0; i < s.outputs.size(); ++i) os << (i ? ", " : "") << type(s.outputs[i]);
    os << where(s.device) << "\n";
  }
  os << "return ";
  for (size_t i = 0; i < tape.outputs.size(); ++i) os << (i ? ", " : "") << "%" << tape.outputs[i];
  os << "\n";
  return os.str();
}

void check_replay_inputs(const Tape& tape, const std::vector<Array>& inputs) {
  SMELT_ASSERT(static_cast<int>(inputs.size()) == tape.num_inputs, "replay: wrong number of inputs");
  // The key holds every input's device: a step must never see an input on another device than
  // traced (a CPU kernel would read a GPU address).
  for (int i = 0; i < tape.num_inputs; ++i)
    SMELT_ASSERT(inputs[i].device() == tape.values[i].device,
                 "replay: input " + std::to_string(i) + " lives on " + inputs[i].device().str() + ", traced on " +
                     tape.values[i].device.str());
}

namespace {

void replay_into(const Tape& tape, const std::vector<Array>& inputs, std::vector<Array>& values);

/// `values` sized for the tape, holding its inputs and constants (the steps' outputs empty).
void seed_values(const Tape& tape, const std::vector<Array>& inputs, std::vector<Array>& values) {
  values.clear();
  values.resize(tape.values.size());
  for (int i = 0; i < tape.num_inputs; ++i) values[static_cast<size_t>(i)] = inputs[static_cast<size_t>(i)];
  for (const auto& [id, a] : tape.constants) values[static_cast<size_t>(id)] = a;
}

}  // namespace

std::vector<Array> replay_tape(const Tape& tape, const std::vector<Array>& inputs) {
  // The value list of a large tape (a few hundred handles) is a large malloc request, which made
  // glibc consolidate its fast bins on every call; each thread keeps its list between calls
  // (taken while in use, so a nested replay makes its own).
  thread_local std::vector<Array> kept;
  std::vector<Array> values = std::move(kept);
  replay_into(tape, inputs, values);
  std::vector<Array> outs;
  outs.reserve(tape.outputs.size());
  for (int o : tape.outputs) outs.push_back(values[o]);
  values.clear();  // the graph is held by `outs` alone, as before
  kept = std::move(values);
  return outs;
}

namespace {

/// Builds step `s`'s lazy outputs from `values` into `values`.
void replay_step(const Tape& tape, const Step& s, std::vector<Array>& values) {
  std::vector<Array> ins = detail::spare_arrays();  // eval gives the list back once the node ran
  ins.reserve(s.inputs.size());
  for (int in : s.inputs) ins.push_back(values[in]);
  if (s.outputs.size() == 1) {
    const auto& v = tape.values[s.outputs[0]];
    values[s.outputs[0]] = make_array(v.shape, v.dtype, s.device, s.prim, std::move(ins));
    return;
  }
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  for (int o : s.outputs) {
    shapes.push_back(tape.values[o].shape);
    dtypes.push_back(tape.values[o].dtype);
  }
  auto outs = detail::make_multi_output(std::move(shapes), std::move(dtypes), s.device, s.prim, std::move(ins));
  for (size_t i = 0; i < outs.size(); ++i) values[s.outputs[i]] = std::move(outs[i]);
}

void replay_into(const Tape& tape, const std::vector<Array>& inputs, std::vector<Array>& values) {
  check_replay_inputs(tape, inputs);
  seed_values(tape, inputs, values);
  for (auto& s : tape.steps) replay_step(tape, s, values);
}

}  // namespace

bool can_run_tape(const Tape& tape, const std::vector<Array>& inputs) {
  for (const auto& a : inputs)
    if (detail::is_tracer(a)) return false;
  for (const auto& v : tape.values)
    if (v.device.type != Device::Type::Cpu) return false;
  return true;
}

std::vector<Array> run_tape(const Tape& tape, const std::vector<Array>& inputs) {
  check_replay_inputs(tape, inputs);
  // The steps read buffers: lazy inputs, and constants a pass made lazily (once), are evaluated first.
  std::vector<Array> lazy;
  for (const auto& a : inputs)
    if (!detail::is_evaluated(a.node())) lazy.push_back(a);
  for (const auto& [id, a] : tape.constants)
    if (!detail::is_evaluated(a.node())) lazy.push_back(a);
  if (!lazy.empty()) eval(std::move(lazy));
  constexpr int kKept = std::numeric_limits<int>::max();
  // Each thread keeps its lists between calls (taken while in use, so a nested run makes its own).
  thread_local std::vector<Array> kept_values;
  thread_local std::vector<int> kept_last;
  std::vector<Array> values = std::move(kept_values);
  std::vector<int> last = std::move(kept_last);
  const size_t nv = tape.values.size();
  // The step that reads each value last (-1: none; outputs are kept to the end).
  last.assign(nv, -1);
  for (size_t i = 0; i < tape.steps.size(); ++i)
    for (int in : tape.steps[i].inputs) last[static_cast<size_t>(in)] = static_cast<int>(i);
  for (int o : tape.outputs) last[static_cast<size_t>(o)] = kKept;
  seed_values(tape, inputs, values);
  std::vector<Array> ins = detail::spare_arrays(), outs = detail::spare_arrays();
  for (size_t i = 0; i < tape.steps.size(); ++i) {
    const Step& s = tape.steps[i];
    for (size_t j = 0; j < s.inputs.size(); ++j) {
      const auto in = static_cast<size_t>(s.inputs[j]);
      // The last reader takes the value (at its last mention in the list), so that a kernel may
      // donate its buffer when nothing else holds it: an input of the call or a constant is
      // held by the caller or the tape and never is.
      const bool last_mention = std::find(s.inputs.begin() + static_cast<std::ptrdiff_t>(j) + 1, s.inputs.end(),
                                          s.inputs[j]) == s.inputs.end();
      if (last[in] == static_cast<int>(i) && last_mention) ins.push_back(std::move(values[in]));
      else ins.push_back(values[in]);
    }
    for (int o : s.outputs) {
      const auto& v = tape.values[static_cast<size_t>(o)];
      outs.emplace_back(detail::make_node(v.shape, v.dtype, s.device, Primitive{}, {}));
    }
    detail::run_primitive(s.prim, s.device, ins, outs);
    ins.clear();
    for (size_t k = 0; k < s.outputs.size(); ++k) {
      const auto o = static_cast<size_t>(s.outputs[k]);
      if (last[o] >= 0) values[o] = std::move(outs[k]);  // an output nothing reads is dropped here
    }
    outs.clear();
  }
  detail::recycle_arrays(std::move(ins));
  detail::recycle_arrays(std::move(outs));
  std::vector<Array> result;
  result.reserve(tape.outputs.size());
  for (int o : tape.outputs) result.push_back(values[static_cast<size_t>(o)]);
  values.clear();
  kept_values = std::move(values);
  kept_last = std::move(last);
  return result;
}

std::vector<Array> replay_tape_values(const Tape& tape, const std::vector<Array>& inputs) {
  std::vector<Array> values;
  replay_into(tape, inputs, values);
  return values;
}

std::optional<HostSplit> split_host_prologue(const Tape& tape, Device device, std::string& why) {
  const size_t nv = tape.values.size();
  std::vector<char> host(nv, 0), constant(nv, 0);
  for (int i = 0; i < tape.num_inputs; ++i) host[static_cast<size_t>(i)] = tape.values[static_cast<size_t>(i)].device.type == Device::Type::Cpu;
  for (const auto& [id, a] : tape.constants) {
    constant[static_cast<size_t>(id)] = 1;
    host[static_cast<size_t>(id)] = tape.values[static_cast<size_t>(id)].device.type == Device::Type::Cpu;
  }
  auto step_name = [&](size_t i) {
    return "step " + std::to_string(i) + " (" + prim_name(tape.steps[i].prim.kind) + ")";
  };
  HostSplit split;
  for (size_t i = 0; i < tape.steps.size(); ++i) {
    const Step& s = tape.steps[i];
    if (s.device.type == Device::Type::Cpu) {
      for (int in : s.inputs)
        if (!host[static_cast<size_t>(in)]) {
          why = step_name(i) + " runs on cpu and reads a value on " + tape.values[static_cast<size_t>(in)].device.str();
          return std::nullopt;
        }
      for (int o : s.outputs) host[static_cast<size_t>(o)] = 1;
      split.host_steps.push_back(i);
      continue;
    }
    if (!(s.device == device)) {
      why = step_name(i) + " runs on " + s.device.str() + ", not on " + device.str();
      return std::nullopt;
    }
    if (s.prim.kind == PrimKind::Copy && host[static_cast<size_t>(s.inputs[0])]) {
      split.uploads.push_back(s.outputs[0]);
      split.host_steps.push_back(i);
      continue;
    }
    for (int in : s.inputs)
      if (host[static_cast<size_t>(in)] && !constant[static_cast<size_t>(in)]) {
        why = step_name(i) + " reads host value %" + std::to_string(in) + " on " + device.str() + " without copying it first";
        return std::nullopt;
      }
  }
  for (int o : tape.outputs)
    if (host[static_cast<size_t>(o)] && !constant[static_cast<size_t>(o)]) {
      why = "the function returns host value %" + std::to_string(o);
      return std::nullopt;
    }
  // The device tape, its values renumbered: kept inputs, uploads, constants, then the steps'.
  std::vector<int> id(nv, -1);
  Tape& d = split.device;
  d.device = tape.device;
  auto add = [&](int old) {
    id[static_cast<size_t>(old)] = d.add_value(tape.values[static_cast<size_t>(old)].shape,
                                               tape.values[static_cast<size_t>(old)].dtype, tape.values[static_cast<size_t>(old)].device);
  };
  for (int i = 0; i < tape.num_inputs; ++i)
    if (!host[static_cast<size_t>(i)]) {
      split.kept_inputs.push_back(i);
      add(i);
    }
  for (int u : split.uploads) add(u);
  d.num_inputs = static_cast<int>(d.values.size());
  for (const auto& [cid, a] : tape.constants) {
    add(cid);
    d.constants.emplace_back(id[static_cast<size_t>(cid)], a);
  }
  size_t next_host = 0;
  for (size_t i = 0; i < tape.steps.size(); ++i) {
    if (next_host < split.host_steps.size() && split.host_steps[next_host] == i) {
      ++next_host;
      continue;
    }
    const Step& s = tape.steps[i];
    Step t{s.prim, {}, {}, s.device};
    for (int in : s.inputs) t.inputs.push_back(id[static_cast<size_t>(in)]);
    for (int o : s.outputs) {
      add(o);
      t.outputs.push_back(id[static_cast<size_t>(o)]);
    }
    d.steps.push_back(std::move(t));
  }
  for (int o : tape.outputs) d.outputs.push_back(id[static_cast<size_t>(o)]);
  verify_tape(d, "split_host_prologue");
  return split;
}

std::vector<Array> host_prologue_inputs(const Tape& tape, const HostSplit& split, const std::vector<Array>& inputs) {
  check_replay_inputs(tape, inputs);
  std::vector<Array> values(tape.values.size());
  for (int i = 0; i < tape.num_inputs; ++i) values[i] = inputs[i];
  for (auto& [id, a] : tape.constants) values[id] = a;
  for (size_t i : split.host_steps) replay_step(tape, tape.steps[i], values);
  std::vector<Array> out;
  out.reserve(split.kept_inputs.size() + split.uploads.size());
  for (int i : split.kept_inputs) out.push_back(inputs[static_cast<size_t>(i)]);
  for (int u : split.uploads) out.push_back(values[static_cast<size_t>(u)]);
  return out;
}

}  // namespace smelt::compiler
