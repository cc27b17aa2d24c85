// Element types of smelt arrays, the 16-bit float storage types, and NumPy type promotion.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "smelt/half.h"

namespace smelt {

/// The element type of an array. The order is fixed: it indexes tables in the library.
enum class Dtype : uint8_t {
  Bool,
  Int8,
  Int16,
  Int32,
  Int64,
  UInt8,
  UInt16,
  UInt32,
  UInt64,
  Float16,
  BFloat16,
  Float32,
  Float64,
};
inline constexpr int kNumDtypes = 13;

inline constexpr Dtype bool_ = Dtype::Bool;
inline constexpr Dtype int8 = Dtype::Int8;
inline constexpr Dtype int16 = Dtype::Int16;
inline constexpr Dtype int32 = Dtype::Int32;
inline constexpr Dtype int64 = Dtype::Int64;
inline constexpr Dtype uint8 = Dtype::UInt8;
inline constexpr Dtype uint16 = Dtype::UInt16;
inline constexpr Dtype uint32 = Dtype::UInt32;
inline constexpr Dtype uint64 = Dtype::UInt64;
inline constexpr Dtype float16 = Dtype::Float16;
inline constexpr Dtype bfloat16 = Dtype::BFloat16;
inline constexpr Dtype float32 = Dtype::Float32;
inline constexpr Dtype float64 = Dtype::Float64;

/// The category used by promotion: bool < unsigned/signed integer < floating.
enum class DtypeKind : uint8_t { Bool, SignedInt, UnsignedInt, Float };

/// Bytes per element.
size_t size_of(Dtype dtype);
/// "float32", "int64", "bool", ... (NumPy spelling).
const char* dtype_name(Dtype dtype);
DtypeKind kind_of(Dtype dtype);
inline bool is_floating(Dtype d) { return kind_of(d) == DtypeKind::Float; }
inline bool is_integral(Dtype d) {
  return kind_of(d) == DtypeKind::SignedInt || kind_of(d) == DtypeKind::UnsignedInt;
}
inline bool is_signed_integral(Dtype d) { return kind_of(d) == DtypeKind::SignedInt; }
inline bool is_unsigned_integral(Dtype d) { return kind_of(d) == DtypeKind::UnsignedInt; }

/// NumPy's promotion of two array dtypes (int64 with uint64 gives float64; bfloat16 with
/// float16 gives float32, as in MLX and PyTorch).
Dtype promote_types(Dtype a, Dtype b);

/// The dtype of a C++ element type.
template <class T>
constexpr Dtype dtype_of() {
  if constexpr (std::is_same_v<T, bool>) return Dtype::Bool;
  else if constexpr (std::is_same_v<T, int8_t>) return Dtype::Int8;
  else if constexpr (std::is_same_v<T, int16_t>) return Dtype::Int16;
  else if constexpr (std::is_same_v<T, int32_t>) return Dtype::Int32;
  else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, long long>) return Dtype::Int64;
  else if constexpr (std::is_same_v<T, uint8_t>) return Dtype::UInt8;
  else if constexpr (std::is_same_v<T, uint16_t>) return Dtype::UInt16;
  else if constexpr (std::is_same_v<T, uint32_t>) return Dtype::UInt32;
  else if constexpr (std::is_same_v<T, uint64_t> || std::is_same_v<T, unsigned long long>) return Dtype::UInt64;
  else if constexpr (std::is_same_v<T, float16_t>) return Dtype::Float16;
  else if constexpr (std::is_same_v<T, bfloat16_t>) return Dtype::BFloat16;
  else if constexpr (std::is_same_v<T, float>) return Dtype::Float32;
  else if constexpr (std::is_same_v<T, double>) return Dtype::Float64;
  else static_assert(sizeof(T) == 0, "no smelt dtype for this C++ type");
}

std::string to_string(Dtype dtype);

}  // namespace smelt
