// CPU kernels for sorting along an axis: Sort, ArgSort and TopK (NaN sorts as the largest value).
#include <algorithm>
#include <utility>
#include <vector>

#include "src/backend/cpu/kernel_utils.h"
#include "src/backend/cpu/kernels.h"
#include "src/core/dispatch.h"

namespace smelt::cpu {

namespace {

// The type elements compare in: float for the 16-bit floats, uint8 for bool, T otherwise.
template <class T>
using key_t = std::conditional_t<is_half_v<T>, float, std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>>;

template <class T>
inline key_t<T> key_of(T v) {
  if constexpr (is_half_v<T>) return static_cast<float>(v);
  else return static_cast<key_t<T>>(v);
}

// Ascending order with every NaN after every number and NaNs equal to each other: a strict weak
// order, so stable sorts and tie rules are well defined. -0 and +0 are equal, as in NumPy.
template <class K>
struct Ascending {
  bool operator()(K a, K b) const {
    if constexpr (std::is_floating_point_v<K>) return a < b || (b != b && a == a);
    else return a < b;
  }
};
// Descending: the exact reverse of Ascending, so NaN comes first (it is the largest).
template <class K>
struct Descending {
  bool operator()(K a, K b) const { return Ascending<K>{}(b, a); }
};

/// Where the rows along `axis` live in the input (any strides) and in the row-major output,
/// whose axis has `m` elements.
struct RowLayout {
  int64_t n = 0;     // input elements per row
  int64_t m = 0;     // output elements per row
  int64_t rows = 0;  // number of rows
  int64_t inner = 1;
  int64_t axis_stride = 0;
  Shape other_shape;  // the input shape without the axis
  Strides other_strides;

  RowLayout(const Array& in, int axis, int64_t out_len) {
    const auto& node = in.node();
    n = node.shape[axis];
    m = out_len;
    axis_stride = node.strides[axis];
    rows = 1;
    for (size_t d = 0; d < node.shape.size(); ++d) {
      if (static_cast<int>(d) == axis) continue;
      other_shape.push_back(node.shape[d]);
      other_strides.push_back(node.strides[d]);
      rows *= node.shape[d];
      if (static_cast<int>(d) > axis) inner *= node.shape[d];
    }
  }
  int64_t in_offset(int64_t r) const {
    int64_t off = 0;
    for (int d = static_cast<int>(other_shape.size()) - 1; d >= 0; --d) {
      off += (r % other_shape[d]) * other_strides[d];
      r /= other_shape[d];
    }
    return off;
  }
  // The output is row-major: consecutive elements of a row are `inner` apart.
  int64_t out_offset(int64_t r) const { return (r / inner) * m * inner + r % inner; }
};

// Rows per parallel chunk so that a chunk sorts at least a few thousand elements.
int64_t row_grain(int64_t n) { return std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(n, 1)); }

// A single long row is sorted in parallel: stable-sort equal chunks, then merge them pairwise.
// A stable sort's result is unique, so it does not depend on the number of chunks.
constexpr int64_t kParallelSortMin = int64_t{1} << 15;

template <class V, class Cmp>
void stable_sort_row(V* data, int64_t n, Cmp cmp) {
  int64_t chunks = std::min<int64_t>(num_threads(), n / (kParallelSortMin / 2));
  if (chunks <= 1) {
    std::stable_sort(data, data + n, cmp);
    return;
  }
  std::vector<int64_t> bounds(static_cast<size_t>(chunks) + 1);
  for (int64_t c = 0; c <= chunks; ++c) bounds[c] = n * c / chunks;
  parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) std::stable_sort(data + bounds[c], data + bounds[c + 1], cmp);
  });
  std::vector<V> tmp(static_cast<size_t>(n));
  V* from = data;
  V* to = tmp.data();
  for (int64_t width = 1; width < chunks; width *= 2) {
    int64_t pairs = (chunks + 2 * width - 1) / (2 * width);
    parallel_for(pairs, 1, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        int64_t lo = bounds[2 * p * width];
        int64_t mid = bounds[std::min(2 * p * width + width, chunks)];
        int64_t hi = bounds[std::min(2 * p * width + 2 * width, chunks)];
        std::merge(from + lo, from + mid, from + mid, from + hi, to + lo, cmp);
      }
    });
    std::swap(from, to);
  }
  if (from != data) std::copy(from, from + n, data);
}

