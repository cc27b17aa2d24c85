// The dot products of 1x1 convolutions of a 1x1 image (squeeze-excitation layers), built for AVX-512, AVX2 and the baseline, and the pick.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "src/backend/cpu/elementwise_math.h"
#include "src/backend/cpu/kernels.h"

namespace smelt::cpu {

namespace {

/// Output channels [o0, o1) of one image: each a dot product of a weight row with x, in one order
/// on every instruction set: element c goes to lane c mod 32 (four vectors of eight, each a plain
/// multiply then add), the lanes meet as (v0 + v1) + (v2 + v3) and then ((0+1)+(2+3)) +
/// ((4+5)+(6+7)), and the last C mod 32 elements follow one by one. Four independent chains keep
/// the adds' latency hidden; the ISA variants below differ only in vector width per instruction.
template <class S>
[[gnu::always_inline]] inline void dot_rows_body(const S* w, const S* x, S* y, int64_t c, int64_t o0, int64_t o1) {
  typedef S V __attribute__((vector_size(8 * sizeof(S))));
  const int64_t c32 = c & ~int64_t(31);
  for (int64_t o = o0; o < o1; ++o) {
    const S* wr = w + o * c;
    V a[4] = {};
    for (int64_t i = 0; i < c32; i += 32) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        V wv, xv;
        std::memcpy(&wv, wr + i + 8 * j, sizeof wv);
        std::memcpy(&xv, x + i + 8 * j, sizeof xv);
        a[j] = a[j] + wv * xv;
      }
    }
    const V v = (a[0] + a[1]) + (a[2] + a[3]);
    S r = ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
    for (int64_t i = c32; i < c; ++i) r = r + wr[i] * x[i];
    y[o] = r;
  }
}

template <class S>
void dot_rows_base(const S* w, const S* x, S* y, int64_t c, int64_t o0, int64_t o1) {
  dot_rows_body<S>(w, x, y, c, o0, o1);
}
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
template <class S>
__attribute__((target("arch=x86-64-v3"))) void dot_rows_v3(const S* w, const S* x, S* y, int64_t c, int64_t o0,
                                                           int64_t o1) {
  dot_rows_body<S>(w, x, y, c, o0, o1);
}
template <class S>
__attribute__((target("arch=x86-64-v4"))) void dot_rows_v4(const S* w, const S* x, S* y, int64_t c, int64_t o0,
                                                           int64_t o1) {
  dot_rows_body<S>(w, x, y, c, o0, o1);
}
#endif

}  // namespace

DotRowsFn<float> dot_rows_for(CpuIsa isa) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  switch (std::min(isa, cpu_isa_supported())) {
    case CpuIsa::Avx512: return dot_rows_v4<float>;
    case CpuIsa::Avx2: return dot_rows_v3<float>;
    case CpuIsa::Baseline: break;
  }
#endif
  return dot_rows_base<float>;
}

DotRowsFn<double> dot_rows_f64() { return dot_rows_base<double>; }

}  // namespace smelt::cpu
