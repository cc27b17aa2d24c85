// Comparisons of whole arrays with NumPy's semantics: isclose, allclose, array_equal.
#pragma once

#include "smelt/array.h"

namespace smelt {

/// Element-wise |a - b| <= atol + rtol * |b| (NumPy's isclose, so not symmetric in a and b): a
/// lazy bool array of the broadcast shape, like any element-wise op. Infinities are close only to
/// the same infinity; NaN is close to NaN only with `equal_nan`. Compares in promote_types(a, b),
/// except that integers and bool (alone or with a float) compare as float64, and float16 and
/// bfloat16 in float32 (their values exactly, the tolerance not rounded to 16 bits). rtol and
/// atol must be finite and non-negative (InvalidArgument); shapes that do not broadcast raise
/// ShapeError.
Array isclose(const Array& a, const Array& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);
/// True when every element of isclose(a, b, ...) is (true for empty arrays). Evaluates.
bool allclose(const Array& a, const Array& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);
/// True when a and b have the same shape and equal values (1 == 1.0; an integer with a float
/// compares as float64). Different shapes give false, as in NumPy; NaN equals NaN only with
/// `equal_nan`. Evaluates.
bool array_equal(const Array& a, const Array& b, bool equal_nan = false);

}  // namespace smelt