// Runs row_fn(row, scratch) over every row: in parallel over rows when there are enough of them,
// else row by row with the parallelism inside each row's sort.
template <class Scratch, class RowFn>
void for_each_row(const RowLayout& L, RowFn row_fn) {
  if (L.rows == 0 || L.n == 0) return;
  if (L.rows < num_threads() && L.n >= kParallelSortMin) {
    Scratch scratch;
    for (int64_t r = 0; r < L.rows; ++r) row_fn(r, scratch, true);
    return;
  }
  parallel_for(L.rows, row_grain(L.n), [&](int64_t b, int64_t e) {
    Scratch scratch;
    for (int64_t r = b; r < e; ++r) row_fn(r, scratch, false);
  });
}

template <class T>
void sort_values(const Array& in, Array& out, int axis, bool descending) {
  RowLayout L(in, axis, in.shape()[axis]);
  if (!try_donate(out, in)) alloc_contiguous(out);
  // After donation the input and output share a buffer: each row is read whole before written.
  const T* src = in_ptr<T>(in);
  T* dst = out_ptr<T>(out);
  using K = key_t<T>;
  constexpr bool by_key = is_half_v<T>;  // halves compare through float keys
  // bool rows sort as uint8 (std::vector<bool> packs bits).
  using V = std::conditional_t<by_key, std::pair<K, T>, K>;
  for_each_row<std::vector<V>>(L, [&](int64_t r, std::vector<V>& buf, bool parallel_inside) {
    buf.resize(static_cast<size_t>(L.n));
    const T* s = src + L.in_offset(r);
    for (int64_t j = 0; j < L.n; ++j) {
      if constexpr (by_key) buf[j] = {key_of(s[j * L.axis_stride]), s[j * L.axis_stride]};
      else buf[j] = key_of(s[j * L.axis_stride]);
    }
    auto sort_with = [&](auto order) {
      if constexpr (by_key) {
        auto cmp = [order](const V& a, const V& b) { return order(a.first, b.first); };
        if (parallel_inside) stable_sort_row(buf.data(), L.n, cmp);
        else std::stable_sort(buf.begin(), buf.end(), cmp);
      } else if constexpr (std::is_floating_point_v<K>) {
        // Stable, so that -0/+0 and NaN payloads keep their input order.
        if (parallel_inside) stable_sort_row(buf.data(), L.n, order);
        else std::stable_sort(buf.begin(), buf.end(), order);
      } else {
        // Equal integers are indistinguishable: any sort gives the same result.
        if (parallel_inside) stable_sort_row(buf.data(), L.n, order);
        else std::sort(buf.begin(), buf.end(), order);
      }
    };
    if (descending) sort_with(Descending<K>{});
    else sort_with(Ascending<K>{});
    T* d = dst + L.out_offset(r);
    for (int64_t j = 0; j < L.n; ++j) {
      if constexpr (by_key) d[j * L.inner] = buf[j].second;
      else d[j * L.inner] = static_cast<T>(buf[j]);
    }
  });
}

template <class T>
void argsort_values(const Array& in, Array& out, int axis, bool descending) {
  RowLayout L(in, axis, in.shape()[axis]);
  // 8-byte inputs can lend their buffer: each row is read whole before its indices are written.
  if (!try_donate(out, in)) alloc_contiguous(out);
  const T* src = in_ptr<T>(in);
  int64_t* dst = out_ptr<int64_t>(out);
  using K = key_t<T>;
  using V = std::pair<K, int64_t>;
  for_each_row<std::vector<V>>(L, [&](int64_t r, std::vector<V>& buf, bool parallel_inside) {
    buf.resize(static_cast<size_t>(L.n));
    const T* s = src + L.in_offset(r);
    for (int64_t j = 0; j < L.n; ++j) buf[j] = {key_of(s[j * L.axis_stride]), j};
    auto sort_with = [&](auto order) {
      auto cmp = [order](const V& a, const V& b) { return order(a.first, b.first); };
      if (parallel_inside) stable_sort_row(buf.data(), L.n, cmp);
      else std::stable_sort(buf.begin(), buf.end(), cmp);
    };
    if (descending) sort_with(Descending<K>{});
    else sort_with(Ascending<K>{});
    int64_t* d = dst + L.out_offset(r);
    for (int64_t j = 0; j < L.n; ++j) d[j * L.inner] = buf[j].second;
  });
}

