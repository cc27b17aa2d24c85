// CUDA Conv and ConvTranspose: cuDNN (legacy API, opened with dlopen) for float dtypes, a direct
// NVRTC kernel for everything else and whenever cuDNN is missing, declines or is turned off.
//
// cuDNN path (float32, float64, float16, bfloat16; 1-D as 2-D with a unit axis):
//  - Algorithms come from cudnnGetConvolution*Algorithm_v7 (heuristics: the same choice on every
//    run, unlike the timing-based Find), keeping only deterministic ones that sum each output's
//    window products: forward IMPLICIT_GEMM, IMPLICIT_PRECOMP_GEMM, GEMM, DIRECT; backward-data
//    ALGO_1. FFT and Winograd are refused: they mix the whole tile, so one inf or NaN in the input
//    spoils outputs whose windows do not contain it, and their error is not bounded per window.
//  - float32 runs with CUDNN_FMA_MATH only: cuDNN's DEFAULT_MATH lets Ampere and newer GPUs use
//    TF32 for float32, which would leave float32 accuracy. float64 computes in float64 (TF32
//    never applies to it); float16/bfloat16 compute in float32 (cuDNN's pseudo-half configs),
//    tensor cores allowed (exact products, float32 sums).
//  - cuDNN pads symmetrically. Conv pads min(lo, hi) in cuDNN and the rest of the asymmetric
//    padding explicitly (a window copy of the input). ConvTranspose is cuDNN's backward data with
//    padding p <= min(lo, hi) chosen so that cuDNN's result covers the output; when it is not the
//    output itself (asymmetric padding, output_padding beyond the stride) it is cropped (or
//    zero-extended) into the output by the same window copy.
//  - Descriptors and the algorithm are cached per (device, shapes, parameters, dtype); a problem
//    cuDNN declines is remembered and goes to the direct kernel, and so does anything past
//    cuDNN's int descriptors (a dimension or a tensor of 2^31 elements or more).
//  - Operands that are not row-major (transposed, sliced, broadcast views) are copied first;
//    workspace and scratch come from smelt's caching allocator (freed in stream order).
//  - float16/bfloat16 2-D convolutions that channels_last.h picks run channels-last: NHWC tensors
//    and an OHWI filter, cuDNN's native layout for its tensor-core kernels (given NCHW, cuDNN
//    transposed all three around each call). Operands that are NCHW are transposed here (a
//    tiled kernel); the compile passes hand over NHWC activations and OHWI weights instead, and
//    the same cuDNN problem runs either way: compiled == eager bit for bit.
// Direct path: conv_direct_source (conv_sources.h), one thread per output, the CPU's order
// (reading NHWC operands through their strides: the same order, the same bits).
#include <algorithm>
#include <atomic>
#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "smelt/errors.h"
#include "smelt/ops.h"
#include "src/backend/cuda/allocator.h"
#include "src/backend/cuda/channels_last.h"
#include "src/backend/cuda/conv_sources.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/cudnn.h"
#include "src/backend/cuda/kernels.h"
#include "src/core/stream_state.h"

