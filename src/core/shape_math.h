// Checked size arithmetic: every element count, stride, pad, repeat and block size goes through here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "smelt/array.h"
#include "smelt/dtype.h"
#include "smelt/errors.h"

namespace smelt {

/// The most bytes one array may span. User-space virtual addresses are 47 bits on x86-64 (and at
/// most 48 on AArch64), so no allocation beyond this can succeed; refusing it up front turns an
/// absurd shape into a ShapeError instead of a wrapped size or a failed allocation far away.
inline constexpr int64_t kMaxArrayBytes = int64_t{1} << 47;

namespace shape_math_detail {
inline std::string op_text(std::string_view op) { return std::string(op); }
}  // namespace shape_math_detail

/// a * b of sizes; ShapeError naming `op` and both values when it does not fit in int64.
inline int64_t checked_mul(int64_t a, int64_t b, std::string_view op) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw ShapeError(shape_math_detail::op_text(op) + ": size " + std::to_string(a) + " * " + std::to_string(b) +
                     " overflows int64");
  return r;
}

/// a + b of sizes; ShapeError naming `op` and both values when it does not fit in int64.
inline int64_t checked_add(int64_t a, int64_t b, std::string_view op) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    throw ShapeError(shape_math_detail::op_text(op) + ": size " + std::to_string(a) + " + " + std::to_string(b) +
                     " overflows int64");
  return r;
}

/// a - b of sizes; ShapeError naming `op` and both values when it does not fit in int64.
inline int64_t checked_sub(int64_t a, int64_t b, std::string_view op) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r))
    throw ShapeError(shape_math_detail::op_text(op) + ": size " + std::to_string(a) + " - " + std::to_string(b) +
                     " overflows int64");
  return r;
}

/// An int64 attribute or input value used as a size: InvalidArgument naming `op`, `what` and the
/// value when it is negative.
inline int64_t to_size(int64_t v, std::string_view op, std::string_view what) {
  if (v < 0)
    throw InvalidArgument(shape_math_detail::op_text(op) + ": " + std::string(what) + " " + std::to_string(v) +
                          " is negative");
  return v;
}

/// An int64 value narrowed to int (axes, permutation entries, block sizes of kernels that index
/// with int): InvalidArgument naming `op`, `what` and the value when it does not fit.
inline int to_int(int64_t v, std::string_view op, std::string_view what) {
  if (v < INT32_MIN || v > INT32_MAX)
    throw InvalidArgument(shape_math_detail::op_text(op) + ": " + std::string(what) + " " + std::to_string(v) +
                          " does not fit in an int");
  return static_cast<int>(v);
}

/// The element count of `shape`. A negative dimension is InvalidArgument; a product that does not
/// fit in int64 is ShapeError. A zero anywhere gives 0 whatever the other dimensions are: an empty
/// array never addresses memory.
inline int64_t element_count(const Shape& shape, std::string_view op) {
  bool empty = false;
  for (auto d : shape) {
    if (d < 0)
      throw InvalidArgument(shape_math_detail::op_text(op) + ": negative dimension in shape " + shape_to_string(shape));
    empty = empty || d == 0;
  }
  if (empty) return 0;
  int64_t n = 1;
  for (auto d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      throw ShapeError(shape_math_detail::op_text(op) + ": shape " + shape_to_string(shape) +
                       " has more elements than an int64 can count");
  return n;
}

/// The bytes of an array of `shape` and `dtype`, checked: the element count must fit (see
/// element_count) and the bytes must be at most kMaxArrayBytes, else ShapeError naming `op`, the
/// dtype, the shape and the bytes.
inline int64_t array_bytes(const Shape& shape, Dtype dtype, std::string_view op) {
  int64_t n = element_count(shape, op);
  int64_t item = static_cast<int64_t>(size_of(dtype));
  int64_t bytes;
  if (__builtin_mul_overflow(n, item, &bytes) || bytes > kMaxArrayBytes)
    throw ShapeError(shape_math_detail::op_text(op) + ": an array of " + dtype_name(dtype) + shape_to_string(shape) +
                     " (" + std::to_string(n) + " elements of " + std::to_string(item) +
                     " bytes) is larger than the 2^47 bytes a process can address");
  return bytes;
}

}  // namespace smelt
