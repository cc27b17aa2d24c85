// CUDA kernels for Scan (cumsum, cumprod, cummax, cummin; reverse and exclusive).
//
// The accumulator, wraparound, NaN rule and output dtype are the CPU's (the preamble's Red is a
// port of src/backend/cpu/reduce.cpp's), and the CPU adds along each line in order. Two layouts:
//  - sequential: one thread per line walks it in that order, so every result is bit-identical
//    to the CPU's. Used when there are many lines (kScanSequentialLines or more) or the lines are
//    short (kScanSequentialLen or less). Consecutive threads take consecutive lines, which are
//    neighbours in memory when the axis is not the innermost (coalesced as they are); when it is
//    the innermost, blocks of kScanTileLines lines move through shared memory in tiles of 32
//    elements (coalesced loads and stores, each thread still walking its own line in order).
//  - chunked: few long lines. Each line is cut into chunks of kScanChunk (a block of 256 threads,
//    16 consecutive elements each): (1) every chunk's total (each thread folds its 16 elements in
//    order, then an in-order Hillis-Steele scan of the thread totals), (2) one thread per line
//    turns the chunk totals into exclusive prefixes, in order, (3) every chunk is scanned again
//    from its prefix, each thread walking its 16 elements from prefix + the totals of the
//    threads before it. Every combination is step(earlier, later) in a fixed tree, so results
//    are deterministic, and bit-exact for integers (wrapping), bool and max/min (the CPU's
//    first-max and last-NaN rules are associative). Float cumsum/cumprod differ from the CPU's
//    sequential order by rounding only (docs: within the error bounds of the two orders).
#include <string>

#include "smelt/errors.h"
#include "src/backend/cuda/allocator.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/kernels.h"
#include "src/backend/cuda/sort_sources.h"
#include "src/codegen/gpu_row_order.h"

namespace smelt::cuda {

namespace {

/// The reduction whose step a scan repeats.
ReduceOp scan_reduce_op(ScanOp op) {
  switch (op) {
    case ScanOp::Sum: return ReduceOp::Sum;
    case ScanOp::Prod: return ReduceOp::Prod;
    case ScanOp::Max: return ReduceOp::Max;
    case ScanOp::Min: return ReduceOp::Min;
  }
  return ReduceOp::Sum;
}

const char* scan_op_name(ScanOp op) {
  switch (op) {
    case ScanOp::Sum: return "cumsum";
    case ScanOp::Prod: return "cumprod";
    case ScanOp::Max: return "cummax";
    case ScanOp::Min: return "cummin";
  }
  return "scan";
}

std::string scan_head(ScanOp op, Dtype in) {
  const std::string t = device_type(in);
  return "typedef " + t + " IN;\ntypedef " + codegen::gpu_red_type(scan_reduce_op(op), in) + " R;\n" +
         "typedef R::Acc Acc;\ntypedef R::Out OutT;\n" +
         "struct ScArgs { u64 in, out, partial; i64 lines, len, s_in, s_out, chunks; Layout L; };\n" +
         "__device__ inline void line_offsets(const Layout& L, i64 r, i64& io, i64& oo) {\n"
         "  io = 0; oo = 0;\n"
         "  for (int d = (int)L.nd - 1; d >= 0; --d) {\n"
         "    const i64 c = r % L.shape[d]; r /= L.shape[d];\n"
         "    io += c * L.st[0][d]; oo += c * L.st[1][d];\n"
         "  }\n"
         "}\n"
         "#define CH " + std::to_string(kScanChunk) + "\n#define PER " + std::to_string(kScanChunk / kScanThreads) +
         "\n";
}

}  // namespace

std::string scan_sequential_source(ScanOp op, Dtype in, bool exclusive) {
  const std::string step = exclusive ? "    const Acc v = R::load(x[i * a.s_in]);\n"
                                       "    y[i * a.s_out] = R::finish(acc);\n"
                                       "    acc = R::step(acc, v);\n"
                                     : "    acc = R::step(acc, R::load(x[i * a.s_in]));\n"
                                       "    y[i * a.s_out] = R::finish(acc);\n";
  return scan_head(op, in) + R"(extern "C" __global__ void k(ScArgs a) {
  const i64 t = gid();
  if (t >= a.lines) return;
  i64 io, oo;
  line_offsets(a.L, t, io, oo);
  const IN* x = (const IN*)a.in + io;
  OutT* y = (OutT*)a.out + oo;
  Acc acc = R::init();
  for (i64 i = 0; i < a.len; ++i) {
)" + step + "  }\n}\n";
}

