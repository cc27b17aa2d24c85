// Branch-free float32 transcendentals that GCC auto-vectorizes, shared by eager and fused kernels.
//
// Self-contained (standard headers only): code generation pastes it, via scalar_math.h, in front
// of every fused kernel, so eager and fused kernels round identically.
//
// Method. Each function (erf excepted: see there) widens its float argument to double, computes there with plain
// arithmetic, 64-bit integer bit tricks and selects, and rounds to float once at the end. The
// double result is within about 1e-10 relative of the exact value (2^-33; most functions 1e-12),
// so the float result is the correctly rounded one except when the exact value lies that close
// to a rounding midpoint: at most 1 ulp off, and in tests never past 0.501 ulp (with ~1 in 10^6
// results not correctly rounded). Working in double also gives the float special
// cases for free: subnormal inputs and outputs are ordinary doubles, overflow to inf and
// underflow to 0 happen in the final rounding at exactly the correctly rounded thresholds, and
// 2^k scaling never leaves the double range.
//
// Rules that keep every ISA bit-identical and let the loops vectorize on SSE2 as on AVX2:
//  - no libm calls in the fast paths (erf's std::fma excepted: an instruction wherever the CPU has
//    FMA, x86-64-v3 on), no floor/round instructions: integers come from the
//    add-1.5*2^52 trick; no 64-bit integer multiplies, compares or arithmetic shifts (SSE2 and
//    AVX2 have none), no int64 <-> double conversions (only bit patterns);
//  - strict IEEE double arithmetic in a fixed order (built with -ffp-contract=off, no fast math).
//
// sin, cos and tan take a Cody-Waite reduction for |x| <= 2^18 (fast path); larger and
// non-finite arguments go to the C library's double sin/cos/tan (exact Payne-Hanek reduction).
// The eager kernels compute the fast path over a block and redo only blocks that hold such a
// lane; in other loops (fused kernels) the slow path is a function with vector clones, called for
// every vector and blended in per lane, so those loops vectorize too.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

// The eager kernels built for another ISA include this header under their own namespace, so
// that no inline function compiled for that ISA can be picked by the linker for baseline code.
#ifndef SMELT_VMATH_NAMESPACE
#define SMELT_VMATH_NAMESPACE smelt::vmath
#endif

namespace SMELT_VMATH_NAMESPACE {

namespace detail {

inline uint64_t bits(double x) { return std::bit_cast<uint64_t>(x); }
inline double from_bits(uint64_t b) { return std::bit_cast<double>(b); }

inline constexpr uint64_t kSignBit = 0x8000000000000000ull;

/// 1.5 * 2^52: x + kRound - kRound rounds |x| < 2^51 to the nearest integer (ties to even), and
/// the low bits of x + kRound hold that integer in two's complement.
inline constexpr double kRound = 6755399441055744.0;

inline double round_int(double x) { return (x + kRound) - kRound; }
/// 2^k for an integer-valued k in [-1022, 1023].
inline double pow2i(double k) { return from_bits((bits(k + kRound) + 1023u) << 52); }
inline double fabs(double x) { return from_bits(bits(x) & ~kSignBit); }
/// |mag| with the sign bit of `sgn`.
inline double copysign(double mag, double sgn) { return from_bits((bits(mag) & ~kSignBit) | (bits(sgn) & kSignBit)); }
/// `mask` all ones: a; all zeros: b.
inline double select_mask(uint64_t mask, double a, double b) { return from_bits((bits(a) & mask) | (bits(b) & ~mask)); }
// c ? a : b through a bit mask. GCC 12 does not if-convert a select on a float comparison under
// -ftrapping-math (the default), which keeps the loop from vectorizing; the mask form has no branch.
// Conditions compare floats, never doubles: on SSE2 GCC 12 cannot turn a double comparison into
// a 64-bit mask, but widens a float comparison's 32-bit mask without trouble.
inline double sel(bool c, double a, double b) { return select_mask(0 - static_cast<uint64_t>(c), a, b); }
inline float sel(bool c, float a, float b) {
  const uint32_t m = 0 - static_cast<uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & m) | (std::bit_cast<uint32_t>(b) & ~m));
}
/// c0 x^n + c1 x^(n-1) + ... + cn by Horner's rule in fused multiply-adds (one rounding each, the
/// same on every ISA): ((c0 x + c1) x + c2) ...
inline float horner_fma(float, float c) { return c; }
template <class... C>
inline float horner_fma(float x, float c0, float c1, C... rest) {
  return horner_fma(x, std::fma(c0, x, c1), rest...);
}
/// min(max(x, lo), hi), keeping NaN.
inline float clamp(float x, float lo, float hi) {
  x = sel(x < lo, lo, x);
  return sel(x > hi, hi, x);
}
inline constexpr float kInfF = std::numeric_limits<float>::infinity();
inline constexpr float kNaNF = std::numeric_limits<float>::quiet_NaN();

