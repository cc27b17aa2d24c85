// Scalar math of every element-wise operator, one source for the CPU and CUDA kernels, eager and fused.
//
// Self-contained (standard headers and smelt/dtype.h only) so that code generation can paste it
// into fused kernels: fused and unfused kernels then compute bit-identical results. It assumes
// strict IEEE arithmetic (-ffp-contract=off, no fast math) and the default rounding mode.
//
// Both devices: the host includes it; every CUDA kernel gets its text through NVRTC
// (cuda::device_preamble, after src/backend/cuda/device_std.h for the standard names and the
// device's 16-bit float conversions). Under __CUDACC_RTC__ the few device differences are
// guarded here and nowhere else: the float32 transcendentals are CUDA's (libdevice) instead of
// vector_math.h's (docs/cuda.md bounds the difference), sigmoid takes the device's fast form for
// the 16-bit floats, and the 16-bit floats convert with the device's hardware conversions (the
// same bits as the CPU's). NVRTC builds with -default-device, so the functions need no
// __device__ qualifier.
//
// Conventions:
//  - float16/bfloat16 compute in float32 and round back once per operation (as NumPy does).
//  - Integer arithmetic wraps (two's complement) and never has undefined behaviour: it runs in
//    an unsigned type of at least 32 bits and is narrowed at the end.
//  - Integer division, remainder and fmod by zero give 0; INT_MIN // -1 wraps to INT_MIN.
//  - Float floor_divide/remainder follow NumPy's npy_divmod (signed zeros and infinities).
//  - maximum/minimum propagate NaN from either operand; relu(NaN) = NaN.
//  - sign follows NumPy's loop: x > 0 -> 1, x < 0 -> -1, ±0 -> +0, NaN -> NaN.
//  - Shifts by a negative count or one at/past the bit width give 0 (left) or the sign fill
//    (right: -1 for negative values, else 0).
//  - Integer power by squaring (wrapping); a negative exponent gives 0, except base 1 -> 1 and
//    base -1 -> ±1 (NumPy raises instead).
//  - Functions that need a float type (exp, sqrt, ...) accept float types only; the ops promote
//    integer inputs before a kernel runs.
//  - The float32 transcendentals (and so the 16-bit floats') are smelt's own, in vector_math.h:
//    loops over them vectorize and they give the same bits on every x86-64 ISA. float64 calls
//    the C library.
#pragma once

#ifndef __CUDACC_RTC__
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "smelt/dtype.h"
#include "src/backend/cpu/vector_math.h"
#endif

