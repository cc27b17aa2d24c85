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

/// Coordinates [ndim, count] (int64) of the non-zero elements of an evaluated CPU array.
Array nonzero(const Array& a);

}  // namespace smelt::cpu
