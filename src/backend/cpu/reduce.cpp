// CPU kernels for reductions (Reduce, ArgReduce) and cumulative scans (Scan).
//
// Every output element is computed by one fixed sequence of operations that depends only on the
// shapes and strides, never on the thread count: work is split over output elements, and a long
// reduction with few outputs is split into groups whose boundaries come from the sizes alone.
#include <algorithm>
#include <bit>
#include <cstring>
#include <cmath>
#include <limits>
#include <numeric>

#include "smelt/errors.h"
#include "src/backend/cpu/kernel_utils.h"
#include "src/backend/cpu/elementwise_math.h"
#include "src/backend/cpu/kernels.h"
#include "src/backend/cpu/reduce_eight_rows.h"
#include "src/backend/cpu/reduce_order.h"
#include "src/backend/cpu/scalar_math.h"
#include "src/core/convert.h"
#include "src/core/dispatch.h"

namespace smelt::cpu {

namespace {

using reduce_order::Cascade;
using reduce_order::group_count;
using reduce_order::is_float_v;
using reduce_order::Red;
using reduce_order::reduce_run;
using reduce_order::store_t;
using reduce_order::widen;
static_assert(reduce_order::kSplitWork == kGrain, "reduce_order's split threshold must follow the CPU grain");

// ---- Layout planning -------------------------------------------------------------------------

// Sort key of an axis: zero strides (broadcast) count as outermost, else by |stride|.
int64_t stride_key(int64_t s) { return s == 0 ? std::numeric_limits<int64_t>::max() : (s < 0 ? -s : s); }

/// Axes of one role (kept or reduced), outer to inner in memory order, merged where possible.
/// `out` strides are only meaningful for kept axes.
struct Dims {
  Shape shape;
  Strides in;
  Strides out;
  int nd() const { return static_cast<int>(shape.size()); }
  int64_t count() const { return shape_size(shape); }
};

struct AxisInfo {
  int64_t size, in, out;
};

// Sorts by memory order (stable, so equal strides keep the logical order) and merges neighbours
// that form one longer axis in both stride sets.
Dims make_dims(std::vector<AxisInfo> axes) {
  std::stable_sort(axes.begin(), axes.end(),
                   [](const AxisInfo& a, const AxisInfo& b) { return stride_key(a.in) > stride_key(b.in); });
  Dims d;
  for (const auto& a : axes) {
    if (a.size == 1) continue;
    if (!d.shape.empty() && d.in.back() == a.in * a.size && d.out.back() == a.out * a.size) {
      d.shape.back() *= a.size;
      d.in.back() = a.in;
      d.out.back() = a.out;
      continue;
    }
    d.shape.push_back(a.size);
    d.in.push_back(a.in);
    d.out.push_back(a.out);
  }
  return d;
}

/// Walks consecutive row-major positions of `d`, keeping the input and output offsets.
class Walker {
 public:
  Walker(const Dims& d, int64_t start) : d_(d), idx_(d.shape.size(), 0) { seek(start); }
  void seek(int64_t pos) {
    in_ = out_ = 0;
    for (int k = d_.nd() - 1; k >= 0; --k) {
      idx_[k] = pos % d_.shape[k];
      pos /= d_.shape[k];
      in_ += idx_[k] * d_.in[k];
      out_ += idx_[k] * d_.out[k];
    }
  }
  void next() {
    for (int k = d_.nd() - 1; k >= 0; --k) {
      in_ += d_.in[k];
      out_ += d_.out[k];
      if (++idx_[k] < d_.shape[k]) return;
      in_ -= d_.in[k] * d_.shape[k];
      out_ -= d_.out[k] * d_.shape[k];
      idx_[k] = 0;
    }
  }
  /// Position along the innermost axis.
  int64_t inner_index() const { return idx_.empty() ? 0 : idx_.back(); }
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }

