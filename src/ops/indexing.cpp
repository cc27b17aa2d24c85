// Indexing ops: take, take_along_axis, gather_nd, scatter, scatter_nd, one_hot and nonzero.
#include "src/backend/backend.h"
#include "src/ops/op_utils.h"

namespace smelt {

namespace {

void check_indices(const Array& indices, const char* op) {
  check_valid(indices, op);
  if (!is_integral(indices.dtype()))
    throw DtypeError(std::string(op) + ": indices must have an integer dtype, got " + describe(indices));
}

bool broadcastable(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 0; i < from.size(); ++i) {
    int64_t d = from[i], t = to[to.size() - from.size() + i];
    if (d != t && d != 1) return false;
  }
  return true;
}

}  // namespace

Array take(const Array& a, const Array& indices, int axis) {
  check_valid(a, "take");
  check_indices(indices, "take");
  int ax = normalize_axis(axis, a.ndim(), "take", a.shape());
  Device dev = common_device({a, indices}, "take");
  Shape out(a.shape().begin(), a.shape().begin() + ax);
  out.insert(out.end(), indices.shape().begin(), indices.shape().end());
  out.insert(out.end(), a.shape().begin() + ax + 1, a.shape().end());
  return make_array(std::move(out), a.dtype(), dev, make_prim(PrimKind::Gather, AxisParams{ax}),
                    {to_device(a, dev), to_device(indices, dev)});
}

Array take(const Array& a, const Array& indices) {
  check_valid(a, "take");
  check_indices(indices, "take");
  return take(reshape(a, {-1}), indices, 0);
}

Array take_along_axis(const Array& a, const Array& indices, int axis) {
  check_valid(a, "take_along_axis");
  check_indices(indices, "take_along_axis");
  if (indices.ndim() != a.ndim())
    throw ShapeError("take_along_axis: indices " + describe(indices) + " must have the rank of the array " +
                     describe(a));
  int ax = normalize_axis(axis, a.ndim(), "take_along_axis", a.shape());
  Device dev = common_device({a, indices}, "take_along_axis");
  // Both broadcast against each other on every axis but `axis`.
  Shape common(a.ndim());
  for (int i = 0; i < a.ndim(); ++i) {
    int64_t da = a.shape()[i], di = indices.shape()[i];
    if (i == ax) continue;
    if (da != di && da != 1 && di != 1)
      throw ShapeError("take_along_axis: indices " + describe(indices) + " and array " + describe(a) +
                       " do not broadcast on axis " + std::to_string(i));
    common[i] = da == 1 ? di : da;
  }
  Shape sa = common, si = common;
  sa[ax] = a.shape()[ax];
  si[ax] = indices.shape()[ax];
  return make_array(si, a.dtype(), dev, make_prim(PrimKind::GatherElements, AxisParams{ax}),
                    {broadcast_to(to_device(a, dev), sa), broadcast_to(to_device(indices, dev), si)});
}

Array gather_nd(const Array& a, const Array& indices, int batch_dims) {
  check_valid(a, "gather_nd");
  check_indices(indices, "gather_nd");
  const int r = a.ndim(), q = indices.ndim();
  if (q < 1) throw ShapeError("gather_nd: indices must have at least one axis, got " + describe(indices));
  if (batch_dims < 0 || batch_dims >= std::min(r, q))
    throw InvalidArgument("gather_nd: batch_dims " + std::to_string(batch_dims) + " must be in [0, " +
                          std::to_string(std::min(r, q)) + ") for data " + describe(a) + " and indices " +
                          describe(indices));
  for (int i = 0; i < batch_dims; ++i)
    if (a.shape()[i] != indices.shape()[i])
      throw ShapeError("gather_nd: the first " + std::to_string(batch_dims) + " (batch) axes of data " + describe(a) +
                       " and indices " + describe(indices) + " must match");
  const int64_t k = indices.shape().back();
  if (k > r - batch_dims)
    throw ShapeError("gather_nd: the last axis of indices " + describe(indices) + " (size " + std::to_string(k) +
                     ") exceeds the " + std::to_string(r - batch_dims) + " axes of data " + describe(a) +
                     " after batch_dims " + std::to_string(batch_dims));
  Device dev = common_device({a, indices}, "gather_nd");
  Shape out(indices.shape().begin(), indices.shape().end() - 1);
  out.insert(out.end(), a.shape().begin() + batch_dims + k, a.shape().end());
  return make_array(std::move(out), a.dtype(), dev, make_prim(PrimKind::GatherND, GatherNDParams{batch_dims}),
                    {to_device(a, dev), to_device(indices, dev)});
}

