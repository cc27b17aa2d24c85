// Declarations of the CPU kernels: one eval_<Primitive> per registry entry, defined by family.
#pragma once

#include <cstdint>
#include <vector>

#include "smelt/array.h"
#include "src/primitives/primitive.h"

namespace smelt::cpu {

// A missing definition is a link error: the registry lists every kernel the CPU must have.
#define X(name, params, nout, ...) \
  void eval_##name(const params& p, const std::vector<Array>& inputs, std::vector<Array>& outputs);
SMELT_PRIMITIVES(X)
#undef X

/// d[i] = x[i] + y[i] (y[i] + x[i] with `y_first`) for i < n, float32, through the very loop of
/// the Binary Add kernel for contiguous operands: the same instructions, so the bits of an eager
/// Add, NaN payloads included (x86 keeps the first source's NaN, and the compiler chooses which
/// operand is first). For kernels that fuse an add (Matmul's bias).
void add_f32_run(const float* x, const float* y, float* d, int64_t n, bool y_first);

enum class CpuIsa : int;  // elementwise_math.h

/// y[o] = Σ_i w[o * c + i] x[i] for o in [o0, o1): the output channels of a 1x1 convolution of
/// a 1x1 image (conv.cpp), on the kernels of `isa` (the best the CPU has at or below it). Every
/// ISA sums in the same order, so the bits are the same on all.
template <class S>
using DotRowsFn = void (*)(const S* w, const S* x, S* y, int64_t c, int64_t o0, int64_t o1);
DotRowsFn<float> dot_rows_for(CpuIsa isa);
/// The same for double (one variant, the baseline's).
DotRowsFn<double> dot_rows_f64();

/// eval_Pool with the row kernels of `isa` (the best the CPU has at or below it) for max pooling
/// in the blocked layout; every ISA gives the same bits.
void eval_pool_on_isa(const PoolParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs,
                      CpuIsa isa);

/// Coordinates [ndim, count] (int64) of the non-zero elements of an evaluated CPU array.
Array nonzero(const Array& a);

}  // namespace smelt::cpu
