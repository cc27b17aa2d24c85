// smelt fused CPU row kernel (generated; shapes are arguments, not part of the source)
// bfloat16(add(multiply(v11, float32(in2)), float32(in3)))
// <embedded preamble: dtype.h, convert.h, scalar_math.h>

extern "C" void smelt_fused_kernel(int64_t row_begin, int64_t row_end, const smelt::reduce_order::RowArgs* a) {
  const int64_t n = a->n;
  volatile float k8 = 0x1.4f8b58p-17f;
  const float v8 = k8;
  auto g0 = smelt::reduce_order::row_buffer<smelt::bfloat16_t>(n);
  auto g1 = smelt::reduce_order::row_buffer<smelt::bfloat16_t>(n);
  auto g2 = smelt::reduce_order::row_buffer<smelt::bfloat16_t>(n);
  auto g3 = smelt::reduce_order::row_buffer<smelt::bfloat16_t>(n);
  auto c3 = smelt::reduce_order::row_buffer<float>(n);
  auto c5 = smelt::reduce_order::row_buffer<float>(n);
  auto c6 = smelt::reduce_order::row_buffer<float>(n);
  smelt::bfloat16_t* out0 = reinterpret_cast<smelt::bfloat16_t*>(a->ptr[4]);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const smelt::bfloat16_t* in0 = smelt::reduce_order::row_of<smelt::bfloat16_t>(*a, 0, r, g0.get());
    const char* nx0 = smelt::reduce_order::next_row<smelt::bfloat16_t>(*a, 0, r, row_end, in0);
    const smelt::bfloat16_t* in1 = smelt::reduce_order::row_of<smelt::bfloat16_t>(*a, 1, r, g1.get());
    const char* nx1 = smelt::reduce_order::next_row<smelt::bfloat16_t>(*a, 1, r, row_end, in1);
    const smelt::bfloat16_t* in2 = smelt::reduce_order::row_of<smelt::bfloat16_t>(*a, 2, r, g2.get());
    const char* nx2 = smelt::reduce_order::next_row<smelt::bfloat16_t>(*a, 2, r, row_end, in2);
    const smelt::bfloat16_t* in3 = smelt::reduce_order::row_of<smelt::bfloat16_t>(*a, 3, r, g3.get());
    const char* nx3 = smelt::reduce_order::next_row<smelt::bfloat16_t>(*a, 3, r, row_end, in3);
    for (int64_t jb = 0; jb < n; jb += smelt::reduce_order::kPrefetchChunk) {
      const int64_t je = n - jb < smelt::reduce_order::kPrefetchChunk ? n : jb + smelt::reduce_order::kPrefetchChunk;
      smelt::reduce_order::prefetch_span(nx0, jb * 2, je * 2, false);
      smelt::reduce_order::prefetch_span(nx1, jb * 2, je * 2, false);
      smelt::reduce_order::prefetch_span(nx2, jb * 2, je * 2, false);
      smelt::reduce_order::prefetch_span(nx3, jb * 2, je * 2, false);
#pragma GCC ivdep
    for (int64_t j = jb; j < je; ++j) {
      const smelt::bfloat16_t v0 = in0[j];
      const smelt::bfloat16_t v1 = in1[j];
      const smelt::bfloat16_t v2 = smelt::scalar::add<smelt::bfloat16_t>(v0, v1);
      const float v3 = smelt::convert<float, smelt::bfloat16_t>(v2);
      c3[j] = v3;
    }
    }
    const float v4 = smelt::scalar::divide<float>(smelt::reduce_order::reduce_row<smelt::ReduceOp::Sum, float>(c3.get(), n, a->rows), smelt::reduce_order::mean_divisor<float>(n, 0));
    for (int64_t jb = 0; jb < n; jb += smelt::reduce_order::kPrefetchChunk) {
      const int64_t je = n - jb < smelt::reduce_order::kPrefetchChunk ? n : jb + smelt::reduce_order::kPrefetchChunk;
      smelt::reduce_order::prefetch_span(reinterpret_cast<const char*>(out0 + r * n), jb * 2, je * 2, true);
#pragma GCC ivdep
    for (int64_t j = jb; j < je; ++j) {
      const float v3 = c3[j];
      const float v5 = smelt::scalar::subtract<float>(v3, v4);
      c5[j] = v5;
      const float v6 = smelt::scalar::multiply<float>(v5, v5);
      c6[j] = v6;
    }
    }
    const float v7 = smelt::scalar::divide<float>(smelt::reduce_order::reduce_row<smelt::ReduceOp::Sum, float>(c6.get(), n, a->rows), smelt::reduce_order::mean_divisor<float>(n, 0));
    const float v9 = smelt::scalar::add<float>(v7, v8);
    const float v10 = smelt::scalar::rsqrt<float>(v9);
#pragma GCC ivdep
    for (int64_t j = 0; j < n; ++j) {
      const float v5 = c5[j];
      const float v11 = smelt::scalar::multiply<float>(v5, v10);
      const smelt::bfloat16_t v12 = in2[j];
      const float v13 = smelt::convert<float, smelt::bfloat16_t>(v12);
      const float v14 = smelt::scalar::multiply<float>(v11, v13);
      const smelt::bfloat16_t v15 = in3[j];
      const float v16 = smelt::convert<float, smelt::bfloat16_t>(v15);
      const float v17 = smelt::scalar::add<float>(v14, v16);
      const smelt::bfloat16_t v18 = smelt::convert<smelt::bfloat16_t, float>(v17);
      out0[r * n + j].bits = v18.bits;
    }
  }
}
