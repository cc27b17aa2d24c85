// Shape ops: reshape, transpose, broadcast, slicing and the other views, and their compositions.
#include <algorithm>
#include <limits>
#include <numeric>

#include "src/core/shape_math.h"
#include "src/core/node_state.h"
#include "src/ops/op_utils.h"

namespace smelt {

Array reshape(const Array& a, Shape shape) {
  check_valid(a, "reshape");
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0)
        throw InvalidArgument("reshape: more than one -1 in the target shape " + shape_to_string(shape));
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw InvalidArgument("reshape: negative dimension in the target shape " + shape_to_string(shape));
    } else {
      known = checked_mul(known, shape[i], "reshape");
    }
  }
  if (infer >= 0) {
    if (known == 0 || a.size() % known != 0)
      throw ShapeError("reshape: cannot reshape " + describe(a) + " to " + shape_to_string(shape));
    shape[infer] = a.size() / known;
  }
  if (shape_size(shape) != a.size())
    throw ShapeError("reshape: cannot reshape " + describe(a) + " (" + std::to_string(a.size()) +
                     " elements) to " + shape_to_string(shape));
  if (shape == a.shape()) return a;
  Shape s = shape;
  return make_array(std::move(s), a.dtype(), a.device(), make_prim(PrimKind::Reshape, ShapeParams{shape}), {a});
}

Array flatten(const Array& a, int start_axis, int end_axis) {
  check_valid(a, "flatten");
  if (a.ndim() == 0) return reshape(a, {1});
  int s = normalize_axis(start_axis, a.ndim(), "flatten", a.shape());
  int e = normalize_axis(end_axis, a.ndim(), "flatten", a.shape());
  if (s > e) throw InvalidArgument("flatten: start_axis " + std::to_string(start_axis) + " is after end_axis " +
                                   std::to_string(end_axis) + " for shape " + shape_to_string(a.shape()));
  Shape out(a.shape().begin(), a.shape().begin() + s);
  int64_t m = 1;
  for (int i = s; i <= e; ++i) m = checked_mul(m, a.shape()[i], "flatten");
  out.push_back(m);
  out.insert(out.end(), a.shape().begin() + e + 1, a.shape().end());
  return reshape(a, out);
}

Array squeeze(const Array& a, const Axes& axes) {
  check_valid(a, "squeeze");
  auto ax = normalize_axes(axes, a.ndim(), "squeeze", a.shape(), false);
  Shape out;
  for (int i = 0, j = 0; i < a.ndim(); ++i) {
    if (j < static_cast<int>(ax.size()) && ax[j] == i) {
      if (a.shape()[i] != 1)
        throw ShapeError("squeeze: axis " + std::to_string(i) + " of shape " + shape_to_string(a.shape()) +
                         " has size " + std::to_string(a.shape()[i]) + ", not 1");
      ++j;
      continue;
    }
    out.push_back(a.shape()[i]);
  }
  return reshape(a, out);
}

Array squeeze(const Array& a) {
  check_valid(a, "squeeze");
  Shape out;
  for (auto d : a.shape())
    if (d != 1) out.push_back(d);
  return reshape(a, out);
}

Array expand_dims(const Array& a, const Axes& axes) {
  check_valid(a, "expand_dims");
  int nd = a.ndim() + static_cast<int>(axes.size());
  auto ax = normalize_axes(axes, nd, "expand_dims", a.shape(), false);
  Shape out;
  size_t src = 0, j = 0;
  for (int i = 0; i < nd; ++i) {
    if (j < ax.size() && ax[j] == i) {
      out.push_back(1);
      ++j;
    } else {
      out.push_back(a.shape()[src++]);
    }
  }
  return reshape(a, out);
}

Array expand_dims(const Array& a, int axis) { return expand_dims(a, Axes{axis}); }

