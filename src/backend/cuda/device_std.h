// The few C++ standard library names scalar_math.h uses, for NVRTC (which has no standard library).
//
// Embedded in front of the shared scalar math in every CUDA kernel (cmake/embed_sources.cmake);
// never included by host code. The math functions forward to CUDA's libdevice (sqrtf, expf, ...),
// so a float32 or float64 function on the GPU is the device's own, as it was before the scalar
// math was shared; the traits are only the ones the shared headers ask for.
#pragma once

#ifndef __CUDACC_RTC__
#error "device_std.h is for NVRTC only: host code uses the standard library"
#endif

#ifdef SMELT_DEVICE_STD_FROM_HOST
// Device code compiled as host C++ (tests that run kernels thread by thread on the CPU, with
// __CUDACC_RTC__ defined to take the device's branches): the real standard library.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#else

typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

namespace std {

template <class A, class B>
inline constexpr bool is_same_v = false;
template <class A>
inline constexpr bool is_same_v<A, A> = true;

template <bool C, class A, class B>
struct conditional {
  typedef A type;
};
template <class A, class B>
struct conditional<false, A, B> {
  typedef B type;
};
template <bool C, class A, class B>
using conditional_t = typename conditional<C, A, B>::type;

template <class T>
inline constexpr bool is_floating_point_v = is_same_v<T, float> || is_same_v<T, double>;
template <class T>
inline constexpr bool is_integral_v =
    is_same_v<T, bool> || is_same_v<T, char> || is_same_v<T, signed char> || is_same_v<T, short> ||
    is_same_v<T, int> || is_same_v<T, long> || is_same_v<T, long long> || is_same_v<T, unsigned char> ||
    is_same_v<T, unsigned short> || is_same_v<T, unsigned> || is_same_v<T, unsigned long> ||
    is_same_v<T, unsigned long long>;
// T(-1) < T(0) is only asked of arithmetic types (the 16-bit float structs have no such constructor).
template <class T, bool Arithmetic>
struct below_zero {
  static constexpr bool value = false;
};
template <class T>
struct below_zero<T, true> {
  static constexpr bool value = T(-1) < T(0);
};
template <class T>
inline constexpr bool is_signed_v = below_zero<T, is_integral_v<T> || is_floating_point_v<T>>::value;
template <class T>
inline constexpr bool is_unsigned_v = is_integral_v<T> && !below_zero<T, is_integral_v<T>>::value;

template <class T>
struct make_unsigned {
  typedef T type;
};
template <> struct make_unsigned<signed char> { typedef unsigned char type; };
template <> struct make_unsigned<char> { typedef unsigned char type; };
template <> struct make_unsigned<short> { typedef unsigned short type; };
template <> struct make_unsigned<int> { typedef unsigned type; };
template <> struct make_unsigned<long> { typedef unsigned long type; };
template <> struct make_unsigned<long long> { typedef unsigned long long type; };
template <class T>
using make_unsigned_t = typename make_unsigned<T>::type;

// Integers: the two's complement range; floats: the infinities and the quiet NaN.
template <class T>
struct numeric_limits {
  static constexpr T lowest() {
    return is_signed_v<T> ? T(T(1) << (sizeof(T) * 8 - 1)) : T(0);
  }
  static constexpr T max() { return T(~lowest()); }
};
template <>
struct numeric_limits<bool> {
  static constexpr bool lowest() { return false; }
  static constexpr bool max() { return true; }
};
template <>
struct numeric_limits<float> {
  static float infinity() { return __int_as_float(0x7f800000); }
  static float quiet_NaN() { return __int_as_float(0x7fc00000); }
  static float lowest() { return -__int_as_float(0x7f7fffff); }
  static float max() { return __int_as_float(0x7f7fffff); }
};
template <>
struct numeric_limits<double> {
  static double infinity() { return __longlong_as_double(0x7ff0000000000000ll); }
  static double quiet_NaN() { return __longlong_as_double(0x7ff8000000000000ll); }
  static double lowest() { return -__longlong_as_double(0x7fefffffffffffffll); }
  static double max() { return __longlong_as_double(0x7fefffffffffffffll); }
};

// CUDA's math library under the standard names, one overload per precision.
#define SMELT_STD_FN1(name, f32, f64)                 \
  inline float name(float x) { return ::f32(x); }   \
  inline double name(double x) { return ::f64(x); }
#define SMELT_STD_FN2(name, f32, f64)                            \
  inline float name(float x, float y) { return ::f32(x, y); }   \
  inline double name(double x, double y) { return ::f64(x, y); }
SMELT_STD_FN1(fabs, fabsf, fabs)
SMELT_STD_FN1(sqrt, sqrtf, sqrt)
SMELT_STD_FN1(floor, floorf, floor)
SMELT_STD_FN1(ceil, ceilf, ceil)
// nearbyint is rint in the default rounding mode (no inexact flag to keep on the GPU).
SMELT_STD_FN1(nearbyint, rintf, rint)
SMELT_STD_FN1(exp, expf, exp)
SMELT_STD_FN1(exp2, exp2f, exp2)
SMELT_STD_FN1(expm1, expm1f, expm1)
SMELT_STD_FN1(log, logf, log)
SMELT_STD_FN1(log2, log2f, log2)
SMELT_STD_FN1(log10, log10f, log10)
SMELT_STD_FN1(log1p, log1pf, log1p)
SMELT_STD_FN1(sin, sinf, sin)
SMELT_STD_FN1(cos, cosf, cos)
SMELT_STD_FN1(tan, tanf, tan)
SMELT_STD_FN1(asin, asinf, asin)
SMELT_STD_FN1(acos, acosf, acos)
SMELT_STD_FN1(atan, atanf, atan)
SMELT_STD_FN1(sinh, sinhf, sinh)
SMELT_STD_FN1(cosh, coshf, cosh)
SMELT_STD_FN1(tanh, tanhf, tanh)
SMELT_STD_FN1(asinh, asinhf, asinh)
SMELT_STD_FN1(acosh, acoshf, acosh)
SMELT_STD_FN1(atanh, atanhf, atanh)
SMELT_STD_FN1(erf, erff, erf)
SMELT_STD_FN1(erfc, erfcf, erfc)
SMELT_STD_FN2(fmod, fmodf, fmod)
SMELT_STD_FN2(pow, powf, pow)
SMELT_STD_FN2(atan2, atan2f, atan2)
SMELT_STD_FN2(copysign, copysignf, copysign)
#undef SMELT_STD_FN1
#undef SMELT_STD_FN2
template <class C>
inline bool isnan(C x) {
  return x != x;
}
template <class C>
inline bool isinf(C x) {
  return x == numeric_limits<C>::infinity() || x == -numeric_limits<C>::infinity();
}
template <class C>
inline bool isfinite(C x) {
  return x == x && !isinf(x);
}

}  // namespace std

#endif  // SMELT_DEVICE_STD_FROM_HOST
