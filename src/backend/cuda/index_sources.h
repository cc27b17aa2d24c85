// CUDA sources of the indexing and data-movement kernels (pure: no GPU) and their argument structs.
//
// Each host struct below mirrors the device struct of the same name, field for field; every
// field is 8 bytes so both sides lay it out identically. The kernels are built by get_kernel
// (index.cpp, data_movement.cpp) and compiled for sm_90 by tests/backend/cuda/index_source_test.cpp
// on machines without a GPU.
#pragma once

#include <cstdint>
#include <string>

#include "smelt/ops.h"
#include "src/backend/cuda/kernels.h"

namespace smelt::cuda {

// ---- Argument structs (host mirrors) ------------------------------------------------------------

/// Gather, GatherElements, GatherND. One thread per output element. L walks the output shape:
/// st[0] the source offset without the indexed axes, st[1] the index array's offset of the
/// element's first component, st[2] the row-major position of that index row. k components,
/// `cstride` apart, address axes of size dims[j] whose source stride is scale[j].
struct GatherArgs {
  uint64_t src = 0, idx = 0, out = 0, status = 0;
  int64_t n = 0, k = 0, cstride = 0;
  int64_t dims[kMaxDims] = {}, scale[kMaxDims] = {};
  Layout layout;
};
static_assert(sizeof(GatherArgs) == 8 * (7 + 2 * kMaxDims) + sizeof(Layout));

/// Index validation alone (gathers whose output is empty): one thread per index element, L walks
/// the index array (st[0]); component j = position % k has size dims[j].
struct IndexCheckArgs {
  uint64_t idx = 0, status = 0;
  int64_t n = 0, k = 0;
  int64_t dims[kMaxDims] = {};
  Layout layout;
};
static_assert(sizeof(IndexCheckArgs) == 8 * (4 + kMaxDims) + sizeof(Layout));

/// Scatter/ScatterND step 1: one thread per update unit (an element for Scatter, an index row for
/// ScatterND) computes its target (st[1] of L plus the k wrapped components times scale[j]),
/// validates it and finds its bucket (the target itself, or a slot of an open-addressing table of
/// nb = 2^(64 - shift) keys), then counts it (or, for Assign, keeps the last unit).
struct TargetArgs {
  uint64_t idx = 0, bkt = 0, cnt = 0, keys = 0, status = 0;
  int64_t n = 0, k = 0, cstride = 0, nb = 0, shift = 0;
  int64_t dims[kMaxDims] = {}, scale[kMaxDims] = {};
  Layout layout;
};
static_assert(sizeof(TargetArgs) == 8 * (10 + 2 * kMaxDims) + sizeof(Layout));

/// Scatter steps 4-5: bucket fill, per-bucket sorts and the application of the updates.
/// status: [0] first bad index position, [1] 0 when a target repeats, [2] touched buckets,
/// [3] buckets too long for one thread's insertion sort.
struct ScatterArgs {
  uint64_t out = 0, upd = 0, bkt = 0, cnt = 0, keys = 0, off = 0, ord = 0, list = 0, large = 0, status = 0;
  int64_t n = 0, slice = 0;
};
static_assert(sizeof(ScatterArgs) == 8 * 12);

/// Strided copy: one thread per element of the source; L.st[0] source, L.st[1] destination.
struct CopyIntoArgs {
  uint64_t src = 0, dst = 0;
  int64_t n = 0;
  Layout layout;
};
static_assert(sizeof(CopyIntoArgs) == 8 * 3 + sizeof(Layout));

/// Pad: one thread per output element over `nd` (collapsed) axes.
struct PadArgs {
  uint64_t src = 0, out = 0;
  int64_t n = 0, nd = 0;
  uint64_t fill = 0;
  int64_t oshape[kMaxDims] = {}, ishape[kMaxDims] = {}, low[kMaxDims] = {}, ist[kMaxDims] = {};
};
static_assert(sizeof(PadArgs) == 8 * (5 + 4 * kMaxDims));

/// nonzero: blocks of 1024 elements (256 threads x 4) in row-major order; L.st[0] reads the input.
/// Coordinates of the nq axes longer than 1 go to rows[q] of the [ndim, total] output.
struct NonzeroArgs {
  uint64_t in = 0, out = 0, counts = 0, offs = 0;
  int64_t n = 0, total = 0, nq = 0;
  int64_t rows[kMaxDims] = {}, dims[kMaxDims] = {};
  Layout layout;
};
static_assert(sizeof(NonzeroArgs) == 8 * (7 + 2 * kMaxDims) + sizeof(Layout));

/// How the scatter kernel applies updates: no repeated target (one thread per update element),
/// Assign (the last update of each target wins), or in order per target bucket.
enum class ScatterApply : uint8_t { Direct, Winner, Bucket };

/// Buckets longer than this are sorted by a block (bitonic) instead of one thread's insertion sort.
inline constexpr int64_t kSmallBucket = 32;

inline const char* scatter_reduce_name(ScatterReduce r) {
  switch (r) {
    case ScatterReduce::Assign: return "assign";
    case ScatterReduce::Add: return "add";
    case ScatterReduce::Mul: return "mul";
    case ScatterReduce::Max: return "max";
    case ScatterReduce::Min: return "min";
  }
  return "?";
}

inline const char* pad_mode_name(PadMode m) {
  switch (m) {
    case PadMode::Constant: return "constant";
    case PadMode::Reflect: return "reflect";
    case PadMode::Edge: return "edge";
  }
  return "?";
}

// ---- Sources ------------------------------------------------------------------------------------

/// Device helpers of the index kernels: index values as int64 (uint64 past INT64_MAX saturates,
/// out of range for every axis, as on the CPU), wrapping, the first-bad-index record, offsets.
inline std::string index_helpers_source() {
  return R"CUDA(
template <class I> __device__ inline i64 idx_value(I x) {
  if constexpr (same_t<I, u64>::v) return x > 0x7fffffffffffffffull ? (i64)0x7fffffffffffffffll : (i64)x;
  else return (i64)x;
}
__device__ inline bool wrap_index(i64& x, i64 dim) {
  if (x < 0) x += dim;
  return x >= 0 && x < dim;
}
// status[0] keeps the smallest bad position (row-major in the index array): the CPU's message.
__device__ inline void note_bad(u64 status, i64 pos) { atomicMin((u64*)status, (u64)pos); }
__device__ inline i64 layout_offset(const Layout& L, int s, i64 i) {
  if (L.nd == 1) return i * L.st[s][0];
  i64 o = 0;
  for (int d = (int)L.nd - 1; d >= 0; --d) {
    o += (i % L.shape[d]) * L.st[s][d];
    i /= L.shape[d];
  }
  return o;
}
)CUDA";
}

