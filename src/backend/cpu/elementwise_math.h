// Float32 math kernels (vector_math.h, sqrt, rsqrt, atan2) built once per x86-64 ISA, and the pick.
//
// elementwise_math_base.cpp builds them for the library's baseline ISA, elementwise_math_v3.cpp
// for x86-64-v3 (AVX2), elementwise_math_v4.cpp for x86-64-v4 (AVX-512, 256-bit vectors). All
// compute each element with the same function as scalar_math.h, so every build and the fused
// kernels give identical bits.
#pragma once

#include <cstdint>
#include <string>

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

/// The float32 arithmetic with per-ISA kernels: one instruction an element, which the baseline
/// build runs four lanes wide (a squeeze-excitation product or a ReLU between convolutions, an
/// operation no fused kernel took, ran 1.5-2x slower than the AVX-512 loop).
enum class ArithFn : int { Add, Subtract, Multiply, Divide, Maximum, Minimum, Count };

/// Eight neighbouring float32 rows summed in reduce_run's order (reduce_eight_rows.h): rows j = 0..7
/// start at p + j and step by s; `sequence`: one sequence (short rows). Writes the eight sums to
/// `out` (a GCC vector of 8 floats, by pointer: a vector argument changes the ABI with the ISA).
using EightRowsSum = void (*)(const float* p, int64_t n, int64_t s, bool sequence, void* out);

struct MathKernels {
  UnaryRun unary[static_cast<int>(MathFn::Count)];
  BinaryRun atan2;
  UnaryRun relu;
  BinaryRun arith[static_cast<int>(ArithFn::Count)];
  EightRowsSum eight_rows_sum;
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

/// The instruction sets the CPU kernels are built for, in order.
enum class CpuIsa : int { Baseline, Avx2, Avx512 };

/// "baseline", "avx2", "avx512": the names SMELT_CPU_ISA accepts.
const char* cpu_isa_name(CpuIsa isa);
/// Parses a SMELT_CPU_ISA value; anything else raises InvalidArgument listing the accepted values.
CpuIsa parse_cpu_isa(const std::string& value);
/// The best the running CPU has: Avx512 with x86-64-v4, Avx2 with x86-64-v3, else Baseline.
CpuIsa cpu_isa_supported();
/// What the kernels use: cpu_isa_supported(), capped by the environment variable SMELT_CPU_ISA
/// when it is set (read once; a cap above the CPU's level changes nothing). Lets the baseline and
/// AVX2 paths run on an AVX-512 machine, which must give the same bits (docs/arrays.md).
CpuIsa cpu_isa();

/// The kernels built for `isa`, or for the best level the CPU has below it.
const MathKernels& math_kernels_for(CpuIsa isa);
/// The kernels for cpu_isa().
const MathKernels& math_kernels();

}  // namespace smelt::cpu
