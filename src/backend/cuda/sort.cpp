// CUDA kernels for Sort, ArgSort and TopK: a shared-memory bitonic sort for short rows, a stable
// LSD radix sort for long ones; results equal the CPU's exactly.
//
// The CPU's order (src/backend/cpu/sort.cpp) is a stable sort by value: ascending with every NaN
// after every number and all NaNs equal, -0 equal to +0, descending the exact reverse with ties
// still in input order; TopK takes the best k with ties by lower index. Both GPU paths sort
// (key, index) pairs where the key is an order-preserving unsigned image of the value (floats:
// the sign-flip transform after mapping -0 to +0 and every NaN to one largest key; descending:
// every key bit inverted) and ties break by index, which is exactly that stable order. Values are
// gathered from the input by the sorted indices, so they keep the input's bits (NaN payloads,
// the sign of zero).
//  - block: rows of at most kBlockSortMax elements. One block sorts R rows of P slots (P the
//    power of two >= n, padded with the largest pair) by a bitonic network in shared memory.
//  - radix: longer rows. Every element gets its key and its number g = row * n + j; 8-bit LSD
//    passes over the key, then over the row number (g / n), each pass a per-tile histogram, an
//    int64 exclusive scan of the digit-major counts and a stable scatter (warp ballots rank equal
//    digits in input order). The initial order is g's, so ties keep the lower index.
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <string>

#include "smelt/errors.h"
#include "src/backend/cuda/allocator.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/kernels.h"
#include "src/backend/cuda/sort_sources.h"