namespace smelt::scalar {

// ---- Type helpers -----------------------------------------------------------------------------

template <class T>
inline constexpr bool half_v = std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>
#ifdef __CUDACC_RTC__
                                || std::is_same_v<T, float16q_t> || std::is_same_v<T, bfloat16q_t>
#endif
    ;
template <class T>
inline constexpr bool bool_v = std::is_same_v<T, bool>;
/// A float element type (float16, bfloat16, float32, float64).
template <class T>
inline constexpr bool float_v = half_v<T> || std::is_floating_point_v<T>;
/// An integer element type other than bool.
template <class T>
inline constexpr bool int_v = std::is_integral_v<T> && !bool_v<T>;

/// The type an element computes in: float for the 16-bit floats, the type itself otherwise.
template <class T>
using calc_t = std::conditional_t<half_v<T>, float, T>;

/// An unsigned type of at least 32 bits with T's width or more: arithmetic in it wraps and
/// never promotes to a signed int (which uint16 * uint16 would, with undefined overflow).
template <class T>
using uwide_t = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

/// An element in the type it computes in (16-bit floats widen exactly to float).
template <class T>
inline calc_t<T> up(T x) {
#ifdef __CUDACC_RTC__
  if constexpr (std::is_same_v<T, float16_t>) return h2f(x.b);
  else if constexpr (std::is_same_v<T, bfloat16_t>) return bf2f(x.b);
  else if constexpr (std::is_same_v<T, float16q_t>) return h2f_q(x.b);
  else if constexpr (std::is_same_v<T, bfloat16q_t>) return bf2f(x.b);
  else return x;
#else
  return static_cast<calc_t<T>>(x);
#endif
}
/// A computed value rounded back to T (round to nearest even for the 16-bit floats).
template <class T>
inline T down(calc_t<T> x) {
#ifdef __CUDACC_RTC__
  if constexpr (std::is_same_v<T, float16_t>) return T{f2h(x)};
  else if constexpr (std::is_same_v<T, bfloat16_t>) return T{f2bf(x)};
  else if constexpr (std::is_same_v<T, float16q_t>) return T{f2h_q(x)};
  else if constexpr (std::is_same_v<T, bfloat16q_t>) return T{f2bf_q(x)};
  else return static_cast<T>(x);
#else
  return static_cast<T>(x);
#endif
}

/// c ? a : b for any element type (where / Select). On the host both operands are taken and
/// combined through a bit mask: GCC neither if-converts a `?:` whose operands it must not
/// evaluate both of, nor (under -ftrapping-math) one on floats, and a branch per element on data
/// mispredicts half the time (4-5 ns an element). The same bits either way.
template <class T>
inline T select(bool c, T a, T b) {
#ifdef __CUDACC_RTC__
  return c ? a : b;
#else
  using U = std::conditional_t<sizeof(T) == 1, uint8_t,
                               std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  static_assert(sizeof(T) == sizeof(U) && std::is_trivially_copyable_v<T>, "select: a plain element type");
  const U m = static_cast<U>(U{0} - static_cast<U>(c));
  return std::bit_cast<T>(static_cast<U>((std::bit_cast<U>(a) & m) | (std::bit_cast<U>(b) & static_cast<U>(~m))));
#endif
}

namespace detail {

/// The bits of a 16-bit float and the 16-bit float of given bits (the device's storage types
/// name their field `b`).
template <class T>
inline uint16_t half_bits(T x) {
#ifdef __CUDACC_RTC__
  return x.b;
#else
  return x.bits;
#endif
}
template <class T>
inline T half_from_bits(uint16_t b) {
#ifdef __CUDACC_RTC__
  return T{b};
#else
  return T::from_bits(b);
#endif
}

/// A float64 value rounded once to T (not through float for the 16-bit floats).
template <class T>
inline T from_f64(double x) {
#ifdef __CUDACC_RTC__
  return cvt<T, double>(x);
#else
  return static_cast<T>(x);
#endif
}

template <class T>
inline T wrap_add(T a, T b) {
  using U = uwide_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <class T>
inline T wrap_sub(T a, T b) {
  using U = uwide_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <class T>
inline T wrap_mul(T a, T b) {
  using U = uwide_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}

template <class T>
inline bool truth(T x) {
  if constexpr (bool_v<T>) return x;
  else if constexpr (half_v<T>) return up(x) != 0.0f;
  else return x != T(0);
}

// Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011), single-precision
// polynomials evaluated in float64; `a` in [0, 1).
inline double erfinv_giles(double a) {
  double w = -std::log((1.0 - a) * (1.0 + a));
  double p;
  if (w < 5.0) {
    w = w - 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  return p * a;
}

/// erfinv in float64, within about 2 ulps: Giles' approximation as the start (in the far tail,
/// 1 - |y| < 1e-3, the asymptotic x^2 = -log(c) - log(x sqrt(pi)) + log(1 - 1/(2x^2)) of
/// erfc(x) = c instead, where Giles' single-precision fit degrades), then two Halley steps on
/// erf(x) - |y| (on (1 - |y|) - erfc(x) above 0.5, which is exact and keeps the tail accurate).
inline double erfinv_f64(double y) {
  if (!(y >= -1.0 && y <= 1.0)) return std::numeric_limits<double>::quiet_NaN();
  if (y == 1.0) return std::numeric_limits<double>::infinity();
  if (y == -1.0) return -std::numeric_limits<double>::infinity();
  if (y == 0.0) return y;  // keeps the sign of zero
  const double a = std::fabs(y);
  const double c = 1.0 - a;  // exact for a >= 0.5 (Sterbenz)
  double x;
  if (c < 1e-3) {
    const double t = -std::log(c);
    x = std::sqrt(t);
    for (int i = 0; i < 3; ++i)
      x = std::sqrt(t - std::log(x * 1.7724538509055160273) + std::log1p(-0.5 / (x * x)));
  } else {
    x = erfinv_giles(a);
  }
  const double two_over_sqrt_pi = 1.1283791670955125739;
  for (int i = 0; i < 2; ++i) {
    // r = erf(x) - a; f' = 2/sqrt(pi) exp(-x^2); f''/f' = -2x, so Halley's step is r / (f' + x r).
    const double r = a <= 0.5 ? std::erf(x) - a : c - std::erfc(x);
    const double d = two_over_sqrt_pi * std::exp(-x * x);
    x = x - r / (d + x * r);
  }
  return y < 0 ? -x : x;
}

}  // namespace detail

// ---- Unary ------------------------------------------------------------------------------------

template <class T>
inline T abs(T x) {
  if constexpr (bool_v<T> || std::is_unsigned_v<T>) {
    return x;
  } else if constexpr (int_v<T>) {
    using U = uwide_t<T>;
    const U u = static_cast<U>(x);
    return static_cast<T>(x < 0 ? static_cast<U>(U(0) - u) : u);
  } else if constexpr (half_v<T>) {
    return detail::half_from_bits<T>(static_cast<uint16_t>(detail::half_bits(x) & 0x7fffu));
  } else {
    return std::fabs(x);
  }
}

template <class T>
inline T negative(T x) {
  static_assert(!bool_v<T>, "negative is not defined for bool");
  if constexpr (int_v<T>) return detail::wrap_sub<T>(T(0), x);
  else if constexpr (half_v<T>) return detail::half_from_bits<T>(static_cast<uint16_t>(detail::half_bits(x) ^ 0x8000u));
  else return -x;
}

template <class T>
inline T sign(T x) {
  static_assert(!bool_v<T>, "sign is not defined for bool");
  if constexpr (std::is_unsigned_v<T>) {
    return x > 0 ? T(1) : T(0);
  } else if constexpr (int_v<T>) {
    return static_cast<T>((x > 0) - (x < 0));
  } else {
    using C = calc_t<T>;
    const C v = up(x);
    return down<T>(v > 0 ? C(1) : (v < 0 ? C(-1) : (v == 0 ? C(0) : v)));
  }
}

template <class T>
inline T square(T x) {
  static_assert(!bool_v<T>, "square is not defined for bool");
  if constexpr (int_v<T>) return detail::wrap_mul<T>(x, x);
  else return down<T>(up(x) * up(x));
}

template <class T>
inline T reciprocal(T x) {
  static_assert(float_v<T>, "reciprocal needs a float type");
  return down<T>(calc_t<T>(1) / up(x));
}

// The plain float functions: the C library's, in calc_t.
#define SMELT_SCALAR_FLOAT_FN(name, expr)                 \
  template <class T>                                      \
  inline T name(T x_) {                                   \
    static_assert(float_v<T>, #name " needs a float type"); \
    using C = calc_t<T>;                                  \
    const C x = up(x_);                                   \
    return down<T>(expr);                                 \
  }
SMELT_SCALAR_FLOAT_FN(sqrt, std::sqrt(x))
SMELT_SCALAR_FLOAT_FN(asinh, std::asinh(x))
SMELT_SCALAR_FLOAT_FN(acosh, std::acosh(x))
SMELT_SCALAR_FLOAT_FN(atanh, std::atanh(x))
// NaN is returned as it is: the SSE4.1 rounding instruction quiets a signaling NaN and the
// baseline x86-64 code does not, so without the test results would depend on the build flags
// (the library and the fused kernels are built for different vector ISAs).
SMELT_SCALAR_FLOAT_FN(floor, x != x ? x : std::floor(x))
SMELT_SCALAR_FLOAT_FN(ceil, x != x ? x : std::ceil(x))
// Half to even in the default rounding mode (NumPy's round with decimals=0).
SMELT_SCALAR_FLOAT_FN(round, x != x ? x : std::nearbyint(x))
#undef SMELT_SCALAR_FLOAT_FN

namespace detail {
// The float64 versions: the C library's on the host, CUDA's on the GPU (there also the float32
// ones: device_std.h's overloads).
#define SMELT_LIBM(name)                                        \
  inline double libm_##name(double x) { return std::name(x); } \
  inline float libm_##name(float x) { return std::name(x); }
SMELT_LIBM(exp)
SMELT_LIBM(exp2)
SMELT_LIBM(expm1)
SMELT_LIBM(log)
SMELT_LIBM(log2)
SMELT_LIBM(log10)
SMELT_LIBM(log1p)
SMELT_LIBM(sin)
SMELT_LIBM(cos)
SMELT_LIBM(tan)
SMELT_LIBM(asin)
SMELT_LIBM(acos)
SMELT_LIBM(atan)
SMELT_LIBM(sinh)
SMELT_LIBM(cosh)
SMELT_LIBM(tanh)
SMELT_LIBM(erf)
#undef SMELT_LIBM
inline double libm_rsqrt(double x) { return 1.0 / std::sqrt(x); }
// rsqrt in float: 1 / sqrt in float64, rounded once (correctly rounded), as vector_math.h's.
inline float libm_rsqrt(float x) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(x))); }
}  // namespace detail

// The float32 version of a function: vector_math.h's on the host (the same bits on every x86-64
// ISA), CUDA's on the GPU.
#ifdef __CUDACC_RTC__
#define SMELT_SCALAR_F32(name) detail::libm_##name
#else
#define SMELT_SCALAR_F32(name) vmath::name
#endif

// Float functions with a float32 version in vector_math.h; float64 takes the C library's.
#define SMELT_SCALAR_VMATH_FN(name)                         \
  template <class T>                                        \
  inline T name(T x_) {                                     \
    static_assert(float_v<T>, #name " needs a float type"); \
    using C = calc_t<T>;                                    \
    const C x = up(x_);                                     \
    if constexpr (std::is_same_v<C, float>)                 \
      return down<T>(SMELT_SCALAR_F32(name)(x));            \
    else                                                    \
      return down<T>(detail::libm_##name(x));               \
  }
SMELT_SCALAR_VMATH_FN(rsqrt)
SMELT_SCALAR_VMATH_FN(exp)
SMELT_SCALAR_VMATH_FN(exp2)
SMELT_SCALAR_VMATH_FN(expm1)
SMELT_SCALAR_VMATH_FN(log)
SMELT_SCALAR_VMATH_FN(log2)
SMELT_SCALAR_VMATH_FN(log10)
SMELT_SCALAR_VMATH_FN(log1p)
SMELT_SCALAR_VMATH_FN(sin)
SMELT_SCALAR_VMATH_FN(cos)
SMELT_SCALAR_VMATH_FN(tan)
SMELT_SCALAR_VMATH_FN(asin)
SMELT_SCALAR_VMATH_FN(acos)
SMELT_SCALAR_VMATH_FN(atan)
SMELT_SCALAR_VMATH_FN(sinh)
SMELT_SCALAR_VMATH_FN(cosh)
SMELT_SCALAR_VMATH_FN(tanh)
SMELT_SCALAR_VMATH_FN(erf)
#undef SMELT_SCALAR_VMATH_FN
#undef SMELT_SCALAR_F32

/// Inverse error function; computed in float64 for every float type and rounded once.
template <class T>
inline T erfinv(T x) {
  static_assert(float_v<T>, "erfinv needs a float type");
  return detail::from_f64<T>(detail::erfinv_f64(static_cast<double>(up(x))));
}

/// 1 / (1 + exp(-x)) without overflow: exp is only taken of a non-positive argument.
template <class T>
inline T sigmoid(T x_) {
  static_assert(float_v<T>, "sigmoid needs a float type");
  using C = calc_t<T>;
  const C x = up(x_);
#ifdef __CUDACC_RTC__
  // On the GPU without a branch (warps holding both signs run one exp, not two): with
  // e = exp(-|x|), 1 / (1 + e) for x >= 0 and e / (1 + e) below, the host's values. 16-bit
  // results keep 8 or 11 bits: the hardware's exp2 and division (relative error below 2^-20)
  // round to the same 16-bit value as the exact ones except within 2^-20 of a tie, so
  // float16/bfloat16 take them (SwiGLU's sigmoid is the whole cost of W2). Fused and unfused
  // kernels call this one function, so they stay bit-equal.
  if constexpr (half_v<T>) {
    const float e = __expf(-fabsf(x));
    return down<T>(__fdividef(x >= 0 ? 1.0f : e, 1.0f + e));
  } else {
    const C e = std::exp(-std::fabs(x));
    return down<T>((x >= 0 ? C(1) : e) / (C(1) + e));
  }
#else
  if constexpr (std::is_same_v<C, float>) return down<T>(vmath::sigmoid(x));
  if (x >= 0) return down<T>(C(1) / (C(1) + std::exp(-x)));
  const C e = std::exp(x);  // NaN lands here and stays NaN
  return down<T>(e / (C(1) + e));
#endif
}

/// max(x, 0); NaN stays NaN, -0 gives +0.
template <class T>
inline T relu(T x) {
  static_assert(!bool_v<T>, "relu is not defined for bool");
  if constexpr (int_v<T>) {
    return x > 0 ? x : T(0);
  } else {
    const calc_t<T> v = up(x);
    // !(v <= 0): greater or unordered, one compare (`v > 0 || v != v` vectorized as two).
    return !(v <= 0) ? x : down<T>(calc_t<T>(0));
  }
}

template <class T>
inline bool isnan(T x) {
  if constexpr (float_v<T>) return std::isnan(up(x));
  else return false;
}
template <class T>
inline bool isinf(T x) {
  if constexpr (float_v<T>) return std::isinf(up(x));
  else return false;
}
template <class T>
inline bool isfinite(T x) {
  if constexpr (float_v<T>) return std::isfinite(up(x));
  else return true;
}

template <class T>
inline bool logical_not(T x) {
  return !detail::truth(x);
}

template <class T>
inline T bitwise_not(T x) {
  static_assert(!float_v<T>, "bitwise_not needs an integer or bool type");
  if constexpr (bool_v<T>) return !x;
  else return static_cast<T>(~x);
}

// ---- Binary -----------------------------------------------------------------------------------

/// For bool: logical or (NumPy).
template <class T>
inline T add(T a, T b) {
  if constexpr (bool_v<T>) return a || b;
  else if constexpr (int_v<T>) return detail::wrap_add(a, b);
  else return down<T>(up(a) + up(b));
}

template <class T>
inline T subtract(T a, T b) {
  static_assert(!bool_v<T>, "subtract is not defined for bool");
  if constexpr (int_v<T>) return detail::wrap_sub(a, b);
  else return down<T>(up(a) - up(b));
}

/// For bool: logical and (NumPy).
template <class T>
inline T multiply(T a, T b) {
  if constexpr (bool_v<T>) return a && b;
  else if constexpr (int_v<T>) return detail::wrap_mul(a, b);
  else return down<T>(up(a) * up(b));
}

template <class T>
inline T divide(T a, T b) {
  static_assert(float_v<T>, "divide needs a float type");
  return down<T>(up(a) / up(b));
}

namespace detail {

/// NumPy's npy_divmod for b != 0: floor quotient and remainder with the sign of b.
template <class C>
inline C float_divmod(C a, C b, C* modulus) {
  C mod = std::fmod(a, b);
  C div = (a - mod) / b;  // very nearly an integer multiple of b
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) {
      mod += b;
      div -= C(1);
    }
  } else {
    mod = std::copysign(C(0), b);
  }
  C floordiv;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > C(0.5)) floordiv += C(1);
  } else {
    floordiv = std::copysign(C(0), a / b);
  }
  *modulus = mod;
  return floordiv;
}

}  // namespace detail

