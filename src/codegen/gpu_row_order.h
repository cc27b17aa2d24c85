// The order in which a GPU reduction combines one row, shared by the eager CUDA Reduce kernels
// and fused CUDA row kernels (pure: no GPU needed, so the sources are testable anywhere).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "smelt/dtype.h"
#include "src/primitives/primitive.h"

namespace smelt::codegen {

struct FusedProgram;

/// How a row of n elements among `rows` rows is reduced on the GPU. Depends on the sizes only:
///  - `threads` threads share a row: a warp (32) for rows up to kGpuWarpRowMax elements, a block
///    of 512 for rows of kGpuWideRowMin or more that are not split, else a block of 256;
///  - thread `lane` takes `vec` consecutive elements (16 bytes of the reduced dtype) from
///    lo + vec * lane, then every threads * vec (ROW_VECS_FOR and ROW_VECS_AT in
///    gpu_row_order_source), combining each into its accumulator in that order;
///  - the threads' accumulators combine in a fixed tree (row_tree);
///  - few long rows split into `groups` chunks of `chunk` elements (a multiple of 4096, so of
///    every threads * vec; split rows keep 256 threads), whose results combine in order:
///    ((p0 + p1) + p2) + ...
struct GpuRowOrder {
  int64_t threads = 256;
  int64_t groups = 1;
  int64_t chunk = 0;
};

inline constexpr int64_t kGpuWarpRowMax = 2048;
inline constexpr int64_t kGpuWideRowMin = 16384;

GpuRowOrder gpu_row_order(int64_t rows, int64_t n);

/// The inputs (by index, sorted) that more than one pass of a fused CUDA row kernel reads per
/// element: the kernel copies each row of them into shared memory once (when the block's rows
/// fit) and every pass reads that copy; inputs one pass reads come from global memory there.
std::vector<int> gpu_row_cached_inputs(const FusedProgram& p);

/// The most shared memory a block of warp rows (256 / 32 rows) gives its row cache (a float32
/// row of 2048, the longest warp row, fits): larger rows read global memory in every pass, so
/// that three or more such blocks stay resident per SM. A block row may use what the device
/// allows a block (opted in: 227 KiB on sm_90).
inline constexpr int64_t kGpuWarpRowCacheMaxBytes = 64 * 1024;

/// A row program whose rows a kernel may hold in registers (emit_cuda_row_register_kernel):
/// every reduction takes `vec` elements at a time (so each pass gives a thread the same
/// elements), `inputs` (sorted) are those the reduction passes read per element, held as
/// `words` 32-bit words per vector, and at least one of them is read by more than one pass (so
/// the registers save a read). vec = 0: the program is not one.
/// `keep` (per instruction) marks the values a pass computes and keeps in registers for later
/// passes, which read them instead of recomputing them (plan_row_program_keeping): a value a
/// later pass needs whose work is more than a cast of an input or one float op (W6's float32
/// x + r for the variance and the epilogue, softmax's exp(x - max) for the division), kept only
/// when the values live at each pass boundary take no more words than the inputs do (else none
/// is kept). The register kernels keep none when the row alone takes more than
/// kGpuRowKeepWords words a thread (W5's 64: ptxas spilled at 128 registers).
struct GpuRowRegisters {
  int vec = 0;
  int words = 0;
  std::vector<int> inputs;
  std::vector<char> keep;
};
GpuRowRegisters gpu_row_registers(const FusedProgram& p);

struct RowPlan;
/// The values GpuRowRegisters::keep would mark for the passes of `plan` (plan_row_program(p,
/// false)), before the register check.
std::vector<char> gpu_row_kept_values(const FusedProgram& p, const RowPlan& plan);

/// At most this many 32-bit words of row data a thread of a block of 256 (a block row or 8 warp
/// rows) holds in registers; the rest of the thread's registers go to addresses, accumulators
/// and the epilogue's values. 48, measured on the H200 against 32: BERT-base's bias + residual +
/// LayerNorm in bfloat16 (4096 warp rows of 768, 3 inputs of 6 vectors: 36 words) took 38 us in
/// the row-cache kernel and 13.8 us in registers (14.2 us with a limit of 40); W4 and W6 (16
/// words) did not move, and 64 with power-of-two vector counts made GPT-2's LayerNorm slower
/// (8.0 -> 9.1 us).
inline constexpr int kGpuRowRegisterWords = 48;
/// Values are kept across passes (GpuRowRegisters::keep) only when the row takes at most this
/// many words a thread: kept values need registers beside it.
inline constexpr int kGpuRowKeepWords = 32;
/// The same for the 512 threads of a long row (one block an SM: 128 registers a thread), so
/// that a float32 row of 32768 (W5's softmax) stays in registers.
inline constexpr int kGpuWideRowRegisterWords = 64;

/// The block of the register kernels for rows in `order`: 512 for the long rows' 512 threads,
/// else 256 (one block row, or 8 warp rows).
int gpu_row_register_block(const GpuRowOrder& order);

/// The row length a register kernel's rows fill exactly: `threads` threads, each with `vectors`
/// vectors of `vec` elements. Rows of this length take the exact kernel (a compile-time n).
inline int64_t gpu_row_register_exact_n(int64_t threads, int vec, int vectors) {
  return threads * vec * static_cast<int64_t>(vectors);
}

/// Bytes of dynamic shared memory the pipelined register kernel stages a block's next rows in
/// (`block` threads, each with `vectors` vectors of `regs.words` words).
inline size_t gpu_row_register_stage_bytes(const GpuRowRegisters& regs, int vectors, int block) {
  return static_cast<size_t>(vectors) * static_cast<size_t>(block) * 4 * static_cast<size_t>(regs.words);
}

/// Blocks of the pipelined row kernel (persistent: block b takes units b, b + grid, ...) for
/// `needed` units of work when `resident` blocks fit on the GPU at once: as many as fit, but no
/// more than give every block the same count, ceil(needed / resident) units: 16384 rows over 528
/// resident blocks would be 31 rows a block for 512 blocks and 32 for 16, which run their last
/// row alone at the end; 512 blocks of 32 rows end together. (W4 on the H200 did not move: 76.1
/// and 76.4 us in two runs.) Which block runs a row changes no row's order, so no bits.
inline uint64_t gpu_row_persistent_grid(uint64_t needed, uint64_t resident) {
  if (resident == 0 || needed <= resident) return needed;
  const uint64_t per = (needed + resident - 1) / resident;
  return (needed + per - 1) / per;
}

/// Vectors per thread of the register kernel for rows of n elements in `order` (as many as the
/// row needs, its "regs<P>" layout), or 0 when the rows are split or their vectors do not fit in
/// kGpuRowRegisterWords (kGpuWideRowRegisterWords for 512 threads).
int gpu_row_register_vectors(const GpuRowRegisters& regs, const GpuRowOrder& order, int64_t n);

/// Elements a thread takes at a time: 16 bytes of `reduced` (the reduction's input dtype).
int gpu_row_vector(Dtype reduced);

/// The shared reduction struct (reduce_math.h) for `op` over `in`
/// ("smelt::scalar::Red<smelt::ReduceOp::Sum, float>"); Mean reduces as Sum.
std::string gpu_red_type(ReduceOp op, Dtype in);

/// Device code after the preamble: shfl_dn/shfl_0, row_tree<R>(acc, threads, shared) (and
/// row_tree_once, its order with one barrier for a tree with shared memory of its own), and the
/// ROW_VECS_FOR(b0, lo, hi, lane, threads, vec, per) loop over a thread's vectors `per` at a time
/// with ROW_VECS_AT(b0, u, threads, vec) the start of vector u, which fix the order above.
const char* gpu_row_order_source();

}  // namespace smelt::codegen
