// Shape rules of the primitives: output shapes from parameters and input shapes, with checks.
#include "src/primitives/shape_rules.h"

#include <algorithm>
#include <functional>
#include <string>

#include "smelt/errors.h"
#include "src/codegen/fused_kernel.h"
#include "src/core/node.h"
#include "src/core/shape_math.h"

namespace smelt {

int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_lo, int64_t pad_hi,
                         int64_t dilation) {
  // Attributes (dilations, pads) come from models: every step is checked.
  int64_t eff = checked_add(checked_mul(dilation, checked_sub(kernel, 1, "conv"), "conv"), 1, "conv");
  int64_t span = checked_sub(checked_add(checked_add(in, pad_lo, "conv"), pad_hi, "conv"), eff, "conv");
  return span < 0 ? 0 : span / stride + 1;
}

int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_lo, int64_t pad_hi,
                         int64_t dilation, bool ceil_mode) {
  int64_t eff = checked_add(checked_mul(dilation, checked_sub(kernel, 1, "pool"), "pool"), 1, "pool");
  int64_t span = checked_sub(checked_add(checked_add(in, pad_lo, "pool"), pad_hi, "pool"), eff, "pool");
  if (span < 0) return 0;
  int64_t n = (ceil_mode ? checked_add(span, stride - 1, "pool") / stride : span / stride) + 1;
  // PyTorch/ONNX: the last window must start inside the input or the left padding.
  if (ceil_mode && checked_mul(n - 1, stride, "pool") >= in + pad_lo) --n;
  return n;
}

int64_t conv_transpose_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_lo, int64_t pad_hi,
                                   int64_t dilation, int64_t output_padding) {
  const char* op = "conv_transpose";
  int64_t grown = checked_mul(in - 1, stride, op);
  int64_t eff = checked_mul(dilation, checked_sub(kernel, 1, op), op);
  int64_t n = checked_sub(checked_sub(grown, pad_lo, op), pad_hi, op);
  return checked_add(checked_add(checked_add(n, eff, op), output_padding, op), 1, op);
}