/// Python's //. Integer division by zero gives 0; the minimum // -1 wraps to the minimum.
template <class T>
inline T floor_divide(T a, T b) {
  static_assert(!bool_v<T>, "floor_divide is not defined for bool");
  if constexpr (int_v<T>) {
    if (b == 0) return T(0);
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return negative(a);
      T q = static_cast<T>(a / b);
      if (static_cast<T>(a % b) != 0 && ((a < 0) != (b < 0))) q = static_cast<T>(q - 1);
      return q;
    } else {
      return static_cast<T>(a / b);
    }
  } else {
    using C = calc_t<T>;
    const C x = up(a), y = up(b);
    if (y == 0) return down<T>(x / y);  // ±inf, or NaN for 0/0 and NaN/0
    C mod;
    return down<T>(detail::float_divmod(x, y, &mod));
  }
}

/// Python's %: the sign of the divisor. Integer x % 0 gives 0.
template <class T>
inline T remainder(T a, T b) {
  static_assert(!bool_v<T>, "remainder is not defined for bool");
  if constexpr (int_v<T>) {
    if (b == 0) return T(0);
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return T(0);  // also avoids the minimum % -1 trap
      T r = static_cast<T>(a % b);
      if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      return r;
    } else {
      return static_cast<T>(a % b);
    }
  } else {
    using C = calc_t<T>;
    const C x = up(a), y = up(b);
    if (y == 0) return down<T>(std::fmod(x, y));  // NaN
    C mod;
    detail::float_divmod(x, y, &mod);
    return down<T>(mod);
  }
}

