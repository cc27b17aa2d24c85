// The vjp and jvp rule of every primitive kind, written with public ops so they run on every device,
// compile like any other graph and can be differentiated again (higher order).
#include "src/transforms/rules.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "smelt/errors.h"
#include "smelt/transforms.h"
#include "src/core/node.h"
#include "src/ops/attention.h"
#include "src/ops/op_utils.h"

namespace smelt::transforms {

namespace {

[[noreturn]] void no_rule(const Array& out, const char* mode, const std::string& why) {
  const auto& n = out.node();
  std::string ins;
  for (const auto& in : n.inputs) ins += (ins.empty() ? "" : ", ") + describe(in);
  throw UnsupportedError(std::string(mode) + ": " + n.prim.str() + " has no " + mode + " rule (" + why +
                         "); inputs " + ins + ", output " + describe(out) +
                         ". Wrap the value in stop_gradient if no gradient should flow through it.");
}

Array zeros_of(const Array& like) { return zeros_like(like); }
Array zeros_shaped(const Shape& shape, Dtype dtype, Device device) {
  return full_value(shape, Scalar::of_int(0), dtype, device);
}

Array same_prim(const Array& out, std::vector<Array> inputs) {
  return make_array(out.shape(), out.dtype(), out.device(), out.node().prim, std::move(inputs));
}

/// Tangents with the missing (zero) ones made explicit, for rules that apply the primitive itself.
std::vector<Array> dense(const std::vector<Array>& tangents, const std::vector<Array>& inputs) {
  std::vector<Array> out(tangents.size());
  for (size_t i = 0; i < tangents.size(); ++i) out[i] = tangents[i].valid() ? tangents[i] : zeros_of(inputs[i]);
  return out;
}

Array slice_node(const Array& a, Shape shape, std::vector<int64_t> start, std::vector<int64_t> step) {
  return make_array(std::move(shape), a.dtype(), a.device(),
                    make_prim(PrimKind::Slice, SliceParams{std::move(start), std::move(step)}), {a});
}

Array slice_update_node(const Array& a, const Array& update, const SliceParams& p) {
  return make_array(a.shape(), a.dtype(), a.device(), make_prim(PrimKind::SliceUpdate, p), {a, update});
}

Array as(const Array& mask, Dtype dtype) { return astype(mask, dtype); }

// ---- Element-wise derivatives (shared by vjp and jvp) -----------------------------------------

/// d out / d x of a unary op; an empty handle for ops whose derivative is zero.
Array unary_derivative(UnaryOp op, const Array& x, const Array& out) {
  constexpr double ln2 = std::numbers::ln2, ln10 = std::numbers::ln10;
  switch (op) {
    case UnaryOp::Abs: return sign(x);
    case UnaryOp::Negative: return full_value(x.shape(), Scalar::of_int(-1), x.dtype(), x.device());
    case UnaryOp::Square: return x * 2.0;
    case UnaryOp::Reciprocal: return -(out * out);
    case UnaryOp::Sqrt: return 0.5 / out;
    case UnaryOp::Rsqrt: return out / x * -0.5;
    case UnaryOp::Exp: return out;
    case UnaryOp::Exp2: return out * ln2;
    case UnaryOp::Expm1: return out + 1.0;
    case UnaryOp::Log: return reciprocal(x);
    case UnaryOp::Log2: return reciprocal(x * ln2);
    case UnaryOp::Log10: return reciprocal(x * ln10);
    case UnaryOp::Log1p: return reciprocal(x + 1.0);
    case UnaryOp::Sin: return cos(x);
    case UnaryOp::Cos: return -sin(x);
    case UnaryOp::Tan: return out * out + 1.0;
    case UnaryOp::Asin: return rsqrt(1.0 - x * x);
    case UnaryOp::Acos: return -rsqrt(1.0 - x * x);
    case UnaryOp::Atan: return reciprocal(x * x + 1.0);
    case UnaryOp::Sinh: return cosh(x);
    case UnaryOp::Cosh: return sinh(x);
    case UnaryOp::Tanh: return 1.0 - out * out;
    case UnaryOp::Asinh: return rsqrt(x * x + 1.0);
    case UnaryOp::Acosh: return rsqrt(x * x - 1.0);
    case UnaryOp::Atanh: return reciprocal(1.0 - x * x);
    case UnaryOp::Erf: return exp(-(x * x)) * (2.0 / std::sqrt(std::numbers::pi));
    case UnaryOp::ErfInv: return exp(out * out) * (std::sqrt(std::numbers::pi) / 2.0);
    case UnaryOp::Sigmoid: return out * (1.0 - out);
    case UnaryOp::Relu: return as(x > 0.0, x.dtype());
    // Piecewise constant: the derivative is zero wherever it exists (JAX and MLX agree).
    case UnaryOp::Sign:
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
    case UnaryOp::Round:
    // Bool or integer outputs carry no gradient.
    case UnaryOp::IsNan:
    case UnaryOp::IsInf:
    case UnaryOp::IsFinite:
    case UnaryOp::LogicalNot:
    case UnaryOp::BitwiseNot: return Array();
  }
  return Array();
}

/// d out / d x and d out / d y of a binary op (empty handles for zero derivatives).
std::pair<Array, Array> binary_derivatives(BinaryOp op, const Array& x, const Array& y, const Array& out) {
  switch (op) {
    case BinaryOp::Add: return {ones_like(out), ones_like(out)};
    case BinaryOp::Subtract: return {ones_like(out), -ones_like(out)};
    case BinaryOp::Multiply: return {y, x};
    case BinaryOp::Divide: return {reciprocal(y), -(out / y)};
    case BinaryOp::Remainder: return {ones_like(out), -floor_divide(x, y)};
    // fmod(x, y) = x - trunc(x / y) * y.
    case BinaryOp::Fmod: return {ones_like(out), -((x - out) / y)};
    case BinaryOp::Power: {
      // d/dy = x^y log x; taken as 0 at x = 0 (where x^y is 0 or 1 for y > 0), as JAX does.
      Array dy = where(x == 0.0, zeros_of(out), out * log(x));
      return {y * power(x, y - 1.0), dy};
    }
    // Ties send half the gradient to each side (JAX); NaN inputs are not separated.
    case BinaryOp::Maximum: {
      Array dx = where(x > y, ones_like(out), where(x == y, full_value(out.shape(), Scalar::of_float(0.5), out.dtype(), out.device()), zeros_of(out)));
      return {dx, 1.0 - dx};
    }
    case BinaryOp::Minimum: {
      Array dx = where(x < y, ones_like(out), where(x == y, full_value(out.shape(), Scalar::of_float(0.5), out.dtype(), out.device()), zeros_of(out)));
      return {dx, 1.0 - dx};
    }
    case BinaryOp::Atan2: {
      Array r = x * x + y * y;
      return {y / r, -(x / r)};
    }
    // Piecewise constant (floor_divide) or integer / bool results.
    case BinaryOp::FloorDivide:
    case BinaryOp::Equal:
    case BinaryOp::NotEqual:
    case BinaryOp::Less:
    case BinaryOp::LessEqual:
    case BinaryOp::Greater:
    case BinaryOp::GreaterEqual:
    case BinaryOp::LogicalAnd:
    case BinaryOp::LogicalOr:
    case BinaryOp::LogicalXor:
    case BinaryOp::BitwiseAnd:
    case BinaryOp::BitwiseOr:
    case BinaryOp::BitwiseXor:
    case BinaryOp::LeftShift:
    case BinaryOp::RightShift: return {Array(), Array()};
  }
  return {Array(), Array()};
}

// ---- Reductions ---------------------------------------------------------------------------------

int64_t reduced_count(const Shape& shape, const std::vector<int>& axes) {
  int64_t n = 1;
  for (int a : axes) n *= shape[static_cast<size_t>(a)];
  return n;
}

/// The product of every other element of each reduced group, shaped like x: exclusive cumulative
/// products from both ends, so zeros in x are handled exactly (no division by x).
Array prod_partials(const Array& x, const std::vector<int>& axes) {
  const int r = x.ndim();
  Axes perm;
  std::vector<bool> reduced(static_cast<size_t>(r), false);
  for (int a : axes) reduced[static_cast<size_t>(a)] = true;
  for (int i = 0; i < r; ++i)
    if (!reduced[static_cast<size_t>(i)]) perm.push_back(i);
  Shape kept_shape;
  for (int i : perm) kept_shape.push_back(x.shape(i));
  for (int a : axes) perm.push_back(a);
  Array t = transpose(x, perm);
  Shape flat = kept_shape;
  flat.push_back(reduced_count(x.shape(), axes));
  Array f = reshape(t, flat);
  const int last = static_cast<int>(flat.size()) - 1;
  Array p = cumprod(f, last, false, true) * cumprod(f, last, true, true);
  Axes inverse(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) inverse[static_cast<size_t>(perm[static_cast<size_t>(i)])] = i;
  return transpose(reshape(p, t.shape()), inverse);
}

/// d out / d x of a max or min reduction: the tied extremes share the gradient equally (JAX, MLX).
Array extreme_partials(const Array& x, const Array& out, const std::vector<int>& axes) {
  Array mask = as(x == out, x.dtype());
  Axes ax(axes.begin(), axes.end());
  return mask / sum(mask, ax, true);
}

Array reduce_partials(const ReduceParams& p, const Array& x, const Array& out) {
  switch (p.op) {
    case ReduceOp::Sum: return ones_like(x);
    case ReduceOp::Mean: {
      int64_t n = reduced_count(x.shape(), p.axes) - p.ddof;
      return full_value(x.shape(), Scalar::of_float(1.0 / static_cast<double>(n > 0 ? n : 0)), x.dtype(), x.device());
    }
    case ReduceOp::Prod: return prod_partials(x, p.axes);
    case ReduceOp::Max:
    case ReduceOp::Min: return extreme_partials(x, out, p.axes);
    case ReduceOp::All:
    case ReduceOp::Any: return Array();  // bool outputs
  }
  return Array();
}

// ---- Indexing helpers ---------------------------------------------------------------------------

/// Cotangent of take's input: the output's cotangent added back at the taken positions.
Array take_vjp(const Array& a, const Array& indices, const Array& g, int axis) {
  Shape idx_flat = {indices.size()};
  Shape g_shape(a.shape().begin(), a.shape().begin() + axis);
  g_shape.push_back(indices.size());
  g_shape.insert(g_shape.end(), a.shape().begin() + axis + 1, a.shape().end());
  Array gr = reshape(g, g_shape);
  Shape idx_shape(static_cast<size_t>(a.ndim()), 1);
  idx_shape[static_cast<size_t>(axis)] = indices.size();
  Array idx = broadcast_to(reshape(indices, idx_shape), g_shape);
  return scatter(zeros_of(a), idx, gr, axis, ScatterReduce::Add);
}

/// g restricted to the positions a ScatterElements with `indices` writes to (all axes but `axis`
/// start at 0 and have the indices' length), then gathered along `axis`.
Array scatter_updates_cotangent(const Array& g, const Array& indices, int axis) {
  std::vector<int64_t> start(static_cast<size_t>(g.ndim()), 0), step(static_cast<size_t>(g.ndim()), 1);
  Shape shape = indices.shape();
  shape[static_cast<size_t>(axis)] = g.shape(axis);
  Array gs = shape == g.shape() ? g : slice_node(g, shape, start, step);
  return take_along_axis(gs, indices, axis);
}

// ---- Convolution ---------------------------------------------------------------------------------

/// R[a, b, k...] = Σ_{n, p} in[n, a, k·dil + p·stride - lo] · cot[n, b, p]: the correlation of an
/// input with a cotangent that gives a convolution's weight gradient. It is itself a convolution
/// of inᵀ [A, N, ...] with cotᵀ [B, N, ...], with stride and dilation swapped; the result is cut to
/// the kernel's size `kernel`.
Array weight_correlation(const Array& in, const Array& cot, const std::vector<int64_t>& stride,
                         const std::vector<int64_t>& dil, const std::vector<int64_t>& lo,
                         const std::vector<int64_t>& hi, const Shape& kernel) {
  ConvOptions o{dil, lo, hi, stride, 1};
  Array r = conv(swapaxes(in, 0, 1), swapaxes(cot, 0, 1), o);
  Shape want = {r.shape(0), r.shape(1)};
  want.insert(want.end(), kernel.begin(), kernel.end());
  if (r.shape() == want) return r;
  return slice_node(r, want, std::vector<int64_t>(want.size(), 0), std::vector<int64_t>(want.size(), 1));
}

/// The weight gradient group by group: channels of `in` and `cot` split into `groups` blocks, each
/// block's [in_ch, cot_ch, K] correlation transposed to [cot_ch, in_ch, K], stacked along axis 0.
Array grouped_weight_grad(const Array& in, const Array& cot, int64_t groups, const std::vector<int64_t>& stride,
                          const std::vector<int64_t>& dil, const std::vector<int64_t>& lo,
                          const std::vector<int64_t>& hi, const Shape& kernel) {
  auto block = [&](const Array& a, int64_t gi) {
    if (groups == 1) return a;
    const int64_t c = a.shape(1) / groups;
    Shape shape = a.shape();
    shape[1] = c;
    std::vector<int64_t> start(shape.size(), 0), step(shape.size(), 1);
    start[1] = gi * c;
    return slice_node(a, shape, start, step);
  };
  std::vector<Array> parts;
  for (int64_t gi = 0; gi < groups; ++gi)
    parts.push_back(swapaxes(weight_correlation(block(in, gi), block(cot, gi), stride, dil, lo, hi, kernel), 0, 1));
  return groups == 1 ? parts[0] : concatenate(parts, 0);
}

/// `a` cut to `shape` from the origin (an adjoint's output can be longer than the input when the
/// forward op dropped trailing positions).
Array crop_to(const Array& a, const Shape& shape) {
  if (a.shape() == shape) return a;
  return slice_node(a, shape, std::vector<int64_t>(shape.size(), 0), std::vector<int64_t>(shape.size(), 1));
}

/// The adjoint of reflect or edge padding along one axis: the interior of `g` plus the padded
/// positions added back onto the elements they copied (edge: the first/last element; reflect:
/// elements 1..low and n-1-high..n-2, in reverse order). Padding's index map is separable, so the
/// adjoint over all axes is this applied axis by axis.
Array pad_axis_adjoint(const Array& g, int axis, int64_t low, int64_t high, int64_t n, PadMode mode) {
  const size_t ax = static_cast<size_t>(axis);
  auto part = [&](int64_t start, int64_t len, int64_t step) {
    Shape shape = g.shape();
    shape[ax] = len;
    std::vector<int64_t> st(shape.size(), 0), sp(shape.size(), 1);
    st[ax] = start;
    sp[ax] = step;
    return slice_node(g, shape, st, sp);
  };
  auto place = [&](const Array& a, int64_t before, int64_t after) {
    std::vector<std::pair<int64_t, int64_t>> width(static_cast<size_t>(g.ndim()), {0, 0});
    width[ax] = {before, after};
    return pad(a, width);
  };
  const bool edge = mode == PadMode::Edge;
  Array r = part(low, n, 1);
  if (low > 0)
    r = r + (edge ? place(sum(part(0, low, 1), {axis}, true), 0, n - 1) : place(part(low - 1, low, -1), 1, n - 1 - low));
  if (high > 0)
    r = r + (edge ? place(sum(part(low + n, high, 1), {axis}, true), n - 1, 0)
                  : place(part(low + n + high - 1, high, -1), n - 1 - high, 1));
  return r;
}

/// Max pooling seen as one strided view of the (-inf padded) input per kernel offset: `hits[j]`
/// marks the windows whose max is the value offset j reads, and `count` the tied maxima per
/// window, which share the window's gradient equally (as for max reductions).
struct MaxPoolWindows {
  std::vector<std::pair<int64_t, int64_t>> width;  // the padding, right side extended for ceil_mode
  Shape padded;
  std::vector<SliceParams> views;
  std::vector<Array> hits;
  Array count;
};

MaxPoolWindows max_pool_windows(const Array& x, const Array& out, const PoolParams& p) {
  MaxPoolWindows w;
  const size_t k = p.kernel.size();
  w.width = {{0, 0}, {0, 0}};
  w.padded = {x.shape(0), x.shape(1)};
  for (size_t i = 0; i < k; ++i) {
    const int64_t size = x.shape(static_cast<int>(i) + 2), windows = out.shape(static_cast<int>(i) + 2);
    const int64_t reach = (windows - 1) * p.strides[i] + p.dilations[i] * (p.kernel[i] - 1) + 1;
    const int64_t hi = p.padding_hi[i] + std::max<int64_t>(0, reach - (size + p.padding_lo[i] + p.padding_hi[i]));
    w.width.push_back({p.padding_lo[i], hi});
    w.padded.push_back(size + p.padding_lo[i] + hi);
  }
  Array xp = pad(x, w.width, PadMode::Constant, full_value({}, Scalar::of_float(-INFINITY), x.dtype(), Device::cpu()));
  std::vector<int64_t> offset(k, 0);
  for (bool more = true; more;) {
    SliceParams v{{0, 0}, {1, 1}};
    for (size_t i = 0; i < k; ++i) {
      v.start.push_back(offset[i] * p.dilations[i]);
      v.step.push_back(p.strides[i]);
    }
    w.hits.push_back(as(slice_node(xp, out.shape(), v.start, v.step) == out, x.dtype()));
    w.count = w.count.valid() ? w.count + w.hits.back() : w.hits.back();
    w.views.push_back(std::move(v));
    more = false;
    for (size_t i = k; i-- > 0;) {
      if (++offset[i] < p.kernel[i]) {
        more = true;
        break;
      }
      offset[i] = 0;
    }
  }
  return w;
}

Array max_pool_vjp(const Array& x, const Array& out, const Array& g, const PoolParams& p) {
  MaxPoolWindows w = max_pool_windows(x, out, p);
  Array share = g / w.count;
  Array gp;
  for (size_t j = 0; j < w.views.size(); ++j) {
    Array part = slice_update_node(zeros_shaped(w.padded, x.dtype(), x.device()), share * w.hits[j], w.views[j]);
    gp = gp.valid() ? gp + part : part;
  }
  std::vector<int64_t> start = {0, 0}, step(w.padded.size(), 1);
  for (size_t i = 0; i < p.kernel.size(); ++i) start.push_back(p.padding_lo[i]);
  return slice_node(gp, x.shape(), start, step);
}

Array max_pool_jvp(const Array& x, const Array& out, const Array& t, const PoolParams& p) {
  MaxPoolWindows w = max_pool_windows(x, out, p);
  Array tp = pad(t, w.width);
  Array r;
  for (size_t j = 0; j < w.views.size(); ++j) {
    Array part = slice_node(tp, out.shape(), w.views[j].start, w.views[j].step) * w.hits[j];
    r = r.valid() ? r + part : part;
  }
  return r / w.count;
}

/// W[..., i, j] = d y_i / d x_j of cummax/cummin along the last axis: 1/count over the tied
/// extremes x_j == y_i among the positions the prefix (suffix when reversed) i covers. An n×n
/// weight per row, built with public ops so it runs on every device.
Array scan_extreme_weights(const Array& xm, const Array& ym, bool reverse, bool exclusive) {
  const int64_t n = xm.shape(-1);
  Array i = reshape(arange(n, int64), {n, 1}), j = reshape(arange(n, int64), {1, n});
  // An exclusive scan's prefix stops before i; its first output (the identity) covers nothing and
  // gets no gradient (the count is clamped to 1 so that row is 0, not 0/0).
  Array covered = reverse ? (exclusive ? j > i : j >= i) : (exclusive ? j < i : j <= i);
  Array m = astype(logical_and(expand_dims(xm, -2) == expand_dims(ym, -1), covered), xm.dtype());
  return m / maximum(sum(m, {-1}, true), ones_like(m));
}

// ---- Rules added with vmap (kept together: scatter reductions, batched gather_nd, cropping pads) --

/// Where a Scatter (`nd` false, along `axis`) or ScatterND writes: reading the values there, and
/// scattering values into a base, so one rule serves both primitives.
struct ScatterSites {
  Array indices;
  int axis;
  bool nd;
  Array gather(const Array& x) const { return nd ? gather_nd(x, indices) : scatter_updates_cotangent(x, indices, axis); }
  Array scatter_into(const Array& base, const Array& values, ScatterReduce reduce) const {
    return nd ? scatter_nd(base, indices, values, reduce) : scatter(base, indices, values, axis, reduce);
  }
};

/// The derivative pieces of a mul/max/min scatter `out` of array `a` and updates `u`.
struct ScatterReducePartials {
  Array prod_updates;  // mul: the product of the updates written to each position (1 elsewhere)
  Array hit_a, hit_u;  // max/min: 1 where the array's / an update's value is the result
  Array count;         // max/min: the number of tied extremes per position
};

ScatterReducePartials scatter_reduce_partials(ScatterReduce reduce, const ScatterSites& at, const Array& a,
                                              const Array& u, const Array& out) {
  ScatterReducePartials r;
  switch (reduce) {
    case ScatterReduce::Mul: r.prod_updates = at.scatter_into(ones_like(a), u, ScatterReduce::Mul); return r;
    case ScatterReduce::Max:
    case ScatterReduce::Min:
      r.hit_a = as(a == out, a.dtype());
      r.hit_u = as(u == at.gather(out), u.dtype());
      r.count = r.hit_a + at.scatter_into(zeros_of(a), r.hit_u, ScatterReduce::Add);
      return r;
    case ScatterReduce::Assign:
    case ScatterReduce::Add: return r;
  }
  return r;
}

/// vjp of a mul/max/min scatter: mul sends g times the other factors to each (the updates' share
/// divides out by the update, which must be non-zero, as for cumprod); max/min send g to the tied
/// extremes, split equally, as max reductions do.
void scatter_reduce_vjp(ScatterReduce reduce, const ScatterSites& at, const std::vector<Array>& in, const Array& out,
                        const Array& g, std::vector<Array>& cts) {
  ScatterReducePartials d = scatter_reduce_partials(reduce, at, in[0], in[2], out);
  if (reduce == ScatterReduce::Mul) {
    cts[0] = g * d.prod_updates;
    cts[2] = at.gather(g * out) / in[2];
    return;
  }
  Array share = g / d.count;
  cts[0] = share * d.hit_a;
  cts[2] = at.gather(share) * d.hit_u;
}

Array scatter_reduce_jvp(ScatterReduce reduce, const ScatterSites& at, const std::vector<Array>& in, const Array& out,
                         const std::vector<Array>& t) {
  ScatterReducePartials d = scatter_reduce_partials(reduce, at, in[0], in[2], out);
  const Array ta = t[0].valid() ? t[0] : zeros_of(in[0]);
  const Array tu = t[2].valid() ? t[2] : zeros_of(in[2]);
  if (reduce == ScatterReduce::Mul) return ta * d.prod_updates + out * at.scatter_into(zeros_of(in[0]), tu / in[2], ScatterReduce::Add);
  return (ta * d.hit_a + at.scatter_into(zeros_of(in[0]), tu * d.hit_u, ScatterReduce::Add)) / d.count;
}

/// vjp of gather_nd: scatter_nd-add; with batch_dims > 0 the batch axes of the array, indices and
/// cotangent are flattened into one whose position becomes a leading index coordinate.
Array gather_nd_vjp(const Array& a, const Array& indices, const Array& g, int batch_dims) {
  if (batch_dims == 0) return scatter_nd(zeros_of(a), indices, g, ScatterReduce::Add);
  const size_t bd = static_cast<size_t>(batch_dims);
  int64_t flat = 1;
  for (size_t i = 0; i < bd; ++i) flat *= a.shape()[i];
  auto flattened = [&](const Shape& s) {
    Shape r{flat};
    r.insert(r.end(), s.begin() + static_cast<std::ptrdiff_t>(bd), s.end());
    return r;
  };
  Array idx = with_batch_coordinate(reshape(indices, flattened(indices.shape())));
  Array r = scatter_nd(zeros_shaped(flattened(a.shape()), a.dtype(), a.device()), idx,
                       reshape(g, flattened(g.shape())), ScatterReduce::Add);
  return reshape(r, a.shape());
}

/// The adjoint of padding with negative (cropping) widths, in any mode. Padding is separable:
/// output position o of an axis reads input position source(o - low) (or the constant), so along
/// each axis the adjoint takes the output positions that read the input and scatter-adds them onto
/// the positions they read.
Array cropping_pad_adjoint(const Array& g, const PadParams& p, const Shape& in_shape) {
  Array r = g;
  for (int d = 0; d < g.ndim(); ++d) {
    const size_t i = static_cast<size_t>(d);
    if (p.low[i] == 0 && p.high[i] == 0) continue;
    const int64_t n = in_shape[i];
    std::vector<int64_t> read, from;
    for (int64_t o = 0; o < r.shape(d); ++o) {
      int64_t x = o - p.low[i];
      if (x < 0 || x >= n) {
        switch (p.mode) {
          case PadMode::Constant: continue;
          case PadMode::Reflect: x = x < 0 ? -x : 2 * (n - 1) - x; break;
          case PadMode::Edge: x = x < 0 ? 0 : n - 1; break;
        }
      }
      read.push_back(o);
      from.push_back(x);
    }
    Shape s = r.shape();
    s[i] = n;
    const int64_t k = static_cast<int64_t>(read.size());
    Array kept = take(r, to_device(Array(read, {k}), g.device()), d);
    r = take_vjp(zeros_shaped(s, g.dtype(), g.device()), to_device(Array(from, {k}), g.device()), kept, d);
  }
  return r;
}

}  // namespace

Array unbroadcast(const Array& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const size_t lead = g.shape().size() - shape.size();
  Axes axes;
  for (size_t i = 0; i < g.shape().size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && g.shape()[i] != 1)) axes.push_back(static_cast<int>(i));
  Array s = axes.empty() ? g : sum(g, axes, true);
  return reshape(s, shape);
}

