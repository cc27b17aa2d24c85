// CUDA kernels for Reduce (sum/prod/max/min/all/any/mean over any axes) and ArgReduce.
//
// Every output is computed by a fixed sequence of operations that depends only on the shapes
// (never on timing), so results are deterministic. Three plans:
//  - rows: the reduced axes are the trailing ones. The order of codegen/gpu_row_order.h, the
//    one fused row kernels follow: a warp per short row, a block of 256 per long row (16-byte
//    vector loads, warp shuffles), few long rows split into chunks combined in order by a
//    second kernel. An input whose rows are not contiguous is copied first.
//  - columns: the innermost axis is kept and the reduced axes form one block before it (sum
//    over axis 0). Threads run along the kept axis (coalesced); the reduced rows split into
//    groups across blocks when there are few outputs, combined in order by the last block of
//    each tile to finish (a per-stream counter a tile).
//  - general (any other layout): a block per output (or per group of it), threads striding
//    over the reduced positions, or one thread per output walking them in order.
#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "smelt/errors.h"
#include "src/backend/cuda/allocator.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/kernels.h"
#include "src/backend/cuda/reduce_sources.h"
#include "src/codegen/cuda_emitter.h"
#include "src/codegen/gpu_row_order.h"
#include "src/codegen/kernel_params.h"

namespace smelt::cuda {

namespace {

/// Mirrors the device struct RedArgs.
struct RedArgs {
  uint64_t in = 0, out = 0, partial = 0;
  int64_t n_out = 0, count = 0, groups = 1, chunk = 0, divisor = 0;
  Layout kept;  // st[0]: input strides of the kept axes
  Layout red;   // st[0]: input strides of the reduced axes
};

const char* kRedArgsSource =
    "struct RedArgs { u64 in, out, partial; i64 n_out, count, groups, chunk, divisor; Layout kept; Layout red; };\n"
    // Input offset of reduced position r (row-major over the reduced layout).
    "__device__ inline i64 red_offset(const Layout& L, i64 r) {\n"
    "  if (L.nd == 1) return r * L.st[0][0];\n"
    "  i64 o = 0;\n"
    "  for (int d = (int)L.nd - 1; d >= 0; --d) { o += (r % L.shape[d]) * L.st[0][d]; r /= L.shape[d]; }\n"
    "  return o;\n}\n";

constexpr unsigned kBlock = 256;

/// Source of the final store: R::finish(acc), then Mean's division by the count.
std::string store_expr(bool mean, const std::string& out_t, const std::string& acc = "acc") {
  if (!mean) return "R::finish(" + acc + ")";
  return "smelt::scalar::divide<" + out_t + ">(R::finish(" + acc + "), cvt<" + out_t + ", double>((double)a.divisor))";
}

/// Mirrors the device struct RowRedArgs.
struct RowRedArgs {
  uint64_t in = 0, out = 0, partial = 0;
  int64_t rows = 0, n = 0, groups = 1, chunk = 0, threads = 256, divisor = 0;
};

const char* kRowRedArgsSource =
    "struct RowRedArgs { u64 in, out, partial; i64 rows, n, groups, chunk, threads, divisor; };\n";

/// Whether every reduced axis longer than 1 comes after every kept axis longer than 1.
bool trailing_axes(const Shape& shape, const std::vector<int>& axes) {
  bool seen_reduced = false;
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    if (shape[i] == 1) continue;
    const bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!reduced && seen_reduced) return false;
    seen_reduced = seen_reduced || reduced;
  }
  return true;
}

/// Mirrors the device struct ColRedArgs.
struct ColRedArgs {
  uint64_t in = 0, out = 0, partial = 0, counters = 0;
  int64_t outer = 0, m = 0, inner = 0, groups = 1, chunk = 0, divisor = 0;
};

const char* kColRedArgsSource =
    "struct ColRedArgs { u64 in, out, partial, counters; i64 outer, m, inner, groups, chunk, divisor; };\n";

/// load_vec<R, T, N>(v, w): the N elements of type T packed in words w as R's accumulators,
/// R::load of each. float16 into float: a vector without NaN takes the hardware conversion alone
/// (h2f's NaN select, per element, left float16 sums issue-bound: [16384, 4096] summed over
/// either axis 20-30% slower than bfloat16); one with a NaN takes R::load. The same values.
const char* kLoadVecSource =
    "template <class R, class T, int N> __device__ inline void load_vec(typename R::Acc* v, const u32* w) {\n"
    "  if constexpr (same_t<T, f16>::v && same_t<typename R::Acc, float>::v && N % 2 == 0) {\n"
    "    u32 nan = 0;\n"
    "    #pragma unroll\n"
    "    for (int j = 0; j < N / 2; ++j) nan |= ((w[j] & 0x7fff7fffu) + 0x03ff03ffu) & 0x80008000u;\n"
    "    if (nan == 0) {\n"
    "      #pragma unroll\n"
    "      for (int e = 0; e < N; ++e) {\n"
    "        float f;\n"
    "        asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"((u16)(w[e >> 1] >> ((e & 1) * 16))));\n"
    "        v[e] = f;\n"
    "      }\n"
    "      return;\n"
    "    }\n"
    "  }\n"
    "  #pragma unroll\n"
    "  for (int e = 0; e < N; ++e) v[e] = R::load(unpack<T>(w, e));\n"
    "}\n";

}  // namespace