/// C's fmod: the sign of the dividend. Integer x fmod 0 gives 0.
template <class T>
inline T fmod(T a, T b) {
  static_assert(!bool_v<T>, "fmod is not defined for bool");
  if constexpr (int_v<T>) {
    if (b == 0) return T(0);
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return T(0);
    }
    return static_cast<T>(a % b);
  } else {
    return down<T>(std::fmod(up(a), up(b)));
  }
}

/// Integer power by squaring (wrapping); float power is std::pow.
template <class T>
inline T power(T a, T b) {
  static_assert(!bool_v<T>, "power is not defined for bool");
  if constexpr (int_v<T>) {
    if constexpr (std::is_signed_v<T>) {
      if (b < 0) {
        if (a == 1) return T(1);
        if (a == -1) return (b & 1) ? T(-1) : T(1);
        return T(0);
      }
    }
    using U = uwide_t<T>;
    U base = static_cast<U>(a), result = 1;
    auto e = static_cast<std::make_unsigned_t<T>>(b);
    while (e != 0) {
      if (e & 1u) result = static_cast<U>(result * base);
      base = static_cast<U>(base * base);
      e = static_cast<std::make_unsigned_t<T>>(e >> 1);
    }
    return static_cast<T>(result);
  } else {
    return down<T>(std::pow(up(a), up(b)));
  }
}

