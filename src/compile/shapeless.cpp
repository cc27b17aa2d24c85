// Shapeless compile: the plan (implicit broadcasts, reshape axis maps, fixed-shape checks) and the
// replay that recomputes every shape from the real inputs.
//
// The plan tracks, per value and axis, whether the size may follow the inputs' shapes ("varies")
// or is fixed (a reduced axis, an inserted size-1 axis, a constant's axis). That tells a reshape
// that drops a reduced axis (always 1) from one that drops an input axis that only happened to
// be 1 when traced, and lets steps whose inputs never change shape keep their traced shapes.
#include "src/compile/shapeless.h"

#include <algorithm>
#include <climits>

#include "smelt/errors.h"
#include "smelt/ops.h"
#include "src/codegen/fused_kernel.h"
#include "src/core/node.h"
#include "src/primitives/shape_rules.h"

namespace smelt::compiler {

namespace {

using Rule = ShapelessStep::Rule;
using Mask = std::vector<char>;  // per axis: 1 when its size may follow the inputs' shapes

bool all_fixed(const Mask& m) {
  return std::none_of(m.begin(), m.end(), [](char c) { return c != 0; });
}

/// `m` right-aligned into `rank` axes (missing leading axes are fixed).
Mask aligned(const Mask& m, size_t rank) {
  Mask out(rank, 0);
  for (size_t i = 0; i < m.size() && i < rank; ++i) out[rank - 1 - i] = m[m.size() - 1 - i];
  return out;
}

void or_into(Mask& acc, const Mask& m) {
  for (size_t i = 0; i < acc.size() && i < m.size(); ++i) acc[i] = static_cast<char>(acc[i] | m[i]);
}

bool is_broadcasting_elementwise(PrimKind k) {
  return k == PrimKind::Binary || k == PrimKind::Select || k == PrimKind::Fused;
}

bool is_scatter(PrimKind k) { return k == PrimKind::Scatter || k == PrimKind::ScatterND; }

std::string in_function(const std::string& function) { return " (function '" + function + "')"; }

[[noreturn]] void cannot_follow(const std::string& what, const Step& s, const std::string& hint,
                                const std::string& function) {
  throw ShapeError("compile(shapeless): " + what + " (" + prim_name(s.prim.kind) + ") cannot follow new input shapes; " +
                   hint + in_function(function));
}

/// The error for a step whose parameters fix its output shape while its inputs' shapes vary.
[[noreturn]] void fixed_shape_error(const Tape& tape, const Step& s, const std::string& function) {
  const std::string in = s.inputs.empty() ? "" : shape_to_string(tape.values[s.inputs[0]].shape);
  const std::string out = shape_to_string(tape.values[s.outputs[0]].shape);
  const std::string retrace = "compile without shapeless to trace each shape";
  const PrimKind k = s.prim.kind;
  if (k == PrimKind::Reshape)
      cannot_follow("reshape from " + in + " to the fixed shape " + out, s,
                    "only reshapes that insert or remove size-1 axes or merge adjacent axes (expand_dims, "
                    "squeeze, flatten) can; " + retrace,
                    function);
  if (k == PrimKind::Broadcast)
      cannot_follow("broadcast_to from " + in + " to the fixed shape " + out, s,
                    "the broadcasts that element-wise ops and matmul make follow their operands, an explicit "
                    "broadcast_to does not; " + retrace,
                    function);
  if (k == PrimKind::Slice)
      cannot_follow("slice of " + in + " to the fixed shape " + out, s, retrace, function);
  if (k == PrimKind::SliceUpdate)
      cannot_follow("slice_update of a fixed region of " + in, s, retrace, function);
  if (k == PrimKind::RandomBits)
      cannot_follow("random bits of the fixed shape " + out, s,
                    "draw the values outside the function and pass them in, or " + retrace, function);
  if (k == PrimKind::Full)
      cannot_follow("full of the fixed shape " + out, s, retrace, function);
  if (k == PrimKind::Arange)
      cannot_follow("arange of the fixed shape " + out, s, retrace, function);
  cannot_follow(s.prim.str() + " of " + in, s, retrace, function);
}

// ---- Reshape axis maps ------------------------------------------------------------------------

struct Dim {
  int axis;
  int64_t size;
  bool varies;
};

struct Alignment {
  std::vector<ReshapeAxis> axes;
  std::vector<int> dropped;
  bool operator==(const Alignment&) const = default;
};

/// Every cheapest way to read `out` as the input axes `dims` in order: each output axis is one
/// input axis (free), a run of adjacent input axes merged (cost 1) or a new size-1 axis (free);
/// an input axis of size 1 that varies may be removed (cost 1: the replay requires it to stay 1).
/// Axes fixed at size 1 are left out of `dims`: removing or keeping them is all the same.
class AlignmentSearch {
 public:
  AlignmentSearch(const std::vector<Dim>& dims, const Shape& out) : dims_(dims), out_(out) { go(0, 0, 0); }
  const std::vector<Alignment>& found() const { return found_; }
  bool exhausted() const { return exhausted_; }

