// Shape ops: reshape, transpose, broadcast, slicing and the other views, and their compositions.
#include <algorithm>
#include <numeric>

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
      known *= shape[i];
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
  for (int i = s; i <= e; ++i) m *= a.shape()[i];
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
      if (sorted[i] != i) throw InvalidArgument("transpose: the axes are not a permutation (repeated axis)");
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

// Python slice clamping for one axis; returns the output length.
int64_t clamp_slice(int64_t dim, int64_t& start, int64_t stop, int64_t step) {
  if (step > 0) {
    if (start < 0) start += dim;
    if (stop < 0) stop += dim;
    start = std::clamp<int64_t>(start, 0, dim);
    stop = std::clamp<int64_t>(stop, 0, dim);
    return stop > start ? (stop - start + step - 1) / step : 0;
  }
  if (start < 0) start += dim;
  if (stop < 0) stop += dim;
  start = std::clamp<int64_t>(start, -1, dim - 1);
  stop = std::clamp<int64_t>(stop, -1, dim - 1);
  return start > stop ? (start - stop - step - 1) / -step : 0;
}

}  // namespace

Array slice(const Array& a, const std::vector<int64_t>& start, const std::vector<int64_t>& stop,
            const std::vector<int64_t>& step) {
  check_valid(a, "slice");
  int nd = a.ndim();
  if (static_cast<int>(start.size()) > nd || stop.size() != start.size() ||
      (!step.empty() && step.size() != start.size()))
    throw InvalidArgument("slice: start, stop and step must have the same length, at most the rank of " +
                          describe(a) + " (got " + std::to_string(start.size()) + ", " +
                          std::to_string(stop.size()) + ", " + std::to_string(step.size()) + ")");
  SliceParams p;
  Shape out(nd);
  bool identity = true;
  for (int i = 0; i < nd; ++i) {
    int64_t dim = a.shape()[i];
    int64_t st = 1, s = 0, e = dim;
    if (i < static_cast<int>(start.size())) {
      st = step.empty() ? 1 : step[i];
      s = start[i];
      e = stop[i];
      if (st == 0) throw InvalidArgument("slice: step 0 on axis " + std::to_string(i) + " of " + describe(a));
    }
    out[i] = clamp_slice(dim, s, e, st);
    if (out[i] == 0) s = 0;
    p.start.push_back(s);
    p.step.push_back(st);
    identity = identity && st == 1 && s == 0 && out[i] == dim;
  }
  if (identity) return a;
  return make_array(std::move(out), a.dtype(), a.device(), make_prim(PrimKind::Slice, std::move(p)), {a});
}

Array slice(const Array& a, const Axes& axes, const std::vector<int64_t>& start,
            const std::vector<int64_t>& stop, const std::vector<int64_t>& step) {
  check_valid(a, "slice");
  if (axes.size() != start.size() || axes.size() != stop.size() || (!step.empty() && step.size() != axes.size()))
    throw InvalidArgument("slice: axes, start, stop and step must have the same length");
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

}  // namespace smelt
