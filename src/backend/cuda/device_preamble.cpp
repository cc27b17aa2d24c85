// The device-side preamble of every CUDA kernel: element types, astype conversions, then the shared scalar math.
//
// The scalar math of the operators and the reduction operators are not written here: they are
// src/backend/cpu/scalar_math.h and src/backend/cpu/reduce_math.h themselves, the headers the CPU
// kernels include, embedded as text at build time (embedded_cuda_scalar_math, after
// src/backend/cuda/device_std.h for the standard names they use). What stays here is the device's
// storage layer: the integer typedefs, the 16-bit float storage types (with the hardware
// conversions from sm_53/sm_80, the CPU's bits), and astype's conversions (src/core/convert.h's
// rules). Built with --fmad=false and IEEE division and square root, the arithmetic operators,
// conversions, comparisons, integer ops, floor/ceil/round, fmod, sqrt, min/max and the half
// rounding equal the CPU bit for bit. The float32 and float64 transcendental functions are CUDA's
// libdevice ones (sinf, expf, ...), which differ from the CPU's by a few ulps (docs/cuda.md).
#include "src/backend/cuda/compiler.h"

#include <string>

#include "src/codegen/embedded_sources.h"

namespace smelt::cuda {

namespace {

const char* device_types() {
  return R"CUDA(
typedef signed char i8; typedef short i16; typedef int i32; typedef long long i64;
typedef unsigned char u8; typedef unsigned short u16; typedef unsigned int u32; typedef unsigned long long u64;
struct f16 { u16 b; };
struct bf16 { u16 b; };
// The same floats computed with the hardware's conversions alone: equal values, but a NaN's bits
// are not the CPU's. A fused kernel computes with these first and recomputes with f16/bf16 when
// an output is NaN (cuda_emitter.cpp, "NaN-optimistic").
struct f16q { u16 b; };
struct bf16q { u16 b; };
// The names scalar_math.h gives the 16-bit float storage types.
typedef f16 float16_t;
typedef bf16 bfloat16_t;
typedef f16q float16q_t;
typedef bf16q bfloat16q_t;

#define MAXD 10
struct Layout { i64 nd; i64 shape[MAXD]; i64 st[4][MAXD]; };
__device__ inline i64 bid() { return (i64)blockIdx.y * gridDim.x + blockIdx.x; }
__device__ inline i64 gid() { return bid() * blockDim.x + threadIdx.x; }
// Index arithmetic of non-negative values in 32 bits when both fit (a 64-bit division is a
// software loop of about 70 instructions, a 32-bit one about 20).
__device__ inline i64 udiv(i64 e, i64 d) { return ((u64)e | (u64)d) >> 32 ? e / d : (i64)((u32)e / (u32)d); }
__device__ inline i64 umod(i64 e, i64 d) { return ((u64)e | (u64)d) >> 32 ? e % d : (i64)((u32)e % (u32)d); }

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
SMELT_TR(f16q, false, true, true, false, u32, u16, f16q{0xfbffu}, f16q{0x7bffu})
SMELT_TR(bf16q, false, true, true, false, u32, u16, bf16q{0xff7fu}, bf16q{0x7f7fu})
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
  // The pair form into a 32-bit register (the high half 0): with a 16-bit register
  // (cvt.rn.bf16.f32) ptxas added a byte permute and a mask to each float rounded to bfloat16
  // and widened back (W6's x + r: 23 of its kernel's 700 instructions a warp and row).
  const u32 x = __float_as_uint(f);
  u32 r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(0.0f), "f"(f));
  return (u16)(f != f ? (x >> 16) | 0x40u : r);
#else
  u32 x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (u16)((x >> 16) | 0x40u);
  u32 lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return (u16)(x >> 16);
#endif
}
// Two floats to the words of a 16-bit float pair, `lo` in the low half (pack's layout): one
// cvt.rn.{bf16,f16}x2.f32 for both where f2bf/f2h take a conversion and a NaN select each (the
// select's integer work bound bfloat16 norms such as W4). A pair holding a NaN goes through
// f2bf/f2h, out of line, so the common path keeps no select: the same bits either way.
__device__ __noinline__ u32 f2bf2_slow(float lo, float hi) { return (u32)f2bf(lo) | (u32)f2bf(hi) << 16; }
__device__ __noinline__ u32 f2h2_slow(float lo, float hi) { return (u32)f2h(lo) | (u32)f2h(hi) << 16; }
__device__ inline u32 f2bf2(float lo, float hi) {
#if __CUDA_ARCH__ >= 800
  if (lo != lo || hi != hi) return f2bf2_slow(lo, hi);
  u32 r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return f2bf2_slow(lo, hi);
#endif
}
__device__ inline u32 f2h2(float lo, float hi) {
#if __CUDA_ARCH__ >= 800
  if (lo != lo || hi != hi) return f2h2_slow(lo, hi);
  u32 r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return f2h2_slow(lo, hi);
#endif
}
// The hardware conversions alone (f16q/bf16q): the CPU's bits for every value but NaN.
__device__ inline float h2f_q(u16 h) {
#if __CUDA_ARCH__ >= 530
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
#else
  return h2f(h);
#endif
}
__device__ inline u16 f2h_q(float f) {
#if __CUDA_ARCH__ >= 530
  u16 r; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f)); return r;
