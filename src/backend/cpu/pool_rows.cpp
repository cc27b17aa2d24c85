// The max pooling row kernels of the channel-blocked layout (pool_rows.h), built for the baseline and,
// through target attributes around always-inline bodies, for x86-64-v3 and x86-64-v4. A file of
// their own: under SMELT_NATIVE it keeps the baseline (CMakeLists.txt), since GCC will not inline a
// body carrying -march=native's features into the x86-64-v3 variant.
#include "src/backend/cpu/pool_rows.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "src/backend/cpu/elementwise_math.h"

namespace smelt::cpu {

namespace {

/// kL float lanes as one GCC vector (a register of the target's width) and its lane mask (the
/// vector extension takes no size that depends on a template parameter).
template <int kL>
struct BlockLanes;
template <>
struct BlockLanes<4> {
  typedef float V __attribute__((vector_size(16)));
  typedef int M __attribute__((vector_size(16)));
};
template <>
struct BlockLanes<8> {
  typedef float V __attribute__((vector_size(32)));
  typedef int M __attribute__((vector_size(32)));
};
template <>
struct BlockLanes<16> {
  typedef float V __attribute__((vector_size(64)));
  typedef int M __attribute__((vector_size(64)));
};

/// The row with pool()'s rule (`kExact`: v > a, or v is NaN, compared and selected lane-wise) or
/// with the maximum alone (v > a ? v : a, one maxps), which gives the same bits wherever no NaN
/// is read: the first position replaces the -inf start unless it is -inf itself, and ties keep
/// the earlier value (+0 before -0 stays +0) as pool()'s rule does. The maximum-alone row also
/// sums what it reads and returns false when a sum is NaN (a NaN read, or +inf and -inf both);
/// the caller then runs the exact row: half the instructions for the common row.
template <int kB, int kWidth, bool kExact>
[[gnu::always_inline]] inline bool blocked_max_row_body(const BlockedMaxRow& r) {
  // kWidth lanes: the target's register (4 on the baseline, 8 on x86-64-v3, 16 on -v4). GCC
  // lowers the compare-and-select of a generic vector wider than the target lane by lane (a
  // scalar compare per channel), which had made the two poolings of the bundled CNN a third of
  // its compiled call. Always inlined: an out-of-line copy would be built for the baseline.
  constexpr int kL = kB < kWidth ? kB : kWidth, kN = kB / kL;
  using V = typename BlockLanes<kL>::V;
  using M = typename BlockLanes<kL>::M;
  V sum[kN];
#pragma GCC unroll 4
  for (int n = 0; n < kN; ++n)
    for (int c = 0; c < kL; ++c) sum[n][c] = 0.0f;
  auto take = [&](V& a, int n, const float* at) {
    V v;
    std::memcpy(&v, at + n * kL, sizeof v);
    if constexpr (kExact) {
      const M t = (v > a) | (v != v);  // NaN wins and stays, as in pool()
      a = t ? v : a;
    } else {
      a = v > a ? v : a;
      sum[n] += v;
    }
  };
  // A 2 x 2 window wholly inside the input (the common pooling between convolutions): its four
  // positions in pool()'s order (row-major in the window) without the loops' bounds and index
  // arithmetic per position, which cost more than the position's comparisons.
  const bool two_by_two = r.kd.last - r.kd.first == 1 && r.kh.first == 0 && r.kh.last == 2 && r.dil_h == 1 &&
                          r.dil_w == 1;
  // Likewise a 3 x 3 window wholly inside the input (a ResNet stem's pooling, away from the edges).
  const bool three_by_three = r.kd.last - r.kd.first == 1 && r.kh.first == 0 && r.kh.last == 3 && r.dil_h == 1 &&
                              r.dil_w == 1;
  const int64_t pix = r.pix;
  for (int64_t ow = 0; ow < r.OW; ++ow) {
    const int64_t w0 = ow * r.stride_w - r.pad_w;
    const Range kw = r.cols[ow];
    V a[kN];
#pragma GCC unroll 4
    for (int n = 0; n < kN; ++n)
      for (int c = 0; c < kL; ++c) a[n][c] = -std::numeric_limits<float>::infinity();
    if (two_by_two && kw.first == 0 && kw.last == 2) {
      const float* p0 = r.xp + (((r.d0 + r.kd.first * r.dil_d) * r.H + r.h0) * r.W + w0) * pix;
      const float* at[4] = {p0, p0 + pix, p0 + r.W * pix, p0 + r.W * pix + pix};
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q)
#pragma GCC unroll 4
        for (int n = 0; n < kN; ++n) take(a[n], n, at[q]);
    } else if (three_by_three && kw.first == 0 && kw.last == 3) {
      const float* p0 = r.xp + (((r.d0 + r.kd.first * r.dil_d) * r.H + r.h0) * r.W + w0) * pix;
      for (int i = 0; i < 3; ++i)
#pragma GCC unroll 3
        for (int l = 0; l < 3; ++l)
#pragma GCC unroll 4
          for (int n = 0; n < kN; ++n) take(a[n], n, p0 + (i * r.W + l) * pix);
    } else {
      for (int64_t i = r.kd.first; i < r.kd.last; ++i)
        for (int64_t j = r.kh.first; j < r.kh.last; ++j)
          for (int64_t l = kw.first; l < kw.last; ++l) {
            const float* src =
                r.xp + (((r.d0 + i * r.dil_d) * r.H + r.h0 + j * r.dil_h) * r.W + w0 + l * r.dil_w) * pix;
#pragma GCC unroll 4
            for (int n = 0; n < kN; ++n) take(a[n], n, src);
          }
    }
    if (r.chan || r.relu) {
#pragma GCC unroll 4
      for (int n = 0; n < kN; ++n) {
        if (r.chan) {
          V c;
          std::memcpy(&c, r.chan + n * kL, sizeof c);
          a[n] = r.add_before ? c + a[n] : a[n] + c;  // scalar::add's float addition, lane-wise
        }
        if (r.relu) {
          const M nonpositive = a[n] <= 0.0f;
          a[n] = nonpositive ? V{} : a[n];  // scalar::relu: !(v <= 0) ? v : +0, NaN kept
        }
      }
    }
    std::memcpy(r.yr + ow * pix, a, sizeof a);
  }
  if constexpr (!kExact) {
    for (int n = 0; n < kN; ++n)
      for (int c = 0; c < kL; ++c)
        if (sum[n][c] != sum[n][c]) return false;
  }
  return true;
}

/// The row by its maximum alone, or by pool()'s rule where that row read a NaN.
template <int kB, int kWidth>
[[gnu::always_inline]] inline void blocked_max_row_either(const BlockedMaxRow& r) {
  if (!blocked_max_row_body<kB, kWidth, false>(r)) blocked_max_row_body<kB, kWidth, true>(r);
}

template <int kB>
void blocked_max_row_base(const BlockedMaxRow& r) {
  blocked_max_row_either<kB, 4>(r);
}
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
template <int kB>
__attribute__((target("arch=x86-64-v3"))) void blocked_max_row_v3(const BlockedMaxRow& r) {
  blocked_max_row_either<kB, 8>(r);
}
template <int kB>
__attribute__((target("arch=x86-64-v4"))) void blocked_max_row_v4(const BlockedMaxRow& r) {
  blocked_max_row_either<kB, 16>(r);
}
#endif

}  // namespace

