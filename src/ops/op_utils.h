// Argument checks and helpers shared by the public ops (axes, shapes, devices, messages).
#pragma once

#include <string>
#include <vector>

#include "smelt/array.h"
#include "smelt/errors.h"
#include "smelt/ops.h"
#include "src/core/node.h"

namespace smelt {

/// "float32[2,3]" for messages.
std::string describe(const Array& a);
/// Throws InvalidArgument naming `op` when `a` is an empty handle.
void check_valid(const Array& a, const char* op);
/// Axis in [0, ndim); negative counts from the end. Throws InvalidArgument naming `op` and `a`.
int normalize_axis(int axis, int ndim, const char* op, const Shape& shape);
/// Sorted, unique, non-negative axes; all axes when `axes` is empty and `empty_means_all`.
std::vector<int> normalize_axes(const Axes& axes, int ndim, const char* op, const Shape& shape,
                                bool empty_means_all = true);
/// The shape both broadcast to; ShapeError naming `op` when they don't.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
/// The device the inputs share (the default device when there are none).
Device common_device(const std::vector<Array>& arrays, const char* op);
/// `a` on `device` (a no-op when already there).
Array to_device(const Array& a, Device device);
/// A Full node: `value` converted to `dtype`, shape `shape`.
Array full_value(const Shape& shape, const Scalar& value, Dtype dtype, Device device);

}  // namespace smelt