inline std::string gather_source(Dtype data, Dtype index) {
  const std::string t = bits_type(data), ix = device_type(index);
  return index_helpers_source() +
         "struct GatherArgs { u64 src, idx, out, status; i64 n, k, cstride; i64 dims[MAXD]; i64 scale[MAXD]; Layout L; };\n"
         "extern \"C\" __global__ void k(GatherArgs a) {\n"
         "  const i64 i = gid();\n"
         "  if (i >= a.n) return;\n"
         "  i64 r = i, o0 = 0, o1 = 0, o2 = 0;\n"
         "  for (int d = (int)a.L.nd - 1; d >= 0; --d) {\n"
         "    const i64 c = r % a.L.shape[d];\n"
         "    r /= a.L.shape[d];\n"
         "    o0 += c * a.L.st[0][d];\n"
         "    o1 += c * a.L.st[1][d];\n"
         "    o2 += c * a.L.st[2][d];\n"
         "  }\n"
         "  const " + ix + "* ix = (const " + ix + "*)a.idx + o1;\n"
         "  for (i64 j = 0; j < a.k; ++j) {\n"
         "    i64 x = idx_value(ix[j * a.cstride]);\n"
         "    // A bad index reads nothing: the host raises after the kernel.\n"
         "    if (!wrap_index(x, a.dims[j])) { note_bad(a.status, o2 * a.k + j); return; }\n"
         "    o0 += x * a.scale[j];\n"
         "  }\n"
         "  ((" + t + "*)a.out)[i] = ((const " + t + "*)a.src)[o0];\n"
         "}\n";
}

