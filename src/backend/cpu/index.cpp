// CPU kernels that assemble and index data: concatenate, slice update, pad, gathers, scatters, nonzero.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "smelt/errors.h"
#include "src/backend/cpu/kernel_utils.h"
#include "src/backend/cpu/kernels.h"
#include "src/core/dispatch.h"

namespace smelt::cpu {

void copy_strided(const Array& in, Array& out);  // copy.cpp

namespace {

using Offs = std::array<int64_t, 2>;
using Offs3 = std::array<int64_t, 3>;

/// Copies `in` (any strides) into `dst` laid out with `dst_strides` (elements).
template <class T>
void copy_into(const Array& in, T* dst, const Strides& dst_strides) {
  const auto& n = in.node();
  const T* src = in_ptr<T>(in);
  parallel_strided<2>(n.shape, {&n.strides, &dst_strides}, [&](const Offs& off, int64_t len, const Offs& st) {
    const T* s = src + off[0];
    T* d = dst + off[1];
    if (st[0] == 1 && st[1] == 1) {
      std::memcpy(d, s, static_cast<size_t>(len) * sizeof(T));
    } else if (st[1] == 1) {
      for (int64_t i = 0; i < len; ++i) d[i] = s[i * st[0]];
    } else {
      for (int64_t i = 0; i < len; ++i) d[i * st[1]] = s[i * st[0]];
    }
  });
}

/// Gives `out` a row-major copy of `a`, reusing a's buffer when nothing else can see it.
void init_from(Array& out, const Array& a) {
  if (try_donate(out, a)) return;
  alloc_contiguous(out);
  copy_strided(a, out);
}

// ---- Index arrays -------------------------------------------------------------------------------

template <class I>
int64_t to_index(I x) {
  if constexpr (std::is_same_v<I, uint64_t>) {
    // Past INT64_MAX an index is out of range for any axis; saturate so it stays that way.
    return x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                          : static_cast<int64_t>(x);
  } else if constexpr (std::is_integral_v<I>) {
    return static_cast<int64_t>(x);
  } else {
    return convert<int64_t>(x);  // the ops reject floating indices; kept total for dispatch
  }
}

/// The indices (any integer dtype, any strides) as row-major int64.
std::vector<int64_t> load_indices(const Array& idx) {
  const auto& n = idx.node();
  std::vector<int64_t> v(static_cast<size_t>(n.size()));
  Strides rs = row_major_strides(n.shape);
  dispatch_all(n.dtype, [&]<class I>() {
    const I* src = in_ptr<I>(idx);
    int64_t* dst = v.data();
    parallel_strided<2>(n.shape, {&n.strides, &rs}, [&](const Offs& off, int64_t len, const Offs& st) {
      const I* s = src + off[0];
      int64_t* d = dst + off[1];
      for (int64_t i = 0; i < len; ++i) d[i] = to_index(s[i * st[0]]);
    });
  });
  return v;
}

/// The index at row-major position `pos` of `idx`, printed as stored (for messages).
std::string index_string(const Array& idx, int64_t pos) {
  const auto& n = idx.node();
  int64_t off = 0;
  for (int d = static_cast<int>(n.shape.size()) - 1; d >= 0; --d) {
    off += (pos % n.shape[d]) * n.strides[d];
    pos /= n.shape[d];
  }
  return dispatch_all(n.dtype, [&]<class I>() -> std::string {
    I x = in_ptr<I>(idx)[off];
    if constexpr (std::is_integral_v<I>) return std::to_string(x);
    else return std::to_string(convert<double>(x));
  });
}

/// The axes an index array addresses. Component j of each group of `dims.size()` consecutive
/// indices addresses axis `axes[j]` of size `dims[j]`, whose element stride is `scale[j]`.
struct IndexAxes {
  std::vector<int64_t> dims;
  std::vector<int> axes;
  std::vector<int64_t> scale;
};

/// Wraps negative indices, checks the range and turns each into an element offset (index times
/// scale). A bad index raises InvalidArgument for the first one in row-major order, so the
/// message does not depend on the thread count.
void indices_to_offsets(std::vector<int64_t>& v, const Array& idx, const IndexAxes& ax, const char* op) {
  const int64_t k = static_cast<int64_t>(ax.dims.size());
  if (k == 0 || v.empty()) return;
  std::atomic<int64_t> first_bad{std::numeric_limits<int64_t>::max()};
  auto note_bad = [&](int64_t i) {
    int64_t cur = first_bad.load();
    while (i < cur && !first_bad.compare_exchange_weak(cur, i)) {
    }
  };
  parallel_for(static_cast<int64_t>(v.size()), kGrain, [&](int64_t b, int64_t e) {
    if (k == 1) {
      const int64_t dim = ax.dims[0], scale = ax.scale[0];
      for (int64_t i = b; i < e; ++i) {
        int64_t x = v[i];
        if (x < 0) x += dim;
        if (x < 0 || x >= dim) return note_bad(i);
        v[i] = x * scale;
      }
      return;
    }
    for (int64_t i = b; i < e; ++i) {
      const int64_t j = i % k, dim = ax.dims[j];
      int64_t x = v[i];
      if (x < 0) x += dim;
      if (x < 0 || x >= dim) return note_bad(i);
      v[i] = x * ax.scale[j];
    }
  });
  const int64_t bad = first_bad.load();
  if (bad == std::numeric_limits<int64_t>::max()) return;
  const int64_t j = bad % k;
  throw InvalidArgument(std::string(op) + ": index " + index_string(idx, bad) + " is out of range for axis " +
                        std::to_string(ax.axes[j]) + " with size " + std::to_string(ax.dims[j]));
}

// ---- Gathers ------------------------------------------------------------------------------------

/// out[p] = src[src_offset(p) + table[table_offset(p)]] over `shape` (out row-major). The two
/// stride sets are zero on the axes the other one walks.
template <class T>
void gather_table(const T* src, const Strides& src_strides, const int64_t* table, const Strides& table_strides,
                  T* dst, const Shape& shape) {
  Strides os = row_major_strides(shape);
  // The innermost collapsed axis of a row-major output has stride 1 (or length 1).
  parallel_strided<3>(shape, {&src_strides, &table_strides, &os}, [&](const Offs3& off, int64_t len, const Offs3& st) {
    T* d = dst + off[2];
    if (st[1] == 0) {
      const T* s = src + off[0] + table[off[1]];
      if (st[0] == 1) {
        std::memcpy(d, s, static_cast<size_t>(len) * sizeof(T));
      } else {
        for (int64_t i = 0; i < len; ++i) d[i] = s[i * st[0]];
      }
      return;
    }
    const T* s = src + off[0];
    const int64_t* t = table + off[1];
    if (st[0] == 0 && st[1] == 1) {
      for (int64_t i = 0; i < len; ++i) d[i] = s[t[i]];
    } else {
      for (int64_t i = 0; i < len; ++i) d[i] = s[i * st[0] + t[i * st[1]]];
    }
  });
}

// ---- Scatter reductions -------------------------------------------------------------------------

// Integer arithmetic in a wide unsigned type: wraps like NumPy instead of overflowing (UB).
template <class T>
using wide_unsigned_t = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;

template <class T>
T combine_add(T x, T y) {
  if constexpr (std::is_same_v<T, bool>) return x || y;
  else if constexpr (is_half_v<T>) return T(static_cast<float>(x) + static_cast<float>(y));
  else if constexpr (std::is_floating_point_v<T>) return x + y;
  else return static_cast<T>(static_cast<wide_unsigned_t<T>>(x) + static_cast<wide_unsigned_t<T>>(y));
}

template <class T>
T combine_mul(T x, T y) {
  if constexpr (std::is_same_v<T, bool>) return x && y;
  else if constexpr (is_half_v<T>) return T(static_cast<float>(x) * static_cast<float>(y));
  else if constexpr (std::is_floating_point_v<T>) return x * y;
  else return static_cast<T>(static_cast<wide_unsigned_t<T>>(x) * static_cast<wide_unsigned_t<T>>(y));
}

// Max / min propagate NaN (as NumPy's maximum / minimum do).
template <class T>
T combine_max(T x, T y) {
  if constexpr (is_half_v<T> || std::is_floating_point_v<T>) {
    compute_t<T> a = static_cast<compute_t<T>>(x), b = static_cast<compute_t<T>>(y);
    if (std::isnan(a)) return x;
    if (std::isnan(b)) return y;
    return b > a ? y : x;
  } else {
    return y > x ? y : x;
  }
}

template <class T>
T combine_min(T x, T y) {
  if constexpr (is_half_v<T> || std::is_floating_point_v<T>) {
    compute_t<T> a = static_cast<compute_t<T>>(x), b = static_cast<compute_t<T>>(y);
    if (std::isnan(a)) return x;
    if (std::isnan(b)) return y;
    return b < a ? y : x;
  } else {
    return y < x ? y : x;
  }
}

/// Calls f(combine) with the combining function of `reduce` for element type T; the switch
/// stays outside the loops so that each loop is compiled for one operation.
template <class T, class F>
void with_combine(ScatterReduce reduce, F&& f) {
  switch (reduce) {
    case ScatterReduce::Assign: return f([](T, T y) { return y; });
    case ScatterReduce::Add: return f([](T x, T y) { return combine_add<T>(x, y); });
    case ScatterReduce::Mul: return f([](T x, T y) { return combine_mul<T>(x, y); });
    case ScatterReduce::Max: return f([](T x, T y) { return combine_max<T>(x, y); });
    case ScatterReduce::Min: return f([](T x, T y) { return combine_min<T>(x, y); });
  }
}

Strides drop_axis(const Strides& s, int axis) {
  Strides r = s;
  r.erase(r.begin() + axis);
  return r;
}

// ---- Nonzero ------------------------------------------------------------------------------------

template <class T>
bool is_nonzero(T x) {
  return convert<bool>(x);
}

}  // namespace

// ---- Kernels ------------------------------------------------------------------------------------

void eval_Concatenate(const AxisParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  Array& out = outputs[0];
  alloc_contiguous(out);
  const Strides& os = out.node().strides;
  dispatch_by_size(out.dtype(), [&]<class T>() {
    T* base = out_ptr<T>(out);
    int64_t pos = 0;
    for (const auto& in : inputs) {
      copy_into<T>(in, base + pos * os[p.axis], os);
      pos += in.shape()[p.axis];
    }
  });
}

void eval_SliceUpdate(const SliceParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  Array& out = outputs[0];
  init_from(out, inputs[0]);
  const Array& update = inputs[1];
  if (update.size() == 0) return;
  int64_t off = 0;
  const Strides region = slice_region(out.node().strides, p.start, p.step, off);
  dispatch_by_size(out.dtype(), [&]<class T>() { copy_into<T>(update, out_ptr<T>(out) + off, region); });
}

void eval_Pad(const PadParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& in = inputs[0];
  Array& out = outputs[0];
  alloc_contiguous(out);
  if (out.size() == 0) return;
  const auto& n = in.node();
  const Shape& osh = out.node().shape;
  const int nd = static_cast<int>(osh.size());
  const int64_t last = osh[nd - 1], rows = out.size() / last;
  const int64_t lo = p.low[nd - 1], width = n.shape[nd - 1], st = n.strides[nd - 1];
  const PadMode mode = p.mode;
  // The source position of out-of-range coordinate x on an axis of size `dim` (-1: the constant).
  auto source = [mode](int64_t x, int64_t dim) -> int64_t {
    if (x >= 0 && x < dim) return x;
    switch (mode) {
      case PadMode::Constant: return -1;
      case PadMode::Reflect: return x < 0 ? -x : 2 * (dim - 1) - x;
      case PadMode::Edge: return x < 0 ? 0 : dim - 1;
    }
    return -1;
  };
  dispatch_by_size(out.dtype(), [&]<class T>() {
    alignas(8) unsigned char bytes[8] = {};
    p.value.cast(out.dtype()).store(bytes);
    T fill;
    std::memcpy(&fill, bytes, sizeof(T));
    const T* src = in_ptr<T>(in);
    T* dst = out_ptr<T>(out);
    parallel_for(rows, std::max<int64_t>(1, kGrain / last), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        T* row = dst + r * last;
        int64_t soff = 0, rem = r;
        bool inside = true;
        for (int d = nd - 2; d >= 0 && inside; --d) {
          int64_t x = source(rem % osh[d] - p.low[d], n.shape[d]);
          rem /= osh[d];
          inside = x >= 0;
          soff += x * n.strides[d];
        }
        if (!inside) {
          std::fill(row, row + last, fill);
          continue;
        }
        const T* s = src + soff;
        for (int64_t j = 0; j < lo; ++j) {
          int64_t x = source(j - lo, width);
          row[j] = x < 0 ? fill : s[x * st];
        }
        if (st == 1) {
          std::memcpy(row + lo, s, static_cast<size_t>(width) * sizeof(T));
        } else {
          for (int64_t j = 0; j < width; ++j) row[lo + j] = s[j * st];
        }
        for (int64_t j = lo + width; j < last; ++j) {
          int64_t x = source(j - lo, width);
          row[j] = x < 0 ? fill : s[x * st];
        }
      }
    });
  });
}

