// isclose, allclose and array_equal: NumPy's comparisons of whole arrays, composed of element-wise ops.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "smelt/compare.h"
#include "src/ops/op_utils.h"

namespace smelt {

namespace {

/// The dtype two arrays are compared in. Floats of one family compare in their promoted dtype
/// (NumPy), but float16/bfloat16 in float32 so that neither the difference nor the tolerance is
/// rounded to 16 bits. An integer or bool operand makes it float64, which holds every int32 and
/// every float exactly (NumPy's int32 with float32 is float64 too; smelt's own promotion would
/// give float32 and merge distinct integers above 2^24).
Dtype compare_dtype(Dtype a, Dtype b) {
  if (!is_floating(a) || !is_floating(b)) return float64;
  Dtype p = promote_types(a, b);
  return p == float16 || p == bfloat16 ? float32 : p;
}

void check_tolerances(double rtol, double atol, const char* op) {
  auto check = [op](double v, const char* name) {
    if (v >= 0.0 && !std::isinf(v)) return;
    std::ostringstream os;
    os << v;
    throw InvalidArgument(std::string(op) + ": " + name + " must be a finite non-negative number, got " + os.str());
  };
  check(rtol, "rtol");
  check(atol, "atol");
}

/// isclose after the checks, which name `op`.
Array close_elements(const Array& a, const Array& b, double rtol, double atol, bool equal_nan, const char* op) {
  check_valid(a, op);
  check_valid(b, op);
  check_tolerances(rtol, atol, op);
  // The shapes are checked here so that the error names the op the user called (the element-wise
  // ops' message).
  const size_t n = static_cast<size_t>(std::max(a.ndim(), b.ndim()));
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.shape().size() ? 1 : a.shape()[i - (n - a.shape().size())];
    int64_t db = i < n - b.shape().size() ? 1 : b.shape()[i - (n - b.shape().size())];
    if (da != db && da != 1 && db != 1)
      throw ShapeError(std::string(op) + ": shapes cannot be broadcast together (" + describe(a) + ", " +
                       describe(b) + ")");
  }
  const Dtype ct = compare_dtype(a.dtype(), b.dtype());
  Array x = astype(a, ct), y = astype(b, ct);
  // NumPy's formula. |x - y| is NaN when either is NaN or both are the same infinity, so those
  // fall to x == y (true for equal infinities); isfinite(y) keeps a finite x from being "close"
  // to an infinite y through an infinite tolerance.
  Array within = logical_and(less_equal(abs(x - y), atol + rtol * abs(y)), isfinite(y));
  Array close = logical_or(within, equal(x, y));
  if (equal_nan) close = logical_or(close, logical_and(isnan(x), isnan(y)));
  return close;
}

}  // namespace

Array isclose(const Array& a, const Array& b, double rtol, double atol, bool equal_nan) {
  return close_elements(a, b, rtol, atol, equal_nan, "isclose");
}

bool allclose(const Array& a, const Array& b, double rtol, double atol, bool equal_nan) {
  return all(close_elements(a, b, rtol, atol, equal_nan, "allclose")).item<bool>();
}

bool array_equal(const Array& a, const Array& b, bool equal_nan) {
  check_valid(a, "array_equal");
  check_valid(b, "array_equal");
  if (a.shape() != b.shape()) return false;
  const Dtype ct = is_floating(a.dtype()) && is_floating(b.dtype()) ? promote_types(a.dtype(), b.dtype())
                   : a.dtype() == b.dtype()                         ? a.dtype()
                   : !is_floating(a.dtype()) && !is_floating(b.dtype()) ? promote_types(a.dtype(), b.dtype())
                                                                        : float64;
  // Integers of two signednesses promote to a type holding both (int64 with uint64: float64,
  // which NumPy also uses); an integer with a float compares in float64, as in compare_dtype.
  Array x = astype(a, ct), y = astype(b, ct);
  Array same = equal(x, y);
  if (equal_nan && is_floating(ct)) same = logical_or(same, logical_and(isnan(x), isnan(y)));
  return all(same).item<bool>();
}

}  // namespace smelt
