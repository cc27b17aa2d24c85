// The simplify passes (identities, scalar constants, CSE, dead steps), the passes' shared tape queries and the pass pipeline.
#include "src/compile/passes.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <unordered_map>

#include "smelt/ops.h"
#include "src/compile/fuse.h"
#include "src/core/node.h"

namespace smelt::compiler {

namespace {

// Rewrites every use of a value through `forward` (value -> replacement, chains resolved).
void apply_forwarding(Tape& tape, std::vector<int>& forward) {
  auto resolve = [&](int v) {
    while (forward[v] != v) v = forward[v];
    return v;
  };
  for (auto& s : tape.steps)
    for (int& in : s.inputs) in = resolve(in);
  for (int& o : tape.outputs) o = resolve(o);
}

std::vector<int> identity_forwarding(const Tape& tape) {
  std::vector<int> f(tape.values.size());
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<int>(i);
  return f;
}

bool is_identity(const Tape& tape, const Step& s) {
  if (s.inputs.size() != 1 || s.outputs.size() != 1) return false;
  const auto& in = tape.values[s.inputs[0]];
  const auto& out = tape.values[s.outputs[0]];
  // A step to another device is a transfer, never an identity.
  if (in.shape != out.shape || in.dtype != out.dtype || !(in.device == out.device)) return false;
  // Only views and casts can be identities; an explicit Copy is kept (the user asked for new
  // memory), and every other primitive computes.
  const PrimKind k = s.prim.kind;
  if (k == PrimKind::Reshape || k == PrimKind::Broadcast || k == PrimKind::Cast) return true;
  if (k == PrimKind::Transpose) {
    const auto& perm = s.prim.get<PermParams>().perm;
    for (size_t i = 0; i < perm.size(); ++i)
      if (perm[i] != static_cast<int>(i)) return false;
    return true;
  }
  if (k == PrimKind::Slice) {
    const auto& p = s.prim.get<SliceParams>();
    for (size_t i = 0; i < p.start.size(); ++i)
      if (p.start[i] != 0 || p.step[i] != 1) return false;
    return true;
  }
  return false;
}

// A view of a view of the same kind reads the first view's input directly: reshapes and
// broadcasts of reshapes and broadcasts, transposes of transposes (permutations composed).
// Chains that cancel out (squeeze of expand_dims, a transpose undone) then become identities.
void fold_view_of_view(Step& s, const Step& inner) {
  // Casts are not folded (two conversions may round twice), nor slices (their composition is
  // another slice, not worth the code); other primitives are not views.
  const PrimKind k = s.prim.kind;
  if (k == PrimKind::Reshape || k == PrimKind::Broadcast) {
    s.inputs[0] = inner.inputs[0];
  } else if (k == PrimKind::Transpose) {
    const auto& outer = s.prim.get<PermParams>().perm;
    const auto& first = inner.prim.get<PermParams>().perm;
    std::vector<int> composed(outer.size());
    for (size_t i = 0; i < outer.size(); ++i) composed[i] = first[outer[i]];
    s.prim = make_prim(PrimKind::Transpose, PermParams{composed});
    s.inputs[0] = inner.inputs[0];
  }
}

}  // namespace

void remove_identities(Tape& tape) {
  auto forward = identity_forwarding(tape);
  auto resolve = [&](int v) {
    while (forward[v] != v) v = forward[v];
    return v;
  };
  std::vector<int> producer(tape.values.size(), -1);  // value -> index in `kept`
  std::vector<Step> kept;
  kept.reserve(tape.steps.size());
  for (auto& s : tape.steps) {
    for (int& in : s.inputs) in = resolve(in);
    if (s.inputs.size() == 1 && s.outputs.size() == 1) {
      const int p = producer[s.inputs[0]];
      if (p >= 0 && kept[p].prim.kind == s.prim.kind && kept[p].device == s.device) fold_view_of_view(s, kept[p]);
    }
    if (is_identity(tape, s)) {
      forward[s.outputs[0]] = s.inputs[0];
      continue;
    }
    for (int o : s.outputs) producer[o] = static_cast<int>(kept.size());
    kept.push_back(std::move(s));
  }
  tape.steps = std::move(kept);
  apply_forwarding(tape, forward);
}

void merge_scalar_constants(Tape& tape) {
  auto forward = identity_forwarding(tape);
  std::unordered_map<std::string, int> seen;  // dtype + bits -> first constant
  std::vector<std::pair<int, Array>> kept;
  for (auto& [id, a] : tape.constants) {
    if (a.ndim() == 0) {
      // A constant on the GPU is compared through a host copy of its one element.
      Array c = a.device().type == Device::Type::Cpu ? a : to_device(a, Device::cpu());
      c.eval();
      std::string key(1, static_cast<char>(c.dtype()));
      key.append(a.device().str());
      key.append(static_cast<const char*>(c.data()), c.itemsize());
      auto [it, inserted] = seen.emplace(key, id);
      if (!inserted) {
        forward[id] = it->second;
        continue;
      }
    }
    kept.emplace_back(id, a);
  }
  tape.constants = std::move(kept);
  apply_forwarding(tape, forward);
}

void eliminate_common_subexpressions(Tape& tape) {
  struct KeyHash {
    const Tape* tape;
    size_t operator()(const Step* s) const {
      size_t h = s->prim.hash() ^ (static_cast<size_t>(s->device.type) << 8 | static_cast<size_t>(s->device.index));
      for (int in : s->inputs) h = h * 1000003u ^ static_cast<size_t>(in);
      for (int o : s->outputs) {
        const auto& v = tape->values[o];
        h = h * 31u + static_cast<size_t>(v.dtype);
        for (auto d : v.shape) h = h * 31u + static_cast<size_t>(d);
      }
      return h;
    }
  };
  struct KeyEq {
    const Tape* tape;
    bool operator()(const Step* a, const Step* b) const {
      // Steps without inputs (Full, Arange) on two devices are two values.
      if (!(a->prim == b->prim) || !(a->device == b->device) || a->inputs != b->inputs ||
          a->outputs.size() != b->outputs.size())
        return false;
      for (size_t i = 0; i < a->outputs.size(); ++i) {
        const auto& va = tape->values[a->outputs[i]];
        const auto& vb = tape->values[b->outputs[i]];
        if (va.shape != vb.shape || va.dtype != vb.dtype) return false;
      }
      return true;
    }
  };
  auto forward = identity_forwarding(tape);
  std::unordered_map<const Step*, const Step*, KeyHash, KeyEq> seen(16, KeyHash{&tape}, KeyEq{&tape});
  std::vector<Step> kept;
  kept.reserve(tape.steps.size());
  // Inputs are rewritten as we go, so equal steps over merged values are found in one pass.
  std::vector<Step> steps = std::move(tape.steps);
  auto resolve = [&](int v) {
    while (forward[v] != v) v = forward[v];
    return v;
  };
  std::vector<std::unique_ptr<Step>> owned;
  owned.reserve(steps.size());
  for (auto& s : steps) {
    for (int& in : s.inputs) in = resolve(in);
    owned.push_back(std::make_unique<Step>(std::move(s)));
    const Step* cur = owned.back().get();
    auto [it, inserted] = seen.emplace(cur, cur);
    if (!inserted) {
      for (size_t i = 0; i < cur->outputs.size(); ++i) forward[cur->outputs[i]] = it->second->outputs[i];
      owned.back().reset();
    }
  }
  for (auto& p : owned)
    if (p) kept.push_back(std::move(*p));
  tape.steps = std::move(kept);
  apply_forwarding(tape, forward);
}

void eliminate_dead_steps(Tape& tape) {
  std::vector<char> live(tape.values.size(), 0);
  for (int o : tape.outputs) live[o] = 1;
  std::vector<char> keep(tape.steps.size(), 0);
  for (size_t i = tape.steps.size(); i-- > 0;) {
    const Step& s = tape.steps[i];
    bool used = std::any_of(s.outputs.begin(), s.outputs.end(), [&](int o) { return live[o] != 0; });
    if (!used) continue;
    keep[i] = 1;
    for (int in : s.inputs) live[in] = 1;
  }
  std::vector<Step> kept;
  for (size_t i = 0; i < tape.steps.size(); ++i)
    if (keep[i]) kept.push_back(std::move(tape.steps[i]));
  tape.steps = std::move(kept);
  std::erase_if(tape.constants, [&](const auto& c) { return !live[c.first]; });
}

const Array* find_constant(const Tape& tape, int v) {
  for (const auto& [id, a] : tape.constants)
    if (id == v) return &a;
  return nullptr;
}

ValueGraph value_graph(const Tape& tape) {
  ValueGraph g;
  const size_t n = tape.values.size();
  g.producer.assign(n, -1);
  g.readers.assign(n, {});
  g.is_output.assign(n, 0);
  g.is_constant.assign(n, 0);
  for (size_t i = 0; i < tape.steps.size(); ++i) {
    for (int in : tape.steps[i].inputs) g.readers[in].push_back(static_cast<int>(i));
    for (int o : tape.steps[i].outputs) g.producer[o] = static_cast<int>(i);
  }
  for (int o : tape.outputs) g.is_output[o] = 1;
  for (const auto& c : tape.constants) g.is_constant[c.first] = 1;
  return g;
}

const Array* axis_constant_array(const Tape& tape, int v, const Shape& to, size_t axis) {
  const Array* a = find_constant(tape, v);
  if (a == nullptr || a->shape() != to || axis >= to.size()) return nullptr;
  for (size_t i = 0; i < to.size(); ++i)
    if (i != axis && to[i] != 1 && a->strides()[i] != 0) return nullptr;
  return a;
}

int axis_constant(Tape& tape, int v, const Shape& to, size_t axis) {
  const Array* a = axis_constant_array(tape, v, to, axis);
  if (a == nullptr) return -1;
  // Index 0 on every other axis: the vector, on the constant's device, in its dtype.
  std::vector<int64_t> start(to.size(), 0), stop(to.size(), 1);
  stop[axis] = to[axis];
  Array line = reshape(copy(slice(*a, start, stop)), {to[axis]});
  line.eval();
  const int id = tape.add_value({to[axis]}, a->dtype(), a->device());
  tape.constants.emplace_back(id, line);
  return id;
}

void erase_steps(Tape& tape, const std::vector<char>& removed) {
  std::vector<Step> kept;
  kept.reserve(tape.steps.size());
  for (size_t i = 0; i < tape.steps.size(); ++i)
    if (!removed[i]) kept.push_back(std::move(tape.steps[i]));
  tape.steps = std::move(kept);
}

void run_passes(Tape& tape, const PassOptions& options) {
  struct Pass {
    const char* name;
    std::function<void(Tape&)> fn;
  };
  std::vector<Pass> pipeline = {
      {"simplify", remove_identities},
      {"merge_constants", merge_scalar_constants},
      {"cse", eliminate_common_subexpressions},
      {"dce", eliminate_dead_steps},
  };
  // They bake the traced shapes in (oneDNN plans, the pooled shape): a shapeless tape keeps plain
  // convolutions and poolings.
  if (!options.shapeless) {
    pipeline.push_back({"conv_epilogue", fuse_conv_epilogues});
    pipeline.push_back({"conv_prepack", prepack_conv_weights});
    pipeline.push_back({"conv_layout", keep_blocked_layouts});
    pipeline.push_back({"pool_first", pool_before_monotone_steps});
    pipeline.push_back({"pool_epilogue", fuse_pool_epilogues});
    pipeline.push_back({"matmul_bias", fuse_matmul_biases});
  }
  // Packing first: it reads a transposed constant B as it is, where matmul_prepack would copy it
  // row-major first (GPT-2's tied 768 x 50257 embedding: 154 MB more on the first call).
  if (!options.shapeless) pipeline.push_back({"matmul_pack", pack_matmul_weights});
  pipeline.push_back({"matmul_prepack", prepack_matmul_operands});
  if (options.fuse)
    pipeline.push_back({"fuse", [&](Tape& t) {
                          if (options.unbuilt && options.unfused) *options.unfused = t;
                          fuse_elementwise(t, options.function, options.unbuilt);
                        }});
  verify_tape(tape, "trace");
  if (options.dump) options.dump("trace", dump_tape(tape));
  for (auto& p : pipeline) {
    if (std::find(options.disabled.begin(), options.disabled.end(), p.name) != options.disabled.end()) continue;
    p.fn(tape);
    verify_tape(tape, p.name);
    if (options.dump) options.dump(p.name, dump_tape(tape));
  }
}

}  // namespace smelt::compiler
