// Float/double GEMM in output tiles fixed by the shapes, each one single-threaded BLAS call (gemm.h).
#include "src/backend/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "smelt/errors.h"
#include "src/backend/cpu/dnnl.h"
#include "src/backend/cpu/kernels.h"
#include "src/core/thread_pool.h"

namespace smelt::cpu {

namespace {

/// Multiply-adds a tile aims at once a product is cut (products up to twice this are one call).
/// Each call packs its own panels of A and B, so smaller tiles repack more: single-threaded,
/// 64 x 128 tiles of a [512,512]x[512,512] product cost 20-70% more than one call with
/// OpenBLAS's SkylakeX and Haswell kernels, 128 x 256 tiles 5-15%, 256 x 256 about nothing.
constexpr int64_t kTileWork = int64_t{1} << 21;
/// The smallest tile sides once a product is cut; multiples of the x86 GEMM micro-kernels'
/// register blocks, so that the cuts add no edge kernels of their own (speed only: the bits are
/// fixed by the cut whatever it is).
constexpr int64_t kMinTileM = 128, kMinTileN = 256, kAlign = 16;
/// Products with at most this many columns keep whole rows in a tile.
constexpr int64_t kWholeRowsN = 256;
/// Products of kSmallWork to 2 * kTileWork multiply-adds (a transformer's projections at batch 1:
/// 32 x 128 x 384) are cut into up to kSmallTiles tiles of at least kSmallWork each, so that the
/// pool shares them (one call would leave every other thread idle), cutting columns first, in
/// multiples of kAlign at least kSmallTileN wide (repacking the small A panel costs little), then
/// rows in multiples of kAlign. One thread of oneDNN's sgemm does 2^18 multiply-adds in ~5-10 µs:
/// below that a second thread's wake-up costs as much as it saves. kSmallTileN 48, not 64:
/// ViT-small's 197 x 192 x 192 products became 4 tiles of 197 x 48 instead of 6 uneven ones of
/// 112 and 85 x 64 (A packed three times): 45 -> 40 us each on 2 threads (AMD EPYC), the model 6%
/// faster; BERT, GPT-2 and the bundled transformer did not move.
constexpr int64_t kSmallWork = int64_t{1} << 18, kSmallTiles = 8, kSmallTileN = 48;
/// Larger products that the minimum tile sides would leave in fewer tiles than this are cut into
/// this many the same way. Four, not kSmallTiles: 128 x 64 tiles of a 128 x 256 x 256 product kept
/// one thread's speed (64 x 64 tiles cost it 10-20%) and gave two threads 1.2-1.6x one tile's.
constexpr int64_t kSplitTiles = 4;
/// Products of fewer rows than this (a decode step's vector-matrix products) are bound by reading
/// B, one weight per multiply-add, not by the multiply-adds: a thread streams B at ~1/16 of its
/// multiply-add rate, so a product of m < kFewRows rows is cut as if it had kFewRows. A GPT-2
/// decode step's 1 x 256 x 1024 projections (1 MiB of weights, 30-50 us on one thread) ran on one
/// thread while the other waited.
constexpr int64_t kFewRows = 16;

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

int blas_int(int64_t v) {
  SMELT_ASSERT(v >= 0 && v <= INT_MAX, "gemm: a GEMM dimension exceeds the BLAS integer range");
  return static_cast<int>(v);
}

/// op(X) of `rows` x `cols` (X stored transposed when `trans`) as a pointer to row-major data
/// with its leading dimension: X itself, or, transposed, a copy in `buffer`.
template <class S>
const S* row_major(bool trans, const S* x, int64_t& ld, int64_t rows, int64_t cols, std::vector<S>& buffer) {
  if (!trans) return x;
  buffer.resize(static_cast<size_t>(rows * cols));
  for (int64_t p = 0; p < cols; ++p)
    for (int64_t i = 0; i < rows; ++i) buffer[static_cast<size_t>(i * cols + p)] = x[p * ld + i];
  ld = cols;
  return buffer.data();
}

template <class S>
void blas_call(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const S* a, int64_t lda, const S* b, int64_t ldb,
               S* c, int64_t ldc) {
  // Both libraries' kernels for transposed operands sum in another order than those for plain
  // ones (oneDNN's sgemm; OpenBLAS's SkylakeX and Cooperlake dgemm), so a transposed operand is
  // copied to row-major first and every call is a plain one: a product's bits do not depend on
  // how its operands are stored (a transposed view or a copy; tests/ops/linalg_test.cpp).
  thread_local std::vector<S> a_rows, b_rows;
  a = row_major(ta, a, lda, m, k, a_rows);
  b = row_major(tb, b, ldb, k, n, b_rows);
  if constexpr (std::is_same_v<S, float>) {
    // oneDNN's sgemm picks its kernels from the CPU's instruction set; Debian's OpenBLAS falls
    // back to generic kernels on CPUs it does not know (docs/cpu-kernels.md).
    if (dnnl_enabled()) {
      dnnl_sgemm_1thread(false, false, m, n, k, a, lda, b, ldb, c, ldc);
      return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas_int(m), blas_int(n), blas_int(k), 1.0f, a, blas_int(lda), b,
                blas_int(ldb), 0.0f, c, blas_int(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas_int(m), blas_int(n), blas_int(k), 1.0, a, blas_int(lda), b,
                blas_int(ldb), 0.0, c, blas_int(ldc));
  }
}

}  // namespace

GemmTiles gemm_tiles(int64_t m, int64_t n, int64_t k) {
  GemmTiles t;
  const int64_t k1 = std::max<int64_t>(1, k);
  m = std::max<int64_t>(1, m);
  n = std::max<int64_t>(1, n);
  t.tile_m = m;
  t.tile_n = n;
  // In double: m * n * k can pass 2^63 for sizes BLAS accepts.
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k1);
  // About `want` tiles: columns first, in multiples of kAlign (at least kSmallTileN), then rows in
  // multiples of kAlign (as many row cuts as fit in `want` with at_least false, enough to reach it
  // with true).
  auto cut_small = [&](int64_t want, bool at_least) {
    t.tile_m = m;
    t.tile_n = std::min(n, std::max(kSmallTileN, round_up((n + want - 1) / want, kAlign)));
    const int64_t cols = (n + t.tile_n - 1) / t.tile_n;
    if (cols < want) {
      const int64_t rows_wanted = at_least ? (want + cols - 1) / cols : want / cols;
      t.tile_m = std::min(m, std::max(kAlign, round_up((m + rows_wanted - 1) / rows_wanted, kAlign)));
    }
  };
  const double paced = work * std::max(1.0, static_cast<double>(kFewRows) / static_cast<double>(m));
  if (paced >= 2.0 * kSmallWork && work <= 2.0 * kTileWork) {
    cut_small(static_cast<int64_t>(std::min<double>(kSmallTiles, paced / kSmallWork)), false);
  } else if (work > 2.0 * kTileWork) {
    t.tile_n = n <= kWholeRowsN ? n : kMinTileN;
    t.tile_m = std::min(m, std::max(kMinTileM, round_up((kTileWork + t.tile_n * k1 - 1) / (t.tile_n * k1), kAlign)));
    // A little more than one minimum tile of rows (ViT's 197 tokens) would leave a ragged second
    // row of tiles, and every column panel of B packed twice: whole rows instead, in a multiple
    // of kSplitTiles column tiles of at most kMinTileN. ViT-B's 197 x 768 x 2304 and
    // 197 x 768 x 3072 products, 2 threads: 102-120 -> 108-157 GFLOP/s (interleaved).
    if (m > kMinTileM && m <= 2 * kMinTileM && n > kWholeRowsN) {
      const int64_t tiles = round_up((n + kMinTileN - 1) / kMinTileN, kSplitTiles);
      t.tile_m = m;
      t.tile_n = round_up((n + tiles - 1) / tiles, kAlign);
    }
    // Few rows (a vector-matrix product, a short sequence): wider tiles instead of tiny ones.
    if (t.tile_m == m && t.tile_n < n)
      t.tile_n = std::min(n, std::max(t.tile_n, round_up((kTileWork + m * k1 - 1) / (m * k1), kAlign)));
    // A product the minimum tile sides leave in fewer than kSplitTiles tiles (a small model's
    // projections: 128 x 256 x 256 and 128 x 1024 x 256 were one tile each) is cut as the small
    // ones are, so that it does not run on one thread while the others wait.
    if (((m + t.tile_m - 1) / t.tile_m) * ((n + t.tile_n - 1) / t.tile_n) < kSplitTiles) cut_small(kSplitTiles, true);
  }
  t.rows = (m + t.tile_m - 1) / t.tile_m;
  t.cols = (n + t.tile_n - 1) / t.tile_n;
  return t;
}

bool gemm_b_panels(int64_t m, int64_t n, int64_t k) {
  // Up to 2^24 elements: GPT-2's 154 MB tied embedding streamed at ~50 GB/s either way, and a copy
  // of it would cost the first call its fresh pages (as for matmul_pack, docs/cpu-kernels.md).
  constexpr int64_t kMaxPanelB = int64_t{1} << 24;
  return m >= 1 && m < kFewRows && k > 1 && n * k <= kMaxPanelB && gemm_tiles(m, n, k).cols > 1;
}

void gemm_pack_b_panels(int64_t m, int64_t n, int64_t k, const float* b, int64_t rs, int64_t cs, float* dst) {
  // Panels over the pool: most of the time goes to the destination's first-touch page faults.
  const int64_t tn = gemm_tiles(m, n, k).tile_n, panels = (n + tn - 1) / tn;
  parallel_for(panels, 1, [&](int64_t pb, int64_t pe) {
    for (int64_t p = pb; p < pe; ++p) {
      const int64_t j0 = p * tn, w = std::min(tn, n - j0);
      float* panel = dst + j0 * k;
      for (int64_t i = 0; i < k; ++i) {
        if (cs == 1) {
          std::memcpy(panel + i * w, b + i * rs + j0, static_cast<size_t>(w) * sizeof(float));
        } else {
          for (int64_t j = 0; j < w; ++j) panel[i * w + j] = b[i * rs + (j0 + j) * cs];
        }
      }
    }
  });
}

void blas_single_thread() {
#if defined(OPENBLAS_VERSION)
  // Reading the count is a load of a global; setting it only when someone changed it keeps the
  // call cheap and lets it run before every product.
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
#endif
}

#if defined(OPENBLAS_VERSION)
/// OpenBLAS's pthread build starts a worker per core when it loads, and each worker spins
/// (sched_yield in a loop) for about 2^28 clock ticks, some 0.1 s, before it sleeps. smelt runs
/// OpenBLAS on one thread (blas_single_thread), so the workers only steal cores: on two cores a
/// model's first calls ran beside one, and the bundled CNN's first compiled call with a warm
/// kernel cache took 20-47 ms instead of 4-10 ms (its convolutions' OpenMP team waited at each
/// barrier for a thread the spinning worker had pushed off its core). When smelt loads it pins
/// OpenBLAS to one thread and stops the workers through the function OpenBLAS's own fork handler
/// uses; a later multi-threaded call (openblas_set_num_threads by the application) starts them
/// again. Weak: another BLAS, or an OpenBLAS without it, leaves this a no-op.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

const bool kBlasWorkersStopped = [] {
  blas_single_thread();
  if (blas_thread_shutdown_ != nullptr) blas_thread_shutdown_();
  return true;
}();
#endif

template <class S>
void gemm_tile(const GemmArgs<S>& g, const GemmTiles& tiles, int64_t t) {
  const int64_t i0 = (t / tiles.cols) * tiles.tile_m, j0 = (t % tiles.cols) * tiles.tile_n;
  const int64_t tm = std::min(tiles.tile_m, g.m - i0), tn = std::min(tiles.tile_n, g.n - j0);
  const S* a = g.trans_a ? g.a + i0 : g.a + i0 * g.lda;
  S* c = g.c + i0 * g.ldc + j0;
  if (g.panel_n > 0) {
    // The panel of this tile's columns: the same call on the same values as the strided B.
    SMELT_ASSERT(g.panel_n == tiles.tile_n && !g.trans_b, "gemm: B's panels are not this product's column tiles");
    blas_call<S>(g.trans_a, false, tm, tn, g.k, a, g.lda, g.b + j0 * g.k, tn, c, g.ldc);
  } else {
    const S* b = g.trans_b ? g.b + j0 * g.ldb : g.b + j0;
    blas_call<S>(g.trans_a, g.trans_b, tm, tn, g.k, a, g.lda, b, g.ldb, c, g.ldc);
  }
  if constexpr (std::is_same_v<S, float>) {
    if (g.bias != nullptr)
      for (int64_t i = 0; i < tm; ++i) add_f32_run(c + i * g.ldc, g.bias + j0, c + i * g.ldc, tn, g.bias_first);
  }
}

template <class S>
void gemm(const GemmArgs<S>& g) {
  if (g.m <= 0 || g.n <= 0) return;
  blas_single_thread();
  const GemmTiles tiles = gemm_tiles(g.m, g.n, g.k);
  // One tile per chunk at least: a tile is already kTileWork multiply-adds when there are several.
  parallel_for(tiles.count(), 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) gemm_tile<S>(g, tiles, t);
  });
}

template void gemm_tile<float>(const GemmArgs<float>&, const GemmTiles&, int64_t);
template void gemm_tile<double>(const GemmArgs<double>&, const GemmTiles&, int64_t);
template void gemm<float>(const GemmArgs<float>&);
template void gemm<double>(const GemmArgs<double>&);

}  // namespace smelt::cpu
