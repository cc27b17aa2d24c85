// Sorting ops: sort, argsort, topk (lazy primitives) and unique (evaluates its input).
#include <algorithm>
#include <cstring>
#include <numeric>

#include "src/core/dispatch.h"
#include "src/core/shape_math.h"
#include "src/ops/op_utils.h"

namespace smelt {

Array sort(const Array& a, int axis) {
  check_valid(a, "sort");
  int ax = normalize_axis(axis, a.ndim(), "sort", a.shape());
  if (a.shape()[ax] <= 1) return a;  // already sorted
  return make_array(a.shape(), a.dtype(), a.device(), make_prim(PrimKind::Sort, SortParams{ax, false}), {a});
}

Array argsort(const Array& a, int axis, bool descending) {
  check_valid(a, "argsort");
  int ax = normalize_axis(axis, a.ndim(), "argsort", a.shape());
  return make_array(a.shape(), int64, a.device(), make_prim(PrimKind::ArgSort, SortParams{ax, descending}), {a});
}

// `sorted` is accepted for ONNX/PyTorch compatibility: the kernel always returns the k values in
// order (best first, ties by lower index), which is one of the orders `sorted = false` allows.
std::pair<Array, Array> topk(const Array& a, int64_t k, int axis, bool largest, bool /*sorted*/) {
  check_valid(a, "topk");
  int ax = normalize_axis(axis, a.ndim(), "topk", a.shape());
  int64_t n = a.shape()[ax];
  if (k < 0 || k > n)
    throw InvalidArgument("topk: k = " + std::to_string(k) + " is outside [0, " + std::to_string(n) +
                          "] for axis " + std::to_string(axis) + " of " + describe(a));
  Shape out_shape = a.shape();
  out_shape[ax] = k;
  auto outs = detail::make_multi_output({out_shape, out_shape}, {a.dtype(), int64}, a.device(),
                                        make_prim(PrimKind::TopK, TopKParams{k, ax, largest}), {a});
  return {outs[0], outs[1]};
}

namespace {

// The order unique uses: ascending with all NaNs equal and after every number (NumPy >= 1.21
// collapses NaNs into one unique value); -0 and +0 are equal.
template <class T>
bool unique_less(T x, T y) {
  if constexpr (is_half_v<T>) {
    return unique_less(static_cast<float>(x), static_cast<float>(y));
  } else if constexpr (std::is_floating_point_v<T>) {
    return x < y || (y != y && x == x);
  } else {
    return x < y;
  }
}

struct UniqueGroups {
  std::vector<int64_t> first;    // first occurrence (an index along the compared items)
  std::vector<int64_t> counts;
  std::vector<int64_t> inverse;  // per item, its group
};

// Groups `n` items, compared by less(i, j), in ascending order of the items (or in order of first
// occurrence when not `sorted`).
template <class Less>
UniqueGroups group_items(int64_t n, bool sorted, Less less) {
  UniqueGroups g;
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), less);
  g.inverse.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    // Stable: the first item of each run of equal items is its first occurrence.
    if (i == 0 || less(order[i - 1], order[i])) {
      g.first.push_back(order[i]);
      g.counts.push_back(0);
    }
    g.counts.back()++;
    g.inverse[order[i]] = static_cast<int64_t>(g.first.size()) - 1;
  }
  if (!sorted) {
    std::vector<int64_t> by_first(g.first.size());
    std::iota(by_first.begin(), by_first.end(), int64_t{0});
    std::sort(by_first.begin(), by_first.end(), [&](int64_t x, int64_t y) { return g.first[x] < g.first[y]; });
    std::vector<int64_t> rank(g.first.size());
    for (size_t r = 0; r < by_first.size(); ++r) rank[by_first[r]] = static_cast<int64_t>(r);
    UniqueGroups h;
    for (int64_t gi : by_first) {
      h.first.push_back(g.first[gi]);
      h.counts.push_back(g.counts[gi]);
    }
    h.inverse.resize(g.inverse.size());
    for (size_t i = 0; i < g.inverse.size(); ++i) h.inverse[i] = rank[g.inverse[i]];
    return h;
  }
  return g;
}

