// The CBLAS subset smelt uses (row/column-major sgemm and dgemm), for builds without OpenBLAS.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112, CblasConjTrans = 113 };
typedef enum CBLAS_ORDER CBLAS_LAYOUT;

void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                 float alpha, const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
void cblas_dgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                 double alpha, const double* a, int lda, const double* b, int ldb, double beta, double* c, int ldc);
/// OpenBLAS's thread-count calls, which smelt makes to keep OpenBLAS at its own thread count. The
/// portable GEMM runs on smelt's pool, which already follows that count: get reports it, set is a no-op.
int openblas_get_num_threads(void);
void openblas_set_num_threads(int n);

#ifdef __cplusplus
}
#endif