 private:
  const Dims& d_;
  std::vector<int64_t> idx_;
  int64_t in_ = 0, out_ = 0;
};

// ---- Reduction operators ---------------------------------------------------------------------

/// Reduces the reduced positions [b, e) (row-major over `red`) starting at `base`.
template <class R, class In>
typename R::Acc reduce_positions(const In* base, const Dims& red, int64_t b, int64_t e) {
  const int nd = red.nd();
  const int64_t inner = red.shape[nd - 1], s = red.in[nd - 1];
  if (nd == 1) return reduce_run<R>(base + b * s, e - b, s);
  Cascade<R> acc;
  Walker w(red, b);
  for (int64_t pos = b; pos < e;) {
    int64_t run = std::min(inner - w.inner_index(), e - pos);
    acc.push(reduce_run<R>(base + w.in(), run, s));
    pos += run;
    w.seek(pos);
  }
  return acc.result();
}

// Row path: each output element reduces its own positions (the innermost axis is reduced).
// Outputs are visited in runs along the innermost kept axis.
template <class R, class In>
void reduce_rows(const In* src, typename R::Out* dst, store_t<typename R::Acc>* part, const Dims& kept,
                 const Dims& red, int64_t groups) {
  using Acc = typename R::Acc;
  const int64_t outs = kept.count(), rn = red.count();
  const int64_t per = (rn + groups - 1) / groups;
  const int64_t klen = kept.nd() ? kept.shape.back() : 1;
  const int64_t kin = kept.nd() ? kept.in.back() : 0, kout = kept.nd() ? kept.out.back() : 0;
  const bool short_rows = red.nd() == 1 && per < 16;
  const int64_t rs = red.in[0];
  parallel_for(outs * groups, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, per)), [&](int64_t tb, int64_t te) {
    for (int64_t g = tb / outs; g <= (te - 1) / outs; ++g) {
      const int64_t ob = std::max(tb, g * outs) - g * outs, oe = std::min(te, (g + 1) * outs) - g * outs;
      const int64_t rb = g * per, re = std::min(rn, rb + per);
      Walker w(kept, ob);
      for (int64_t o = ob; o < oe;) {
        const int64_t run = std::min(klen - w.inner_index(), oe - o);
        const In* base = src + w.in();
        const int64_t out0 = w.out();
        int64_t r = 0;
        if constexpr (kEightRows<R> && std::is_same_v<In, Acc>) {
          // Neighbouring rows (the kept axis contiguous, one reduced run at a stride): eight at a time.
          if (kin == 1 && red.nd() == 1 && rs != 1) {
            typename EightRows<R>::V acc;
            for (; r + 8 <= run; r += 8) {
              const In* p = base + r + rb * rs;
              if constexpr (R::kOp == ReduceOp::Sum && std::is_same_v<Acc, float>) {
                // The float32 sum on the widest ISA: the baseline's 4-lane halves spilled the lanes.
                math_kernels().eight_rows_sum(p, re - rb, rs, short_rows, &acc);
              } else if (short_rows) {
                EightRows<R>::sequence(p, re - rb, rs, acc);
              } else {
                EightRows<R>::run(p, re - rb, rs, acc);
              }
              for (int j = 0; j < 8; ++j) {
                if (part) part[g * outs + out0 + (r + j) * kout] = acc[j];
                else dst[out0 + (r + j) * kout] = R::finish(acc[j]);
              }
            }
          }
        }
        for (; r < run; ++r) {
          Acc acc;
          if (short_rows) {  // many short rows: an inline loop beats the general reducer
            const In* p = base + r * kin + rb * rs;
            acc = R::init();
            for (int64_t i = 0; i < re - rb; ++i) acc = R::step(acc, R::load(p[i * rs]));
          } else {
            acc = reduce_positions<R>(base + r * kin, red, rb, re);
          }
          if (part) part[g * outs + out0 + r * kout] = acc;
          else dst[out0 + r * kout] = R::finish(acc);
        }
        o += run;
        w.seek(o);
      }
    }
  });
}

