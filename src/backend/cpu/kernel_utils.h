// Helpers shared by the CPU kernels: output allocation, buffer donation, views, strided loops.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "smelt/array.h"
#include "src/core/allocator.h"
#include "src/core/node.h"
#include "src/core/thread_pool.h"

namespace smelt::cpu {

/// Elements per thread below which a kernel stays on one thread.
inline constexpr int64_t kGrain = 1 << 15;

/// Gives `out` a fresh row-major buffer.
inline void alloc_contiguous(Array& out) {
  auto& n = out.node();
  n.buffer = cpu_allocator().allocate(static_cast<size_t>(n.size()) * n.itemsize());
  n.strides = row_major_strides(n.shape);
  n.offset = 0;
}

/// Reuses `in`'s buffer for `out` when nothing else can see it: the input node is referenced
/// only by the consumer being evaluated, its buffer only by that node, and the data is
/// row-contiguous with the same byte size. Returns whether it did.
inline bool try_donate(Array& out, const Array& in) {
  auto& src = in.node();
  auto& dst = out.node();
  if (in.node_ptr().use_count() != 1 || !src.buffer || src.buffer.use_count() != 1) return false;
  if (src.offset != 0 || src.itemsize() != dst.itemsize() || src.size() != dst.size()) return false;
  if (!is_row_contiguous(src.shape, src.strides)) return false;
  dst.buffer = src.buffer;
  dst.strides = row_major_strides(dst.shape);
  dst.offset = 0;
  return true;
}

/// Makes `out` a view of `in`'s buffer.
inline void set_view(Array& out, const Array& in, Strides strides, int64_t offset) {
  auto& n = out.node();
  n.buffer = in.node().buffer;
  n.strides = std::move(strides);
  n.offset = offset;
}

template <class T>
inline const T* in_ptr(const Array& a) {
  return static_cast<const T*>(a.node().data_ptr());
}
template <class T>
inline T* out_ptr(Array& a) {
  return static_cast<T*>(a.node().data_ptr());
}

/// Axes of `shape` merged where every operand's strides allow, size-1 axes dropped.
/// After collapsing, operand k's strides are `strides[k]`.
template <int N>
struct Collapsed {
  Shape shape;
  std::array<Strides, N> strides;
};

template <int N>
Collapsed<N> collapse(const Shape& shape, const std::array<const Strides*, N>& strides) {
  Collapsed<N> c;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    bool merge = !c.shape.empty();
    for (int k = 0; k < N && merge; ++k)
      merge = c.strides[k].back() == (*strides[k])[i] * shape[i];
    if (merge) {
      c.shape.back() *= shape[i];
      for (int k = 0; k < N; ++k) c.strides[k].back() = (*strides[k])[i];
    } else {
      c.shape.push_back(shape[i]);
      for (int k = 0; k < N; ++k) c.strides[k].push_back((*strides[k])[i]);
    }
  }
  if (c.shape.empty()) {
    c.shape.push_back(1);
    for (int k = 0; k < N; ++k) c.strides[k].push_back(0);
  }
  return c;
}

/// Calls body(offsets, n, inner_strides) for each run along the innermost collapsed axis that
/// falls in the row-major element range [begin, end); offsets are element offsets per operand.
template <int N, class Body>
void strided_runs(const Collapsed<N>& c, int64_t begin, int64_t end, Body&& body) {
  const int nd = static_cast<int>(c.shape.size());
  std::vector<int64_t> idx(nd);
  std::array<int64_t, N> off{};
  int64_t rem = begin;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = rem % c.shape[d];
    rem /= c.shape[d];
    for (int k = 0; k < N; ++k) off[k] += idx[d] * c.strides[k][d];
  }
  std::array<int64_t, N> inner;
  for (int k = 0; k < N; ++k) inner[k] = c.strides[k][nd - 1];
  int64_t pos = begin;
  const int64_t last = c.shape[nd - 1];
  while (pos < end) {
    int64_t run = std::min(last - idx[nd - 1], end - pos);
    body(off, run, inner);
    pos += run;
    // Advance the multi-index by `run` (the run ends at the axis end or at `end`).
    idx[nd - 1] += run;
    for (int k = 0; k < N; ++k) off[k] += run * inner[k];
    for (int d = nd - 1; d > 0 && idx[d] == c.shape[d]; --d) {
      idx[d] = 0;
      idx[d - 1]++;
      for (int k = 0; k < N; ++k) off[k] += c.strides[k][d - 1] - c.shape[d] * c.strides[k][d];
    }
  }
}

