// Element conversion with astype's rules, defined for every pair of dtypes (C++ leaves some undefined).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "smelt/dtype.h"

namespace smelt {

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;

namespace convert_detail {

// x86's cvttsd2si: truncation, and the "integer indefinite" (the minimum) for NaN and overflow.
inline int64_t to_int64(double x) {
  if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0))
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(x);
}
inline int32_t to_int32(double x) {
  if (!(x > -2147483649.0 && x < 2147483648.0)) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(x);
}
inline uint64_t to_uint64(double x) {
  if (x >= 9223372036854775808.0 && x < 18446744073709551616.0) return static_cast<uint64_t>(x);
  return static_cast<uint64_t>(to_int64(x));
}

}  // namespace convert_detail

/// Converts one element. Float to integer truncates toward zero; NaN and out-of-range values
/// give what NumPy gives on x86: int32/int64 get their minimum, int8/int16/uint8/uint16 wrap the
/// int32 result, uint32 wraps the int64 result, uint64 takes values below 2^64 and else 2^63.
/// Integer narrowing wraps. Anything to bool is `x != 0` (NaN is true).
template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (is_half_v<From>) return static_cast<float>(v) != 0.0f;
    else return v != From(0);
  } else if constexpr (is_half_v<From>) {
    return convert<To, float>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, float16_t>) {
    if constexpr (std::is_same_v<From, float>) return float16_t(v);
    else return float16_t(static_cast<double>(v));
  } else if constexpr (std::is_same_v<To, bfloat16_t>) {
    if constexpr (std::is_same_v<From, float>) return bfloat16_t(v);
    else return bfloat16_t(static_cast<double>(v));
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    double x = static_cast<double>(v);
    if constexpr (std::is_same_v<To, int64_t>) return convert_detail::to_int64(x);
    else if constexpr (std::is_same_v<To, int32_t>) return convert_detail::to_int32(x);
    else if constexpr (std::is_same_v<To, uint64_t>) return convert_detail::to_uint64(x);
    else if constexpr (std::is_same_v<To, uint32_t>)
      return static_cast<uint32_t>(static_cast<uint64_t>(convert_detail::to_int64(x)));
    else return static_cast<To>(static_cast<uint32_t>(convert_detail::to_int32(x)));
  } else {
    return static_cast<To>(v);  // int->int wraps (C++20), int->float and float->float round
  }
}

}  // namespace smelt