void eval_Gather(const AxisParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& a = inputs[0];
  const Array& idx = inputs[1];
  Array& out = outputs[0];
  alloc_contiguous(out);
  const auto& an = a.node();
  const int axis = p.axis;
  auto table = load_indices(idx);
  indices_to_offsets(table, idx, {{an.shape[axis]}, {axis}, {an.strides[axis]}}, "take");
  if (out.size() == 0) return;
  Strides ss, ts;
  Strides irs = row_major_strides(idx.shape());
  for (int d = 0; d < axis; ++d) {
    ss.push_back(an.strides[d]);
    ts.push_back(0);
  }
  for (int64_t s : irs) {
    ss.push_back(0);
    ts.push_back(s);
  }
  for (size_t d = axis + 1; d < an.shape.size(); ++d) {
    ss.push_back(an.strides[d]);
    ts.push_back(0);
  }
  dispatch_by_size(out.dtype(), [&]<class T>() {
    gather_table<T>(in_ptr<T>(a), ss, table.data(), ts, out_ptr<T>(out), out.shape());
  });
}

void eval_GatherElements(const AxisParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& a = inputs[0];
  const Array& idx = inputs[1];
  Array& out = outputs[0];
  alloc_contiguous(out);
  const auto& an = a.node();
  const int axis = p.axis;
  auto table = load_indices(idx);
  indices_to_offsets(table, idx, {{an.shape[axis]}, {axis}, {an.strides[axis]}}, "take_along_axis");
  if (out.size() == 0) return;
  Strides ss = an.strides;
  ss[axis] = 0;
  Strides ts = row_major_strides(idx.shape());
  dispatch_by_size(out.dtype(), [&]<class T>() {
    gather_table<T>(in_ptr<T>(a), ss, table.data(), ts, out_ptr<T>(out), out.shape());
  });
}