inline constexpr double kLog2e = 1.4426950408889634074;
inline constexpr double kLn2 = 0.69314718055994530942;
// ln 2 split so that k * kLn2Hi is exact for |k| < 2^20 (fdlibm's ln2_hi, ln2_lo).
inline constexpr double kLn2Hi = 6.93147180369123816490e-01;
inline constexpr double kLn2Lo = 1.90821492927058770002e-10;

/// (e^r - 1 - r) / r^2 for |r| <= ln2 / 2: a least-squares fit, relative error < 6e-11 (so
/// below 4e-12 relative in e^r).
inline double expm1_tail(double r) {
  double p = 2.4812592926573334e-05;
  p = p * r + 0.00019899207068850935;
  p = p * r + 0.0013888938637119286;
  p = p * r + 0.008333298584132013;
  p = p * r + 0.041666666338471825;
  p = p * r + 0.16666666718696382;
  p = p * r + 0.500000000002533;
  return p;
}

/// r = x - k ln2 with k = round(x / ln2).
inline double exp_reduce(double x, double& k) {
  k = round_int(x * kLog2e);
  return (x - k * kLn2Hi) - k * kLn2Lo;
}

/// e^x for x in [-700, 700] or NaN.
inline double exp_core(double x) {
  double k;
  const double r = exp_reduce(x, k);
  const double p = 1.0 + (r + (r * r) * expm1_tail(r));
  return p * pow2i(k);
}

/// e^x - 1 for x in [-700, 700] or NaN, accurate relative to the result near 0.
inline double expm1_core(double x) {
  double k;
  const double r = exp_reduce(x, k);
  const double p = r + (r * r) * expm1_tail(r);
  const double s = pow2i(k);
  return s * p + (s - 1.0);
}

/// log(u) for a positive finite double u, as k ln2 + log(m) with m in [sqrt(1/2), sqrt(2)).
inline void log_parts(double u, double& k, double& log_m) {
  constexpr uint64_t kSqrtHalf = 0x3fe6a09e00000000ull;  // sqrt(1/2), top bits
  const uint64_t ix = bits(u) - kSqrtHalf;
  // Exponent plus 2048 by a logical shift (no 64-bit arithmetic shift below AVX-512), turned into
  // a double through its bit pattern.
  const uint64_t e = (bits(u) + (2048ull << 52) - kSqrtHalf) >> 52;
  k = from_bits(e | 0x4330000000000000ull) - (4503599627370496.0 + 2048.0);
  const double m = from_bits((ix & 0x000fffffffffffffull) + kSqrtHalf);
  const double f = m - 1.0;  // exact
  const double s = f / (2.0 + f);
  const double z = s * s;
  // log(m) = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), |s| <= 0.1716 (truncation < 1e-13).
  double p = 2.0 / 15.0;
  p = p * z + 2.0 / 13.0;
  p = p * z + 2.0 / 11.0;
  p = p * z + 2.0 / 9.0;
  p = p * z + 2.0 / 7.0;
  p = p * z + 2.0 / 5.0;
  p = p * z + 2.0 / 3.0;
  log_m = 2.0 * s + s * (z * p);
}

inline double log_core(double u) {
  double k, lm;
  log_parts(u, k, lm);
  return k * kLn2 + lm;
}