namespace smelt::cuda {

namespace {

constexpr unsigned kBlock = 256;
/// Algorithms needing more workspace than this are passed over (the next one, or the direct kernel).
constexpr size_t kMaxWorkspace = size_t{256} << 20;

std::atomic<int64_t> g_cudnn_runs{0}, g_direct_runs{0};

const char* kConvArgsSource =
    "struct ConvArgs { u64 x, w, y; i64 total, cout, cg, og; i64 in[3], out[3], k[3], stride[3], pad[3], dil[3];"
    " i64 xs[5], ws[5]; };\n";

}  // namespace

// ---- Kernel sources ----------------------------------------------------------------------------

std::string conv_direct_source(Dtype dtype, bool transpose) {
  if (dtype == Dtype::Bool) throw DtypeError("conv: bool is not supported");
  const std::string t = device_type(dtype);
  std::string acc, to_acc, from_acc;
  if (is_integral(dtype)) {
    // Wrapping unsigned arithmetic (signed values sign-extended modulo 2^bits), as the CPU.
    acc = size_of(dtype) <= 4 ? "u32" : "u64";
    to_acc = "(Acc)v";
    from_acc = "(E)acc";
  } else if (dtype == Dtype::Float16 || dtype == Dtype::BFloat16) {
    acc = "float";
    to_acc = "up(v)";
    from_acc = "down<E>(acc)";
  } else {
    acc = t;
    to_acc = "v";
    from_acc = "acc";
  }
  std::string b = kConvArgsSource;
  b += "typedef " + t + " E;\ntypedef " + acc + " Acc;\n";
  b += "__device__ inline Acc to_acc(E v) { return " + to_acc + "; }\n";
  b += "extern \"C\" __global__ void k(ConvArgs a) {\n"
       "  const i64 idx = gid();\n"
       "  if (idx >= a.total) return;\n"
       "  i64 r = idx;\n"
       "  const i64 ow = r % a.out[2]; r /= a.out[2];\n"
       "  const i64 oh = r % a.out[1]; r /= a.out[1];\n"
       "  const i64 od = r % a.out[0]; r /= a.out[0];\n"
       "  const i64 o = r % a.cout, n = r / a.cout;\n"
       "  const i64 grp = o / a.og;\n"
       "  const E* x = (const E*)a.x + n * a.xs[0];\n"
       "  const E* w = (const E*)a.w;\n"
       "  Acc acc = Acc(0);\n";
  if (!transpose) {
    // y[n, o, od, oh, ow] = sum over c, kd, kh, kw of w[o, c, kd, kh, kw] * x[n, g*cg + c, pos].
    b += "  for (i64 c = 0; c < a.cg; ++c) {\n"
         "    const E* xc = x + (grp * a.cg + c) * a.xs[1];\n"
         "    const E* wc = w + o * a.ws[0] + c * a.ws[1];\n"
         "    for (i64 kd = 0; kd < a.k[0]; ++kd) {\n"
         "      const i64 id = od * a.stride[0] - a.pad[0] + kd * a.dil[0];\n"
         "      if (id < 0 || id >= a.in[0]) continue;\n"
         "      for (i64 kh = 0; kh < a.k[1]; ++kh) {\n"
         "        const i64 ih = oh * a.stride[1] - a.pad[1] + kh * a.dil[1];\n"
         "        if (ih < 0 || ih >= a.in[1]) continue;\n"
         "        const E* xr = xc + id * a.xs[2] + ih * a.xs[3];\n"
         "        const E* wr = wc + kd * a.ws[2] + kh * a.ws[3];\n"
         "        for (i64 kw = 0; kw < a.k[2]; ++kw) {\n"
         "          const i64 iw = ow * a.stride[2] - a.pad[2] + kw * a.dil[2];\n"
         "          if (iw < 0 || iw >= a.in[2]) continue;\n"
         "          acc = acc + to_acc(wr[kw * a.ws[4]]) * to_acc(xr[iw * a.xs[4]]);\n"
         "        }\n"
         "      }\n"
         "    }\n"
         "  }\n";
  } else {
    // The adjoint: input position i reaches output i*stride - pad + k*dil, so output position p
    // gathers i = (p + pad - k*dil) / stride wherever that divides and lies inside the input.
    b += "  const i64 oo = o - grp * a.og;\n"
         "  for (i64 c = 0; c < a.cg; ++c) {\n"
         "    const i64 ci = grp * a.cg + c;\n"
         "    const E* xc = x + ci * a.xs[1];\n"
         "    const E* wc = w + ci * a.ws[0] + oo * a.ws[1];\n"
         "    for (i64 kd = 0; kd < a.k[0]; ++kd) {\n"
         "      const i64 td = od + a.pad[0] - kd * a.dil[0];\n"
         "      if (td < 0 || td % a.stride[0] != 0 || td / a.stride[0] >= a.in[0]) continue;\n"
         "      for (i64 kh = 0; kh < a.k[1]; ++kh) {\n"
         "        const i64 th = oh + a.pad[1] - kh * a.dil[1];\n"
         "        if (th < 0 || th % a.stride[1] != 0 || th / a.stride[1] >= a.in[1]) continue;\n"
         "        const E* xr = xc + (td / a.stride[0]) * a.xs[2] + (th / a.stride[1]) * a.xs[3];\n"
         "        const E* wr = wc + kd * a.ws[2] + kh * a.ws[3];\n"
         "        for (i64 kw = 0; kw < a.k[2]; ++kw) {\n"
         "          const i64 tw = ow + a.pad[2] - kw * a.dil[2];\n"
         "          if (tw < 0 || tw % a.stride[2] != 0 || tw / a.stride[2] >= a.in[2]) continue;\n"
         "          acc = acc + to_acc(wr[kw * a.ws[4]]) * to_acc(xr[(tw / a.stride[2]) * a.xs[4]]);\n"
         "        }\n"
         "      }\n"
         "    }\n"
         "  }\n";
  }
  b += "  ((E*)a.y)[idx] = " + from_acc + ";\n}\n";
  return b;
}

std::string window_copy_source(size_t itemsize) {
  const char* bits = itemsize == 1 ? "u8" : itemsize == 2 ? "u16" : itemsize == 4 ? "u32" : "u64";
  return std::string(
             "struct WinArgs { u64 src, dst; i64 total; i64 dshape[5], sshape[5], sst[5], off[5]; };\n"
             "typedef ") +
         bits +
         " B;\n"
         "extern \"C\" __global__ void k(WinArgs a) {\n"
         "  const i64 idx = gid();\n"
         "  if (idx >= a.total) return;\n"
         "  i64 r = idx, o = 0;\n"
         "  bool inside = true;\n"
         "  #pragma unroll\n"
         "  for (int d = 4; d >= 0; --d) {\n"
         "    const i64 i = r % a.dshape[d] + a.off[d];\n"
         "    r /= a.dshape[d];\n"
         "    if (i < 0 || i >= a.sshape[d]) inside = false;\n"
         "    else o += i * a.sst[d];\n"
         "  }\n"
         "  ((B*)a.dst)[idx] = inside ? ((const B*)a.src)[o] : (B)0;\n"
         "}\n";
}

std::string channels_transpose_source(size_t itemsize) {
  const char* bits = itemsize == 1 ? "u8" : itemsize == 2 ? "u16" : itemsize == 4 ? "u32" : "u64";
  return std::string(
             "struct ChTArgs { u64 src, dst; i64 batches, rows, cols, tiles_r, tiles_c; };\n"
             "typedef ") +
         bits + R"CUDA( B;
extern "C" __global__ void k(ChTArgs a) {
  __shared__ B tile[32][33];  // one column of padding: the transposed reads hit 32 banks
  const i64 t = bid();
  const i64 tc = t % a.tiles_c, rest = t / a.tiles_c;
  const i64 tr = rest % a.tiles_r, b = rest / a.tiles_r;
  const i64 r0 = tr * 32, c0 = tc * 32;
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const B* src = (const B*)a.src + b * a.rows * a.cols;
  B* dst = (B*)a.dst + b * a.rows * a.cols;
  #pragma unroll
  for (int j = 0; j < 32; j += 8) {
    const i64 r = r0 + ty + j, c = c0 + tx;
    if (r < a.rows && c < a.cols) tile[ty + j][tx] = src[r * a.cols + c];
  }
  __syncthreads();
  #pragma unroll
  for (int j = 0; j < 32; j += 8) {
    const i64 c = c0 + ty + j, r = r0 + tx;
    if (r < a.rows && c < a.cols) dst[c * a.rows + r] = tile[tx][ty + j];
  }
}
)CUDA";
}