const char* rule_name(Rule rule) {
  switch (rule) {
    case Rule::Full: return "rule";
    case Rule::Partial: return "partial";
    case Rule::Loop: return "loop";
    case Rule::Zero: return "zero";
    case Rule::NoInputs: return "no inputs";
    case Rule::None: return "none";
  }
  return "?";
}

RuleInfo rule_info(PrimKind kind) {
  using R = Rule;
  // Batching notes shared by several kinds.
  constexpr const char* same_op = "the same primitive on the lifted operands";
  constexpr const char* shifted = "the same primitive, its axes shifted past the batch axis";
  switch (kind) {
    case PrimKind::None:
      return {R::NoInputs, R::NoInputs, "a leaf: the walk stops at it", R::NoInputs, "a leaf: the same for every example"};
    case PrimKind::Full:
      return {R::NoInputs, R::NoInputs, "a constant", R::NoInputs, "a constant: the same for every example"};
    case PrimKind::Arange:
      return {R::NoInputs, R::NoInputs, "a constant", R::NoInputs, "a constant: the same for every example"};
    case PrimKind::Unary:
      return {R::Full, R::Full,
              "derivative times the cotangent; sign/floor/ceil/round give zero, bool/integer results none", R::Full,
              same_op};
    case PrimKind::Binary:
      return {R::Full, R::Full,
              "partials, summed back over broadcast axes; max/min split ties in half; floor_divide, "
              "comparisons, logical and bitwise ops give zero",
              R::Full, same_op};
    case PrimKind::Select:
      return {R::Full, R::Full, "the cotangent goes to the chosen branch; none to the condition", R::Full, same_op};
    case PrimKind::Cast:
      return {R::Full, R::Full, "the cotangent cast back to the input dtype (none for integer inputs)", R::Full, same_op};
    case PrimKind::Copy: return {R::Full, R::Full, "identity", R::Full, same_op};
    case PrimKind::Reshape: return {R::Full, R::Full, "reshape back", R::Full, "the batch axis prepended to the shape"};
    case PrimKind::Transpose: return {R::Full, R::Full, "inverse permutation", R::Full, shifted};
    case PrimKind::Broadcast:
      return {R::Full, R::Full, "sum over the broadcast axes", R::Full,
              "size-1 axes inserted after the batch axis, then the broadcast with the batch axis prepended"};
    case PrimKind::Slice:
      return {R::Full, R::Full, "the cotangent placed into zeros (slice_update)", R::Full, shifted};
    case PrimKind::SliceUpdate:
      return {R::Full, R::Full, "array: the cotangent with the region zeroed; update: the region", R::Full, shifted};
    case PrimKind::Concatenate: return {R::Full, R::Full, "slices of the cotangent", R::Full, shifted};
    case PrimKind::Pad:
      return {R::Full, R::Full,
              "constant: the cotangent's interior; reflect/edge: padded positions added back onto the elements "
              "they copy; negative (cropping) pads: the kept region's cotangent scattered back axis by axis",
              R::Full, shifted};
    case PrimKind::Reduce:
      return {R::Full, R::Full,
              "sum/mean broadcast back; prod by exclusive products (exact at zeros); max/min split ties "
              "equally; all/any give none",
              R::Full, shifted};
    case PrimKind::ArgReduce: return {R::Zero, R::Zero, "integer output", R::Full, shifted};
    case PrimKind::Scan:
      return {R::Full, R::Full,
              "cumsum: reverse cumsum; cumprod: via division (inputs must be non-zero); cummax/cummin "
              "(inclusive or exclusive): to the running extreme, ties split equally",
              R::Full, shifted};
    case PrimKind::Matmul:
      return {R::Full, R::Full, "g·bᵀ and aᵀ·g", R::Partial,
              "2-D products: one batched matmul, an unbatched right operand copied per example (so each "
              "example is the same GEMM as unbatched: BLAS bits depend on the GEMM's m) up to 4 Mi copied "
              "elements; larger ones, products with batch axes and GPU products (cuBLASLt picks its algorithm by the "
              "batch count): one matmul per example"};
    case PrimKind::Gather:
      return {R::Full, R::Full, "scatter-add of the cotangent; none to the indices", R::Full,
              "unbatched indices: the axis shifted; batched indices: a gather_nd with one batch axis (exact: "
              "a gather copies)"};
    case PrimKind::GatherElements: return {R::Full, R::Full, "scatter-add along the axis", R::Full, shifted};
    case PrimKind::GatherND:
      return {R::Full, R::Full,
              "scatter_nd-add; with batch_dims > 0 the batch axes are flattened into a leading coordinate",
              R::Full, "batch_dims + 1 over the lifted array and indices"};
    case PrimKind::Scatter:
      return {R::Full, R::Full,
              "assign and add; mul: the product of the other factors (the updates' cotangent divides by them, "
              "so they must be non-zero); max/min: to the maxima, ties among the array and the updates split "
              "equally",
              R::Full, shifted};
    case PrimKind::ScatterND:
      return {R::Full, R::Full, "as Scatter, through gather_nd and scatter_nd", R::Full,
              "each example's indices get its batch position as a leading coordinate"};
    case PrimKind::Sort: return {R::Full, R::Full, "the cotangent scattered back through argsort", R::Full, shifted};
    case PrimKind::ArgSort: return {R::Zero, R::Zero, "integer output", R::Full, shifted};
    case PrimKind::TopK:
      return {R::Full, R::Full, "values: scattered back through the indices; indices: integer", R::Full, shifted};
    case PrimKind::Conv:
      return {R::Full, R::Full,
              "input: conv_transpose of the cotangent; weight: a conv of the transposed input and cotangent; "
              "jvp is bilinear",
              R::Partial,
              "batched input on the CPU: the batch folded into N; batched weight, or on the GPU (cuDNN picks its "
              "algorithm by N): one conv per example"};
    case PrimKind::ConvTranspose:
      return {R::Full, R::Full, "input: conv of the cotangent; weight: as conv's with the roles swapped", R::Partial,
              "batched input on the CPU: the batch folded into N; batched weight, or on the GPU: one "
              "conv_transpose per example"};
    case PrimKind::Pool:
      return {R::Full, R::Full,
              "avg: conv_transpose of the cotangent scaled per window; max: the window's cotangent to its "
              "maxima (ties split equally)",
              R::Full, "the batch folded into N"};
    case PrimKind::RandomBits:
      return {R::Zero, R::Zero, "integer output", R::Loop, "a batched key: one draw per example's key, stacked"};
    case PrimKind::Attention:
      return {R::Full, R::Full,
              "the composed path (matmul, scale, mask, softmax, matmul) differentiated: q, k, v and an additive "
              "mask get cotangents, a boolean mask none",
              R::Loop, "one call per example (folding the batch into B is the next step)"};
    case PrimKind::Fused:
      return {R::None, R::None,
              "exists only in compiled tapes: a compiled function called inside a transform runs its function "
              "directly, so transforms never meet it",
              R::None,
              "exists only in compiled tapes: a compiled function called inside vmap runs its function directly"};
  }
  return {R::None, R::None, "?", R::None, "?"};
}

