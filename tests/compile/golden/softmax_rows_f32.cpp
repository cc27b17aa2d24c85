// smelt fused CPU row kernel (generated; shapes are arguments, not part of the source)
// divide(exp(subtract(in0, max_row(in0))), sum_row(exp(subtract(in0, max_row(in0)))))
// <embedded preamble: dtype.h, convert.h, scalar_math.h>

extern "C" void smelt_fused_kernel(int64_t row_begin, int64_t row_end, const smelt::reduce_order::RowArgs* a) {
  const int64_t n = a->n;
  auto g0 = smelt::reduce_order::row_buffer<float>(n);
  auto c3 = smelt::reduce_order::row_buffer<float>(n);
  float* out0 = reinterpret_cast<float*>(a->ptr[1]);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* in0 = smelt::reduce_order::row_of<float>(*a, 0, r, g0.get());
    const char* nx0 = smelt::reduce_order::next_row<float>(*a, 0, r, row_end, in0);
    const float v1 = smelt::reduce_order::reduce_row<smelt::ReduceOp::Max, float>(in0, n, a->rows);
    for (int64_t jb = 0; jb < n; jb += smelt::reduce_order::kPrefetchChunk) {
      const int64_t je = n - jb < smelt::reduce_order::kPrefetchChunk ? n : jb + smelt::reduce_order::kPrefetchChunk;
      smelt::reduce_order::prefetch_span(nx0, jb * 4, je * 4, false);
      smelt::reduce_order::prefetch_span(reinterpret_cast<const char*>(out0 + r * n), jb * 4, je * 4, true);
#pragma GCC ivdep
    for (int64_t j = jb; j < je; ++j) {
      const float v0 = in0[j];
      const float v2 = smelt::scalar::subtract<float>(v0, v1);
      const float v3 = smelt::scalar::exp<float>(v2);
      c3[j] = v3;
    }
    }
    const float v4 = smelt::reduce_order::reduce_row<smelt::ReduceOp::Sum, float>(c3.get(), n, a->rows);
#pragma GCC ivdep
    for (int64_t j = 0; j < n; ++j) {
      const float v3 = c3[j];
      const float v5 = smelt::scalar::divide<float>(v3, v4);
      out0[r * n + j] = v5;
    }
  }
}
