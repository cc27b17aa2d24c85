// The order in which a CPU reduction combines the elements of one row, shared by the eager Reduce
// kernel (src/backend/cpu/reduce.cpp) and generated fused kernels (embedded in their preamble), so
// that a fused reduction gives the eager one's bits. It depends only on the row length and the
// number of rows, never on the thread count.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

#include "smelt/half.h"
#include "src/backend/cpu/reduce_math.h"
#include "src/backend/cpu/scalar_math.h"
#include "src/core/convert.h"
#include "src/primitives/primitive.h"

namespace smelt {

namespace reduce_order {

/// Work (elements) below which splitting a reduction into groups does not pay; equals
/// cpu::kGrain (reduce.cpp checks), restated here because this header is embedded alone.
inline constexpr int64_t kSplitWork = int64_t(1) << 15;

/// The type reductions of In compute in (16-bit floats as float).
template <class In>
using acc_t = std::conditional_t<is_half_v<In>, float, In>;

/// Number of groups a long reduction with few independent tasks is split into. Depends only on
/// the sizes, so results do not change with the thread count.
inline int64_t group_count(int64_t tasks, int64_t reduce_len, int64_t work_per_step) {
  constexpr int64_t kMinGroup = 1 << 14;
  if (tasks >= 16 || tasks * reduce_len * work_per_step < 4 * kSplitWork) return 1;
  return std::clamp<int64_t>(reduce_len / kMinGroup, 1, 64);
}


/// Element type for buffers of T (std::vector<bool> is not a buffer of bools).
template <class T>
using store_t = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

template <class In>
inline constexpr bool is_float_v = std::is_floating_point_v<In> || is_half_v<In>;

using scalar::Red;
using scalar::widen;

/// Pairwise combination of a stream of partial results (a binary counter of levels), so that
/// accumulating many runs keeps pairwise summation's O(log n) error growth.
template <class R>
class Cascade {
 public:
  using Acc = typename R::Acc;
  void push(Acc v) {
    int level = 0;
    while (n_ > 0 && level_[n_ - 1] == level) {
      v = R::step(val_[n_ - 1], v);
      --n_;
      ++level;
    }
    val_[n_] = v;
    level_[n_++] = level;
  }
  Acc result() const {
    if (n_ == 0) return R::init();
    Acc r = val_[n_ - 1];
    for (int i = n_ - 2; i >= 0; --i) r = R::step(val_[i], r);
    return r;
  }

