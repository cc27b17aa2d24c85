// vmap: run the function once on one example of each mapped input, then rebuild the graph it made
// with every primitive's batching rule, in a worklist order, over the whole batch.
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "smelt/errors.h"
#include "smelt/ops.h"
#include "smelt/transforms.h"
#include "src/core/node.h"
#include "src/ops/op_utils.h"
#include "src/transforms/rules.h"
#include "src/transforms/walk.h"

namespace smelt::detail {

namespace {

Shape with_batch(int64_t b, const Shape& s) {
  Shape r{b};
  r.insert(r.end(), s.begin(), s.end());
  return r;
}

/// The batched value of a node with the batch axis in front, or an empty handle.
using BatchedMap = std::unordered_map<const Node*, Array>;

Array find_batched(const BatchedMap& m, const Array& a) {
  auto it = m.find(&a.node());
  return it != m.end() ? it->second : Array();
}

/// A checkpointed call met inside vmap stays checkpointed: its function, vmapped over the inputs
/// that are batched, becomes the function of a new checkpointed call.
std::vector<Array> batch_checkpoint(const transforms::CheckpointCall& call, const BatchedMap& batched) {
  std::vector<Array> inputs;
  std::vector<std::optional<int>> axes;
  for (const Array& in : call.inputs) {
    Array b = find_batched(batched, in);
    inputs.push_back(b.valid() ? b : in);
    axes.push_back(b.valid() ? std::optional<int>(0) : std::nullopt);
  }
  ArrayFn f = call.f;
  ArrayFn vf = [f, axes](const std::vector<Array>& in) { return vmap_flat(f, in, axes, {0}); };
  return checkpoint_flat(vf, inputs);
}

}  // namespace

std::vector<Array> vmap_flat(const ArrayFn& f, const std::vector<Array>& inputs,
                             const std::vector<std::optional<int>>& in_axes, const std::vector<int>& out_axes) {
  transforms::check_arrays(inputs, "vmap", "input");
  SMELT_ASSERT(in_axes.size() == inputs.size(), "vmap: one axis per input leaf");
  int64_t b = -1;
  size_t first = 0;
  int first_axis = 0;
  std::vector<Array> placeholders;
  std::unordered_set<const Node*> ids;
  BatchedMap batched;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Array& x = inputs[i];
    if (!in_axes[i]) {
      placeholders.push_back(x);
      continue;
    }
    int axis = *in_axes[i];
    if (axis < -x.ndim() || axis >= x.ndim())
      throw InvalidArgument("vmap: in_axes " + std::to_string(axis) + " is out of range for input leaf " +
                            std::to_string(i) + " " + describe(x));
    if (axis < 0) axis += x.ndim();
    const int64_t size = x.shape(axis);
    if (b < 0) {
      b = size;
      first = i;
      first_axis = axis;
    } else if (size != b) {
      throw ShapeError("vmap: mapped axes differ in size: input leaf " + std::to_string(first) + " " +
                       describe(inputs[first]) + " axis " + std::to_string(first_axis) + " has " + std::to_string(b) +
                       ", input leaf " + std::to_string(i) + " " + describe(x) + " axis " + std::to_string(axis) +
                       " has " + std::to_string(size));
    }
    Array moved = moveaxis(x, axis, 0);
    Shape rest(moved.shape().begin() + 1, moved.shape().end());
    // The function sees one example (a real slice, so its graph can be built; an empty batch gets
    // zeros of the example's shape).
    Array one = size > 0 ? reshape(slice(moved, Axes{0}, {0}, {1}, {1}), rest)
                         : full_value(rest, Scalar::of_int(0), x.dtype(), x.device());
    Array p = transforms::primal_node(one);
    ids.insert(&p.node());
    batched[&p.node()] = moved;
    placeholders.push_back(p);
  }
  if (b < 0)
    throw InvalidArgument("vmap: no input is mapped (every in_axes entry is not_mapped); map at least one input over "
                          "an axis");
  std::vector<Array> outs = transforms::run_fn(f, placeholders, "vmap");
  for (const Array& p : placeholders)
    if (ids.count(&p.node()) && p.node().evaluated)
      throw UnknownValueError(
          "vmap: the function evaluated a value that depends on a mapped input (item, to_vector, printing, eval); "
          "inside vmap an input stands for every example at once, so its values are not known. Keep the function "
          "lazy");
  if (out_axes.size() != 1 && out_axes.size() != outs.size())
    throw InvalidArgument("vmap: out_axes has " + std::to_string(out_axes.size()) + " entries for " +
                          std::to_string(outs.size()) + " output leaves (give one, or one per output leaf)");

  std::unordered_map<const transforms::CheckpointCall*, std::vector<Array>> calls;
  for (const Array& a : transforms::dependent_order(outs, ids, /*through_stop_gradient=*/true)) {
    const Node& n = a.node();
    if (ids.count(&n) || batched.count(&n)) continue;  // a placeholder, or a sibling already batched
    if (auto mark = transforms::checkpoint_mark(n)) {
      auto [it, fresh] = calls.try_emplace(mark->call.get());
      if (fresh) it->second = batch_checkpoint(*mark->call, batched);
      batched[&n] = it->second[mark->index];
      continue;
    }
    std::vector<Array> ins(n.inputs.size());
    for (size_t i = 0; i < ins.size(); ++i) ins[i] = find_batched(batched, n.inputs[i]);
    if (transforms::is_stop_gradient(n)) {
      batched[&n] = stop_gradient(ins[0]);
      continue;
    }
    std::vector<Array> res = transforms::batch_rule(a, ins, b);
    if (n.group) {
      for (size_t k = 0; k < res.size(); ++k)
        if (auto sibling = n.group->nodes[k].lock()) batched[sibling.get()] = res[k];
    } else {
      batched[&n] = res[0];
    }
    const Array& r = batched[&n];
    SMELT_ASSERT(r.shape() == with_batch(b, n.shape) && r.dtype() == n.dtype,
                 "vmap: the batching rule of " + n.prim.str() + " gave " + describe(r) + " for " + describe(a));
  }

  std::vector<Array> results;
  for (size_t j = 0; j < outs.size(); ++j) {
    const Array& o = outs[j];
    Array r = find_batched(batched, o);
    // An output that does not depend on a mapped input is the same for every example.
    if (!r.valid()) r = broadcast_to(reshape(o, with_batch(1, o.shape())), with_batch(b, o.shape()));
    int axis = out_axes[out_axes.size() == 1 ? 0 : j];
    const int rank = r.ndim();
    if (axis < -rank || axis >= rank)
      throw InvalidArgument("vmap: out_axes " + std::to_string(axis) + " is out of range for output leaf " +
                            std::to_string(j) + " " + describe(o) + " (batched: rank " + std::to_string(rank) + ")");
    if (axis < 0) axis += rank;
    results.push_back(axis == 0 ? r : moveaxis(r, 0, axis));
  }
  return results;
}

}  // namespace smelt::detail
