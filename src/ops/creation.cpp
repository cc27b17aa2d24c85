// Creation ops: full, zeros, ones, arange, linspace, eye, tril and triu.
#include <cmath>

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
  if (value.ndim() == 0 && value.is_evaluated() && !value.node().tracer) {
    Scalar s = Scalar::load(value.node().data_ptr(), value.dtype());
    return full_value(shape, s, dtype, default_device());
  }
  return broadcast_to(astype(value, dtype), shape);
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
  int64_t count = n > 0 ? static_cast<int64_t>(n) : 0;
  return make_array({count}, dtype, default_device(), make_prim(PrimKind::Arange, ArangeParams{start, step}), {});
}

Array arange(double start, double stop, double step) { return arange(start, stop, step, float32); }

Array arange(int64_t stop, Dtype dtype) { return arange(0.0, static_cast<double>(stop), 1.0, dtype); }

}  // namespace smelt