void eval_GatherND(const GatherNDParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& a = inputs[0];
  const Array& idx = inputs[1];
  Array& out = outputs[0];
  alloc_contiguous(out);
  const auto& an = a.node();
  const Shape& ish = idx.shape();
  const int b = p.batch_dims, q = static_cast<int>(ish.size()), r = static_cast<int>(an.shape.size());
  const int k = static_cast<int>(ish[q - 1]);
  IndexAxes ax;
  for (int j = 0; j < k; ++j) {
    ax.dims.push_back(an.shape[b + j]);
    ax.axes.push_back(b + j);
    ax.scale.push_back(an.strides[b + j]);
  }
  auto comps = load_indices(idx);
  indices_to_offsets(comps, idx, ax, "gather_nd");
  if (out.size() == 0) return;
  // One source offset per index row: its batch position plus its k components.
  Shape rows_shape(ish.begin(), ish.end() - 1);
  const int64_t rows = shape_size(rows_shape);
  int64_t per_batch = 1;
  for (int d = b; d < q - 1; ++d) per_batch *= ish[d];
  std::vector<int64_t> table(static_cast<size_t>(rows));
  parallel_for(rows, kGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      int64_t off = 0, bl = row / per_batch;
      for (int d = b - 1; d >= 0; --d) {
        off += (bl % an.shape[d]) * an.strides[d];
        bl /= an.shape[d];
      }
      for (int j = 0; j < k; ++j) off += comps[row * k + j];
      table[row] = off;
    }
  });
  Strides ss(q - 1, 0), ts = row_major_strides(rows_shape);
  for (int d = b + k; d < r; ++d) {
    ss.push_back(an.strides[d]);
    ts.push_back(0);
  }
  dispatch_by_size(out.dtype(), [&]<class T>() {
    gather_table<T>(in_ptr<T>(a), ss, table.data(), ts, out_ptr<T>(out), out.shape());
  });
}

