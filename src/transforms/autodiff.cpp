// Reverse- and forward-mode autodiff: run the function on fresh primal nodes, order the graph it
// built with a worklist, and push cotangents backwards (vjp) or tangents forwards (jvp).
#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "smelt/ops.h"
#include "smelt/transforms.h"
#include "src/core/node.h"
#include "src/ops/op_utils.h"
#include "src/transforms/origin.h"
#include "src/transforms/rules.h"
#include "src/transforms/walk.h"

namespace smelt {

namespace transforms {

namespace {

thread_local int g_transform_depth = 0;

/// Marks on nodes, by process-unique node id (ids are never reused, so a stale entry never matches
/// a new node). Kept here rather than as node fields so that the core node stays free of transform
/// state; expired entries are purged as the table grows.
template <class V>
struct MarkTable {
  struct Entry {
    std::weak_ptr<detail::Node> node;
    V value;
  };
  std::mutex mutex;
  std::unordered_map<uint64_t, Entry> nodes;
  size_t purge_at = 1024;

  void add(const std::shared_ptr<detail::Node>& n, V value) {
    std::lock_guard lock(mutex);
    nodes.emplace(n->id, Entry{n, std::move(value)});
    if (nodes.size() < purge_at) return;
    std::erase_if(nodes, [](const auto& kv) { return kv.second.node.expired(); });
    purge_at = std::max<size_t>(1024, nodes.size() * 2);
  }
  std::optional<V> find(const detail::Node& n) {
    std::lock_guard lock(mutex);
    auto it = nodes.find(n.id);
    if (it == nodes.end()) return std::nullopt;
    return it->second.value;
  }
};

MarkTable<bool>& stop_gradient_table() {
  static MarkTable<bool> table;
  return table;
}

MarkTable<CheckpointMark>& checkpoint_table() {
  static MarkTable<CheckpointMark> table;
  return table;
}

/// Marks the thread as running a transform's function while it lives (exception safe).
struct TransformScope {
  TransformScope() { ++g_transform_depth; }
  ~TransformScope() { --g_transform_depth; }
  TransformScope(const TransformScope&) = delete;
  TransformScope& operator=(const TransformScope&) = delete;
};

Array identity_node(const Array& a) {
  return make_array(a.shape(), a.dtype(), a.device(), make_prim(PrimKind::Reshape, ShapeParams{a.shape()}), {a});
}

}  // namespace

Array primal_node(const Array& a) { return identity_node(a); }

// Both marks are identity reshapes (kind None once evaluated): other nodes skip the (locked) table
// lookups.
static bool is_mark_kind(const detail::Node& n) { return n.prim.kind == PrimKind::Reshape || n.prim.kind == PrimKind::None; }

bool is_stop_gradient(const detail::Node& n) {
  return is_mark_kind(n) && stop_gradient_table().find(n).has_value();
}

std::optional<CheckpointMark> checkpoint_mark(const detail::Node& n) {
  if (!is_mark_kind(n)) return std::nullopt;
  return checkpoint_table().find(n);
}

std::vector<Array> dependent_order(const std::vector<Array>& outputs, const std::unordered_set<const detail::Node*>& primals,
                                   bool through_stop_gradient) {
  std::vector<Array> order;
  std::unordered_map<const detail::Node*, bool> depends;  // set once the node is finished
  std::unordered_set<const detail::Node*> entered;
  static const std::vector<Array> kNone;
  struct Frame {
    Array a;
    // The node's inputs for this walk (a checkpoint's: its call's, which the mark keeps alive as
    // long as the node, held by `a`, lives).
    const std::vector<Array>* inputs;
    size_t next = 0;
  };
  auto frame = [&](const Array& a) {
    const detail::Node& n = a.node();
    Frame f{a, &kNone, 0};
    if (primals.count(&n)) return f;
    if (auto mark = checkpoint_mark(n)) {
      f.inputs = &mark->call->inputs;
    } else if (!n.evaluated && (through_stop_gradient || !is_stop_gradient(n))) {
      f.inputs = &n.inputs;
    }
    return f;
  };
  std::vector<Frame> stack;
  for (const auto& root : outputs) {
    if (entered.count(&root.node())) continue;
    entered.insert(&root.node());
    stack.push_back(frame(root));
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next < f.inputs->size()) {
        const Array in = (*f.inputs)[f.next++];
        if (!entered.count(&in.node())) {
          entered.insert(&in.node());
          stack.push_back(frame(in));
        }
        continue;
      }
      const detail::Node& n = f.a.node();
      bool dep = primals.count(&n) > 0;
      for (const auto& in : *f.inputs) {
        auto it = depends.find(&in.node());
        dep = dep || (it != depends.end() && it->second);
      }
      depends[&n] = dep;
      if (dep) order.push_back(f.a);
      stack.pop_back();
    }
  }
  return order;
}

