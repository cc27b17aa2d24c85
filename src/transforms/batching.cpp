// The batching rule of every primitive kind (vmap): the node rebuilt over inputs with a leading batch
// axis, each primitive's parameters shifted past that axis.
#include <string>

#include "smelt/errors.h"
#include "smelt/ops.h"
#include "src/core/node.h"
#include "src/ops/op_utils.h"
#include "src/transforms/rules.h"

namespace smelt::transforms {

namespace {

Shape batched_shape(int64_t b, const Shape& s) {
  Shape r{b};
  r.insert(r.end(), s.begin(), s.end());
  return r;
}

/// `a` with a leading batch axis: the batched value when there is one, else `a` broadcast (a view,
/// no copy) to every example.
Array lift(const Array& a, const Array& batched, int64_t b) {
  if (batched.valid()) return batched;
  return broadcast_to(reshape(a, batched_shape(1, a.shape())), batched_shape(b, a.shape()));
}

/// A batched value of rank 1 + r as rank 1 + `rank` (r <= rank), with size-1 axes inserted after
/// the batch axis, so that right-aligned broadcasting against a rank-`rank` shape keeps the batch
/// axis in front.
Array align_rank(const Array& a, size_t rank) {
  const size_t r = static_cast<size_t>(a.ndim()) - 1;
  if (r == rank) return a;
  Shape s{a.shape(0)};
  s.insert(s.end(), rank - r, 1);
  s.insert(s.end(), a.shape().begin() + 1, a.shape().end());
  return reshape(a, s);
}

template <class V>
std::vector<V> prefixed(V first, const std::vector<V>& rest) {
  std::vector<V> r{first};
  r.insert(r.end(), rest.begin(), rest.end());
  return r;
}

/// Example `i` of a batched value (its batch axis dropped).
Array example(const Array& a, int64_t i) {
  Shape rest(a.shape().begin() + 1, a.shape().end());
  return reshape(slice(a, Axes{0}, {i}, {i + 1}, {1}), rest);
}

/// The fallback for operand combinations with no vectorized form: the primitive applied to each
/// example on its own and the results stacked, so it gives exactly the bits of a loop of unbatched
/// calls (it makes `b` nodes per node, so it is kept to rare cases: batched random keys, batched
/// convolution weights, matmuls with batch axes).
std::vector<Array> loop_rule(const Array& out, const std::vector<Array>& batched, int64_t b) {
  const detail::Node& n = out.node();
  const size_t outputs = n.group ? n.group->shapes.size() : 1;
  std::vector<std::vector<Array>> parts(outputs);
  for (int64_t i = 0; i < b; ++i) {
    std::vector<Array> ins;
    for (size_t k = 0; k < n.inputs.size(); ++k)
      ins.push_back(batched[k].valid() ? example(batched[k], i) : n.inputs[k]);
    std::vector<Array> outs = n.group ? detail::make_multi_output(n.group->shapes, n.group->dtypes, n.device, n.prim, ins)
                                      : std::vector<Array>{make_array(n.shape, n.dtype, n.device, n.prim, ins)};
    for (size_t k = 0; k < outputs; ++k) parts[k].push_back(outs[k]);
  }
  std::vector<Array> result;
  for (size_t k = 0; k < outputs; ++k) {
    const Shape& s = n.group ? n.group->shapes[k] : n.shape;
    const Dtype dt = n.group ? n.group->dtypes[k] : n.dtype;
    result.push_back(b == 0 ? full_value(batched_shape(0, s), Scalar::of_int(0), dt, n.device) : stack(parts[k], 0));
  }
  return result;
}

[[noreturn]] void no_batch_rule(const Array& out, const std::string& why) {
  const auto& n = out.node();
  std::string ins;
  for (const auto& in : n.inputs) ins += (ins.empty() ? "" : ", ") + describe(in);
  throw UnsupportedError("vmap: " + n.prim.str() + " has no batching rule (" + why + "); inputs " + ins +
                         ", output " + describe(out));
}

/// take(a, indices, axis) with batched indices: a gather_nd with one batch axis over `a` with
/// the taken axis moved next to the batch axis, then the taken axes moved back in place.
Array batched_take(const Array& a, const Array& indices, int axis) {
  const int q = indices.ndim() - 1;  // the indices' own rank
  Array front = moveaxis(a, axis + 1, 1);
  Array g = gather_nd(front, expand_dims(indices, -1), 1);  // [B, I..., pre..., post...]
  Axes perm{0};
  for (int i = 0; i < axis; ++i) perm.push_back(1 + q + i);
  for (int i = 0; i < q; ++i) perm.push_back(1 + i);
  for (int i = 1 + q + axis; i < g.ndim(); ++i) perm.push_back(i);
  return transpose(g, perm);
}

/// Conv, ConvTranspose, Pool over a batched input with an unbatched weight: the batch axis folded
/// into the op's own batch axis N.
Array fold_into_n(const Array& out, const Primitive& prim, std::vector<Array> ins, int64_t b) {
  const Shape xs = ins[0].shape();
  Shape folded(xs.begin() + 1, xs.end());
  folded[0] *= b;
  ins[0] = reshape(ins[0], folded);
  Shape os = out.shape();
  os[0] *= b;
  Array r = make_array(os, out.dtype(), out.device(), prim, std::move(ins));
  return reshape(r, batched_shape(b, out.shape()));
}

}  // namespace

Array with_batch_coordinate(const Array& indices) {
  const int64_t b = indices.shape(0);
  Shape col = indices.shape();
  col.back() = 1;
  Shape lead(static_cast<size_t>(indices.ndim()), 1);
  lead[0] = b;
  Array pos = broadcast_to(reshape(to_device(arange(b, indices.dtype()), indices.device()), lead), col);
  return concatenate({pos, indices}, -1);
}

std::vector<Array> batch_rule(const Array& out, const std::vector<Array>& batched, int64_t b) {
  const detail::Node& n = out.node();
  const std::vector<Array>& in = n.inputs;
  auto lifted = [&](size_t i) { return lift(in[i], batched[i], b); };
  auto all_lifted = [&] {
    std::vector<Array> r;
    for (size_t i = 0; i < in.size(); ++i) r.push_back(lifted(i));
    return r;
  };
  auto node = [&](Primitive prim, std::vector<Array> ins) {
    return std::vector<Array>{make_array(batched_shape(b, out.shape()), out.dtype(), out.device(), std::move(prim), std::move(ins))};
  };
  switch (n.prim.kind) {
    case PrimKind::None:
    case PrimKind::Full:
    case PrimKind::Arange: no_batch_rule(out, rule_info(n.prim.kind).batch_note);
    // Element-wise, and Matmul whose operands have equal batch shapes: the same primitive on the
    // lifted operands (their shapes already agree; broadcast operands were expanded by the op).
    case PrimKind::Unary:
    case PrimKind::Binary:
    case PrimKind::Select:
    case PrimKind::Cast:
    case PrimKind::Copy: return node(n.prim, all_lifted());
    case PrimKind::Matmul: {
      // The CPU GEMM's bits depend on its m (BLAS picks kernels by size), and it folds a batch
      // whose right operand is one broadcast matrix into m. A 2-D product stays one GEMM of the
      // same m per example when the right operand is a real batch (an unbatched one is copied per
      // example rather than broadcast); a product with batch axes, which the unbatched call may
      // itself have folded, runs per example.
      // On the GPU, cuBLASLt's heuristic picks the algorithm by the batch count as well: one
      // matmul per example there too.
      if (in[0].ndim() != 2 || out.device().type != Device::Type::Cpu) return loop_rule(out, batched, b);
      if (batched[1].valid()) return node(n.prim, {lifted(0), batched[1]});
      // The copies cost b times the right operand's memory: past kMaxCopy elements (a large
      // weight), one matmul per example reading the one weight is the cheaper exact form.
      constexpr int64_t kMaxCopy = int64_t{1} << 22;
      if (b * in[1].size() > kMaxCopy) return loop_rule(out, batched, b);
      return node(n.prim, {lifted(0), copy(lifted(1))});
    }
    case PrimKind::Reshape:
      return node(make_prim(PrimKind::Reshape, ShapeParams{batched_shape(b, n.prim.get<ShapeParams>().shape)}),
                  {lifted(0)});
    case PrimKind::Transpose: {
      std::vector<int> perm{0};
      for (int p : n.prim.get<PermParams>().perm) perm.push_back(p + 1);
      return node(make_prim(PrimKind::Transpose, PermParams{perm}), {lifted(0)});
    }
    case PrimKind::Broadcast: {
      const Shape& to = n.prim.get<ShapeParams>().shape;
      return node(make_prim(PrimKind::Broadcast, ShapeParams{batched_shape(b, to)}), {align_rank(lifted(0), to.size())});
    }
    case PrimKind::Slice:
    case PrimKind::SliceUpdate: {
      const auto& p = n.prim.get<SliceParams>();
      return node(make_prim(n.prim.kind, SliceParams{prefixed<int64_t>(0, p.start), prefixed<int64_t>(1, p.step)}),
                  all_lifted());
    }
    case PrimKind::Concatenate:
      return node(make_prim(PrimKind::Concatenate, AxisParams{n.prim.get<AxisParams>().axis + 1}), all_lifted());
    case PrimKind::Pad: {
      PadParams p = n.prim.get<PadParams>();
      p.low = prefixed<int64_t>(0, p.low);
      p.high = prefixed<int64_t>(0, p.high);
      return node(make_prim(PrimKind::Pad, p), {lifted(0)});
    }
    case PrimKind::Reduce: {
      ReduceParams p = n.prim.get<ReduceParams>();
      for (int& a : p.axes) ++a;
      return node(make_prim(PrimKind::Reduce, p), {lifted(0)});
    }
    case PrimKind::ArgReduce: {
      ArgReduceParams p = n.prim.get<ArgReduceParams>();
      ++p.axis;
      return node(make_prim(PrimKind::ArgReduce, p), {lifted(0)});
    }
    case PrimKind::Scan: {
      ScanParams p = n.prim.get<ScanParams>();
      ++p.axis;
      return node(make_prim(PrimKind::Scan, p), {lifted(0)});
    }
    case PrimKind::Gather: {
      const int axis = n.prim.get<AxisParams>().axis;
      if (!batched[1].valid()) return node(make_prim(PrimKind::Gather, AxisParams{axis + 1}), {lifted(0), in[1]});
      return {batched_take(lifted(0), batched[1], axis)};
    }
    case PrimKind::GatherElements:
    case PrimKind::Scatter: {
      Primitive p = n.prim;
      if (p.kind == PrimKind::Scatter) {
        ScatterParams s = p.get<ScatterParams>();
        ++s.axis;
        p = make_prim(PrimKind::Scatter, s);
      } else {
        p = make_prim(PrimKind::GatherElements, AxisParams{p.get<AxisParams>().axis + 1});
      }
      return node(p, all_lifted());
    }
    case PrimKind::GatherND:
      return node(make_prim(PrimKind::GatherND, GatherNDParams{n.prim.get<GatherNDParams>().batch_dims + 1}), all_lifted());
    case PrimKind::ScatterND: {
      std::vector<Array> ins = all_lifted();
      ins[1] = with_batch_coordinate(ins[1]);
      return node(n.prim, ins);
    }
    case PrimKind::Sort:
    case PrimKind::ArgSort: {
      SortParams p = n.prim.get<SortParams>();
      ++p.axis;
      return node(make_prim(n.prim.kind, p), {lifted(0)});
    }
    case PrimKind::TopK: {
      TopKParams p = n.prim.get<TopKParams>();
      ++p.axis;
      std::vector<Shape> shapes;
      for (const auto& s : n.group->shapes) shapes.push_back(batched_shape(b, s));
      return detail::make_multi_output(shapes, n.group->dtypes, n.device, make_prim(PrimKind::TopK, p), {lifted(0)});
    }
    case PrimKind::Conv:
    case PrimKind::ConvTranspose:
      // On the GPU cuDNN picks its algorithm by the batch size N too: one convolution per example.
      if (batched[1].valid() || out.device().type != Device::Type::Cpu) return loop_rule(out, batched, b);
      return {fold_into_n(out, n.prim, {lifted(0), in[1]}, b)};
    case PrimKind::Pool: return {fold_into_n(out, n.prim, {lifted(0)}, b)};
    case PrimKind::RandomBits: return loop_rule(out, batched, b);
    case PrimKind::Attention: return loop_rule(out, batched, b);
    case PrimKind::Fused: no_batch_rule(out, rule_info(n.prim.kind).batch_note);
  }
  no_batch_rule(out, "unknown primitive");
}

}  // namespace smelt::transforms
