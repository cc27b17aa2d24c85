// Compositions of primitives: softmax, log_softmax, layer_norm, rms_norm, gelu, silu.
//
// Each computes in float32 (float64 for float64 inputs) and rounds once to the result dtype, so
// float16/bfloat16 results are as accurate as the storage allows. Integer inputs give float32.
#include <cmath>

#include "src/ops/op_utils.h"

namespace smelt {

namespace {

Dtype result_dtype(Dtype d) { return is_floating(d) ? d : float32; }
Dtype compute_dtype(Dtype d) { return d == float64 ? float64 : float32; }

Array constant(double v, Dtype dtype, Device device) { return full_value({}, Scalar::of_float(v), dtype, device); }

/// Checks an optional per-feature parameter: 1-d with the size of x's last axis.
void check_param(const std::optional<Array>& p, const Array& x, const char* op, const char* what) {
  if (!p) return;
  check_valid(*p, op);
  int64_t d = x.shape().back();
  if (p->ndim() != 1 || p->shape()[0] != d)
    throw ShapeError(std::string(op) + ": " + what + " " + describe(*p) + " must have shape [" + std::to_string(d) +
                     "] (the last axis of " + describe(x) + ")");
}

void check_rank(const Array& x, const char* op) {
  check_valid(x, op);
  if (x.ndim() == 0)
    throw InvalidArgument(std::string(op) + ": needs at least 1 dimension to normalize over, got " + describe(x));
}

}  // namespace

Array softmax(const Array& a, const Axes& axes) {
  check_valid(a, "softmax");
  auto ax = normalize_axes(axes, a.ndim(), "softmax", a.shape());
  Dtype rt = result_dtype(a.dtype());
  if (a.size() == 0) return astype(a, rt);
  Axes ra(ax.begin(), ax.end());
  Array x = astype(a, compute_dtype(a.dtype()));
  Array e = exp(subtract(x, max(x, ra, true)));
  return astype(divide(e, sum(e, ra, true)), rt);
}

Array log_softmax(const Array& a, const Axes& axes) {
  check_valid(a, "log_softmax");
  auto ax = normalize_axes(axes, a.ndim(), "log_softmax", a.shape());
  Dtype rt = result_dtype(a.dtype());
  if (a.size() == 0) return astype(a, rt);
  Axes ra(ax.begin(), ax.end());
  Array x = astype(a, compute_dtype(a.dtype()));
  Array shifted = subtract(x, max(x, ra, true));
  return astype(subtract(shifted, log(sum(exp(shifted), ra, true))), rt);
}

Array layer_norm(const Array& x, const std::optional<Array>& weight, const std::optional<Array>& bias, double eps) {
  check_rank(x, "layer_norm");
  check_param(weight, x, "layer_norm", "weight");
  check_param(bias, x, "layer_norm", "bias");
  Dtype rt = result_dtype(x.dtype());
  if (weight) rt = promote_types(rt, weight->dtype());
  if (bias) rt = promote_types(rt, bias->dtype());
  Dtype ct = compute_dtype(rt);
  Device dev = x.device();
  Array xc = astype(x, ct);
  // mean divides by the count in its kernel (bit-identical to sum / n), so the count follows the
  // shape under shapeless compile.
  Array d = subtract(xc, mean(xc, {-1}, true));
  Array var = mean(multiply(d, d), {-1}, true);
  Array y = multiply(d, rsqrt(add(var, constant(eps, ct, dev))));
  if (weight) y = multiply(y, astype(*weight, ct));
  if (bias) y = add(y, astype(*bias, ct));
  return astype(y, rt);
}

Array rms_norm(const Array& x, const std::optional<Array>& weight, double eps) {
  check_rank(x, "rms_norm");
  check_param(weight, x, "rms_norm", "weight");
  Dtype rt = result_dtype(x.dtype());
  if (weight) rt = promote_types(rt, weight->dtype());
  Dtype ct = compute_dtype(rt);
  Device dev = x.device();
  Array xc = astype(x, ct);
  Array ms = mean(multiply(xc, xc), {-1}, true);
  Array y = multiply(xc, rsqrt(add(ms, constant(eps, ct, dev))));
  if (weight) y = multiply(y, astype(*weight, ct));
  return astype(y, rt);
}

Array gelu(const Array& x, bool approximate) {
  check_valid(x, "gelu");
  Dtype ct = compute_dtype(x.dtype());
  Device dev = x.device();
  Array xc = astype(x, ct);
  Array inner;
  if (approximate) {
    // tanh form: sqrt(2/pi) * (x + 0.044715 x^3)
    Array cube = multiply(multiply(xc, xc), xc);
    Array poly = add(xc, multiply(constant(0.044715, ct, dev), cube));
    inner = tanh(multiply(constant(std::sqrt(2.0 / M_PI), ct, dev), poly));
  } else {
    inner = erf(multiply(xc, constant(M_SQRT1_2, ct, dev)));
  }
  Array y = multiply(multiply(constant(0.5, ct, dev), xc), add(constant(1.0, ct, dev), inner));
  return astype(y, result_dtype(x.dtype()));
}

Array silu(const Array& x) {
  check_valid(x, "silu");
  Array xc = astype(x, compute_dtype(x.dtype()));
  return astype(multiply(xc, sigmoid(xc)), result_dtype(x.dtype()));
}

}  // namespace smelt