TransposeLayout cudnn_transpose_layout(const Shape& x, const Shape& w, const Shape& out, const ConvTransposeParams& p) {
  // cuDNN's backward data with padding q and result length R gives r[j] = full[j + q], where
  // full is the transposed convolution without padding, F = (in-1)*s + dil*(k-1) + 1 long, and R
  // may be anything in [F - 2q, F - 2q + s - 1] (its forward convolution must give back `in`).
  // The output is out[j] = full[j + lo] (zero past F), so it reads r at j + lo - q: q <= lo keeps
  // that offset non-negative, and q small enough makes r reach every position of full that the
  // output shows. R = F - 2q + output_padding when output_padding < s makes r the output itself
  // for lo == hi.
  const size_t k = x.size() - 2;
  TransposeLayout l;
  l.pad.resize(k);
  l.offset.resize(k);
  l.result = out;
  l.in_place = true;
  for (size_t i = 0; i < k; ++i) {
    const int64_t in = x[i + 2], kk = w[i + 2], s = p.strides[i], d = p.dilations[i];
    const int64_t lo = p.padding_lo[i], hi = p.padding_hi[i], op = p.output_padding[i];
    const int64_t full = (in - 1) * s + d * (kk - 1) + 1;
    int64_t q = std::min(lo, hi), e = op;
    if (op > s - 1) {
      e = s - 1;
      q = std::min(q, s - 1 + std::max<int64_t>(0, hi - op));
    }
    if (full - 2 * q + e < 1) q = 0;
    l.pad[i] = q;
    l.offset[i] = lo - q;
    l.result[i + 2] = full - 2 * q + e;
    l.in_place = l.in_place && l.offset[i] == 0 && l.result[i + 2] == out[i + 2];
  }
  return l;
}

ConvPathCounts conv_path_counts() { return {g_cudnn_runs.load(), g_direct_runs.load()}; }

namespace {

/// Strides of the 5 axes N, C, D, H, W for an array of rank 3..5 (missing spatial axes: 0).
void strides5(const Strides& s, int64_t (&st)[5]) {
  const int k = static_cast<int>(s.size()) - 2;
  st[0] = s[0];
  st[1] = s[1];
  for (int d = 0; d < 3; ++d) st[2 + d] = 0;
  for (int i = 0; i < k; ++i) st[2 + 3 - k + i] = s[static_cast<size_t>(i + 2)];
}

/// The shape padded to [N, C, D, H, W] with unit spatial axes in front.
void shape5(const Shape& shape, int64_t (&out)[5]) {
  const int k = static_cast<int>(shape.size()) - 2;
  out[0] = shape[0];
  out[1] = shape[1];
  for (int d = 0; d < 3; ++d) out[2 + d] = 1;
  for (int i = 0; i < k; ++i) out[2 + 3 - k + i] = shape[static_cast<size_t>(i + 2)];
}

/// Spatial axis i of k in the padded three: missing axes come first.
size_t axis3(size_t i, size_t k) { return 3 - k + i; }

}  // namespace

ConvKernelArgs conv_kernel_args(const Shape& x, const Strides& x_strides, const Shape& w, const Strides& w_strides,
                                const Shape& out, const std::vector<int64_t>& strides,
                                const std::vector<int64_t>& padding_lo, const std::vector<int64_t>& dilations,
                                int64_t groups) {
  ConvKernelArgs a;
  a.total = shape_size(out);
  a.cout = out[1];
  a.cg = x[1] / groups;
  a.og = out[1] / groups;
  const size_t k = x.size() - 2;
  for (size_t i = 0; i < k; ++i) {
    const size_t d = axis3(i, k);
    a.in[d] = x[i + 2];
    a.out[d] = out[i + 2];
    a.k[d] = w[i + 2];
    a.stride[d] = strides[i];
    a.pad[d] = padding_lo[i];
    a.dil[d] = dilations[i];
  }
  strides5(x_strides, a.xs);
  strides5(w_strides, a.ws);
  return a;
}

PoolKernelArgs pool_kernel_args(const Shape& x, const Strides& x_strides, const Shape& out, const PoolParams& p) {
  PoolKernelArgs a;
  a.total = shape_size(out);
  a.channels = out[1];
  const size_t k = x.size() - 2;
  for (size_t i = 0; i < k; ++i) {
    const size_t d = axis3(i, k);
    a.in[d] = x[i + 2];
    a.out[d] = out[i + 2];
    a.k[d] = p.kernel[i];
    a.stride[d] = p.strides[i];
    a.pad[d] = p.padding_lo[i];
    a.pad_hi[d] = p.padding_hi[i];
    a.dil[d] = p.dilations[i];
  }
  strides5(x_strides, a.xs);
  return a;
}

WindowCopyArgs window_copy_args(const Shape& src, const Strides& src_strides, const Shape& dst,
                                const std::vector<int64_t>& spatial_off) {
  WindowCopyArgs a;
  a.total = shape_size(dst);
  shape5(dst, a.dshape);
  shape5(src, a.sshape);
  strides5(src_strides, a.sst);
  const size_t k = src.size() - 2;
  for (size_t i = 0; i < k; ++i) a.off[2 + axis3(i, k)] = spatial_off[i];
  return a;
}

