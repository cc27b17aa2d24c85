// Reduction and scan ops: sum, mean, prod, max, min, all, any, logsumexp, var, std, argmax/argmin, cum*.
#include <cmath>
#include <limits>

#include "src/core/shape_math.h"
#include "src/ops/op_utils.h"
#include "src/primitives/dtype_rules.h"

namespace smelt {

namespace {

/// The dtype of mean/var/std/logsumexp: floats keep theirs, integers and bool give float32.
Dtype float_result_dtype(Dtype d) { return is_floating(d) ? d : float32; }


Shape kept_shape(const Shape& s, const std::vector<int>& axes) {
  Shape out = s;
  for (int ax : axes) out[ax] = 1;
  return out;
}

Shape dropped_shape(const Shape& s, const std::vector<int>& axes) {
  Shape out;
  for (int i = 0, j = 0; i < static_cast<int>(s.size()); ++i) {
    if (j < static_cast<int>(axes.size()) && axes[j] == i) {
      ++j;
      continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

int64_t reduced_count(const Shape& s, const std::vector<int>& axes) {
  int64_t n = 1;
  for (int ax : axes) n = checked_mul(n, s[ax], "reduce");
  return n;
}

/// Raises for a reduction without identity (max, min, argmax, argmin) over a zero-size axis.
void check_nonempty(const Array& a, const std::vector<int>& axes, const char* op) {
  for (int ax : axes)
    if (a.shape()[ax] == 0)
      throw InvalidArgument(std::string(op) + ": zero-size reduction over axis " + std::to_string(ax) + " of " +
                            describe(a) + " has no identity");
}

Array reduce_node(const Array& a, const std::vector<int>& axes, bool keepdims, ReduceOp op, Dtype out,
                  int64_t ddof = 0) {
  Array r = make_array(kept_shape(a.shape(), axes), out, a.device(),
                       make_prim(PrimKind::Reduce, ReduceParams{op, axes, ddof}), {a});
  return keepdims ? r : reshape(r, dropped_shape(a.shape(), axes));
}

Array reduce(const Array& a, const Axes& axes, bool keepdims, ReduceOp op, const char* name) {
  check_valid(a, name);
  auto ax = normalize_axes(axes, a.ndim(), name, a.shape());
  Dtype out = a.dtype();
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Prod: out = sum_dtype(a.dtype()); break;
    case ReduceOp::Max:
    case ReduceOp::Min: check_nonempty(a, ax, name); break;
    case ReduceOp::All:
    case ReduceOp::Any: out = bool_; break;
    case ReduceOp::Mean: out = float_compute_dtype(a.dtype()); break;
  }
  return reduce_node(a, ax, keepdims, op, out);
}

Array scalar_of(double v, Dtype dtype, Device device) { return full_value({}, Scalar::of_float(v), dtype, device); }

/// Variance in the compute dtype (see float_compute_dtype), before the final rounding.
Array var_compute(const Array& a, const Axes& axes, bool keepdims, int ddof, const char* name) {
  check_valid(a, name);
  auto ax = normalize_axes(axes, a.ndim(), name, a.shape());
  Dtype ct = float_compute_dtype(a.dtype());
  Array x = astype(a, ct);
  // The counts are divided in the Reduce(mean) kernel, not captured, so they follow the input's
  // shape under shapeless compile. NumPy divides by max(n - ddof, 0): too few elements give inf
  // or NaN, not an error.
  Array m = reduce_node(x, ax, true, ReduceOp::Mean, ct);
  Array d = subtract(x, m);
  return reduce_node(multiply(d, d), ax, keepdims, ReduceOp::Mean, ct, ddof);
}

Array argreduce(const Array& a, int axis, bool keepdims, bool last, ArgReduceOp op, const char* name) {
  check_valid(a, name);
  int ax = normalize_axis(axis, a.ndim(), name, a.shape());
  if (a.shape()[ax] == 0)
    throw InvalidArgument(std::string(name) + ": zero-size reduction over axis " + std::to_string(ax) + " of " +
                          describe(a) + " has no identity (an empty sequence has no " + name + ")");
  std::vector<int> axes{ax};
  Array r = make_array(kept_shape(a.shape(), axes), int64, a.device(),
                       make_prim(PrimKind::ArgReduce, ArgReduceParams{op, ax, last}), {a});
  return keepdims ? r : reshape(r, dropped_shape(a.shape(), axes));
}

Array argreduce_flat(const Array& a, bool keepdims, ArgReduceOp op, const char* name) {
  check_valid(a, name);
  if (a.size() == 0)
    throw InvalidArgument(std::string(name) + ": zero-size reduction over the flattened " + describe(a) +
                          " has no identity (an empty sequence has no " + name + ")");
  Array r = argreduce(reshape(a, {a.size()}), 0, false, false, op, name);
  return keepdims ? reshape(r, Shape(a.ndim(), 1)) : r;
}

Array scan(const Array& a, int axis, bool reverse, bool exclusive, ScanOp op, const char* name) {
  check_valid(a, name);
  int ax = normalize_axis(axis, a.ndim(), name, a.shape());
  Dtype out = op == ScanOp::Sum || op == ScanOp::Prod ? sum_dtype(a.dtype()) : a.dtype();
  return make_array(a.shape(), out, a.device(), make_prim(PrimKind::Scan, ScanParams{op, ax, reverse, exclusive}),
                    {a});
}

}  // namespace

Array sum(const Array& a, const Axes& axes, bool keepdims) { return reduce(a, axes, keepdims, ReduceOp::Sum, "sum"); }
Array prod(const Array& a, const Axes& axes, bool keepdims) { return reduce(a, axes, keepdims, ReduceOp::Prod, "prod"); }
Array max(const Array& a, const Axes& axes, bool keepdims) { return reduce(a, axes, keepdims, ReduceOp::Max, "max"); }
Array min(const Array& a, const Axes& axes, bool keepdims) { return reduce(a, axes, keepdims, ReduceOp::Min, "min"); }
Array all(const Array& a, const Axes& axes, bool keepdims) { return reduce(a, axes, keepdims, ReduceOp::All, "all"); }
Array any(const Array& a, const Axes& axes, bool keepdims) { return reduce(a, axes, keepdims, ReduceOp::Any, "any"); }

Array mean(const Array& a, const Axes& axes, bool keepdims) {
  check_valid(a, "mean");
  auto ax = normalize_axes(axes, a.ndim(), "mean", a.shape());
  Dtype ct = float_compute_dtype(a.dtype());
  // Sum, then divide by the count, in the kernel (the count follows the shape under shapeless
  // compile). An empty mean is 0 / 0 = NaN, as in NumPy.
  Array s = reduce_node(astype(a, ct), ax, keepdims, ReduceOp::Mean, ct);
  return astype(s, float_result_dtype(a.dtype()));
}

Array var(const Array& a, const Axes& axes, bool keepdims, int ddof) {
  Array v = var_compute(a, axes, keepdims, ddof, "var");
  return astype(v, float_result_dtype(a.dtype()));
}

Array std(const Array& a, const Axes& axes, bool keepdims, int ddof) {
  Array v = var_compute(a, axes, keepdims, ddof, "std");
  return astype(sqrt(v), float_result_dtype(a.dtype()));
}

Array logsumexp(const Array& a, const Axes& axes, bool keepdims) {
  check_valid(a, "logsumexp");
  auto ax = normalize_axes(axes, a.ndim(), "logsumexp", a.shape());
  Dtype ct = float_compute_dtype(a.dtype()), rt = float_result_dtype(a.dtype());
  Array x = astype(a, ct);
  if (reduced_count(a.shape(), ax) == 0)  // log(0) = -inf, with no max to shift by
    return astype(log(reduce_node(exp(x), ax, keepdims, ReduceOp::Sum, ct)), rt);
  // Shift by the max for stability; an infinite max shifts by 0 so inf - inf never appears.
  Array m = reduce_node(x, ax, true, ReduceOp::Max, ct);
  m = where(isfinite(m), m, scalar_of(0.0, ct, a.device()));
  Array s = reduce_node(exp(subtract(x, m)), ax, keepdims, ReduceOp::Sum, ct);
  Array shift = keepdims ? m : reshape(m, dropped_shape(a.shape(), ax));
  return astype(add(log(s), shift), rt);
}

Array argmax(const Array& a, int axis, bool keepdims, bool last) {
  return argreduce(a, axis, keepdims, last, ArgReduceOp::ArgMax, "argmax");
}
Array argmin(const Array& a, int axis, bool keepdims, bool last) {
  return argreduce(a, axis, keepdims, last, ArgReduceOp::ArgMin, "argmin");
}
Array argmax(const Array& a, bool keepdims) { return argreduce_flat(a, keepdims, ArgReduceOp::ArgMax, "argmax"); }
Array argmin(const Array& a, bool keepdims) { return argreduce_flat(a, keepdims, ArgReduceOp::ArgMin, "argmin"); }

Array cumsum(const Array& a, int axis, bool reverse, bool exclusive) {
  return scan(a, axis, reverse, exclusive, ScanOp::Sum, "cumsum");
}
Array cumprod(const Array& a, int axis, bool reverse, bool exclusive) {
  return scan(a, axis, reverse, exclusive, ScanOp::Prod, "cumprod");
}
Array cummax(const Array& a, int axis, bool reverse) { return scan(a, axis, reverse, false, ScanOp::Max, "cummax"); }
Array cummin(const Array& a, int axis, bool reverse) { return scan(a, axis, reverse, false, ScanOp::Min, "cummin"); }

}  // namespace smelt
