// CUDA kernels that index and assemble data: gathers, scatters, nonzero, Concatenate, Pad, SliceUpdate.
//
// Sources come from index_sources.h (pure, compiled without a GPU by the source tests). The
// kernels run one thread per output element (gathers, Pad, copies) with 64-bit index math and
// strided inputs through collapse_layout, so views (transposed, sliced with negative steps,
// broadcast) are read in place.
//
// Index validation. A bad index must raise the CPU's InvalidArgument naming the first bad index
// in row-major order. The kernels that read indices record the smallest bad position with an
// atomicMin into a small device buffer (and read nothing through a bad index); after the kernel
// the host copies that word back: ONE small synchronization per gather or scatter whose index
// array is not empty. It is unavoidable for an eager error; nonzero has one too (its output
// shape depends on the data).
//
// Scatter/ScatterND give the CPU's results bit for bit, duplicates included (the CPU applies the
// updates of a target in index order): (1) a kernel computes each update unit's target,
// validates it and counts it in its bucket (the target itself when the targets are few, else a
// slot of an open-addressing hash table with at least twice as many slots as units, so memory
// follows the number of updates and not the array's size); the host reads the first bad index
// and a "some target repeats" flag in the same synchronization. No repeats: one thread per update
// element applies it. Assign: an atomicMax per bucket keeps the last unit (order-free), which
// alone writes. Otherwise (2) the counts are scanned into bucket offsets (scan_util), (3) units
// claim slots of their bucket, (4) each bucket is sorted by unit index (one thread's insertion
// sort up to 32 units, a block's bitonic sort beyond: O(m log^2 m), no quadratic worst case) and
// (5) one thread per (touched bucket, element of the slice) applies the bucket's updates in
// order from the original value. Slot claims depend on timing; the sorted buckets do not.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "smelt/errors.h"
#include "src/backend/cpu/kernel_utils.h"
#include "src/backend/cuda/allocator.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/index_sources.h"
#include "src/backend/cuda/kernels.h"
#include "src/backend/cuda/scan_util.h"
#include "src/core/transfer_counts.h"
#include "src/primitives/scalar.h"

