// Source text embedded into the library at build time, pasted in front of generated kernels.
#pragma once

namespace smelt::codegen {

/// half.h, convert.h, vector_math.h, scalar_math.h, reduce_op.h, reduce_math.h and reduce_order.h
/// as one self-contained block of C++ (their smelt includes removed), so that fused kernels
/// compute with exactly the functions the CPU kernels use. The list is SMELT_EMBED_INPUTS in
/// CMakeLists.txt.
const char* embedded_kernel_preamble();

/// device_std.h, scalar_math.h, reduce_op.h and reduce_math.h for NVRTC (no #include lines): the
/// scalar math of every CUDA kernel (cuda::device_preamble), the CPU's own source. The list is
/// SMELT_EMBED_CUDA_INPUTS in CMakeLists.txt.
const char* embedded_cuda_scalar_math();

}  // namespace smelt::codegen