/// Applies log's special cases for input x to the value v computed for it.
inline float log_specials(float x, float v) {
  v = sel(x < 0.0f, kNaNF, v);
  v = sel(x == 0.0f, -kInfF, v);
  v = sel(x == kInfF, kInfF, v);
  return sel(x != x, x, v);
}

// pi/2 in three pieces (fdlibm's pio2_1, pio2_2, pio2_2t): k * kPio2_1 and k * kPio2_2 are exact
// for |k| < 2^20.
inline constexpr double kPio2_1 = 1.57079632673412561417e+00;
inline constexpr double kPio2_2 = 6.07710050630396597660e-11;
inline constexpr double kPio2_2t = 2.02226624879595063154e-21;
inline constexpr double kTwoOverPi = 6.36619772367581382433e-01;
inline constexpr double kPi = 3.14159265358979311600e+00;
inline constexpr double kPio2 = 1.57079632679489655800e+00;
inline constexpr double kPio4 = 7.85398163397448278999e-01;

/// Largest |x| on the fast path of sin, cos and tan.
inline constexpr float kTrigFastMax = 262144.0f;  // 2^18

/// r = x - k pi/2, |r| <= pi/4 (a hair more at ties); q's low two bits are k mod 4.
inline double trig_reduce(double x, uint64_t& q) {
  const double t = x * kTwoOverPi + kRound;
  const double k = t - kRound;
  q = bits(t);
  return ((x - k * kPio2_1) - k * kPio2_2) - k * kPio2_2t;
}

/// sin r for |r| <= pi/4: r + r^3 P(r^2), P a least-squares fit (relative error < 2e-11).
inline double sin_poly(double r) {
  const double z = r * r;
  double p = 2.724934263431883e-06;
  p = p * z - 0.00019840081379227705;
  p = p * z + 0.00833333186240183;
  p = p * z - 0.16666666663813304;
  return r + r * (z * p);
}

/// cos r for |r| <= pi/4: 1 - r^2/2 + r^4 P(r^2), P a least-squares fit (error < 1e-12).
inline double cos_poly(double r) {
  const double z = r * r;
  double p = -2.7300632770968115e-07;
  p = p * z + 2.4800597393091046e-05;
  p = p * z - 0.0013888887665194126;
  p = p * z + 0.04166666666429805;
  return (1.0 - 0.5 * z) + (z * z) * p;
}

/// sin(r + k pi/2) from s = sin r and c = cos r, with k mod 4 in q's low bits.
inline double sin_quadrant(double s, double c, uint64_t q) {
  const uint64_t swap = 0 - (q & 1u);
  return from_bits(((bits(s) & ~swap) | (bits(c) & swap)) ^ ((q & 2u) << 62));
}

inline float sin_fast(float x) {
  uint64_t q;
  const double r = trig_reduce(x, q);
  const float v = static_cast<float>(sin_quadrant(sin_poly(r), cos_poly(r), q));
  return sel(x == 0.0f, x, v);  // sin(-0) = -0
}

inline float cos_fast(float x) {
  uint64_t q;
  const double r = trig_reduce(x, q);
  return static_cast<float>(sin_quadrant(sin_poly(r), cos_poly(r), q + 1u));
}

inline float tan_fast(float x) {
  uint64_t q;
  const double r = trig_reduce(x, q);
  const double s = sin_poly(r), c = cos_poly(r);
  // Even k: s / c; odd k: -c / s.
  const uint64_t odd = 0 - (q & 1u);
  const double num = from_bits(((bits(s) & ~odd) | (bits(c) & odd)) ^ (odd & kSignBit));
  const double den = select_mask(odd, s, c);
  const float v = static_cast<float>(num / den);
  return detail::sel(x == 0.0f, x, v);
}

// The C library's double functions (exact reduction) for |x| > kTrigFastMax, inf and NaN.
inline float sin_slow(float x) { return static_cast<float>(std::sin(static_cast<double>(x))); }
inline float cos_slow(float x) { return static_cast<float>(std::cos(static_cast<double>(x))); }
inline float tan_slow(float x) { return static_cast<float>(std::tan(static_cast<double>(x))); }