namespace {

// ---- Shared helpers ----------------------------------------------------------------------------

/// Copies the window `a` describes (addresses included) on the device.
void window_copy(const DeviceState& s, WindowCopyArgs& a, size_t itemsize, const std::string& what) {
  if (a.total == 0) return;
  const Kernel fn = get_kernel(s.index, "conv_window_copy|" + std::to_string(itemsize),
                               [&] { return window_copy_source(itemsize); }, what);
  launch(s, fn, blocks_for(a.total, kBlock), kBlock, &a, what);
}

/// dst (a row-major device buffer of `dshape`) = the window of `src` at spatial offset `off`.
void window_copy(const DeviceState& s, const Array& src, uint64_t dst, const Shape& dshape,
                 const std::vector<int64_t>& off, const std::string& what) {
  WindowCopyArgs a = window_copy_args(src.shape(), src.node().strides, dshape, off);
  a.src = src.size() > 0 ? dptr(src) : 0;
  a.dst = dst;
  window_copy(s, a, src.itemsize(), what);
}

// ---- Direct kernel -----------------------------------------------------------------------------

/// Runs the direct kernel on `a` (addresses set): outputs row-major [N, O, spatial...].
void run_direct(const DeviceState& s, ConvKernelArgs& a, Dtype dt, bool transpose, const std::string& what) {
  const Kernel fn = get_kernel(s.index, std::string("conv_direct|") + (transpose ? "t|" : "f|") + device_type(dt),
                               [&] { return conv_direct_source(dt, transpose); }, what);
  launch(s, fn, blocks_for(a.total, kBlock), kBlock, &a, what);
  g_direct_runs.fetch_add(1, std::memory_order_relaxed);
}

void run_direct(const Array& x, const Array& w, Array& out, const std::vector<int64_t>& strides,
                const std::vector<int64_t>& pad_lo, const std::vector<int64_t>& dil, int64_t groups, bool transpose,
                const std::string& what) {
  ConvKernelArgs a = conv_kernel_args(x.shape(), x.node().strides, w.shape(), w.node().strides, out.shape(), strides,
                                      pad_lo, dil, groups);
  a.x = dptr(x);
  a.w = dptr(w);
  a.y = dptr(out);
  run_direct(state_of(out), a, out.dtype(), transpose, what);
}

/// dst[b][c][r] = src[b][r][c] for row-major [batches, rows, cols] device buffers.
void transpose_batched(const DeviceState& s, uint64_t src, uint64_t dst, int64_t batches, int64_t rows, int64_t cols,
                       size_t itemsize, const std::string& what) {
  if (batches == 0 || rows == 0 || cols == 0) return;
  ChannelsTransposeArgs a;
  a.src = src;
  a.dst = dst;
  a.batches = batches;
  a.rows = rows;
  a.cols = cols;
  a.tiles_r = (rows + 31) / 32;
  a.tiles_c = (cols + 31) / 32;
  const Kernel fn = get_kernel(s.index, "conv_channels_transpose|" + std::to_string(itemsize),
                               [&] { return channels_transpose_source(itemsize); }, what);
  launch(s, fn, static_cast<uint64_t>(batches * a.tiles_r * a.tiles_c), 256, &a, what);
}

// ---- cuDNN -------------------------------------------------------------------------------------

/// One cuDNN handle per GPU and stream, bound to that stream at each use. cuDNN handles must not be used
/// by two threads at once: `mutex` is held from planning to the end of the enqueued call.
struct DnnHandle {
  std::mutex mutex;
  dnn::Handle handle = nullptr;
  bool tried = false;  // creation attempted (handle stays null when it failed)
};

/// The handle of the device's current stream of this thread: streams do not share a handle, whose
/// internal scratch would otherwise be used by two streams' convolutions at once.
DnnHandle& dnn_handle(const DeviceState& s) {
  static std::mutex m;
  // (device, stream id) -> handle; never destroyed
  static auto* handles = new std::map<std::pair<int, uint64_t>, std::unique_ptr<DnnHandle>>();
  const std::pair<int, uint64_t> key{s.index, smelt::detail::current_stream_id(Device::cuda(s.index))};
  std::lock_guard lock(m);
  auto& h = (*handles)[key];
  if (!h) h = std::make_unique<DnnHandle>();
  return *h;
}

/// The forward convolution cuDNN computes: fx (input) * fw (filter) -> fy (output). A transposed
/// convolution is its backward data: fy is smelt's input and fx smelt's output.
struct DnnProblem {
  bool backward = false;
  bool nhwc = false;  // tensors NHWC and the filter OHWI (channels_last.h), else NCHW and OIHW
  Dtype dtype = Dtype::Float32;
  int nd = 4;  // tensor rank: 4 or 5
  int fx[5] = {}, fw[5] = {}, fy[5] = {};
  int pad[3] = {}, stride[3] = {}, dil[3] = {};
  int groups = 1;