void eval_Scatter(const ScatterParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& idx = inputs[1];
  const Array& upd = inputs[2];
  Array& out = outputs[0];
  init_from(out, inputs[0]);
  const Strides os = out.node().strides;
  const Shape& oshape = out.node().shape;
  const int axis = p.axis;
  auto table = load_indices(idx);
  indices_to_offsets(table, idx, {{oshape[axis]}, {axis}, {os[axis]}}, "scatter");
  if (idx.size() == 0) return;
  // Updates that can meet at one element differ only along `axis`: each line along it is one
  // task, walked in index order, so duplicates resolve as a sequential loop would.
  const Shape& ish = idx.shape();
  const auto& un = upd.node();
  Strides its = row_major_strides(ish);
  const int64_t len = ish[axis], ustep = un.strides[axis], tstep = its[axis];
  Shape line_shape = ish;
  line_shape.erase(line_shape.begin() + axis);
  Strides o_lines = drop_axis(os, axis), u_lines = drop_axis(un.strides, axis), t_lines = drop_axis(its, axis);
  auto c = collapse<3>(line_shape, {&o_lines, &u_lines, &t_lines});
  const int64_t lines = shape_size(line_shape);
  dispatch_all(out.dtype(), [&]<class T>() {
    T* dst = out_ptr<T>(out);
    const T* src = in_ptr<T>(upd);
    const int64_t* tab = table.data();
    with_combine<T>(p.reduce, [&](auto combine) {
      parallel_for(lines, std::max<int64_t>(1, kGrain / len), [&](int64_t lb, int64_t le) {
        strided_runs<3>(c, lb, le, [&](const Offs3& off, int64_t run, const Offs3& st) {
          for (int64_t l = 0; l < run; ++l) {
            T* o = dst + off[0] + l * st[0];
            const T* u = src + off[1] + l * st[1];
            const int64_t* t = tab + off[2] + l * st[2];
            for (int64_t j = 0; j < len; ++j) {
              T& x = o[t[j * tstep]];
              x = combine(x, u[j * ustep]);
            }
          }
        });
      });
    });
  });
}