inline std::string index_check_source(Dtype index) {
  const std::string ix = device_type(index);
  return index_helpers_source() +
         "struct IndexCheckArgs { u64 idx, status; i64 n, k; i64 dims[MAXD]; Layout L; };\n"
         "extern \"C\" __global__ void k(IndexCheckArgs a) {\n"
         "  const i64 i = gid();\n"
         "  if (i >= a.n) return;\n"
         "  i64 x = idx_value(((const " + ix + "*)a.idx)[layout_offset(a.L, 0, i)]);\n"
         "  if (!wrap_index(x, a.dims[i % a.k])) note_bad(a.status, i);\n"
         "}\n";
}

inline std::string scatter_targets_source(Dtype index, bool assign, bool hashed) {
  const std::string ix = device_type(index);
  std::string b = index_helpers_source() +
                  "struct TargetArgs { u64 idx, bkt, cnt, keys, status; i64 n, k, cstride, nb, shift; i64 dims[MAXD]; "
                  "i64 scale[MAXD]; Layout L; };\n"
                  "extern \"C\" __global__ void k(TargetArgs a) {\n"
                  "  const i64 u = gid();\n"
                  "  if (u >= a.n) return;\n"
                  "  i64 r = u, o0 = 0, t = 0;\n"
                  "  for (int d = (int)a.L.nd - 1; d >= 0; --d) {\n"
                  "    const i64 c = r % a.L.shape[d];\n"
                  "    r /= a.L.shape[d];\n"
                  "    o0 += c * a.L.st[0][d];\n"
                  "    t += c * a.L.st[1][d];\n"
                  "  }\n"
                  "  const " + ix + "* ix = (const " + ix + "*)a.idx + o0;\n"
                  "  for (i64 j = 0; j < a.k; ++j) {\n"
                  "    i64 x = idx_value(ix[j * a.cstride]);\n"
                  "    if (!wrap_index(x, a.dims[j])) { note_bad(a.status, u * a.k + j); return; }\n"
                  "    t += x * a.scale[j];\n"
                  "  }\n";
  if (hashed) {
    // Open addressing with linear probing; the table has at least twice as many slots as units,
    // so a free slot always exists. Which slot a target gets depends on timing; results do not.
    b += "  const u64 mask = (u64)a.nb - 1;\n"
         "  u64 h = ((u64)t * 0x9e3779b97f4a7c15ull) >> a.shift;\n"
         "  for (;;) {\n"
         "    const u64 prev = atomicCAS((u64*)a.keys + h, ~0ull, (u64)t);\n"
         "    if (prev == ~0ull || prev == (u64)t) break;\n"
         "    h = (h + 1) & mask;\n"
         "  }\n"
         "  const i64 bk = (i64)h;\n";
  } else {
    b += "  const i64 bk = t;\n";
  }
  b += "  ((i64*)a.bkt)[u] = bk;\n";
  if (assign)
    b += "  atomicMax((long long*)a.cnt + bk, (long long)u);\n";
  else
    b += "  if (atomicAdd((u64*)a.cnt + bk, 1ull) != 0ull) ((u64*)a.status)[1] = 0ull;\n";
  b += "}\n";
  return b;
}

inline const char* kScatterArgsSource =
    "struct ScatterArgs { u64 out, upd, bkt, cnt, keys, off, ord, list, large, status; i64 n, slice; };\n";