void check_arrays(const std::vector<Array>& arrays, const char* op, const char* what) {
  for (size_t i = 0; i < arrays.size(); ++i)
    if (!arrays[i].valid()) throw InvalidArgument(std::string(op) + ": " + what + " " + std::to_string(i) + " is an empty array handle");
}

std::vector<Array> run_fn(const ArrayFn& f, const std::vector<Array>& primals, const char* op) {
  std::vector<Array> outs;
  {
    TransformScope scope;
    outs = f(primals);
  }
  check_arrays(outs, op, "output");
  return outs;
}

}  // namespace transforms

namespace {

using transforms::check_arrays;
using transforms::checkpoint_mark;
using transforms::CheckpointCall;
using transforms::dependent_order;
using transforms::run_fn;

std::vector<Array> make_primals(const std::vector<Array>& primals, std::unordered_set<const detail::Node*>& ids) {
  std::vector<Array> out;
  out.reserve(primals.size());
  for (const auto& p : primals) {
    out.push_back(transforms::primal_node(p));
    ids.insert(&out.back().node());
  }
  return out;
}

/// The backward walk: cotangents of `seeds` (one per output; empty: none) pulled back to `primals`.
std::vector<Array> backward(const std::vector<Array>& outs, const std::vector<Array>& seeds,
                            const std::vector<Array>& primals, const std::unordered_set<const detail::Node*>& ids) {
  std::unordered_map<const detail::Node*, Array> ct;
  auto accumulate = [&](const Array& target, Array g) {
    if (g.dtype() != target.dtype()) g = astype(g, target.dtype());
    SMELT_ASSERT(g.shape() == target.shape(), "vjp: a rule gave a cotangent of shape " + shape_to_string(g.shape()) +
                                                  " for " + target.node().prim.str() + " of shape " +
                                                  shape_to_string(target.shape()));
    auto [it, fresh] = ct.try_emplace(&target.node(), g);
    if (!fresh) it->second = it->second + g;
  };
  for (size_t i = 0; i < outs.size(); ++i)
    if (seeds[i].valid() && is_floating(outs[i].dtype())) accumulate(outs[i], seeds[i]);
  std::vector<Array> order = dependent_order(outs, ids);
  // A checkpointed call is pulled back once, when the last of its outputs in the order has its
  // cotangent (the order puts the call's inputs before all of its outputs, so every output comes
  // before the inputs in the reverse walk).
  struct PendingCall {
    size_t remaining = 0;
    std::vector<Array> cts;
  };
  std::unordered_map<const CheckpointCall*, PendingCall> pending;
  for (const Array& a : order)
    if (auto mark = checkpoint_mark(a.node()); mark && !ids.count(&a.node())) {
      PendingCall& p = pending[mark->call.get()];
      p.remaining++;
      p.cts.resize(mark->call->outputs);
    }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Array& a = *it;
    const detail::Node& n = a.node();
    if (ids.count(&n)) continue;  // a primal: its cotangent is the result
    auto found = ct.find(&n);
    Array g;
    if (found != ct.end()) {
      g = std::move(found->second);
      ct.erase(found);  // release it as soon as it has been pulled back
    }
    if (auto mark = checkpoint_mark(n)) {
      PendingCall& p = pending[mark->call.get()];
      if (g.valid()) p.cts[mark->index] = g;
      if (--p.remaining > 0) continue;
      if (std::none_of(p.cts.begin(), p.cts.end(), [](const Array& c) { return c.valid(); })) continue;
      // Recompute: the call's forward graph is built again here, so the backward graph holds only
      // the call's inputs, never the values made inside it.
      const CheckpointCall& call = *mark->call;
      // Under compile (traced inputs) the recomputation would be merged back into the forward
      // values by common-subexpression elimination (same primitives, same inputs); it runs on
      // explicit copies of the traced inputs instead, which simplify keeps, so the compiled
      // backward recomputes too. Eager calls need no copies.
      std::vector<Array> inputs = call.inputs;
      for (Array& in : inputs)
        if (in.node().tracer) in = copy(in);
      std::vector<Array> in_cts = vjp(call.f, inputs, p.cts).second;
      p.cts.clear();
      for (size_t i = 0; i < in_cts.size(); ++i)
        if (in_cts[i].valid() && is_floating(call.inputs[i].dtype())) accumulate(call.inputs[i], in_cts[i]);
      continue;
    }
    if (!g.valid() || !is_floating(n.dtype)) continue;
    std::vector<Array> in_cts = transforms::vjp_rule_naming_origin(a, g);
    for (size_t i = 0; i < in_cts.size(); ++i) {
      const Array& in = n.inputs[i];
      if (!in_cts[i].valid() || !is_floating(in.dtype())) continue;
      accumulate(in, in_cts[i]);
    }
  }
  std::vector<Array> grads;
  for (const auto& p : primals) {
    auto found = ct.find(&p.node());
    grads.push_back(found != ct.end() ? found->second : zeros_like(p));
  }
  return grads;
}

}  // namespace

