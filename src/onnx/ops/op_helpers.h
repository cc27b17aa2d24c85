// Helpers shared by the ONNX operator families: dtype keeping, axes, and host reads.
#pragma once

#include <string>
#include <vector>

#include "smelt/ops.h"
#include "src/core/shape_math.h"
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

/// An element-type attribute (Cast's `to`, EyeLike's `dtype`, QuantizeLinear's `output_dtype`,
/// ...) checked against TensorProto.DataType: an unknown code, undefined or a type smelt cannot
/// hold fails naming the attribute and the value instead of being reinterpreted.
inline ElemType elem_type_attr(const OpContext& c, const char* name, int64_t fallback, bool allow_string = false) {
  int64_t code = c.attr_int(name, fallback);
  auto t = static_cast<ElemType>(code);
  bool ok = code >= INT32_MIN && code <= INT32_MAX && static_cast<int64_t>(static_cast<int32_t>(t)) == code &&
            (storage_dtype(t).has_value() || (allow_string && t == ElemType::String));
  if (!ok) {
    const bool in_range = code >= INT32_MIN && code <= INT32_MAX;
    std::string known = in_range ? elem_type_name(t) : "unknown";
    c.fail(std::string("attribute '") + name + "' is " + std::to_string(code) +
           (known.rfind("unknown", 0) == 0 ? ", not a known element type" : " (" + known + "), a type it cannot produce"));
  }
  return t;
}

/// An int64 attribute or input used as a size (a count, block size, length): InvalidArgument
/// naming the node, `what` and the value when it is negative, or not positive when `positive`.
inline int64_t size_arg(const OpContext& c, int64_t v, const std::string& what, bool positive = false) {
  if (v < 0 || (positive && v == 0))
    throw InvalidArgument(c.node().label() + ": " + what + " must be " + (positive ? "positive" : "non-negative") +
                          ", got " + std::to_string(v));
  return v;
}

/// a * b for sizes (shape_math's checked_mul naming the node): ShapeError on overflow.
inline int64_t mul_size(const OpContext& c, int64_t a, int64_t b) { return checked_mul(a, b, c.node().label()); }

/// a + b for sizes (shape_math's checked_add naming the node): ShapeError on overflow.
inline int64_t add_size(const OpContext& c, int64_t a, int64_t b) { return checked_add(a, b, c.node().label()); }

}  // namespace smelt::onnx