/// The columns plan's kernel: input [outer, m, inner] row-major, m reduced. A block of eight
/// warps covers 32 * vec neighbouring inner positions (a lane takes `vec` of them: one 16-byte
/// load per row when vec > 1, inner a multiple of vec and the input 16-byte aligned), one outer
/// index and one group of m's rows; the group's rows are split in eight runs, warp w combining run
/// w in order (eight rows' loads in flight), then the warps' results are combined in order through
/// shared memory. With `partial` (several groups), each block writes its group's results, and the
/// last block of a tile to finish (a counter per tile, left at zero again by that block) combines
/// the tile's groups in order: no second kernel. A column's order (runs of the group in order,
/// then the group's runs, then the groups in order) depends on m and the group size only, so on
/// no vec.
std::string reduce_columns_source(ReduceOp op, Dtype in, Dtype out, bool partial, int vec) {
  const std::string in_t = device_type(in), out_t = device_type(out), v = std::to_string(vec);
  const std::string words = std::to_string((vec * static_cast<int>(size_of(in)) + 3) / 4);
  std::string b = std::string(kColRedArgsSource) + codegen::cuda_word_helpers_source() + codegen::cuda_vector_moves_source() +
                  "typedef " + codegen::gpu_red_type(op, in) + " R;\ntypedef R::Acc Acc;\n" + kLoadVecSource;
  // Other blocks' results are read through L2 (ld.global.cg): a line of them that this SM's L1
  // kept from an earlier read could be stale.
  if (partial)
    b += "template <class A> __device__ inline A ld_cg(const A* p) {\n"
         "  unsigned long long w;\n"
         "  if constexpr (sizeof(A) == 8) asm volatile(\"ld.global.cg.u64 %0, [%1];\" : \"=l\"(w) : \"l\"(p));\n"
         "  else { unsigned u;\n"
         "    if constexpr (sizeof(A) == 4) asm volatile(\"ld.global.cg.u32 %0, [%1];\" : \"=r\"(u) : \"l\"(p));\n"
         "    else if constexpr (sizeof(A) == 2) asm volatile(\"ld.global.cg.u16 %0, [%1];\" : \"=r\"(u) : \"l\"(p));\n"
         "    else asm volatile(\"ld.global.cg.u8 %0, [%1];\" : \"=r\"(u) : \"l\"(p));\n"
         "    w = u; }\n"
         "  A v;\n"
         "  unsigned char* b = (unsigned char*)&v;\n"
         "  #pragma unroll\n"
         "  for (int i = 0; i < (int)sizeof(A); ++i) b[i] = (unsigned char)(w >> (8 * i));\n"
         "  return v;\n}\n";
  // Rows q of the lane's columns: one vector (vec > 1) or one element each.
  auto load = [&](const std::string& w, const std::string& q) {
    return vec > 1 ? "vload<" + in_t + ", " + v + ">(" + w + ", x + (" + q + ") * a.inner);"
                   : "{ " + w + "[0] = 0; pack(" + w + ", 0, x[(" + q + ") * a.inner]); }";
  };
  b += "extern \"C\" __global__ void __launch_bounds__(256) k(ColRedArgs a) {\n"
       "  const int span = 32 * " + v + ";\n"
       "  __shared__ Acc s[8][32 * " + v + "];\n"
       "  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
       "  const i64 tiles = (a.inner + span - 1) / span;\n"
       "  const i64 blk = bid();\n"
       "  const i64 tile = blk % tiles, og = blk / tiles;\n"
       "  const i64 o = og / a.groups, g = og % a.groups;\n"
       "  const i64 lo = g * a.chunk, hi = min(a.m, lo + a.chunk), run = (a.chunk + 7) / 8;\n"
       "  const i64 rlo = min(hi, lo + w * run), rhi = min(hi, rlo + run);\n"
       "  const i64 i = tile * span + lane * " + v + ";\n"
       "  Acc av[" + v + "];\n"
       "  #pragma unroll\n"
       "  for (int e = 0; e < " + v + "; ++e) av[e] = R::init();\n"
       "  if (i < a.inner) {\n"
       "    const " + in_t + "* x = (const " + in_t + "*)a.in + o * a.m * a.inner + i;\n"
       "    i64 q = rlo;\n"
       "    for (; q + 8 <= rhi; q += 8) {\n"
       "      u32 w8[8][" + words + "];\n"
       "      #pragma unroll\n"
       "      for (int u = 0; u < 8; ++u) " + load("w8[u]", "q + u") + "\n"
       "      #pragma unroll\n"
       "      for (int u = 0; u < 8; ++u) {\n"
       "        Acc lv[" + v + "];\n"
       "        load_vec<R, " + in_t + ", " + v + ">(lv, w8[u]);\n"
       "        #pragma unroll\n"
       "        for (int e = 0; e < " + v + "; ++e) av[e] = R::step(av[e], lv[e]);\n"
       "      }\n"
       "    }\n"
       "    for (; q < rhi; ++q) {\n"
       "      u32 w1[" + words + "];\n"
       "      " + load("w1", "q") + "\n"
       "      #pragma unroll\n"
       "      for (int e = 0; e < " + v + "; ++e) av[e] = R::step(av[e], R::load(unpack<" + in_t + ">(w1, e)));\n"
       "    }\n"
       "  }\n"
       "  #pragma unroll\n"
       "  for (int e = 0; e < " + v + "; ++e) s[w][lane * " + v + " + e] = av[e];\n"
       "  __syncthreads();\n"
       "  // The runs that have rows, in order (an empty run's init would change -0.0 and NaN payloads).\n"
       "  for (int c = threadIdx.x; c < span; c += 256) {\n"
       "    const i64 col = tile * span + c;\n"
       "    if (col >= a.inner) break;\n"
       "    Acc acc = s[0][c];\n"
       "    for (int j = 1; j < 8 && lo + j * run < hi; ++j) acc = R::step(acc, s[j][c]);\n"
       "    const i64 k = o * a.inner + col;\n";
  if (!partial) {
    b += "    ((" + out_t + "*)a.out)[k] = " + store_expr(op == ReduceOp::Mean, out_t) + ";\n  }\n}\n";
    return b;
  }
  // The tile's last block: its counter reaches groups - 1 after every other group's results are
  // stored (each block fences its stores before counting), so it reads them all, eight loads in
  // flight at a time, the last batch too (it was a loop of one load at a time, which waited an L2
  // round trip for each of the last seven of sixteen groups). In group order: the same bits.
  b += "    ((Acc*)a.partial)[g * a.outer * a.inner + k] = acc;\n"
       "  }\n"
       "  __shared__ int last;\n"
       "  __threadfence();\n"
       "  __syncthreads();\n"
       "  if (threadIdx.x == 0) {\n"
       "    unsigned* c = (unsigned*)a.counters + o * tiles + tile;\n"
       "    last = atomicAdd(c, 1u) == (unsigned)(a.groups - 1);\n"
       "    if (last) *c = 0u;\n"
       "  }\n"
       "  __syncthreads();\n"
       "  if (!last) return;\n"
       "  __threadfence();\n"
       "  const i64 n = a.outer * a.inner;\n"
       "  for (int c = threadIdx.x; c < span; c += 256) {\n"
       "    const i64 col = tile * span + c;\n"
       "    if (col >= a.inner) break;\n"
       "    const i64 k = o * a.inner + col;\n"
       "    const Acc* pp = (const Acc*)a.partial + k;\n"
       "    Acc acc = R::init();\n"
       "    for (i64 q = 0; q < a.groups; q += 8) {\n"
       "      const i64 cnt = min((i64)8, a.groups - q);\n"
       "      Acc v[8];\n"
       "      #pragma unroll\n"
       "      for (int u = 0; u < 8; ++u) if (u < cnt) v[u] = ld_cg(pp + (q + u) * n);\n"
       "      #pragma unroll\n"
       "      for (int u = 0; u < 8; ++u) if (u < cnt) acc = q + u == 0 ? v[u] : R::step(acc, v[u]);\n"
       "    }\n"
       "    ((" + out_t + "*)a.out)[k] = " + store_expr(op == ReduceOp::Mean, out_t) + ";\n"
       "  }\n"
       "}\n";
  return b;
}

