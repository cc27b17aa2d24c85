// A portable GEMM behind the CBLAS interface, used when OpenBLAS is not available (SMELT_BLAS).
//
// Correct first, reasonably fast second: B is packed row-major (transposed if needed) once, then
// rows of C are split over the thread pool; each C row accumulates k rank-1 updates in order, so
// the inner loop over j vectorizes and the result does not depend on the thread count. This is
// the rule smelt's tiled GEMM (src/backend/cpu/gemm.h) asks of any BLAS: every element of C sums
// its K products in an order fixed by the shapes, never split by thread. smelt calls it once per
// tile from its pool, where this parallel_for runs inline; a lone tile splits its rows here.
#include "cblas.h"

#include <cstdint>
#include <vector>

#include "src/core/thread_pool.h"

namespace {

template <class T>
void gemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, T alpha, const T* a,
          int lda, const T* b, int ldb, T beta, T* c, int ldc) {
  if (order == CblasColMajor) {
    // C^T = B^T A^T in row-major terms.
    gemm<T>(CblasRowMajor, tb, ta, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
    return;
  }
  if (m <= 0 || n <= 0) return;
  const bool tra = ta != CblasNoTrans, trb = tb != CblasNoTrans;
  auto at = [&](int64_t i, int64_t p) { return tra ? a[p * lda + i] : a[i * lda + p]; };
  std::vector<T> bp(static_cast<size_t>(k) * static_cast<size_t>(n));
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) bp[p * n + j] = trb ? b[j * ldb + p] : b[p * ldb + j];
  const int64_t work = static_cast<int64_t>(n) * (k > 0 ? k : 1);
  smelt::parallel_for(m, work >= 65536 ? 1 : 65536 / work + 1, [&](int64_t lo, int64_t hi) {
    std::vector<T> acc(static_cast<size_t>(n));
    for (int64_t i = lo; i < hi; ++i) {
      for (int64_t j = 0; j < n; ++j) acc[j] = T(0);
      for (int64_t p = 0; p < k; ++p) {
        const T x = at(i, p);
        const T* row = bp.data() + p * n;
        for (int64_t j = 0; j < n; ++j) acc[j] += x * row[j];
      }
      T* ci = c + i * ldc;
      for (int64_t j = 0; j < n; ++j) ci[j] = alpha * acc[j] + (beta == T(0) ? T(0) : beta * ci[j]);
    }
  });
}

}  // namespace

extern "C" void cblas_sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k,
                            float alpha, const float* a, int lda, const float* b, int ldb, float beta, float* c,
                            int ldc) {
  gemm<float>(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

extern "C" void cblas_dgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k,
                            double alpha, const double* a, int lda, const double* b, int ldb, double beta, double* c,
                            int ldc) {
  gemm<double>(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

extern "C" int openblas_get_num_threads(void) { return smelt::num_threads(); }

extern "C" void openblas_set_num_threads(int) {}