// Column path: the innermost axis is kept; each task accumulates a tile of it across all the
// reduced positions, which vectorizes over the tile.
template <class R, class In>
void reduce_columns(const In* src, typename R::Out* dst, store_t<typename R::Acc>* part, const Dims& kept,
                    const Dims& red, int64_t groups, int64_t tile) {
  using Acc = typename R::Acc;
  Dims outer{Shape(kept.shape.begin(), kept.shape.end() - 1), Strides(kept.in.begin(), kept.in.end() - 1),
             Strides(kept.out.begin(), kept.out.end() - 1)};
  const int64_t c = kept.shape.back(), cs = kept.in.back(), co = kept.out.back();
  const int64_t tiles = (c + tile - 1) / tile, tasks = outer.count() * tiles, rn = red.count();
  const int64_t outs = kept.count();
  const int64_t per = (rn + groups - 1) / groups;
  constexpr int64_t kRowBlock = 64;  // rows summed in sequence before entering the cascade
  const int64_t red_inner = red.shape.back(), rs = red.in.back();
  // A task's accumulators: a tile, or all the columns when there are fewer (a small reduction
  // then neither clears nor copies a whole tile of scratch for each block of rows).
  const int64_t span = std::min(tile, c);
  parallel_for(tasks * groups, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, per * tile)),
               [&](int64_t tb, int64_t te) {
    std::vector<store_t<Acc>> block(span), stack;
    std::vector<int> levels;
    for (int64_t t = tb; t < te; ++t) {
      int64_t g = t / tasks, task = t % tasks;
      int64_t j0 = (task % tiles) * tile, w = std::min(tile, c - j0);
      Walker ow(outer, task / tiles);
      const In* base = src + ow.in() + j0 * cs;
      int64_t rb = g * per, re = std::min(rn, rb + per);
      Walker rw(red, rb);
      stack.clear();
      levels.clear();
      for (int64_t pos = rb; pos < re;) {
        int64_t stop = R::kPairwise ? std::min(re, pos + kRowBlock) : re;
        for (int64_t j = 0; j < w; ++j) block[j] = R::init();
        store_t<Acc>* a = block.data();
        while (pos < stop) {
          const In* q = base + rw.in();
          if (stop - pos >= 4 && red_inner - rw.inner_index() >= 4) {
            // Four rows at a time, combined pairwise first: a quarter of the accumulator traffic.
            const In *q1 = q + rs, *q2 = q + 2 * rs, *q3 = q + 3 * rs;
            if (cs == 1) {
              for (int64_t j = 0; j < w; ++j)
                a[j] = R::step(a[j], R::step(R::step(R::load(q[j]), R::load(q1[j])),
                                             R::step(R::load(q2[j]), R::load(q3[j]))));
            } else {
              for (int64_t j = 0; j < w; ++j)
                a[j] = R::step(a[j], R::step(R::step(R::load(q[j * cs]), R::load(q1[j * cs])),
                                             R::step(R::load(q2[j * cs]), R::load(q3[j * cs]))));
            }
            pos += 4;
            rw.seek(pos);
            continue;
          }
          if (cs == 1) {
            for (int64_t j = 0; j < w; ++j) a[j] = R::step(a[j], R::load(q[j]));
          } else {
            for (int64_t j = 0; j < w; ++j) a[j] = R::step(a[j], R::load(q[j * cs]));
          }
          ++pos;
          rw.next();
        }
        // Binary-counter merge of row blocks: pairwise over blocks.
        int level = 0;
        while (!levels.empty() && levels.back() == level) {
          const store_t<Acc>* top = stack.data() + (levels.size() - 1) * span;
          for (int64_t j = 0; j < w; ++j) block[j] = R::step(top[j], block[j]);
          levels.pop_back();
          stack.resize(levels.size() * span);
          ++level;
        }
        stack.insert(stack.end(), block.begin(), block.end());
        levels.push_back(level);
      }
      if (levels.empty()) {
        for (int64_t j = 0; j < w; ++j) block[j] = R::init();
      } else {
        std::copy(stack.end() - span, stack.end(), block.begin());
        for (int64_t k = static_cast<int64_t>(levels.size()) - 2; k >= 0; --k) {
          const store_t<Acc>* lo = stack.data() + k * span;
          for (int64_t j = 0; j < w; ++j) block[j] = R::step(lo[j], block[j]);
        }
      }
      int64_t ob = ow.out() + j0 * co;
      if (part) {
        for (int64_t j = 0; j < w; ++j) part[g * outs + ob + j * co] = block[j];
      } else {
        for (int64_t j = 0; j < w; ++j) dst[ob + j * co] = R::finish(block[j]);
      }
    }
  });
}

/// Whether every reduced axis longer than 1 comes after every kept axis longer than 1.
bool trailing_axes(const Shape& shape, const std::vector<int>& axes) {
  bool seen_reduced = false;
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    if (shape[i] == 1) continue;
    const bool reduced = std::binary_search(axes.begin(), axes.end(), i);
    if (!reduced && seen_reduced) return false;
    seen_reduced = seen_reduced || reduced;
  }
  return true;
}