/// NaN from either operand propagates (NumPy's maximum); returns one operand's exact bits.
template <class T>
inline T maximum(T a, T b) {
  if constexpr (float_v<T>) {
    const calc_t<T> x = up(a), y = up(b);
    // One conditional expression with `||`: GCC 12 turns loops over it into compares and a
    // blend. (Written as `bool take_a = (x >= y) | (x != x)`, no loop over it vectorized: the
    // bool's type has no vector type at -O3, and a fused hardswish ran one element at a time.)
    return (x >= y || x != x) ? a : b;
  } else {
    return a >= b ? a : b;
  }
}

template <class T>
inline T minimum(T a, T b) {
  if constexpr (float_v<T>) {
    const calc_t<T> x = up(a), y = up(b);
    return (x <= y || x != x) ? a : b;
  } else {
    return a <= b ? a : b;
  }
}

/// maximum and minimum where one operand is known not to be NaN (a constant of a fused kernel:
/// ReLU6's and hardswish's bounds): the same results as maximum(a, b) and minimum(a, b), bits
/// included (NaN from the other operand, the first operand on a tie of +0 and -0), in one
/// compare or one vmaxps/vminps instead of two compares and a blend (MobileNetV3's 37 fused
/// hardswish and hardsigmoid steps 2.6x faster).
/// `_b`: b is not NaN; `_a`: a is not NaN.
template <class T>
inline T maximum_b_not_nan(T a, T b) {
  if constexpr (float_v<T>) return up(b) > up(a) ? b : a;  // vmaxps(b, a): a when unordered
  else return maximum(a, b);
}
template <class T>
inline T maximum_a_not_nan(T a, T b) {
  if constexpr (float_v<T>) return !(up(b) <= up(a)) ? b : a;  // b when greater or NaN
  else return maximum(a, b);
}
template <class T>
inline T minimum_b_not_nan(T a, T b) {
  if constexpr (float_v<T>) return up(b) < up(a) ? b : a;  // vminps(b, a)
  else return minimum(a, b);
}
template <class T>
inline T minimum_a_not_nan(T a, T b) {
  if constexpr (float_v<T>) return !(up(b) >= up(a)) ? b : a;  // b when less or NaN
  else return minimum(a, b);
}