BlockedMaxRowFn blocked_max_row_for(int64_t chunk, CpuIsa isa) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  auto pick = [&](auto base, auto v3, auto v4) -> BlockedMaxRowFn {
    switch (std::min(isa, cpu_isa_supported())) {
      case CpuIsa::Avx512: return v4;
      case CpuIsa::Avx2: return v3;
      case CpuIsa::Baseline: break;
    }
    return base;
  };
#define SMELT_BLOCKED_MAX_ROW(B) pick(blocked_max_row_base<B>, blocked_max_row_v3<B>, blocked_max_row_v4<B>)
#else
  (void)isa;
#define SMELT_BLOCKED_MAX_ROW(B) blocked_max_row_base<B>
#endif
  switch (chunk) {
    case 4: return SMELT_BLOCKED_MAX_ROW(4);
    case 8: return SMELT_BLOCKED_MAX_ROW(8);
    case 16: return SMELT_BLOCKED_MAX_ROW(16);
    case 32: return SMELT_BLOCKED_MAX_ROW(32);
  }
#undef SMELT_BLOCKED_MAX_ROW
  return nullptr;
}

int64_t max_row_chunk(int64_t b) {
  for (int64_t c : {32, 16, 8, 4})
    if (b % c == 0) return c;
  return 0;
}

}  // namespace smelt::cpu
