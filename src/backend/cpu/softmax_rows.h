// The float row loops of the CPU attention kernel's online softmax, built once per x86-64 ISA.
//
// Why per ISA: they are most of the kernel's time outside its GEMMs, and the library's baseline
// build runs them on 128-bit vectors. Each build computes every element with the same float
// operations in the same order (fused multiply-adds only where the code writes std::fma, which
// rounds once on every ISA; no contraction elsewhere; partial sums in fixed lanes), so every ISA
// gives the same bits (tests/backend/cpu/softmax_rows_test.cpp); SMELT_CPU_ISA caps the pick as
// for the element-wise kernels (elementwise_math.h).
#pragma once

#include <cstdint>

#include "src/backend/cpu/elementwise_math.h"

namespace smelt::cpu {

struct SoftmaxRows {
  /// row[j] = softmax_exp(row[j] - shift) for j < n; returns their sum (8 strided partial sums,
  /// then added in order).
  float (*exp_shifted_sum)(float* row, int64_t n, float shift);
  /// row[j] *= scale for j < n; returns the largest product (NaNs skipped; -inf for none).
  float (*scale_max)(float* row, int64_t n, float scale);
  /// row[j] = row[j] * scale + add[j] for j < n (two roundings: an additive mask on the scaled
  /// scores); returns the largest result as scale_max does (the same lanes, in the same order).
  float (*scale_add_max)(float* row, const float* add, int64_t n, float scale);
  /// o[j] = o[j] * alpha + p[j] for j < n (two roundings): the online softmax's rescaled output
  /// plus a key block's weighted values.
  void (*scale_add)(float* o, const float* p, int64_t n, float alpha);
};

/// The loops built for `isa`, or for the best level the CPU has below it.
const SoftmaxRows& softmax_rows_for(CpuIsa isa);
/// The loops for cpu_isa().
const SoftmaxRows& softmax_rows();

/// e^x for the softmax in float arithmetic (Cephes' expf: x = n ln2 + r, |r| <= ln2/2, a degree-7
/// polynomial in fused multiply-adds, 2^n from the exponent bits), for x <= 88: within 1 ulp of
/// e^x (every float of [-87.33, 88]: 0.9775 ulp at most), and cheaper than
/// the library's exp, which computes in double to be correctly rounded (vector_math.h). Results
/// below 2^-126 (x < -87.34) are 0: beside a row's largest term, e^0 = 1, they are below a
/// float's resolution of the sum. NaN stays NaN; -inf gives 0.
float softmax_exp(float x);

}  // namespace smelt::cpu