  std::string key(int device) const {
    std::string k = std::to_string(device) + (backward ? "|bwd|" : "|fwd|") + (nhwc ? "nhwc|" : "") +
                    dtype_name(dtype) + "|";
    auto add = [&](const int* v, int n) {
      for (int i = 0; i < n; ++i) k += std::to_string(v[i]) + ",";
      k += "|";
    };
    add(fx, nd);
    add(fw, nd);
    add(fy, nd);
    add(pad, nd - 2);
    add(stride, nd - 2);
    add(dil, nd - 2);
    return k + std::to_string(groups);
  }
};

/// Descriptors and algorithm of one problem (usable = false: cuDNN declined it).
struct DnnPlan {
  const CudnnApi* api = nullptr;
  bool usable = false;
  dnn::TensorDesc x = nullptr, y = nullptr;
  dnn::FilterDesc w = nullptr;
  dnn::ConvDesc conv = nullptr;
  int algo = 0;
  size_t workspace = 0;
  ~DnnPlan() {
    if (!api) return;
    if (conv) api->cudnnDestroyConvolutionDescriptor(conv);
    if (w) api->cudnnDestroyFilterDescriptor(w);
    if (y) api->cudnnDestroyTensorDescriptor(y);
    if (x) api->cudnnDestroyTensorDescriptor(x);
  }
};

/// cuDNN's type of a float dtype (cudnn_dtype tells which dtypes get here).
dnn::DataType dnn_type(Dtype dt) {
  if (dt == Dtype::Float64) return dnn::CUDNN_DATA_DOUBLE;
  if (dt == Dtype::Float16) return dnn::CUDNN_DATA_HALF;
  if (dt == Dtype::BFloat16) return dnn::CUDNN_DATA_BFLOAT16;
  return dnn::CUDNN_DATA_FLOAT;
}

bool is_half(Dtype dt) { return dt == Dtype::Float16 || dt == Dtype::BFloat16; }

/// A tensor of dims [N, C, spatial...] stored row-major, or channels-last ([N, spatial..., C]).
bool set_tensor(const CudnnApi& api, dnn::TensorDesc d, dnn::DataType type, int nd, const int* dims, bool nhwc) {
  int st[5];
  if (nhwc) {
    st[1] = 1;
    st[nd - 1] = dims[1];
    for (int i = nd - 2; i >= 2; --i) st[i] = st[i + 1] * dims[i + 1];
    st[0] = st[2] * dims[2];
  } else {
    st[nd - 1] = 1;
    for (int i = nd - 2; i >= 0; --i) st[i] = st[i + 1] * dims[i + 1];
  }
  return api.cudnnSetTensorNdDescriptor(d, type, nd, dims, st) == dnn::CUDNN_STATUS_SUCCESS;
}

bool fwd_algo_allowed(int algo) {
  return algo == dnn::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
         algo == dnn::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
         algo == dnn::CUDNN_CONVOLUTION_FWD_ALGO_GEMM || algo == dnn::CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
}

/// The math type to run a candidate with in pass 0 or 1, or -1 to pass it over. float32 runs
/// FMA only (never TF32): candidates found for FMA first, then DEFAULT_MATH ones forced to FMA.
/// float64 and halves take the candidate's own math type unless it converts data.
int math_for(Dtype dt, dnn::MathType candidate, int pass) {
  if (dt == Dtype::Float32) {
    if (pass == 0) return candidate == dnn::CUDNN_FMA_MATH ? dnn::CUDNN_FMA_MATH : -1;
    return candidate == dnn::CUDNN_DEFAULT_MATH ? dnn::CUDNN_FMA_MATH : -1;
  }
  if (pass == 1 || candidate == dnn::CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return -1;
  return candidate;
}

/// One entry of cuDNN's heuristic answer (forward or backward data alike).
struct Candidate {
  int algo;
  dnn::Status status;
  dnn::Determinism determinism;
  dnn::MathType math;
};

std::unique_ptr<DnnPlan> build_plan(const CudnnApi& api, dnn::Handle h, const DnnProblem& p) {
  auto plan = std::make_unique<DnnPlan>();
  plan->api = &api;
  const auto ok = [](dnn::Status st) { return st == dnn::CUDNN_STATUS_SUCCESS; };
  const dnn::DataType type = dnn_type(p.dtype);
  const dnn::DataType compute = p.dtype == Dtype::Float64 ? dnn::CUDNN_DATA_DOUBLE : dnn::CUDNN_DATA_FLOAT;
  if (!ok(api.cudnnCreateTensorDescriptor(&plan->x)) || !ok(api.cudnnCreateTensorDescriptor(&plan->y)) ||
      !ok(api.cudnnCreateFilterDescriptor(&plan->w)) || !ok(api.cudnnCreateConvolutionDescriptor(&plan->conv)))
    return plan;
  if (!set_tensor(api, plan->x, type, p.nd, p.fx, p.nhwc) || !set_tensor(api, plan->y, type, p.nd, p.fy, p.nhwc) ||
      !ok(api.cudnnSetFilterNdDescriptor(plan->w, type, p.nhwc ? dnn::CUDNN_TENSOR_NHWC : dnn::CUDNN_TENSOR_NCHW,
                                         p.nd, p.fw)) ||
      !ok(api.cudnnSetConvolutionNdDescriptor(plan->conv, p.nd - 2, p.pad, p.stride, p.dil,
                                              dnn::CUDNN_CROSS_CORRELATION, compute)) ||
      !ok(api.cudnnSetConvolutionGroupCount(plan->conv, p.groups)) ||
      !ok(api.cudnnSetConvolutionMathType(plan->conv, p.dtype == Dtype::Float32 ? dnn::CUDNN_FMA_MATH
                                                      : is_half(p.dtype)          ? dnn::CUDNN_TENSOR_OP_MATH
                                                                                  : dnn::CUDNN_DEFAULT_MATH)))
    return plan;
  // Candidates best first (heuristics); the first allowed one whose workspace fits wins.
  std::vector<Candidate> candidates;
  int max_count = 0, returned = 0;
  if (p.backward) {
    if (!ok(api.cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max_count)) || max_count <= 0) return plan;
    std::vector<dnn::BwdDataAlgoPerf> perf(static_cast<size_t>(max_count));
    if (!ok(api.cudnnGetConvolutionBackwardDataAlgorithm_v7(h, plan->w, plan->y, plan->conv, plan->x, max_count,
                                                             &returned, perf.data())))
      return plan;
    for (int i = 0; i < returned && i < max_count; ++i) {
      const auto& r = perf[static_cast<size_t>(i)];
      candidates.push_back({r.algo, r.status, r.determinism, r.mathType});
    }
  } else {
    if (!ok(api.cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count)) || max_count <= 0) return plan;
    std::vector<dnn::FwdAlgoPerf> perf(static_cast<size_t>(max_count));
    if (!ok(api.cudnnGetConvolutionForwardAlgorithm_v7(h, plan->x, plan->w, plan->conv, plan->y, max_count, &returned,
                                                        perf.data())))
      return plan;
    for (int i = 0; i < returned && i < max_count; ++i) {
      const auto& r = perf[static_cast<size_t>(i)];
      candidates.push_back({r.algo, r.status, r.determinism, r.mathType});
    }
  }
  for (int pass = 0; pass < 2; ++pass)
    for (const Candidate& c : candidates) {
      if (c.status != dnn::CUDNN_STATUS_SUCCESS || c.determinism != dnn::CUDNN_DETERMINISTIC) continue;
      if (p.backward ? c.algo != dnn::CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 : !fwd_algo_allowed(c.algo)) continue;
      const int math = math_for(p.dtype, c.math, pass);
      if (math < 0 || !ok(api.cudnnSetConvolutionMathType(plan->conv, static_cast<dnn::MathType>(math)))) continue;
      size_t ws = 0;
      const dnn::Status st =
          p.backward ? api.cudnnGetConvolutionBackwardDataWorkspaceSize(h, plan->w, plan->y, plan->conv, plan->x,
                                                                       static_cast<dnn::BwdDataAlgo>(c.algo), &ws)
                     : api.cudnnGetConvolutionForwardWorkspaceSize(h, plan->x, plan->w, plan->conv, plan->y,
                                                                   static_cast<dnn::FwdAlgo>(c.algo), &ws);
      if (!ok(st) || ws > kMaxWorkspace) continue;
      plan->algo = c.algo;
      plan->workspace = ws;
      plan->usable = true;
      return plan;
    }
  return plan;
}