namespace {

template <class Name>
Shape broadcast_named(const Shape& a, const Shape& b, Name&& name) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw ShapeError(name() + ": shapes " + shape_to_string(a) + " and " + shape_to_string(b) +
                       " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace

Shape broadcast_shape_of(const Shape& a, const Shape& b, const std::string& what) {
  return broadcast_named(a, b, [&] { return what; });
}

Shape broadcast_shape_of(const Shape& a, const Shape& b, const Primitive& prim) {
  return broadcast_named(a, b, [&] { return prim.str(); });
}

Shape scatter_updates_shape(PrimKind kind, const Shape& a, const Shape& indices) {
  if (kind != PrimKind::ScatterND || indices.empty()) return indices;
  Shape out(indices.begin(), indices.end() - 1);
  const int64_t k = indices.back();
  for (int64_t i = std::max<int64_t>(k, 0); i < static_cast<int64_t>(a.size()); ++i) out.push_back(a[i]);
  return out;
}

namespace {

std::string shapes_str(const std::vector<Shape>& shapes) {
  std::string s;
  for (size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + shape_to_string(shapes[i]);
  return s;
}

[[noreturn]] void fail(const Primitive& prim, const std::vector<Shape>& in, const std::string& why) {
  throw ShapeError(prim.str() + ": input shapes " + shapes_str(in) + " do not fit: " + why);
}

void need_inputs(const Primitive& prim, const std::vector<Shape>& in, size_t n) {
  if (in.size() < n) fail(prim, in, "expected " + std::to_string(n) + " inputs");
}

void need_axis(const Primitive& prim, const std::vector<Shape>& in, const Shape& s, int axis) {
  if (axis < 0 || axis >= static_cast<int>(s.size()))
    fail(prim, in, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(s.size()));
}

/// The spatial sizes of a conv-like output, each checked to be at least 1.
void spatial_sizes(const Primitive& prim, const std::vector<Shape>& in, size_t k, Shape& out,
                   const std::function<int64_t(size_t)>& size_at) {
  for (size_t i = 0; i < k; ++i) {
    int64_t n = size_at(i);
    if (n < 1) fail(prim, in, "output size " + std::to_string(n) + " < 1 on spatial axis " + std::to_string(i));
    out.push_back(n);
  }
}

void check_spatial(const Primitive& prim, const std::vector<Shape>& in, const Shape& s, size_t k) {
  if (s.size() != k + 2)
    fail(prim, in, "the input needs rank " + std::to_string(k + 2) + " ([N, C] and " + std::to_string(k) +
                       " spatial axes)");
}

/// The logical [N, C, spatial...] shape of an input in the channel-blocked layout of block `b`
/// ([N, C/b, spatial..., b]; b = 0: row-major, returned as it is).
Shape unblock(const Primitive& prim, const std::vector<Shape>& in, const Shape& s, size_t k, int64_t b) {
  if (b == 0) return s;
  if (b < 0 || s.size() != k + 3 || s.back() != b)
    fail(prim, in, "a channel-blocked input needs rank " + std::to_string(k + 3) + " ending in the block " +
                       std::to_string(b));
  return unblocked_shape(s, b);
}

/// `out` in the channel-blocked layout of block `b` (its channels must be a multiple of b).
Shape block(const Primitive& prim, const std::vector<Shape>& in, const Shape& out, int64_t b) {
  if (b == 0) return out;
  if (b < 0 || out[1] % b != 0)
    fail(prim, in, "the output's " + std::to_string(out[1]) + " channels are not a multiple of the block " +
                       std::to_string(b));
  return blocked_shape(out, b);
}

}  // namespace

std::vector<Shape> infer_output_shapes(const Primitive& prim, const std::vector<Shape>& in,
                                       const std::vector<Shape>& fixed) {
  switch (prim.kind) {
    case PrimKind::None:
      fail(prim, in, "a leaf has no shape rule");
    case PrimKind::Full:
    case PrimKind::Arange:
    case PrimKind::RandomBits:
      return fixed;
    case PrimKind::Reshape: {
      need_inputs(prim, in, 1);
      const Shape& to = prim.get<ShapeParams>().shape;
      if (shape_size(to) != shape_size(in[0]))
        fail(prim, in, "the element counts differ (" + std::to_string(shape_size(in[0])) + " vs " +
                           std::to_string(shape_size(to)) + ")");
      return {to};
    }
    case PrimKind::Broadcast: {
      need_inputs(prim, in, 1);
      const Shape& to = prim.get<ShapeParams>().shape;
      if (broadcast_shape_of(in[0], to, prim) != to) fail(prim, in, "cannot broadcast to " + shape_to_string(to));
      return {to};
    }
    case PrimKind::Slice: {
      need_inputs(prim, in, 1);
      const auto& p = prim.get<SliceParams>();
      if (fixed.size() != 1 || fixed[0].size() != in[0].size() || p.start.size() != in[0].size())
        fail(prim, in, "the slice has another rank");
      for (size_t i = 0; i < in[0].size(); ++i) {
        int64_t len = fixed[0][i];
        if (len == 0) continue;
        int64_t last = checked_add(p.start[i], checked_mul(len - 1, p.step[i], "slice"), "slice");
        if (p.start[i] < 0 || p.start[i] >= in[0][i] || last < 0 || last >= in[0][i])
          fail(prim, in, "axis " + std::to_string(i) + " is too short for the slice");
      }
      return fixed;
    }
    case PrimKind::Unary:
    case PrimKind::Cast:
    case PrimKind::Copy:
    case PrimKind::Scan:
    case PrimKind::Sort:
    case PrimKind::ArgSort:
      need_inputs(prim, in, 1);
      return {in[0]};
    case PrimKind::SliceUpdate:
      need_inputs(prim, in, 1);
      return {in[0]};
    case PrimKind::Scatter:
    case PrimKind::ScatterND: {
      need_inputs(prim, in, 3);
      const Shape &a = in[0], &idx = in[1];
      if (prim.kind == PrimKind::Scatter) {
        int ax = prim.get<ScatterParams>().axis;
        if (idx.size() != a.size()) fail(prim, in, "the indices need the array's rank");
        need_axis(prim, in, a, ax);
        for (size_t i = 0; i < a.size(); ++i)
          if (static_cast<int>(i) != ax && idx[i] > a[i])
            fail(prim, in, "the indices are larger than the array on axis " + std::to_string(i));
      } else if (idx.empty() || idx.back() > static_cast<int64_t>(a.size())) {
        fail(prim, in, "the index depth does not fit the array");
      }
      if (in[2] != scatter_updates_shape(prim.kind, a, idx))
        fail(prim, in, "the updates need the shape " + shape_to_string(scatter_updates_shape(prim.kind, a, idx)));
      return {a};
    }
    case PrimKind::Binary:
    case PrimKind::Select: {
      need_inputs(prim, in, prim.kind == PrimKind::Binary ? 2 : 3);
      Shape s;
      for (auto& x : in) s = broadcast_shape_of(s, x, prim);
      return {s};
    }
    case PrimKind::Fused: {
      Shape s;
      for (auto& x : in) s = broadcast_shape_of(s, x, prim);
      const FusedParams& fp = prim.get<FusedParams>();
      size_t outs = fp.kernel->program.outputs.size();
      if (!codegen::is_row_kernel(fp)) return std::vector<Shape>(outs, s);
      // A row program: per-row outputs have the reduced (trailing) axes set to 1.
      std::vector<Shape> shapes(outs, s);
      for (size_t o = 0; o < outs; ++o)
        if (codegen::row_kernel_output_per_row(fp, o))
          for (size_t d = s.size() - static_cast<size_t>(codegen::row_kernel_reduced_axes(fp)); d < s.size(); ++d) shapes[o][d] = 1;
      return shapes;
    }
    case PrimKind::Transpose: {
      need_inputs(prim, in, 1);
      const auto& perm = prim.get<PermParams>().perm;
      if (perm.size() != in[0].size()) fail(prim, in, "the permutation has another rank");
      Shape out(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) {
        need_axis(prim, in, in[0], perm[i]);
        out[i] = in[0][perm[i]];
      }
      return {out};
    }
    case PrimKind::Concatenate: {
      need_inputs(prim, in, 1);
      int ax = prim.get<AxisParams>().axis;
      need_axis(prim, in, in[0], ax);
      Shape out = in[0];
      for (size_t j = 1; j < in.size(); ++j) {
        if (in[j].size() != out.size()) fail(prim, in, "the ranks differ");
        for (size_t i = 0; i < out.size(); ++i)
          if (static_cast<int>(i) != ax && in[j][i] != out[i])
            fail(prim, in, "axis " + std::to_string(i) + " differs (only axis " + std::to_string(ax) + " may)");
        out[ax] += in[j][ax];
      }
      return {out};
    }
    case PrimKind::Pad: {
      need_inputs(prim, in, 1);
      const auto& p = prim.get<PadParams>();
      if (p.low.size() != in[0].size() || p.high.size() != in[0].size()) fail(prim, in, "the padding has another rank");
      Shape out = in[0];
      for (size_t i = 0; i < out.size(); ++i) {
        if (p.mode == PadMode::Reflect && (p.low[i] > 0 || p.high[i] > 0) && (p.low[i] >= out[i] || p.high[i] >= out[i]))
          fail(prim, in, "reflect padding needs axis " + std::to_string(i) + " longer than the padding");
        if (p.mode == PadMode::Edge && out[i] == 0 && (p.low[i] > 0 || p.high[i] > 0))
          fail(prim, in, "edge padding cannot extend the empty axis " + std::to_string(i));
        out[i] += p.low[i] + p.high[i];
      }
      return {out};
    }
    case PrimKind::Reduce: {
      need_inputs(prim, in, 1);
      Shape out = in[0];
      for (int ax : prim.get<ReduceParams>().axes) {
        need_axis(prim, in, out, ax);
        out[ax] = 1;
      }
      return {out};
    }
    case PrimKind::ArgReduce: {
      need_inputs(prim, in, 1);
      int ax = prim.get<ArgReduceParams>().axis;
      need_axis(prim, in, in[0], ax);
      if (in[0][ax] == 0) fail(prim, in, "the reduced axis is empty");
      Shape out = in[0];
      out[ax] = 1;
      return {out};
    }
    case PrimKind::Matmul: {
      need_inputs(prim, in, 2);
      const auto& p = prim.get<MatmulParams>();
      const Shape& a = in[0];
      const Shape& b = p.packed_b.empty() ? in[1] : Shape(p.packed_b);
      if (a.size() < 2 || b.size() < 2) fail(prim, in, "both operands need rank 2 or more");
      if (a.back() != b[b.size() - 2])
        fail(prim, in, "the inner dimensions differ (" + std::to_string(a.back()) + " != " +
                           std::to_string(b[b.size() - 2]) + ")");
      Shape out = broadcast_shape_of(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), prim);
      out.push_back(a[a.size() - 2]);
      out.push_back(b.back());
      return {out};
    }
    case PrimKind::Attention: {
      const auto& p = prim.get<AttentionParams>();
      need_inputs(prim, in, p.mask == AttentionMaskKind::None ? 3 : 4);
      const Shape &q = in[0], &k = in[1], &v = in[2];
      if (q.size() != 4 || k.size() != 4 || v.size() != 4) fail(prim, in, "q, k and v need rank 4");
      if (k[0] != q[0] || v[0] != q[0] || v[1] != k[1] || v[2] != k[2] || k[3] != q[3])
        fail(prim, in, "q [B, Hq, S, D], k [B, Hkv, T, D] and v [B, Hkv, T, Dv] do not agree");
      if (k[1] == 0 ? q[1] != 0 : q[1] % k[1] != 0) fail(prim, in, "the query heads are not a multiple of the key heads");
      if (p.mask != AttentionMaskKind::None && in[3] != Shape{q[0], q[1], q[2], k[2]})
        fail(prim, in, "the mask must be [B, Hq, S, T]");
      return {Shape{q[0], q[1], q[2], v[3]}};
    }
    case PrimKind::Gather: {
      need_inputs(prim, in, 2);
      int ax = prim.get<AxisParams>().axis;
      need_axis(prim, in, in[0], ax);
      Shape out(in[0].begin(), in[0].begin() + ax);
      out.insert(out.end(), in[1].begin(), in[1].end());
      out.insert(out.end(), in[0].begin() + ax + 1, in[0].end());
      return {out};
    }
    case PrimKind::GatherElements: {
      need_inputs(prim, in, 2);
      int ax = prim.get<AxisParams>().axis;
      if (in[0].size() != in[1].size()) fail(prim, in, "the indices need the array's rank");
      need_axis(prim, in, in[0], ax);
      for (size_t i = 0; i < in[0].size(); ++i)
        if (static_cast<int>(i) != ax && in[0][i] != in[1][i])
          fail(prim, in, "axis " + std::to_string(i) + " of the indices differs from the array's");
      return {in[1]};
    }
    case PrimKind::GatherND: {
      need_inputs(prim, in, 2);
      const int batch = prim.get<GatherNDParams>().batch_dims;
      const Shape &a = in[0], &idx = in[1];
      if (idx.empty()) fail(prim, in, "the indices need at least one axis");
      const int64_t k = idx.back();
      if (batch < 0 || batch >= static_cast<int>(std::min(a.size(), idx.size())) ||
          k > static_cast<int64_t>(a.size()) - batch)
        fail(prim, in, "the index depth " + std::to_string(k) + " does not fit");
      for (int i = 0; i < batch; ++i)
        if (a[i] != idx[i]) fail(prim, in, "the batch axes differ");
      Shape out(idx.begin(), idx.end() - 1);
      out.insert(out.end(), a.begin() + batch + k, a.end());
      return {out};
    }
    case PrimKind::TopK: {
      need_inputs(prim, in, 1);
      const auto& p = prim.get<TopKParams>();
      need_axis(prim, in, in[0], p.axis);
      if (p.k > in[0][p.axis])
        fail(prim, in, "k = " + std::to_string(p.k) + " exceeds the size " + std::to_string(in[0][p.axis]) +
                           " of axis " + std::to_string(p.axis));
      Shape out = in[0];
      out[p.axis] = p.k;
      return {out, out};
    }
    case PrimKind::Conv: {
      const auto& p = prim.get<ConvParams>();
      need_inputs(prim, in, 2 + p.adds.size());
      const Shape& w = p.packed_weight.empty() ? in[1] : p.packed_weight;
      const size_t k = p.strides.size();
      const Shape x = unblock(prim, in, in[0], k, p.src_block);
      check_spatial(prim, in, x, k);
      if (w.size() != x.size()) fail(prim, in, "the weight needs the input's rank");
      if (checked_mul(w[1], p.groups, "conv") != x[1])
        fail(prim, in, "the weight expects " + std::to_string(w[1] * p.groups) + " input channels, the input has " +
                           std::to_string(x[1]));
      Shape out{x[0], w[0]};
      spatial_sizes(prim, in, k, out, [&](size_t i) {
        return conv_output_size(x[i + 2], w[i + 2], p.strides[i], p.padding_lo[i], p.padding_hi[i], p.dilations[i]);
      });
      return {block(prim, in, out, p.dst_block)};
    }
    case PrimKind::ConvTranspose: {
      need_inputs(prim, in, 2);
      const auto& p = prim.get<ConvTransposeParams>();
      const Shape &x = in[0], &w = in[1];
      const size_t k = p.strides.size();
      check_spatial(prim, in, x, k);
      if (w.size() != x.size()) fail(prim, in, "the weight needs the input's rank");
      if (w[0] != x[1])
        fail(prim, in, "the weight expects " + std::to_string(w[0]) + " input channels, the input has " +
                           std::to_string(x[1]));
      Shape out{x[0], checked_mul(w[1], p.groups, "conv_transpose")};
      spatial_sizes(prim, in, k, out, [&](size_t i) {
        return conv_transpose_output_size(x[i + 2], w[i + 2], p.strides[i], p.padding_lo[i], p.padding_hi[i],
                                          p.dilations[i], p.output_padding[i]);
      });
      return {out};
    }
    case PrimKind::Pool: {
      const auto& p = prim.get<PoolParams>();
      need_inputs(prim, in, p.epilogue_add == PoolEpilogueAdd::None ? 1 : 2);
      const size_t k = p.kernel.size();
      const Shape x = unblock(prim, in, in[0], k, p.block);
      check_spatial(prim, in, x, k);
      Shape out{x[0], x[1]};
      spatial_sizes(prim, in, k, out, [&](size_t i) {
        return pool_output_size(x[i + 2], p.kernel[i], p.strides[i], p.padding_lo[i], p.padding_hi[i], p.dilations[i],
                                p.ceil_mode);
      });
      return {block(prim, in, out, p.block)};
    }
  }
  fail(prim, in, "unknown primitive");
}

}  // namespace smelt