 private:
  void go(size_t d, size_t o, int cost) {
    if (cost > best_ || exhausted_) return;
    if (++visited_ > kMaxVisits) {
      exhausted_ = true;
      return;
    }
    if (d == dims_.size() && o == out_.size()) {
      if (cost < best_) {
        best_ = cost;
        found_.clear();
      }
      Alignment a{axes_, dropped_};
      if (std::find(found_.begin(), found_.end(), a) == found_.end()) found_.push_back(std::move(a));
      return;
    }
    if (d < dims_.size() && dims_[d].varies && dims_[d].size == 1) {
      dropped_.push_back(dims_[d].axis);
      go(d + 1, o, cost + 1);
      dropped_.pop_back();
    }
    if (o < out_.size() && out_[o] == 1) {
      axes_.push_back({-1, -1});
      go(d, o + 1, cost);
      axes_.pop_back();
    }
    if (d >= dims_.size() || o >= out_.size()) return;
    int64_t prod = dims_[d].size;
    if (prod == out_[o]) {
      axes_.push_back({dims_[d].axis, dims_[d].axis});
      go(d + 1, o + 1, cost);
      axes_.pop_back();
    }
    for (size_t e = d + 1; e < dims_.size(); ++e) {
      prod *= dims_[e].size;
      if (prod == out_[o]) {
        axes_.push_back({dims_[d].axis, dims_[e].axis});
        go(e + 1, o + 1, cost + 1);
        axes_.pop_back();
      }
    }
  }