/// Whether the reduced axes longer than 1, in their order, nest as row-major axes do (each one's
/// stride the next one's times its size), so that the reduced positions of a row in row-major
/// order are one run at `stride`, the last one's stride (positive).
bool reduced_run_stride(const Shape& shape, const Strides& strides, const std::vector<int>& axes, int64_t& stride) {
  int64_t next = -1;  // the stride the axis before the last one seen must have
  stride = 0;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    if (shape[i] == 1 || !std::binary_search(axes.begin(), axes.end(), i)) continue;
    if (next < 0) {
      if (strides[i] <= 0) return false;
      stride = strides[i];
    } else if (strides[i] != next) {
      return false;
    }
    next = strides[i] * shape[i];
  }
  return next > 0;
}

/// The elements of a strided array in row-major order (copy_to_row_major: an element-by-element
/// walk over the axes had made the global average pool of a blocked pooling's output, a
/// stride-16 view, 6% of the bundled CNN's compiled call on AVX-512).
template <class In>
std::vector<store_t<In>> gather_row_major(const In* src, const Shape& shape, const Strides& strides) {
  std::vector<store_t<In>> v(static_cast<size_t>(shape_size(shape)));
  copy_to_row_major(src, shape, strides, v.data());
  return v;
}

template <class R, class In>
void run_reduce(const Array& in, Array& out, const std::vector<int>& axes) {
  using Acc = typename R::Acc;
  using Out = typename R::Out;
  SMELT_ASSERT(out.dtype() == dtype_of<Out>(), "Reduce: output dtype " + std::string(dtype_name(out.dtype())) +
                                                   " does not match the kernel's");
  const auto& n = in.node();
  const Strides os = row_major_strides(out.shape());
  auto plan = [&](const Strides& st, Dims& kept, Dims& red) {
    std::vector<AxisInfo> kept_axes, red_axes;
    for (int i = 0; i < in.ndim(); ++i) {
      bool reduced = std::binary_search(axes.begin(), axes.end(), i);
      (reduced ? red_axes : kept_axes).push_back({n.shape[i], st[i], reduced ? 0 : os[i]});
    }
    kept = make_dims(std::move(kept_axes));
    red = make_dims(std::move(red_axes));
    if (red.shape.empty()) red = Dims{{1}, {0}, {0}};
  };
  Dims kept, red;
  plan(n.strides, kept, red);
  const In* src = in_ptr<In>(in);
  // A reduction over the trailing axes (rows) follows the row order of reduce_order.h whatever
  // the input's layout, as fused row kernels do: a row that is not one unit-stride run is read
  // through a row-major copy (the column path would combine in another order).
  // A row whose reduced axes nest as row-major ones do (one run at a stride: a global average
  // pool of a blocked activation, a stride-16 view) is read in place instead: reduce_run walks a
  // strided run in the order it walks a copied one, and the row path is forced. Not for max and
  // min: a unit-stride run takes minmax_contiguous, whose lanes meet in another order, which
  // decides the sign of a zero result and which NaN is returned.
  std::vector<store_t<In>> copy;
  bool rows_in_place = false;
  if (trailing_axes(n.shape, axes) && red.count() > 1 && !(red.nd() == 1 && red.in[0] == 1)) {
    int64_t stride = 0;
    if (!R::kVectorMinMax && reduced_run_stride(n.shape, n.strides, axes, stride)) {
      red = Dims{{red.count()}, {stride}, {0}};
      rows_in_place = true;
    } else {
      copy = gather_row_major<In>(src, n.shape, n.strides);
      src = reinterpret_cast<const In*>(copy.data());
      plan(row_major_strides(n.shape), kept, red);
    }
  }
  Out* dst = out_ptr<Out>(out);
  const int64_t outs = kept.count(), rn = red.count();
  if (outs == 0) return;
  if (rn == 0) {
    Out v = R::finish(R::init());
    std::fill(dst, dst + outs, v);
    return;
  }
  // Tiles of about 8 KiB of accumulators: long contiguous reads, accumulators in L1.
  constexpr int64_t kTile = 8192 / sizeof(Acc);
  const bool columns = !rows_in_place && !kept.shape.empty() && kept.shape.back() >= 8 &&
                       stride_key(kept.in.back()) < stride_key(red.in.back());
  const int64_t tasks = columns ? shape_size(Shape(kept.shape.begin(), kept.shape.end() - 1)) *
                                      ((kept.shape.back() + kTile - 1) / kTile)
                                : outs;
  const int64_t width = columns ? std::min(kTile, kept.shape.back()) : 1;
  const int64_t groups = group_count(tasks, rn, width);
  std::vector<store_t<Acc>> part(groups > 1 ? static_cast<size_t>(groups * outs) : 0);
  store_t<Acc>* pp = groups > 1 ? part.data() : nullptr;
  if (columns) reduce_columns<R>(src, dst, pp, kept, red, groups, kTile);
  else reduce_rows<R>(src, dst, pp, kept, red, groups);
  if (groups == 1) return;
  // Combine the groups' partial results pairwise, in a fixed tree.
  std::vector<store_t<Acc>> tmp(static_cast<size_t>(groups));
  for (int64_t o = 0; o < outs; ++o) {
    for (int64_t g = 0; g < groups; ++g) tmp[g] = part[g * outs + o];
    for (int64_t width2 = 1; width2 < groups; width2 *= 2)
      for (int64_t g = 0; g + width2 < groups; g += 2 * width2) tmp[g] = R::step(tmp[g], tmp[g + width2]);
    dst[o] = R::finish(tmp[0]);
  }
}