namespace {

/// `count` zeroed 32-bit counters for a split columns kernel's tiles on the thread's current
/// stream. Each stream keeps one buffer for good (zeroed once; streams are never destroyed
/// either): the kernel's last block of a tile sets its counter back to zero, and a stream runs its
/// kernels one after another, so the next kernel finds them zero without a memset. A capture
/// gets counters of its own, zeroed by a memset node on every launch of the graph and held in
/// `hold`: a graph may run beside other kernels that count in its capture stream's buffer.
uint64_t tile_counters(DeviceState& s, int64_t count, BufferPtr& hold, const std::string& what) {
  const DriverApi& d = *driver();
  const CUstream stream = current_stream(s);
  const size_t words = static_cast<size_t>(count);
  if (const ThreadCapture* c = thread_capture(); c && c->device == s.index) {
    hold = c->allocator->allocate(words * 4);
    const auto p = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(hold->ptr));
    check(d.cuMemsetD32Async(p, 0u, words, stream), "cuMemsetD32Async", what);
    return p;
  }
  struct Counters {
    CUdeviceptr ptr = 0;
    size_t words = 0;
  };
  static std::mutex mutex;
  static std::map<std::pair<int, CUstream>, Counters> by_stream;
  std::lock_guard lock(mutex);
  Counters& c = by_stream[{s.index, stream}];
  if (c.words < words) {
    // A smaller buffer is left allocated: kernels queued on the stream may still count in it.
    const size_t n = std::max<size_t>(words, std::max<size_t>(4096, 2 * c.words));
    check(d.cuMemAlloc(&c.ptr, n * 4), "cuMemAlloc", what);
    check(d.cuMemsetD32Async(c.ptr, 0u, n, stream), "cuMemsetD32Async", what);
    c.words = n;
  }
  return static_cast<uint64_t>(c.ptr);
}

