// CUDA Pool (max and average, 1-D to 3-D): one thread per output, bit-exact with the CPU kernel.
//
// Each output walks its window in the CPU's order (depth, height, width offsets ascending, only
// positions inside the input) with the CPU's arithmetic: max compares in the element's compute
// type (float for halves) and lets NaN win and stay; average sums in double (integers in
// wrapping 64-bit) and divides once by the count of window positions inside the input (with
// count_include_pad: inside input and padding, never past the right padding, which a ceil_mode
// window can overhang). Inputs of any strides are read in place. The 2-D max pool also reads and
// writes channels-last data (PoolParams::block = C, from the compile pass conv_layout).
#include <optional>
#include <string>

#include "smelt/errors.h"
#include "src/backend/cuda/channels_last.h"
#include "src/backend/cuda/conv_sources.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/kernels.h"

namespace smelt::cuda {

std::string pool_source(Dtype dtype, PoolKind kind, bool count_include_pad) {
  if (dtype == Dtype::Bool) throw DtypeError("pool: bool is not supported");
  const bool max = kind == PoolKind::Max;
  const bool flt = is_floating(dtype);
  std::string b =
      "struct PoolArgs { u64 x, y; i64 total, channels; i64 in[3], out[3], k[3], stride[3], pad[3], pad_hi[3],"
      " dil[3]; i64 xs[5]; };\n"
      "typedef " +
      std::string(device_type(dtype)) + " E;\ntypedef calc<E> C;\n";
  // The window positions t in [0, k) whose coordinate p0 + t*dil lies in [lo, hi) are
  // [at_least(lo), at_least(hi)): computed, not searched, so that a kernel far wider than the
  // input (SAME padding with a kernel of 2^31) costs what it reads. bound - p0 fits in int64:
  // bound <= in + pad_hi and p0 >= -pad_lo, whose sum the op checked.
  b += "__device__ inline i64 at_least(i64 p0, i64 dil, i64 k, i64 bound) {\n"
       "  if (p0 >= bound) return 0;\n"
       "  const i64 need = bound - p0;\n"
       "  const i64 t = dil == 1 ? need : need / dil + (need % dil != 0 ? 1 : 0);\n"
       "  return t < k ? t : k;\n}\n";
  if (!max)
    b += "__device__ inline i64 window_count(i64 p0, i64 dil, i64 k, i64 lo, i64 hi) {\n"
         "  const i64 first = at_least(p0, dil, k, lo), last = at_least(p0, dil, k, hi);\n"
         "  return last > first ? last - first : 0;\n}\n";
  // The output's coordinates through the preamble's udiv (32 bits when they fit: eight 64-bit
  // divisions bound a 3 x 3 max pool at a tenth of memory speed).
  b += "extern \"C\" __global__ void k(PoolArgs a) {\n"
       "  const i64 idx = gid();\n"
       "  if (idx >= a.total) return;\n"
       "  i64 r = idx, q;\n"
       "  q = udiv(r, a.out[2]); const i64 ow = r - q * a.out[2]; r = q;\n"
       "  q = udiv(r, a.out[1]); const i64 oh = r - q * a.out[1]; r = q;\n"
       "  q = udiv(r, a.out[0]); const i64 od = r - q * a.out[0]; r = q;\n"
       "  const i64 n = udiv(r, a.channels), c = r - n * a.channels;\n"
       "  const E* x = (const E*)a.x + n * a.xs[0] + c * a.xs[1];\n"
       "  const i64 d0 = od * a.stride[0] - a.pad[0], h0 = oh * a.stride[1] - a.pad[1],"
       " w0 = ow * a.stride[2] - a.pad[2];\n";
  if (max) {
    b += !flt ? "  C acc = tr<E>::lowest();\n" : dtype == Dtype::Float64 ? "  C acc = -d_inf();\n" : "  C acc = -f_inf();\n";
  } else {
    b += flt ? "  double acc = 0.0;\n" : "  u64 acc = 0;\n";
  }
  b += "  const i64 i1 = at_least(d0, a.dil[0], a.k[0], a.in[0]), j1 = at_least(h0, a.dil[1], a.k[1], a.in[1]),"
       " q1 = at_least(w0, a.dil[2], a.k[2], a.in[2]);\n"
       "  for (i64 i = at_least(d0, a.dil[0], a.k[0], 0); i < i1; ++i) {\n"
       "    const i64 pd = d0 + i * a.dil[0];\n"
       "    for (i64 j = at_least(h0, a.dil[1], a.k[1], 0); j < j1; ++j) {\n"
       "      const i64 ph = h0 + j * a.dil[1];\n"
       "      const E* row = x + pd * a.xs[2] + ph * a.xs[3];\n"
       "      for (i64 q = at_least(w0, a.dil[2], a.k[2], 0); q < q1; ++q) {\n"
       "        const i64 pw = w0 + q * a.dil[2];\n"
       "        const C v = up(row[pw * a.xs[4]]);\n";
  if (max)
    b += flt ? "        acc = (v > acc || v != v) ? v : acc;\n" : "        acc = v > acc ? v : acc;\n";
  else
    b += flt ? "        acc += (double)v;\n" : "        acc += (u64)v;\n";
  b += "      }\n    }\n  }\n";
  if (max) {
    b += "  ((E*)a.y)[idx] = cvt<E, C>(acc);\n}\n";
    return b;
  }
  if (count_include_pad)
    b += "  const i64 cnt = window_count(d0, a.dil[0], a.k[0], -a.pad[0], a.in[0] + a.pad_hi[0]) *\n"
         "                  window_count(h0, a.dil[1], a.k[1], -a.pad[1], a.in[1] + a.pad_hi[1]) *\n"
         "                  window_count(w0, a.dil[2], a.k[2], -a.pad[2], a.in[2] + a.pad_hi[2]);\n";
  else
    b += "  const i64 cnt = window_count(d0, a.dil[0], a.k[0], 0, a.in[0]) *\n"
         "                  window_count(h0, a.dil[1], a.k[1], 0, a.in[1]) *\n"
         "                  window_count(w0, a.dil[2], a.k[2], 0, a.in[2]);\n";
  if (flt)  // 0/0 is NaN for a window without a counted position, as on the CPU
    b += "  ((E*)a.y)[idx] = cvt<E, double>(acc / (double)cnt);\n}\n";
  else if (is_signed_integral(dtype))
    b += "  ((E*)a.y)[idx] = cnt == 0 ? (E)0 : (E)((i64)acc / cnt);\n}\n";
  else
    b += "  ((E*)a.y)[idx] = cnt == 0 ? (E)0 : (E)(acc / (u64)cnt);\n}\n";
  return b;
}

std::optional<MaxPool2dArgs> max_pool2d_args(const PoolKernelArgs& a, const Shape& x, Dtype dt) {
  if (dt != Dtype::Float16 && dt != Dtype::BFloat16 && dt != Dtype::Float32) return std::nullopt;
  if (a.in[0] != 1 || a.out[0] != 1 || a.k[0] != 1 || a.pad[0] != 0) return std::nullopt;
  for (int i = 0; i < 3; ++i)
    if (a.dil[i] != 1) return std::nullopt;
  for (int i = 0; i < 5; ++i)
    if (a.xs[i] < 0) return std::nullopt;
  constexpr int64_t kLimit = int64_t{1} << 30;  // coordinates are formed as int32 sums of two of these
  int64_t last = 0;                             // the largest element offset of x
  const int64_t dims[5] = {x[0], x[1], 1, a.in[1], a.in[2]};
  for (int i = 0; i < 5; ++i) last += (dims[i] - 1) * a.xs[i];
  const int64_t values[] = {a.total, a.channels, a.out[1], a.out[2], a.in[1], a.in[2], a.k[1], a.k[2],
                            a.stride[1], a.stride[2], a.pad[1], a.pad[2], (a.out[1] - 1) * a.stride[1] + a.k[1],
                            (a.out[2] - 1) * a.stride[2] + a.k[2], last};
  for (int64_t v : values)
    if (v < 0 || v >= kLimit) return std::nullopt;
  MaxPool2dArgs m;
  m.total = static_cast<uint32_t>(a.total);
  m.channels = static_cast<uint32_t>(a.channels);
  m.out_h = static_cast<uint32_t>(a.out[1]);
  m.out_w = static_cast<uint32_t>(a.out[2]);
  m.in_h = static_cast<uint32_t>(a.in[1]);
  m.in_w = static_cast<uint32_t>(a.in[2]);
  m.k_h = static_cast<uint32_t>(a.k[1]);
  m.k_w = static_cast<uint32_t>(a.k[2]);
  m.stride_h = static_cast<uint32_t>(a.stride[1]);
  m.stride_w = static_cast<uint32_t>(a.stride[2]);
  m.pad_h = static_cast<uint32_t>(a.pad[1]);
  m.pad_w = static_cast<uint32_t>(a.pad[2]);
  m.xs_n = static_cast<uint32_t>(a.xs[0]);
  m.xs_c = static_cast<uint32_t>(a.xs[1]);
  m.xs_h = static_cast<uint32_t>(a.xs[3]);
  m.xs_w = static_cast<uint32_t>(a.xs[4]);
  return m;
}

std::string max_pool2d_source(Dtype dtype, bool channels_last) {
  // The general kernel's order and rule (window positions ascending; v wins when v > acc or v is
  // NaN) in 32-bit index arithmetic and with the hardware's widening of 16-bit floats, which is
  // exact for every value but NaN: the thread keeps the winning element's own bits, which equal
  // the general kernel's narrowing of its widened value. A window that holds a NaN is computed
  // again with the exact widening (NaN bits as on the CPU). ResNet-50's 3 x 3 pool on the H200:
  // 800 instructions an output in the general kernel (64-bit coordinates, exact conversions).
  // Channels-last numbering: idx = ((n * out_h + oh) * out_w + ow) * channels + c.
  const char* coordinates = channels_last ? R"CUDA(
  const u32 r = idx / a.channels, c = idx - r * a.channels;
  const u32 q = r / a.out_w, ow = r - q * a.out_w;
  const u32 n = q / a.out_h, oh = q - n * a.out_h;
)CUDA"
                                          : R"CUDA(
  const u32 r = idx / a.out_w, ow = idx - r * a.out_w;
  const u32 q = r / a.out_h, oh = r - q * a.out_h;
  const u32 n = q / a.channels, c = q - n * a.channels;
)CUDA";
  return std::string("typedef ") + device_type(dtype) + " E;\n" + R"CUDA(