// ---- Arg reductions --------------------------------------------------------------------------

/// Whether `x` at a later index replaces the current best `b`. NaN counts as the extreme value
/// (NumPy: the first NaN wins); `Last` takes later ties. Branch-free so tiles vectorize.
template <ArgReduceOp Op, bool Last, class C>
inline bool replaces(C x, C b) {
  const bool better = Op == ArgReduceOp::ArgMax ? (Last ? x >= b : x > b) : (Last ? x <= b : x < b);
  if constexpr (std::is_floating_point_v<C>) {
    if constexpr (Last) return (x != x) | ((b == b) & better);
    else return (b == b) & (better | (x != x));
  } else {
    return better;
  }
}

/// First (or last) index in [b, e) holding the extreme value: one vectorized pass for the value
/// (NaN-propagating max/min), one for its position.
template <ArgReduceOp Op, bool Last, class In>
int64_t arg_range(const In* p, int64_t b, int64_t e, int64_t s, compute_t<In>& value) {
  using C = compute_t<In>;
  using R = Red<Op == ArgReduceOp::ArgMax ? ReduceOp::Max : ReduceOp::Min, In>;
  const C m = static_cast<C>(reduce_run<R>(p + b * s, e - b, s));
  value = m;
  auto hit = [&](int64_t i) {
    C x = widen(p[i * s]);
    if constexpr (std::is_floating_point_v<C>) return m != m ? x != x : x == m;
    else return x == m;
  };
  if constexpr (Last) {
    for (int64_t i = e - 1; i > b; --i)
      if (hit(i)) return i;
    return b;
  } else {
    for (int64_t i = b; i < e - 1; ++i)
      if (hit(i)) return i;
    return e - 1;
  }
}