namespace smelt::cuda {

namespace {

const char* kRowOffsetsSource =
    // Input and output offsets of row r (row-major over the other axes).
    "__device__ __noinline__ void row_offsets(const Layout& L, i64 r, i64& io, i64& oo) {\n"
    "  io = 0; oo = 0;\n"
    "  for (int d = (int)L.nd - 1; d >= 0; --d) {\n"
    "    const i64 c = r % L.shape[d]; r /= L.shape[d];\n"
    "    io += c * L.st[0][d]; oo += c * L.st[1][d];\n"
    "  }\n"
    "}\n";

const char* kRadixArgsSource =
    "struct RxArgs { u64 in, keys_in, vals_in, keys_out, vals_out, hist, out_val, out_idx;\n"
    "  i64 N, n, m, rows, tiles, shift, s_axis, s_out; Layout L; };\n";

const char* unsigned_of_bytes(int bytes) {
  switch (bytes) {
    case 1: return "u8";
    case 2: return "u16";
    case 4: return "u32";
    default: return "u64";
  }
}

std::string payload_typedef(bool wide) { return std::string("typedef ") + (wide ? "u64" : "u32") + " PT;\n"; }

/// The stores of sorted position j of a row whose sorted index is `src` (input offset io,
/// output offset o).
std::string store_source(SortOutputs outputs) {
  std::string s;
  if (outputs != SortOutputs::Indices) s += "  ((BT*)a.out_val)[o] = ((const BT*)a.in)[io + src * a.s_axis];\n";
  if (outputs != SortOutputs::Values) s += "  ((i64*)a.out_idx)[o] = src;\n";
  return s;
}

const char* outputs_name(SortOutputs outputs) {
  switch (outputs) {
    case SortOutputs::Values: return "values";
    case SortOutputs::Indices: return "indices";
    case SortOutputs::Both: return "both";
  }
  return "?";
}

}  // namespace

// ---- Sources -----------------------------------------------------------------------------------

std::string sort_key_source(Dtype dtype, bool descending) {
  const std::string bt = bits_type(dtype);
  std::string body;
  auto float_key = [&](const char* mag, const char* inf, const char* sign) {
    return std::string("  KT k;\n  if ((b & ") + mag + ") > " + inf + ") k = (KT)~(KT)0;\n" +
           "  else {\n    if (b == " + sign + ") b = 0;\n    k = (b & " + sign + ") ? (KT)~b : (KT)(b | " + sign +
           ");\n  }\n";
  };
  switch (dtype) {
    case Dtype::Bool: body = "  KT k = b != 0 ? (KT)1 : (KT)0;\n"; break;
    case Dtype::UInt8:
    case Dtype::UInt16:
    case Dtype::UInt32:
    case Dtype::UInt64: body = "  KT k = b;\n"; break;
    case Dtype::Int8: body = "  KT k = (KT)(b ^ 0x80u);\n"; break;
    case Dtype::Int16: body = "  KT k = (KT)(b ^ 0x8000u);\n"; break;
    case Dtype::Int32: body = "  KT k = (KT)(b ^ 0x80000000u);\n"; break;
    case Dtype::Int64: body = "  KT k = (KT)(b ^ 0x8000000000000000ull);\n"; break;
    case Dtype::Float16: body = float_key("0x7fffu", "0x7c00u", "0x8000u"); break;
    case Dtype::BFloat16: body = float_key("0x7fffu", "0x7f80u", "0x8000u"); break;
    case Dtype::Float32: body = float_key("0x7fffffffu", "0x7f800000u", "0x80000000u"); break;
    case Dtype::Float64:
      body = float_key("0x7fffffffffffffffull", "0x7ff0000000000000ull", "0x8000000000000000ull");
      break;
  }
  return "typedef " + bt + " BT;\ntypedef " + bt + " KT;\n__device__ inline KT skey(BT b) {\n" + body +
         (descending ? "  return (KT)~k;\n" : "  return k;\n") + "}\n";
}

std::string block_sort_source(Dtype dtype, bool descending, SortOutputs outputs) {
  std::string s = sort_key_source(dtype, descending) + kRowOffsetsSource;
  s += "struct BsArgs { u64 in, out_val, out_idx; i64 rows, n, m, P, R, s_axis, s_out, row_fast; Layout L; };\n";
  s += "#define TILE " + std::to_string(kBlockSortMax) + "\n";
  s += R"(extern "C" __global__ void __launch_bounds__(1024) k(BsArgs a) {
  __shared__ KT sk[TILE];
  __shared__ u16 si[TILE];
  const BT* x = (const BT*)a.in;
  const i64 row0 = bid() * a.R;
  const int P = (int)a.P, R = (int)a.R, total = R * P;
  // Element e of the block's loads and stores: consecutive threads take consecutive elements of
  // a row, or (row_fast, when the rows are the closer ones in memory) consecutive rows.
  for (int e = threadIdx.x; e < total; e += blockDim.x) {
    const int rl = a.row_fast ? e % R : e / P, j = a.row_fast ? e / R : e % P, slot = rl * P + j;
    const i64 r = row0 + rl;
    KT key = (KT)~(KT)0;
    u16 id = 0xffffu;  // padding: after every real pair (real indices are < TILE)
    if (r < a.rows && j < a.n) {
      i64 io, oo;
      row_offsets(a.L, r, io, oo);
      key = skey(x[io + (i64)j * a.s_axis]);
      id = (u16)j;
    }
    sk[slot] = key;
    si[slot] = id;
  }
  __syncthreads();
  // Bitonic network over each row's P slots (pairs never cross rows: rows are P-aligned).
  const int half = total >> 1;
  for (int kk = 2; kk <= P; kk <<= 1) {
    for (int jj = kk >> 1; jj > 0; jj >>= 1) {
      for (int q = threadIdx.x; q < half; q += blockDim.x) {
        const int i = ((q & ~(jj - 1)) << 1) | (q & (jj - 1)), l = i + jj;
        const bool up = ((i & (P - 1)) & kk) == 0;
        const KT ka = sk[i], kb = sk[l];
        const u16 ia = si[i], ib = si[l];
        const bool gt = ka > kb || (ka == kb && ia > ib);
        if (gt == up) {
          sk[i] = kb; sk[l] = ka;
          si[i] = ib; si[l] = ia;
        }
      }
      __syncthreads();
    }
  }
  for (int e = threadIdx.x; e < total; e += blockDim.x) {
    const int rl = a.row_fast ? e % R : e / P, j = a.row_fast ? e / R : e % P;
    const i64 r = row0 + rl;
    if (r >= a.rows || j >= a.m) continue;
    i64 io, oo;
    row_offsets(a.L, r, io, oo);
    const i64 src = si[rl * P + j];
    const i64 o = oo + (i64)j * a.s_out;
)";
  s += store_source(outputs) + "  }\n}\n";
  return s;
}

std::string radix_init_source(Dtype dtype, bool descending, bool wide_payload) {
  return sort_key_source(dtype, descending) + payload_typedef(wide_payload) + kRowOffsetsSource + kRadixArgsSource +
         R"(extern "C" __global__ void k(RxArgs a) {
  const i64 g = gid();
  if (g >= a.N) return;
  const i64 r = g / a.n, j = g - r * a.n;
  i64 io, oo;
  row_offsets(a.L, r, io, oo);
  ((KT*)a.keys_out)[g] = skey(((const BT*)a.in)[io + j * a.s_axis]);
  ((PT*)a.vals_out)[g] = (PT)g;
}
)";
}

