// The CPU reduction order (reduce_order.h): reduce_run gives exactly the bits of the documented
// pairwise scheme (halves down to leaves of at most 128, each leaf eight lanes, a tree over the
// lanes, then its tail), whatever loop structure computes it.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "src/backend/cpu/reduce_order.h"

namespace smelt {
namespace {

/// The scheme written as plainly as possible: one leaf at a time, recursion for the halves.
template <class T, bool kProd>
T reference(const T* p, int64_t n) {
  auto step = [](T a, T b) { return kProd ? a * b : a + b; };
  const T init = kProd ? T(1) : T(0);
  if (n < 8) {
    T a = init;
    for (int64_t i = 0; i < n; ++i) a = step(a, p[i]);
    return a;
  }
  if (n > 128) {
    const int64_t h = (n / 2) & ~int64_t(7);
    return step(reference<T, kProd>(p, h), reference<T, kProd>(p + h, n - h));
  }
  T lane[8];
  for (auto& l : lane) l = init;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lane[l] = step(lane[l], p[i + l]);
  T r = step(step(step(lane[0], lane[1]), step(lane[2], lane[3])), step(step(lane[4], lane[5]), step(lane[6], lane[7])));
  for (; i < n; ++i) r = step(r, p[i]);
  return r;
}

template <class T, ReduceOp Op>
void expect_reference_bits(uint32_t seed) {
  constexpr bool kProd = Op == ReduceOp::Prod;
  std::mt19937 gen(seed);
  // Products near 1 so that long runs neither overflow nor vanish; sums of mixed signs and
  // magnitudes, so that any change of order shows in the last bits.
  std::uniform_real_distribution<double> u(kProd ? 0.99 : -1e3, kProd ? 1.01 : 1e3);
  std::vector<int64_t> sizes;
  for (int64_t n = 0; n <= 600; ++n) sizes.push_back(n);
  for (int64_t n : {1000, 1023, 1024, 1031, 4096, 4100, 32768, 100003}) sizes.push_back(n);
  for (int64_t n : sizes) {
    std::vector<T> v(static_cast<size_t>(n));
    for (auto& x : v) x = static_cast<T>(u(gen) * (kProd ? 1.0 : std::pow(10.0, static_cast<int>(gen() % 7) - 3)));
    const T got = reduce_order::reduce_run<scalar::Red<Op, T>>(v.data(), n, 1);
    const T want = reference<T, kProd>(v.data(), n);
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    EXPECT_EQ(std::bit_cast<Bits>(got), std::bit_cast<Bits>(want))
        << "n = " << n << ": " << got << " against " << want;
  }
}

TEST(ReduceOrder, FloatSumsAndProductsFollowThePairwiseScheme) {
  expect_reference_bits<float, ReduceOp::Sum>(1);
  expect_reference_bits<double, ReduceOp::Sum>(2);
  expect_reference_bits<float, ReduceOp::Prod>(3);
  expect_reference_bits<double, ReduceOp::Prod>(4);
}

}  // namespace
}  // namespace smelt