Array transpose(const Array& a, const Axes& perm_in) {
  check_valid(a, "transpose");
  int nd = a.ndim();
  std::vector<int> perm;
  if (perm_in.empty()) {
    for (int i = nd - 1; i >= 0; --i) perm.push_back(i);
  } else {
    if (static_cast<int>(perm_in.size()) != nd)
      throw InvalidArgument("transpose: the permutation has " + std::to_string(perm_in.size()) +
                            " axes for an array of rank " + std::to_string(nd) + " (shape " +
                            shape_to_string(a.shape()) + ")");
    for (int p : perm_in) perm.push_back(normalize_axis(p, nd, "transpose", a.shape()));
    std::vector<int> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < nd; ++i)
      if (sorted[i] != i)
        throw InvalidArgument("transpose: the axes " + shape_to_string(Shape(perm_in.begin(), perm_in.end())) +
                              " are not a permutation (repeated axis) for shape " + shape_to_string(a.shape()));
  }
  bool identity = true;
  for (int i = 0; i < nd; ++i) identity = identity && perm[i] == i;
  if (identity) return a;
  Shape out(nd);
  for (int i = 0; i < nd; ++i) out[i] = a.shape()[perm[i]];
  return make_array(std::move(out), a.dtype(), a.device(), make_prim(PrimKind::Transpose, PermParams{perm}), {a});
}

Array swapaxes(const Array& a, int axis1, int axis2) {
  check_valid(a, "swapaxes");
  int x = normalize_axis(axis1, a.ndim(), "swapaxes", a.shape());
  int y = normalize_axis(axis2, a.ndim(), "swapaxes", a.shape());
  Axes perm(a.ndim());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[x], perm[y]);
  return transpose(a, perm);
}

Array moveaxis(const Array& a, int source, int destination) {
  check_valid(a, "moveaxis");
  int s = normalize_axis(source, a.ndim(), "moveaxis", a.shape());
  int d = normalize_axis(destination, a.ndim(), "moveaxis", a.shape());
  Axes perm;
  for (int i = 0; i < a.ndim(); ++i)
    if (i != s) perm.push_back(i);
  perm.insert(perm.begin() + d, s);
  return transpose(a, perm);
}

Array broadcast_to(const Array& a, const Shape& shape) {
  check_valid(a, "broadcast_to");
  if (a.shape() == shape) return a;
  bool ok = shape.size() >= a.shape().size();
  for (size_t i = 0; ok && i < a.shape().size(); ++i) {
    int64_t d = a.shape()[i], t = shape[shape.size() - a.shape().size() + i];
    ok = d == t || d == 1;
  }
  for (auto d : shape) ok = ok && d >= 0;
  if (!ok)
    throw ShapeError("broadcast_to: cannot broadcast " + describe(a) + " to shape " + shape_to_string(shape));
  return make_array(shape, a.dtype(), a.device(), make_prim(PrimKind::Broadcast, ShapeParams{shape}), {a});
}

std::vector<Array> broadcast_arrays(const std::vector<Array>& arrays) {
  Shape s;
  for (auto& a : arrays) {
    check_valid(a, "broadcast_arrays");
    s = broadcast_shapes(s, a.shape(), "broadcast_arrays");
  }
  std::vector<Array> out;
  for (auto& a : arrays) out.push_back(broadcast_to(a, s));
  return out;
}

namespace {

// Python slice clamping for one axis; returns the output length. Written so that extreme
// starts, stops and steps (INT64_MIN/MAX) cannot overflow.
int64_t clamp_slice(int64_t dim, int64_t& start, int64_t stop, int64_t step) {
  if (start < 0) start += dim;
  if (stop < 0) stop += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    stop = std::clamp<int64_t>(stop, 0, dim);
    return stop > start ? (stop - start - 1) / step + 1 : 0;
  }
  start = std::clamp<int64_t>(start, -1, dim - 1);
  stop = std::clamp<int64_t>(stop, -1, dim - 1);
  if (start <= stop) return 0;
  return step == std::numeric_limits<int64_t>::min() ? 1 : (start - stop - 1) / -step + 1;
}

struct NormalizedSlice {
  SliceParams params;
  Shape shape;
  bool identity = true;
};

// Start/stop/step of the first axes (the rest whole) to in-range starts, steps and lengths.
NormalizedSlice normalize_slice(const Array& a, const std::vector<int64_t>& start,
                                const std::vector<int64_t>& stop, const std::vector<int64_t>& step,
                                const char* op) {
  int nd = a.ndim();
  if (static_cast<int>(start.size()) > nd || stop.size() != start.size() ||
      (!step.empty() && step.size() != start.size()))
    throw InvalidArgument(std::string(op) + ": start, stop and step must have the same length, at most the rank of " +
                          describe(a) + " (got " + std::to_string(start.size()) + ", " +
                          std::to_string(stop.size()) + ", " + std::to_string(step.size()) + ")");
  NormalizedSlice r;
  r.shape.resize(nd);
  for (int i = 0; i < nd; ++i) {
    int64_t dim = a.shape()[i];
    int64_t st = 1, s = 0, e = dim;
    if (i < static_cast<int>(start.size())) {
      st = step.empty() ? 1 : step[i];
      s = start[i];
      e = stop[i];
      if (st == 0)
        throw InvalidArgument(std::string(op) + ": step 0 on axis " + std::to_string(i) + " of " + describe(a));
    }
    int64_t len = clamp_slice(dim, s, e, st);
    if (len == 0) s = 0;
    if (len <= 1) st = 1;  // any step walks one element; 1 keeps strides small
    r.shape[i] = len;
    r.params.start.push_back(s);
    r.params.step.push_back(st);
    r.identity = r.identity && st == 1 && s == 0 && len == dim;
  }
  return r;
}

}  // namespace