struct Pool2Args { u64 x, y; u32 total, channels, out_h, out_w, in_h, in_w, k_h, k_w, stride_h, stride_w,
                   pad_h, pad_w, xs_n, xs_c, xs_h, xs_w; };
__device__ inline float widen_q(f16 v) { return h2f_q(v.b); }
__device__ inline float widen_q(bf16 v) { return bf2f(v.b); }
__device__ inline float widen_q(float v) { return v; }
extern "C" __global__ void k(Pool2Args a) {
  const u32 idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= a.total) return;)CUDA" + coordinates + R"CUDA(
  const E* x = (const E*)a.x + (n * a.xs_n + c * a.xs_c);
  const int h0 = (int)(oh * a.stride_h) - (int)a.pad_h, w0 = (int)(ow * a.stride_w) - (int)a.pad_w;
  const int h_lo = h0 > 0 ? h0 : 0, w_lo = w0 > 0 ? w0 : 0;
  const int h_hi = min(h0 + (int)a.k_h, (int)a.in_h), w_hi = min(w0 + (int)a.k_w, (int)a.in_w);
  E best = cvt<E, float>(-f_inf());
  float best_value = -f_inf();
  bool nan = false;
  for (int h = h_lo; h < h_hi; ++h) {
    const E* row = x + (u32)h * a.xs_h;
    for (int w = w_lo; w < w_hi; ++w) {
      const E v = row[(u32)w * a.xs_w];
      const float f = widen_q(v);
      nan |= f != f;
      if (f > best_value) { best_value = f; best = v; }
    }
  }
  if (nan) {
    float acc = -f_inf();
    for (int h = h_lo; h < h_hi; ++h) {
      const E* row = x + (u32)h * a.xs_h;
      for (int w = w_lo; w < w_hi; ++w) {
        const float v = up(row[(u32)w * a.xs_w]);
        acc = (v > acc || v != v) ? v : acc;
      }
    }
    best = cvt<E, float>(acc);
  }
  ((E*)a.y)[idx] = best;
}
)CUDA";
}