namespace smelt::cuda {

namespace {

constexpr unsigned kBlock = 256;
constexpr uint64_t kNoBadIndex = ~uint64_t{0};

uint64_t addr(const BufferPtr& b) { return reinterpret_cast<uint64_t>(b->ptr); }
/// Device address of an array's data, 0 for an empty array (whose buffer may be absent).
uint64_t ptr_or_null(const Array& a) { return a.size() > 0 ? dptr(a) : 0; }
BufferPtr scratch(const Array& on, int64_t bytes) {
  return allocator(on.device()).allocate(static_cast<size_t>(bytes > 0 ? bytes : 0));
}

void fill_words(DeviceState& s, uint64_t p, uint32_t value, int64_t words, const std::string& what) {
  if (words <= 0) return;
  check(driver()->cuMemsetD32Async(static_cast<CUdeviceptr>(p), value, static_cast<size_t>(words), current_stream(s)),
        "cuMemsetD32Async", what);
}

/// Copies `bytes` from the device to the host and waits for them (the one synchronization).
void read_back(DeviceState& s, void* host, uint64_t dev, size_t bytes, const std::string& what) {
  const DriverApi& d = *driver();
  smelt::detail::count_device_to_host(bytes);
  check(d.cuMemcpyDtoHAsync(host, static_cast<CUdeviceptr>(dev), bytes, current_stream(s)), "cuMemcpyDtoHAsync", what);
  check(d.cuStreamSynchronize(current_stream(s)), "cuStreamSynchronize", what);
}

void copy_device(DeviceState& s, uint64_t dst, uint64_t src, size_t bytes, const std::string& what) {
  if (bytes == 0) return;
  check(driver()->cuMemcpyDtoDAsync(static_cast<CUdeviceptr>(dst), static_cast<CUdeviceptr>(src), bytes, current_stream(s)),
        "cuMemcpyDtoDAsync", what);
}

/// Gives `out` a row-major copy of `a`, reusing a's buffer when nothing else can see it.
void init_from(Array& out, const Array& a) {
  if (a.device() == out.device() && cpu::try_donate(out, a)) return;
  alloc_output(out);
  copy_to_contiguous(a, out);
}

/// Copies `src` (any strides) to device address `dst` laid out with `dst_strides` (elements).
void copy_into(const Array& src, uint64_t dst, const Strides& dst_strides, const std::string& what) {
  const int64_t n = src.size();
  if (n == 0) return;
  DeviceState& s = state_of(src);
  CopyIntoArgs args;
  args.src = dptr(src);
  args.dst = dst;
  args.n = n;
  args.layout = collapse_layout(src.shape(), {&src.node().strides, &dst_strides}, what);
  const Layout& l = args.layout;
  if (l.nd == 0 || (l.nd == 1 && l.st[0][0] == 1 && l.st[1][0] == 1)) {
    copy_device(s, dst, args.src, static_cast<size_t>(n) * src.itemsize(), what);
    return;
  }
  const Kernel fn = get_kernel(s.index, std::string("copy_into|") + bits_type(src.dtype()),
                               [&] { return copy_into_source(src.dtype()); }, what);
  launch(s, fn, blocks_for(n, kBlock), kBlock, &args, what);
}

// ---- Index errors -------------------------------------------------------------------------------

/// The axes addressed by the components of an index row (component j: axis axes[j], size dims[j]).
struct IndexAxes {
  std::vector<int64_t> dims;
  std::vector<int> axes;
};

/// The index at row-major position `pos` of `idx`, printed as stored (read from the device).
std::string index_string(DeviceState& s, const Array& idx, int64_t pos, const std::string& what) {
  const auto& n = idx.node();
  int64_t off = 0;
  for (int d = static_cast<int>(n.shape.size()) - 1; d >= 0; --d) {
    off += (pos % n.shape[d]) * n.strides[d];
    pos /= n.shape[d];
  }
  uint64_t raw = 0;
  read_back(s, &raw, dptr(idx) + static_cast<uint64_t>(off * static_cast<int64_t>(n.itemsize())), n.itemsize(),
            what);
  const Scalar v = Scalar::load(&raw, n.dtype);
  if (is_floating(n.dtype)) return std::to_string(v.as_double());  // the ops reject float indices
  return is_unsigned_integral(n.dtype) ? std::to_string(v.u) : std::to_string(v.i);
}

/// The CPU's InvalidArgument for the bad index at row-major position `bad` of `idx`.
[[noreturn]] void raise_bad_index(DeviceState& s, uint64_t bad, const Array& idx, const IndexAxes& ax,
                                  const char* op) {
  const int64_t pos = static_cast<int64_t>(bad);
  const size_t j = static_cast<size_t>(pos % static_cast<int64_t>(ax.dims.size()));
  throw InvalidArgument(std::string(op) + ": index " + index_string(s, idx, pos, op) + " is out of range for axis " +
                        std::to_string(ax.axes[j]) + " with size " + std::to_string(ax.dims[j]));
}

/// Reads the first bad index position from `status` (the synchronization) and raises for it.
void raise_if_bad(DeviceState& s, const BufferPtr& status, const Array& idx, const IndexAxes& ax, const char* op) {
  uint64_t bad = kNoBadIndex;
  read_back(s, &bad, addr(status), sizeof bad, op);
  if (bad != kNoBadIndex) raise_bad_index(s, bad, idx, ax, op);
}

void check_components(int64_t k, const Array& idx, const char* op) {
  if (k > kMaxDims)
    throw UnsupportedError(std::string(op) + ": CUDA kernels take at most " + std::to_string(kMaxDims) +
                           " index components, indices " + dtype_name(idx.dtype()) + shape_to_string(idx.shape()) +
                           " have " + std::to_string(k));
}

// ---- Gathers ------------------------------------------------------------------------------------

/// A gather over the output shape: `src`, `idx` and `pos` strides as in GatherArgs; component j
/// addresses axis ax.axes[j] (size ax.dims[j], source stride scale[j]).
struct GatherPlan {
  Strides src, idx, pos;
  int64_t cstride = 0;
  IndexAxes ax;
  std::vector<int64_t> scale;
};

void run_gather(const GatherPlan& g, const Array& a, const Array& idx, Array& out, const char* op) {
  const int64_t k = static_cast<int64_t>(g.ax.dims.size());
  check_components(k, idx, op);
  alloc_output(out);
  DeviceState& s = state_of(out);
  const bool validate = idx.size() > 0 && k > 0;
  BufferPtr status;
  if (validate) {
    status = scratch(out, 8);
    fill_words(s, addr(status), 0xffffffffu, 2, op);
  }
  const std::string ix = device_type(idx.dtype());
  if (out.size() > 0) {
    // Every index is read by some output element: the gather validates as it goes.
    GatherArgs args;
    args.src = ptr_or_null(a);
    args.idx = ptr_or_null(idx);
    args.out = dptr(out);
    args.status = validate ? addr(status) : 0;
    args.n = out.size();
    args.k = k;
    args.cstride = g.cstride;
    for (int64_t j = 0; j < k; ++j) {
      args.dims[j] = g.ax.dims[j];
      args.scale[j] = g.scale[j];
    }
    args.layout = collapse_layout(out.shape(), {&g.src, &g.idx, &g.pos}, op);
    const Kernel fn = get_kernel(s.index, std::string("gather|") + bits_type(a.dtype()) + "|" + ix,
                                 [&] { return gather_source(a.dtype(), idx.dtype()); }, op);
    launch(s, fn, blocks_for(args.n, kBlock), kBlock, &args, op);
  } else if (validate) {
    // Nothing to gather, but a bad index still raises (as on the CPU).
    IndexCheckArgs args;
    args.idx = dptr(idx);
    args.status = addr(status);
    args.n = idx.size();
    args.k = k;
    for (int64_t j = 0; j < k; ++j) args.dims[j] = g.ax.dims[j];
    args.layout = collapse_layout(idx.shape(), {&idx.node().strides}, op);
    const Kernel fn = get_kernel(s.index, "index_check|" + ix, [&] { return index_check_source(idx.dtype()); }, op);
    launch(s, fn, blocks_for(args.n, kBlock), kBlock, &args, op);
  }
  if (validate && !defer_index_check(s.index, status)) raise_if_bad(s, status, idx, g.ax, op);
}

}  // namespace

void eval_gather(const AxisParams& p, const std::vector<Array>& inputs, Array& out) {
  const Array& a = inputs[0];
  const Array& idx = inputs[1];
  const auto& an = a.node();
  const int axis = p.axis;
  const Strides irs = row_major_strides(idx.shape());
  GatherPlan g;
  for (int d = 0; d < axis; ++d) {
    g.src.push_back(an.strides[d]);
    g.idx.push_back(0);
    g.pos.push_back(0);
  }
  for (size_t e = 0; e < irs.size(); ++e) {
    g.src.push_back(0);
    g.idx.push_back(idx.node().strides[e]);
    g.pos.push_back(irs[e]);
  }
  for (size_t d = axis + 1; d < an.shape.size(); ++d) {
    g.src.push_back(an.strides[d]);
    g.idx.push_back(0);
    g.pos.push_back(0);
  }
  g.ax = {{an.shape[axis]}, {axis}};
  g.scale = {an.strides[axis]};
  run_gather(g, a, idx, out, "take");
}

void eval_gather_elements(const AxisParams& p, const std::vector<Array>& inputs, Array& out) {
  const Array& a = inputs[0];
  const Array& idx = inputs[1];
  const auto& an = a.node();
  GatherPlan g;
  g.src = an.strides;
  g.src[p.axis] = 0;
  g.idx = idx.node().strides;
  g.pos = row_major_strides(idx.shape());
  g.ax = {{an.shape[p.axis]}, {p.axis}};
  g.scale = {an.strides[p.axis]};
  run_gather(g, a, idx, out, "take_along_axis");
}

void eval_gather_nd(const GatherNDParams& p, const std::vector<Array>& inputs, Array& out) {
  const Array& a = inputs[0];
  const Array& idx = inputs[1];
  const auto& an = a.node();
  const Shape& ish = idx.shape();
  const Strides& ist = idx.node().strides;
  const int b = p.batch_dims, q = static_cast<int>(ish.size()), r = static_cast<int>(an.shape.size());
  const int k = static_cast<int>(ish[q - 1]);
  const Strides rrs = row_major_strides(Shape(ish.begin(), ish.end() - 1));
  GatherPlan g;
  // Output axes: the index rows (the first b are the batch axes, shared with the data), then the
  // data's axes after the indexed ones.
  for (int d = 0; d < q - 1; ++d) {
    g.src.push_back(d < b ? an.strides[d] : 0);
    g.idx.push_back(ist[d]);
    g.pos.push_back(rrs[d]);
  }
  for (int d = b + k; d < r; ++d) {
    g.src.push_back(an.strides[d]);
    g.idx.push_back(0);
    g.pos.push_back(0);
  }
  g.cstride = ist[q - 1];
  for (int j = 0; j < k; ++j) {
    g.ax.dims.push_back(an.shape[b + j]);
    g.ax.axes.push_back(b + j);
    g.scale.push_back(an.strides[b + j]);
  }
  run_gather(g, a, idx, out, "gather_nd");
}

// ---- Scatters -----------------------------------------------------------------------------------

namespace {

/// The update units of a scatter over `units` (shape): st0 the index offset of a unit's first
/// component, st1 its target base; the components as in GatherPlan; `slice` elements per unit;
/// `targets` possible targets.
struct ScatterPlan {
  Shape units;
  Strides st0, st1;
  int64_t cstride = 0, slice = 1, targets = 0;
  IndexAxes ax;
  std::vector<int64_t> scale;
};

void run_scatter(const ScatterPlan& sp, ScatterReduce reduce, const Array& idx, const Array& upd, Array& out,
                 const char* op) {
  const int64_t k = static_cast<int64_t>(sp.ax.dims.size());
  check_components(k, idx, op);
  const int64_t n = shape_size(sp.units);
  if (n == 0) return;
  DeviceState& s = state_of(out);
  const bool assign = reduce == ScatterReduce::Assign;
  // Buckets: the targets themselves when they are few; else a hash table of >= 2n slots.
  const bool hashed = sp.targets > 4 * n;
  int64_t nb = sp.targets, shift = 0;
  if (hashed) {
    int bits = 1;
    while ((int64_t{1} << bits) < 2 * n) ++bits;
    nb = int64_t{1} << bits;
    shift = 64 - bits;
  }
  BufferPtr status = scratch(out, 32), bkt = scratch(out, 8 * n), cnt = scratch(out, 8 * nb), keys;
  fill_words(s, addr(status), 0xffffffffu, 4, op);
  fill_words(s, addr(status) + 16, 0u, 4, op);
  fill_words(s, addr(cnt), assign ? 0xffffffffu : 0u, 2 * nb, op);
  if (hashed) {
    keys = scratch(out, 8 * nb);
    fill_words(s, addr(keys), 0xffffffffu, 2 * nb, op);
  }
  TargetArgs ta;
  ta.idx = ptr_or_null(idx);
  ta.bkt = addr(bkt);
  ta.cnt = addr(cnt);
  ta.keys = hashed ? addr(keys) : 0;
  ta.status = addr(status);
  ta.n = n;
  ta.k = k;
  ta.cstride = sp.cstride;
  ta.nb = nb;
  ta.shift = shift;
  for (int64_t j = 0; j < k; ++j) {
    ta.dims[j] = sp.ax.dims[j];
    ta.scale[j] = sp.scale[j];
  }
  ta.layout = collapse_layout(sp.units, {&sp.st0, &sp.st1}, op);
  const std::string ix = device_type(idx.dtype());
  const Kernel ft = get_kernel(s.index,
                               "scatter_targets|" + ix + (assign ? "|assign" : "|count") + (hashed ? "|hash" : "|direct"),
                               [&] { return scatter_targets_source(idx.dtype(), assign, hashed); }, op);
  launch(s, ft, blocks_for(n, kBlock), kBlock, &ta, op);

  // The synchronization: the first bad index and whether a target repeats. In a graph capture
  // the index check runs after the launch and the updates take the bucket path, which gives the
  // direct path's bits when no target repeats.
  uint64_t st[2] = {kNoBadIndex, 0};
  if (!defer_index_check(s.index, status)) {
    read_back(s, st, addr(status), sizeof st, op);
    if (st[0] != kNoBadIndex) raise_bad_index(s, st[0], idx, sp.ax, op);
  }
  if (sp.slice == 0) return;
  const bool repeats = st[1] == 0;

  // The updates, row-major in unit order (a broadcast or strided view is made contiguous).
  Array u = upd;
  if (!is_row_contiguous(upd.shape(), upd.node().strides)) {
    u = detail::make_leaf(upd.shape(), upd.dtype(), upd.device(), scratch(out, upd.size() * upd.itemsize()),
                          row_major_strides(upd.shape()));
    copy_to_contiguous(upd, u);
  }
  ScatterArgs sa;
  sa.out = dptr(out);
  sa.upd = dptr(u);
  sa.bkt = addr(bkt);
  sa.cnt = addr(cnt);
  sa.keys = hashed ? addr(keys) : 0;
  sa.status = addr(status);
  sa.n = n;
  sa.slice = sp.slice;
  const Dtype dt = out.dtype();
  const std::string type_key = std::string(assign ? bits_type(dt) : device_type(dt)) + "|" +
                               scatter_reduce_name(reduce) + (hashed ? "|hash" : "|direct");
  auto apply = [&](ScatterApply mode, const char* mode_name) {
    const Kernel fa = get_kernel(s.index, "scatter_apply|" + type_key + "|" + mode_name,
                                 [&] { return scatter_apply_source(dt, reduce, mode, hashed); }, op);
    launch(s, fa, blocks_for(n * sp.slice, kBlock), kBlock, &sa, op);
  };
  if (assign) return apply(ScatterApply::Winner, "winner");
  if (!repeats) return apply(ScatterApply::Direct, "direct");

  // Buckets in index order: offsets (off[nb] = n), slot claims, per-bucket sorts.
  BufferPtr off = scratch(out, 8 * (nb + 1)), ord = scratch(out, 8 * n), list = scratch(out, 8 * n), large;
  exclusive_scan_i64(s, addr(cnt), addr(off), nb, addr(off) + 8 * static_cast<uint64_t>(nb), op);
  sa.off = addr(off);
  sa.ord = addr(ord);
  sa.list = addr(list);
  const Kernel ff = get_kernel(s.index, "scatter_fill", [] { return scatter_fill_source(); }, op);
  launch(s, ff, blocks_for(n, kBlock), kBlock, &sa, op);
  const int64_t max_large = n / (kSmallBucket + 1);  // buckets longer than kSmallBucket
  if (max_large > 0) {
    large = scratch(out, 8 * max_large);
    sa.large = addr(large);
  }
  const Kernel fs = get_kernel(s.index, "bucket_sort_small", [] { return bucket_sort_small_source(); }, op);
  launch(s, fs, blocks_for(n, kBlock), kBlock, &sa, op);
  if (max_large > 0) {
    const Kernel fl = get_kernel(s.index, "bucket_sort_large", [] { return bucket_sort_large_source(); }, op);
    launch(s, fl, static_cast<uint64_t>(std::min<int64_t>(max_large, 65535)), kBlock, &sa, op);
  }
  apply(ScatterApply::Bucket, "bucket");
}

}  // namespace

void eval_scatter(const ScatterParams& p, const std::vector<Array>& inputs, Array& out) {
  const Array& idx = inputs[1];
  init_from(out, inputs[0]);
  const Shape& oshape = out.shape();
  const Strides os = row_major_strides(oshape);
  ScatterPlan sp;
  sp.units = idx.shape();
  sp.st0 = idx.node().strides;
  sp.st1 = os;
  sp.st1[p.axis] = 0;  // the index supplies the coordinate on `axis`
  sp.targets = out.size();
  sp.ax = {{oshape[p.axis]}, {p.axis}};
  sp.scale = {os[p.axis]};
  run_scatter(sp, p.reduce, idx, inputs[2], out, "scatter");
}

void eval_scatter_nd(const ScatterParams& p, const std::vector<Array>& inputs, Array& out) {
  const Array& idx = inputs[1];
  init_from(out, inputs[0]);
  const Shape& oshape = out.shape();
  const Shape& ish = idx.shape();
  const int q = static_cast<int>(ish.size());
  const int k = static_cast<int>(ish[q - 1]);
  ScatterPlan sp;
  sp.units = Shape(ish.begin(), ish.end() - 1);
  sp.st0 = Strides(idx.node().strides.begin(), idx.node().strides.end() - 1);
  sp.st1 = Strides(sp.units.size(), 0);
  sp.cstride = idx.node().strides[q - 1];
  // A target is a position in the first k axes; each unit updates the slice of the rest.
  sp.targets = shape_size(Shape(oshape.begin(), oshape.begin() + k));
  sp.slice = shape_size(Shape(oshape.begin() + k, oshape.end()));
  int64_t scale = 1;
  sp.scale.assign(static_cast<size_t>(k), 0);
  for (int j = k - 1; j >= 0; --j) {
    sp.scale[j] = scale;
    scale *= oshape[j];
  }
  for (int j = 0; j < k; ++j) {
    sp.ax.dims.push_back(oshape[j]);
    sp.ax.axes.push_back(j);
  }
  run_scatter(sp, p.reduce, idx, inputs[2], out, "scatter_nd");
}

// ---- nonzero ------------------------------------------------------------------------------------

Array eval_nonzero(const Array& a) {
  const auto& n = a.node();
  const int nd = static_cast<int>(n.shape.size());
  const int64_t size = n.size();
  const std::string what = "nonzero";
  NonzeroArgs args;
  for (int d = 0; d < nd; ++d) {
    if (n.shape[d] == 1) continue;  // coordinate 0: filled below
    if (args.nq == kMaxDims)
      throw UnsupportedError("nonzero: CUDA kernels take at most " + std::to_string(kMaxDims) +
                             " axes longer than 1, shape " + shape_to_string(n.shape) + " has more");
    args.rows[args.nq] = d;
    args.dims[args.nq] = n.shape[d];
    ++args.nq;
  }
  int64_t total = 0;
  BufferPtr counts, offs;
  if (size > 0) {
    DeviceState& s = state_of(a);
    const int64_t blocks = (size + kScanBlockItems - 1) / kScanBlockItems;
    counts = scratch(a, 8 * blocks);
    offs = scratch(a, 8 * (blocks + 1));
    args.in = dptr(a);
    args.counts = addr(counts);
    args.offs = addr(offs);
    args.n = size;
    args.layout = collapse_layout(n.shape, {&n.strides}, what);
    const std::string t = device_type(n.dtype);
    const Kernel fc = get_kernel(s.index, "nonzero_count|" + t,
                                 [&] { return nonzero_count_source(n.dtype, scan_device_source()); }, what);
    launch(s, fc, static_cast<uint64_t>(blocks), kBlock, &args, what);
    exclusive_scan_i64(s, addr(counts), addr(offs), blocks, addr(offs) + 8 * static_cast<uint64_t>(blocks), what);
    // The synchronization: the output's shape is the count.
    read_back(s, &total, addr(offs) + 8 * static_cast<uint64_t>(blocks), sizeof total, what);
  }
  BufferPtr buffer = scratch(a, 8 * nd * total);
  if (total > 0) {
    DeviceState& s = state_of(a);
    if (args.nq < nd) fill_words(s, addr(buffer), 0u, 2 * nd * total, what);
    if (args.nq > 0) {
      args.out = addr(buffer);
      args.total = total;
      const std::string t = device_type(n.dtype);
      const Kernel fw = get_kernel(s.index, "nonzero_write|" + t,
                                   [&] { return nonzero_write_source(n.dtype, scan_device_source()); }, what);
      launch(s, fw, static_cast<uint64_t>((size + kScanBlockItems - 1) / kScanBlockItems), kBlock, &args, what);
    }
  }
  Shape shape{nd, total};
  Strides strides = row_major_strides(shape);
  return detail::make_leaf(std::move(shape), Dtype::Int64, a.device(), std::move(buffer), std::move(strides));
}

// ---- Concatenate, SliceUpdate, Pad --------------------------------------------------------------

// Concatenate launches one copy per input into its slab of the output: each is a plain strided
// (or memcpy) copy with no per-element search for its input, and it needs no table of input
// addresses uploaded to the device; the launches are few next to the data they move.
void eval_concatenate(const AxisParams& p, const std::vector<Array>& inputs, Array& out) {
  alloc_output(out);
  if (out.size() == 0) return;
  const Strides& os = out.node().strides;
  const uint64_t base = dptr(out);
  const int64_t isz = static_cast<int64_t>(out.itemsize());
  int64_t pos = 0;
  for (const auto& in : inputs) {
    copy_into(in, base + static_cast<uint64_t>(pos * os[p.axis] * isz), os, "Concatenate");
    pos += in.shape()[p.axis];
  }
}

void eval_slice_update(const SliceParams& p, const std::vector<Array>& inputs, Array& out) {
  init_from(out, inputs[0]);
  const Array& update = inputs[1];
  if (update.size() == 0) return;
  int64_t off = 0;
  const Strides region = slice_region(out.node().strides, p.start, p.step, off);
  copy_into(update, dptr(out) + static_cast<uint64_t>(off * static_cast<int64_t>(out.itemsize())), region,
            "SliceUpdate");
}

void eval_pad(const PadParams& p, const std::vector<Array>& inputs, Array& out) {
  const Array& in = inputs[0];
  alloc_output(out);
  const int64_t n = out.size();
  if (n == 0) return;
  const auto& inn = in.node();
  const Shape& osh = out.shape();
  // Axes: unpadded ones of length 1 dropped, neighbouring unpadded ones merged when the input's
  // strides allow (the output is row-major).
  PadArgs args;
  bool last_padded = true;
  for (size_t d = 0; d < osh.size(); ++d) {
    const bool padded = p.low[d] != 0 || p.high[d] != 0;
    if (!padded && osh[d] == 1) continue;
    const int64_t m = args.nd - 1;
    if (!padded && !last_padded && args.ist[m] == inn.strides[d] * inn.shape[d]) {
      args.oshape[m] *= osh[d];
      args.ishape[m] *= inn.shape[d];
      args.ist[m] = inn.strides[d];
      continue;
    }
    if (args.nd == kMaxDims)
      throw UnsupportedError("Pad: CUDA kernels take at most " + std::to_string(kMaxDims) +
                             " non-mergeable axes, shape " + shape_to_string(osh) + " has more");
    args.oshape[args.nd] = osh[d];
    args.ishape[args.nd] = inn.shape[d];
    args.low[args.nd] = p.low[d];
    args.ist[args.nd] = inn.strides[d];
    ++args.nd;
    last_padded = padded;
  }
  DeviceState& s = state_of(out);
  args.src = ptr_or_null(in);
  args.out = dptr(out);
  args.n = n;
  p.value.cast(out.dtype()).store(&args.fill);
  const std::string key = std::string("pad|") + bits_type(out.dtype()) + "|" + pad_mode_name(p.mode);
  const Kernel fn = get_kernel(s.index, key, [&] { return pad_source(out.dtype(), p.mode); }, "Pad");
  launch(s, fn, blocks_for(n, kBlock), kBlock, &args, "Pad");
}

}  // namespace smelt::cuda