void eval_ScatterND(const ScatterParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& idx = inputs[1];
  const Array& upd = inputs[2];
  Array& out = outputs[0];
  init_from(out, inputs[0]);
  const Strides os = out.node().strides;
  const Shape& oshape = out.node().shape;
  const Shape& ish = idx.shape();
  const int q = static_cast<int>(ish.size());
  const int k = static_cast<int>(ish[q - 1]);
  IndexAxes ax;
  for (int j = 0; j < k; ++j) {
    ax.dims.push_back(oshape[j]);
    ax.axes.push_back(j);
    ax.scale.push_back(os[j]);
  }
  auto comps = load_indices(idx);
  indices_to_offsets(comps, idx, ax, "scatter_nd");
  const int64_t rows = shape_size(Shape(ish.begin(), ish.end() - 1));
  int64_t slice = 1;
  for (size_t d = k; d < oshape.size(); ++d) slice *= oshape[d];
  if (rows == 0 || slice == 0) return;
  std::vector<int64_t> table(static_cast<size_t>(rows), 0);
  for (int64_t row = 0; row < rows; ++row)
    for (int j = 0; j < k; ++j) table[row] += comps[row * k + j];
  dispatch_all(out.dtype(), [&]<class T>() {
    // Updates read row by row: make them contiguous when they are a broadcast or a view.
    BufferPtr tmp;
    const T* src = in_ptr<T>(upd);
    const auto& un = upd.node();
    if (!is_row_contiguous(un.shape, un.strides)) {
      tmp = cpu_allocator().allocate(static_cast<size_t>(un.size()) * sizeof(T));
      copy_into<T>(upd, static_cast<T*>(tmp->ptr), row_major_strides(un.shape));
      src = static_cast<const T*>(tmp->ptr);
    }
    T* dst = out_ptr<T>(out);
    // Rows are applied in order (last write wins, reductions combine in index order); only the
    // elements within a slice are split between threads.
    with_combine<T>(p.reduce, [&](auto combine) {
      parallel_for(slice, std::max<int64_t>(1, kGrain / rows), [&](int64_t sb, int64_t se) {
        for (int64_t row = 0; row < rows; ++row) {
          T* o = dst + table[row];
          const T* u = src + row * slice;
          for (int64_t i = sb; i < se; ++i) o[i] = combine(o[i], u[i]);
        }
      });
    });
  });
}