/// The update of `mode` for dtype `data`. Assign moves bits (Winner); the other reductions use the
/// element-wise operators of the preamble, which equal the CPU's combine functions bit for bit.
inline std::string scatter_apply_source(Dtype data, ScatterReduce reduce, ScatterApply mode, bool hashed) {
  const std::string t = reduce == ScatterReduce::Assign ? bits_type(data) : device_type(data);
  std::string combine;
  switch (reduce) {
    case ScatterReduce::Assign: combine = "y"; break;
    case ScatterReduce::Add: combine = "smelt::scalar::add<" + t + ">(x, y)"; break;
    case ScatterReduce::Mul: combine = "smelt::scalar::multiply<" + t + ">(x, y)"; break;
    case ScatterReduce::Max: combine = "smelt::scalar::maximum<" + t + ">(x, y)"; break;
    case ScatterReduce::Min: combine = "smelt::scalar::minimum<" + t + ">(x, y)"; break;
  }
  const std::string key = hashed ? "((const i64*)a.keys)[bk]" : "bk";
  std::string b = std::string(kScatterArgsSource) + "__device__ inline " + t + " combine(" + t + " x, " + t +
                  " y) { return " + combine + "; }\n"
                  "extern \"C\" __global__ void k(ScatterArgs a) {\n"
                  "  const i64 g = gid();\n"
                  "  if (g >= a.n * a.slice) return;\n"
                  "  const i64 e = g / a.slice, i = g - e * a.slice;\n"
                  "  " + t + "* out = (" + t + "*)a.out;\n"
                  "  const " + t + "* upd = (const " + t + "*)a.upd;\n";
  switch (mode) {
    case ScatterApply::Direct:
      // Every target is hit once: no two threads touch one element.
      b += "  const i64 bk = ((const i64*)a.bkt)[e];\n"
           "  const i64 p = " + key + " * a.slice + i;\n"
           "  out[p] = combine(out[p], upd[g]);\n";
      break;
    case ScatterApply::Winner:
      b += "  const i64 bk = ((const i64*)a.bkt)[e];\n"
           "  if (((const i64*)a.cnt)[bk] != e) return;\n"
           "  out[" + key + " * a.slice + i] = upd[g];\n";
      break;
    case ScatterApply::Bucket:
      // Thread (bucket e of the touched list, element i) applies the bucket's updates in order.
      b += "  if (e >= (i64)((const u64*)a.status)[2]) return;\n"
           "  const i64 bk = ((const i64*)a.list)[e];\n"
           "  const i64 s0 = ((const i64*)a.off)[bk], m = ((const i64*)a.off)[bk + 1] - s0;\n"
           "  const i64* ord = (const i64*)a.ord + s0;\n"
           "  const i64 p = " + key + " * a.slice + i;\n"
           "  " + t + " v = out[p];\n"
           "  for (i64 j = 0; j < m; ++j) v = combine(v, upd[ord[j] * a.slice + i]);\n"
           "  out[p] = v;\n";
      break;
  }
  b += "}\n";
  return b;
}

/// Bucket fill: each unit claims a slot of its bucket (counting the bucket's count down to 0);
/// the unit that takes the last count appends the bucket to the touched list.
inline std::string scatter_fill_source() {
  return std::string(kScatterArgsSource) +
         "extern \"C\" __global__ void k(ScatterArgs a) {\n"
         "  const i64 u = gid();\n"
         "  if (u >= a.n) return;\n"
         "  const i64 bk = ((const i64*)a.bkt)[u];\n"
         "  const u64 old = atomicAdd((u64*)a.cnt + bk, ~0ull);\n"
         "  ((i64*)a.ord)[((const i64*)a.off)[bk] + (i64)old - 1] = u;\n"
         "  if (old == 1ull) ((i64*)a.list)[atomicAdd((u64*)a.status + 2, 1ull)] = bk;\n"
         "}\n";
}

