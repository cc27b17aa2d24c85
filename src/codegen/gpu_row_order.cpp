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
  auto words_of = [&](Dtype d) { return static_cast<int>((static_cast<size_t>(regs.vec) * size_of(d) + 3) / 4); };
  for (size_t k = 0; k < read.size(); ++k)
    if (read[k]) {
      regs.inputs.push_back(static_cast<int>(k));
      regs.words += words_of(p.input_dtypes[k]);
    }
  regs.keep.assign(p.instrs.size(), 0);
  const std::vector<char> keep = gpu_row_kept_values(p, plan);
  if (std::find(keep.begin(), keep.end(), 1) == keep.end()) return regs;
  // The words live at each pass boundary with `keep`: the register inputs a pass at or after it
  // reads, and the kept values computed before it that such a pass reads.
  const RowPlan kept = plan_row_program_keeping(p, keep);
  const size_t loops = kept.loops.size(), n = p.instrs.size();
  std::vector<int> first(n, -1), last_read(n, -1);  // the pass computing a value; the last reading it
  for (size_t q = 0; q < loops; ++q) {
    const RowLoop& loop = kept.loops[q];
    auto read_by = [&](int i) { last_read[i] = std::max(last_read[i], static_cast<int>(q)); };
    for (int i : loop.compute) {
      if (first[i] < 0) first[i] = static_cast<int>(q);
      for (int o : p.instrs[i].operands) read_by(o);
    }
    if (loop.reduce >= 0) read_by(p.instrs[loop.reduce].operands[0]);
    else
      for (int o : p.outputs) read_by(o);
  }
  int peak = 0;
  for (size_t b = 0; b < loops; ++b) {
    int live = 0;
    for (size_t i = 0; i < n; ++i) {
      const Instr& in = p.instrs[i];
      if (in.per_row || last_read[i] < static_cast<int>(b)) continue;
      if (in.kind == InstrKind::Input && read[in.index]) live += words_of(in.dtype);
      else if (keep[i] && first[i] >= 0 && first[i] < static_cast<int>(b)) live += words_of(in.dtype);
    }
    peak = std::max(peak, live);
  }
  if (peak <= regs.words) regs.keep = keep;
  return regs;
}

std::vector<char> gpu_row_kept_values(const FusedProgram& p, const RowPlan& plan) {
  const size_t n = p.instrs.size();
  std::vector<char> keep(n, 0), before(n, 0);  // before: computed by an earlier pass
  for (size_t q = 0; q < plan.loops.size(); ++q) {
    const RowLoop& loop = plan.loops[q];
    if (q > 0) {
      std::vector<char> shared(n, 0);  // this pass recomputes them
      for (int i : loop.compute)
        if (before[i] && p.instrs[i].kind != InstrKind::Input && p.instrs[i].kind != InstrKind::Constant) shared[i] = 1;
      // The shared values this pass uses directly: as the operand of a value it computes anew,
      // of its reduction, or as an output (the epilogue). Each is kept, unless one instruction
      // recomputes it for less than the registers of its result: a cast of an input, or a
      // float32 add, subtract or multiply (whose shared operands are then used in its place;
      // LayerNorm's x - mean from the kept x).
      std::vector<int> work;
      auto use = [&](int i) {
        if (shared[i]) work.push_back(i);
      };
      for (int i : loop.compute)
        if (!shared[i])
          for (int o : p.instrs[i].operands) use(o);
      if (loop.reduce >= 0) use(p.instrs[loop.reduce].operands[0]);
      else
        for (int o : p.outputs)
          if (!p.instrs[o].per_row) use(o);
      while (!work.empty()) {
        const int i = work.back();
        work.pop_back();
        if (keep[i]) continue;
        const Instr& in = p.instrs[i];
        const bool cast_of_input = in.kind == InstrKind::Cast && p.instrs[in.operands[0]].kind == InstrKind::Input;
        const bool one_float_op = in.kind == InstrKind::Binary && in.dtype == float32 &&
                                  (in.binary == BinaryOp::Add || in.binary == BinaryOp::Subtract || in.binary == BinaryOp::Multiply);
        if (cast_of_input) continue;
        if (!one_float_op) {
          keep[i] = 1;
          continue;
        }
        for (int o : in.operands) use(o);
      }
    }
    for (int i : loop.compute) before[i] = 1;
  }
  return keep;
}

int gpu_row_register_block(const GpuRowOrder& order) { return order.threads == 512 ? 512 : 256; }

int gpu_row_register_vectors(const GpuRowRegisters& regs, const GpuRowOrder& order, int64_t n) {
  if (regs.vec == 0 || order.groups != 1 || order.threads > 512) return 0;
  const int64_t needed = (n + order.threads * regs.vec - 1) / (order.threads * regs.vec);
  // Exactly as many vectors as the row needs (not a power of two): rows of 768 in warps take 6,
  // a compile-time n with no guard against the row's end (GPT-2's LayerNorm: 8.0 -> 7.1 us on the
  // H200 at 4096 rows).
  const int words = order.threads == 512 ? kGpuWideRowRegisterWords : kGpuRowRegisterWords;
  return needed * regs.words <= words ? static_cast<int>(needed) : 0;
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