void eval_pool(const PoolParams& p, const std::vector<Array>& inputs, Array& out) {
  const Array& x = inputs[0];
  const std::string what = p.kind == PoolKind::Max ? "max_pool" : "avg_pool";
  if (x.dtype() == Dtype::Bool) throw DtypeError(what + ": bool is not supported");
  alloc_output(out);
  if (out.size() == 0) return;
  DeviceState& s = state_of(out);
  if (p.block != 0) {
    // Channels-last ([N, 1, H, W, C] row-major, from the compile pass conv_layout): the 2-D
    // kernel reads the input through its NHWC strides and numbers the outputs channels-last.
    const Shape xs = unblocked_shape(x.shape(), p.block), ys = unblocked_shape(out.shape(), p.block);
    SMELT_ASSERT(p.block == xs[1] && pool_runs_channels_last(x.dtype(), xs, p) &&
                     is_row_contiguous(x.node().shape, x.node().strides),
                 "pool: a channels-last pooling the CUDA kernel does not take");
    const Strides nhwc{xs[1] * xs[2] * xs[3], 1, xs[3] * xs[1], xs[1]};
    const PoolKernelArgs a = pool_kernel_args(xs, nhwc, ys, p);
    std::optional<MaxPool2dArgs> m = max_pool2d_args(a, xs, x.dtype());
    SMELT_ASSERT(m.has_value(), "pool: a channels-last pooling past the 32-bit kernel's sizes");
    m->x = dptr(x);
    m->y = dptr(out);
    const std::string key = std::string("pool|max2d_nhwc|") + device_type(x.dtype());
    const Kernel fn = get_kernel(s.index, key, [&] { return max_pool2d_source(x.dtype(), true); }, what);
    launch(s, fn, blocks_for(a.total, 256), 256, &*m, what);
    return;
  }
  PoolKernelArgs a = pool_kernel_args(x.shape(), x.node().strides, out.shape(), p);
  a.x = x.size() > 0 ? dptr(x) : 0;  // empty input: every window holds only padding, nothing is read
  a.y = dptr(out);
  if (p.kind == PoolKind::Max)
    if (auto m = max_pool2d_args(a, x.shape(), x.dtype())) {
      m->x = a.x;
      m->y = a.y;
      const std::string key = std::string("pool|max2d|") + device_type(x.dtype());
      const Kernel fn = get_kernel(s.index, key, [&] { return max_pool2d_source(x.dtype()); }, what);
      launch(s, fn, blocks_for(a.total, 256), 256, &*m, what);
      return;
    }
  const bool include_pad = p.kind == PoolKind::Avg && p.count_include_pad;
  const std::string key = std::string("pool|") + (p.kind == PoolKind::Max ? "max|" : include_pad ? "avg_pad|" : "avg|") +
                          device_type(x.dtype());
  const Kernel fn = get_kernel(s.index, key, [&] { return pool_source(x.dtype(), p.kind, include_pad); }, what);
  launch(s, fn, blocks_for(a.total, 256), 256, &a, what);
}

}  // namespace smelt::cuda
