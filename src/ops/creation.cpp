// Creation ops: full, zeros, ones, arange, linspace, eye, tril and triu (on the default device).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "src/core/dispatch.h"
#include "src/ops/op_utils.h"

namespace smelt {

namespace {
void check_shape(const Shape& shape, const char* op) {
  for (auto d : shape)
    if (d < 0) throw InvalidArgument(std::string(op) + ": negative dimension in shape " + shape_to_string(shape));
}
}  // namespace

Array full(Shape shape, Array value, Dtype dtype) {
  check_shape(shape, "full");
  check_valid(value, "full");
  // A host value (a number, or any CPU array) is only the fill: the result is made on the default
  // device like zeros (device.h, rule 1). A device value keeps its device (rule 3).
  const bool host = value.device().type == Device::Type::Cpu;
  // Read on the host only: a device value's data_ptr is a device address.
  if (value.ndim() == 0 && value.is_evaluated() && !value.node().tracer && host) {
    Scalar s = Scalar::load(value.node().data_ptr(), value.dtype());
    return full_value(shape, s, dtype, default_device());
  }
  Array v = astype(value, dtype);
  return broadcast_to(host ? to_device(v, default_device()) : v, shape);
}

Array full(Shape shape, Array value) {
  check_valid(value, "full");
  Dtype d = value.dtype();
  return full(std::move(shape), std::move(value), d);
}

Array zeros(Shape shape, Dtype dtype) {
  check_shape(shape, "zeros");
  return full_value(shape, Scalar::of_int(0), dtype, default_device());
}

Array ones(Shape shape, Dtype dtype) {
  check_shape(shape, "ones");
  return full_value(shape, Scalar::of_int(1), dtype, default_device());
}

Array zeros_like(const Array& a) {
  check_valid(a, "zeros_like");
  return full_value(a.shape(), Scalar::of_int(0), a.dtype(), a.device());
}

Array ones_like(const Array& a) {
  check_valid(a, "ones_like");
  return full_value(a.shape(), Scalar::of_int(1), a.dtype(), a.device());
}

Array arange(double start, double stop, double step, Dtype dtype) {
  if (step == 0.0) throw InvalidArgument("arange: step is 0");
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    throw InvalidArgument("arange: start, stop and step must be finite");
  if (dtype == Dtype::Bool) throw DtypeError("arange: bool is not a valid dtype for a range");
  double n = std::ceil((stop - start) / step);
  if (n >= 0x1p62)
    throw InvalidArgument("arange: the range [" + std::to_string(start) + ", " + std::to_string(stop) + ") with step " +
                          std::to_string(step) + " has too many elements");
  int64_t count = n > 0 ? static_cast<int64_t>(n) : 0;
  if (is_integral(dtype)) {
    // NumPy fills integer ranges with the step dtype(start + step) - dtype(start), so
    // arange(0, 5, 0.5, int) is all zeros; truncation is the integer conversion.
    double first = std::trunc(start);
    step = std::trunc(start + step) - first;
    start = first;
  }
  return make_array({count}, dtype, default_device(), make_prim(PrimKind::Arange, ArangeParams{start, step}), {});
}

Array arange(double start, double stop, double step) { return arange(start, stop, step, float32); }

Array arange(int64_t stop, Dtype dtype) { return arange(0.0, static_cast<double>(stop), 1.0, dtype); }

Array linspace(double start, double stop, int64_t num, Dtype dtype, bool endpoint) {
  if (num < 0) throw InvalidArgument("linspace: num must be non-negative, got " + std::to_string(num));
  // NumPy's arithmetic in float64: start + i * step, the last element exactly stop, floor for
  // integer dtypes, then the cast. Computed here: the values are fixed by the arguments alone.
  const int64_t div = endpoint ? num - 1 : num;
  const double delta = stop - start;
  std::vector<double> y(static_cast<size_t>(num));
  if (div > 0) {
    const double step = delta / div;
    // A step that underflows to 0 (denormal ranges) is applied as i / div * delta, as NumPy does.
    for (int64_t i = 0; i < num; ++i)
      y[i] = (step == 0.0 ? static_cast<double>(i) / static_cast<double>(div) * delta : static_cast<double>(i) * step) +
             start;
  } else {
    for (int64_t i = 0; i < num; ++i) y[i] = static_cast<double>(i) * delta + start;
  }
  if (endpoint && num > 1) y.back() = stop;
  if (is_integral(dtype))
    for (auto& v : y) v = std::floor(v);
  std::vector<char> bytes(y.size() * size_of(dtype));
  dispatch_all(dtype, [&]<class T>() {
    for (size_t i = 0; i < y.size(); ++i) {
      T v = convert<T, double>(y[i]);
      std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
    }
  });
  // Made without array inputs: on the default device (device.h, rule 1).
  return to_device(Array(bytes.data(), {num}, dtype, num), default_device());
}

namespace {

// An int64 column [rows, 1] holding i + offset: compared with a [1, cols] row of column indices
// it makes the diagonal masks of eye, tril and triu.
Array row_index(int64_t rows, int64_t offset, Device device) {
  return make_array({rows, 1}, int64, device, make_prim(PrimKind::Arange, ArangeParams{static_cast<double>(offset), 1.0}),
                    {});
}
Array col_index(int64_t cols, Device device) {
  return make_array({1, cols}, int64, device, make_prim(PrimKind::Arange, ArangeParams{0.0, 1.0}), {});
}

}  // namespace

Array eye(int64_t n, std::optional<int64_t> m, int64_t k, Dtype dtype) {
  int64_t cols = m.value_or(n);
  if (n < 0 || cols < 0)
    throw InvalidArgument("eye: negative dimension, n = " + std::to_string(n) + ", m = " + std::to_string(cols));
  // Diagonals outside [-n, cols] are all zero, as are these two: clamping keeps the offsets exact.
  k = std::clamp<int64_t>(k, -n, cols);
  Device dev = default_device();
  return astype(equal(row_index(n, k, dev), col_index(cols, dev)), dtype);
}

Array identity(int64_t n, Dtype dtype) {
  if (n < 0) throw InvalidArgument("identity: negative dimension, n = " + std::to_string(n));
  return eye(n, n, 0, dtype);
}

namespace {

Array triangle(const Array& a, int64_t k, bool lower, const char* op) {
  check_valid(a, op);
  if (a.ndim() < 2)
    throw InvalidArgument(std::string(op) + ": needs an array of at least 2 dimensions, got " + describe(a));
  const int64_t rows = a.shape()[a.ndim() - 2], cols = a.shape()[a.ndim() - 1];
  // Offsets beyond [-rows, cols] keep or drop every element, like the bounds themselves.
  k = std::clamp<int64_t>(k, -rows, cols);
  Array r = row_index(rows, k, a.device()), c = col_index(cols, a.device());
  // tril keeps j <= i + k, triu keeps j >= i + k.
  Array mask = lower ? greater_equal(r, c) : less_equal(r, c);
  return where(mask, a, full_value({}, Scalar::of_int(0), a.dtype(), a.device()));
}

}  // namespace

Array tril(const Array& a, int64_t k) { return triangle(a, k, true, "tril"); }
Array triu(const Array& a, int64_t k) { return triangle(a, k, false, "triu"); }

}  // namespace smelt
