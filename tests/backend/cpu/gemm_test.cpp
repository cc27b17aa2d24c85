// The tiled CPU GEMM: tiles fixed by the shapes, the same bits at any thread count, within the
// float rounding bound of a float64 reference.
#include "src/backend/cpu/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "smelt/memory.h"
#include "test_utils.h"

// OpenBLAS's, when smelt links it (null otherwise: the portable GEMM).
extern "C" int openblas_get_num_threads(void) __attribute__((weak));

namespace smelt {
namespace {

using cpu::GemmArgs;
using cpu::GemmTiles;

struct Case {
  bool ta, tb;
  int64_t m, n, k;
};

std::string describe(const Case& c) {
  return std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) + (c.ta ? " A^T" : "") +
         (c.tb ? " B^T" : "");
}

// Products around and past the tiling threshold: square, transformer-like (few rows, wide),
// tall and narrow, a vector times a matrix, edges that are not multiples
// of the tile sides, transposed operands.
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {false, false, 512, 512, 512}, {false, false, 256, 512, 128}, {false, true, 32, 1000, 128},
      {true, false, 300, 311, 257},  {true, true, 129, 700, 65},    {false, false, 5000, 64, 64},
      {false, false, 1, 8192, 1024}, {false, false, 7, 9, 11},    {false, false, 32, 384, 128},
      {false, true, 48, 130, 200},   {false, false, 96, 40, 300},  {false, false, 197, 768, 768},
  };
  return c;
}

template <class S>
std::vector<S> random_values(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<S> v(n);
  for (auto& x : v) x = static_cast<S>(u(gen));
  return v;
}

/// A, B stored for `c` (transposed when asked), and C = op(A) op(B) through cpu::gemm.
template <class S>
struct Product {
  Case c;
  std::vector<S> a, b;
  Product(const Case& cs, uint32_t seed)
      : c(cs),
        a(random_values<S>(static_cast<size_t>(cs.m * cs.k), seed)),
        b(random_values<S>(static_cast<size_t>(cs.k * cs.n), seed + 1)) {}
  S at_a(int64_t i, int64_t p) const { return c.ta ? a[p * c.m + i] : a[i * c.k + p]; }
  S at_b(int64_t p, int64_t j) const { return c.tb ? b[j * c.k + p] : b[p * c.n + j]; }
  std::vector<S> run() const {
    std::vector<S> out(static_cast<size_t>(c.m * c.n), S(-7));  // beta = 0: the -7s are overwritten
    GemmArgs<S> g;
    g.trans_a = c.ta;
    g.trans_b = c.tb;
    g.m = c.m;
    g.n = c.n;
    g.k = c.k;
    g.a = a.data();
    g.lda = c.ta ? c.m : c.k;
    g.b = b.data();
    g.ldb = c.tb ? c.k : c.n;
    g.c = out.data();
    g.ldc = c.n;
    cpu::gemm<S>(g);
    return out;
  }
};

// First in this file, so that it also runs first when the binary runs whole: OpenBLAS's pthread
// build starts a worker per core (or per OPENBLAS_NUM_THREADS) when it loads, each spinning for
// about 0.1 s, and smelt, loading after it, stops them (gemm.cpp). Under ctest each test is a
// process of its own, so at this point nothing has started a thread of smelt's: the process has
// its main thread only. (On a one-core machine OpenBLAS starts no worker: nothing to see.)
TEST(Gemm, OpenBlasWorkersAreStoppedWhenSmeltLoads) {
  if (openblas_get_num_threads == nullptr) GTEST_SKIP() << "built with the portable GEMM";
  if (!std::filesystem::exists("/proc/self/task")) GTEST_SKIP() << "no /proc/self/task";
  EXPECT_EQ(openblas_get_num_threads(), 1);
  size_t threads = 0;
  for ([[maybe_unused]] const auto& t : std::filesystem::directory_iterator("/proc/self/task")) ++threads;
  EXPECT_EQ(threads, 1u) << "threads besides the main one: OpenBLAS's workers still run";
}