/// Per-bucket sort, short buckets: one thread's insertion sort (at most kSmallBucket items, so
/// at most ~500 comparisons); longer buckets are listed for the block sort.
inline std::string bucket_sort_small_source() {
  return std::string(kScatterArgsSource) +
         "extern \"C\" __global__ void k(ScatterArgs a) {\n"
         "  const i64 e = gid();\n"
         "  if (e >= a.n || e >= (i64)((const u64*)a.status)[2]) return;\n"
         "  const i64 bk = ((const i64*)a.list)[e];\n"
         "  const i64 s0 = ((const i64*)a.off)[bk], m = ((const i64*)a.off)[bk + 1] - s0;\n"
         "  if (m <= 1) return;\n"
         "  if (m > " + std::to_string(kSmallBucket) + ") {\n"
         "    ((i64*)a.large)[atomicAdd((u64*)a.status + 3, 1ull)] = bk;\n"
         "    return;\n"
         "  }\n"
         "  i64* v = (i64*)a.ord + s0;\n"
         "  for (i64 x = 1; x < m; ++x) {\n"
         "    const i64 key = v[x];\n"
         "    i64 y = x - 1;\n"
         "    while (y >= 0 && v[y] > key) { v[y + 1] = v[y]; --y; }\n"
         "    v[y + 1] = key;\n"
         "  }\n"
         "}\n";
}

/// Per-bucket sort, long buckets: one block per listed bucket (grid-stride over the list), a
/// bitonic network in global memory over the next power of two P >= m, O(m log^2 m) work in
/// log2(P)(log2(P)+1)/2 barrier-separated steps. Every comparator puts the smaller item first
/// (the first step of each stage compares mirrored positions), so the virtual items past m act
/// as +infinity that never move and their comparators are skipped.
inline std::string bucket_sort_large_source() {
  return std::string(kScatterArgsSource) +
         "extern \"C\" __global__ void k(ScatterArgs a) {\n"
         "  const i64 nl = (i64)((const u64*)a.status)[3];\n"
         "  for (i64 e = blockIdx.x; e < nl; e += gridDim.x) {\n"
         "    const i64 bk = ((const i64*)a.large)[e];\n"
         "    const i64 s0 = ((const i64*)a.off)[bk], m = ((const i64*)a.off)[bk + 1] - s0;\n"
         "    i64* v = (i64*)a.ord + s0;\n"
         "    i64 P = 1;\n"
         "    while (P < m) P <<= 1;\n"
         "    for (i64 kk = 2; kk <= P; kk <<= 1) {\n"
         "      for (i64 j = kk >> 1; j > 0; j >>= 1) {\n"
         "        for (i64 c = threadIdx.x; c < (P >> 1); c += blockDim.x) {\n"
         "          const i64 q = c / j, r = c - q * j;\n"
         "          const i64 lo = q * 2 * j + r;\n"
         "          const i64 hi = j == (kk >> 1) ? q * kk + kk - 1 - r : lo + j;\n"
         "          if (hi < m) {\n"
         "            const i64 x = v[lo], y = v[hi];\n"
         "            if (x > y) { v[lo] = y; v[hi] = x; }\n"
         "          }\n"
         "        }\n"
         "        __syncthreads();\n"
         "      }\n"
         "    }\n"
         "  }\n"
         "}\n";
}

inline std::string copy_into_source(Dtype data) {
  const std::string t = bits_type(data);
  return "struct CopyIntoArgs { u64 src, dst; i64 n; Layout L; };\n"
         "extern \"C\" __global__ void k(CopyIntoArgs a) {\n"
         "  const i64 i = gid();\n"
         "  if (i >= a.n) return;\n"
         "  i64 r = i, o0 = 0, o1 = 0;\n"
         "  for (int d = (int)a.L.nd - 1; d >= 0; --d) {\n"
         "    const i64 c = r % a.L.shape[d];\n"
         "    r /= a.L.shape[d];\n"
         "    o0 += c * a.L.st[0][d];\n"
         "    o1 += c * a.L.st[1][d];\n"
         "  }\n"
         "  ((" + t + "*)a.dst)[o1] = ((const " + t + "*)a.src)[o0];\n"
         "}\n";
}