Array int64_vector(const std::vector<int64_t>& v, Shape shape) {
  return Array(v.data(), std::move(shape), int64, static_cast<int64_t>(v.size()));
}

}  // namespace

UniqueResult unique(const Array& a, std::optional<int> axis, bool sorted) {
  check_valid(a, "unique");
  if (a.device().type != Device::Type::Cpu) {
    // The result's shape depends on the values: a GPU array is read back once, unique runs on the
    // host, and the four results go back to the array's device.
    UniqueResult r;
    {
      DefaultDeviceScope host(Device::cpu());
      r = unique(to_device(a, Device::cpu()), axis, sorted);
    }
    return {to_device(r.values, a.device()), to_device(r.indices, a.device()), to_device(r.inverse, a.device()),
            to_device(r.counts, a.device())};
  }
  std::optional<int> ax;
  if (axis) ax = normalize_axis(*axis, a.ndim(), "unique", a.shape());
  // The result's shape depends on the values: compute on the host from a contiguous copy.
  Array c = a;
  c.eval();
  if (!c.is_contiguous()) {
    c = copy(a);
    c.eval();
  }
  const Shape& shape = a.shape();
  const Dtype dtype = a.dtype();
  const size_t isz = size_of(dtype);
  const char* base = c.size() > 0 ? static_cast<const char*>(c.data()) : nullptr;
  return dispatch_all(dtype, [&]<class T>() -> UniqueResult {
    const T* p = reinterpret_cast<const T*>(base);
    auto lt = [](T x, T y) { return unique_less<T>(x, y); };
    // Values are copied bytewise (std::vector<bool> has no contiguous storage).
    auto gather = [&](const std::vector<int64_t>& src_index, std::vector<char>& dst) {
      dst.resize(src_index.size() * isz);
      for (size_t i = 0; i < src_index.size(); ++i) std::memcpy(dst.data() + i * isz, p + src_index[i], isz);
    };
    if (!ax) {
      int64_t n = a.size();
      auto g = group_items(n, sorted, [&](int64_t i, int64_t j) { return lt(p[i], p[j]); });
      int64_t u = static_cast<int64_t>(g.first.size());
      std::vector<char> vals;
      gather(g.first, vals);
      // The inverse has the input's shape (NumPy 2), so take(values, inverse) rebuilds the input.
      return {Array(vals.data(), {u}, dtype, u), int64_vector(g.first, {u}), int64_vector(g.inverse, shape),
              int64_vector(g.counts, {u})};
    }
    // Slices along the axis, compared lexicographically in row-major order of the other axes.
    const int d = *ax;
    const int64_t len = shape[d];
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < d; ++i) outer = checked_mul(outer, shape[i], "unique");
    for (size_t i = d + 1; i < shape.size(); ++i) inner = checked_mul(inner, shape[i], "unique");
    auto at = [&](int64_t slice, int64_t o, int64_t in) { return p[(o * len + slice) * inner + in]; };
    auto g = group_items(len, sorted, [&](int64_t x, int64_t y) {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t in = 0; in < inner; ++in) {
          T vx = at(x, o, in), vy = at(y, o, in);
          if (lt(vx, vy)) return true;
          if (lt(vy, vx)) return false;
        }
      return false;
    });
    int64_t u = static_cast<int64_t>(g.first.size());
    Shape vshape = shape;
    vshape[d] = u;
    std::vector<int64_t> src_index;
    src_index.reserve(static_cast<size_t>(outer * u * inner));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t s = 0; s < u; ++s)
        for (int64_t in = 0; in < inner; ++in) src_index.push_back((o * len + g.first[s]) * inner + in);
    std::vector<char> vals;
    gather(src_index, vals);
    return {Array(vals.data(), vshape, dtype, static_cast<int64_t>(src_index.size())), int64_vector(g.first, {u}),
            int64_vector(g.inverse, {len}), int64_vector(g.counts, {u})};
  });
}

}  // namespace smelt
