// Eight neighbouring rows of a reduction at once, as GCC vectors whose lane j is row j: shared by
// the Reduce kernel (reduce.cpp, any Sum or Prod) and the per-ISA float32 sum
// (elementwise_math_impl.h, which instantiates it with a type of its own so that no code built for
// one ISA stands in for another's).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "src/primitives/primitive.h"

namespace smelt::cpu {

/// Eight neighbouring rows at once: rows j = 0..7 start at p + j and step by s != 1 (a global
/// average pool of a channels-last activation read through its NCHW view: each channel's row
/// walks the pixels at a stride of C). reduce_run's order on each row (pairwise halves of the
/// strided path, eight lanes, their tree, the tail; or one sequence for short rows), on GCC
/// vectors whose lane j is row j: each lane sees the same float additions (or products), in the
/// same order and with the same operands first, as reduce_run(p + j, n, s). Read row by row, the
/// eight rows' elements were loads at a stride of C, one lane at a time.
template <class R>
inline constexpr bool kEightRows =
    (R::kOp == ReduceOp::Sum || R::kOp == ReduceOp::Prod) && std::is_floating_point_v<typename R::Acc>;

template <class R>
struct EightRows {
  using Acc = typename R::Acc;
  typedef Acc V __attribute__((vector_size(8 * sizeof(Acc))));

  // By reference only: a vector passed or returned by value changes the ABI with the ISA.
  static void step(V& a, const V& x) {
    if constexpr (R::kOp == ReduceOp::Sum) a = a + x;
    else a = a * x;
  }
  static void load(V& v, const Acc* p) { std::memcpy(&v, p, sizeof v); }
  static void init(V& v) { v = V{} + R::init(); }

  /// One sequence, as reduce_rows' short rows.
  static void sequence(const Acc* p, int64_t n, int64_t s, V& r) {
    init(r);
    V x;
    for (int64_t i = 0; i < n; ++i) {
      load(x, p + i * s);
      step(r, x);
    }
  }

  /// reduce_run(p + j, n, s) for s != 1, lane j.
  static void run(const Acc* p, int64_t n, int64_t s, V& r) {
    V x;
    if (n < 8) {
      sequence(p, n, s, r);
      return;
    }
    if (R::kPairwise && n > 128) {
      const int64_t h = (n / 2) & ~int64_t(7);
      V hi;
      run(p, h, s, r);
      run(p + h * s, n - h, s, hi);
      step(r, hi);
      return;
    }
    V lane[8];
    for (auto& l : lane) init(l);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int l = 0; l < 8; ++l) {
        load(x, p + (i + l) * s);
        step(lane[l], x);
      }
    // lane_tree: ((0+1)+(2+3)) + ((4+5)+(6+7)).
    step(lane[0], lane[1]);
    step(lane[2], lane[3]);
    step(lane[4], lane[5]);
    step(lane[6], lane[7]);
    step(lane[0], lane[2]);
    step(lane[4], lane[6]);
    step(lane[0], lane[4]);
    r = lane[0];
    for (; i < n; ++i) {
      load(x, p + i * s);
      step(r, x);
    }
  }
};

}  // namespace smelt::cpu
