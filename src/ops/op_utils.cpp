// Argument checks and helpers shared by the public ops.
#include "src/ops/op_utils.h"

#include <algorithm>

namespace smelt {

std::string describe(const Array& a) {
  if (!a.valid()) return "<empty>";
  return std::string(dtype_name(a.dtype())) + shape_to_string(a.shape());
}

void check_valid(const Array& a, const char* op) {
  if (!a.valid()) throw InvalidArgument(std::string(op) + ": an input is an empty handle (default-constructed Array)");
}

int normalize_axis(int axis, int ndim, const char* op, const Shape& shape) {
  int a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a >= ndim)
    throw InvalidArgument(std::string(op) + ": axis " + std::to_string(axis) +
                          " is out of range for an array of rank " + std::to_string(ndim) +
                          " (shape " + shape_to_string(shape) + ")");
  return a;
}

std::vector<int> normalize_axes(const Axes& axes, int ndim, const char* op, const Shape& shape,
                                bool empty_means_all) {
  std::vector<int> out;
  if (axes.empty() && empty_means_all) {
    for (int i = 0; i < ndim; ++i) out.push_back(i);
    return out;
  }
  for (int ax : axes) out.push_back(normalize_axis(ax, ndim, op, shape));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw InvalidArgument(std::string(op) + ": repeated axis in the axes for shape " + shape_to_string(shape));
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw ShapeError(std::string(op) + ": shapes " + shape_to_string(a) + " and " + shape_to_string(b) +
                       " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) { return broadcast_shapes(a, b, "broadcast_shapes"); }

Device common_device(const std::vector<Array>& arrays, const char* op) {
  if (arrays.empty()) return default_device();
  // The one rule of device.h (rule 3): the GPU among the inputs wins and the CPU inputs move
  // there (the callers wrap them in to_device); inputs on two different GPUs are a DeviceError.
  // Compiled functions replay the devices this chose while tracing.
  Device d = Device::cpu();
  for (auto& a : arrays) {
    check_valid(a, op);
    if (a.device().type != Device::Type::Cpu) {
      if (d.type != Device::Type::Cpu && !(d == a.device()))
        throw DeviceError(std::string(op) + ": inputs live on different devices (" + d.str() + " and " +
                          a.device().str() + ")");
      d = a.device();
    }
  }
  return d;
}

Array to_device(const Array& a, Device device) {
  check_valid(a, "to_device");
  if (a.device() == device) return a;
  if (device.type == Device::Type::Cuda && (device.index < 0 || device.index >= cuda_device_count()))
    throw DeviceError("to_device: " + device.str() + " is not available (" +
                      std::to_string(cuda_device_count()) + " GPUs visible; " +
                      (cuda_available() ? "" : "no CUDA in this build or no GPU; ") + "array " + describe(a) + ")");
  // A Copy across devices: eval runs it as a transfer.
  return make_array(a.shape(), a.dtype(), device, make_prim(PrimKind::Copy, NoParams{}), {a});
}

Array full_value(const Shape& shape, const Scalar& value, Dtype dtype, Device device) {
  return make_array(shape, dtype, device, make_prim(PrimKind::Full, FullParams{value.cast(dtype)}), {});
}

}  // namespace smelt
