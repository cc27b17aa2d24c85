// Float32 math kernels (vector_math.h, sqrt, rsqrt, atan2) built once per x86-64 ISA, and the pick.
//
// elementwise_math_base.cpp builds them for the library's baseline ISA, elementwise_math_v3.cpp
// for x86-64-v3 (AVX2), elementwise_math_v4.cpp for x86-64-v4 (AVX-512, 256-bit vectors). All
// compute each element with the same function as scalar_math.h, so every build and the fused
// kernels give identical bits.
#pragma once

#include <cstdint>

namespace smelt::cpu {

/// d[i] = f(s[i*st]) for i < n, into contiguous `d` (which may be `s` itself).
using UnaryRun = void (*)(const void* s, int64_t st, void* d, int64_t n);
/// d[i] = f(x[i*xs], y[i*ys]) for i < n, into contiguous `d`.
using BinaryRun = void (*)(const void* x, int64_t xs, const void* y, int64_t ys, void* d, int64_t n);

/// The float32 unary functions that have per-ISA kernels.
enum class MathFn : int {
  Sqrt,
  Rsqrt,
  Exp,
  Exp2,
  Expm1,
  Log,
  Log2,
  Log10,
  Log1p,
  Sin,
  Cos,
  Tan,
  Asin,
  Acos,
  Atan,
  Sinh,
  Cosh,
  Tanh,
  Erf,
  Sigmoid,
  Count
};

struct MathKernels {
  UnaryRun unary[static_cast<int>(MathFn::Count)];
  BinaryRun atan2;
};

namespace isa_base {
const MathKernels& math_kernels();
}
namespace isa_v3 {
/// Only to be called on a CPU with x86-64-v3 (see has_isa_v3()).
const MathKernels& math_kernels();
}
namespace isa_v4 {
/// Only to be called on a CPU with x86-64-v4 (see has_isa_v4()).
const MathKernels& math_kernels();
}

/// Whether the running CPU has x86-64-v3 (AVX2, FMA, ...).
bool has_isa_v3();
/// Whether the running CPU has x86-64-v4 (AVX-512 F, BW, CD, DQ, VL).
bool has_isa_v4();

/// The kernels for the running CPU: x86-64-v4, else x86-64-v3 where it has it, else the baseline.
const MathKernels& math_kernels();

}  // namespace smelt::cpu
