// The device-side preamble of every CUDA kernel: types, astype conversions, scalar math, reductions.
//
// A port of src/core/convert.h and src/backend/cpu/scalar_math.h to CUDA C++ (NVRTC has no C++
// standard library). Built with --fmad=false and IEEE division and square root, the arithmetic
// operators, conversions, comparisons, integer ops, floor/ceil/round, fmod, sqrt, min/max and
// the half rounding equal the CPU bit for bit. The transcendental functions are CUDA's libdevice
// ones (sinf, expf, ...), which differ from glibc's by a few ulps (docs/cuda.md gives the bounds).
#include "src/backend/cuda/compiler.h"

namespace smelt::cuda {

const char* device_preamble() {
  return R"CUDA(
typedef signed char i8; typedef short i16; typedef int i32; typedef long long i64;
typedef unsigned char u8; typedef unsigned short u16; typedef unsigned int u32; typedef unsigned long long u64;
struct f16 { u16 b; };
struct bf16 { u16 b; };

#define MAXD 10
struct Layout { i64 nd; i64 shape[MAXD]; i64 st[4][MAXD]; };
__device__ inline i64 bid() { return (i64)blockIdx.y * gridDim.x + blockIdx.x; }
__device__ inline i64 gid() { return bid() * blockDim.x + threadIdx.x; }

template <class A, class B> struct same_t { static constexpr bool v = false; };
template <class A> struct same_t<A, A> { static constexpr bool v = true; };
template <bool C, class A, class B> struct cond_t { typedef A type; };
template <class A, class B> struct cond_t<false, A, B> { typedef B type; };

template <class T> struct tr;
#define SMELT_TR(T, INT, SIGNED, HALF, FP, UW, US, LO, HI) \
  template <> struct tr<T> { \
    static constexpr bool is_int = INT, is_signed = SIGNED, is_half = HALF, is_fp = FP; \
    static constexpr bool is_float = HALF || FP, is_bool = false; \
    typedef UW uwide; typedef US unsig; \
    __device__ static T lowest() { return LO; } __device__ static T highest() { return HI; } };
SMELT_TR(i8, true, true, false, false, u32, u8, (i8)-128, (i8)127)
SMELT_TR(i16, true, true, false, false, u32, u16, (i16)-32768, (i16)32767)
SMELT_TR(i32, true, true, false, false, u32, u32, (i32)0x80000000u, (i32)0x7fffffff)
SMELT_TR(i64, true, true, false, false, u64, u64, (i64)0x8000000000000000ull, (i64)0x7fffffffffffffffll)
SMELT_TR(u8, true, false, false, false, u32, u8, (u8)0, (u8)255)
SMELT_TR(u16, true, false, false, false, u32, u16, (u16)0, (u16)65535)
SMELT_TR(u32, true, false, false, false, u32, u32, 0u, 0xffffffffu)
SMELT_TR(u64, true, false, false, false, u64, u64, 0ull, 0xffffffffffffffffull)
SMELT_TR(f16, false, true, true, false, u32, u16, f16{0xfbffu}, f16{0x7bffu})
SMELT_TR(bf16, false, true, true, false, u32, u16, bf16{0xff7fu}, bf16{0x7f7fu})
SMELT_TR(float, false, true, false, true, u32, u32, -__int_as_float(0x7f800000), __int_as_float(0x7f800000))
SMELT_TR(double, false, true, false, true, u64, u64, -__longlong_as_double(0x7ff0000000000000ll), __longlong_as_double(0x7ff0000000000000ll))
template <> struct tr<bool> {
  static constexpr bool is_int = false, is_signed = false, is_half = false, is_fp = false;
  static constexpr bool is_float = false, is_bool = true;
  typedef u32 uwide; typedef u8 unsig;
  __device__ static bool lowest() { return false; } __device__ static bool highest() { return true; } };

template <class T> using calc = typename cond_t<tr<T>::is_half, float, T>::type;

__device__ inline float f_inf() { return __int_as_float(0x7f800000); }
__device__ inline double d_inf() { return __longlong_as_double(0x7ff0000000000000ll); }

// ---- 16-bit floats (bit-exact ports of src/core/dtype.cpp) ----
// The conversions below are the CPU's, bit for bit. From sm_53 (float16) and sm_80 (bfloat16)
// the hardware's round-to-nearest-even conversions give the same values in one instruction
// (the software forms cost about 20 integer operations, which bound bfloat16 kernels such as
// SwiGLU); NaN keeps the CPU's sign and payload rule through a select.
__device__ inline float h2f(u16 h) {
  u32 sign = (u32)(h & 0x8000u) << 16, ex = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
#if __CUDA_ARCH__ >= 530
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return ex == 0x1f && mant != 0 ? __uint_as_float(sign | 0x7f800000u | mant << 13) : f;
#else
  if (ex == 0) {
    if (mant == 0) bits = sign;
    else { int e = -1; do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
           bits = sign | (u32)(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13; }
  } else if (ex == 0x1f) bits = sign | 0x7f800000u | mant << 13;
  else bits = sign | (ex + 127 - 15) << 23 | mant << 13;
  return __uint_as_float(bits);
#endif
}
__device__ inline u16 f2h(float f) {
#if __CUDA_ARCH__ >= 530
  const u32 x = __float_as_uint(f);
  u16 r; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
  const u16 nan = (u16)(((x >> 16) & 0x8000u) | 0x7e00u | ((x >> 13) & 0x3ffu));
  return f != f ? nan : r;  // a float compare: the integer pipe is the scarce one here
#else
  u32 x = __float_as_uint(f);
  u16 sign = (u16)((x >> 16) & 0x8000u);
  u32 absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {
    if (absx > 0x7f800000u) return sign | 0x7e00u | (u16)((absx >> 13) & 0x3ffu);
    return sign | 0x7c00u;
  }
  if (absx >= 0x477ff000u) return sign | 0x7c00u;
  if (absx < 0x38800000u) {
    if (absx < 0x33000000u) return sign;
    u32 e = absx >> 23, mant = (absx & 0x7fffffu) | 0x800000u, shift = 126 - e;
    u32 q = mant >> shift, rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
    return sign | (u16)q;
  }
  u32 q = (absx - 0x38000000u) >> 13, rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;
  return sign | (u16)q;
#endif
}
__device__ inline float bf2f(u16 h) { return __uint_as_float((u32)h << 16); }
__device__ inline u16 f2bf(float f) {
#if __CUDA_ARCH__ >= 800
  const u32 x = __float_as_uint(f);
  u16 r; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return f != f ? (u16)((x >> 16) | 0x40u) : r;
#else
  u32 x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (u16)((x >> 16) | 0x40u);
  u32 lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return (u16)(x >> 16);
#endif
}
// A double rounded once to a 16-bit float (not through float): scale by the target's spacing.
__device__ inline u16 d2small(double d, double min_normal, int mant_bits, bool half) {
  if (d != d || fabs(d) == d_inf() || d == 0.0) return half ? f2h((float)d) : f2bf((float)d);
  int e; frexp(fabs(d), &e);
  int exp_floor = e - 1, min_exp = ilogb(min_normal);
  if (exp_floor < min_exp) exp_floor = min_exp;
  double ulp = ldexp(1.0, exp_floor - mant_bits);
  double r = rint(d / ulp) * ulp;
  return half ? f2h((float)r) : f2bf((float)r);
}

template <class T> __device__ inline calc<T> up(T x) {
  if constexpr (same_t<T, f16>::v) return h2f(x.b);
  else if constexpr (same_t<T, bf16>::v) return bf2f(x.b);
  else return x;
}
template <class T> __device__ inline T down(calc<T> x) {
  if constexpr (same_t<T, f16>::v) return f16{f2h(x)};
  else if constexpr (same_t<T, bf16>::v) return bf16{f2bf(x)};
  else return (T)x;
}

// ---- astype (src/core/convert.h) ----
__device__ inline i64 to_i64(double x) {
  if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0)) return (i64)0x8000000000000000ull;
  return (i64)x;
}
__device__ inline i32 to_i32(double x) {
  if (!(x > -2147483649.0 && x < 2147483648.0)) return (i32)0x80000000u;
  return (i32)x;
}
__device__ inline u64 to_u64(double x) {
  if (x >= 9223372036854775808.0 && x < 18446744073709551616.0) return (u64)x;
  return (u64)to_i64(x);
}
template <class To, class From> __device__ inline To cvt(From v) {
  if constexpr (same_t<To, From>::v) return v;
  else if constexpr (tr<To>::is_bool) {
    if constexpr (tr<From>::is_half) return up(v) != 0.0f;
    else return v != From(0);
  } else if constexpr (tr<From>::is_half) return cvt<To, float>(up(v));
  else if constexpr (same_t<To, f16>::v) {
    if constexpr (same_t<From, float>::v) return f16{f2h(v)};
    else return f16{d2small((double)v, 6.103515625e-05, 10, true)};
  } else if constexpr (same_t<To, bf16>::v) {
    if constexpr (same_t<From, float>::v) return bf16{f2bf(v)};
    else return bf16{d2small((double)v, 1.1754943508222875e-38, 7, false)};
  } else if constexpr (tr<From>::is_fp && tr<To>::is_int) {
    double x = (double)v;
    if constexpr (same_t<To, i64>::v) return to_i64(x);
    else if constexpr (same_t<To, i32>::v) return to_i32(x);
    else if constexpr (same_t<To, u64>::v) return to_u64(x);
    else if constexpr (same_t<To, u32>::v) return (u32)(u64)to_i64(x);
    else return (To)(u32)to_i32(x);
  } else return (To)v;
}

// ---- math functions by precision ----
#define SMELT_M1(name, f32, f64) \
  __device__ inline float m_##name(float x) { return f32(x); } \
  __device__ inline double m_##name(double x) { return f64(x); }
#define SMELT_M2(name, f32, f64) \
  __device__ inline float m_##name(float x, float y) { return f32(x, y); } \
  __device__ inline double m_##name(double x, double y) { return f64(x, y); }
SMELT_M1(sqrt, sqrtf, sqrt) SMELT_M1(exp, expf, exp) SMELT_M1(exp2, exp2f, exp2) SMELT_M1(expm1, expm1f, expm1)
SMELT_M1(log, logf, log) SMELT_M1(log2, log2f, log2) SMELT_M1(log10, log10f, log10) SMELT_M1(log1p, log1pf, log1p)
SMELT_M1(sin, sinf, sin) SMELT_M1(cos, cosf, cos) SMELT_M1(tan, tanf, tan) SMELT_M1(asin, asinf, asin)
SMELT_M1(acos, acosf, acos) SMELT_M1(atan, atanf, atan) SMELT_M1(sinh, sinhf, sinh) SMELT_M1(cosh, coshf, cosh)
SMELT_M1(tanh, tanhf, tanh) SMELT_M1(asinh, asinhf, asinh) SMELT_M1(acosh, acoshf, acosh) SMELT_M1(atanh, atanhf, atanh)
SMELT_M1(erf, erff, erf) SMELT_M1(floor, floorf, floor) SMELT_M1(ceil, ceilf, ceil) SMELT_M1(rint, rintf, rint)
SMELT_M1(fabs, fabsf, fabs)
SMELT_M2(fmod, fmodf, fmod) SMELT_M2(pow, powf, pow) SMELT_M2(atan2, atan2f, atan2) SMELT_M2(copysign, copysignf, copysign)

template <class T> __device__ inline T wrap_add(T a, T b) { typedef typename tr<T>::uwide U; return (T)(U)((U)a + (U)b); }
template <class T> __device__ inline T wrap_sub(T a, T b) { typedef typename tr<T>::uwide U; return (T)(U)((U)a - (U)b); }
template <class T> __device__ inline T wrap_mul(T a, T b) { typedef typename tr<T>::uwide U; return (T)(U)((U)a * (U)b); }
template <class T> __device__ inline bool truth(T x) {
  if constexpr (tr<T>::is_bool) return x;
  else if constexpr (tr<T>::is_half) return up(x) != 0.0f;
  else return x != T(0);
}

// ---- unary ----
template <class T> __device__ inline T op_abs(T x) {
  if constexpr (tr<T>::is_bool || (tr<T>::is_int && !tr<T>::is_signed)) return x;
  else if constexpr (tr<T>::is_int) { typedef typename tr<T>::uwide U; U u = (U)x; return (T)(x < 0 ? (U)(U(0) - u) : u); }
  else if constexpr (tr<T>::is_half) return T{(u16)(x.b & 0x7fffu)};
  else return m_fabs(x);
}
template <class T> __device__ inline T op_negative(T x) {
  if constexpr (tr<T>::is_int) return wrap_sub<T>(T(0), x);
  else if constexpr (tr<T>::is_half) return T{(u16)(x.b ^ 0x8000u)};
  else return -x;
}
template <class T> __device__ inline T op_sign(T x) {
  if constexpr (tr<T>::is_int && !tr<T>::is_signed) return x > 0 ? T(1) : T(0);
  else if constexpr (tr<T>::is_int) return (T)((x > 0) - (x < 0));
  else { typedef calc<T> C; C v = up(x); return down<T>(v > 0 ? C(1) : (v < 0 ? C(-1) : (v == 0 ? C(0) : v))); }
}
template <class T> __device__ inline T op_square(T x) {
  if constexpr (tr<T>::is_int) return wrap_mul<T>(x, x);
  else return down<T>(up(x) * up(x));
}
template <class T> __device__ inline T op_reciprocal(T x) { return down<T>(calc<T>(1) / up(x)); }
#define SMELT_FLOAT_FN(name, expr) \
  template <class T> __device__ inline T op_##name(T x_) { typedef calc<T> C; const C x = up(x_); return down<T>(expr); }
// rsqrt as the CPU computes it: 1 / sqrt in float64, rounded once (correctly rounded for float).
__device__ inline float m_rsqrt(float x) { return (float)(1.0 / sqrt((double)x)); }
__device__ inline double m_rsqrt(double x) { return 1.0 / sqrt(x); }
SMELT_FLOAT_FN(sqrt, m_sqrt(x)) SMELT_FLOAT_FN(rsqrt, m_rsqrt(x)) SMELT_FLOAT_FN(exp, m_exp(x))
SMELT_FLOAT_FN(exp2, m_exp2(x)) SMELT_FLOAT_FN(expm1, m_expm1(x)) SMELT_FLOAT_FN(log, m_log(x))
SMELT_FLOAT_FN(log2, m_log2(x)) SMELT_FLOAT_FN(log10, m_log10(x)) SMELT_FLOAT_FN(log1p, m_log1p(x))
SMELT_FLOAT_FN(sin, m_sin(x)) SMELT_FLOAT_FN(cos, m_cos(x)) SMELT_FLOAT_FN(tan, m_tan(x))
SMELT_FLOAT_FN(asin, m_asin(x)) SMELT_FLOAT_FN(acos, m_acos(x)) SMELT_FLOAT_FN(atan, m_atan(x))
SMELT_FLOAT_FN(sinh, m_sinh(x)) SMELT_FLOAT_FN(cosh, m_cosh(x)) SMELT_FLOAT_FN(tanh, m_tanh(x))
SMELT_FLOAT_FN(asinh, m_asinh(x)) SMELT_FLOAT_FN(acosh, m_acosh(x)) SMELT_FLOAT_FN(atanh, m_atanh(x))
SMELT_FLOAT_FN(erf, m_erf(x))
SMELT_FLOAT_FN(floor, x != x ? x : m_floor(x)) SMELT_FLOAT_FN(ceil, x != x ? x : m_ceil(x))
SMELT_FLOAT_FN(round, x != x ? x : m_rint(x))

__device__ inline double erfinv_giles(double a) {
  double w = -log((1.0 - a) * (1.0 + a)), p;
  if (w < 5.0) {
    w = w - 2.5; p = 2.81022636e-08; p = 3.43273939e-07 + p * w; p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w; p = 0.00021858087 + p * w; p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w; p = 0.246640727 + p * w; p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3.0; p = -0.000200214257; p = 0.000100950558 + p * w; p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w; p = 0.00573950773 + p * w; p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w; p = 1.00167406 + p * w; p = 2.83297682 + p * w;
  }
  return p * a;
}
__device__ inline double erfinv_f64(double y) {
  if (!(y >= -1.0 && y <= 1.0)) return __longlong_as_double(0x7ff8000000000000ll);
  if (y == 1.0) return d_inf();
  if (y == -1.0) return -d_inf();
  if (y == 0.0) return y;
  const double a = fabs(y), c = 1.0 - a;
  double x;
  if (c < 1e-3) {
    const double t = -log(c);
    x = sqrt(t);
    for (int i = 0; i < 3; ++i) x = sqrt(t - log(x * 1.7724538509055160273) + log1p(-0.5 / (x * x)));
  } else {
    x = erfinv_giles(a);
  }
  const double two_over_sqrt_pi = 1.1283791670955125739;
  for (int i = 0; i < 2; ++i) {
    const double r = a <= 0.5 ? erf(x) - a : c - erfc(x);
    const double d = two_over_sqrt_pi * exp(-x * x);
    x = x - r / (d + x * r);
  }
  return y < 0 ? -x : x;
}
template <class T> __device__ inline T op_erfinv(T x) { return cvt<T, double>(erfinv_f64((double)up(x))); }
// 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below: both as e/(1+e) with e = e^-|x|, the same
// operations on the same values without a branch (warps with both signs run one exp, not two).
// 16-bit results keep 8 or 11 bits: the hardware's exp2 and division (relative error below
// 2^-20) round to the same 16-bit value as the exact ones except within 2^-20 of a tie, so
// float16/bfloat16 take them (SwiGLU's sigmoid is the whole cost of W2). Fused and unfused
// kernels call this one function, so they stay bit-equal.
template <class T> __device__ inline T op_sigmoid(T x_) {
  typedef calc<T> C; const C x = up(x_);
  if constexpr (tr<T>::is_half) {
    const float e = __expf(-fabsf(x));
    return down<T>(__fdividef(x >= 0 ? 1.0f : e, 1.0f + e));
  } else {
    const C e = m_exp(-fabs(x));
    return down<T>((x >= 0 ? C(1) : e) / (C(1) + e));
  }
}
template <class T> __device__ inline T op_relu(T x) {
  if constexpr (tr<T>::is_int) return x > 0 ? x : T(0);
  else { const calc<T> v = up(x); return (v > 0 || v != v) ? x : down<T>(calc<T>(0)); }
}
template <class T> __device__ inline bool op_isnan(T x) {
  if constexpr (tr<T>::is_float) { calc<T> v = up(x); return v != v; } else return false;
}
template <class T> __device__ inline bool op_isinf(T x) {
  if constexpr (tr<T>::is_float) { calc<T> v = up(x); return v == (calc<T>)d_inf() || v == -(calc<T>)d_inf(); }
  else return false;
}
template <class T> __device__ inline bool op_isfinite(T x) {
  if constexpr (tr<T>::is_float) { calc<T> v = up(x); return v == v && v != (calc<T>)d_inf() && v != -(calc<T>)d_inf(); }
  else return true;
}
template <class T> __device__ inline bool op_logical_not(T x) { return !truth(x); }
template <class T> __device__ inline T op_bitwise_not(T x) {
  if constexpr (tr<T>::is_bool) return !x; else return (T)(~x);
}

// ---- binary ----
template <class T> __device__ inline T op_add(T a, T b) {
  if constexpr (tr<T>::is_bool) return a || b;
  else if constexpr (tr<T>::is_int) return wrap_add(a, b);
  else return down<T>(up(a) + up(b));
}
template <class T> __device__ inline T op_subtract(T a, T b) {
  if constexpr (tr<T>::is_int) return wrap_sub(a, b); else return down<T>(up(a) - up(b));
}
template <class T> __device__ inline T op_multiply(T a, T b) {
  if constexpr (tr<T>::is_bool) return a && b;
  else if constexpr (tr<T>::is_int) return wrap_mul(a, b);
  else return down<T>(up(a) * up(b));
}
template <class T> __device__ inline T op_divide(T a, T b) { return down<T>(up(a) / up(b)); }
template <class C> __device__ inline C float_divmod(C a, C b, C* modulus) {
  C mod = m_fmod(a, b);
  C div = (a - mod) / b;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) { mod += b; div -= C(1); }
  } else {
    mod = m_copysign(C(0), b);
  }
  C floordiv;
  if (div != 0) {
    floordiv = m_floor(div);
    if (div - floordiv > C(0.5)) floordiv += C(1);
  } else {
    floordiv = m_copysign(C(0), a / b);
  }
  *modulus = mod;
  return floordiv;
}
template <class T> __device__ inline T op_floor_divide(T a, T b) {
  if constexpr (tr<T>::is_int) {
    if (b == 0) return T(0);
    if constexpr (tr<T>::is_signed) {
      if (b == T(-1)) return op_negative(a);
      T q = (T)(a / b);
      if ((T)(a % b) != 0 && ((a < 0) != (b < 0))) q = (T)(q - 1);
      return q;
    } else return (T)(a / b);
  } else {
    typedef calc<T> C; const C x = up(a), y = up(b);
    if (y == 0) return down<T>(x / y);
    C mod; return down<T>(float_divmod(x, y, &mod));
  }
}
template <class T> __device__ inline T op_remainder(T a, T b) {
  if constexpr (tr<T>::is_int) {
    if (b == 0) return T(0);
    if constexpr (tr<T>::is_signed) {
      if (b == T(-1)) return T(0);
      T r = (T)(a % b);
      if (r != 0 && ((r < 0) != (b < 0))) r = (T)(r + b);
      return r;
    } else return (T)(a % b);
  } else {
    typedef calc<T> C; const C x = up(a), y = up(b);
    if (y == 0) return down<T>(m_fmod(x, y));
    C mod; float_divmod(x, y, &mod); return down<T>(mod);
  }
}
template <class T> __device__ inline T op_fmod(T a, T b) {
  if constexpr (tr<T>::is_int) {
    if (b == 0) return T(0);
    if constexpr (tr<T>::is_signed) { if (b == T(-1)) return T(0); }
    return (T)(a % b);
  } else return down<T>(m_fmod(up(a), up(b)));
}
template <class T> __device__ inline T op_power(T a, T b) {
  if constexpr (tr<T>::is_int) {
    if constexpr (tr<T>::is_signed) {
      if (b < 0) { if (a == 1) return T(1); if (a == T(-1)) return (b & 1) ? T(-1) : T(1); return T(0); }
    }
    typedef typename tr<T>::uwide U; typedef typename tr<T>::unsig UE;
    U base = (U)a, result = 1; UE e = (UE)b;
    while (e != 0) { if (e & 1u) result = (U)(result * base); base = (U)(base * base); e = (UE)(e >> 1); }
    return (T)result;
  } else return down<T>(m_pow(up(a), up(b)));
}
template <class T> __device__ inline T op_maximum(T a, T b) {
  if constexpr (tr<T>::is_float) { const calc<T> x = up(a), y = up(b); return (x >= y || x != x) ? a : b; }
  else return a >= b ? a : b;
}
template <class T> __device__ inline T op_minimum(T a, T b) {
  if constexpr (tr<T>::is_float) { const calc<T> x = up(a), y = up(b); return (x <= y || x != x) ? a : b; }
  else return a <= b ? a : b;
}
template <class T> __device__ inline T op_atan2(T a, T b) { return down<T>(m_atan2(up(a), up(b))); }
template <class T> __device__ inline bool op_equal(T a, T b) { return up(a) == up(b); }
template <class T> __device__ inline bool op_not_equal(T a, T b) { return up(a) != up(b); }
template <class T> __device__ inline bool op_less(T a, T b) { return up(a) < up(b); }
template <class T> __device__ inline bool op_less_equal(T a, T b) { return up(a) <= up(b); }
template <class T> __device__ inline bool op_greater(T a, T b) { return up(a) > up(b); }
template <class T> __device__ inline bool op_greater_equal(T a, T b) { return up(a) >= up(b); }
template <class T> __device__ inline bool op_logical_and(T a, T b) { return truth(a) && truth(b); }
template <class T> __device__ inline bool op_logical_or(T a, T b) { return truth(a) || truth(b); }
template <class T> __device__ inline bool op_logical_xor(T a, T b) { return truth(a) != truth(b); }
template <class T> __device__ inline T op_bitwise_and(T a, T b) { if constexpr (tr<T>::is_bool) return a && b; else return (T)(a & b); }
template <class T> __device__ inline T op_bitwise_or(T a, T b) { if constexpr (tr<T>::is_bool) return a || b; else return (T)(a | b); }
template <class T> __device__ inline T op_bitwise_xor(T a, T b) { if constexpr (tr<T>::is_bool) return a != b; else return (T)(a ^ b); }
template <class T> __device__ inline bool shift_in_range(T b) {
  if constexpr (tr<T>::is_signed) { if (b < 0) return false; }
  return (u64)b < sizeof(T) * 8;
}
template <class T> __device__ inline T op_left_shift(T a, T b) {
  if (!shift_in_range(b)) return T(0);
  typedef typename tr<T>::uwide U; return (T)(U)((U)a << b);
}
template <class T> __device__ inline T op_right_shift(T a, T b) {
  if (!shift_in_range(b)) { if constexpr (tr<T>::is_signed) return a < 0 ? T(-1) : T(0); else return T(0); }
  return (T)(a >> b);
}