namespace {

std::string radix_digit_source(int key_bytes, bool row_pass, bool wide_payload) {
  std::string s = std::string("typedef ") + unsigned_of_bytes(key_bytes) + " KT;\n" + payload_typedef(wide_payload) +
                  kRadixArgsSource + "#define RT " + std::to_string(kRadixTile) + "\n#define RB " +
                  std::to_string(kRadixThreads) + "\n";
  if (row_pass)
    s += "__device__ inline u32 digit(const RxArgs& a, i64 e) {\n"
         "  return (u32)((((const PT*)a.vals_in)[e] / (PT)a.n) >> (int)a.shift) & 255u;\n}\n";
  else
    s += "__device__ inline u32 digit(const RxArgs& a, i64 e) {\n"
         "  return (u32)(((const KT*)a.keys_in)[e] >> (int)a.shift) & 255u;\n}\n";
  return s;
}

}  // namespace

std::string radix_hist_source(int key_bytes, bool row_pass, bool wide_payload) {
  return radix_digit_source(key_bytes, row_pass, wide_payload) +
         R"(extern "C" __global__ void __launch_bounds__(256) k(RxArgs a) {
  __shared__ u32 cnt[256];
  const i64 tile = bid();
  if (tile >= a.tiles) return;  // a grid folded into y may have extra blocks
  cnt[threadIdx.x] = 0;
  __syncthreads();
  const i64 base = tile * RT;
  for (int v = 0; v < RT / RB; ++v) {
    const i64 e = base + (i64)v * RB + threadIdx.x;
    if (e < a.N) atomicAdd(&cnt[digit(a, e)], 1u);
  }
  __syncthreads();
  ((i64*)a.hist)[(i64)threadIdx.x * a.tiles + tile] = (i64)cnt[threadIdx.x];
}
)";
}

std::string radix_scatter_source(int key_bytes, bool row_pass, bool wide_payload) {
  // Row passes move only the element numbers: the keys are not read again.
  const std::string move_key = row_pass ? "" : "      ((KT*)a.keys_out)[pos] = ((const KT*)a.keys_in)[e];\n";
  return radix_digit_source(key_bytes, row_pass, wide_payload) +
         R"(extern "C" __global__ void __launch_bounds__(256) k(RxArgs a) {
  __shared__ i64 wpos[RB / 32][256];  // per warp and digit: count, then first position
  __shared__ i64 run[256];            // per digit: the next free position of this tile
  const i64 tile = bid();
  if (tile >= a.tiles) return;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const u32 lower = (1u << lane) - 1u;
  run[threadIdx.x] = ((const i64*)a.hist)[(i64)threadIdx.x * a.tiles + tile];
  const i64 base = tile * RT;
  // Rounds of RB consecutive elements: ranks follow round, warp, lane, i.e. input order.
  for (int v = 0; v < RT / RB; ++v) {
    for (int w = 0; w < RB / 32; ++w) wpos[w][threadIdx.x] = 0;
    __syncthreads();
    const i64 e = base + (i64)v * RB + threadIdx.x;
    const bool valid = e < a.N;
    const u32 d = valid ? digit(a, e) : 0u;
    // Lanes of this warp with the same digit: intersect the ballots of the 8 digit bits.
    u32 peers = __ballot_sync(0xffffffffu, valid);
    #pragma unroll
    for (int b = 0; b < 8; ++b) {
      const bool bit = ((d >> b) & 1u) != 0;
      const u32 bal = __ballot_sync(0xffffffffu, bit);
      peers &= bit ? bal : ~bal;
    }
    const u32 rank = __popc(peers & lower);
    if (valid && rank == 0) wpos[warp][d] = __popc(peers);
    __syncthreads();
    {
      // Thread t owns digit t: counts per warp become first positions, in warp order.
      i64 s = run[threadIdx.x];
      for (int w = 0; w < RB / 32; ++w) {
        const i64 c = wpos[w][threadIdx.x];
        wpos[w][threadIdx.x] = s;
        s += c;
      }
      run[threadIdx.x] = s;
    }
    __syncthreads();
    if (valid) {
      const i64 pos = wpos[warp][d] + rank;
)" + move_key +
         R"(      ((PT*)a.vals_out)[pos] = ((const PT*)a.vals_in)[e];
    }
    __syncthreads();
  }
}
)";
}