Array slice(const Array& a, const std::vector<int64_t>& start, const std::vector<int64_t>& stop,
            const std::vector<int64_t>& step) {
  check_valid(a, "slice");
  auto r = normalize_slice(a, start, stop, step, "slice");
  if (r.identity) return a;
  return make_array(std::move(r.shape), a.dtype(), a.device(), make_prim(PrimKind::Slice, std::move(r.params)), {a});
}

Array slice(const Array& a, const Axes& axes, const std::vector<int64_t>& start,
            const std::vector<int64_t>& stop, const std::vector<int64_t>& step) {
  check_valid(a, "slice");
  if (axes.size() != start.size() || axes.size() != stop.size() || (!step.empty() && step.size() != axes.size()))
    throw InvalidArgument("slice: axes, start, stop and step must have the same length (got " +
                          std::to_string(axes.size()) + ", " + std::to_string(start.size()) + ", " +
                          std::to_string(stop.size()) + ", " + std::to_string(step.size()) + ") for " + describe(a));
  std::vector<int64_t> s(a.ndim(), 0), e(a.shape().begin(), a.shape().end()), st(a.ndim(), 1);
  std::vector<bool> seen(a.ndim(), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int ax = normalize_axis(axes[i], a.ndim(), "slice", a.shape());
    if (seen[ax]) throw InvalidArgument("slice: axis " + std::to_string(axes[i]) + " given twice");
    seen[ax] = true;
    s[ax] = start[i];
    e[ax] = stop[i];
    st[ax] = step.empty() ? 1 : step[i];
  }
  return slice(a, s, e, st);
}

Array flip(const Array& a, const Axes& axes) {
  check_valid(a, "flip");
  auto ax = normalize_axes(axes, a.ndim(), "flip", a.shape());
  std::vector<int64_t> s(a.ndim(), 0), e(a.shape().begin(), a.shape().end()), st(a.ndim(), 1);
  for (int x : ax) {
    s[x] = -1;
    e[x] = std::numeric_limits<int64_t>::min();
    st[x] = -1;
  }
  return slice(a, s, e, st);
}

namespace {

std::string describe_all(const std::vector<Array>& arrays) {
  std::string s;
  for (size_t i = 0; i < arrays.size(); ++i) s += (i ? ", " : "") + describe(arrays[i]);
  return s;
}

}  // namespace

Array concatenate(const std::vector<Array>& arrays, int axis) {
  if (arrays.empty()) throw InvalidArgument("concatenate: needs at least one array");
  for (auto& a : arrays) check_valid(a, "concatenate");
  const Array& first = arrays[0];
  if (first.ndim() == 0)
    throw ShapeError("concatenate: 0-d arrays cannot be concatenated (" + describe_all(arrays) + ")");
  int nd = first.ndim();
  int ax = normalize_axis(axis, nd, "concatenate", first.shape());
  Dtype dtype = first.dtype();
  Shape out = first.shape();
  out[ax] = 0;
  for (auto& a : arrays) {
    bool ok = a.ndim() == nd;
    for (int i = 0; ok && i < nd; ++i) ok = i == ax || a.shape()[i] == first.shape()[i];
    if (!ok)
      throw ShapeError("concatenate: the arrays must have the same rank and match on every axis but " +
                       std::to_string(ax) + ": " + describe_all(arrays));
    out[ax] += a.shape()[ax];
    dtype = promote_types(dtype, a.dtype());
  }
  Device dev = common_device(arrays, "concatenate");
  std::vector<Array> inputs;
  for (auto& a : arrays)
    if (a.shape()[ax] > 0 || arrays.size() == 1) inputs.push_back(astype(to_device(a, dev), dtype));
  if (inputs.size() == 1) return inputs[0];
  if (inputs.empty()) return full_value(out, Scalar::of_int(0), dtype, dev);
  return make_array(std::move(out), dtype, dev, make_prim(PrimKind::Concatenate, AxisParams{ax}), std::move(inputs));
}

