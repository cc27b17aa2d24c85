// smelt fused CPU kernel (generated; shapes are arguments, not part of the source)
// left_shift(bitwise_and(in0, 3), 1); where(greater(left_shift(bitwise_and(in0, 3), 1), in1), float32(left_shift(bitwise_and(in0, 3), 1)), -inf)
// <embedded preamble: dtype.h, convert.h, scalar_math.h>

extern "C" void smelt_fused_kernel(int64_t begin, int64_t end, int ndim, const int64_t* shape, char* const* args, const int64_t* strides, int contiguous) {
  const int32_t* in0 = reinterpret_cast<const int32_t*>(args[0]);
  const int32_t* in1 = reinterpret_cast<const int32_t*>(args[1]);
  int32_t* out0 = reinterpret_cast<int32_t*>(args[2]);
  float* out1 = reinterpret_cast<float*>(args[3]);
  const int32_t v2 = static_cast<int32_t>(static_cast<int64_t>(0x3ull));
  const int32_t v4 = static_cast<int32_t>(static_cast<int64_t>(0x1ull));
  volatile float k8 = std::bit_cast<float>(0xff800000u);
  const float v8 = k8;
  if (contiguous) {
#pragma GCC ivdep
    for (int64_t i = begin; i < end; ++i) {
      const int32_t v0 = in0[i];
      const int32_t v1 = in1[i];
      const int32_t v3 = smelt::scalar::bitwise_and<int32_t>(v0, v2);
      const int32_t v5 = smelt::scalar::left_shift<int32_t>(v3, v4);
      const bool v6 = smelt::scalar::greater<int32_t>(v5, v1);
      const float v7 = smelt::convert<float, int32_t>(v5);
      const float v9 = smelt::scalar::select(v6, v7, v8);
      out0[i] = v5;
      out1[i] = v9;
    }
    return;
  }
  int64_t idx[16] = {0};
  int64_t off[4] = {0};
  int64_t rem = begin;
  for (int d = ndim - 1; d >= 0; --d) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
    for (int a = 0; a < 4; ++a) off[a] += idx[d] * strides[a * ndim + d];
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
        const int64_t s3 = strides[3 * ndim + last], t3 = strides[3 * ndim + last - 1];
        for (int64_t r = 0; r < rows; ++r) {
#pragma GCC ivdep
          for (int64_t j = 0; j < shape[last]; ++j) {
            const int32_t v0 = in0[off[0] + r * t0 + j * s0];
            const int32_t v1 = in1[off[1] + r * t1 + j * s1];
            const int32_t v3 = smelt::scalar::bitwise_and<int32_t>(v0, v2);
            const int32_t v5 = smelt::scalar::left_shift<int32_t>(v3, v4);
            const bool v6 = smelt::scalar::greater<int32_t>(v5, v1);
            const float v7 = smelt::convert<float, int32_t>(v5);
            const float v9 = smelt::scalar::select(v6, v7, v8);
            out0[off[2] + r * t2 + j * s2] = v5;
            out1[off[3] + r * t3 + j * s3] = v9;
          }
        }
        pos += rows * shape[last];
        idx[last - 1] += rows;
        for (int a = 0; a < 4; ++a) off[a] += rows * strides[a * ndim + last - 1];
        for (int d = last - 1; d > 0 && idx[d] == shape[d]; --d) {
          idx[d] = 0;
          ++idx[d - 1];
          for (int a = 0; a < 4; ++a) off[a] += strides[a * ndim + d - 1] - shape[d] * strides[a * ndim + d];
        }
        continue;
      }
    }
    int64_t run = shape[last] - idx[last];
    if (run > end - pos) run = end - pos;
    const int64_t s0 = strides[0 * ndim + last];
    const int64_t s1 = strides[1 * ndim + last];
    const int64_t s2 = strides[2 * ndim + last];
    const int64_t s3 = strides[3 * ndim + last];
#pragma GCC ivdep
    for (int64_t j = 0; j < run; ++j) {
      const int32_t v0 = in0[off[0] + j * s0];
      const int32_t v1 = in1[off[1] + j * s1];
      const int32_t v3 = smelt::scalar::bitwise_and<int32_t>(v0, v2);
      const int32_t v5 = smelt::scalar::left_shift<int32_t>(v3, v4);
      const bool v6 = smelt::scalar::greater<int32_t>(v5, v1);
      const float v7 = smelt::convert<float, int32_t>(v5);
      const float v9 = smelt::scalar::select(v6, v7, v8);
      out0[off[2] + j * s2] = v5;
      out1[off[3] + j * s3] = v9;
    }
    pos += run;
    idx[last] += run;
    for (int a = 0; a < 4; ++a) off[a] += run * strides[a * ndim + last];
    for (int d = last; d > 0 && idx[d] == shape[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
      for (int a = 0; a < 4; ++a) off[a] += strides[a * ndim + d - 1] - shape[d] * strides[a * ndim + d];
    }
  }
}