/// The cached plan of `p` (built on first use; `h` locked by the caller).
std::shared_ptr<DnnPlan> plan_for(const CudnnApi& api, dnn::Handle h, const DnnProblem& p, int device) {
  static std::mutex m;
  static auto* plans = new std::map<std::string, std::shared_ptr<DnnPlan>>();  // never destroyed
  const std::string key = p.key(device);
  {
    std::lock_guard lock(m);
    if (auto it = plans->find(key); it != plans->end()) return it->second;
  }
  std::shared_ptr<DnnPlan> plan = build_plan(api, h, p);
  std::lock_guard lock(m);
  // Many distinct shapes: start over rather than grow without bound (users hold shared_ptrs).
  if (plans->size() >= 4096) plans->clear();
  return plans->emplace(key, std::move(plan)).first->second;
}

/// Whether every value fits cuDNN's int descriptors (dims, and elements of each tensor).
bool fits_int(const int64_t* dims, int n) {
  int64_t total = 1;
  for (int i = 0; i < n; ++i) {
    if (dims[i] > INT_MAX) return false;
    total *= dims[i];
    if (total > INT_MAX) return false;
  }
  return true;
}

/// The handle `h` of the calling thread's current stream, created on first use and bound to that
/// stream on every use (threads on one stream share it, one at a time under `h.mutex`); null
/// when cuDNN cannot create one or cannot bind it (then the convolution takes the direct
/// kernel: a handle on the wrong stream would order its work wrongly). `h.mutex` held.
dnn::Handle handle_locked(const CudnnApi& api, DnnHandle& h, const DeviceState& s) {
  if (!h.tried) {
    h.tried = true;
    dnn::Handle handle = nullptr;
    if (api.cudnnCreate(&handle) == dnn::CUDNN_STATUS_SUCCESS) h.handle = handle;
  }
  if (!h.handle) return nullptr;
  if (api.cudnnSetStream(h.handle, current_stream(s)) != dnn::CUDNN_STATUS_SUCCESS) return nullptr;
  return h.handle;
}

/// Whether cuDNN (loaded: the caller checked cudnn()) has a plan for `p` on the calling thread's
/// stream: looked up (built the first time) before any operand is copied for it.
bool plan_usable(const DeviceState& s, const DnnProblem& p) {
  const CudnnApi& api = *cudnn();
  DnnHandle& h = dnn_handle(s);
  std::lock_guard lock(h.mutex);
  dnn::Handle handle = handle_locked(api, h, s);
  return handle && plan_for(api, handle, p, s.index)->usable;
}

/// Runs `p` through cuDNN: false when cuDNN is off, missing or declines (nothing was written).
/// fx/fy/fw are the device addresses of the row-major operands.
bool run_cudnn(const DeviceState& s, const DnnProblem& p, uint64_t fx, uint64_t fw, uint64_t fy,
               const std::string& what) {
  const CudnnApi* api = cudnn();
  if (!api) return false;
  DnnHandle& h = dnn_handle(s);
  std::lock_guard lock(h.mutex);
  dnn::Handle handle = handle_locked(*api, h, s);
  if (!handle) return false;
  std::shared_ptr<DnnPlan> plan = plan_for(*api, handle, p, s.index);
  if (!plan->usable) return false;
  BufferPtr workspace;
  if (plan->workspace > 0) {
    try {
      workspace = allocator(Device::cuda(s.index)).allocate(plan->workspace);
    } catch (const OutOfMemory&) {
      return false;  // the direct kernel needs none
    }
  }
  void* ws_ptr = workspace ? workspace->ptr : nullptr;
  const double one_d = 1.0, zero_d = 0.0;
  const float one_f = 1.0f, zero_f = 0.0f;
  const bool dbl = p.dtype == Dtype::Float64;
  const void* alpha = dbl ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
  const void* beta = dbl ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
  auto* px = reinterpret_cast<void*>(fx);
  auto* pw = reinterpret_cast<void*>(fw);
  auto* py = reinterpret_cast<void*>(fy);
  dnn::Status st;
  const char* call;
  if (p.backward) {
    call = "cudnnConvolutionBackwardData";
    st = api->cudnnConvolutionBackwardData(handle, alpha, plan->w, pw, plan->y, py, plan->conv,
                                           static_cast<dnn::BwdDataAlgo>(plan->algo), ws_ptr, plan->workspace, beta,
                                           plan->x, px);
  } else {
    call = "cudnnConvolutionForward";
    st = api->cudnnConvolutionForward(handle, alpha, plan->x, px, plan->w, pw, plan->conv,
                                      static_cast<dnn::FwdAlgo>(plan->algo), ws_ptr, plan->workspace, beta, plan->y,
                                      py);
  }
  if (st == dnn::CUDNN_STATUS_SUCCESS) {
    g_cudnn_runs.fetch_add(1, std::memory_order_relaxed);
    return true;  // the workspace goes back to the cache; the stream orders its reuse
  }
  // Declined before running: not supported (for good: remembered), or a bad parameter such as a
  // misaligned view (this call only). The direct kernel computes it instead.
  const int code = static_cast<int>(st);
  if (code >= 3000 && code < 4000) {
    plan->usable = false;
    return false;
  }
  if (code >= 2000 && code < 3000) return false;
  throw DeviceError(cudnn_error(*api, st, call, what));
}

bool cudnn_dtype(Dtype dt) {
  return dt == Dtype::Float32 || dt == Dtype::Float64 || dt == Dtype::Float16 || dt == Dtype::BFloat16;
}

/// Fills the problem's geometry from smelt's spatial sizes: 1-D gets a unit axis in front.
void set_geometry(DnnProblem& p, int k, const std::vector<int64_t>& strides, const std::vector<int64_t>& pad,
                  const std::vector<int64_t>& dil) {
  p.nd = k == 1 ? 4 : k + 2;
  const int lead = k == 1 ? 1 : 0;
  for (int i = 0; i < p.nd - 2; ++i) {
    p.pad[i] = 0;
    p.stride[i] = 1;
    p.dil[i] = 1;
  }
  for (int i = 0; i < k; ++i) {
    const size_t si = static_cast<size_t>(i);
    p.pad[lead + i] = static_cast<int>(pad[si]);
    p.stride[lead + i] = static_cast<int>(strides[si]);
    p.dil[lead + i] = static_cast<int>(dil[si]);
  }
}

