// The one table of element-wise op cases: every unary and binary operator, with the dtypes it
// runs on (those it accepts), the value domain where its float reference holds, that reference,
// and how a result on another device is compared with the CPU's.
//
// Read by the op tests (tests/ops/elementwise_*_test.cpp: float math against long double), by
// the harness that runs every case eagerly and compiled on every available device against the
// CPU's eager result (tests/compile/bitexact_test.cpp), and by the CUDA element-wise tests
// (tests/backend/cuda/elementwise_test.cpp). A new operator is one row here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "smelt/smelt.h"

namespace smelt::test {

/// Transcendental functions on the GPU are CUDA's libdevice ones, and on the CPU glibc's (float64)
/// or smelt's vector math (float32 and the 16-bit floats): each is within a few ulps of the exact
/// result (CUDA's documented bounds are at most 4 ulps in float32, 2 in float64; glibc's and
/// vector_math.h's at most 4), so two of them differ by at most their sum, rounded up to 16 for
/// the 16-bit floats' extra rounding. docs/cuda.md gives this bound.
inline constexpr int64_t kMathUlps = 16;

/// Where random float inputs of a case lie (its reference is accurate there); `b` for operand 2.
struct Domain {
  double lo, hi;
  double blo = 0, bhi = 0;
};

using UnaryRef = long double (*)(long double);
using BinaryRef = long double (*)(long double, long double);

struct OpCase {
  const char* name;
  int arity;  // 1 or 2
  Array (*unary)(const Array&) = nullptr;
  Array (*binary)(const Array&, const Array&) = nullptr;
  /// Compiled against eager on one device: always bit for bit. Another device against the CPU:
  /// 0 (bit for bit) or kMathUlps.
  int64_t device_ulps = 0;
  /// The float reference in long double and its domains (none: checked exactly elsewhere).
  UnaryRef ref1 = nullptr;
  BinaryRef ref2 = nullptr;
  std::vector<Domain> domains;