#else
  return f2h(f);
#endif
}
__device__ inline u16 f2bf_q(float f) {
#if __CUDA_ARCH__ >= 800
  u32 r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(0.0f), "f"(f)); return (u16)r;
#else
  return f2bf(f);
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
// A 16-bit float widened to float (scalar_math.h's up(), which comes after this).
template <class T> __device__ inline float half_up(T x) {
  if constexpr (same_t<T, f16>::v) return h2f(x.b);
  else if constexpr (same_t<T, f16q>::v) return h2f_q(x.b);
  else return bf2f(x.b);
}
template <class To, class From> __device__ inline To cvt(From v) {
  if constexpr (same_t<To, From>::v) return v;
  else if constexpr (tr<To>::is_bool) {
    if constexpr (tr<From>::is_half) return half_up(v) != 0.0f;
    else return v != From(0);
  } else if constexpr (tr<From>::is_half) return cvt<To, float>(half_up(v));
  else if constexpr (same_t<To, f16>::v) {
    if constexpr (same_t<From, float>::v) return f16{f2h(v)};
    else return f16{d2small((double)v, 6.103515625e-05, 10, true)};
  } else if constexpr (same_t<To, bf16>::v) {
    if constexpr (same_t<From, float>::v) return bf16{f2bf(v)};
    else return bf16{d2small((double)v, 1.1754943508222875e-38, 7, false)};
  } else if constexpr (same_t<To, f16q>::v) {
    if constexpr (same_t<From, float>::v) return f16q{f2h_q(v)};
    else return f16q{d2small((double)v, 6.103515625e-05, 10, true)};
  } else if constexpr (same_t<To, bf16q>::v) {
    if constexpr (same_t<From, float>::v) return bf16q{f2bf_q(v)};
    else return bf16q{d2small((double)v, 1.1754943508222875e-38, 7, false)};
  } else if constexpr (tr<From>::is_fp && tr<To>::is_int) {
    double x = (double)v;
    if constexpr (same_t<To, i64>::v) return to_i64(x);
    else if constexpr (same_t<To, i32>::v) return to_i32(x);
    else if constexpr (same_t<To, u64>::v) return to_u64(x);
    else if constexpr (same_t<To, u32>::v) return (u32)(u64)to_i64(x);
    else return (To)(u32)to_i32(x);
  } else return (To)v;
}

)CUDA";
}

// After the shared headers: the names kernels use unqualified.
const char* device_tail() {
  return R"CUDA(
using smelt::scalar::down;
using smelt::scalar::up;
using smelt::scalar::detail::truth;
)CUDA";
}

}  // namespace

const char* device_preamble() {
  static const std::string text =
      std::string(device_types()) + codegen::embedded_cuda_scalar_math() + device_tail();
  return text.c_str();
}

}  // namespace smelt::cuda
