// The float32 math kernels built for x86-64-v4 (AVX-512; CMake adds -march=x86-64-v4 to this file).
//
// GCC's default for that level is 256-bit vectors, which on the CPUs measured ran these loops
// 1.3-1.6x faster than AVX2 (mask registers and the AVX-512 conversions), with no 512-bit
// frequency penalty. vector_math.h is compiled under a namespace of its own, as in
// elementwise_math_v3.cpp.
#define SMELT_MATH_ISA isa_v4
#define SMELT_VMATH_NAMESPACE smelt::cpu::isa_v4::vmath
#include "src/backend/cpu/elementwise_math_impl.h"