  Array apply(const std::vector<Array>& in) const { return arity == 1 ? unary(in[0]) : binary(in[0], in[1]); }
  /// True when the op accepts operands of `dtype` (it throws DtypeError otherwise).
  bool accepts(Dtype dtype) const {
    Array probe = zeros({1}, dtype);
    try {
      apply({probe, probe});
      return true;
    } catch (const DtypeError&) {
      return false;
    }
  }
};

namespace op_case_detail {

inline long double erfinv_reference(long double y) {
  // Bisection in long double on erf (erfc near ±1): slow and independent of the library.
  if (y == 0) return y;
  long double a = std::fabs(y), lo = 0, hi = a < 0.5L ? a : 30;  // erfinv(a) < a below 0.5
  for (int i = 0; i < 200; ++i) {
    long double mid = (lo + hi) / 2;
    bool below = a <= 0.5L ? std::erf(mid) < a : std::erfc(mid) > 1 - a;
    (below ? lo : hi) = mid;
  }
  long double x = (lo + hi) / 2;
  return y < 0 ? -x : x;
}
inline long double py_floordiv(long double a, long double b) { return std::floor(a / b); }
inline long double py_mod(long double a, long double b) { return a - b * std::floor(a / b); }

inline OpCase u(const char* name, Array (*fn)(const Array&), int64_t ulps, UnaryRef ref = nullptr, double lo = 0,
                double hi = 0) {
  OpCase c{name, 1, fn, nullptr, ulps, ref, nullptr, {}};
  if (ref) c.domains = {{lo, hi}};
  return c;
}
inline OpCase b(const char* name, Array (*fn)(const Array&, const Array&), int64_t ulps, BinaryRef ref = nullptr,
                std::vector<Domain> domains = {}) {
  return OpCase{name, 2, nullptr, fn, ulps, nullptr, ref, std::move(domains)};
}

}  // namespace op_case_detail

/// Every element-wise operator once, in the order of SMELT_UNARY_OPS then SMELT_BINARY_OPS
/// (tests check that the table covers each one).
inline const std::vector<OpCase>& op_cases() {
  using namespace op_case_detail;
  using L = long double;
  static const std::vector<OpCase> cases = {
      u("abs", [](const Array& a) { return smelt::abs(a); }, 0, [](L x) { return std::fabs(x); }, -5, 5),
      u("negative", [](const Array& a) { return smelt::negative(a); }, 0, [](L x) { return -x; }, -5, 5),
      u("sign", [](const Array& a) { return smelt::sign(a); }, 0,
        [](L x) -> L { return x > 0 ? 1 : (x < 0 ? -1 : 0); }, -5, 5),
      u("square", [](const Array& a) { return smelt::square(a); }, 0, [](L x) { return x * x; }, -5, 5),
      u("reciprocal", [](const Array& a) { return smelt::reciprocal(a); }, 0, [](L x) { return 1 / x; }, 0.2, 5),
      u("sqrt", [](const Array& a) { return smelt::sqrt(a); }, 0, [](L x) { return std::sqrt(x); }, 0, 9),
      u("rsqrt", [](const Array& a) { return smelt::rsqrt(a); }, 0, [](L x) { return 1 / std::sqrt(x); }, 0.05, 9),
      u("exp", [](const Array& a) { return smelt::exp(a); }, kMathUlps, [](L x) { return std::exp(x); }, -5, 5),
      u("exp2", [](const Array& a) { return smelt::exp2(a); }, kMathUlps, [](L x) { return std::exp2(x); }, -5, 5),
      u("expm1", [](const Array& a) { return smelt::expm1(a); }, kMathUlps, [](L x) { return std::expm1(x); }, -3, 3),
      u("log", [](const Array& a) { return smelt::log(a); }, kMathUlps, [](L x) { return std::log(x); }, 0.05, 10),
      u("log2", [](const Array& a) { return smelt::log2(a); }, kMathUlps, [](L x) { return std::log2(x); }, 0.05, 10),
      u("log10", [](const Array& a) { return smelt::log10(a); }, kMathUlps, [](L x) { return std::log10(x); }, 0.05,
        10),
      u("log1p", [](const Array& a) { return smelt::log1p(a); }, kMathUlps, [](L x) { return std::log1p(x); }, -0.9,
        5),
      u("sin", [](const Array& a) { return smelt::sin(a); }, kMathUlps, [](L x) { return std::sin(x); }, -6, 6),
      u("cos", [](const Array& a) { return smelt::cos(a); }, kMathUlps, [](L x) { return std::cos(x); }, -6, 6),
      u("tan", [](const Array& a) { return smelt::tan(a); }, kMathUlps, [](L x) { return std::tan(x); }, -1.4, 1.4),
      u("arcsin", [](const Array& a) { return smelt::arcsin(a); }, kMathUlps, [](L x) { return std::asin(x); },
        -0.99, 0.99),
      u("arccos", [](const Array& a) { return smelt::arccos(a); }, kMathUlps, [](L x) { return std::acos(x); },
        -0.99, 0.99),
      u("arctan", [](const Array& a) { return smelt::arctan(a); }, kMathUlps, [](L x) { return std::atan(x); }, -10,
        10),
      u("sinh", [](const Array& a) { return smelt::sinh(a); }, kMathUlps, [](L x) { return std::sinh(x); }, -4, 4),
      u("cosh", [](const Array& a) { return smelt::cosh(a); }, kMathUlps, [](L x) { return std::cosh(x); }, -4, 4),
      u("tanh", [](const Array& a) { return smelt::tanh(a); }, kMathUlps, [](L x) { return std::tanh(x); }, -4, 4),
      u("arcsinh", [](const Array& a) { return smelt::arcsinh(a); }, kMathUlps, [](L x) { return std::asinh(x); },
        -10, 10),
      u("arccosh", [](const Array& a) { return smelt::arccosh(a); }, kMathUlps, [](L x) { return std::acosh(x); }, 1,
        10),
      u("arctanh", [](const Array& a) { return smelt::arctanh(a); }, kMathUlps, [](L x) { return std::atanh(x); },
        -0.99, 0.99),
      u("erf", [](const Array& a) { return smelt::erf(a); }, kMathUlps, [](L x) { return std::erf(x); }, -3, 3),
      u("erfinv", [](const Array& a) { return smelt::erfinv(a); }, kMathUlps, erfinv_reference, -0.99, 0.99),
      u("sigmoid", [](const Array& a) { return smelt::sigmoid(a); }, kMathUlps,
        [](L x) { return 1 / (1 + std::exp(-x)); }, -10, 10),
      u("relu", [](const Array& a) { return smelt::relu(a); }, 0, [](L x) { return x > 0 ? x : 0.0L; }, -5, 5),
      u("floor", [](const Array& a) { return smelt::floor(a); }, 0, [](L x) { return std::floor(x); }, -10, 10),
      u("ceil", [](const Array& a) { return smelt::ceil(a); }, 0, [](L x) { return std::ceil(x); }, -10, 10),
      u("round", [](const Array& a) { return smelt::round(a); }, 0, [](L x) { return std::nearbyint(x); }, -10, 10),
      u("isnan", [](const Array& a) { return smelt::isnan(a); }, 0),
      u("isinf", [](const Array& a) { return smelt::isinf(a); }, 0),
      u("isfinite", [](const Array& a) { return smelt::isfinite(a); }, 0),
      u("logical_not", [](const Array& a) { return smelt::logical_not(a); }, 0),
      u("bitwise_not", [](const Array& a) { return smelt::bitwise_not(a); }, 0),
      b("add", [](const Array& a, const Array& y) { return smelt::add(a, y); }, 0, [](L x, L y) { return x + y; },
        {{-10, 10, -10, 10}}),
      b("subtract", [](const Array& a, const Array& y) { return smelt::subtract(a, y); }, 0,
        [](L x, L y) { return x - y; }, {{-10, 10, -10, 10}}),
      b("multiply", [](const Array& a, const Array& y) { return smelt::multiply(a, y); }, 0,
        [](L x, L y) { return x * y; }, {{-10, 10, -10, 10}}),
      // Divisors of either sign, away from zero (where the reference is exact but the result is not).
      b("divide", [](const Array& a, const Array& y) { return smelt::divide(a, y); }, 0, [](L x, L y) { return x / y; },
        {{-10, 10, 0.5, 10}, {-10, 10, -10, -0.5}}),
      b("floor_divide", [](const Array& a, const Array& y) { return smelt::floor_divide(a, y); }, 0, py_floordiv,
        {{-10, 10, 0.5, 10}, {-10, 10, -10, -0.5}}),
      b("remainder", [](const Array& a, const Array& y) { return smelt::remainder(a, y); }, 0, py_mod,
        {{-10, 10, 0.5, 10}, {-10, 10, -10, -0.5}}),
      b("fmod", [](const Array& a, const Array& y) { return smelt::fmod(a, y); }, 0,
        [](L x, L y) { return std::fmod(x, y); }, {{-10, 10, 0.5, 10}, {-10, 10, -10, -0.5}}),
      b("power", [](const Array& a, const Array& y) { return smelt::power(a, y); }, kMathUlps,
        [](L x, L y) { return std::pow(x, y); }, {{0.1, 4, -3, 3}}),
      b("maximum", [](const Array& a, const Array& y) { return smelt::maximum(a, y); }, 0,
        [](L x, L y) { return std::max(x, y); }, {{-10, 10, -10, 10}}),
      b("minimum", [](const Array& a, const Array& y) { return smelt::minimum(a, y); }, 0,
        [](L x, L y) { return std::min(x, y); }, {{-10, 10, -10, 10}}),
      b("arctan2", [](const Array& a, const Array& y) { return smelt::arctan2(a, y); }, kMathUlps,
        [](L x, L y) { return std::atan2(x, y); }, {{-10, 10, -10, 10}}),
      b("equal", [](const Array& a, const Array& y) { return smelt::equal(a, y); }, 0),
      b("not_equal", [](const Array& a, const Array& y) { return smelt::not_equal(a, y); }, 0),
      b("less", [](const Array& a, const Array& y) { return smelt::less(a, y); }, 0),
      b("less_equal", [](const Array& a, const Array& y) { return smelt::less_equal(a, y); }, 0),
      b("greater", [](const Array& a, const Array& y) { return smelt::greater(a, y); }, 0),
      b("greater_equal", [](const Array& a, const Array& y) { return smelt::greater_equal(a, y); }, 0),
      b("logical_and", [](const Array& a, const Array& y) { return smelt::logical_and(a, y); }, 0),
      b("logical_or", [](const Array& a, const Array& y) { return smelt::logical_or(a, y); }, 0),
      b("logical_xor", [](const Array& a, const Array& y) { return smelt::logical_xor(a, y); }, 0),
      b("bitwise_and", [](const Array& a, const Array& y) { return smelt::bitwise_and(a, y); }, 0),
      b("bitwise_or", [](const Array& a, const Array& y) { return smelt::bitwise_or(a, y); }, 0),
      b("bitwise_xor", [](const Array& a, const Array& y) { return smelt::bitwise_xor(a, y); }, 0),
      b("left_shift", [](const Array& a, const Array& y) { return smelt::left_shift(a, y); }, 0),
      b("right_shift", [](const Array& a, const Array& y) { return smelt::right_shift(a, y); }, 0),
  };
  return cases;
}

/// Ordinal of a float element's bits (monotonic in the value), for ulp distances; `nan` is set
/// for a NaN.
inline int64_t float_ordinal(const uint8_t* p, Dtype dtype, bool* nan) {
  uint64_t bits = 0, sign = 0, mag = 0;
  switch (size_of(dtype)) {
    case 2: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      bits = v;
      sign = bits >> 15;
      mag = bits & 0x7fff;
      *nan = dtype == float16 ? mag > 0x7c00 : mag > 0x7f80;
      break;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      bits = v;
      sign = bits >> 31;
      mag = bits & 0x7fffffffu;
      *nan = mag > 0x7f800000u;
      break;
    }
    default: {
      std::memcpy(&bits, p, 8);
      sign = bits >> 63;
      mag = bits & 0x7fffffffffffffffull;
      *nan = mag > 0x7ff0000000000000ull;
      break;
    }
  }
  return sign ? -static_cast<int64_t>(mag) : static_cast<int64_t>(mag);
}

/// Whether element `a` equals `b` (both of `dtype`) under a device comparison rule: integers and
/// bool bit for bit; floats within `ulps` (0: bit for bit), NaN matching any NaN (payloads differ
/// between devices and NumPy does not define them).
inline bool same_within_ulps(const uint8_t* a, const uint8_t* b, Dtype dtype, int64_t ulps) {
  const size_t isz = size_of(dtype);
  if (!is_floating(dtype)) return std::memcmp(a, b, isz) == 0;
  bool na = false, nb = false;
  const int64_t oa = float_ordinal(a, dtype, &na), ob = float_ordinal(b, dtype, &nb);
  if (na || nb) return na == nb;
  return (oa > ob ? oa - ob : ob - oa) <= ulps;
}

/// The cases of one arity.
inline std::vector<const OpCase*> op_cases_of_arity(int arity) {
  std::vector<const OpCase*> out;
  for (const auto& c : op_cases())
    if (c.arity == arity) out.push_back(&c);
  return out;
}

}  // namespace smelt::test