std::string radix_finish_source(Dtype dtype, SortOutputs outputs, bool wide_payload) {
  return "typedef " + std::string(bits_type(dtype)) + " BT;\n" + payload_typedef(wide_payload) + kRowOffsetsSource +
         kRadixArgsSource + R"(extern "C" __global__ void k(RxArgs a) {
  const i64 p = gid();
  if (p >= a.N) return;
  const i64 r = p / a.n, j = p - r * a.n;
  if (j >= a.m) return;
  const i64 src = (i64)((const PT*)a.vals_in)[p] - r * a.n;
  i64 io, oo;
  row_offsets(a.L, r, io, oo);
  const i64 o = oo + j * a.s_out;
)" + store_source(outputs) +
         "}\n";
}

std::string scan_i64_block_source() {
  return "struct XsArgs { u64 data, sums; i64 n; };\n#define XC " + std::to_string(kScanI64Chunk) + "\n" +
         R"(extern "C" __global__ void __launch_bounds__(256) k(XsArgs a) {
  __shared__ i64 sh[256];
  if (bid() * XC >= a.n) return;  // a grid folded into y may have extra blocks
  i64* p = (i64*)a.data;
  const i64 base = bid() * XC + (i64)threadIdx.x * (XC / 256);
  i64 v[XC / 256];
  i64 t = 0;
  #pragma unroll
  for (int u = 0; u < XC / 256; ++u) {
    const i64 i = base + u;
    v[u] = i < a.n ? p[i] : 0;
    t += v[u];
  }
  sh[threadIdx.x] = t;
  __syncthreads();
  for (int off = 1; off < 256; off <<= 1) {
    const i64 add = threadIdx.x >= (unsigned)off ? sh[threadIdx.x - off] : 0;
    __syncthreads();
    sh[threadIdx.x] += add;
    __syncthreads();
  }
  i64 run = sh[threadIdx.x] - t;
  #pragma unroll
  for (int u = 0; u < XC / 256; ++u) {
    const i64 i = base + u;
    if (i < a.n) p[i] = run;
    run += v[u];
  }
  if (threadIdx.x == 255) ((i64*)a.sums)[bid()] = sh[255];
}
)";
}

std::string scan_i64_add_source() {
  return "struct XsArgs { u64 data, sums; i64 n; };\n#define XC " + std::to_string(kScanI64Chunk) + "\n" +
         R"(extern "C" __global__ void k(XsArgs a) {
  const i64 i = gid();
  if (i < a.n) ((i64*)a.data)[i] += ((const i64*)a.sums)[i / XC];
}
)";
}

// ---- Host side ---------------------------------------------------------------------------------