/// Column path of an arg reduction. `Last` walks the axis backwards with first-occurrence
/// rules, which picks the last occurrence. A position changes its best only when the value's
/// bits change (strictly better, or the first NaN), so the index update is a select.
template <ArgReduceOp Op, bool Last, class In, class I>
void arg_columns(const In* src, int64_t* dst, const Dims& kept, int64_t len, int64_t s) {
  using C = compute_t<In>;
  using Bits = std::conditional_t<sizeof(C) == 8, uint64_t,
               std::conditional_t<sizeof(C) == 4, uint32_t, std::conditional_t<sizeof(C) == 2, uint16_t, uint8_t>>>;
  constexpr int64_t kTile = 512;
  Dims outer{Shape(kept.shape.begin(), kept.shape.end() - 1), Strides(kept.in.begin(), kept.in.end() - 1),
             Strides(kept.out.begin(), kept.out.end() - 1)};
  const int64_t c = kept.shape.back(), cs = kept.in.back(), co = kept.out.back();
  const int64_t tiles = (c + kTile - 1) / kTile, tasks = outer.count() * tiles;
  parallel_for(tasks, std::max<int64_t>(1, kGrain / (len * std::min(c, kTile))), [&](int64_t tb, int64_t te) {
    store_t<C> best[kTile];
    I idx[kTile];
    for (int64_t t = tb; t < te; ++t) {
      const int64_t j0 = (t % tiles) * kTile, w = std::min(kTile, c - j0);
      Walker ow(outer, t / tiles);
      const In* base = src + ow.in() + j0 * cs;
      const int64_t first = Last ? len - 1 : 0;
      for (int64_t j = 0; j < w; ++j) best[j] = widen(base[first * s + j * cs]), idx[j] = static_cast<I>(first);
      for (int64_t k = 1; k < len; ++k) {
        const int64_t i = Last ? len - 1 - k : k;
        const In* q = base + i * s;
        const I ii = static_cast<I>(i);
        for (int64_t j = 0; j < w; ++j) {
          const C x = widen(q[j * cs]);
          const C b = static_cast<C>(best[j]);
          C nb;
          if constexpr (std::is_floating_point_v<C>) {
            if constexpr (Op == ArgReduceOp::ArgMax) nb = b != b ? b : (x != x ? x : (x > b ? x : b));
            else nb = b != b ? b : (x != x ? x : (x < b ? x : b));
          } else {
            if constexpr (Op == ArgReduceOp::ArgMax) nb = x > b ? x : b;
            else nb = x < b ? x : b;
          }
          idx[j] = std::bit_cast<Bits>(nb) != std::bit_cast<Bits>(b) ? ii : idx[j];
          best[j] = nb;
        }
      }
      const int64_t ob = ow.out() + j0 * co;
      for (int64_t j = 0; j < w; ++j) dst[ob + j * co] = idx[j];
    }
  });
}

template <ArgReduceOp Op, bool Last, class In>
void run_argreduce(const Array& in, Array& out, int axis) {
  using C = compute_t<In>;
  const auto& n = in.node();
  const Strides os = row_major_strides(out.shape());
  std::vector<AxisInfo> kept_axes;
  for (int i = 0; i < in.ndim(); ++i)
    if (i != axis) kept_axes.push_back({n.shape[i], n.strides[i], os[i]});
  Dims kept = make_dims(std::move(kept_axes));
  const int64_t len = n.shape[axis], s = n.strides[axis];
  const In* src = in_ptr<In>(in);
  int64_t* dst = out_ptr<int64_t>(out);
  const int64_t outs = kept.count();
  if (outs == 0) return;
  SMELT_ASSERT(len > 0, "ArgReduce: zero-size axis reached the kernel");
  if (!kept.shape.empty() && kept.shape.back() >= 8 && stride_key(kept.in.back()) < stride_key(s)) {
    // Column path: a tile of independent positions advances together along the axis. Index
    // vectors as wide as the values let the update vectorize.
    if constexpr (sizeof(C) < 8) {
      if (len <= std::numeric_limits<int32_t>::max()) return arg_columns<Op, Last, In, int32_t>(src, dst, kept, len, s);
    }
    return arg_columns<Op, Last, In, int64_t>(src, dst, kept, len, s);
  }
  // Row path, split along the axis into ordered groups when there are few outputs.
  const int64_t groups = group_count(outs, len, 1);
  const int64_t per = (len + groups - 1) / groups;
  if (groups == 1) {
    parallel_for(outs, std::max<int64_t>(1, kGrain / len), [&](int64_t tb, int64_t te) {
      Walker w(kept, tb);
      for (int64_t o = tb; o < te; ++o, w.next()) {
        C value;
        dst[w.out()] = arg_range<Op, Last>(src + w.in(), 0, len, s, value);
      }
    });
    return;
  }
  std::vector<store_t<C>> pbest(static_cast<size_t>(groups * outs));
  std::vector<int64_t> pidx(static_cast<size_t>(groups * outs), -1);
  parallel_for(outs * groups, 1, [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t) {
      const int64_t g = t / outs, o = t % outs;
      const int64_t b = g * per, e = std::min(len, b + per);
      if (b >= e) continue;
      Walker w(kept, o);
      C value;
      pidx[t] = arg_range<Op, Last>(src + w.in(), b, e, s, value);
      pbest[t] = value;
    }
  });
  // Merge the groups in order, so ties resolve exactly as one sequential pass would.
  Walker w(kept, 0);
  for (int64_t o = 0; o < outs; ++o, w.next()) {
    C best = static_cast<C>(pbest[o]);
    int64_t bi = pidx[o];
    for (int64_t g = 1; g < groups; ++g) {
      const int64_t t = g * outs + o;
      if (pidx[t] >= 0 && replaces<Op, Last>(static_cast<C>(pbest[t]), best)) best = static_cast<C>(pbest[t]), bi = pidx[t];
    }
    dst[w.out()] = bi;
  }
}