/// The columns plan: `in` row-major as [outer, m, inner], m reduced. Groups from the sizes
/// alone: enough blocks to fill a large GPU (about 2048) when the outputs alone do not.
void reduce_columns(const ReduceParams& p, const Array& in, Array& out, int64_t outer, int64_t m, int64_t inner,
                    const std::string& what) {
  DeviceState& s = state_of(out);
  const Dtype dt = in.dtype();
  ColRedArgs args;
  args.in = dptr(in);
  args.out = dptr(out);
  args.outer = outer;
  args.m = m;
  args.inner = inner;
  args.divisor = std::max<int64_t>(m - p.ddof, 0);
  // The groups (so each column's order) come from the shapes and the dtype alone, counting the
  // blocks as if a lane took 16 bytes of neighbouring columns (it does when they allow vector
  // loads): enough blocks, each warp's run with at least 128 rows. Measured on the H200, sum over
  // axis 0 of [16384, 4096] float32 / bfloat16, each thread over all the group's rows (128
  // groups): 128 rows 73.0 / 45.1 us, 64 rows 78.6 / 47.6, 256 rows 74.8 / 55.3; 16 or 32 rows in
  // flight per thread instead of 8 gave nothing. ncu put the bfloat16 sum's loads at 33.3 us (84%
  // of DRAM's peak) and the combine of its 128 groups at 5.3 us: eight warps a group cut the
  // groups to 16, as many threads each with as many rows (42.9 us), and the last block of each
  // tile combining them instead of a second kernel gave 40.3 us.
  const int64_t span = 32 * static_cast<int64_t>(16 / size_of(dt));
  const int64_t tiles = (inner + span - 1) / span, blocks = outer * tiles;
  int64_t groups = 1;
  if (blocks < 2048) groups = std::clamp<int64_t>(2048 / blocks, 1, std::max<int64_t>(1, m / (8 * 128)));
  args.chunk = (m + groups - 1) / groups;
  args.groups = (m + args.chunk - 1) / args.chunk;
  int vec = static_cast<int>(16 / size_of(dt));
  if (inner % vec != 0 || args.in % 16 != 0) vec = 1;
  const int64_t vec_blocks = outer * ((inner + 32 * vec - 1) / (32 * vec));
  const bool split = args.groups > 1;
  BufferPtr partial;
  if (split) {
    partial = allocator(out.device()).allocate(static_cast<size_t>(outer * inner * args.groups) * 8);
    args.partial = reinterpret_cast<uint64_t>(partial->ptr);
  }
  BufferPtr captured_counters;
  if (split) args.counters = tile_counters(s, vec_blocks, captured_counters, what);
  using Plan = ReduceKernelParams::Plan;
  const Kernel fn = get_kernel(s.index, ReduceKernelParams{Plan::Columns, p.op, dt, out.dtype(), split, vec}, what);
  launch(s, fn, static_cast<uint64_t>(vec_blocks * args.groups), 256, &args, what);
}

/// For the columns plan: the reduced axes longer than 1 form one block with a kept axis longer
/// than 1 after it; gives [outer, m, inner].
bool column_block(const Shape& shape, const std::vector<int>& axes, int64_t& outer, int64_t& m, int64_t& inner) {
  outer = m = inner = 1;
  int phase = 0;  // 0: kept before, 1: reduced, 2: kept after
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    const bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (shape[i] == 1) continue;
    if (reduced) {
      if (phase == 2) return false;
      phase = 1;
      m *= shape[i];
    } else if (phase == 0) {
      outer *= shape[i];
    } else {
      phase = 2;
      inner *= shape[i];
    }
  }
  return phase == 2;
}

}  // namespace

namespace {

/// What both row kernels start with: their arguments, the row order's helpers, the word and
/// vector moves, and R, the reduction of `op` over `in`.
std::string row_kernel_head(ReduceOp op, Dtype in) {
  return std::string(kRowRedArgsSource) + codegen::gpu_row_order_source() + codegen::cuda_word_helpers_source() +
         codegen::cuda_vector_moves_source() + "typedef " + codegen::gpu_red_type(op, in) + " R;\ntypedef R::Acc Acc;\n" +
         kLoadVecSource;
}

}  // namespace