Array scatter(const Array& a, const Array& indices, const Array& updates, int axis, ScatterReduce reduce) {
  check_valid(a, "scatter");
  check_indices(indices, "scatter");
  check_valid(updates, "scatter");
  int ax = normalize_axis(axis, a.ndim(), "scatter", a.shape());
  if (indices.ndim() != a.ndim())
    throw ShapeError("scatter: indices " + describe(indices) + " must have the rank of the array " + describe(a));
  for (int i = 0; i < a.ndim(); ++i)
    if (i != ax && indices.shape()[i] > a.shape()[i])
      throw ShapeError("scatter: indices " + describe(indices) + " are larger than the array " + describe(a) +
                       " on axis " + std::to_string(i));
  if (!broadcastable(updates.shape(), indices.shape()))
    throw ShapeError("scatter: updates " + describe(updates) + " do not broadcast to the indices shape " +
                     shape_to_string(indices.shape()));
  Device dev = common_device({a, indices, updates}, "scatter");
  if (indices.size() == 0) return a;
  Array u = broadcast_to(astype(to_device(updates, dev), a.dtype()), indices.shape());
  return make_array(a.shape(), a.dtype(), dev, make_prim(PrimKind::Scatter, ScatterParams{ax, reduce}),
                    {to_device(a, dev), to_device(indices, dev), u});
}

Array scatter_nd(const Array& a, const Array& indices, const Array& updates, ScatterReduce reduce) {
  check_valid(a, "scatter_nd");
  check_indices(indices, "scatter_nd");
  check_valid(updates, "scatter_nd");
  if (indices.ndim() < 1) throw ShapeError("scatter_nd: indices must have at least one axis, got " + describe(indices));
  const int64_t k = indices.shape().back();
  if (k > a.ndim())
    throw ShapeError("scatter_nd: the last axis of indices " + describe(indices) + " (size " + std::to_string(k) +
                     ") exceeds the rank of the array " + describe(a));
  Shape expected(indices.shape().begin(), indices.shape().end() - 1);
  expected.insert(expected.end(), a.shape().begin() + k, a.shape().end());
  if (!broadcastable(updates.shape(), expected))
    throw ShapeError("scatter_nd: updates " + describe(updates) + " do not broadcast to the expected shape " +
                     shape_to_string(expected) + " (indices " + describe(indices) + ", array " + describe(a) + ")");
  Device dev = common_device({a, indices, updates}, "scatter_nd");
  if (shape_size(expected) == 0) return a;
  Array u = broadcast_to(astype(to_device(updates, dev), a.dtype()), expected);
  return make_array(a.shape(), a.dtype(), dev, make_prim(PrimKind::ScatterND, ScatterParams{0, reduce}),
                    {to_device(a, dev), to_device(indices, dev), u});
}

Array one_hot(const Array& indices, int64_t depth, Dtype dtype) {
  check_indices(indices, "one_hot");
  if (depth < 0) throw InvalidArgument("one_hot: depth must be non-negative, got " + std::to_string(depth));
  // int64 holds every index of the narrower types and every in-range uint64 index; the huge
  // uint64 values turn negative, and unsigned inputs are never matched against negatives.
  Array x = expand_dims(astype(indices, int64), -1);
  Array hit = equal(x, to_device(arange(0.0, static_cast<double>(depth), 1.0, int64), x.device()));
  if (is_signed_integral(indices.dtype()))
    hit = logical_or(hit, equal(x, to_device(arange(static_cast<double>(-depth), 0.0, 1.0, int64), x.device())));
  return astype(hit, dtype);
}

Array nonzero(const Array& a) {
  check_valid(a, "nonzero");
  Array x = a;
  x.eval();
  return backend_for(x.device()).nonzero(x);
}

}  // namespace smelt
