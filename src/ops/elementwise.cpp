// Element-wise ops: unary and binary math, comparisons, where, clip, astype, and the operators.
#include "src/ops/op_utils.h"

namespace smelt {

Array astype(const Array& a, Dtype dtype) {
  check_valid(a, "astype");
  if (a.dtype() == dtype) return a;
  return make_array(a.shape(), dtype, a.device(), make_prim(PrimKind::Cast, CastParams{dtype}), {a});
}

Array copy(const Array& a) {
  check_valid(a, "copy");
  return make_array(a.shape(), a.dtype(), a.device(), make_prim(PrimKind::Copy, NoParams{}), {a});
}

}  // namespace smelt
