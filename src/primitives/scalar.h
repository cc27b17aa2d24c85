// A typed scalar value: the parameter of Full, Pad and constants, compared by its exact bits.
#pragma once

#include <cstdint>
#include <string>

#include "smelt/dtype.h"

namespace smelt {

/// One value of any dtype. Floats are kept as float64 (every smelt float converts exactly),
/// integers as int64 or uint64. Equality and hashing use the bits, so NaN == NaN and -0 != +0.
struct Scalar {
  Dtype dtype = Dtype::Float32;
  union {
    double f;
    int64_t i;
    uint64_t u;
  };
  Scalar() : f(0.0) {}
  static Scalar of_float(double v, Dtype dtype = Dtype::Float64);
  static Scalar of_int(int64_t v, Dtype dtype = Dtype::Int64);
  static Scalar of_uint(uint64_t v, Dtype dtype = Dtype::UInt64);
  static Scalar of_bool(bool v);

  /// The value converted with astype's rules.
  Scalar cast(Dtype to) const;
  double as_double() const;
  int64_t as_int() const;
  /// Writes the value as one element of `dtype` (after cast) to `out`.
  void store(void* out) const;
  static Scalar load(const void* in, Dtype dtype);

  bool operator==(const Scalar& o) const;
  size_t hash() const;
  std::string str() const;
};

}  // namespace smelt
