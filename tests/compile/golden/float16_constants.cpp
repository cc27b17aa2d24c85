// smelt fused CPU kernel (generated; shapes are arguments, not part of the source)
// isnan(power(sqrt(add(multiply(maximum(in0, nan), -0), inf)), 0.10000000000000001))
// <embedded preamble: dtype.h, convert.h, scalar_math.h>

extern "C" void smelt_fused_kernel(int64_t begin, int64_t end, int ndim, const int64_t* shape, char* const* args, const int64_t* strides, int contiguous) {
  const smelt::float16_t* in0 = reinterpret_cast<const smelt::float16_t*>(args[0]);
  bool* out0 = reinterpret_cast<bool*>(args[1]);
  volatile uint16_t k1 = 0x7e00;
  const smelt::float16_t v1 = smelt::float16_t::from_bits(k1);
  volatile uint16_t k3 = 0x8000;
  const smelt::float16_t v3 = smelt::float16_t::from_bits(k3);
  volatile uint16_t k5 = 0x7c00;
  const smelt::float16_t v5 = smelt::float16_t::from_bits(k5);
  volatile uint16_t k8 = 0x2e66;
  const smelt::float16_t v8 = smelt::float16_t::from_bits(k8);
  if (contiguous) {
#pragma GCC ivdep
    for (int64_t i = begin; i < end; ++i) {
      const smelt::float16_t v0 = in0[i];
      const smelt::float16_t v2 = smelt::scalar::maximum<smelt::float16_t>(v0, v1);
      const smelt::float16_t v4 = smelt::scalar::multiply<smelt::float16_t>(v2, v3);
      const smelt::float16_t v6 = smelt::scalar::add<smelt::float16_t>(v4, v5);
      const smelt::float16_t v7 = smelt::scalar::sqrt<smelt::float16_t>(v6);
      const smelt::float16_t v9 = smelt::scalar::power<smelt::float16_t>(v7, v8);
      const bool v10 = smelt::scalar::isnan<smelt::float16_t>(v9);
      out0[i] = v10;
    }
    return;
  }
  int64_t idx[16] = {0};
  int64_t off[2] = {0};
  int64_t rem = begin;
  for (int d = ndim - 1; d >= 0; --d) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
    for (int a = 0; a < 2; ++a) off[a] += idx[d] * strides[a * ndim + d];
  }
  const int last = ndim - 1;
  int64_t pos = begin;
  while (pos < end) {
    if (ndim >= 2 && idx[last] == 0) {
      int64_t rows = shape[last - 1] - idx[last - 1];
      if (rows > (end - pos) / shape[last]) rows = (end - pos) / shape[last];
      if (rows >= 2) {
        const int64_t s0 = strides[0 * ndim + last], t0 = strides[0 * ndim + last - 1];
        const int64_t s1 = strides[1 * ndim + last], t1 = strides[1 * ndim + last - 1];
        for (int64_t r = 0; r < rows; ++r) {
#pragma GCC ivdep
          for (int64_t j = 0; j < shape[last]; ++j) {
            const smelt::float16_t v0 = in0[off[0] + r * t0 + j * s0];
            const smelt::float16_t v2 = smelt::scalar::maximum<smelt::float16_t>(v0, v1);
            const smelt::float16_t v4 = smelt::scalar::multiply<smelt::float16_t>(v2, v3);
            const smelt::float16_t v6 = smelt::scalar::add<smelt::float16_t>(v4, v5);
            const smelt::float16_t v7 = smelt::scalar::sqrt<smelt::float16_t>(v6);
            const smelt::float16_t v9 = smelt::scalar::power<smelt::float16_t>(v7, v8);
            const bool v10 = smelt::scalar::isnan<smelt::float16_t>(v9);
            out0[off[1] + r * t1 + j * s1] = v10;
          }
        }
        pos += rows * shape[last];
        idx[last - 1] += rows;
        for (int a = 0; a < 2; ++a) off[a] += rows * strides[a * ndim + last - 1];
        for (int d = last - 1; d > 0 && idx[d] == shape[d]; --d) {
          idx[d] = 0;
          ++idx[d - 1];
          for (int a = 0; a < 2; ++a) off[a] += strides[a * ndim + d - 1] - shape[d] * strides[a * ndim + d];
        }
        continue;
      }
    }
    int64_t run = shape[last] - idx[last];
    if (run > end - pos) run = end - pos;
    const int64_t s0 = strides[0 * ndim + last];
    const int64_t s1 = strides[1 * ndim + last];
#pragma GCC ivdep
    for (int64_t j = 0; j < run; ++j) {
      const smelt::float16_t v0 = in0[off[0] + j * s0];
      const smelt::float16_t v2 = smelt::scalar::maximum<smelt::float16_t>(v0, v1);
      const smelt::float16_t v4 = smelt::scalar::multiply<smelt::float16_t>(v2, v3);
      const smelt::float16_t v6 = smelt::scalar::add<smelt::float16_t>(v4, v5);
      const smelt::float16_t v7 = smelt::scalar::sqrt<smelt::float16_t>(v6);
      const smelt::float16_t v9 = smelt::scalar::power<smelt::float16_t>(v7, v8);
      const bool v10 = smelt::scalar::isnan<smelt::float16_t>(v9);
      out0[off[1] + j * s1] = v10;
    }
    pos += run;
    idx[last] += run;
    for (int a = 0; a < 2; ++a) off[a] += run * strides[a * ndim + last];
    for (int d = last; d > 0 && idx[d] == shape[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
      for (int a = 0; a < 2; ++a) off[a] += strides[a * ndim + d - 1] - shape[d] * strides[a * ndim + d];
    }
  }
}
