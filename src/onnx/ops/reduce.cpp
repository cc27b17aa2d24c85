// ONNX reductions (ReduceSum, ReduceMean, ..., ArgMax/ArgMin) and TopK over smelt ops.
#include <algorithm>
#include <cmath>
#include <limits>

#include "src/onnx/ops/op_helpers.h"

namespace smelt::onnx {

namespace {

enum class Red { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

/// The value an empty reduction gives (ONNX 18 defines them for every reduction).
double empty_value(Red r, Dtype dt) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (r) {
    case Red::Sum:
    case Red::L1:
    case Red::L2:
    case Red::SumSquare: return 0.0;
    case Red::Prod: return 1.0;
    case Red::Mean: return std::numeric_limits<double>::quiet_NaN();
    case Red::Max:
      return is_floating(dt) ? -inf : is_unsigned_integral(dt) ? 0.0 : -std::pow(2.0, size_of(dt) * 8 - 1);
    case Red::Min:
      return is_floating(dt) ? inf : is_unsigned_integral(dt) ? std::pow(2.0, size_of(dt) * 8) - 1 : std::pow(2.0, size_of(dt) * 8 - 1) - 1;
    case Red::LogSum:
    case Red::LogSumExp: return -inf;
  }
  return 0.0;
}

Array reduce_with(Red r, const Array& x, const Axes& axes, bool keep) {
  Dtype dt = x.dtype();
  switch (r) {
    case Red::Sum: return keep_dtype(sum(x, axes, keep), dt);
    case Red::Mean: return keep_dtype(mean(x, axes, keep), dt);
    case Red::Max: return dt == bool_ ? any(x, axes, keep) : max(x, axes, keep);
    case Red::Min: return dt == bool_ ? all(x, axes, keep) : min(x, axes, keep);
    case Red::Prod: return keep_dtype(prod(x, axes, keep), dt);
    case Red::L1: return keep_dtype(sum(abs(x), axes, keep), dt);
    case Red::L2: {
      // In float for the square root; integers round back.
      Dtype wide = dt == float64 ? float64 : float32;
      Array xf = astype(x, wide);
      Array y = sqrt(sum(multiply(xf, xf), axes, keep));
      return is_integral(dt) ? astype(round(y), dt) : astype(y, dt);
    }
    case Red::LogSum: return keep_dtype(log(sum(x, axes, keep)), dt);
    case Red::LogSumExp: return keep_dtype(logsumexp(x, axes, keep), dt);
    case Red::SumSquare: return keep_dtype(sum(multiply(x, x), axes, keep), dt);
  }
  return x;
}

template <Red R>
std::vector<Value> reduce_op(OpContext& c, bool axes_from_input) {
  const Array& x = c.tensor(0);
  if (x.dtype() == bool_ && R != Red::Max && R != Red::Min)
    c.fail("bool input is not allowed, got " + c.input(0).describe());
  bool keep = c.attr_int("keepdims", 1) != 0;
  std::vector<int64_t> axes;
  if (axes_from_input) {
    if (c.has(1)) axes = c.ints(1);
  } else {
    axes = c.attr_ints("axes");
  }
  if (axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0) {
    if (R == Red::L1) return {tv(keep_dtype(abs(x), x.dtype()))};
    if (R == Red::SumSquare) return {tv(keep_dtype(multiply(x, x), x.dtype()))};
    return {tv(x)};
  }
  Axes ax;
  for (auto a : axes) ax.push_back(onnx_axis(c, a, x.ndim()));
  if (ax.empty())
    for (int i = 0; i < x.ndim(); ++i) ax.push_back(i);
  bool empty = false;
  for (int a : ax) empty = empty || x.shape()[a] == 0;
  if (empty) {
    Shape out;
    for (int i = 0; i < x.ndim(); ++i) {
      bool reduced = std::find(ax.begin(), ax.end(), i) != ax.end();
      if (!reduced) out.push_back(x.shape()[i]);
      else if (keep) out.push_back(1);
    }
    return {tv(full(out, Array(empty_value(R, x.dtype())), x.dtype()))};
  }
  return {tv(reduce_with(R, x, ax, keep))};
}

template <Red R>
std::vector<Value> reduce_attr(OpContext& c) { return reduce_op<R>(c, false); }
template <Red R>
std::vector<Value> reduce_input(OpContext& c) { return reduce_op<R>(c, true); }

template <bool Max>
std::vector<Value> arg_reduce(OpContext& c) {
  const Array& x = c.tensor(0);
  int axis = onnx_axis(c, c.attr_int("axis", 0), std::max(x.ndim(), 1));
  bool keep = c.attr_int("keepdims", 1) != 0;
  bool last = c.attr_int("select_last_index", 0) != 0;
  if (x.ndim() > 0 && x.shape()[axis] == 0) c.fail("cannot reduce an empty axis of " + c.input(0).describe());
  return {tv(Max ? argmax(x, axis, keep, last) : argmin(x, axis, keep, last))};
}

std::vector<Value> topk_impl(OpContext& c, int64_t k) {
  const Array& x = c.tensor(0);
  int axis = onnx_axis(c, c.attr_int("axis", -1), x.ndim());
  bool largest = c.attr_int("largest", 1) != 0;
  bool sorted = c.attr_int("sorted", 1) != 0;
  if (k < 0 || k > x.shape()[axis])
    c.fail("k = " + std::to_string(k) + " is outside [0, " + std::to_string(x.shape()[axis]) + "] for " + c.input(0).describe());
  auto [values, indices] = topk(x, k, axis, largest, sorted);
  return {tv(values), tv(indices)};
}

std::vector<Value> op_topk_1(OpContext& c) { return topk_impl(c, c.attr_int("k", 0)); }
std::vector<Value> op_topk_10(OpContext& c) { return topk_impl(c, c.scalar_int(1)); }

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  r.add("", "ReduceSum", 1, reduce_attr<Red::Sum>);
  r.add("", "ReduceSum", 13, reduce_input<Red::Sum>);
  r.add("", "ReduceMean", 1, reduce_attr<Red::Mean>);
  r.add("", "ReduceMean", 18, reduce_input<Red::Mean>);
  r.add("", "ReduceMax", 1, reduce_attr<Red::Max>);
  r.add("", "ReduceMax", 18, reduce_input<Red::Max>);
  r.add("", "ReduceMin", 1, reduce_attr<Red::Min>);
  r.add("", "ReduceMin", 18, reduce_input<Red::Min>);
  r.add("", "ReduceProd", 1, reduce_attr<Red::Prod>);
  r.add("", "ReduceProd", 18, reduce_input<Red::Prod>);
  r.add("", "ReduceL1", 1, reduce_attr<Red::L1>);
  r.add("", "ReduceL1", 18, reduce_input<Red::L1>);
  r.add("", "ReduceL2", 1, reduce_attr<Red::L2>);
  r.add("", "ReduceL2", 18, reduce_input<Red::L2>);
  r.add("", "ReduceLogSum", 1, reduce_attr<Red::LogSum>);
  r.add("", "ReduceLogSum", 18, reduce_input<Red::LogSum>);
  r.add("", "ReduceLogSumExp", 1, reduce_attr<Red::LogSumExp>);
  r.add("", "ReduceLogSumExp", 18, reduce_input<Red::LogSumExp>);
  r.add("", "ReduceSumSquare", 1, reduce_attr<Red::SumSquare>);
  r.add("", "ReduceSumSquare", 18, reduce_input<Red::SumSquare>);
  r.add("", "ArgMax", 1, arg_reduce<true>);
  r.add("", "ArgMin", 1, arg_reduce<false>);
  r.add("", "TopK", 1, op_topk_1);
  r.add("", "TopK", 10, op_topk_10);
}

}  // namespace smelt::onnx