std::string scan_tiled_source(ScanOp op, Dtype in, bool exclusive) {
  const std::string step = exclusive ? "        const Acc v = tile[t][c];\n        tile[t][c] = acc;\n"
                                       "        acc = R::step(acc, v);\n"
                                     : "        acc = R::step(acc, tile[t][c]);\n        tile[t][c] = acc;\n";
  return scan_head(op, in) + "#define TL " + std::to_string(kScanTileLines) + "\n" +
         R"(extern "C" __global__ void __launch_bounds__(TL) k(ScArgs a) {
  __shared__ Acc tile[TL][33];  // TL lines x 32 elements (+1: column walks hit distinct banks)
  __shared__ i64 lio[TL], loo[TL];
  const i64 line0 = bid() * TL;
  if (line0 >= a.lines) return;  // a grid folded into y may have extra blocks
  const int t = threadIdx.x;
  const int nl = (int)min((i64)TL, a.lines - line0);
  {
    i64 io = 0, oo = 0;
    if (t < nl) line_offsets(a.L, line0 + t, io, oo);
    lio[t] = io;
    loo[t] = oo;
  }
  const IN* x = (const IN*)a.in;
  OutT* y = (OutT*)a.out;
  Acc acc = R::init();
  for (i64 i0 = 0; i0 < a.len; i0 += 32) {
    const int w = (int)min((i64)32, a.len - i0);
    __syncthreads();
    // Coalesced: consecutive threads load consecutive elements of one line.
    for (int v = 0; v < 32; ++v) {
      const int e = v * TL + t, l = e >> 5, c = e & 31;
      if (l < nl && c < w) tile[l][c] = R::load(x[lio[l] + (i0 + c) * a.s_in]);
    }
    __syncthreads();
    if (t < nl) {
      // Thread t walks its own line in order: the CPU's sequence of operations.
      for (int c = 0; c < w; ++c) {
)" + step + R"(      }
    }
    __syncthreads();
    for (int v = 0; v < 32; ++v) {
      const int e = v * TL + t, l = e >> 5, c = e & 31;
      if (l < nl && c < w) y[loo[l] + (i0 + c) * a.s_out] = R::finish(tile[l][c]);
    }
  }
}
)";
}

std::string scan_chunk_source(ScanOp op, Dtype in, bool apply, bool exclusive) {
  std::string s = scan_head(op, in) + R"(extern "C" __global__ void __launch_bounds__(256) k(ScArgs a) {
  __shared__ Acc buf[CH];
  __shared__ Acc tot[256];
  const i64 b = bid();
  const i64 line = b / a.chunks, c0 = (b - line * a.chunks) * CH;
  if (line >= a.lines) return;  // a grid folded into y may have extra blocks
  i64 io, oo;
  line_offsets(a.L, line, io, oo);
  const IN* x = (const IN*)a.in + io;
  const int t = threadIdx.x;
  // Coalesced loads into shared memory; each thread then takes PER consecutive elements.
  for (int v = 0; v < PER; ++v) {
    const int u = v * 256 + t;
    if (c0 + u < a.len) buf[u] = R::load(x[(c0 + u) * a.s_in]);
  }
  __syncthreads();
  const int u0 = t * PER;
  Acc acc = R::init();
  for (int u = 0; u < PER; ++u)
    if (c0 + u0 + u < a.len) acc = R::step(acc, buf[u0 + u]);
  tot[t] = acc;
  __syncthreads();
  // Inclusive scan of the thread totals, always step(earlier, later).
  for (int off = 1; off < 256; off <<= 1) {
    Acc v = tot[t];
    if (t >= off) v = R::step(tot[t - off], v);
    __syncthreads();
    tot[t] = v;
    __syncthreads();
  }
)";
  if (!apply) {
    s += "  if (t == 255) ((Acc*)a.partial)[b] = tot[255];\n}\n";
    return s;
  }
  s += "  Acc run = ((const Acc*)a.partial)[b];\n"
       "  if (t > 0) run = R::step(run, tot[t - 1]);\n"
       "  for (int u = 0; u < PER; ++u) {\n"
       "    const int q = u0 + u;\n"
       "    if (c0 + q >= a.len) break;\n";
  s += exclusive ? "    const Acc v = buf[q];\n    buf[q] = run;\n    run = R::step(run, v);\n"
                 : "    run = R::step(run, buf[q]);\n    buf[q] = run;\n";
  s += R"(  }
  __syncthreads();
  OutT* y = (OutT*)a.out + oo;
  for (int v = 0; v < PER; ++v) {
    const int u = v * 256 + t;
    if (c0 + u < a.len) y[(c0 + u) * a.s_out] = R::finish(buf[u]);
  }
}
)";
  return s;
}

