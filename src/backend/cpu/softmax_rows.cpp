// The attention kernel's float softmax row loops, built for AVX-512, AVX2 and the baseline, and the pick.
#include "src/backend/cpu/softmax_rows.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "src/backend/cpu/scalar_math.h"

namespace smelt::cpu {

namespace {

// Selects go through scalar::select's bit mask: GCC 12 does not if-convert a `?:` on a float
// comparison under -ftrapping-math, and a `?:` left these loops scalar (6 ns an element).
using scalar::select;

[[gnu::always_inline]] inline float exp_body(float x) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: t + kMagic rounds t to an integer in its low bits
  const float xc = select(x < -87.33654f, -87.33654f, select(x > 88.0f, 88.0f, x));
  const float big = xc * 1.44269504088896341f + kMagic;
  const float nf = big - kMagic;
  const int32_t ni = std::bit_cast<int32_t>(big) - std::bit_cast<int32_t>(kMagic);
  // Fused multiply-adds (one rounding each, exact on every ISA; instructions from x86-64-v3 on,
  // the C library's fmaf below): nf * ln2_hi is exact, so the first is xc - nf * ln2_hi.
  float r = std::fma(nf, -0.693359375f, xc);
  r = std::fma(nf, 2.12194440e-4f, r);
  const float p = vmath::detail::horner_fma(r, 1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f,
                                            1.6666665459e-1f, 5.0000001201e-1f);
  // Not fused: p r^2 + r with one rounding measured 1.0103 ulp at worst (at -5.8778844), with
  // two 0.99 (every float of [-87.33, 88]).
  const float y = (p * (r * r) + r) + 1.0f;
  const float scaled = y * std::bit_cast<float>((ni + 127) << 23);
  const float z = select(x < -87.33654f, 0.0f, scaled);
  return select(x != x, x, z);
}

/// Independent accumulators that vectorize, combined in a fixed order at the end.
constexpr int kLanes = 8;

/// exp_sum's loop from element j on, adding into the partial sums `acc`, and their total.
[[gnu::always_inline]] inline float exp_sum_from(float* row, int64_t n, float shift, int64_t j, float* acc) {
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float e = exp_body(row[j + l] - shift);
      row[j + l] = e;
      acc[l] += e;
    }
  for (int l = 0; j < n; ++j, ++l) {
    const float e = exp_body(row[j] - shift);
    row[j] = e;
    acc[l] += e;
  }
  float sum = acc[0];
  for (int l = 1; l < kLanes; ++l) sum += acc[l];
  return sum;
}

[[gnu::always_inline]] inline float exp_sum_body(float* row, int64_t n, float shift) {
  float acc[kLanes] = {};
  return exp_sum_from(row, n, shift, 0, acc);
}

/// kLanes floats as one GCC vector: a lane-wise `?:` on it is a blend, which the scalar select's
/// bit masks did not become in scale_max's running maximum (GCC 12 left that loop scalar: 7 of its
/// 270 instructions were vector ones, against exp_sum's 96 of 443).
typedef float LaneVector __attribute__((vector_size(kLanes * sizeof(float))));
static_assert(kLanes == 8, "kNoneYet lists eight lanes");

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
constexpr LaneVector kNoneYet = {kMinusInf, kMinusInf, kMinusInf, kMinusInf, kMinusInf, kMinusInf, kMinusInf, kMinusInf};

/// scale_max's loop from element j on, with the lanes' maxima so far in `maxima`, and the row's;
/// with kAdd, scale_add_max's: the mask added after the scaling.
template <bool kAdd>
[[gnu::always_inline]] inline float scale_max_from(float* row, const float* add, int64_t n, float scale, int64_t j,
                                                   const float (&maxima)[kLanes]) {
  LaneVector best;
  std::memcpy(&best, maxima, sizeof best);
  for (; j + kLanes <= n; j += kLanes) {
    LaneVector x;
    std::memcpy(&x, row + j, sizeof x);
    x = x * scale;
    if constexpr (kAdd) {
      LaneVector a;
      std::memcpy(&a, add + j, sizeof a);
      x = x + a;  // a second rounding: the library builds with -ffp-contract=off
    }
    std::memcpy(row + j, &x, sizeof x);
    best = x > best ? x : best;  // lane l keeps the largest of elements l, l + 8, ... (NaN never wins)
  }
  float acc[kLanes];
  std::memcpy(acc, &best, sizeof acc);
  for (int l = 0; j < n; ++j, ++l) {
    float x = row[j] * scale;
    if constexpr (kAdd) x = x + add[j];
    row[j] = x;
    acc[l] = x > acc[l] ? x : acc[l];
  }
  float m = acc[0];
  for (int l = 1; l < kLanes; ++l) m = acc[l] > m ? acc[l] : m;
  return m;
}