/// Whether x takes the fast path of sin, cos and tan (false for NaN).
inline bool trig_fast(float x) { return std::fabs(x) <= kTrigFastMax; }

// The slow path as a call a loop can vectorize: GCC's simd attribute makes vector clones of it,
// so the loop calls it once per vector (unconditionally) and blends its lanes in. Lanes on the
// fast path return 0 without calling the C library. `const`: errno, the C library's only side
// effect here, is never read. Not inlined, or the vectorizer would see the branch again.
#if defined(__GNUC__) && !defined(__clang__)
#define SMELT_VMATH_SLOW_LANES __attribute__((simd("notinbranch"), const, noinline))
#else
#define SMELT_VMATH_SLOW_LANES __attribute__((const, noinline))
#endif
SMELT_VMATH_SLOW_LANES inline float sin_slow_lanes(float x) { return trig_fast(x) ? 0.0f : sin_slow(x); }
SMELT_VMATH_SLOW_LANES inline float cos_slow_lanes(float x) { return trig_fast(x) ? 0.0f : cos_slow(x); }
SMELT_VMATH_SLOW_LANES inline float tan_slow_lanes(float x) { return trig_fast(x) ? 0.0f : tan_slow(x); }
#undef SMELT_VMATH_SLOW_LANES

/// atan(t) for t >= 0, inf or NaN: reduced to |u| <= tan(pi/8) by atan(t) = pi/4 + atan((t-1)/(t+1))
/// and atan(t) = pi/2 - atan(1/t), then a least-squares fit of atan(u)/u in u^2 (error < 3e-14).
inline double atan_core(double t) {
  // The thresholds need not be exact: the fit covers |u| a little past tan(pi/8).
  const float tf = static_cast<float>(t);
  const bool big = tf > 2.41421356f;  // tan(3 pi/8)
  const bool mid = tf > 0.41421356f;  // tan(pi/8)
  const double num = sel(big, -1.0, sel(mid, t - 1.0, t));
  const double den = sel(big, t, sel(mid, t + 1.0, 1.0));
  const double off = sel(big, kPio2, sel(mid, kPio4, 0.0));
  const double u = num / den;
  const double z = u * u;
  double p = 0.030895621955842962;
  p = p * z - 0.05891049350577347;
  p = p * z + 0.07568505454708233;
  p = p * z - 0.09079124897459474;
  p = p * z + 0.11110447879554983;
  p = p * z - 0.14285693414220493;
  p = p * z + 0.1999999967750104;
  p = p * z - 0.33333333331532505;
  p = p * z + 0.9999999999999897;
  return off + u * p;
}

/// atan2(y, x) with C's special cases (signed zeros, infinities).
inline double atan2_core(float yf, float xf) {
  const double y = yf, x = xf;
  const double ay = fabs(y), ax = fabs(x);
  double t = ay / ax;
  const float ayf = std::fabs(yf), axf = std::fabs(xf);
  t = sel((ayf == 0.0f) & (axf == 0.0f), 0.0, t);
  t = sel((ayf == kInfF) & (axf == kInfF), 1.0, t);
  double a = atan_core(t);
  a = select_mask(0 - (bits(x) >> 63), kPi - a, a);  // x < 0 or x = -0
  return copysign(a, y);
}

}  // namespace detail

// ---- Square root ------------------------------------------------------------------------------

/// 1 / sqrt(x) in double, rounded once (1.0f / sqrtf(x) rounds twice: up to 1.5 ulps).
inline float rsqrt(float x) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(x))); }

// ---- Exponentials -----------------------------------------------------------------------------

inline float exp(float x) { return static_cast<float>(detail::exp_core(detail::clamp(x, -200.0f, 200.0f))); }

inline float exp2(float x) {
  const double xd = detail::clamp(x, -400.0f, 400.0f);
  const double k = detail::round_int(xd);
  const double r = (xd - k) * detail::kLn2;  // xd - k is exact
  const double p = 1.0 + (r + (r * r) * detail::expm1_tail(r));
  return static_cast<float>(p * detail::pow2i(k));
}

