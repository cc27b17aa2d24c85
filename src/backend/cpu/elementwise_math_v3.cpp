// The float32 math kernels built for x86-64-v3 (AVX2; CMake adds -march=x86-64-v3 to this file).
//
// vector_math.h is compiled here under a namespace of its own: an inline function of it that is
// not inlined becomes an AVX2 symbol no baseline code can link to.
#define SMELT_MATH_ISA isa_v3
#define SMELT_VMATH_NAMESPACE smelt::cpu::isa_v3::vmath
#include "src/backend/cpu/elementwise_math_impl.h"