/// The row kernel of the rows plan (see gpu_row_order.h for the order): each thread walks its
/// vectors of the row four at a time (ROW_VECS_FOR), those whole and 16-byte aligned
/// loaded together, a partial or unaligned one element by element; every vector's elements are
/// combined in order, so the order is the same whichever way they were moved.
std::string reduce_rows_source(ReduceOp op, Dtype in, Dtype out, bool partial) {
  const std::string in_t = device_type(in), out_t = device_type(out);
  const std::string vec = std::to_string(codegen::gpu_row_vector(in));
  const std::string words = std::to_string((codegen::gpu_row_vector(in) * size_of(in) + 3) / 4);
  std::string b = row_kernel_head(op, in);
  // Launched with up to 512 threads (the order's long rows): at most 128 registers a thread.
  b += "extern \"C\" __global__ void __launch_bounds__(512) k(RowRedArgs a) {\n"
       "  __shared__ Acc sh[33];\n"
       "  const int T = (int)a.threads, lane = threadIdx.x % T;\n"
       "  const i64 blk = bid();\n"
       "  const i64 r = T == 32 ? blk * (blockDim.x / 32) + threadIdx.x / 32 : blk / a.groups;\n"
       "  const i64 g = T == 32 ? 0 : blk % a.groups;\n"
       "  if (r >= a.rows) return;\n"
       "  const " + in_t + "* x = (const " + in_t + "*)a.in + r * a.n;\n"
       "  const i64 lo = g * a.chunk, hi = min(a.n, lo + a.chunk);\n"
       // Every vector of the thread starts a multiple of 16 bytes after x + lo.
       "  const bool aligned = ((u64)(x + lo) & 15) == 0;\n"
       "  Acc acc = R::init();\n"
       // Four of the thread's vectors at a time (ROW_VECS_AT): the whole aligned ones are
       // loaded first, all in flight, then the four are combined in order, a partial or
       // unaligned one element by element.
       "  ROW_VECS_FOR(b, lo, hi, lane, T, " + vec + ", 4) {\n"
       "    u32 w[4][" + words + "];\n"
       "    #pragma unroll\n"
       "    for (int u = 0; u < 4; ++u)\n"
       "      if (aligned && ROW_VECS_AT(b, u, T, " + vec + ") + " + vec + " <= hi)\n"
       "        vload<" + in_t + ", " + vec + ">(w[u], x + ROW_VECS_AT(b, u, T, " + vec + "));\n"
       "    #pragma unroll\n"
       "    for (int u = 0; u < 4; ++u) {\n"
       "      const i64 v = ROW_VECS_AT(b, u, T, " + vec + ");\n"
       "      if (v >= hi) break;\n"
       "      if (aligned && v + " + vec + " <= hi) {\n"
       "        Acc lv[" + vec + "];\n"
       "        load_vec<R, " + in_t + ", " + vec + ">(lv, w[u]);\n"
       "        #pragma unroll\n"
       "        for (int e = 0; e < " + vec + "; ++e) acc = R::step(acc, lv[e]);\n"
       "      } else {\n"
       "        for (i64 j = v; j < min(v + " + vec + ", hi); ++j) acc = R::step(acc, R::load(x[j]));\n"
       "      }\n"
       "    }\n"
       "  }\n"
       "  acc = row_tree<R>(acc, T, sh);\n"
       "  if (lane != 0) return;\n";
  if (partial) b += "  ((Acc*)a.partial)[r * a.groups + g] = acc;\n}\n";
  else b += "  ((" + out_t + "*)a.out)[r] = " + store_expr(op == ReduceOp::Mean, out_t) + ";\n}\n";
  return b;
}

/// The rows plan's kernel for rows of 256 or 512 threads (gpu_row_order) that are not split,
/// run by one warp a row: lane t holds the accumulators of the order's threads t, t + 32, ...
/// (`warps` of them, one per warp of the order's block), combines into each the same vectors in
/// the same order, and replays row_tree: each accumulator through the warp's shuffles, then
/// the warp results at distances warps / 2, ..., 1. So the same bits as reduce_rows_source, without
/// a block's barriers and with `warps` vectors of a lane in flight (a block per row of 8 KiB
/// left the loads too few to cover the memory latency).
std::string reduce_rows_warp_source(ReduceOp op, Dtype in, Dtype out, int warps) {
  const std::string in_t = device_type(in), out_t = device_type(out), W = std::to_string(warps);
  const std::string vec = std::to_string(codegen::gpu_row_vector(in));
  const std::string words = std::to_string((codegen::gpu_row_vector(in) * size_of(in) + 3) / 4);
  std::string b = row_kernel_head(op, in);
  b += "extern \"C\" __global__ void __launch_bounds__(256) k(RowRedArgs a) {\n"
       "  const int t = threadIdx.x & 31;\n"
       "  const i64 r = bid() * (blockDim.x / 32) + threadIdx.x / 32;\n"
       "  if (r >= a.rows) return;\n"
       "  const " + in_t + "* x = (const " + in_t + "*)a.in + r * a.n;\n"
       "  const i64 hi = a.n;\n"
       "  const bool aligned = ((u64)x & 15) == 0;\n"
       "  Acc acc[" + W + "];\n"
       "  #pragma unroll\n"
       "  for (int k = 0; k < " + W + "; ++k) acc[k] = R::init();\n"
       // Step b: vector k of it is the one thread t + 32 k of the order's block takes then.
       "  for (i64 b = (i64)t * " + vec + "; b < hi; b += (i64)" + W + " * 32 * " + vec + ") {\n"
       "    u32 w[" + W + "][" + words + "];\n"
       "    #pragma unroll\n"
       "    for (int k = 0; k < " + W + "; ++k)\n"
       "      if (aligned && b + (i64)k * 32 * " + vec + " + " + vec + " <= hi)\n"
       "        vload<" + in_t + ", " + vec + ">(w[k], x + b + (i64)k * 32 * " + vec + ");\n"
       "    #pragma unroll\n"
       "    for (int k = 0; k < " + W + "; ++k) {\n"
       "      const i64 v = b + (i64)k * 32 * " + vec + ";\n"
       "      if (v >= hi) break;\n"
       "      if (aligned && v + " + vec + " <= hi) {\n"
       "        Acc lv[" + vec + "];\n"
       "        load_vec<R, " + in_t + ", " + vec + ">(lv, w[k]);\n"
       "        #pragma unroll\n"
       "        for (int e = 0; e < " + vec + "; ++e) acc[k] = R::step(acc[k], lv[e]);\n"
       "      } else {\n"
       "        for (i64 j = v; j < min(v + " + vec + ", hi); ++j) acc[k] = R::step(acc[k], R::load(x[j]));\n"
       "      }\n"
       "    }\n"
       "  }\n"
       "  #pragma unroll\n"
       "  for (int off = 16; off > 0; off >>= 1)\n"
       "    #pragma unroll\n"
       "    for (int k = 0; k < " + W + "; ++k) acc[k] = R::step(acc[k], shfl_dn(acc[k], off));\n"
       "  if (t != 0) return;\n"
       "  #pragma unroll\n"
       "  for (int off = " + W + " / 2; off > 0; off >>= 1)\n"
       "    #pragma unroll\n"
       "    for (int k = 0; k < off; ++k) acc[k] = R::step(acc[k], acc[k + off]);\n"
       "  const Acc acc0 = acc[0];\n"
       "  ((" + out_t + "*)a.out)[r] = " + store_expr(op == ReduceOp::Mean, out_t, "acc0") + ";\n}\n";
  return b;
}

