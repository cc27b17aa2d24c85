// Float/double GEMM cut into output tiles fixed by the shapes, one single-threaded BLAS call per tile.
//
// Why: a multi-threaded BLAS splits a product by its own thread count, and with the split the
// kernels it picks for the pieces (edge kernels, K blocking, small-matrix paths) change, so the
// bits of C changed with the thread count on some CPUs (issue #11). Here the cut depends on
// (m, n, k) alone, K is never split, and every tile is one call of a single-threaded BLAS: each
// element of C is computed by the same call whatever the number of threads. The tiles are
// spread over smelt's pool instead.
#pragma once

#include <cstdint>

namespace smelt::cpu {

/// Row-major C[m,n] = op(A)[m,k] * op(B)[k,n] (alpha 1, beta 0); op(X) = X or X^T as stored.
template <class S>
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const S* a = nullptr;
  int64_t lda = 0;
  const S* b = nullptr;
  int64_t ldb = 0;
  S* c = nullptr;
  int64_t ldc = 0;
  /// Optional, float only: bias[0..n) added to every row of C after the product, C + bias
  /// (bias + C with bias_first), on each tile as soon as its call returns (the tile is still in
  /// cache), by the Binary Add kernel's own loop (add_f32_run): the bits of a separate add.
  const S* bias = nullptr;
  bool bias_first = false;
  /// > 0: B is not a strided matrix but column panels of this many columns (gemm_tiles' tile_n
  /// for this product; the last panel narrower), each k x width row-major, back to back: a
  /// tile reads one contiguous block of B (gemm_b_panels; trans_b and ldb are then unused).
  int64_t panel_n = 0;
};

/// How a product of m x n x k is cut: tiles of tile_m rows and tile_n columns of C (the last
/// ones smaller), rows x cols of them, each over the whole K. A function of (m, n, k) only.
struct GemmTiles {
  int64_t tile_m = 1, tile_n = 1, rows = 1, cols = 1;
  int64_t count() const { return rows * cols; }
  /// Multiply-adds of one full tile (k at least 1).
  int64_t work(int64_t k) const { return tile_m * tile_n * (k > 0 ? k : 1); }
};

GemmTiles gemm_tiles(int64_t m, int64_t n, int64_t k);

/// Whether a product of m x n x k reads a constant B better as column panels (GemmArgs::panel_n):
/// a product of few rows (a decode step's vector-matrix products), cut into several column tiles,
/// with a B that is not huge. Each tile then streams one contiguous block instead of k rows of
/// tile_n floats at a stride of n. A rule on the shapes; the bits are those of the strided B.
bool gemm_b_panels(int64_t m, int64_t n, int64_t k);

/// Copies the k x n matrix B (element (i, j) at b[i * rs + j * cs]) into the column panels of
/// gemm_b_panels for a product of m rows: k * n floats at `dst`.
void gemm_pack_b_panels(int64_t m, int64_t n, int64_t k, const float* b, int64_t rs, int64_t cs, float* dst);

/// Keeps BLAS on the calling thread (OpenBLAS: openblas_set_num_threads(1) when another value
/// is set). Call it before BLAS calls made outside gemm(); gemm() calls it itself.
void blas_single_thread();

/// Computes tile `t` of `tiles` (0 <= t < tiles.count()) on the calling thread.
template <class S>
void gemm_tile(const GemmArgs<S>& g, const GemmTiles& tiles, int64_t t);

/// The whole product, its tiles spread over smelt's pool (run inline inside a parallel_for).
template <class S>
void gemm(const GemmArgs<S>& g);

}  // namespace smelt::cpu
