// Printing arrays and dtypes: NumPy's repr with explicit print options.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "smelt/array.h"
#include "smelt/dtype.h"

namespace smelt {

/// How to_string lays out an array: NumPy's print options, passed explicitly (there is no
/// process-wide setting). `std::cout << a` and `a.to_string()` use the defaults.
struct PrintOptions {
  /// Fractional digits at most: a float prints the fewest digits that read back as the same
  /// value of its dtype, cut at `precision` (NumPy's floatmode "maxprec"). 0 to 17.
  int precision = 8;
  /// Arrays of more elements print summarized: `edgeitems` entries at each end of an axis, and
  /// the shape.
  int64_t threshold = 1000;
  int64_t edgeitems = 3;
  /// Characters per line before the elements of a row wrap onto the next line.
  int linewidth = 75;
  /// True: never switch to scientific notation because of tiny values (they print as 0.).
  bool suppress = false;
};

/// NumPy's repr, one row per line: `array([[1., 2.],\n       [3., 4.]], dtype=float32)`, elements
/// aligned, large arrays summarized with `...`; unlike NumPy the dtype is always written.
/// Evaluates `a` (copying it to the host first when it lives on a GPU). The options have no
/// default here, so that `to_string(5)` in namespace smelt cannot turn an int into an Array's
/// text; a.to_string() and `<<` use the defaults.
std::string to_string(const Array& a, const PrintOptions& options);

/// Writes dtype_name(dtype), so `std::cout << a.dtype()` prints "float32".
std::ostream& operator<<(std::ostream& os, Dtype dtype);

}  // namespace smelt
