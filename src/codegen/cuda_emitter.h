// The CUDA source emitter for fused GPU kernels (built by NVRTC in src/backend/cuda).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/codegen/fused_program.h"
#include "src/codegen/kernel_params.h"

namespace smelt::codegen {

/// The device preamble's name of a dtype's element type ("float", "bf16", "i64", ...).
const char* cuda_type_name(Dtype dtype);

/// At most this many inputs plus outputs in one fused CUDA kernel (its argument struct is fixed).
inline constexpr int kCudaFusedMaxArgs = 16;

/// CUDA C++ of the kernel `k(FusedArgs)` for `program`, to be compiled after the CUDA backend's
/// device preamble (the same scalar math as the unfused GPU kernels, so results are bit-equal).
/// `layout` has one letter per input: 'c' contiguous at the output's index, 's' one broadcast
/// value, 'r' a contiguous suffix repeated along the leading axes (element i % inner: a bias or
/// a weight broadcast over rows), 'q' a contiguous prefix repeated along the trailing axes
/// (element i / inner: a per-row value broadcast over columns), with `inner` in the kernel's
/// argument a.st[input][0]; or is "strided" (inputs read through collapsed strides in the
/// output's index space).
/// Float constants are exact bit patterns behind an opaque move, so the compiler cannot fold
/// them into the math differently from the unfused kernels that read them from memory.
/// With `vectorized` (flat layouts only) each thread owns cuda_vector_width() consecutive
/// elements moved as 16-byte vectors: the caller must have checked that every 'c' and 'r' input
/// and every output is 16-byte aligned, and that every 'r' and 'q' input's inner is a multiple
/// of the vector width (a thread's vector then lies in one repeat: one 'q' value, one 'r' vector).
std::string emit_cuda_kernel(const FusedProgram& program, const std::string& layout, bool vectorized = false);

/// The flat layout letter of an input whose broadcast strides over the output's `shape` are
/// `st` (0 along broadcast axes; the input is neither the output's shape nor one value): 'r'
/// when it is a contiguous suffix of the axes repeated along the leading ones (element
/// i % inner: a bias over rows), 'q' when it is a contiguous prefix repeated along the trailing
/// ones (element i / inner: a per-row value over columns), 'm' when that block is in the middle,
/// broadcast along the leading axes too (element (i / inner) % count: a per-channel scale over
/// [N, C, H, W]; only with `count`, which gets the block's size), else 0 (the strided layout).
/// `inner` gets the product of the suffix's axes ('r') or of the broadcast trailing axes ('q', 'm').
char cuda_flat_layout(const std::vector<int64_t>& shape, const std::vector<int64_t>& st, int64_t& inner,
                      int64_t* count = nullptr);

/// CUDA C++ of the kernel `k(RowArgs)` for a row program (program.reduced_axes > 0): a warp or a
/// block per row (codegen/gpu_row_order.h, the eager Reduce's order), one pass over the row per
/// reduction (its prologue recomputed from the inputs), per-row values once, then the epilogue
/// pass writing per-element outputs. Rows split into chunks are combined in the same order as
/// the eager split kernels, by the same block.
std::string emit_cuda_row_kernel(const FusedProgram& program);

/// CUDA C++ of the kernel `k(RowArgs)` for a row program whose rows go in registers
/// (gpu_row_registers): `threads` threads share a row (GpuRowOrder::threads, a compile-time
/// constant: 32, 256 or 512) in blocks of gpu_row_register_block(threads), the reduction order of
/// emit_cuda_row_kernel, and
/// each thread's `vectors` vectors of the row (gpu_row_register_vectors) loaded once, before the
/// first pass, and read from registers by every pass and the epilogue. Any layout; the rows must
/// not be split (order.groups == 1). `exact`: every row has exactly threads * vec * vectors
/// elements (the caller checks), a compile-time n, so no vector is past the row's end.
std::string emit_cuda_row_register_kernel(const FusedProgram& program, int vectors, int threads, bool exact);

/// The register kernel for clean rows (every per-element input's rows consecutive and 16-byte
/// aligned, n a multiple of the vector, outputs 16-byte aligned; the caller checks): persistent
/// blocks (each block, or each of its warps, takes every units-th row), the same
/// order and registers, and the next row's vectors already copying into shared memory while a
/// row is computed (gpu_row_register_stage_bytes of dynamic shared memory).
std::string emit_cuda_row_pipelined_kernel(const FusedProgram& program, int vectors, int threads, bool exact);

/// The layout naming a register row kernel: "pipe<P>" (pipelined) or "regs<P>", then "x512" for
/// rows of 512 threads or "w" for warp rows (none: 256), then "e" when exact;
/// CudaFusedKernelParams::source() reads it back.
std::string register_row_layout(bool pipelined, int vectors, int threads, bool exact);

/// One fused CUDA kernel: the program, and for an element-wise program the layout and whether it
/// moves vectors (a row program's layout is "rows", or "regs<P>" / "pipe<P>" for its register
/// kernels). Its source is source() and
/// nothing else; cuda::get_kernel keys it by the whole struct (kernel_params.h).
struct CudaFusedKernelParams {
  SharedValue<FusedProgram> program;
  std::string layout;  // emit_cuda_kernel's layout, or "rows" / "regs<P>" / "pipe<P>" for a row program
  bool vectorized = false;

  bool operator==(const CudaFusedKernelParams&) const = default;
  size_t hash() const;
  /// "fused|<program hash>|<layout>[|v]": names the kernel in telemetry and launch errors.
  std::string name() const;
  std::string source() const;
};

/// Device code: to_bits/from_bits, and unpack<T>(w, j) / pack(w, j, v) moving element j of an
/// array of 32-bit words (the layout in which vectors of any dtype stay in registers).
const char* cuda_word_helpers_source();
/// Device code (after cuda_word_helpers_source): vload<T, V>(w, p) and vstore<T, V>(p, w) move V
/// elements of T between memory at p and words w with 16-, 8-, 4-, 2- or 1-byte accesses; p is
/// aligned to V * sizeof(T) bytes, or to 16 when that is more.
const char* cuda_vector_moves_source();

/// Elements per thread of the vectorized flat layout: 16 bytes of the narrowest operand moved as
/// vectors ('c' and 'r' inputs, outputs: 4 for float32, 8 for bfloat16), so every one of them
/// moves in whole 16-byte vectors.
int cuda_vector_width(const FusedProgram& program, const std::string& layout);

}  // namespace smelt::codegen