inline float expm1(float x) {
  const float v = static_cast<float>(detail::expm1_core(detail::clamp(x, -200.0f, 200.0f)));
  return detail::sel(x == 0.0f, x, v);
}

// ---- Logarithms -------------------------------------------------------------------------------

inline float log(float x) {
  return detail::log_specials(x, static_cast<float>(detail::log_core(x)));
}

inline float log2(float x) {
  double k, lm;
  detail::log_parts(x, k, lm);
  return detail::log_specials(x, static_cast<float>(k + lm * detail::kLog2e));
}

inline float log10(float x) {
  double k, lm;
  detail::log_parts(x, k, lm);
  constexpr double kLog10_2 = 0.30102999566398119521;
  constexpr double kLog10e = 0.43429448190325182765;
  return detail::log_specials(x, static_cast<float>(k * kLog10_2 + lm * kLog10e));
}

/// log(1 + x) = log(u) + c with u = 1 + x rounded and c = x - (u - 1) its rounding error, exact
/// for |x| < 1. From 1 on c is dropped: 1 + x is exact up to 2^53, and beyond the lost 1/x is far
/// below float precision (while u - 1 can round to x - 1 at x = 2^53).
inline float log1p(float x) {
  using detail::sel;
  const double xd = x;
  const double u = 1.0 + xd;
  const double c = sel(x < 1.0f, xd - (u - 1.0), 0.0);
  float v = static_cast<float>(detail::log_core(u) + c);
  v = sel(x < -1.0f, detail::kNaNF, v);
  v = sel(x == -1.0f, -detail::kInfF, v);
  v = sel(x == detail::kInfF, detail::kInfF, v);
  v = sel(x != x, x, v);
  return sel(x == 0.0f, x, v);
}

// ---- Trigonometric ----------------------------------------------------------------------------

inline float sin(float x) { return detail::sel(detail::trig_fast(x), detail::sin_fast(x), detail::sin_slow_lanes(x)); }
inline float cos(float x) { return detail::sel(detail::trig_fast(x), detail::cos_fast(x), detail::cos_slow_lanes(x)); }
inline float tan(float x) { return detail::sel(detail::trig_fast(x), detail::tan_fast(x), detail::tan_slow_lanes(x)); }

inline float atan(float x) {
  const double xd = x;
  return static_cast<float>(detail::copysign(detail::atan_core(detail::fabs(xd)), xd));
}

inline float atan2(float y, float x) { return static_cast<float>(detail::atan2_core(y, x)); }

// 1 - x and 1 + x are exact in double for float |x| <= 1. |x| > 1 takes the square root of a
// negative number: NaN. (The square root vectorizes only where math errno is off: the eager
// kernels build with -fno-math-errno; the result is the same correctly rounded IEEE sqrt.)

/// asin x = atan(x / sqrt((1 - x)(1 + x))); +-1 gives atan(+-inf) = +-pi/2.
inline float asin(float x) {
  const double xd = x;
  const double t = xd / std::sqrt((1.0 - xd) * (1.0 + xd));
  return static_cast<float>(detail::copysign(detail::atan_core(detail::fabs(t)), xd));
}

/// acos x = 2 atan(sqrt((1 - x) / (1 + x))); -1 gives 2 atan(inf) = pi.
inline float acos(float x) {
  const double xd = x;
  return static_cast<float>(2.0 * detail::atan_core(std::sqrt((1.0 - xd) / (1.0 + xd))));
}

// ---- Hyperbolic -------------------------------------------------------------------------------

/// (e^a - e^-a) / 2 = (m + m / (m + 1)) / 2 with m = e^a - 1: no cancellation near 0.
inline float sinh(float x) {
  const double xd = x;
  const double m = detail::expm1_core(detail::clamp(std::fabs(x), 0.0f, 200.0f));
  const double r = 0.5 * (m + m / (m + 1.0));
  return static_cast<float>(detail::copysign(r, xd));
}

inline float cosh(float x) {
  const double e = detail::exp_core(detail::clamp(std::fabs(x), 0.0f, 200.0f));
  return static_cast<float>(0.5 * (e + 1.0 / e));
}