// ---- reductions (src/backend/cpu/reduce.cpp's Red): 0 sum, 1 prod, 2 max, 3 min, 4 all, 5 any ----
template <int OP, class In> struct Red {
  static constexpr bool kSumLike = OP == 0 || OP == 1, kBoolOut = OP == 4 || OP == 5;
  typedef typename cond_t<kBoolOut, bool, typename cond_t<kSumLike && !tr<In>::is_float, u64, calc<In>>::type>::type Acc;
  typedef typename cond_t<kBoolOut, bool, typename cond_t<!kSumLike || tr<In>::is_float, In,
      typename cond_t<tr<In>::is_int && !tr<In>::is_signed, u64, i64>::type>::type>::type Out;
  __device__ static Acc init() {
    if constexpr (OP == 0) return Acc(0);
    else if constexpr (OP == 1) return Acc(1);
    else if constexpr (OP == 4) return true;
    else if constexpr (OP == 5) return false;
    else if constexpr (tr<Acc>::is_bool) return OP == 3;
    else if constexpr (tr<Acc>::is_fp) return OP == 2 ? -(Acc)d_inf() : (Acc)d_inf();
    else return OP == 2 ? tr<Acc>::lowest() : tr<Acc>::highest();
  }
  __device__ static Acc load(In x) {
    if constexpr (kBoolOut) { return truth(x); }
    else if constexpr (same_t<Acc, u64>::v && tr<In>::is_signed) return (u64)(i64)x;
    else return (Acc)up(x);
  }
  __device__ static Acc step(Acc a, Acc x) {
    if constexpr (OP == 0) return (Acc)(a + x);
    else if constexpr (OP == 1) return (Acc)(a * x);
    else if constexpr (OP == 4) return a && x;
    else if constexpr (OP == 5) return a || x;
    else if constexpr (tr<Acc>::is_bool) return OP == 2 ? (a || x) : (a && x);
    else if constexpr (tr<Acc>::is_fp) {
      if constexpr (OP == 2) return x != x ? x : (x > a ? x : a);
      else return x != x ? x : (x < a ? x : a);
    } else {
      if constexpr (OP == 2) return x > a ? x : a;
      else return x < a ? x : a;
    }
  }
  __device__ static Out finish(Acc a) {
    if constexpr (same_t<Acc, u64>::v) return (Out)a;
    else return cvt<Out, Acc>(a);
  }
};
)CUDA";
}

}  // namespace smelt::cuda