  static constexpr long kMaxVisits = 100000;
  const std::vector<Dim>& dims_;
  const Shape& out_;
  std::vector<ReshapeAxis> axes_;
  std::vector<int> dropped_;
  std::vector<Alignment> found_;
  int best_ = INT_MAX;
  long visited_ = 0;
  bool exhausted_ = false;
};

void plan_reshape(const Tape& tape, const Step& s, const Mask& in_mask, ShapelessStep& ps, Mask& out_mask,
                  const std::string& function) {
  const Shape& in = tape.values[s.inputs[0]].shape;
  const Shape& out = tape.values[s.outputs[0]].shape;
  if (all_fixed(in_mask)) {
    ps.rule = Rule::Fixed;
    out_mask.assign(out.size(), 0);
    return;
  }
  std::vector<Dim> dims;
  for (size_t i = 0; i < in.size(); ++i)
    if (in_mask[i] || in[i] != 1) dims.push_back({static_cast<int>(i), in[i], in_mask[i] != 0});
  AlignmentSearch search(dims, out);
  if (search.found().empty()) fixed_shape_error(tape, s, function);
  if (search.found().size() > 1 || search.exhausted())
    cannot_follow("reshape from " + shape_to_string(in) + " to " + shape_to_string(out), s,
                  "input axes of size 1 in the trace make it ambiguous which axes it inserts, removes or "
                  "merges; trace with sizes other than 1, or compile without shapeless to trace each shape",
                  function);
  const Alignment& a = search.found()[0];
  ps.rule = Rule::Reshape;
  ps.axes = a.axes;
  ps.must_be_one = a.dropped;
  out_mask.assign(out.size(), 0);
  for (size_t o = 0; o < a.axes.size(); ++o)
    for (int i = a.axes[o].first; i >= 0 && i <= a.axes[o].last; ++i) out_mask[o] = static_cast<char>(out_mask[o] | in_mask[i]);
}

// ---- Masks of the other primitives ------------------------------------------------------------

/// Output masks of a step planned as Infer, Elementwise or Matmul, from its operands' masks.
std::vector<Mask> output_masks(const Tape& tape, const Step& s, const std::vector<Mask>& in) {
  const size_t nout = s.outputs.size();
  auto out_rank = [&](size_t i) { return tape.values[s.outputs[i]].shape.size(); };
  auto same = [&](const Mask& m) { return std::vector<Mask>(nout, m); };
  switch (s.prim.kind) {
    case PrimKind::Unary:
    case PrimKind::Cast:
    case PrimKind::Copy:
    case PrimKind::Scan:
    case PrimKind::Sort:
    case PrimKind::ArgSort:
    case PrimKind::Pad:
    case PrimKind::Scatter:
    case PrimKind::ScatterND:
    case PrimKind::SliceUpdate:
      return same(in[0]);
    case PrimKind::Binary:
    case PrimKind::Select:
    case PrimKind::Fused: {
      Mask m(out_rank(0), 0);
      for (auto& x : in) or_into(m, aligned(x, m.size()));
      if (s.prim.kind != PrimKind::Fused || !codegen::is_row_kernel(s.prim.get<FusedParams>())) return same(m);
      // A row program's per-row outputs do not follow the reduced axes.
      std::vector<Mask> out;
      for (size_t o = 0; o < nout; ++o) {
        Mask mo = m;
        if (codegen::row_kernel_output_per_row(s.prim.get<FusedParams>(), o))
          for (size_t d = mo.size() - codegen::row_kernel_reduced_axes(s.prim.get<FusedParams>()); d < mo.size(); ++d) mo[d] = 0;
        out.push_back(mo);
      }
      return out;
    }
    case PrimKind::Concatenate: {
      Mask m = in[0];
      for (auto& x : in) or_into(m, x);
      return same(m);
    }
    case PrimKind::Transpose: {
      const auto& perm = s.prim.get<PermParams>().perm;
      Mask m(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) m[i] = in[0][perm[i]];
      return same(m);
    }
    case PrimKind::Reduce: {
      Mask m = in[0];
      for (int ax : s.prim.get<ReduceParams>().axes) m[ax] = 0;
      return same(m);
    }
    case PrimKind::ArgReduce: {
      Mask m = in[0];
      m[s.prim.get<ArgReduceParams>().axis] = 0;
      return same(m);
    }
    case PrimKind::TopK: {
      Mask m = in[0];
      m[s.prim.get<TopKParams>().axis] = 0;
      return same(m);
    }
    case PrimKind::Matmul: {
      const Mask &a = in[0], &b = in[1];
      const size_t r = out_rank(0);
      Mask m(r, 0);
      or_into(m, aligned(Mask(a.begin(), a.end() - 2), r - 2));
      or_into(m, aligned(Mask(b.begin(), b.end() - 2), r - 2));
      m[r - 2] = a[a.size() - 2];
      m[r - 1] = b.back();
      return same(m);
    }
    case PrimKind::Attention: {
      // [B, Hq, S, Dv]: q's first three axes, v's last.
      Mask m(in[0].begin(), in[0].begin() + 3);
      m.push_back(in[2][3]);
      return same(m);
    }
    case PrimKind::Gather: {
      int ax = s.prim.get<AxisParams>().axis;
      Mask m(in[0].begin(), in[0].begin() + ax);
      m.insert(m.end(), in[1].begin(), in[1].end());
      m.insert(m.end(), in[0].begin() + ax + 1, in[0].end());
      return same(m);
    }
    case PrimKind::GatherElements: {
      Mask m = in[1];
      or_into(m, in[0]);
      return same(m);
    }
    case PrimKind::GatherND: {
      const int batch = s.prim.get<GatherNDParams>().batch_dims;
      const int64_t k = tape.values[s.inputs[1]].shape.back();
      Mask m(in[1].begin(), in[1].end() - 1);
      for (size_t i = static_cast<size_t>(batch + k); i < in[0].size(); ++i) m.push_back(in[0][i]);
      return same(m);
    }
    case PrimKind::Conv:
    case PrimKind::ConvTranspose:
    case PrimKind::Pool: {
      // [N, channels, spatial...]: channels come from the weight, except for pooling.
      Mask m = in[0];
      if (s.prim.kind != PrimKind::Pool) m[1] = in[1][s.prim.kind == PrimKind::Conv ? 0 : 1];
      return same(m);
    }
    case PrimKind::None:
    case PrimKind::Full:
    case PrimKind::Arange:
    case PrimKind::Reshape:
    case PrimKind::Broadcast:
    case PrimKind::Slice:
    case PrimKind::RandomBits:
      break;
  }
  std::vector<Mask> out;
  for (size_t i = 0; i < nout; ++i) out.push_back(Mask(out_rank(i), 1));
  return out;
}

/// Output shapes of one planned step from its operands' shapes; ShapeError when they do not fit.
std::vector<Shape> step_shapes(const Tape& tape, const Step& s, const ShapelessStep& ps,
                               const std::vector<Shape>& in, const std::string& function) {
  std::vector<Shape> traced;
  for (int o : s.outputs) traced.push_back(tape.values[o].shape);
  std::vector<Shape> out;
  try {
    switch (ps.rule) {
      case Rule::Skip:
      case Rule::Fixed:
        return traced;
      case Rule::Reshape: {
        const Shape& x = in[0];
        for (int ax : ps.must_be_one)
          if (x[ax] != 1)
            throw ShapeError("reshape from " + shape_to_string(tape.values[s.inputs[0]].shape) + " to " +
                             shape_to_string(traced[0]) + " (Reshape) removes axis " + std::to_string(ax) +
                             ", which had size 1 when traced, but the input is now " + shape_to_string(x));
        Shape r;
        for (auto& a : ps.axes) {
          int64_t n = 1;
          for (int i = a.first; i >= 0 && i <= a.last; ++i) n *= x[i];
          r.push_back(n);
        }
        if (shape_size(r) != shape_size(x))
          throw ShapeError("reshape from " + shape_to_string(tape.values[s.inputs[0]].shape) + " to " +
                           shape_to_string(traced[0]) + " (Reshape) cannot map the input " + shape_to_string(x));
        out = {r};
        break;
      }
      case Rule::Elementwise: {
        Shape j;
        for (auto& x : in) j = broadcast_shape_of(j, x, s.prim);
        out.assign(s.outputs.size(), j);
        if (s.prim.kind == PrimKind::Fused && codegen::is_row_kernel(s.prim.get<FusedParams>())) {
          // A row kernel's per-row outputs have its reduced (trailing) axes set to 1.
          const FusedParams& fp = s.prim.get<FusedParams>();
          const size_t k = static_cast<size_t>(codegen::row_kernel_reduced_axes(fp));
          for (size_t o = 0; o < out.size(); ++o)
            if (codegen::row_kernel_output_per_row(fp, o))
              for (size_t d = j.size() - std::min(k, j.size()); d < j.size(); ++d) out[o][d] = 1;
        }
        break;
      }
      case Rule::Scatter: {
        std::vector<Shape> with_updates = in;
        Shape want = scatter_updates_shape(s.prim.kind, in[0], in[1]);
        if (broadcast_shape_of(in[2], want, s.prim) != want)
          throw ShapeError(s.prim.str() + ": the updates " + shape_to_string(in[2]) + " do not broadcast to " +
                           shape_to_string(want));
        with_updates[2] = want;
        out = infer_output_shapes(s.prim, with_updates, traced);
        break;
      }
      case Rule::Matmul:
      case Rule::Infer:
        out = infer_output_shapes(s.prim, in, traced);
        break;
    }
  } catch (const ShapeError& e) {
    throw ShapeError(std::string("compile(shapeless): the new input shapes do not fit the trace: ") + e.what() +
                     in_function(function));
  }
  for (size_t i = 0; i < out.size() && i < traced.size(); ++i)
    if (out[i].size() != traced[i].size())
      throw ShapeError("compile(shapeless): " + s.prim.str() + " would change the rank of its output from " +
                       std::to_string(traced[i].size()) + " to " + std::to_string(out[i].size()) +
                       " under the new input shapes" + in_function(function));
  return out;
}


void expose_constant_broadcasts(Tape& tape) {
  std::vector<Step> broadcasts;
  for (auto& [id, a] : tape.constants) {
    const detail::Node& n = a.node();
    if (!n.evaluated || !n.buffer) continue;
    Shape compact = n.shape;
    bool any = false, scalar = true;
    for (size_t i = 0; i < compact.size(); ++i) {
      if (compact[i] > 1 && n.strides[i] == 0) {
        compact[i] = 1;
        any = true;
      }
      scalar = scalar && compact[i] == 1;
    }
    if (!any) continue;
    Array view = scalar ? detail::make_leaf({}, n.dtype, n.device, n.buffer, {}, n.offset)
                        : detail::make_leaf(compact, n.dtype, n.device, n.buffer, n.strides, n.offset);
    Step b;
    b.prim = make_prim(PrimKind::Broadcast, ShapeParams{n.shape});
    b.device = n.device;  // a view: where the constant lives
    b.outputs = {id};
    id = tape.add_value(view.shape(), view.dtype(), n.device);
    b.inputs = {id};
    a = std::move(view);
    broadcasts.push_back(std::move(b));
  }
  tape.steps.insert(tape.steps.begin(), std::make_move_iterator(broadcasts.begin()),
                    std::make_move_iterator(broadcasts.end()));
}

}  // namespace

void prepare_shapeless(Tape& tape, const std::string& function) {
  expose_constant_broadcasts(tape);
  const ShapelessPlan plan = plan_shapeless(tape, function);
  std::vector<int> copy_of(tape.values.size(), -1);
  std::vector<Step> steps;
  steps.reserve(tape.steps.size());
  for (size_t k = 0; k < tape.steps.size(); ++k) {
    Step s = std::move(tape.steps[k]);
    const ShapelessStep& ps = plan.steps[k];
    // Uses that read a materialized broadcast itself (not its source) read the copy.
    for (size_t j = 0; j < s.inputs.size(); ++j)
      if (ps.rule != ShapelessStep::Rule::Skip && ps.operands[j] == s.inputs[j] && copy_of[s.inputs[j]] >= 0)
        s.inputs[j] = copy_of[s.inputs[j]];
    const bool materialize = s.prim.kind == PrimKind::Broadcast && ps.rule == ShapelessStep::Rule::Fixed;
    const int out = s.outputs[0];
    steps.push_back(std::move(s));
    if (!materialize) continue;
    Step copy;
    copy.prim = make_prim(PrimKind::Copy, NoParams{});
    copy.device = tape.values[out].device;  // materialized where the broadcast lives, not a transfer
    copy.inputs = {out};
    copy.outputs = {tape.add_value(tape.values[out].shape, tape.values[out].dtype, copy.device)};
    copy_of.push_back(-1);
    copy_of[out] = copy.outputs[0];
    steps.push_back(std::move(copy));
  }
  tape.steps = std::move(steps);
  for (int& o : tape.outputs)
    if (copy_of[o] >= 0) o = copy_of[o];
}

ShapelessPlan plan_shapeless(const Tape& tape, const std::string& function) {
  const size_t nvalues = tape.values.size(), nsteps = tape.steps.size();
  std::vector<int> producer(nvalues, -1);
  for (size_t k = 0; k < nsteps; ++k)
    for (int o : tape.steps[k].outputs) producer[o] = static_cast<int>(k);
  auto is_broadcast = [&](int v) {
    return producer[v] >= 0 && tape.steps[producer[v]].prim.kind == PrimKind::Broadcast;
  };
  auto root_of = [&](int v) {
    while (is_broadcast(v)) v = tape.steps[producer[v]].inputs[0];
    return v;
  };
  auto shape = [&](int v) -> const Shape& { return tape.values[v].shape; };

  // 1. Each consumer that broadcasts its operands itself reads the sources of the broadcasts it
  //    was given, when those broadcasts only made the operands' joint shape.
  ShapelessPlan plan;
  plan.steps.resize(nsteps);
  for (size_t k = 0; k < nsteps; ++k) {
    const Step& s = tape.steps[k];
    ShapelessStep& ps = plan.steps[k];
    ps.operands = s.inputs;
    std::vector<int> roots;
    for (int v : s.inputs) roots.push_back(root_of(v));
    if (roots == s.inputs) continue;
    try {
      if (is_broadcasting_elementwise(s.prim.kind)) {
        Shape j;
        for (int r : roots) j = broadcast_shape_of(j, shape(r), "");
        Shape full;  // the index space (a row kernel's first output may be per row)
        for (int v : s.inputs) full = broadcast_shape_of(full, shape(v), "");
        if (j == full) ps.operands = roots;
      } else if (s.prim.kind == PrimKind::Matmul) {
        bool ok = true;
        Shape batch;
        for (int i = 0; i < 2 && ok; ++i) {
          const Shape &r = shape(roots[i]), &given = shape(s.inputs[i]);
          ok = r.size() >= 2 && r[r.size() - 2] == given[given.size() - 2] && r.back() == given.back();
          if (ok) batch = broadcast_shape_of(batch, Shape(r.begin(), r.end() - 2), "");
        }
        const Shape& out = shape(s.outputs[0]);
        if (ok && batch == Shape(out.begin(), out.end() - 2)) ps.operands = roots;
      } else if (is_scatter(s.prim.kind)) {
        // Only the updates are broadcast (to the shape the array and the indices ask for).
        if (roots[0] == s.inputs[0] && roots[1] == s.inputs[1]) ps.operands = roots;
      }
    } catch (const ShapeError&) {
      // The sources do not broadcast together: the broadcasts stay as they are.
    }
  }

  // 2. A broadcast that no step reads any more (and that is not an output) is skipped.
  std::vector<char> needed(nvalues, 0);
  for (int o : tape.outputs) needed[o] = 1;
  for (size_t k = nsteps; k-- > 0;) {
    const Step& s = tape.steps[k];
    if (s.prim.kind == PrimKind::Broadcast && !needed[s.outputs[0]]) {
      plan.steps[k].rule = Rule::Skip;
      continue;
    }
    for (int v : plan.steps[k].operands) needed[v] = 1;
  }

  // 3. Rules and masks in tape order.
  std::vector<Mask> mask(nvalues);
  for (int i = 0; i < tape.num_inputs; ++i) mask[i] = Mask(shape(i).size(), 1);
  for (auto& [id, a] : tape.constants) mask[id] = Mask(shape(id).size(), 0);
  for (size_t k = 0; k < nsteps; ++k) {
    const Step& s = tape.steps[k];
    ShapelessStep& ps = plan.steps[k];
    if (ps.rule == Rule::Skip) continue;
    std::vector<Mask> in;
    bool inputs_fixed = true;
    for (int v : ps.operands) {
      in.push_back(mask[v]);
      inputs_fixed = inputs_fixed && all_fixed(mask[v]);
    }
    std::vector<Mask> out;
    if (s.prim.kind == PrimKind::Reshape) {
      out.resize(1);
      plan_reshape(tape, s, in[0], ps, out[0], function);
    } else if (prim_fixes_shape(s.prim.kind) || s.prim.kind == PrimKind::SliceUpdate) {
      // The parameters fix the region or the shape: only right when the inputs never change.
      if (!inputs_fixed) fixed_shape_error(tape, s, function);
      ps.rule = Rule::Fixed;
      for (int o : s.outputs) out.push_back(Mask(shape(o).size(), 0));
    } else {
      ps.rule = is_broadcasting_elementwise(s.prim.kind) ? Rule::Elementwise
                : s.prim.kind == PrimKind::Matmul        ? Rule::Matmul
                : is_scatter(s.prim.kind)                ? Rule::Scatter
                                                         : Rule::Infer;
      out = output_masks(tape, s, in);
    }
    for (size_t i = 0; i < s.outputs.size(); ++i) mask[s.outputs[i]] = std::move(out[i]);
  }

  // 4. The plan must reproduce the traced shapes from the traced input shapes.
  std::vector<Shape> shapes(nvalues);
  for (size_t v = 0; v < nvalues; ++v) shapes[v] = shape(static_cast<int>(v));
  for (size_t k = 0; k < nsteps; ++k) {
    const Step& s = tape.steps[k];
    const ShapelessStep& ps = plan.steps[k];
    if (ps.rule == Rule::Skip) continue;
    std::vector<Shape> in;
    for (int v : ps.operands) in.push_back(shapes[v]);
    std::vector<Shape> out = step_shapes(tape, s, ps, in, function);
    for (size_t i = 0; i < s.outputs.size(); ++i) {
      if (out[i] != shape(s.outputs[i]))
        cannot_follow(s.prim.str() + " with output " + shape_to_string(shape(s.outputs[i])), s,
                      "its shape rule gives " + shape_to_string(out[i]) +
                          " from the traced shapes (a broadcast to a fixed shape inside it?); compile without "
                          "shapeless to trace each shape",
                      function);
    }
  }
  return plan;
}

std::vector<Array> replay_shapeless(const Tape& tape, const ShapelessPlan& plan, const std::vector<Array>& inputs,
                                    const std::string& function) {
  SMELT_ASSERT(plan.steps.size() == tape.steps.size(), "replay_shapeless: the plan does not match the tape");
  check_replay_inputs(tape, inputs);
  std::vector<Array> values(tape.values.size());
  for (int i = 0; i < tape.num_inputs; ++i) values[i] = inputs[i];
  for (auto& [id, a] : tape.constants) values[id] = a;
  for (size_t k = 0; k < tape.steps.size(); ++k) {
    const Step& s = tape.steps[k];
    const ShapelessStep& ps = plan.steps[k];
    if (ps.rule == Rule::Skip) continue;
    std::vector<Array> ins;
    std::vector<Shape> in_shapes;
    for (int v : ps.operands) {
      ins.push_back(values[v]);
      in_shapes.push_back(values[v].shape());
    }
    std::vector<Shape> shapes = step_shapes(tape, s, ps, in_shapes, function);
    Primitive prim = s.prim;
    switch (ps.rule) {
      case Rule::Elementwise:
        // Fused kernels broadcast their inputs themselves; the other kernels take one shape.
        if (s.prim.kind != PrimKind::Fused)
          for (auto& x : ins) x = broadcast_to(x, shapes[0]);
        break;
      case Rule::Matmul: {
        Shape batch(shapes[0].begin(), shapes[0].end() - 2);
        for (auto& x : ins) {
          Shape full = batch;
          full.insert(full.end(), x.shape().end() - 2, x.shape().end());
          x = broadcast_to(x, full);
        }
        break;
      }
      case Rule::Scatter:
        ins[2] = broadcast_to(ins[2], scatter_updates_shape(s.prim.kind, ins[0].shape(), ins[1].shape()));
        break;
      case Rule::Reshape:
        if (shapes[0] == ins[0].shape()) {
          values[s.outputs[0]] = ins[0];
          continue;
        }
        prim = make_prim(PrimKind::Reshape, ShapeParams{shapes[0]});
        break;
      case Rule::Infer:
      case Rule::Fixed:
      case Rule::Skip:
        break;
    }
    if (s.outputs.size() == 1) {
      values[s.outputs[0]] =
          make_array(std::move(shapes[0]), tape.values[s.outputs[0]].dtype, s.device, prim, std::move(ins));
    } else {
      std::vector<Dtype> dtypes;
      for (int o : s.outputs) dtypes.push_back(tape.values[o].dtype);
      auto outs = detail::make_multi_output(std::move(shapes), std::move(dtypes), s.device, prim, std::move(ins));
      for (size_t i = 0; i < outs.size(); ++i) values[s.outputs[i]] = std::move(outs[i]);
    }
  }
  std::vector<Array> outs;
  for (int o : tape.outputs) outs.push_back(values[o]);
  return outs;
}

}  // namespace smelt::compiler