template <class T>
inline T atan2(T a, T b) {
  static_assert(float_v<T>, "atan2 needs a float type");
#ifndef __CUDACC_RTC__
  if constexpr (std::is_same_v<calc_t<T>, float>) return down<T>(vmath::atan2(up(a), up(b)));
#endif
  return down<T>(std::atan2(up(a), up(b)));
}

template <class T>
inline bool equal(T a, T b) {
  return up(a) == up(b);
}
template <class T>
inline bool not_equal(T a, T b) {
  return up(a) != up(b);
}
template <class T>
inline bool less(T a, T b) {
  return up(a) < up(b);
}
template <class T>
inline bool less_equal(T a, T b) {
  return up(a) <= up(b);
}
template <class T>
inline bool greater(T a, T b) {
  return up(a) > up(b);
}
template <class T>
inline bool greater_equal(T a, T b) {
  return up(a) >= up(b);
}

template <class T>
inline bool logical_and(T a, T b) {
  return detail::truth(a) && detail::truth(b);
}
template <class T>
inline bool logical_or(T a, T b) {
  return detail::truth(a) || detail::truth(b);
}
template <class T>
inline bool logical_xor(T a, T b) {
  return detail::truth(a) != detail::truth(b);
}

template <class T>
inline T bitwise_and(T a, T b) {
  static_assert(!float_v<T>, "bitwise_and needs an integer or bool type");
  if constexpr (bool_v<T>) return a && b;
  else return static_cast<T>(a & b);
}
template <class T>
inline T bitwise_or(T a, T b) {
  static_assert(!float_v<T>, "bitwise_or needs an integer or bool type");
  if constexpr (bool_v<T>) return a || b;
  else return static_cast<T>(a | b);
}
template <class T>
inline T bitwise_xor(T a, T b) {
  static_assert(!float_v<T>, "bitwise_xor needs an integer or bool type");
  if constexpr (bool_v<T>) return a != b;
  else return static_cast<T>(a ^ b);
}

namespace detail {

/// True when b is a shift count in [0, bit width of T).
template <class T>
inline bool shift_in_range(T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b < 0) return false;
  }
  return static_cast<uint64_t>(b) < sizeof(T) * 8;
}

}  // namespace detail

template <class T>
inline T left_shift(T a, T b) {
  static_assert(int_v<T>, "left_shift needs an integer type");
  if (!detail::shift_in_range(b)) return T(0);
  using U = uwide_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) << b));
}

template <class T>
inline T right_shift(T a, T b) {
  static_assert(int_v<T>, "right_shift needs an integer type");
  if (!detail::shift_in_range(b)) {
    if constexpr (std::is_signed_v<T>) return a < 0 ? T(-1) : T(0);
    else return T(0);
  }
  return static_cast<T>(a >> b);  // arithmetic for signed types (defined since C++20)
}

}  // namespace smelt::scalar
