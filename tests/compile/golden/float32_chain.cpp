// smelt fused CPU kernel (generated; shapes are arguments, not part of the source)
// add(multiply(exp(in0), in1), 1)
// <embedded preamble: dtype.h, convert.h, scalar_math.h>

extern "C" void smelt_fused_kernel(int64_t begin, int64_t end, int ndim, const int64_t* shape, char* const* args, const int64_t* strides, int contiguous) {
  const float* in0 = reinterpret_cast<const float*>(args[0]);
  const float* in1 = reinterpret_cast<const float*>(args[1]);
  float* out0 = reinterpret_cast<float*>(args[2]);
  volatile float k4 = 0x1p+0f;
  const float v4 = k4;
  if (contiguous) {
#pragma GCC ivdep
    for (int64_t i = begin; i < end; ++i) {
      const float v0 = in0[i];
      const float v1 = smelt::scalar::exp<float>(v0);
      const float v2 = in1[i];
      const float v3 = smelt::scalar::multiply<float>(v1, v2);
      const float v5 = smelt::scalar::add<float>(v3, v4);
      out0[i] = v5;
    }
    return;
  }
  int64_t idx[16] = {0};
  int64_t off[3] = {0};
  int64_t rem = begin;
  for (int d = ndim - 1; d >= 0; --d) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
    for (int a = 0; a < 3; ++a) off[a] += idx[d] * strides[a * ndim + d];
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
        const int64_t s2 = strides[2 * ndim + last], t2 = strides[2 * ndim + last - 1];
        for (int64_t r = 0; r < rows; ++r) {
#pragma GCC ivdep
          for (int64_t j = 0; j < shape[last]; ++j) {
            const float v0 = in0[off[0] + r * t0 + j * s0];
            const float v1 = smelt::scalar::exp<float>(v0);
            const float v2 = in1[off[1] + r * t1 + j * s1];
            const float v3 = smelt::scalar::multiply<float>(v1, v2);
            const float v5 = smelt::scalar::add<float>(v3, v4);
            out0[off[2] + r * t2 + j * s2] = v5;
          }
        }
        pos += rows * shape[last];
        idx[last - 1] += rows;
        for (int a = 0; a < 3; ++a) off[a] += rows * strides[a * ndim + last - 1];
        for (int d = last - 1; d > 0 && idx[d] == shape[d]; --d) {
          idx[d] = 0;
          ++idx[d - 1];
          for (int a = 0; a < 3; ++a) off[a] += strides[a * ndim + d - 1] - shape[d] * strides[a * ndim + d];
        }
        continue;
      }
    }
    int64_t run = shape[last] - idx[last];
    if (run > end - pos) run = end - pos;
    const int64_t s0 = strides[0 * ndim + last];
    const int64_t s1 = strides[1 * ndim + last];
    const int64_t s2 = strides[2 * ndim + last];
#pragma GCC ivdep
    for (int64_t j = 0; j < run; ++j) {
      const float v0 = in0[off[0] + j * s0];
      const float v1 = smelt::scalar::exp<float>(v0);
      const float v2 = in1[off[1] + j * s1];
      const float v3 = smelt::scalar::multiply<float>(v1, v2);
      const float v5 = smelt::scalar::add<float>(v3, v4);
      out0[off[2] + j * s2] = v5;
    }
    pos += run;
    idx[last] += run;
    for (int a = 0; a < 3; ++a) off[a] += run * strides[a * ndim + last];
    for (int d = last; d > 0 && idx[d] == shape[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
      for (int a = 0; a < 3; ++a) off[a] += strides[a * ndim + d - 1] - shape[d] * strides[a * ndim + d];
    }
  }
}
