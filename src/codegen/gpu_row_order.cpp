// The GPU row reduction order (see gpu_row_order.h): the one definition eager and fused kernels use.
#include "src/codegen/gpu_row_order.h"

#include <algorithm>

#include "src/codegen/cuda_emitter.h"
#include "src/codegen/fused_program.h"
#include "src/codegen/row_plan.h"

namespace smelt::codegen {

GpuRowOrder gpu_row_order(int64_t rows, int64_t n) {
  GpuRowOrder o;
  o.threads = n <= kGpuWarpRowMax ? 32 : 256;
  // Few long rows leave most of the GPU idle: split them into chunks of about 32K elements
  // (at most 1024), a multiple of 4096 so that every thread's vectors stay whole.
  o.groups = 1;
  if (rows < 512 && n >= 65536) o.groups = std::min<int64_t>((n + 32767) / 32768, 1024);
  constexpr int64_t kAlign = 4096;
  const int64_t per = (n + o.groups - 1) / o.groups;
  o.chunk = std::max<int64_t>(kAlign, (per + kAlign - 1) / kAlign * kAlign);
  o.groups = std::max<int64_t>(1, (n + o.chunk - 1) / o.chunk);
  // Long rows that are not split: a block of 512 threads, so that every warp of a row's block
  // (one block an SM when its row is cached or staged) takes part in each pass, and so that a
  // row of up to 128 KiB fits in the block's registers (64 words a thread, 128 registers).
  if (o.groups == 1 && n >= kGpuWideRowMin) o.threads = 512;
  return o;
}

std::vector<int> gpu_row_cached_inputs(const FusedProgram& p) {
  const RowPlan plan = plan_row_program(p, false);
  std::vector<int> passes(p.input_dtypes.size(), 0), out;
  for (const RowLoop& loop : plan.loops) {
    std::vector<char> seen(p.input_dtypes.size(), 0);  // two Input instructions of one input: one read
    for (int i : loop.compute) {
      const Instr& in = p.instrs[i];
      if (in.kind != InstrKind::Input || in.per_row || seen[in.index]) continue;
      seen[in.index] = 1;
      ++passes[in.index];
    }
  }
  for (size_t k = 0; k < passes.size(); ++k)
    if (passes[k] > 1) out.push_back(static_cast<int>(k));
  return out;
}

GpuRowRegisters gpu_row_registers(const FusedProgram& p) {
  GpuRowRegisters regs;
  const RowPlan plan = plan_row_program(p, false);
  std::vector<char> read(p.input_dtypes.size(), 0);
  for (const RowLoop& loop : plan.loops) {
    if (loop.reduce < 0) continue;
    const int vec = gpu_row_vector(p.instrs[p.instrs[loop.reduce].operands[0]].dtype);
    if (regs.vec != 0 && regs.vec != vec) return {};
    regs.vec = vec;
    for (int i : loop.compute)
      if (p.instrs[i].kind == InstrKind::Input && !p.instrs[i].per_row) read[p.instrs[i].index] = 1;
  }
  const std::vector<int> cached = gpu_row_cached_inputs(p);
  if (regs.vec == 0 || cached.empty()) return {};
  for (size_t k = 0; k < read.size(); ++k)
    if (read[k]) {
      regs.inputs.push_back(static_cast<int>(k));
      regs.words += static_cast<int>((static_cast<size_t>(regs.vec) * size_of(p.input_dtypes[k]) + 3) / 4);
    }
  return regs;
}

int gpu_row_register_block(const GpuRowOrder& order) { return order.threads == 512 ? 512 : 256; }

int gpu_row_register_vectors(const GpuRowRegisters& regs, const GpuRowOrder& order, int64_t n) {
  if (regs.vec == 0 || order.groups != 1 || order.threads > 512) return 0;
  const int64_t needed = (n + order.threads * regs.vec - 1) / (order.threads * regs.vec);
  int vectors = 1;
  while (vectors < needed) vectors *= 2;
  const int words = order.threads == 512 ? kGpuWideRowRegisterWords : kGpuRowRegisterWords;
  return vectors * regs.words <= words ? vectors : 0;
}

int gpu_row_vector(Dtype reduced) { return static_cast<int>(16 / size_of(reduced)); }

std::string gpu_red_type(ReduceOp op, Dtype in) {
  // Mean reduces as Sum; the kernel divides by the count.
  const ReduceOp reduced = op == ReduceOp::Mean ? ReduceOp::Sum : op;
  return std::string("smelt::scalar::Red<smelt::ReduceOp::") + reduce_op_enumerator(reduced) + ", " +
         cuda_type_name(in) + ">";
}

const char* gpu_row_order_source() {
  return R"CUDA(
template <class A> __device__ inline A shfl_dn(A v, int off) {
  if constexpr (same_t<A, bool>::v) return __shfl_down_sync(0xffffffffu, (int)v, off) != 0;
  else return __shfl_down_sync(0xffffffffu, v, off);
}
template <class A> __device__ inline A shfl_0(A v) {
  if constexpr (same_t<A, bool>::v) return __shfl_sync(0xffffffffu, (int)v, 0) != 0;
  else return __shfl_sync(0xffffffffu, v, 0);
}
// The tree over a row's threads (all of them call it; `threads` is the same in the whole
// block): in each warp lanes combine pairwise at distances 16, 8, 4, 2, 1 (lane 0 ends with
// the warp's result; higher lanes compute values nobody reads); with W = threads / 32 > 1 warps,
// warp 0 then combines the W warp results at distances W / 2, ..., 1. Every thread of the row
// gets the result. A block of more threads than `threads` (a fused row kernel's wider block)
// calls it from every thread, the first `threads` holding the row's accumulators: the other
// warps' results are not read. `sh` holds at least 33 accumulators.
template <class R> __device__ typename R::Acc row_tree(typename R::Acc a, int threads, typename R::Acc* sh) {
  #pragma unroll
  for (int off = 16; off > 0; off >>= 1) a = R::step(a, shfl_dn(a, off));
  if (threads == 32) return shfl_0(a);
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = threads >> 5;
  __syncthreads();  // an earlier tree may still read sh
  if (lane == 0 && w < nw) sh[w] = a;
  __syncthreads();
  if (w == 0) {
    a = sh[lane < nw ? lane : 0];
    for (int off = nw >> 1; off > 0; off >>= 1) a = R::step(a, shfl_dn(a, off));
    if (lane == 0) sh[nw] = a;
  }
  __syncthreads();
  return sh[nw];
}
// row_tree's order with one barrier, for a block of exactly `threads` threads: every warp
// combines the warp results itself, the same values in the same order as warp 0 does in
// row_tree, so the same bits. `sh` (threads / 32 accumulators) must belong to this tree alone:
// no barrier guards its reuse.
template <class R> __device__ typename R::Acc row_tree_once(typename R::Acc a, int threads, typename R::Acc* sh) {
  #pragma unroll
  for (int off = 16; off > 0; off >>= 1) a = R::step(a, shfl_dn(a, off));
  if (threads == 32) return shfl_0(a);
  const int lane = threadIdx.x & 31, nw = threads >> 5;
  if (lane == 0) sh[threadIdx.x >> 5] = a;
  __syncthreads();
  a = sh[lane < nw ? lane : 0];
  for (int off = nw >> 1; off > 0; off >>= 1) a = R::step(a, shfl_dn(a, off));
  return shfl_0(a);
}
// The vectors of [lo, hi) that thread `lane` of `threads` combines, in order: `vec` consecutive
// elements from lo + vec * lane, then every threads * vec, each vector's elements in order.
// ROW_VECS_FOR walks them `per` at a time: vector u (0 to per - 1) of a step starts at
// ROW_VECS_AT(b0, u, threads, vec). A kernel may load a step's vectors first, then combines them
// in order, stopping at the first that starts at or past hi (a partial last vector's elements
// stop at hi).
#define ROW_VECS_FOR(b0, lo, hi, lane, threads, vec, per) \
  for (i64 b0 = (lo) + (i64)(lane) * (vec); b0 < (hi); b0 += (i64)(per) * (i64)(threads) * (vec))
#define ROW_VECS_AT(b0, u, threads, vec) ((b0) + (i64)(u) * (i64)(threads) * (vec))
)CUDA";
}

}  // namespace smelt::codegen