inline std::string pad_source(Dtype data, PadMode mode) {
  const std::string t = bits_type(data);
  std::string outside;  // x is outside [0, dim): map it into the input, or write the fill
  switch (mode) {
    case PadMode::Constant: outside = "{ y[i] = (" + t + ")a.fill; return; }"; break;
    case PadMode::Reflect: outside = "x = x < 0 ? -x : 2 * (dim - 1) - x;"; break;
    case PadMode::Edge: outside = "x = x < 0 ? 0 : dim - 1;"; break;
  }
  return "struct PadArgs { u64 src, out; i64 n, nd; u64 fill; i64 oshape[MAXD], ishape[MAXD], low[MAXD], ist[MAXD]; };\n"
         "extern \"C\" __global__ void k(PadArgs a) {\n"
         "  const i64 i = gid();\n"
         "  if (i >= a.n) return;\n"
         "  " + t + "* y = (" + t + "*)a.out;\n"
         "  i64 r = i, off = 0;\n"
         "  for (int d = (int)a.nd - 1; d >= 0; --d) {\n"
         "    const i64 c = r % a.oshape[d], dim = a.ishape[d];\n"
         "    r /= a.oshape[d];\n"
         "    i64 x = c - a.low[d];\n"
         "    if (x < 0 || x >= dim) " + outside + "\n"
         "    off += x * a.ist[d];\n"
         "  }\n"
         "  y[i] = ((const " + t + "*)a.src)[off];\n"
         "}\n";
}

/// nonzero, pass 1: the number of non-zero elements of each block of 1024 (NaN counts, as on
/// the CPU: anything converts to bool as x != 0).
inline std::string nonzero_count_source(Dtype data, const std::string& scan_helpers) {
  const std::string t = device_type(data);
  return index_helpers_source() + scan_helpers +
         "struct NonzeroArgs { u64 in, out, counts, offs; i64 n, total, nq; i64 rows[MAXD], dims[MAXD]; Layout L; };\n"
         "extern \"C\" __global__ void k(NonzeroArgs a) {\n"
         "  const i64 b = bid(), base = b * 1024 + (i64)threadIdx.x * 4;\n"
         "  const " + t + "* x = (const " + t + "*)a.in;\n"
         "  i64 c = 0;\n"
         "  for (int j = 0; j < 4; ++j) {\n"
         "    const i64 i = base + j;\n"
         "    if (i < a.n && truth(x[layout_offset(a.L, 0, i)])) ++c;\n"
         "  }\n"
         "  i64 total;\n"
         "  block_exclusive_scan(c, &total);\n"
         "  if (threadIdx.x == 0) ((i64*)a.counts)[b] = total;\n"
         "}\n";
}

/// nonzero, pass 2: each block ranks its non-zero elements (a block scan) after the block's
/// offset (the scanned counts) and writes their coordinates: column = rank, in row-major order.
inline std::string nonzero_write_source(Dtype data, const std::string& scan_helpers) {
  const std::string t = device_type(data);
  return index_helpers_source() + scan_helpers +
         "struct NonzeroArgs { u64 in, out, counts, offs; i64 n, total, nq; i64 rows[MAXD], dims[MAXD]; Layout L; };\n"
         "extern \"C\" __global__ void k(NonzeroArgs a) {\n"
         "  const i64 b = bid(), base = b * 1024 + (i64)threadIdx.x * 4;\n"
         "  const " + t + "* x = (const " + t + "*)a.in;\n"
         "  bool f[4];\n"
         "  i64 c = 0;\n"
         "  for (int j = 0; j < 4; ++j) {\n"
         "    const i64 i = base + j;\n"
         "    f[j] = i < a.n && truth(x[layout_offset(a.L, 0, i)]);\n"
         "    if (f[j]) ++c;\n"
         "  }\n"
         "  i64 total;\n"
         "  i64 col = ((const i64*)a.offs)[b] + block_exclusive_scan(c, &total);\n"
         "  i64* y = (i64*)a.out;\n"
         "  for (int j = 0; j < 4; ++j) {\n"
         "    if (!f[j]) continue;\n"
         "    i64 r = base + j;\n"
         "    for (int q = (int)a.nq - 1; q >= 0; --q) {\n"
         "      y[a.rows[q] * a.total + col] = r % a.dims[q];\n"
         "      r /= a.dims[q];\n"
         "    }\n"
         "    ++col;\n"
         "  }\n"
         "}\n";
}

}  // namespace smelt::cuda