namespace {

/// Where the rows along `axis` live: `n` input elements per row, the first `m` written.
struct RowPlan {
  int64_t rows = 1, n = 0, m = 0, s_axis = 0, s_out = 0;
  Layout L;
};

RowPlan plan_rows(const Array& in, int axis, const Array& out, const std::string& what) {
  const auto& node = in.node();
  const Strides& os = out.node().strides;
  RowPlan p;
  p.n = node.shape[axis];
  p.m = out.shape()[axis];
  p.s_axis = node.strides[axis];
  p.s_out = os[axis];
  Shape shape;
  Strides si, so;
  for (size_t d = 0; d < node.shape.size(); ++d) {
    if (static_cast<int>(d) == axis) continue;
    shape.push_back(node.shape[d]);
    si.push_back(node.strides[d]);
    so.push_back(os[d]);
    p.rows *= node.shape[d];
  }
  if (p.rows > 0 && p.m > 0) p.L = collapse_layout(shape, {&si, &so}, what);
  return p;
}

/// In-place exclusive scan of `n` int64 at device address `data`: blocks scan their chunks and
/// leave their totals, which are scanned the same way (a level per factor of kScanI64Chunk) and
/// added back. Integer sums: exact in any order.
void exclusive_scan_i64(DeviceState& s, Allocator& al, uint64_t data, int64_t n, const std::string& what) {
  if (n <= 0) return;
  const Kernel scan_fn = get_kernel(s.index, "sort|xscan", [] { return scan_i64_block_source(); }, what);
  const Kernel add_fn = get_kernel(s.index, "sort|xadd", [] { return scan_i64_add_source(); }, what);
  struct Level {
    uint64_t data;
    int64_t n;
    BufferPtr sums;
  };
  std::vector<Level> levels;
  uint64_t cur = data;
  int64_t len = n;
  while (true) {
    const int64_t blocks = (len + kScanI64Chunk - 1) / kScanI64Chunk;
    BufferPtr sums = al.allocate(static_cast<size_t>(blocks) * 8);
    ScanI64Args a{cur, reinterpret_cast<uint64_t>(sums->ptr), len};
    launch(s, scan_fn, static_cast<uint64_t>(blocks), 256, &a, what);
    levels.push_back({cur, len, sums});
    if (blocks == 1) break;
    cur = reinterpret_cast<uint64_t>(sums->ptr);
    len = blocks;
  }
  for (size_t i = levels.size() - 1; i-- > 0;) {
    ScanI64Args a{levels[i].data, reinterpret_cast<uint64_t>(levels[i].sums->ptr), levels[i].n};
    launch(s, add_fn, blocks_for(levels[i].n, 256), 256, &a, what);
  }
}

/// Sorts the rows of `in` along `axis` into `values` and/or `indices` (allocated, row-major,
/// the axis `m` long).
void run_sort(const Array& in, int axis, bool descending, SortOutputs outputs, Array* values, Array* indices,
              const std::string& what) {
  const Array& ref = values ? *values : *indices;
  const RowPlan p = plan_rows(in, axis, ref, what);
  if (p.rows == 0 || p.m == 0) return;
  DeviceState& s = state_of(ref);
  const Dtype dt = in.dtype();
  const std::string order = descending ? "desc" : "asc";
  const uint64_t out_val = values ? dptr(*values) : 0, out_idx = indices ? dptr(*indices) : 0;

  if (p.n <= kBlockSortMax) {
    BlockSortArgs a;
    a.in = dptr(in);
    a.out_val = out_val;
    a.out_idx = out_idx;
    a.rows = p.rows;
    a.n = p.n;
    a.m = p.m;
    a.P = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(p.n)));
    a.R = std::min(kBlockSortMax / a.P, p.rows);
    a.s_axis = p.s_axis;
    a.s_out = p.s_out;
    a.L = p.L;
    // Rows closer in memory than the elements of a row (the axis is not the innermost): loads
    // and stores run across rows.
    const int64_t row_step = p.L.nd > 0 ? std::abs(p.L.st[0][p.L.nd - 1]) : 0;
    a.row_fast = a.R > 1 && row_step != 0 && row_step < std::abs(p.s_axis);
    const int64_t pairs = a.R * a.P / 2;
    const unsigned threads = static_cast<unsigned>(std::clamp<int64_t>((pairs + 31) / 32 * 32, 32, 1024));
    const Kernel fn = get_kernel(
        s.index, "sort|block|" + std::string(dtype_name(dt)) + "|" + order + "|" + outputs_name(outputs),
        [&] { return block_sort_source(dt, descending, outputs); }, what);
    launch(s, fn, blocks_for(p.rows, a.R), threads, &a, what);
    return;
  }

  const int64_t N = p.rows * p.n;
  const bool wide = N > 0xFFFFFFFFll;
  const std::string pt = wide ? "p64" : "p32";
  const int key_bytes = static_cast<int>(size_of(dt));
  const size_t kb = static_cast<size_t>(key_bytes), pb = wide ? 8 : 4;
  const int64_t tiles = (N + kRadixTile - 1) / kRadixTile;
  Allocator& al = allocator(ref.device());
  BufferPtr keys[2] = {al.allocate(static_cast<size_t>(N) * kb), al.allocate(static_cast<size_t>(N) * kb)};
  BufferPtr vals[2] = {al.allocate(static_cast<size_t>(N) * pb), al.allocate(static_cast<size_t>(N) * pb)};
  BufferPtr hist = al.allocate(static_cast<size_t>(tiles) * 256 * 8);
  auto addr = [](const BufferPtr& b) { return reinterpret_cast<uint64_t>(b->ptr); };

  RadixArgs a;
  a.in = dptr(in);
  a.hist = addr(hist);
  a.out_val = out_val;
  a.out_idx = out_idx;
  a.N = N;
  a.n = p.n;
  a.m = p.m;
  a.rows = p.rows;
  a.tiles = tiles;
  a.s_axis = p.s_axis;
  a.s_out = p.s_out;
  a.L = p.L;
  a.keys_out = addr(keys[0]);
  a.vals_out = addr(vals[0]);
  const Kernel init = get_kernel(
      s.index, "sort|rx_init|" + std::string(dtype_name(dt)) + "|" + order + "|" + pt,
      [&] { return radix_init_source(dt, descending, wide); }, what);
  launch(s, init, blocks_for(N, 256), 256, &a, what);

  int cur = 0;
  auto pass = [&](bool row_pass, int shift) {
    const std::string k = std::to_string(key_bytes) + (row_pass ? "|row|" : "|key|") + pt;
    const Kernel hist_fn = get_kernel(s.index, "sort|rx_hist|" + k,
                                      [&] { return radix_hist_source(key_bytes, row_pass, wide); }, what);
    const Kernel scatter_fn = get_kernel(s.index, "sort|rx_scatter|" + k,
                                         [&] { return radix_scatter_source(key_bytes, row_pass, wide); }, what);
    a.keys_in = addr(keys[cur]);
    a.vals_in = addr(vals[cur]);
    a.keys_out = addr(keys[1 - cur]);
    a.vals_out = addr(vals[1 - cur]);
    a.shift = shift;
    launch(s, hist_fn, static_cast<uint64_t>(tiles), kRadixThreads, &a, what);
    exclusive_scan_i64(s, al, a.hist, tiles * 256, what);
    launch(s, scatter_fn, static_cast<uint64_t>(tiles), kRadixThreads, &a, what);
    cur = 1 - cur;
  };
  for (int shift = 0; shift < key_bytes * 8; shift += 8) pass(false, shift);
  const int row_bits = static_cast<int>(std::bit_width(static_cast<uint64_t>(p.rows - 1)));
  for (int shift = 0; shift < row_bits; shift += 8) pass(true, shift);

  a.vals_in = addr(vals[cur]);
  const Kernel finish = get_kernel(
      s.index, "sort|rx_finish|" + std::string(bits_type(dt)) + "|" + outputs_name(outputs) + "|" + pt,
      [&] { return radix_finish_source(dt, outputs, wide); }, what);
  launch(s, finish, blocks_for(N, 256), 256, &a, what);
  // The temporaries go back to the cache now: later users run after these kernels on the stream.
}

}  // namespace

void eval_sort(const SortParams& p, const std::vector<Array>& inputs, Array& out) {
  alloc_output(out);
  run_sort(inputs[0], p.axis, p.descending, SortOutputs::Values, &out, nullptr, "Sort");
}

void eval_argsort(const SortParams& p, const std::vector<Array>& inputs, Array& out) {
  alloc_output(out);
  run_sort(inputs[0], p.axis, p.descending, SortOutputs::Indices, nullptr, &out, "ArgSort");
}

void eval_topk(const TopKParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  alloc_output(outputs[0]);
  alloc_output(outputs[1]);
  // The best k first: largest is the descending order (NaN first), smallest the ascending one.
  run_sort(inputs[0], p.axis, p.largest, SortOutputs::Both, &outputs[0], &outputs[1], "TopK");
}

}  // namespace smelt::cuda
