// Dtype rules: the output dtypes of every primitive from its parameters and its inputs' dtypes.
#pragma once

#include <vector>

#include "smelt/dtype.h"
#include "src/primitives/primitive.h"

namespace smelt {

/// NumPy's accumulator dtype for sum/prod/cumsum/cumprod: bool and narrow signed integers give
/// int64, narrow unsigned give uint64, 64-bit integers and floats keep their dtype.
Dtype sum_dtype(Dtype d);

/// The dtype mean/var/std compute in: float64 for float64, else float32 (halves round once at
/// the end).
Dtype float_compute_dtype(Dtype d);

/// The output dtypes of `prim` applied to inputs of `input_dtypes`, as the ops that build the
/// primitive choose them. Full, Arange and RandomBits have no inputs to go by: Arange returns
/// `fixed` (its dtype when built); Full its value's dtype; RandomBits uint32. Throws DtypeError
/// naming the primitive when the inputs' dtypes do not fit it (a binary op's operands of two
/// dtypes, a non-bool select condition, ...).
std::vector<Dtype> infer_output_dtypes(const Primitive& prim, const std::vector<Dtype>& input_dtypes,
                                       const std::vector<Dtype>& fixed);

}  // namespace smelt