 private:
  Acc val_[66];
  int level_[66];
  int n_ = 0;
};

/// NaN-propagating max/min of n contiguous elements with explicit 16-byte vectors: the
/// compiler does not vectorize the NaN-aware select on its own.
template <class R, class In>
typename R::Acc minmax_contiguous(const In* p, int64_t n) {
  using Acc = typename R::Acc;
  typedef Acc V __attribute__((vector_size(16)));
  constexpr int L = 16 / sizeof(Acc);
  auto vstep = [](V a, V x) {
    if constexpr (R::kIsMax) return ((x > a) | (x != x)) ? x : a;
    else return ((x < a) | (x != x)) ? x : a;
  };
  auto load = [&](int64_t i) {
    V v;
    if constexpr (std::is_same_v<In, Acc>) {
      std::memcpy(&v, p + i, sizeof(V));
    } else {
      for (int l = 0; l < L; ++l) v[l] = R::load(p[i + l]);
    }
    return v;
  };
  V a0 = V{} + R::init(), a1 = a0;
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    a0 = vstep(a0, load(i));
    a1 = vstep(a1, load(i + L));
  }
  Acc r = R::init();
  for (int l = 0; l < L; ++l) r = R::step(R::step(r, a0[l]), a1[l]);
  for (; i < n; ++i) r = R::step(r, R::load(p[i]));
  return r;
}

/// A leaf's eight lanes combined: ((0+1)+(2+3)) + ((4+5)+(6+7)). `V` is an array of
/// accumulators or a vector of them (reduce_leaf_pair's).
template <class R, class V>
typename R::Acc lane_tree(const V& v) {
  return R::step(R::step(R::step(v[0], v[1]), R::step(v[2], v[3])), R::step(R::step(v[4], v[5]), R::step(v[6], v[7])));
}

/// The pairwise sum's two sibling leaves [p, p + m0) and [p + m0, p + m0 + m1) (8 <= m0, m1 <=
/// 128), each with reduce_run's eight lanes, tree and tail, combined as the pairwise node
/// combines them; the lanes of both advance in one loop, as two vectors of eight (GCC's vector
/// extension: lane-wise IEEE additions or products, the same operations as eight scalar lanes;
/// written as arrays, GCC did not vectorize the two chains).
template <class R, class In>
typename R::Acc reduce_leaf_pair(const In* p, int64_t m0, int64_t m1) {
  using Acc = typename R::Acc;
  static_assert(std::is_same_v<Acc, In> && (R::kOp == ReduceOp::Sum || R::kOp == ReduceOp::Prod));
  typedef Acc Lanes __attribute__((vector_size(8 * sizeof(Acc))));
  // By reference only: a vector returned or passed by value changes the ABI with the ISA.
  auto step = [](Lanes& acc, const In* at) {
    Lanes x;
    std::memcpy(&x, at, sizeof x);
    if constexpr (R::kOp == ReduceOp::Sum) acc += x;
    else acc *= x;
  };
  const In* q = p + m0;
  Lanes a, b;
  for (int l = 0; l < 8; ++l) a[l] = b[l] = R::init();
  const int64_t both = std::min(m0, m1) & ~int64_t(7);
  int64_t i = 0;
  for (; i < both; i += 8) {
    step(a, p + i);
    step(b, q + i);
  }
  int64_t i0 = i, i1 = i;
  for (; i0 + 8 <= m0; i0 += 8) step(a, p + i0);
  for (; i1 + 8 <= m1; i1 += 8) step(b, q + i1);
  Acc ra = lane_tree<R>(a), rb = lane_tree<R>(b);
  for (; i0 < m0; ++i0) ra = R::step(ra, R::load(p[i0]));
  for (; i1 < m1; ++i1) rb = R::step(rb, R::load(q[i1]));
  return R::step(ra, rb);
}

/// Reduces n elements at stride s. Float sums split in halves down to blocks of 128 that use
/// eight accumulators (NumPy's pairwise scheme); the rest use eight lanes, which vectorizes.
template <class R, class In>
typename R::Acc reduce_run(const In* p, int64_t n, int64_t s) {
  using Acc = typename R::Acc;
  constexpr int64_t kBlock = 128;
  if (n < 8) {
    Acc a = R::init();
    for (int64_t i = 0; i < n; ++i) a = R::step(a, R::load(p[i * s]));
    return a;
  }
  if (R::kPairwise && n > kBlock) {
    int64_t h = (n / 2) & ~int64_t(7);
    // Two halves that are both leaves: their eight-lane loops run side by side, two
    // independent chains of additions instead of one (a leaf's adds wait on each other's
    // latency). Each lane sees the same additions in the same order: the same bits.
    if constexpr (std::is_same_v<Acc, In> && (R::kOp == ReduceOp::Sum || R::kOp == ReduceOp::Prod))
      if (s == 1 && n - h <= kBlock) return reduce_leaf_pair<R>(p, h, n - h);
    Acc lo = reduce_run<R>(p, h, s);
    Acc hi = reduce_run<R>(p + h * s, n - h, s);
    return R::step(lo, hi);
  }
  if constexpr (R::kVectorMinMax) {
    if (s == 1) return minmax_contiguous<R>(p, n);
  }
  if constexpr (is_half_v<In>) {
    // Widen blocks in a loop that vectorizes, then reduce them as floats: the same operations
    // in the same order (a pairwise leaf is at most 128 long, so it is one block).
    if (s == 1) {
      using RF = Red<R::kOp, float>;
      static_assert(std::is_same_v<typename RF::Acc, Acc>);
      float buf[256];
      Acc r = R::init();
      for (int64_t b = 0; b < n; b += 256) {
        const int64_t m = std::min<int64_t>(256, n - b);
        for (int64_t i = 0; i < m; ++i) buf[i] = widen(p[b + i]);
        Acc part = reduce_run<RF>(buf, m, 1);
        r = b == 0 ? part : R::step(r, part);
      }
      return r;
    }
  }
  Acc lane[8];
  for (auto& l : lane) l = R::init();
  int64_t i = 0;
  if (s == 1) {
    for (; i + 8 <= n; i += 8)
      for (int l = 0; l < 8; ++l) lane[l] = R::step(lane[l], R::load(p[i + l]));
  } else {
    for (; i + 8 <= n; i += 8)
      for (int l = 0; l < 8; ++l) lane[l] = R::step(lane[l], R::load(p[(i + l) * s]));
  }
  Acc r = lane_tree<R>(lane);
  for (; i < n; ++i) r = R::step(r, R::load(p[i * s]));
  return r;
}


/// The whole order of one contiguous row of n elements among `rows` rows: split into groups by
/// the sizes alone (group_count), each group reduced by reduce_run (short groups in sequence),
/// the groups combined in a fixed pairwise tree. The eager row path runs exactly these steps,
/// spread over threads.
template <ReduceOp Op, class In>
typename Red<Op, In>::Out reduce_row(const In* p, int64_t n, int64_t rows) {
  using R = Red<Op, In>;
  using Acc = typename R::Acc;
  const int64_t groups = group_count(rows, n, 1);
  const int64_t per = (n + groups - 1) / groups;
  auto part = [&](int64_t b, int64_t e) -> Acc {
    if (per < 16) {
      Acc a = R::init();
      for (int64_t i = b; i < e; ++i) a = R::step(a, R::load(p[i]));
      return a;
    }
    return reduce_run<R>(p + b, e - b, 1);
  };
  if (groups == 1) return R::finish(part(0, n));
  store_t<Acc> tmp[64];
  for (int64_t g = 0; g < groups; ++g) tmp[g] = part(g * per, std::min(n, g * per + per));
  for (int64_t w = 1; w < groups; w *= 2)
    for (int64_t g = 0; g + w < groups; g += 2 * w) tmp[g] = R::step(tmp[g], tmp[g + w]);
  return R::finish(tmp[0]);
}

/// Mean's divisor: the count less ddof (at least 0) in T, divided with Binary divide's math.
template <class T>
inline T mean_divisor(int64_t count, int64_t ddof) {
  return convert<T>(static_cast<double>(std::max<int64_t>(count - ddof, 0)));
}

// ---- Generated row kernels -------------------------------------------------------------------

/// Arguments of a generated row kernel (`smelt_fused_rows`): the index space is rows x n, the
/// rows walked through `kept` axes, a row's elements through `red` axes (element strides per
/// argument, argument-major). Outputs are contiguous: n elements a row, or one.
struct RowArgs {
  char* const* ptr;
  int64_t rows, n;
  int kept_nd, red_nd;
  const int64_t* kept_shape;
  const int64_t* kept_strides;  // [arg * kept_nd + d]
  const int64_t* red_shape;
  const int64_t* red_strides;   // [arg * red_nd + d]
};

/// Element offset of row r's first element in argument k. One kept axis (the host merges them:
/// fused.cpp) is a product; more take a division per axis, which with five inputs, each row
/// located three times (row_of and next_row), cost more than a LayerNorm row of 256 itself.
inline int64_t row_offset(const RowArgs& a, int k, int64_t r) {
  if (a.kept_nd == 1) return r * a.kept_strides[k];
  int64_t off = 0;
  for (int d = a.kept_nd - 1; d >= 0; --d) {
    off += (r % a.kept_shape[d]) * a.kept_strides[k * a.kept_nd + d];
    r /= a.kept_shape[d];
  }
  return off;
}

/// Row r of input k as a contiguous run: the array itself when its row is unit-stride, else
/// gathered into `scratch` (n elements) in the row's logical order.
template <class T>
const T* row_of(const RowArgs& a, int k, int64_t r, T* scratch) {
  const T* base = reinterpret_cast<const T*>(a.ptr[k]) + row_offset(a, k, r);
  if (a.red_nd == 1 && a.red_strides[k] == 1) return base;
  if (a.red_nd == 1) {
    const int64_t s = a.red_strides[k];
    for (int64_t j = 0; j < a.n; ++j) scratch[j] = base[j * s];
    return scratch;
  }
  int64_t idx[16] = {0};
  int64_t off = 0;
  const int nd = a.red_nd;
  const int64_t* st = a.red_strides + k * nd;
  for (int64_t j = 0; j < a.n; ++j) {
    scratch[j] = base[off];
    for (int d = nd - 1; d >= 0; --d) {
      off += st[d];
      if (++idx[d] < a.red_shape[d]) break;
      off -= st[d] * a.red_shape[d];
      idx[d] = 0;
    }
  }
  return scratch;
}

/// The value of input k that is constant along row r (read at the row's first element).
template <class T>
T row_value(const RowArgs& a, int k, int64_t r) {
  return reinterpret_cast<const T*>(a.ptr[k])[row_offset(a, k, r)];
}

/// Row r + 1 of input k when it is a unit-stride run of its own (not row r again, as for a weight
/// broadcast along the rows) within [.., row_end), else `current` (in cache already): what a row
/// kernel prefetches. Short rows are left to the hardware prefetcher (it follows a stream of
/// them). Never null: GCC drops the prefetches of a loop guarded by a null test.
template <class T>
const char* next_row(const RowArgs& a, int k, int64_t r, int64_t row_end, const T* current) {
  const char* here = reinterpret_cast<const char*>(current);
  if (a.n < 64 || r + 1 >= row_end || a.red_nd != 1 || a.red_strides[k] != 1) return here;
  const int64_t next = row_offset(a, k, r + 1);
  if (next == row_offset(a, k, r)) return here;
  return reinterpret_cast<const char*>(reinterpret_cast<const T*>(a.ptr[k]) + next);
}

/// Elements of a row a generated kernel's loop handles between prefetches.
inline constexpr int64_t kPrefetchChunk = 256;

/// Prefetches the cache lines of bytes [b, e) after p (for writing with `write`). A hint only:
/// it changes no value, and a prefetch never faults.
inline void prefetch_span(const char* p, int64_t b, int64_t e, bool write) {
  for (int64_t x = b; x < e; x += 64) {
    if (write) __builtin_prefetch(p + x, 1, 3);
    else __builtin_prefetch(p + x, 0, 3);
  }
}

/// A row-long scratch buffer (bool included, which std::vector would pack).
template <class T>
std::unique_ptr<T[]> row_buffer(int64_t n) {
  return std::unique_ptr<T[]>(new T[n > 0 ? n : 1]);
}

}  // namespace reduce_order
}  // namespace smelt