std::string scan_chunk_prefix_source(ScanOp op, Dtype in) {
  return scan_head(op, in) + R"(extern "C" __global__ void k(ScArgs a) {
  const i64 line = gid();
  if (line >= a.lines) return;
  Acc* p = (Acc*)a.partial + line * a.chunks;
  Acc run = R::init();
  for (i64 c = 0; c < a.chunks; ++c) {
    const Acc v = p[c];
    p[c] = run;
    run = R::step(run, v);
  }
}
)";
}

void eval_scan(const ScanParams& p, const std::vector<Array>& inputs, Array& out) {
  const Array& in = inputs[0];
  const auto& n = in.node();
  const std::string what = std::string("Scan(") + scan_op_name(p.op) + ")";
  alloc_output(out);
  const Strides& os = out.node().strides;
  const int64_t len = n.shape[p.axis];
  Shape shape;
  Strides si, so;
  int64_t lines = 1;
  for (size_t d = 0; d < n.shape.size(); ++d) {
    if (static_cast<int>(d) == p.axis) continue;
    shape.push_back(n.shape[d]);
    si.push_back(n.strides[d]);
    so.push_back(os[d]);
    lines *= n.shape[d];
  }
  if (lines == 0 || len == 0) return;
  ScanArgs a;
  a.L = collapse_layout(shape, {&si, &so}, what);
  DeviceState& s = state_of(out);
  // A reverse scan is a forward scan from the last element with negated strides.
  const int64_t s_in = n.strides[p.axis], s_out = os[p.axis];
  a.in = dptr(in) + static_cast<uint64_t>(p.reverse ? (len - 1) * s_in * static_cast<int64_t>(in.itemsize()) : 0);
  a.out = dptr(out) + static_cast<uint64_t>(p.reverse ? (len - 1) * s_out * static_cast<int64_t>(out.itemsize()) : 0);
  a.s_in = p.reverse ? -s_in : s_in;
  a.s_out = p.reverse ? -s_out : s_out;
  a.lines = lines;
  a.len = len;
  const Dtype dt = in.dtype();
  const std::string key = std::string("scan|") + scan_op_name(p.op) + "|" + dtype_name(dt) + "|" +
                          (p.exclusive ? "excl" : "incl");
  if (lines >= kScanSequentialLines || len <= kScanSequentialLen) {
    if (a.s_in == 1 || a.s_in == -1 || a.s_out == 1 || a.s_out == -1) {
      // The axis is innermost in memory: lines walked by neighbouring threads are far apart, so
      // tiles of 32 elements of kScanTileLines lines go through shared memory (coalesced).
      const Kernel fn = get_kernel(s.index, key + "|tiled",
                                   [&] { return scan_tiled_source(p.op, dt, p.exclusive); }, what);
      launch(s, fn, blocks_for(lines, kScanTileLines), static_cast<unsigned>(kScanTileLines), &a, what);
      return;
    }
    const Kernel fn = get_kernel(s.index, key + "|seq", [&] { return scan_sequential_source(p.op, dt, p.exclusive); },
                                 what);
    launch(s, fn, blocks_for(lines, 256), 256, &a, what);
    return;
  }
  a.chunks = (len + kScanChunk - 1) / kScanChunk;
  // Chunk totals and prefixes in the accumulator type (at most 8 bytes).
  BufferPtr partial = allocator(out.device()).allocate(static_cast<size_t>(lines * a.chunks) * 8);
  a.partial = reinterpret_cast<uint64_t>(partial->ptr);
  const std::string base = std::string("scan|") + scan_op_name(p.op) + "|" + dtype_name(dt);
  const Kernel reduce_fn = get_kernel(s.index, base + "|chunk_total",
                                      [&] { return scan_chunk_source(p.op, dt, false, false); }, what);
  const Kernel prefix_fn = get_kernel(s.index, base + "|chunk_prefix",
                                      [&] { return scan_chunk_prefix_source(p.op, dt); }, what);
  const Kernel apply_fn = get_kernel(s.index, key + "|chunk_apply",
                                     [&] { return scan_chunk_source(p.op, dt, true, p.exclusive); }, what);
  const uint64_t blocks = static_cast<uint64_t>(lines * a.chunks);
  launch(s, reduce_fn, blocks, kScanThreads, &a, what);
  launch(s, prefix_fn, blocks_for(lines, 256), 256, &a, what);
  launch(s, apply_fn, blocks, kScanThreads, &a, what);
}

}  // namespace smelt::cuda