/// dims of a [N, C, spatial...] shape for cuDNN (1-D: [N, C, 1, W]); false when out of int range.
bool dnn_dims(const Shape& shape, int (&dims)[5]) {
  if (!fits_int(shape.data(), static_cast<int>(shape.size()))) return false;
  const int k = static_cast<int>(shape.size()) - 2;
  dims[0] = static_cast<int>(shape[0]);
  dims[1] = static_cast<int>(shape[1]);
  if (k == 1) {
    dims[2] = 1;
    dims[3] = static_cast<int>(shape[2]);
    return true;
  }
  for (int i = 0; i < k; ++i) dims[2 + i] = static_cast<int>(shape[static_cast<size_t>(2 + i)]);
  return true;
}

bool params_fit_int(const std::vector<std::vector<int64_t>>& vs) {
  for (const auto& v : vs)
    for (int64_t x : v)
      if (x > INT_MAX) return false;
  return true;
}

/// A row-major device copy of `a` when it is not row-major already (the array itself otherwise).
uint64_t contiguous_ptr(const DeviceState& s, const Array& a, BufferPtr& keep, const std::string& what) {
  const auto& n = a.node();
  if (is_row_contiguous(n.shape, n.strides)) return dptr(a);
  keep = allocator(a.device()).allocate(static_cast<size_t>(a.size()) * a.itemsize());
  const uint64_t p = reinterpret_cast<uint64_t>(keep->ptr);
  window_copy(s, a, p, a.shape(), std::vector<int64_t>(static_cast<size_t>(a.ndim() - 2), 0), what);
  return p;
}

bool cudnn_conv(const ConvParams& cp, const Array& x, const Array& w, Array& out) {
  const Dtype dt = out.dtype();
  if (!cudnn_enabled() || !cudnn_dtype(dt) || !cudnn()) return false;
  if (!params_fit_int({cp.strides, cp.padding_lo, cp.padding_hi, cp.dilations}) || cp.groups > INT_MAX) return false;
  const int k = x.ndim() - 2;
  // cuDNN pads min(lo, hi) on both sides; the rest is padded explicitly.
  std::vector<int64_t> sym(static_cast<size_t>(k)), extra_lo(static_cast<size_t>(k));
  Shape padded = x.shape();
  bool explicit_pad = false;
  for (size_t i = 0; i < static_cast<size_t>(k); ++i) {
    sym[i] = std::min(cp.padding_lo[i], cp.padding_hi[i]);
    extra_lo[i] = cp.padding_lo[i] - sym[i];
    padded[i + 2] += cp.padding_lo[i] + cp.padding_hi[i] - 2 * sym[i];
    explicit_pad = explicit_pad || padded[i + 2] != x.shape()[i + 2];
  }
  DnnProblem p;
  p.dtype = dt;
  p.groups = static_cast<int>(cp.groups);
  set_geometry(p, k, cp.strides, sym, cp.dilations);
  if (!dnn_dims(padded, p.fx) || !dnn_dims(w.shape(), p.fw) || !dnn_dims(out.shape(), p.fy)) return false;
  const DeviceState& s = state_of(out);
  const std::string what = "conv";
  // The plan is looked up before any copy, so that a declined problem costs nothing.
  if (!plan_usable(s, p)) return false;
  BufferPtr xkeep, wkeep;
  uint64_t fx;
  if (explicit_pad || !is_row_contiguous(x.node().shape, x.node().strides)) {
    xkeep = allocator(x.device()).allocate(static_cast<size_t>(shape_size(padded)) * x.itemsize());
    fx = reinterpret_cast<uint64_t>(xkeep->ptr);
    std::vector<int64_t> off(extra_lo.size());
    for (size_t i = 0; i < off.size(); ++i) off[i] = -extra_lo[i];
    window_copy(s, x, fx, padded, off, what);
  } else {
    fx = dptr(x);
  }
  const uint64_t fw = contiguous_ptr(s, w, wkeep, what);
  return run_cudnn(s, p, fx, fw, dptr(out), what);
}

bool cudnn_conv_transpose(const ConvTransposeParams& cp, const Array& x, const Array& w, Array& out) {
  const Dtype dt = out.dtype();
  if (!cudnn_enabled() || !cudnn_dtype(dt) || !cudnn()) return false;
  if (!params_fit_int({cp.strides, cp.padding_lo, cp.padding_hi, cp.dilations, cp.output_padding}) ||
      cp.groups > INT_MAX)
    return false;
  const int k = x.ndim() - 2;
  const TransposeLayout lay = cudnn_transpose_layout(x.shape(), w.shape(), out.shape(), cp);
  const Shape& result = lay.result;
  DnnProblem p;
  p.backward = true;
  p.dtype = dt;
  p.groups = static_cast<int>(cp.groups);
  set_geometry(p, k, cp.strides, lay.pad, cp.dilations);
  if (!dnn_dims(result, p.fx) || !dnn_dims(w.shape(), p.fw) || !dnn_dims(x.shape(), p.fy)) return false;
  const DeviceState& s = state_of(out);
  const std::string what = "conv_transpose";
  if (!plan_usable(s, p)) return false;
  BufferPtr xkeep, wkeep, rkeep;
  const uint64_t fy = contiguous_ptr(s, x, xkeep, what);
  const uint64_t fw = contiguous_ptr(s, w, wkeep, what);
  if (lay.in_place) return run_cudnn(s, p, dptr(out), fw, fy, what);
  // cuDNN's result in scratch memory, then cropped (or zero-extended) into the output.
  rkeep = allocator(out.device()).allocate(static_cast<size_t>(shape_size(result)) * out.itemsize());
  const uint64_t r = reinterpret_cast<uint64_t>(rkeep->ptr);
  if (!run_cudnn(s, p, r, fw, fy, what)) return false;
  WindowCopyArgs a = window_copy_args(result, row_major_strides(result), out.shape(), lay.offset);
  a.src = r;
  a.dst = dptr(out);
  window_copy(s, a, out.itemsize(), what);
  return true;
}