/// The second kernel of a split row: each row's chunk results combined in order.
std::string reduce_rows_combine_source(ReduceOp op, Dtype in, Dtype out) {
  const std::string out_t = device_type(out);
  return std::string(kRowRedArgsSource) + "typedef " + codegen::gpu_red_type(op, in) +
         " R;\ntypedef R::Acc Acc;\n"
         "extern \"C\" __global__ void k(RowRedArgs a) {\n"
         "  const i64 r = gid();\n  if (r >= a.rows) return;\n"
         "  const Acc* pp = (const Acc*)a.partial + r * a.groups;\n"
         "  Acc acc = pp[0];\n"
         "  for (i64 g = 1; g < a.groups; ++g) acc = R::step(acc, pp[g]);\n"
         "  ((" + out_t + "*)a.out)[r] = " + store_expr(op == ReduceOp::Mean, out_t) + ";\n}\n";
}

size_t ReduceKernelParams::hash() const {
  size_t h = codegen::hash_mix(static_cast<size_t>(plan), static_cast<size_t>(op));
  h = codegen::hash_mix(h, static_cast<size_t>(in));
  h = codegen::hash_mix(h, static_cast<size_t>(out));
  h = codegen::hash_mix(h, partial ? 1 : 0);
  h = codegen::hash_mix(h, static_cast<size_t>(vec));
  return codegen::hash_mix(h, static_cast<size_t>(warps));
}

std::string ReduceKernelParams::name() const {
  const bool columns = plan == Plan::Columns;
  const bool combine = plan == Plan::RowsCombine;
  return std::string(columns ? "reduce_cols|" : "reduce_rows|") + reduce_op_name(op) + "|" + dtype_name(in) + "|" +
         dtype_name(out) + (partial ? "|split" : "") + (columns && !combine ? "|v" + std::to_string(vec) : "") +
         (plan == Plan::RowsWarp ? "|warp" + std::to_string(warps) : "") +
         (combine ? "|combine" : "");
}

std::string ReduceKernelParams::source() const {
  switch (plan) {
    case Plan::Rows: return reduce_rows_source(op, in, out, partial);
    case Plan::RowsWarp: return reduce_rows_warp_source(op, in, out, warps);
    case Plan::RowsCombine: return reduce_rows_combine_source(op, in, out);
    case Plan::Columns: return reduce_columns_source(op, in, out, partial, vec);
  }
  return "";
}

namespace {

/// The rows plan: `in` is row-contiguous, its trailing `n` elements per row reduced.
void reduce_rows(const ReduceParams& p, const Array& in, Array& out, int64_t rows, int64_t n, const std::string& what) {
  DeviceState& s = state_of(out);
  const Dtype dt = in.dtype();
  const codegen::GpuRowOrder order = codegen::gpu_row_order(rows, n);
  RowRedArgs args;
  args.in = in.size() > 0 ? dptr(in) : 0;
  args.out = dptr(out);
  args.rows = rows;
  args.n = n;
  args.groups = order.groups;
  args.chunk = order.chunk;
  args.threads = order.threads;
  args.divisor = std::max<int64_t>(n - p.ddof, 0);
  const bool split = order.groups > 1;
  BufferPtr partial;
  if (split) {
    partial = allocator(out.device()).allocate(static_cast<size_t>(rows * order.groups) * 8);
    args.partial = reinterpret_cast<uint64_t>(partial->ptr);
  }
  using Plan = ReduceKernelParams::Plan;
  if (!split && order.threads > 32 && rows >= 1024) {
    // A warp replays the row's block (the same bits): 8 rows a block of 256. With fewer rows
    // than about a warp an SM slot, the block of a row keeps more of the GPU busy.
    const int warps = static_cast<int>(order.threads / 32);
    const Kernel fn = get_kernel(s.index, ReduceKernelParams{Plan::RowsWarp, p.op, dt, out.dtype(), false, 1, warps}, what);
    return launch(s, fn, blocks_for(rows, 256 / 32), 256, &args, what);
  }
  const Kernel fn = get_kernel(s.index, ReduceKernelParams{Plan::Rows, p.op, dt, out.dtype(), split}, what);
  const uint64_t grid = order.threads == 32 ? blocks_for(rows, 256 / 32) : static_cast<uint64_t>(rows * order.groups);
  launch(s, fn, grid, order.threads == 32 ? 256 : static_cast<unsigned>(order.threads), &args, what);
  if (!split) return;
  const Kernel fin = get_kernel(s.index, ReduceKernelParams{Plan::RowsCombine, p.op, dt, out.dtype()}, what);
  launch(s, fin, blocks_for(rows, kBlock), kBlock, &args, what);
}

}  // namespace