// ---- Scans -----------------------------------------------------------------------------------

template <ScanOp Op>
constexpr ReduceOp scan_as_reduce() {
  switch (Op) {
    case ScanOp::Sum: return ReduceOp::Sum;
    case ScanOp::Prod: return ReduceOp::Prod;
    case ScanOp::Max: return ReduceOp::Max;
    case ScanOp::Min: return ReduceOp::Min;
  }
  return ReduceOp::Sum;
}

template <ScanOp Op, class In>
void run_scan(const Array& in, Array& out, const ScanParams& p) {
  using R = Red<scan_as_reduce<Op>(), In>;
  using Acc = typename R::Acc;
  using Out = typename R::Out;
  SMELT_ASSERT(out.dtype() == dtype_of<Out>(), "Scan: output dtype does not match the kernel's");
  const auto& n = in.node();
  const Strides os = out.node().strides;
  std::vector<AxisInfo> kept_axes;
  for (int i = 0; i < in.ndim(); ++i)
    if (i != p.axis) kept_axes.push_back({n.shape[i], n.strides[i], os[i]});
  Dims kept = make_dims(std::move(kept_axes));
  const int64_t len = n.shape[p.axis];
  // Walking backwards is walking forwards from the last element with negated strides.
  const int64_t s = p.reverse ? -n.strides[p.axis] : n.strides[p.axis];
  const int64_t so = p.reverse ? -os[p.axis] : os[p.axis];
  const int64_t start_in = p.reverse ? (len - 1) * n.strides[p.axis] : 0;
  const int64_t start_out = p.reverse ? (len - 1) * os[p.axis] : 0;
  const In* src = in_ptr<In>(in) + start_in;
  Out* dst = out_ptr<Out>(out) + start_out;
  const int64_t outs = kept.count();
  if (outs == 0 || len == 0) return;
  const bool excl = p.exclusive;
  constexpr int64_t kTile = 1024;
  if (!kept.shape.empty() && kept.shape.back() >= 8 && stride_key(kept.in.back()) < stride_key(s)) {
    Dims outer{Shape(kept.shape.begin(), kept.shape.end() - 1), Strides(kept.in.begin(), kept.in.end() - 1),
               Strides(kept.out.begin(), kept.out.end() - 1)};
    const int64_t c = kept.shape.back(), cs = kept.in.back(), co = kept.out.back();
    const int64_t tiles = (c + kTile - 1) / kTile, tasks = outer.count() * tiles;
    parallel_for(tasks, std::max<int64_t>(1, kGrain / (len * std::min(c, kTile))), [&](int64_t tb, int64_t te) {
      Acc acc[kTile];
      for (int64_t t = tb; t < te; ++t) {
        int64_t j0 = (t % tiles) * kTile, w = std::min(kTile, c - j0);
        Walker ow(outer, t / tiles);
        const In* ib = src + ow.in() + j0 * cs;
        Out* ob = dst + ow.out() + j0 * co;
        for (int64_t j = 0; j < w; ++j) acc[j] = R::init();
        for (int64_t i = 0; i < len; ++i) {
          const In* q = ib + i * s;
          Out* r = ob + i * so;
          if (excl) {
            for (int64_t j = 0; j < w; ++j) {
              Acc x = R::load(q[j * cs]);
              r[j * co] = R::finish(acc[j]);
              acc[j] = R::step(acc[j], x);
            }
          } else {
            for (int64_t j = 0; j < w; ++j) {
              acc[j] = R::step(acc[j], R::load(q[j * cs]));
              r[j * co] = R::finish(acc[j]);
            }
          }
        }
      }
    });
    return;
  }
  parallel_for(outs, std::max<int64_t>(1, kGrain / len), [&](int64_t tb, int64_t te) {
    Walker w(kept, tb);
    for (int64_t o = tb; o < te; ++o, w.next()) {
      const In* q = src + w.in();
      Out* r = dst + w.out();
      Acc acc = R::init();
      if (excl) {
        for (int64_t i = 0; i < len; ++i) {
          Acc x = R::load(q[i * s]);
          r[i * so] = R::finish(acc);
          acc = R::step(acc, x);
        }
      } else {
        for (int64_t i = 0; i < len; ++i) {
          acc = R::step(acc, R::load(q[i * s]));
          r[i * so] = R::finish(acc);
        }
      }
    }
  });
}

