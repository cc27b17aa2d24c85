// Declarations of the CPU kernels: one eval_<Primitive> per registry entry, defined by family.
#pragma once

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

/// Coordinates [ndim, count] (int64) of the non-zero elements of an evaluated CPU array.
Array nonzero(const Array& a);

}  // namespace smelt::cpu