void eval_reduce(const ReduceParams& p, const std::vector<Array>& inputs, Array& out) {
  const Array& in = inputs[0];
  const auto& n = in.node();
  const Dtype dt = in.dtype();
  const bool mean = p.op == ReduceOp::Mean;
  const std::string what = std::string("Reduce(") + reduce_op_name(p.op) + ")";
  if (mean && !is_floating(dt)) throw DtypeError(what + ": needs a float input, got " + dtype_name(dt));
  alloc_output(out);
  const int64_t n_out = out.size();
  if (n_out == 0) return;
  DeviceState& s = state_of(out);

  RedArgs args;
  args.in = n.size() > 0 ? dptr(in) : 0;
  args.out = dptr(out);
  args.n_out = n_out;
  Shape red_shape(n.shape.size(), 1);
  int64_t count = 1;
  for (int ax : p.axes) {
    red_shape[ax] = n.shape[ax];
    count *= n.shape[ax];
  }
  args.count = count;
  args.divisor = std::max<int64_t>(count - p.ddof, 0);
  if (count > 0 && trailing_axes(n.shape, p.axes)) {
    // Rows: read through a row-major copy when the input's rows are not contiguous, so the
    // order is the logical one (fused row kernels read logical positions too).
    if (is_row_contiguous(n.shape, n.strides)) return reduce_rows(p, in, out, n_out, count, what);
    Array c = make_array(in.shape(), dt, in.device(), make_prim(PrimKind::Copy, NoParams{}), {in});
    c.eval();
    return reduce_rows(p, c, out, n_out, count, what);
  }
  int64_t outer = 1, m = 1, inner = 1;
  if (count > 0 && column_block(n.shape, p.axes, outer, m, inner) && is_row_contiguous(n.shape, n.strides))
    return reduce_columns(p, in, out, outer, m, inner, what);
  args.kept = collapse_layout(out.shape(), {&n.strides}, what);
  args.red = collapse_layout(red_shape, {&n.strides}, what);
  if (args.red.nd == 0) {  // nothing reduced (or one element): a 1-long reduction
    args.red.nd = 1;
    args.red.shape[0] = count;
    args.red.st[0][0] = 0;
  }
  // Row layout when the innermost input axis is reduced, or there are few outputs.
  int64_t inner_stride = -1;
  bool inner_reduced = false;
  for (size_t i = 0; i < n.shape.size(); ++i) {
    if (n.shape[i] <= 1) continue;
    const int64_t a = n.strides[i] < 0 ? -n.strides[i] : n.strides[i];
    if (inner_stride < 0 || a < inner_stride || (a == inner_stride && red_shape[i] > 1)) {
      inner_stride = a;
      inner_reduced = red_shape[i] > 1;
    }
  }
  const bool row = inner_reduced || n_out < 1024 || count == 0;
  // Groups from the sizes alone (never from the device): long reductions of few outputs split.
  int64_t groups = 1;
  if (row && n_out < 512 && count >= 65536) groups = std::min<int64_t>((count + 32767) / 32768, 1024);
  args.groups = groups;
  args.chunk = (count + groups - 1) / groups;

  const std::string in_t = device_type(dt), out_t = device_type(out.dtype());
  const std::string red_t = codegen::gpu_red_type(p.op, dt);
  const std::string key = "reduce|" + std::string(reduce_op_name(p.op)) + "|" + in_t + "|" + out_t + "|" +
                          (row ? "row" : "col") + (groups > 1 ? "|g" : "");
  const std::string head = std::string(kRedArgsSource) + "typedef " + red_t + " R;\ntypedef R::Acc Acc;\n";

  BufferPtr partial;
  if (groups > 1) {
    // Partials in the accumulator type (at most 8 bytes each).
    partial = allocator(out.device()).allocate(static_cast<size_t>(n_out * groups) * 8);
    args.partial = reinterpret_cast<uint64_t>(partial->ptr);
  }
  if (row) {
    const Kernel fn = get_kernel(s.index, key, [&] {
      std::string b = head;
      b += "extern \"C\" __global__ void k(RedArgs a) {\n"
           "  __shared__ Acc sh[256];\n"
           "  const i64 blk = bid();\n"
           "  const i64 o = blk / a.groups, g = blk % a.groups;\n"
           "  if (o >= a.n_out) return;\n"
           "  i64 base = 0, r = o;\n"
           "  for (int d = (int)a.kept.nd - 1; d >= 0; --d) { base += (r % a.kept.shape[d]) * a.kept.st[0][d]; r /= a.kept.shape[d]; }\n"
           "  const " + in_t + "* x = (const " + in_t + "*)a.in + base;\n"
           "  const i64 lo = g * a.chunk, hi = min(a.count, lo + a.chunk);\n"
           "  Acc acc = R::init();\n"
           "  for (i64 q = lo + threadIdx.x; q < hi; q += blockDim.x) acc = R::step(acc, R::load(x[red_offset(a.red, q)]));\n"
           "  sh[threadIdx.x] = acc;\n"
           "  __syncthreads();\n"
           "  for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {\n"
           "    if (threadIdx.x < w) sh[threadIdx.x] = R::step(sh[threadIdx.x], sh[threadIdx.x + w]);\n"
           "    __syncthreads();\n"
           "  }\n"
           "  if (threadIdx.x != 0) return;\n"
           "  acc = sh[0];\n";
      if (groups > 1) b += "  ((Acc*)a.partial)[o * a.groups + g] = acc;\n}\n";
      else b += "  ((" + out_t + "*)a.out)[o] = " + store_expr(mean, out_t) + ";\n}\n";
      return b;
    }, what);
    launch(s, fn, static_cast<uint64_t>(n_out * groups), kBlock, &args, what);
    if (groups > 1) {
      const Kernel fin = get_kernel(s.index, key + "|combine", [&] {
        return head +
               "extern \"C\" __global__ void k(RedArgs a) {\n"
               "  const i64 o = gid();\n  if (o >= a.n_out) return;\n"
               "  const Acc* pp = (const Acc*)a.partial + o * a.groups;\n"
               "  Acc acc = pp[0];\n"
               "  for (i64 g = 1; g < a.groups; ++g) acc = R::step(acc, pp[g]);\n"
               "  ((" + out_t + "*)a.out)[o] = " + store_expr(mean, out_t) + ";\n}\n";
      }, what);
      launch(s, fin, blocks_for(n_out, kBlock), kBlock, &args, what);
    }
    return;
  }
  const Kernel fn = get_kernel(s.index, key, [&] {
    return head +
           "extern \"C\" __global__ void k(RedArgs a) {\n"
           "  const i64 o = gid();\n  if (o >= a.n_out) return;\n"
           "  i64 base = 0, r = o;\n"
           "  for (int d = (int)a.kept.nd - 1; d >= 0; --d) { base += (r % a.kept.shape[d]) * a.kept.st[0][d]; r /= a.kept.shape[d]; }\n"
           "  const " + in_t + "* x = (const " + in_t + "*)a.in + base;\n"
           "  Acc acc = R::init();\n"
           "  for (i64 q = 0; q < a.count; ++q) acc = R::step(acc, R::load(x[red_offset(a.red, q)]));\n"
           "  ((" + out_t + "*)a.out)[o] = " + store_expr(mean, out_t) + ";\n}\n";
  }, what);
  launch(s, fn, blocks_for(n_out, kBlock), kBlock, &args, what);
}

