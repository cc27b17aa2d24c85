// The CUDA source emitter for fused GPU kernels (built by NVRTC in src/backend/cuda).
#pragma once

#include <string>

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
/// value; or is "strided" (inputs read through collapsed strides in the output's index space).
/// Float constants are exact bit patterns behind an opaque move, so the compiler cannot fold
/// them into the math differently from the unfused kernels that read them from memory.
/// With `vectorized` (flat layouts only) each thread owns cuda_vector_width() consecutive
/// elements moved as 16-byte vectors: the caller must have checked that every contiguous input
/// and every output is 16-byte aligned.
std::string emit_cuda_kernel(const FusedProgram& program, const std::string& layout, bool vectorized = false);

/// CUDA C++ of the kernel `k(RowArgs)` for a row program (program.reduced_axes > 0): a warp or a
/// block per row (codegen/gpu_row_order.h, the eager Reduce's order), one pass over the row per
/// reduction (its prologue recomputed from the inputs), per-row values once, then the epilogue
/// pass writing per-element outputs. Rows split into chunks are combined in the same order as
/// the eager split kernels, by the same block.
std::string emit_cuda_row_kernel(const FusedProgram& program);

/// One fused CUDA kernel: the program, and for an element-wise program the layout and whether it
/// moves vectors (a row program has one kernel: layout "rows"). Its source is source() and
/// nothing else; cuda::get_kernel keys it by the whole struct (kernel_params.h).
struct CudaFusedKernelParams {
  SharedValue<FusedProgram> program;
  std::string layout;  // emit_cuda_kernel's layout, or "rows" for a row program
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

/// Elements per thread of the vectorized flat layout: 16 bytes of the narrowest contiguous
/// operand (4 for float32, 8 for bfloat16), so every operand moves in whole 16-byte vectors.
int cuda_vector_width(const FusedProgram& program, const std::string& layout);

}  // namespace smelt::codegen