template <bool kAdd>
[[gnu::always_inline]] inline float scale_max_body(float* row, const float* add, int64_t n, float scale) {
  float none[kLanes];
  std::memcpy(none, &kNoneYet, sizeof none);
  return scale_max_from<kAdd>(row, add, n, scale, 0, none);
}

[[gnu::always_inline]] inline void scale_add_body(float* o, const float* p, int64_t n, float alpha) {
  for (int64_t j = 0; j < n; ++j) o[j] = o[j] * alpha + p[j];
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/// Sixteen floats (an AVX-512 register) and their bits, for the AVX-512 loops below, which
/// compute exactly what the loops above do, sixteen elements a step: GCC keeps those loops to
/// eight-float vectors (its AVX-512 tuning prefers 256 bits), and a sixteen-element scalar loop
/// did not vectorize cleanly (12% slower).
typedef float WideVector __attribute__((vector_size(2 * kLanes * sizeof(float))));
typedef int32_t WideBits __attribute__((vector_size(2 * kLanes * sizeof(int32_t))));

/// a * b + c lane-wise with one rounding, as std::fma.
[[gnu::always_inline]] __attribute__((target("arch=x86-64-v4"))) inline WideVector fma_wide(WideVector a, WideVector b,
                                                                                       WideVector c) {
  return (WideVector)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
}

/// exp_body on every lane: the same float operations in the same order.
[[gnu::always_inline]] __attribute__((target("arch=x86-64-v4"))) inline WideVector exp_wide(WideVector x) {
  const WideVector zero = {}, magic = zero + 12582912.0f;
  const WideVector lo = zero - 87.33654f, hi = zero + 88.0f;
  const WideVector xc = x < lo ? lo : (x > hi ? hi : x);
  const WideVector big = xc * 1.44269504088896341f + magic;
  const WideVector nf = big - magic;
  const WideBits ni = (WideBits)big - (WideBits)magic;  // a GCC vector cast keeps the bits
  WideVector r = fma_wide(nf, zero - 0.693359375f, xc);
  r = fma_wide(nf, zero + 2.12194440e-4f, r);
  WideVector p = zero + 1.9875691500e-4f;
  p = fma_wide(p, r, zero + 1.3981999507e-3f);
  p = fma_wide(p, r, zero + 8.3334519073e-3f);
  p = fma_wide(p, r, zero + 4.1665795894e-2f);
  p = fma_wide(p, r, zero + 1.6666665459e-1f);
  p = fma_wide(p, r, zero + 5.0000001201e-1f);
  const WideVector y = (p * (r * r) + r) + 1.0f;
  const WideBits two_n = (ni + 127) << 23;
  const WideVector scaled = y * (WideVector)two_n;
  const WideVector z = x < lo ? zero : scaled;
  return x != x ? x : z;
}

[[gnu::always_inline]] __attribute__((target("arch=x86-64-v4"))) inline LaneVector low_lanes(WideVector v) {
  return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
}
[[gnu::always_inline]] __attribute__((target("arch=x86-64-v4"))) inline LaneVector high_lanes(WideVector v) {
  return __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
}

/// Sixteen elements a step; the partial sums take the first eight and then the next eight,
/// lane by lane, as exp_sum_from's steps of eight do.
[[gnu::always_inline]] __attribute__((target("arch=x86-64-v4"))) inline float exp_sum_wide(float* row, int64_t n, float shift) {
  LaneVector acc = {};
  int64_t j = 0;
  for (; j + 2 * kLanes <= n; j += 2 * kLanes) {
    WideVector x;
    std::memcpy(&x, row + j, sizeof x);
    const WideVector e = exp_wide(x - shift);
    std::memcpy(row + j, &e, sizeof e);
    acc += low_lanes(e);
    acc += high_lanes(e);
  }
  float sums[kLanes];
  std::memcpy(sums, &acc, sizeof sums);
  return exp_sum_from(row, n, shift, j, sums);
}

/// Sixteen elements a step; the lanes' maxima take the first eight and then the next eight, in
/// element order as scale_max_from's steps (which of +0 and -0 stays depends on the order).
template <bool kAdd>
[[gnu::always_inline]] __attribute__((target("arch=x86-64-v4"))) inline float scale_max_wide(float* row, const float* add,
                                                                                         int64_t n, float scale) {
  LaneVector best = kNoneYet;
  int64_t j = 0;
  for (; j + 2 * kLanes <= n; j += 2 * kLanes) {
    WideVector x;
    std::memcpy(&x, row + j, sizeof x);
    x = x * scale;
    if constexpr (kAdd) {
      WideVector a;
      std::memcpy(&a, add + j, sizeof a);
      x = x + a;
    }
    std::memcpy(row + j, &x, sizeof x);
    const LaneVector lo = low_lanes(x), hi = high_lanes(x);
    best = lo > best ? lo : best;
    best = hi > best ? hi : best;
  }
  float maxima[kLanes];
  std::memcpy(maxima, &best, sizeof maxima);
  return scale_max_from<kAdd>(row, add, n, scale, j, maxima);
}

/// scale_add_body sixteen elements a step (lane-wise, so the same bits).
[[gnu::always_inline]] __attribute__((target("arch=x86-64-v4"))) inline void scale_add_wide(float* o, const float* p, int64_t n,
                                                                                        float alpha) {
  int64_t j = 0;
  for (; j + 2 * kLanes <= n; j += 2 * kLanes) {
    WideVector x, y;
    std::memcpy(&x, o + j, sizeof x);
    std::memcpy(&y, p + j, sizeof y);
    x = x * alpha + y;
    std::memcpy(o + j, &x, sizeof x);
  }
  scale_add_body(o + j, p + j, n - j, alpha);
}
#endif

float exp_sum_base(float* row, int64_t n, float shift) { return exp_sum_body(row, n, shift); }
float scale_max_base(float* row, int64_t n, float scale) { return scale_max_body<false>(row, nullptr, n, scale); }
float scale_add_max_base(float* row, const float* add, int64_t n, float scale) {
  return scale_max_body<true>(row, add, n, scale);
}
void scale_add_base(float* o, const float* p, int64_t n, float alpha) { scale_add_body(o, p, n, alpha); }
const SoftmaxRows kBase{exp_sum_base, scale_max_base, scale_add_max_base, scale_add_base};

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SMELT_SOFTMAX_ROWS_ISAS 1
__attribute__((target("arch=x86-64-v3"))) float exp_sum_v3(float* row, int64_t n, float shift) {
  return exp_sum_body(row, n, shift);
}
__attribute__((target("arch=x86-64-v3"))) float scale_max_v3(float* row, int64_t n, float scale) {
  return scale_max_body<false>(row, nullptr, n, scale);
}
__attribute__((target("arch=x86-64-v4"))) float exp_sum_v4(float* row, int64_t n, float shift) {
  return exp_sum_wide(row, n, shift);
}
__attribute__((target("arch=x86-64-v4"))) float scale_max_v4(float* row, int64_t n, float scale) {
  return scale_max_wide<false>(row, nullptr, n, scale);
}
__attribute__((target("arch=x86-64-v3"))) float scale_add_max_v3(float* row, const float* add, int64_t n, float scale) {
  return scale_max_body<true>(row, add, n, scale);
}
__attribute__((target("arch=x86-64-v3"))) void scale_add_v3(float* o, const float* p, int64_t n, float alpha) {
  scale_add_body(o, p, n, alpha);
}
__attribute__((target("arch=x86-64-v4"))) float scale_add_max_v4(float* row, const float* add, int64_t n, float scale) {
  return scale_max_wide<true>(row, add, n, scale);
}
__attribute__((target("arch=x86-64-v4"))) void scale_add_v4(float* o, const float* p, int64_t n, float alpha) {
  scale_add_wide(o, p, n, alpha);
}
const SoftmaxRows kV3{exp_sum_v3, scale_max_v3, scale_add_max_v3, scale_add_v3};
const SoftmaxRows kV4{exp_sum_v4, scale_max_v4, scale_add_max_v4, scale_add_v4};
#endif

}  // namespace

const SoftmaxRows& softmax_rows_for(CpuIsa isa) {
#if defined(SMELT_SOFTMAX_ROWS_ISAS)
  switch (std::min(isa, cpu_isa_supported())) {
    case CpuIsa::Avx512: return kV4;
    case CpuIsa::Avx2: return kV3;
    case CpuIsa::Baseline: return kBase;
  }
#else
  (void)isa;
#endif
  return kBase;
}

const SoftmaxRows& softmax_rows() {
  static const SoftmaxRows& r = softmax_rows_for(cpu_isa());
  return r;
}

float softmax_exp(float x) { return exp_body(x); }

}  // namespace smelt::cpu