TEST(GemmTiles, CoverTheOutputAndFollowTheShapesOnly) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(describe(c));
    const GemmTiles t = cpu::gemm_tiles(c.m, c.n, c.k);
    EXPECT_GE(t.rows * t.tile_m, c.m);
    EXPECT_LT((t.rows - 1) * t.tile_m, c.m);
    EXPECT_GE(t.cols * t.tile_n, c.n);
    EXPECT_LT((t.cols - 1) * t.tile_n, c.n);
    const int saved = cpu_threads();
    for (int threads : {1, 3}) {
      set_cpu_threads(threads);
      const GemmTiles u = cpu::gemm_tiles(c.m, c.n, c.k);
      EXPECT_EQ(u.tile_m, t.tile_m);
      EXPECT_EQ(u.tile_n, t.tile_n);
    }
    set_cpu_threads(saved);
  }
  // Small products are one call; large ones are cut, so that the pool has work to spread.
  EXPECT_EQ(cpu::gemm_tiles(64, 64, 64).count(), 1);
  EXPECT_EQ(cpu::gemm_tiles(7, 9, 11).count(), 1);
  EXPECT_GE(cpu::gemm_tiles(512, 512, 512).count(), 8);
  EXPECT_GE(cpu::gemm_tiles(256, 512, 128).count(), 4);
  EXPECT_GE(cpu::gemm_tiles(1, 16384, 1024).count(), 4);
  // Products of a few hundred thousand multiply-adds (batch-1 transformer layers) are shared too.
  EXPECT_GE(cpu::gemm_tiles(32, 384, 128).count(), 4);
  EXPECT_GE(cpu::gemm_tiles(32, 128, 512).count(), 2);
  // So are larger ones that the minimum tile sides would leave whole (a small model's
  // projections: 128 x 256 x 256 and the MLP's 128 x 1024 x 256 were one tile each).
  EXPECT_GE(cpu::gemm_tiles(128, 256, 256).count(), 4);
  EXPECT_GE(cpu::gemm_tiles(128, 256, 1024).count(), 4);
  EXPECT_GE(cpu::gemm_tiles(197, 192, 768).count(), 4);
  // A little more than one minimum tile of rows (ViT-B's 197 tokens) keeps whole rows, in a
  // multiple of four column tiles.
  for (int64_t n : {768, 2304, 3072}) {
    const GemmTiles t = cpu::gemm_tiles(197, n, 768);
    EXPECT_EQ(t.tile_m, 197) << n;
    EXPECT_EQ(t.cols % 4, 0) << n;
    EXPECT_LE(t.tile_n, 256) << n;
  }
  // Vector-matrix products (a decode step's 1 x 256 x 1024, 1 x 1024 x 256, 1 x 256 x 768) read a
  // weight per multiply-add: cut like products of 16 rows, not left to one thread.
  EXPECT_GE(cpu::gemm_tiles(1, 1024, 256).count(), 4);
  EXPECT_GE(cpu::gemm_tiles(1, 256, 1024).count(), 4);
  EXPECT_GE(cpu::gemm_tiles(1, 768, 256).count(), 4);
  EXPECT_GE(cpu::gemm_tiles(2, 768, 256).count(), 4);
  // Huge sizes do not overflow the work estimate.
  const GemmTiles huge = cpu::gemm_tiles(int64_t{1} << 30, int64_t{1} << 30, int64_t{1} << 30);
  EXPECT_GT(huge.count(), 1);
  EXPECT_GE(huge.tile_m, 1);
}

template <class S>
void expect_same_bits_at_any_thread_count() {
  const int saved = cpu_threads();
  uint32_t seed = 10;
  for (const Case& c : cases()) {
    SCOPED_TRACE(describe(c));
    Product<S> p(c, seed += 2);
    set_cpu_threads(1);
    const std::vector<S> one = p.run();
    for (int threads : {2, 3, 5}) {
      set_cpu_threads(threads);
      const std::vector<S> many = p.run();
      EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(S)), 0) << threads << " threads";
    }
  }
  set_cpu_threads(saved);
}

TEST(Gemm, Float32SameBitsAtAnyThreadCount) { expect_same_bits_at_any_thread_count<float>(); }
TEST(Gemm, Float64SameBitsAtAnyThreadCount) { expect_same_bits_at_any_thread_count<double>(); }

/// Every element within the bound for a dot product of length k in precision u, whatever the
/// order of the sum and with or without fused multiply-adds (Higham, Accuracy and Stability of
/// Numerical Algorithms, 3.1): |c - exact| <= gamma_k * sum |a||b|, gamma_k = k u / (1 - k u).
template <class S>
void expect_within_bound() {
  const double u = std::ldexp(1.0, -std::numeric_limits<S>::digits);
  uint32_t seed = 40;
  for (const Case& c : cases()) {
    SCOPED_TRACE(describe(c));
    Product<S> p(c, seed += 2);
    const std::vector<S> got = p.run();
    const double gamma = static_cast<double>(c.k) * u / (1.0 - static_cast<double>(c.k) * u);
    int64_t bad = 0;
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        long double exact = 0, mag = 0;
        for (int64_t q = 0; q < c.k; ++q) {
          const long double x = p.at_a(i, q), y = p.at_b(q, j);
          exact += x * y;
          mag += std::fabs(x * y);
        }
        const double err = std::fabs(static_cast<double>(got[i * c.n + j] - exact));
        if (err > gamma * static_cast<double>(mag) && bad++ < 3)
          ADD_FAILURE() << "C[" << i << "," << j << "] = " << got[i * c.n + j] << ", exact "
                        << static_cast<double>(exact) << ", error " << err << " > bound "
                        << gamma * static_cast<double>(mag);
      }
    }
  }
}

TEST(Gemm, Float32WithinTheRoundingBound) { expect_within_bound<float>(); }
TEST(Gemm, Float64WithinTheRoundingBound) { expect_within_bound<double>(); }

}  // namespace
}  // namespace smelt
