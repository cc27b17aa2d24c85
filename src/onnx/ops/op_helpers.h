// Helpers shared by the ONNX operator families: dtype keeping, axes, and host reads.
#pragma once

#include <string>
#include <vector>

#include "smelt/ops.h"
#include "src/onnx/registry.h"

namespace smelt::onnx {

/// `a` converted to `dtype` when smelt's NumPy promotion gave another type (ONNX keeps T).
inline Array keep_dtype(const Array& a, Dtype dtype) { return a.dtype() == dtype ? a : astype(a, dtype); }

/// An ONNX axis in [-rank, rank) made non-negative; fails naming the op otherwise.
inline int onnx_axis(const OpContext& c, int64_t axis, int64_t rank, const char* what = "axis") {
  if (axis < -rank || axis >= rank)
    c.fail(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

inline std::string shape_str(const Shape& s) { return shape_to_string(s); }

}  // namespace smelt::onnx
