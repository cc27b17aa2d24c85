// smelt fused CPU kernel (generated; shapes are arguments, not part of the source)
// bfloat16(add(divide(float64(subtract(in0, -9223372036854775808)), float64(bitwise_xor(in1, 18446744073709551615))), 0.10000000000000001)); subtract(in0, -9223372036854775808)
// <embedded preamble: dtype.h, convert.h, scalar_math.h>

extern "C" void smelt_fused_kernel(int64_t begin, int64_t end, int ndim, const int64_t* shape, char* const* args, const int64_t* strides, int contiguous) {
  const int64_t* in0 = reinterpret_cast<const int64_t*>(args[0]);
  const uint64_t* in1 = reinterpret_cast<const uint64_t*>(args[1]);
  smelt::bfloat16_t* out0 = reinterpret_cast<smelt::bfloat16_t*>(args[2]);
  int64_t* out1 = reinterpret_cast<int64_t*>(args[3]);
  const int64_t v2 = static_cast<int64_t>(static_cast<int64_t>(0x8000000000000000ull));
  const uint64_t v4 = static_cast<uint64_t>(0xffffffffffffffffull);
  volatile double k9 = 0x1.999999999999ap-4;
  const double v9 = k9;
  if (contiguous) {
#pragma GCC ivdep
    for (int64_t i = begin; i < end; ++i) {
      const int64_t v0 = in0[i];
      const uint64_t v1 = in1[i];
      const int64_t v3 = smelt::scalar::subtract<int64_t>(v0, v2);
      const uint64_t v5 = smelt::scalar::bitwise_xor<uint64_t>(v1, v4);
      const double v6 = smelt::convert<double, int64_t>(v3);
      const double v7 = smelt::convert<double, uint64_t>(v5);
      const double v8 = smelt::scalar::divide<double>(v6, v7);
      const double v10 = smelt::scalar::add<double>(v8, v9);
      const smelt::bfloat16_t v11 = smelt::convert<smelt::bfloat16_t, double>(v10);
      out0[i].bits = v11.bits;
      out1[i] = v3;
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
            const int64_t v0 = in0[off[0] + r * t0 + j * s0];
            const uint64_t v1 = in1[off[1] + r * t1 + j * s1];
            const int64_t v3 = smelt::scalar::subtract<int64_t>(v0, v2);
            const uint64_t v5 = smelt::scalar::bitwise_xor<uint64_t>(v1, v4);
            const double v6 = smelt::convert<double, int64_t>(v3);
            const double v7 = smelt::convert<double, uint64_t>(v5);
            const double v8 = smelt::scalar::divide<double>(v6, v7);
            const double v10 = smelt::scalar::add<double>(v8, v9);
            const smelt::bfloat16_t v11 = smelt::convert<smelt::bfloat16_t, double>(v10);
            out0[off[2] + r * t2 + j * s2].bits = v11.bits;
            out1[off[3] + r * t3 + j * s3] = v3;
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
      const int64_t v0 = in0[off[0] + j * s0];
      const uint64_t v1 = in1[off[1] + j * s1];
      const int64_t v3 = smelt::scalar::subtract<int64_t>(v0, v2);
      const uint64_t v5 = smelt::scalar::bitwise_xor<uint64_t>(v1, v4);
      const double v6 = smelt::convert<double, int64_t>(v3);
      const double v7 = smelt::convert<double, uint64_t>(v5);
      const double v8 = smelt::scalar::divide<double>(v6, v7);
      const double v10 = smelt::scalar::add<double>(v8, v9);
      const smelt::bfloat16_t v11 = smelt::convert<smelt::bfloat16_t, double>(v10);
      out0[off[2] + j * s2].bits = v11.bits;
      out1[off[3] + j * s3] = v3;
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