// ---- ArgReduce -------------------------------------------------------------------------------

void eval_argreduce(const ArgReduceParams& p, const std::vector<Array>& inputs, Array& out) {
  const Array& in = inputs[0];
  const auto& n = in.node();
  const Dtype dt = in.dtype();
  const std::string what = p.op == ArgReduceOp::ArgMax ? "ArgReduce(argmax)" : "ArgReduce(argmin)";
  alloc_output(out);
  const int64_t n_out = out.size();
  if (n_out == 0) return;
  DeviceState& s = state_of(out);
  struct ArgArgs {
    uint64_t in, out;
    int64_t n_out, len, stride;
    Layout kept;
  } args{n.size() > 0 ? dptr(in) : 0, dptr(out), n_out, n.shape[p.axis], n.strides[p.axis], {}};
  args.kept = collapse_layout(out.shape(), {&n.strides}, what);
  const std::string t = device_type(dt);
  const bool max = p.op == ArgReduceOp::ArgMax;
  const std::string key = std::string("argreduce|") + (max ? "max" : "min") + (p.last ? "|last|" : "|first|") + t;
  const Kernel fn = get_kernel(s.index, key, [&] {
    // The best changes only for a strictly better value or the first NaN (NumPy's rule);
    // `last` walks backwards with the same rule.
    const std::string better = max ? "x > b" : "x < b";
    return std::string(
               "struct ArgArgs { u64 in, out; i64 n_out, len, stride; Layout kept; };\n"
               "extern \"C\" __global__ void k(ArgArgs a) {\n"
               "  const i64 o = gid();\n  if (o >= a.n_out) return;\n"
               "  i64 base = 0, r = o;\n"
               "  for (int d = (int)a.kept.nd - 1; d >= 0; --d) { base += (r % a.kept.shape[d]) * a.kept.st[0][d]; r /= a.kept.shape[d]; }\n"
               "  const ") + t + "* p = (const " + t + "*)a.in + base;\n"
           "  if (a.len == 0) { ((i64*)a.out)[o] = 0; return; }\n"
           "  const i64 first = " + (p.last ? "a.len - 1" : "0") + ";\n"
           "  calc<" + t + "> b = up(p[first * a.stride]);\n"
           "  i64 best = first;\n"
           "  for (i64 kk = 1; kk < a.len; ++kk) {\n"
           "    const i64 i = " + (p.last ? "a.len - 1 - kk" : "kk") + ";\n"
           "    const calc<" + t + "> x = up(p[i * a.stride]);\n"
           "    if (!(b != b) && ((x != x) || (" + better + "))) { b = x; best = i; }\n"
           "  }\n"
           "  ((i64*)a.out)[o] = best;\n}\n";
  }, what);
  launch(s, fn, blocks_for(n_out, kBlock), kBlock, &args, what);
}

}  // namespace smelt::cuda