/// Parallel strided_runs over all elements of `shape`.
template <int N, class Body>
void parallel_strided(const Shape& shape, const std::array<const Strides*, N>& strides, Body&& body,
                      int64_t grain = kGrain) {
  auto c = collapse<N>(shape, strides);
  parallel_for(shape_size(shape), grain, [&](int64_t b, int64_t e) { strided_runs<N>(c, b, e, body); });
}

/// A transposed copy in tiles: `c` (collapsed source and row-major destination strides) whose
/// source is contiguous along its second-to-last axis (A) and strided along the last (B). Element
/// by element, each destination row read B source cache lines for one element each (the load's
/// transposition of MobileNetV3's Gemm weights: 12% of its load); a tile of kTile x kTile reads
/// each of its kTile source lines for kTile elements. The same values in the same places.
template <class T>
void copy_transposed_tiles(const T* src, const Collapsed<2>& c, T* dst) {
  constexpr int64_t kTile = 16;
  const int nd = static_cast<int>(c.shape.size());
  const int64_t rows = c.shape[nd - 2], cols = c.shape[nd - 1];
  const int64_t s_row = c.strides[0][nd - 2], s_col = c.strides[0][nd - 1];
  const int64_t d_row = c.strides[1][nd - 2];
  int64_t outer = 1;
  for (int d = 0; d < nd - 2; ++d) outer *= c.shape[d];
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  const int64_t grain = std::max<int64_t>(1, kGrain / (kTile * cols));
  parallel_for(outer * row_tiles, grain, [&](int64_t begin, int64_t end) {
    for (int64_t job = begin; job < end; ++job) {
      // The outer index's offsets (row-major over the leading axes), then the tile's rows.
      int64_t rem = job / row_tiles, s_off = 0, d_off = 0;
      for (int d = nd - 3; d >= 0; --d) {
        const int64_t i = rem % c.shape[d];
        rem /= c.shape[d];
        s_off += i * c.strides[0][d];
        d_off += i * c.strides[1][d];
      }
      const int64_t r0 = (job % row_tiles) * kTile, r1 = std::min(rows, r0 + kTile);
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t c1 = std::min(cols, c0 + kTile);
        for (int64_t r = r0; r < r1; ++r) {
          const T* s = src + s_off + r * s_row;
          T* d = dst + d_off + r * d_row;
          for (int64_t j = c0; j < c1; ++j) d[j] = s[j * s_col];
        }
      }
    }
  });
}

/// Copies the elements of a strided array (`shape`, element `strides`) from `src` into `dst` in
/// row-major order, a run of the innermost axis at a time, over the pool (a transposition in
/// tiles: copy_transposed_tiles). `D` may differ from `T` (bool read into uint8_t storage).
template <class T, class D>
void copy_to_row_major(const T* src, const Shape& shape, const Strides& strides, D* dst) {
  const Strides rm = row_major_strides(shape);
  const Collapsed<2> c = collapse<2>(shape, {&strides, &rm});  // once, for either path
  if constexpr (std::is_same_v<T, D>) {
    const size_t nd = c.shape.size();
    if (nd >= 2 && c.strides[0][nd - 2] == 1 && c.strides[0][nd - 1] != 1 && c.shape[nd - 2] >= 8 &&
        c.shape[nd - 1] >= 8) {
      copy_transposed_tiles(src, c, dst);
      return;
    }
  }
  auto run = [&](const std::array<int64_t, 2>& off, int64_t len, const std::array<int64_t, 2>& st) {
    const T* s = src + off[0];
    D* d = dst + off[1];
    if constexpr (std::is_same_v<T, D>) {
      if (st[0] == 1) {
        std::memcpy(d, s, static_cast<size_t>(len) * sizeof(T));
        return;
      }
    }
    for (int64_t i = 0; i < len; ++i) d[i] = s[i * st[0]];
  };
  parallel_for(shape_size(shape), kGrain, [&](int64_t b, int64_t e) { strided_runs<2>(c, b, e, run); });
}

}  // namespace smelt::cpu