/// Mean after the Sum kernel: each output divided by the reduced count with Binary divide's scalar
/// math, so mean is bit-identical to sum / count computed as two ops.
template <class T>
void divide_by_count(const Array& in, Array& out, const ReduceParams& p) {
  if constexpr (scalar::float_v<T>) {
    int64_t count = 1;
    for (int ax : p.axes) count *= in.shape()[ax];
    const T d = reduce_order::mean_divisor<T>(count, p.ddof);
    T* o = static_cast<T*>(out.node().data_ptr());
    const int64_t n = out.size();
    parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = scalar::divide(o[i], d);
    });
  } else {
    throw DtypeError("Reduce(mean): needs a float input, got " + std::string(dtype_name(in.dtype())));
  }
}

}  // namespace

void eval_Reduce(const ReduceParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& in = inputs[0];
  Array& out = outputs[0];
  alloc_contiguous(out);
  dispatch_all(in.dtype(), [&]<class In>() {
    switch (p.op) {
      case ReduceOp::Sum: return run_reduce<Red<ReduceOp::Sum, In>, In>(in, out, p.axes);
      case ReduceOp::Prod: return run_reduce<Red<ReduceOp::Prod, In>, In>(in, out, p.axes);
      case ReduceOp::Max: return run_reduce<Red<ReduceOp::Max, In>, In>(in, out, p.axes);
      case ReduceOp::Min: return run_reduce<Red<ReduceOp::Min, In>, In>(in, out, p.axes);
      case ReduceOp::All: return run_reduce<Red<ReduceOp::All, In>, In>(in, out, p.axes);
      case ReduceOp::Any: return run_reduce<Red<ReduceOp::Any, In>, In>(in, out, p.axes);
      case ReduceOp::Mean:
        if constexpr (!scalar::float_v<In>) return divide_by_count<In>(in, out, p);  // throws
        else {
          run_reduce<Red<ReduceOp::Sum, In>, In>(in, out, p.axes);
          return divide_by_count<In>(in, out, p);
        }
    }
  });
}

void eval_ArgReduce(const ArgReduceParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& in = inputs[0];
  Array& out = outputs[0];
  alloc_contiguous(out);
  dispatch_all(in.dtype(), [&]<class In>() {
    switch (p.op) {
      case ArgReduceOp::ArgMax:
        if (p.last) return run_argreduce<ArgReduceOp::ArgMax, true, In>(in, out, p.axis);
        return run_argreduce<ArgReduceOp::ArgMax, false, In>(in, out, p.axis);
      case ArgReduceOp::ArgMin:
        if (p.last) return run_argreduce<ArgReduceOp::ArgMin, true, In>(in, out, p.axis);
        return run_argreduce<ArgReduceOp::ArgMin, false, In>(in, out, p.axis);
    }
  });
}

void eval_Scan(const ScanParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& in = inputs[0];
  Array& out = outputs[0];
  // In place is safe: each element is read before the same position is written.
  if (in.dtype() != out.dtype() || !try_donate(out, in)) alloc_contiguous(out);
  dispatch_all(in.dtype(), [&]<class In>() {
    switch (p.op) {
      case ScanOp::Sum: return run_scan<ScanOp::Sum, In>(in, out, p);
      case ScanOp::Prod: return run_scan<ScanOp::Prod, In>(in, out, p);
      case ScanOp::Max: return run_scan<ScanOp::Max, In>(in, out, p);
      case ScanOp::Min: return run_scan<ScanOp::Min, In>(in, out, p);
    }
  });
}

}  // namespace smelt::cpu