Array nonzero(const Array& a) {
  const auto& n = a.node();
  const int nd = static_cast<int>(n.shape.size());
  const int64_t size = n.size();
  // Non-contiguous inputs become a 0/1 byte mask first so both passes walk memory in order.
  std::vector<uint8_t> mask;
  const bool contiguous = is_row_contiguous(n.shape, n.strides);
  if (!contiguous) {
    mask.resize(static_cast<size_t>(size));
    Strides rs = row_major_strides(n.shape);
    dispatch_all(n.dtype, [&]<class T>() {
      const T* src = in_ptr<T>(a);
      parallel_strided<2>(n.shape, {&n.strides, &rs}, [&](const Offs& off, int64_t len, const Offs& st) {
        for (int64_t i = 0; i < len; ++i) mask[off[1] + i] = is_nonzero(src[off[0] + i * st[0]]);
      });
    });
  }
  // Fixed chunks: per-chunk counts, then each chunk writes its own columns of the output.
  const int64_t chunk = std::max<int64_t>(kGrain, (size + 4 * num_threads() - 1) / (4 * num_threads()));
  const int64_t chunks = size == 0 ? 0 : (size + chunk - 1) / chunk;
  std::vector<int64_t> start(static_cast<size_t>(chunks) + 1, 0);
  BufferPtr buffer;
  int64_t total = 0;
  auto run = [&]<class T>(const T* data) {
    parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        int64_t count = 0;
        for (int64_t i = c * chunk, e = std::min(size, (c + 1) * chunk); i < e; ++i) count += is_nonzero(data[i]);
        start[c + 1] = count;
      }
    });
    for (int64_t c = 0; c < chunks; ++c) start[c + 1] += start[c];
    total = start[chunks];
    buffer = cpu_allocator().allocate(static_cast<size_t>(nd * total) * sizeof(int64_t));
    auto* o = static_cast<int64_t*>(buffer->ptr);
    if (total == 0 || nd == 0) return;
    parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        int64_t col = start[c];
        for (int64_t i = c * chunk, e = std::min(size, (c + 1) * chunk); i < e; ++i) {
          if (!is_nonzero(data[i])) continue;
          int64_t rem = i;
          for (int d = nd - 1; d >= 0; --d) {
            o[d * total + col] = rem % n.shape[d];
            rem /= n.shape[d];
          }
          ++col;
        }
      }
    });
  };
  if (contiguous) {
    dispatch_all(n.dtype, [&]<class T>() { run(in_ptr<T>(a)); });
  } else {
    run(mask.data());
  }
  Shape shape{nd, total};
  Strides strides = row_major_strides(shape);
  return detail::make_leaf(std::move(shape), Dtype::Int64, Device::cpu(), std::move(buffer), std::move(strides));
}

}  // namespace smelt::cpu
