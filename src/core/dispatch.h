// Calling a templated lambda with the C++ element type of a runtime dtype.
#pragma once

#include <string>

#include "smelt/dtype.h"
#include "smelt/errors.h"
#include "src/core/convert.h"

namespace smelt {

/// Calls `f.template operator()<T>()` with T the element type of `dtype`.
template <class F>
decltype(auto) dispatch_all(Dtype dtype, F&& f) {
  switch (dtype) {
    case Dtype::Bool: return f.template operator()<bool>();
    case Dtype::Int8: return f.template operator()<int8_t>();
    case Dtype::Int16: return f.template operator()<int16_t>();
    case Dtype::Int32: return f.template operator()<int32_t>();
    case Dtype::Int64: return f.template operator()<int64_t>();
    case Dtype::UInt8: return f.template operator()<uint8_t>();
    case Dtype::UInt16: return f.template operator()<uint16_t>();
    case Dtype::UInt32: return f.template operator()<uint32_t>();
    case Dtype::UInt64: return f.template operator()<uint64_t>();
    case Dtype::Float16: return f.template operator()<float16_t>();
    case Dtype::BFloat16: return f.template operator()<bfloat16_t>();
    case Dtype::Float32: return f.template operator()<float>();
    case Dtype::Float64: return f.template operator()<double>();
  }
  throw Error("internal: bad dtype");
}

/// Dispatch by element size only (copies, gathers, permutations: the bits move unchanged).
template <class F>
decltype(auto) dispatch_by_size(Dtype dtype, F&& f) {
  switch (size_of(dtype)) {
    case 1: return f.template operator()<uint8_t>();
    case 2: return f.template operator()<uint16_t>();
    case 4: return f.template operator()<uint32_t>();
    default: return f.template operator()<uint64_t>();
  }
}

/// The float type a half computes in: float for float16/bfloat16, T otherwise.
template <class T>
using compute_t = std::conditional_t<is_half_v<T>, float, T>;

}  // namespace smelt
