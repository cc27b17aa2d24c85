// Source text embedded into the library at build time, pasted in front of generated kernels.
#pragma once

namespace smelt::codegen {

/// half.h, convert.h, vector_math.h and scalar_math.h as one self-contained block of C++ (their
/// smelt includes removed), so that fused kernels compute with exactly the functions the CPU
/// kernels use. The list is SMELT_EMBED_INPUTS in CMakeLists.txt.
const char* embedded_kernel_preamble();

}  // namespace smelt::codegen