namespace detail {

bool in_transform() { return transforms::g_transform_depth > 0; }

void check_differentiable(const std::vector<Array>& leaves, int argnum, const char* op) {
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!leaves[i].valid())
      throw InvalidArgument(std::string(op) + ": argument " + std::to_string(argnum) + " leaf " + std::to_string(i) +
                            " is an empty array handle");
    if (!is_floating(leaves[i].dtype()))
      throw DtypeError(std::string(op) + ": argument " + std::to_string(argnum) + " leaf " + std::to_string(i) +
                       " is " + describe(leaves[i]) + "; only floating-point arrays can be differentiated");
  }
}

std::pair<std::vector<Array>, std::vector<Array>> grad_vjp(const ArrayFn& f, const std::vector<Array>& primals,
                                                           const char* op) {
  check_arrays(primals, op, "primal");
  std::unordered_set<const Node*> ids;
  std::vector<Array> ps = make_primals(primals, ids);
  std::vector<Array> outs = run_fn(f, ps, op);
  SMELT_ASSERT(outs.size() == 1, std::string(op) + ": expected one output");
  const Array& loss = outs[0];
  if (loss.size() != 1)
    throw ShapeError(std::string(op) + ": the function must return a scalar (one element), got " + describe(loss) +
                     "; use vjp for other outputs");
  if (!is_floating(loss.dtype()))
    throw DtypeError(std::string(op) + ": the function must return a floating-point scalar, got " + describe(loss));
  return {outs, backward(outs, {ones_like(loss)}, ps, ids)};
}

}  // namespace detail

std::pair<std::vector<Array>, std::vector<Array>> vjp(const ArrayFn& f, const std::vector<Array>& primals,
                                                      const std::vector<Array>& cotangents) {
  check_arrays(primals, "vjp", "primal");
  std::unordered_set<const detail::Node*> ids;
  std::vector<Array> ps = make_primals(primals, ids);
  std::vector<Array> outs = run_fn(f, ps, "vjp");
  if (cotangents.size() != outs.size())
    throw InvalidArgument("vjp: " + std::to_string(cotangents.size()) + " cotangents given for " +
                          std::to_string(outs.size()) + " outputs");
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!cotangents[i].valid()) continue;  // an empty handle: a zero cotangent
    if (cotangents[i].shape() != outs[i].shape())
      throw ShapeError("vjp: cotangent " + std::to_string(i) + " " + describe(cotangents[i]) +
                       " does not match output " + describe(outs[i]));
  }
  return {outs, backward(outs, cotangents, ps, ids)};
}