Array stack(const std::vector<Array>& arrays, int axis) {
  if (arrays.empty()) throw InvalidArgument("stack: needs at least one array");
  for (auto& a : arrays) check_valid(a, "stack");
  for (auto& a : arrays)
    if (a.shape() != arrays[0].shape())
      throw ShapeError("stack: all arrays must have the same shape: " + describe_all(arrays));
  int ax = normalize_axis(axis, arrays[0].ndim() + 1, "stack", arrays[0].shape());
  std::vector<Array> expanded;
  for (auto& a : arrays) expanded.push_back(expand_dims(a, ax));
  return concatenate(expanded, ax);
}

std::vector<Array> split(const Array& a, int sections, int axis) {
  check_valid(a, "split");
  int ax = normalize_axis(axis, a.ndim(), "split", a.shape());
  if (sections <= 0)
    throw InvalidArgument("split: the number of sections must be positive, got " + std::to_string(sections));
  int64_t dim = a.shape()[ax];
  if (dim % sections != 0)
    throw ShapeError("split: axis " + std::to_string(ax) + " of " + describe(a) + " (size " + std::to_string(dim) +
                     ") does not divide into " + std::to_string(sections) + " equal sections");
  std::vector<int64_t> indices;
  for (int i = 1; i < sections; ++i) indices.push_back(dim / sections * i);
  return split(a, indices, ax);
}

std::vector<Array> split(const Array& a, const std::vector<int64_t>& indices, int axis) {
  check_valid(a, "split");
  int ax = normalize_axis(axis, a.ndim(), "split", a.shape());
  std::vector<Array> out;
  int64_t prev = 0;
  for (size_t i = 0; i <= indices.size(); ++i) {
    int64_t stop = i < indices.size() ? indices[i] : std::numeric_limits<int64_t>::max();
    out.push_back(slice(a, Axes{ax}, {prev}, {stop}, {1}));
    prev = stop;
  }
  return out;
}

Array slice_update(const Array& a, const Array& update, const std::vector<int64_t>& start,
                   const std::vector<int64_t>& stop, const std::vector<int64_t>& step) {
  check_valid(a, "slice_update");
  check_valid(update, "slice_update");
  auto r = normalize_slice(a, start, stop, step, "slice_update");
  Shape s = r.shape;
  bool fits = update.ndim() <= static_cast<int>(s.size());
  for (int i = 0; fits && i < update.ndim(); ++i) {
    int64_t d = update.shape()[i], t = s[s.size() - update.ndim() + i];
    fits = d == t || d == 1;
  }
  if (!fits)
    throw ShapeError("slice_update: the update " + describe(update) + " does not broadcast to the slice shape " +
                     shape_to_string(s) + " of " + describe(a));
  Device dev = common_device({a, update}, "slice_update");
  if (shape_size(s) == 0) return a;
  Array u = broadcast_to(astype(to_device(update, dev), a.dtype()), s);
  return make_array(a.shape(), a.dtype(), dev, make_prim(PrimKind::SliceUpdate, std::move(r.params)),
                    {to_device(a, dev), u});
}

namespace {

// Constant padding whose value is not known yet (lazy or traced): a concatenation per axis.
Array pad_constant_lazy(Array x, const std::vector<std::pair<int64_t, int64_t>>& widths, const Array& value) {
  Array v = astype(reshape(value, {}), x.dtype());
  for (int ax = 0; ax < x.ndim(); ++ax) {
    auto [lo, hi] = widths[ax];
    if (lo == 0 && hi == 0) continue;
    Shape sl = x.shape(), sh = x.shape();
    sl[ax] = lo;
    sh[ax] = hi;
    x = concatenate({broadcast_to(v, sl), x, broadcast_to(v, sh)}, ax);
  }
  return x;
}

}  // namespace