std::vector<Array> vjp_rule(const Array& out, const Array& g) {
  const detail::Node& n = out.node();
  const std::vector<Array>& in = n.inputs;
  std::vector<Array> cts(in.size());
  switch (n.prim.kind) {
    case PrimKind::None:
    case PrimKind::Full:
    case PrimKind::Arange:
    case PrimKind::ArgReduce:
    case PrimKind::ArgSort:
    case PrimKind::RandomBits: return cts;
    case PrimKind::Unary: {
      Array d = unary_derivative(n.prim.get<UnaryParams>().op, in[0], out);
      if (d.valid()) cts[0] = g * d;
      else if (is_floating(in[0].dtype())) cts[0] = zeros_of(in[0]);
      return cts;
    }
    case PrimKind::Binary: {
      auto [dx, dy] = binary_derivatives(n.prim.get<BinaryParams>().op, in[0], in[1], out);
      if (dx.valid()) cts[0] = unbroadcast(g * dx, in[0].shape());
      else if (is_floating(in[0].dtype())) cts[0] = zeros_of(in[0]);
      if (dy.valid()) cts[1] = unbroadcast(g * dy, in[1].shape());
      else if (is_floating(in[1].dtype())) cts[1] = zeros_of(in[1]);
      return cts;
    }
    case PrimKind::Select: {
      Array z = zeros_of(g);
      cts[1] = unbroadcast(where(in[0], g, z), in[1].shape());
      cts[2] = unbroadcast(where(in[0], z, g), in[2].shape());
      return cts;
    }
    case PrimKind::Cast:
      if (is_floating(in[0].dtype())) cts[0] = astype(g, in[0].dtype());
      return cts;
    case PrimKind::Copy: cts[0] = g; return cts;
    case PrimKind::Reshape: cts[0] = reshape(g, in[0].shape()); return cts;
    case PrimKind::Transpose: {
      const auto& perm = n.prim.get<PermParams>().perm;
      Axes inverse(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int>(i);
      cts[0] = transpose(g, inverse);
      return cts;
    }
    case PrimKind::Broadcast: cts[0] = unbroadcast(g, in[0].shape()); return cts;
    case PrimKind::Slice:
      cts[0] = slice_update_node(zeros_of(in[0]), g, n.prim.get<SliceParams>());
      return cts;
    case PrimKind::SliceUpdate: {
      const auto& p = n.prim.get<SliceParams>();
      cts[0] = slice_update_node(g, zeros_of(in[1]), p);
      cts[1] = slice_node(g, in[1].shape(), p.start, p.step);
      return cts;
    }
    case PrimKind::Concatenate: {
      const int axis = n.prim.get<AxisParams>().axis;
      int64_t offset = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        std::vector<int64_t> start(static_cast<size_t>(g.ndim()), 0), step(static_cast<size_t>(g.ndim()), 1);
        start[static_cast<size_t>(axis)] = offset;
        offset += in[i].shape(axis);
        if (is_floating(in[i].dtype())) cts[i] = astype(slice_node(g, in[i].shape(), start, step), in[i].dtype());
      }
      return cts;
    }
    case PrimKind::Pad: {
      const auto& p = n.prim.get<PadParams>();
      bool cropping = false;
      for (size_t i = 0; i < p.low.size(); ++i) cropping = cropping || p.low[i] < 0 || p.high[i] < 0;
      if (cropping) {
        cts[0] = cropping_pad_adjoint(g, p, in[0].shape());
        return cts;
      }
      switch (p.mode) {
        case PadMode::Constant:
          cts[0] = slice_node(g, in[0].shape(), p.low, std::vector<int64_t>(p.low.size(), 1));
          return cts;
        case PadMode::Reflect:
        case PadMode::Edge: {
          Array r = g;
          for (int a = 0; a < g.ndim(); ++a) {
            const size_t i = static_cast<size_t>(a);
            if (p.low[i] != 0 || p.high[i] != 0) r = pad_axis_adjoint(r, a, p.low[i], p.high[i], in[0].shape(a), p.mode);
          }
          cts[0] = r;
          return cts;
        }
      }
      return cts;
    }
    case PrimKind::Reduce: {
      const auto& p = n.prim.get<ReduceParams>();
      Array d = reduce_partials(p, in[0], out);
      if (!d.valid()) return cts;
      Array gb = broadcast_to(g, in[0].shape());
      cts[0] = p.op == ReduceOp::Sum ? gb : gb * d;
      return cts;
    }
    case PrimKind::Scan: {
      const auto& p = n.prim.get<ScanParams>();
      switch (p.op) {
        case ScanOp::Sum: cts[0] = cumsum(g, p.axis, !p.reverse, p.exclusive); return cts;
        case ScanOp::Prod:
          // y_i = prod_{j<=i} x_j, so dL/dx_j = sum_{i>=j} g_i y_i / x_j (x must be non-zero).
          cts[0] = cumsum(g * out, p.axis, !p.reverse, p.exclusive) / in[0];
          return cts;
        case ScanOp::Max:
        case ScanOp::Min: {
          Array w = scan_extreme_weights(moveaxis(in[0], p.axis, -1), moveaxis(out, p.axis, -1), p.reverse, p.exclusive);
          cts[0] = moveaxis(sum(expand_dims(moveaxis(g, p.axis, -1), -1) * w, {-2}), -1, p.axis);
          return cts;
        }
      }
      return cts;
    }
    case PrimKind::Matmul:
      cts[0] = matmul(g, swapaxes(in[1], -1, -2));
      cts[1] = matmul(swapaxes(in[0], -1, -2), g);
      return cts;
    case PrimKind::Gather:
      cts[0] = take_vjp(in[0], in[1], g, n.prim.get<AxisParams>().axis);
      return cts;
    case PrimKind::GatherElements:
      cts[0] = scatter(zeros_of(in[0]), in[1], g, n.prim.get<AxisParams>().axis, ScatterReduce::Add);
      return cts;
    case PrimKind::GatherND:
      cts[0] = gather_nd_vjp(in[0], in[1], g, n.prim.get<GatherNDParams>().batch_dims);
      return cts;
    case PrimKind::Scatter: {
      const auto& p = n.prim.get<ScatterParams>();
      switch (p.reduce) {
        case ScatterReduce::Assign:
          cts[0] = scatter(g, in[1], zeros_of(in[2]), p.axis, ScatterReduce::Assign);
          cts[2] = scatter_updates_cotangent(g, in[1], p.axis);
          return cts;
        case ScatterReduce::Add:
          cts[0] = g;
          cts[2] = scatter_updates_cotangent(g, in[1], p.axis);
          return cts;
        case ScatterReduce::Mul:
        case ScatterReduce::Max:
        case ScatterReduce::Min: scatter_reduce_vjp(p.reduce, {in[1], p.axis, false}, in, out, g, cts); return cts;
      }
      return cts;
    }
    case PrimKind::ScatterND: {
      const auto& p = n.prim.get<ScatterParams>();
      switch (p.reduce) {
        case ScatterReduce::Assign:
          cts[0] = scatter_nd(g, in[1], zeros_of(in[2]), ScatterReduce::Assign);
          cts[2] = gather_nd(g, in[1]);
          return cts;
        case ScatterReduce::Add:
          cts[0] = g;
          cts[2] = gather_nd(g, in[1]);
          return cts;
        case ScatterReduce::Mul:
        case ScatterReduce::Max:
        case ScatterReduce::Min: scatter_reduce_vjp(p.reduce, {in[1], 0, true}, in, out, g, cts); return cts;
      }
      return cts;
    }
    case PrimKind::Sort: {
      const int axis = n.prim.get<SortParams>().axis;
      cts[0] = scatter(zeros_of(in[0]), argsort(in[0], axis), g, axis, ScatterReduce::Add);
      return cts;
    }
    case PrimKind::TopK: {
      if (n.output_index != 0) return cts;  // the indices: integer
      const auto& p = n.prim.get<TopKParams>();
      Array idx = topk(in[0], p.k, p.axis, p.largest).second;
      cts[0] = scatter(zeros_of(in[0]), idx, g, p.axis, ScatterReduce::Add);
      return cts;
    }
    case PrimKind::Conv: {
      const auto& p = n.prim.get<ConvParams>();
      SMELT_ASSERT(p.adds.empty() && p.packed_weight.empty(),
                   "conv: fused adds and packed weights exist only in compiled tapes, never under a transform");
      const Shape& xs = in[0].shape();
      const Shape kernel(in[1].shape().begin() + 2, in[1].shape().end());
      // The input's cotangent is the adjoint, conv_transpose with the same weight; output_padding
      // restores the trailing positions the forward stride skipped.
      std::vector<int64_t> outpad;
      for (size_t i = 0; i < kernel.size(); ++i)
        outpad.push_back(xs[i + 2] - ((g.shape(static_cast<int>(i) + 2) - 1) * p.strides[i] - p.padding_lo[i] -
                                      p.padding_hi[i] + p.dilations[i] * (kernel[i] - 1) + 1));
      cts[0] = conv_transpose(g, in[1], {p.strides, p.padding_lo, p.padding_hi, p.dilations, outpad, p.groups});
      cts[1] = grouped_weight_grad(in[0], g, p.groups, p.strides, p.dilations, p.padding_lo, p.padding_hi, kernel);
      return cts;
    }
    case PrimKind::ConvTranspose: {
      const auto& p = n.prim.get<ConvTransposeParams>();
      const Shape kernel(in[1].shape().begin() + 2, in[1].shape().end());
      // conv_transpose is the adjoint of conv with the same weight, so conv is its adjoint.
      cts[0] = crop_to(conv(g, in[1], {p.strides, p.padding_lo, p.padding_hi, p.dilations, p.groups}), in[0].shape());
      cts[1] = grouped_weight_grad(g, in[0], p.groups, p.strides, p.dilations, p.padding_lo, p.padding_hi, kernel);
      return cts;
    }
    case PrimKind::Pool: {
      const auto& p = n.prim.get<PoolParams>();
      switch (p.kind) {
        case PoolKind::Max: cts[0] = max_pool_vjp(in[0], out, g, p); return cts;
        case PoolKind::Avg: break;
      }
      // Average pooling is the window sum (a depthwise conv with a ones kernel) scaled by 1/divisor
      // per window; its adjoint is conv_transpose of the scaled cotangent. The per-window scale is
      // read off the pool itself (pool(ones) / window count), so count_include_pad and ceil_mode
      // need no separate model; ceil_mode's extra windows get extra right padding in the conv.
      const Array& x = in[0];
      const int64_t c = x.shape(1);
      Shape ks = {c, 1};
      ks.insert(ks.end(), p.kernel.begin(), p.kernel.end());
      Array ones_k = full_value(ks, Scalar::of_int(1), x.dtype(), x.device());
      std::vector<int64_t> hi = p.padding_hi, outpad;
      for (size_t i = 0; i < p.kernel.size(); ++i) {
        const int64_t size = x.shape(static_cast<int>(i) + 2), windows = out.shape(static_cast<int>(i) + 2);
        const int64_t reach = (windows - 1) * p.strides[i] + p.dilations[i] * (p.kernel[i] - 1) + 1;
        hi[i] += std::max<int64_t>(0, reach - (size + p.padding_lo[i] + hi[i]));
        outpad.push_back(size + p.padding_lo[i] + hi[i] - reach);
      }
      Array ones_x = ones_like(x);
      Array counts = conv(ones_x, ones_k, {p.strides, p.padding_lo, hi, p.dilations, c});
      Array scale = where(counts == 0.0, zeros_of(out), same_prim(out, {ones_x}) / counts);
      cts[0] = conv_transpose(g * scale, ones_k, {p.strides, p.padding_lo, hi, p.dilations, outpad, c});
      return cts;
    }
    case PrimKind::Attention: {
      // Through the composition the kernels stand for; the backward graph is ordinary ops.
      const auto& p = n.prim.get<AttentionParams>();
      const bool bool_mask = p.mask == AttentionMaskKind::Boolean;
      auto f = [&](const std::vector<Array>& x) {
        return std::vector<Array>{detail::attention_composed(x[0], x[1], x[2], x.size() > 3 ? x[3] : Array(), p)};
      };
      std::vector<Array> grads = smelt::vjp(f, in, {g}).second;
      for (size_t i = 0; i < in.size(); ++i) cts[i] = i == 3 && bool_mask ? Array() : grads[i];
      return cts;
    }
    case PrimKind::Fused: no_rule(out, "vjp", rule_info(n.prim.kind).note);
  }
  return cts;
}

