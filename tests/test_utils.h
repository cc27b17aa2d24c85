// Shared test helpers: random inputs, float64 references, bitwise and tolerance comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "smelt/smelt.h"

namespace smelt::test {

/// Deterministic random doubles in [lo, hi).
std::vector<double> random_values(size_t n, double lo = -3.0, double hi = 3.0, uint32_t seed = 0);
/// An array of `shape` and `dtype` from random values in [lo, hi) (integers rounded).
Array random_array(const Shape& shape, Dtype dtype, double lo = -3.0, double hi = 3.0, uint32_t seed = 0);
/// All elements as float64 (evaluates).
std::vector<double> as_doubles(Array a);
/// Raw bytes of the row-major data (evaluates).
std::vector<uint8_t> raw_bytes(Array a);

/// Compares every element with `expected` within rtol/atol; NaN matches NaN, inf matches inf.
::testing::AssertionResult all_close(Array actual, const std::vector<double>& expected, double rtol = 1e-6,
                                     double atol = 1e-6);
/// Same shape, dtype, and bit-identical data.
::testing::AssertionResult bit_equal(Array actual, Array expected);

/// The relative tolerance that fits a dtype's precision (a few ulps).
double tolerance_for(Dtype dtype);

}  // namespace smelt::test

/// Checks that `stmt` throws `type` and that the message contains `substring`.
#define EXPECT_THROW_MSG(stmt, type, substring)                                            \
  do {                                                                                     \
    try {                                                                                  \
      stmt;                                                                                \
      ADD_FAILURE() << "expected " #type " from: " #stmt;                                  \
    } catch (const type& e) {                                                              \
      EXPECT_NE(std::string(e.what()).find(substring), std::string::npos)                  \
          << "message: " << e.what() << "\nexpected to contain: " << (substring);          \
    } catch (const std::exception& e) {                                                    \
      ADD_FAILURE() << "expected " #type ", got another exception: " << e.what();          \
    }                                                                                      \
  } while (0)