/// A Conv that runs channels-last (conv_runs_channels_last): cuDNN on NHWC tensors and an OHWI
/// filter, or when cuDNN is off, missing or declines, the direct kernel reading them through
/// their strides (its order does not depend on the layout: the same bits as on NCHW operands).
/// Operands not already in that layout (src_block / dst_block 0, packed_weight empty) are
/// transposed into scratch; xs, ws, ys are the logical [N, C, H, W], [O, C, KH, KW], [N, O, OH, OW].
void conv_channels_last(const ConvParams& cp, const Array& x, const Array& w, Array& out, const Shape& xs,
                        const Shape& ws, const Shape& ys) {
  const Dtype dt = out.dtype();
  const DeviceState& s = state_of(out);
  const std::string what = "conv";
  const size_t item = out.itemsize();
  const int64_t n = xs[0], c = xs[1], hw = xs[2] * xs[3], o = ys[1], ohw = ys[2] * ys[3], khw = ws[2] * ws[3];
  auto scratch = [&](BufferPtr& keep, int64_t elements) {
    keep = allocator(out.device()).allocate(static_cast<size_t>(elements) * item);
    return reinterpret_cast<uint64_t>(keep->ptr);
  };
  DnnProblem p;
  p.nhwc = true;
  p.dtype = dt;
  set_geometry(p, 2, cp.strides, cp.padding_lo, cp.dilations);
  const bool dnn = cudnn_enabled() && cudnn() && params_fit_int({cp.strides, cp.padding_lo, cp.dilations}) &&
                   dnn_dims(xs, p.fx) && dnn_dims(ws, p.fw) && dnn_dims(ys, p.fy) && plan_usable(s, p);
  BufferPtr xkeep, wkeep, xt, wt, yt;
  uint64_t fx = contiguous_ptr(s, x, xkeep, what);
  if (cp.src_block == 0) {
    const uint64_t t = scratch(xt, n * c * hw);
    transpose_batched(s, fx, t, n, c, hw, item, what);
    fx = t;
  }
  uint64_t fw = contiguous_ptr(s, w, wkeep, what);
  if (cp.packed_weight.empty()) {
    const uint64_t t = scratch(wt, o * c * khw);
    transpose_batched(s, fw, t, o, c, khw, item, what);
    fw = t;
  }
  if (dnn) {
    const uint64_t fy = cp.dst_block != 0 ? dptr(out) : scratch(yt, n * ohw * o);
    if (run_cudnn(s, p, fx, fw, fy, what)) {
      if (cp.dst_block == 0) transpose_batched(s, fy, dptr(out), n, ohw, o, item, what);
      return;
    }
  }
  const Strides x_nhwc{hw * c, 1, xs[3] * c, c}, w_ohwi{khw * c, 1, ws[3] * c, c};
  ConvKernelArgs a = conv_kernel_args(xs, x_nhwc, ws, w_ohwi, ys, cp.strides, cp.padding_lo, cp.dilations, 1);
  a.x = fx;
  a.w = fw;
  a.y = cp.dst_block == 0 ? dptr(out) : scratch(yt, n * o * ohw);  // the kernel writes NCHW
  run_direct(s, a, dt, false, what);
  if (cp.dst_block != 0) transpose_batched(s, a.y, dptr(out), n, o, ohw, item, what);
}

}  // namespace

namespace {

/// The operand on the output's device. The conv ops take their device from common_device but do
/// not move a host operand (a host weight with a GPU input): moved here rather than read as a
/// device address.
Array on_device(const Array& a, Device d) {
  if (a.device() == d) return a;
  Array m = to_device(a, d);
  m.eval();
  return m;
}

}  // namespace

void eval_conv(const ConvParams& p, const std::vector<Array>& inputs, Array& out) {
  SMELT_ASSERT(p.adds.empty(), "conv: fused adds are made for CPU steps only");
  const Array x = on_device(inputs[0], out.device()), w = on_device(inputs[1], out.device());
  if (out.dtype() == Dtype::Bool) throw DtypeError("conv: bool is not supported");
  alloc_output(out);
  if (out.size() == 0) return;
  // Logical shapes: the compile passes may give NHWC activations ([N, 1, H, W, C], blocks of C)
  // and an OHWI weight to a convolution that runs channels-last.
  const Shape xs = unblocked_shape(x.shape(), p.src_block), ys = unblocked_shape(out.shape(), p.dst_block);
  const Shape ws = p.packed_weight.empty() ? w.shape() : Shape(p.packed_weight);
  const bool channels_last = conv_runs_channels_last(out.dtype(), xs, ws, p);
  SMELT_ASSERT(channels_last ? (p.src_block == 0 || p.src_block == xs[1]) && (p.dst_block == 0 || p.dst_block == ys[1])
                             : p.src_block == 0 && p.dst_block == 0 && p.packed_weight.empty(),
               "conv: a channels-last operand of a convolution that does not run channels-last");
  if (x.size() == 0) {  // no input channels, or only padding: every sum is empty
    fill_bits(out, 0);
    return;
  }
  if (channels_last) {
    conv_channels_last(p, x, w, out, xs, ws, ys);
    return;
  }
  if (cudnn_conv(p, x, w, out)) return;
  run_direct(x, w, out, p.strides, p.padding_lo, p.dilations, p.groups, false, "conv");
}

void eval_conv_transpose(const ConvTransposeParams& p, const std::vector<Array>& inputs, Array& out) {
  const Array x = on_device(inputs[0], out.device()), w = on_device(inputs[1], out.device());
  if (out.dtype() == Dtype::Bool) throw DtypeError("conv_transpose: bool is not supported");
  alloc_output(out);
  if (out.size() == 0) return;
  if (x.size() == 0) {
    fill_bits(out, 0);
    return;
  }
  if (cudnn_conv_transpose(p, x, w, out)) return;
  run_direct(x, w, out, p.strides, p.padding_lo, p.dilations, p.groups, true, "conv_transpose");
}

}  // namespace smelt::cuda