Array pad(const Array& a, const std::vector<std::pair<int64_t, int64_t>>& pad_width, PadMode mode,
          const Array& value) {
  check_valid(a, "pad");
  check_valid(value, "pad");
  int nd = a.ndim();
  if (pad_width.size() != 1 && static_cast<int>(pad_width.size()) != nd)
    throw InvalidArgument("pad: pad_width needs one (before, after) pair per axis of " + describe(a) +
                          " or a single pair for all axes, got " + std::to_string(pad_width.size()) + " pairs");
  std::vector<std::pair<int64_t, int64_t>> w(nd, pad_width.empty() ? std::pair<int64_t, int64_t>{0, 0} : pad_width[0]);
  if (static_cast<int>(pad_width.size()) == nd) w = pad_width;
  bool any = false;
  Shape out = a.shape();
  for (int i = 0; i < nd; ++i) {
    auto [lo, hi] = w[i];
    if (lo < 0 || hi < 0)
      throw InvalidArgument("pad: negative pad width (" + std::to_string(lo) + ", " + std::to_string(hi) +
                            ") on axis " + std::to_string(i) + " of " + describe(a));
    int64_t dim = a.shape()[i];
    if (mode == PadMode::Reflect && (lo >= dim || hi >= dim) && (lo > 0 || hi > 0))
      throw InvalidArgument("pad: reflect padding (" + std::to_string(lo) + ", " + std::to_string(hi) +
                            ") on axis " + std::to_string(i) + " of " + describe(a) +
                            " must be smaller than the axis size " + std::to_string(dim));
    if (mode == PadMode::Edge && dim == 0 && (lo > 0 || hi > 0))
      throw InvalidArgument("pad: edge padding cannot extend the empty axis " + std::to_string(i) + " of " +
                            describe(a));
    any = any || lo > 0 || hi > 0;
    out[i] = checked_add(checked_add(dim, lo, "pad"), hi, "pad");
  }
  if (mode == PadMode::Constant && value.size() != 1)
    throw InvalidArgument("pad: the constant value must have one element, got " + describe(value));
  if (!any) return a;
  PadParams p;
  for (auto [lo, hi] : w) {
    p.low.push_back(lo);
    p.high.push_back(hi);
  }
  p.mode = mode;
  p.value = Scalar::of_int(0).cast(a.dtype());
  if (mode == PadMode::Constant) {
    const auto& vn = value.node();
    if (!detail::is_evaluated(vn) || vn.tracer || vn.device.type != Device::Type::Cpu) return pad_constant_lazy(a, w, value);
    p.value = Scalar::load(vn.data_ptr(), value.dtype()).cast(a.dtype());
  }
  return make_array(std::move(out), a.dtype(), a.device(), make_prim(PrimKind::Pad, std::move(p)), {a});
}

Array tile(const Array& a, const std::vector<int64_t>& reps) {
  check_valid(a, "tile");
  for (auto r : reps)
    if (r < 0)
      throw InvalidArgument("tile: negative repetition count in " + shape_to_string(Shape(reps.begin(), reps.end())) +
                            " for " + describe(a));
  size_t nd = std::max<size_t>(reps.size(), a.shape().size());
  Shape shape(nd - a.shape().size(), 1);
  shape.insert(shape.end(), a.shape().begin(), a.shape().end());
  std::vector<int64_t> r(nd - reps.size(), 1);
  r.insert(r.end(), reps.begin(), reps.end());
  // [r0, s0, r1, s1, ...] as a broadcast view of [1, s0, 1, s1, ...], then one copy by reshape.
  Shape inter, bcast, out;
  for (size_t i = 0; i < nd; ++i) {
    inter.insert(inter.end(), {1, shape[i]});
    bcast.insert(bcast.end(), {r[i], shape[i]});
    out.push_back(checked_mul(r[i], shape[i], "tile"));
  }
  Array x = reshape(a, shape);
  if (std::all_of(r.begin(), r.end(), [](int64_t v) { return v == 1; })) return x;
  return reshape(broadcast_to(reshape(x, inter), bcast), out);
}

Array repeat(const Array& a, int64_t repeats, int axis) {
  check_valid(a, "repeat");
  if (repeats < 0)
    throw InvalidArgument("repeat: negative repeat count " + std::to_string(repeats) + " for " + describe(a));
  int ax = normalize_axis(axis, a.ndim(), "repeat", a.shape());
  if (repeats == 1) return a;
  Shape inter = a.shape(), bcast = a.shape(), out = a.shape();
  inter.insert(inter.begin() + ax + 1, 1);
  bcast.insert(bcast.begin() + ax + 1, repeats);
  out[ax] = checked_mul(out[ax], repeats, "repeat");
  return reshape(broadcast_to(reshape(a, inter), bcast), out);
}

Array repeat(const Array& a, int64_t repeats) {
  check_valid(a, "repeat");
  return repeat(reshape(a, {-1}), repeats, 0);
}

}  // namespace smelt