std::pair<std::vector<Array>, std::vector<Array>> jvp(const ArrayFn& f, const std::vector<Array>& primals,
                                                      const std::vector<Array>& tangents) {
  check_arrays(primals, "jvp", "primal");
  if (tangents.size() != primals.size())
    throw InvalidArgument("jvp: " + std::to_string(tangents.size()) + " tangents given for " +
                          std::to_string(primals.size()) + " primals");
  for (size_t i = 0; i < primals.size(); ++i)
    if (tangents[i].valid() && tangents[i].shape() != primals[i].shape())
      throw ShapeError("jvp: tangent " + std::to_string(i) + " " + describe(tangents[i]) + " does not match primal " +
                       describe(primals[i]));
  std::unordered_set<const detail::Node*> ids;
  std::vector<Array> ps = make_primals(primals, ids);
  std::vector<Array> outs = run_fn(f, ps, "jvp");
  std::unordered_map<const detail::Node*, Array> tan;
  for (size_t i = 0; i < ps.size(); ++i)
    if (tangents[i].valid() && is_floating(ps[i].dtype())) tan[&ps[i].node()] = astype(tangents[i], ps[i].dtype());
  // A checkpointed call is pushed forward once, through its function run again on its inputs.
  std::unordered_map<const CheckpointCall*, std::vector<Array>> call_tangents;
  for (const Array& a : dependent_order(outs, ids)) {
    const detail::Node& n = a.node();
    if (ids.count(&n) || !is_floating(n.dtype)) continue;
    if (auto mark = checkpoint_mark(n)) {
      const CheckpointCall& call = *mark->call;
      auto [it, fresh] = call_tangents.try_emplace(&call);
      if (fresh) {
        std::vector<Array> ts(call.inputs.size());
        for (size_t i = 0; i < ts.size(); ++i)
          if (auto found = tan.find(&call.inputs[i].node()); found != tan.end()) ts[i] = found->second;
        it->second = jvp(call.f, call.inputs, ts).second;
      }
      tan[&n] = it->second[mark->index];
      continue;
    }
    std::vector<Array> ts(n.inputs.size());
    bool any = false;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      auto found = tan.find(&n.inputs[i].node());
      if (found == tan.end() || !is_floating(n.inputs[i].dtype())) continue;
      ts[i] = found->second;
      any = true;
    }
    if (!any) continue;
    Array t = transforms::jvp_rule(a, ts);
    if (!t.valid()) continue;
    if (t.dtype() != n.dtype) t = astype(t, n.dtype);
    SMELT_ASSERT(t.shape() == n.shape, "jvp: a rule gave a tangent of shape " + shape_to_string(t.shape()) + " for " +
                                           n.prim.str() + " of shape " + shape_to_string(n.shape));
    tan[&n] = t;
  }
  std::vector<Array> out_tangents;
  for (const auto& o : outs) {
    auto found = tan.find(&o.node());
    out_tangents.push_back(found != tan.end() ? found->second : zeros_like(o));
  }
  return {outs, out_tangents};
}

Array stop_gradient(const Array& a) {
  check_valid(a, "stop_gradient");
  auto n = detail::make_node(a.shape(), a.dtype(), a.device(), make_prim(PrimKind::Reshape, ShapeParams{a.shape()}), {a});
  transforms::stop_gradient_table().add(n, true);
  return Array(std::move(n));
}

namespace detail {

std::vector<Array> checkpoint_flat(const ArrayFn& f, const std::vector<Array>& inputs) {
  check_arrays(inputs, "checkpoint", "input");
  std::vector<Array> outs = f(inputs);
  check_arrays(outs, "checkpoint", "output");
  auto call = std::make_shared<CheckpointCall>(CheckpointCall{f, inputs, outs.size()});
  std::vector<Array> marked;
  for (size_t j = 0; j < outs.size(); ++j) {
    const Array& o = outs[j];
    auto n = make_node(o.shape(), o.dtype(), o.device(), make_prim(PrimKind::Reshape, ShapeParams{o.shape()}), {o});
    transforms::checkpoint_table().add(n, transforms::CheckpointMark{call, j});
    marked.emplace_back(std::move(n));
  }
  return marked;
}

}  // namespace detail

}  // namespace smelt