template <class T>
void topk_values(const Array& in, Array& values, Array& indices, int64_t k, int axis, bool largest) {
  RowLayout L(in, axis, k);
  alloc_contiguous(values);
  alloc_contiguous(indices);
  if (k == 0 || L.rows == 0) return;
  const T* src = in_ptr<T>(in);
  T* vdst = out_ptr<T>(values);
  int64_t* idst = out_ptr<int64_t>(indices);
  using K = key_t<T>;
  using V = std::pair<K, int64_t>;
  // Better value first; among equal values the lower index first. This is a total order, so
  // nth_element and sort give one exact answer.
  auto run = [&](auto better) {
    auto cmp = [better](const V& a, const V& b) {
      if (better(a.first, b.first)) return true;
      if (better(b.first, a.first)) return false;
      return a.second < b.second;
    };
    // Leaves the best `kk` of [first, last) at the front, in order.
    auto select = [&](V* first, V* last, int64_t kk) {
      if (kk < last - first) std::nth_element(first, first + kk, last, cmp);
      std::sort(first, first + kk, cmp);
    };
    auto row = [&](int64_t r, std::vector<V>& buf, bool parallel_inside) {
      buf.resize(static_cast<size_t>(L.n));
      const T* s = src + L.in_offset(r);
      for (int64_t j = 0; j < L.n; ++j) buf[j] = {key_of(s[j * L.axis_stride]), j};
      int64_t chunks = parallel_inside ? std::min<int64_t>(num_threads(), L.n / (kParallelSortMin / 2)) : 1;
      if (chunks > 1 && k * chunks * 4 <= L.n) {
        // The best k overall are among the best k of each chunk; the order is total, so the
        // answer does not depend on the chunks.
        std::vector<int64_t> bounds(static_cast<size_t>(chunks) + 1);
        for (int64_t c = 0; c <= chunks; ++c) bounds[c] = L.n * c / chunks;
        parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
          for (int64_t c = b; c < e; ++c) select(buf.data() + bounds[c], buf.data() + bounds[c + 1], k);
        });
        std::vector<V> candidates;
        for (int64_t c = 0; c < chunks; ++c)
          candidates.insert(candidates.end(), buf.begin() + bounds[c], buf.begin() + bounds[c] + k);
        select(candidates.data(), candidates.data() + candidates.size(), k);
        std::copy(candidates.begin(), candidates.begin() + k, buf.begin());
      } else {
        select(buf.data(), buf.data() + L.n, k);
      }
      int64_t o = L.out_offset(r);
      for (int64_t j = 0; j < k; ++j) {
        vdst[o + j * L.inner] = s[buf[j].second * L.axis_stride];  // the input's own bits
        idst[o + j * L.inner] = buf[j].second;
      }
    };
    for_each_row<std::vector<V>>(L, row);
  };
  if (largest) run(Descending<K>{});
  else run(Ascending<K>{});
}

}  // namespace

void eval_Sort(const SortParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  dispatch_all(inputs[0].dtype(), [&]<class T>() { sort_values<T>(inputs[0], outputs[0], p.axis, p.descending); });
}

void eval_ArgSort(const SortParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  dispatch_all(inputs[0].dtype(), [&]<class T>() { argsort_values<T>(inputs[0], outputs[0], p.axis, p.descending); });
}

void eval_TopK(const TopKParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  dispatch_all(inputs[0].dtype(),
               [&]<class T>() { topk_values<T>(inputs[0], outputs[0], outputs[1], p.k, p.axis, p.largest); });
}

}  // namespace smelt::cpu