Array jvp_rule(const Array& out, const std::vector<Array>& t) {
  const detail::Node& n = out.node();
  const std::vector<Array>& in = n.inputs;
  switch (n.prim.kind) {
    case PrimKind::None:
    case PrimKind::Full:
    case PrimKind::Arange:
    case PrimKind::ArgReduce:
    case PrimKind::ArgSort:
    case PrimKind::RandomBits: return Array();
    case PrimKind::Unary: {
      if (!is_floating(out.dtype())) return Array();
      Array d = unary_derivative(n.prim.get<UnaryParams>().op, in[0], out);
      return d.valid() ? t[0] * d : Array();
    }
    case PrimKind::Binary: {
      if (!is_floating(out.dtype())) return Array();
      auto [dx, dy] = binary_derivatives(n.prim.get<BinaryParams>().op, in[0], in[1], out);
      Array r;
      if (t[0].valid() && dx.valid()) r = t[0] * dx;
      if (t[1].valid() && dy.valid()) r = r.valid() ? r + t[1] * dy : t[1] * dy;
      return r.valid() ? broadcast_to(r, out.shape()) : r;
    }
    case PrimKind::Select: {
      std::vector<Array> ts = {in[0], t[1].valid() ? t[1] : zeros_of(in[1]), t[2].valid() ? t[2] : zeros_of(in[2])};
      return same_prim(out, ts);
    }
    case PrimKind::Cast: return is_floating(out.dtype()) ? astype(t[0], out.dtype()) : Array();
    case PrimKind::Copy:
    case PrimKind::Reshape:
    case PrimKind::Transpose:
    case PrimKind::Broadcast:
    case PrimKind::Slice:
    case PrimKind::SliceUpdate:
    case PrimKind::Concatenate: return same_prim(out, dense(t, in));
    case PrimKind::Pad: {
      PadParams p = n.prim.get<PadParams>();
      p.value = Scalar::of_int(0).cast(out.dtype());  // the padding is constant: zero tangent there
      return make_array(out.shape(), out.dtype(), out.device(), make_prim(PrimKind::Pad, p), {t[0]});
    }
    case PrimKind::Reduce: {
      const auto& p = n.prim.get<ReduceParams>();
      if (p.op == ReduceOp::Sum || p.op == ReduceOp::Mean) return same_prim(out, {t[0]});
      Array d = reduce_partials(p, in[0], out);
      if (!d.valid()) return Array();
      return sum(t[0] * d, Axes(p.axes.begin(), p.axes.end()), true);
    }
    case PrimKind::Scan: {
      const auto& p = n.prim.get<ScanParams>();
      switch (p.op) {
        case ScanOp::Sum: return same_prim(out, {t[0]});
        case ScanOp::Prod: return out * cumsum(t[0] / in[0], p.axis, p.reverse, p.exclusive);
        case ScanOp::Max:
        case ScanOp::Min: {
          Array w = scan_extreme_weights(moveaxis(in[0], p.axis, -1), moveaxis(out, p.axis, -1), p.reverse, p.exclusive);
          return moveaxis(sum(w * expand_dims(moveaxis(t[0], p.axis, -1), -2), {-1}), -1, p.axis);
        }
      }
      return Array();
    }
    case PrimKind::Matmul: {
      Array r;
      if (t[0].valid()) r = matmul(t[0], in[1]);
      if (t[1].valid()) r = r.valid() ? r + matmul(in[0], t[1]) : matmul(in[0], t[1]);
      return r;
    }
    case PrimKind::Gather:
    case PrimKind::GatherElements:
    case PrimKind::GatherND: return same_prim(out, {t[0].valid() ? t[0] : zeros_of(in[0]), in[1]});
    case PrimKind::Scatter:
    case PrimKind::ScatterND: {
      const auto& p = n.prim.get<ScatterParams>();
      switch (p.reduce) {
        case ScatterReduce::Assign:
        case ScatterReduce::Add:
          return same_prim(out, {t[0].valid() ? t[0] : zeros_of(in[0]), in[1], t[2].valid() ? t[2] : zeros_of(in[2])});
        case ScatterReduce::Mul:
        case ScatterReduce::Max:
        case ScatterReduce::Min:
          return scatter_reduce_jvp(p.reduce, {in[1], p.axis, n.prim.kind == PrimKind::ScatterND}, in, out, t);
      }
      return Array();
    }
    case PrimKind::Sort: {
      const int axis = n.prim.get<SortParams>().axis;
      return take_along_axis(t[0], argsort(in[0], axis), axis);
    }
    case PrimKind::TopK: {
      if (n.output_index != 0) return Array();
      const auto& p = n.prim.get<TopKParams>();
      return take_along_axis(t[0], topk(in[0], p.k, p.axis, p.largest).second, p.axis);
    }
    case PrimKind::Conv:
    case PrimKind::ConvTranspose: {
      // Bilinear in (input, weight): the same primitive applied to each tangent in turn.
      Array r;
      if (t[0].valid()) r = same_prim(out, {t[0], in[1]});
      if (t[1].valid()) r = r.valid() ? r + same_prim(out, {in[0], t[1]}) : same_prim(out, {in[0], t[1]});
      return r;
    }
    case PrimKind::Pool:
      switch (n.prim.get<PoolParams>().kind) {
        case PoolKind::Max: return max_pool_jvp(in[0], out, t[0], n.prim.get<PoolParams>());
        case PoolKind::Avg: return same_prim(out, {t[0]});  // linear
      }
      return Array();
    case PrimKind::Attention: {
      const auto& p = n.prim.get<AttentionParams>();
      auto f = [&](const std::vector<Array>& x) {
        return std::vector<Array>{detail::attention_composed(x[0], x[1], x[2], x.size() > 3 ? x[3] : Array(), p)};
      };
      std::vector<Array> ts = t;
      if (p.mask == AttentionMaskKind::Boolean) ts[3] = Array();
      return smelt::jvp(f, in, ts).second[0];
    }
    case PrimKind::Fused: no_rule(out, "jvp", rule_info(n.prim.kind).note);
  }
  return Array();
}

}  // namespace smelt::transforms