/// tanh|x| = m / (m + 2) with m = e^(2|x|) - 1; tanh rounds to 1 in float from |x| = 9.01 on.
inline float tanh(float x) {
  const double xd = x;
  const double m = detail::expm1_core(2.0 * detail::clamp(std::fabs(x), 0.0f, 20.0f));
  return static_cast<float>(detail::copysign(m / (m + 2.0), xd));
}

inline float sigmoid(float x) {
  const double e = detail::exp_core(-static_cast<double>(detail::clamp(x, -200.0f, 200.0f)));
  return static_cast<float>(1.0 / (1.0 + e));
}

// ---- Error function ---------------------------------------------------------------------------

/// In float arithmetic, unlike the functions above: GELU's erf is the hot loop of transformer
/// MLPs, and eight float lanes per AVX2 vector with short polynomials run 3x faster than the
/// double-precision form (1.4 against 4.4 ns an element on a Zen 2 core). The price is accuracy:
/// within 1.08 ulp (an exhaustive check of every float in [0, 4.5] measured 1.0523 ulp, and 1.5%
/// of the results are not correctly rounded) instead of 0.501. The polynomial steps are fused
/// multiply-adds (std::fma): one rounding each, exact on every ISA, so the bits are still the
/// same everywhere; on x86-64-v3 and -v4 (FMA) they are single instructions, which made GELU's
/// pass in a ViT's MLP about 1.5x faster than separate multiplies and adds (on a CPU without FMA
/// each is a call of the C library's fmaf: slow, the same bits). Otherwise float operations in a
/// fixed order and int32 bit tricks only.
///   |x| < 0.875: x + x P(x^2), the correction x P(x^2) being at most 13% of the result;
///   0.875 <= |x| < 4: 1 - 2^-k (c0 + (s + q (e^r - 1))) with x^2 = k ln2 - r and q = c0 + s a
///   fit of erfcx(|x|) around 1 weighted by e^(-x^2) (the error each point adds to erf). erf
///   rounds to +-1 from |x| = 3.9192059 on. Least-squares fits, errors below 0.01 and 0.22 ulp.
inline float erf(float x) {
  const float a = detail::clamp(std::fabs(x), 0.0f, 4.0f);
  const float z = a * a;
  const float p = detail::horner_fma(z, 8.714052091818303e-05f, -0.0008220516028814018f, 0.005207621492445469f,
                                     -0.026861969381570816f, 0.11283741146326065f, -0.37612637877464294f,
                                     0.12837916612625122f);
  const float small = std::fma(a, p, a);
  const float t = a - 1.0f;
  const float s = t * detail::horner_fma(t, 0.00013674488582182676f, -0.0012579170288518071f,
                                         0.0054381233640015125f, -0.015798818320035934f, 0.03734898939728737f,
                                         -0.07921945303678513f, 0.15437638759613037f, -0.2732122540473938f);
  const float q = s + 0.4275835454463959f;
  // e^-z = 2^-k e^r: k = round(z / ln2) by the 1.5 * 2^23 trick (z <= 16), r = k ln2 - z with
  // ln 2 split so that k * ln2_hi is exact; e^r - 1 by a Taylor polynomial, |r| <= ln2 / 2.
  const float kf = (z * 1.44269504f + 12582912.0f) - 12582912.0f;
  const float r = std::fma(kf, 1.42860677e-06f, kf * 0.693145752f - z);
  const float e_tail = detail::horner_fma(r, 1.98756912e-04f, 1.39800171e-03f, 8.33333377e-03f, 4.16666627e-02f,
                                          1.66666672e-01f, 0.5f);
  const float e = std::fma(r * r, e_tail, r);
  const uint32_t k = std::bit_cast<uint32_t>(kf + 12582912.0f) & 0x3fffffu;
  const float scale = std::bit_cast<float>((127u - k) << 23);
  const float large = 1.0f - (0.4275835454463959f + std::fma(q, e, s)) * scale;
  const float y = detail::sel(a < 0.875f, small, large);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(y) & 0x7fffffffu) | (std::bit_cast<uint32_t>(x) & 0x80000000u));
}

}  // namespace SMELT_VMATH_NAMESPACE
