// CPU kernels for Conv (oneDNN for float32, else im2col + tiled BLAS GEMM or direct loops), ConvTranspose (GEMM + col2im) and Pool.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "smelt/errors.h"
#include "src/backend/cpu/dnnl.h"
#include "src/backend/cpu/elementwise_math.h"
#include "src/backend/cpu/gemm.h"
#include "src/backend/cpu/kernel_utils.h"
#include "src/backend/cpu/kernels.h"
#include "src/backend/cpu/pool_rows.h"
#include "src/backend/cpu/scalar_math.h"
#include "src/core/dispatch.h"

namespace smelt::cpu {

namespace {

/// Bytes one im2col / col2im buffer may take; larger problems are tiled over rows.
constexpr int64_t kColBudget = int64_t{8} << 20;
/// Multiply-adds below which a loop stays on one thread.
constexpr int64_t kWorkGrain = int64_t{1} << 16;
/// GEMMs at least this large (m*n*k) get the threads (through their tiles) when tasks are few.
constexpr int64_t kBigGemm = int64_t{1} << 20;

/// The geometry of a convolution or pooling with the spatial axes padded to three in front
/// (a missing axis has size 1, kernel 1, stride 1, dilation 1 and no padding), so that one set
/// of loops serves 1-D, 2-D and 3-D.
struct Geom {
  int spatial = 3;  // the real number of spatial axes (the last `spatial` entries below)
  int64_t batch = 0, in_ch = 0, out_ch = 0, groups = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, pad_hi[3] = {0, 0, 0}, dil[3] = {1, 1, 1};

  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t k_size() const { return k[0] * k[1] * k[2]; }
  int64_t in_per_group() const { return in_ch / groups; }
  int64_t out_per_group() const { return out_ch / groups; }
};

/// The geometry of x -> y, each row-major [N, C, spatial...] or channel-blocked
/// [N, C/b, spatial..., b] (block b; 0: row-major), read from the shapes in place: a small
/// model's compiled call runs tens of convolutions and poolings, and unblocked copies of the
/// shapes were heap allocations each. `kernel` holds one size per spatial axis.
Geom make_geom(const Shape& x, int64_t x_block, const Shape& y, int64_t y_block, const int64_t* kernel,
               size_t kernel_axes, const std::vector<int64_t>& strides, const std::vector<int64_t>& lo,
               const std::vector<int64_t>& hi, const std::vector<int64_t>& dil, int64_t groups) {
  const size_t xr = x.size() - (x_block ? 1 : 0), yr = y.size() - (y_block ? 1 : 0);
  SMELT_ASSERT(xr >= 3 && yr == xr && (!x_block || x.back() == x_block) && (!y_block || y.back() == y_block),
               "conv: the input and output shapes do not match");
  Geom g;
  g.batch = x[0];
  g.in_ch = x_block ? x[1] * x_block : x[1];
  g.out_ch = y_block ? y[1] * y_block : y[1];
  g.groups = groups;
  const size_t k = xr - 2;
  g.spatial = static_cast<int>(k);
  SMELT_ASSERT(k >= 1 && k <= 3 && kernel_axes == k && strides.size() == k && lo.size() == k && hi.size() == k &&
                   dil.size() == k,
               "conv: parameters do not match the spatial rank");
  for (size_t i = 0; i < k; ++i) {
    const size_t d = 3 - k + i;
    g.in[d] = x[i + 2];
    g.out[d] = y[i + 2];
    g.k[d] = kernel[i];
    g.stride[d] = strides[i];
    g.pad[d] = lo[i];
    g.pad_hi[d] = hi[i];
    g.dil[d] = dil[i];
  }
  return g;
}

/// A Conv step's geometry: the kernel's sizes from the weight's shape [O, C/groups, K...].
Geom conv_step_geom(const Shape& x, const Shape& y, const Shape& w, const ConvParams& p) {
  SMELT_ASSERT(w.size() >= 3, "conv: the weight has no spatial axes");
  return make_geom(x, p.src_block, y, p.dst_block, w.data() + 2, w.size() - 2, p.strides, p.padding_lo,
                   p.padding_hi, p.dilations, p.groups);
}

/// The indices i in [0, count) with lo <= off + i*step < hi, as [first, last) (Range: pool_rows.h); step > 0.
Range valid_range(int64_t off, int64_t step, int64_t lo, int64_t hi, int64_t count) {
  // first: smallest i with off + i*step >= lo; last: smallest i with off + i*step >= hi.
  // In 128 bits: a stride or dilation near 2^63 (legal when the output has one position) must not
  // overflow the rounding-up (found by the fuzzer under UBSan).
  // The 128-bit division costs ~100 cycles (libgcc's __divti3): poolings call this for every
  // output row, so it runs only where the 64-bit difference overflows.
  auto at_least = [&](int64_t bound) -> int64_t {
    int64_t need64;
    if (!__builtin_sub_overflow(bound, off, &need64)) {
      if (need64 <= 0) return 0;
      const int64_t i = need64 / step + (need64 % step != 0);  // no overflow: need64 > 0, step > 0
      return i > count ? count : i;
    }
    const __int128 need = static_cast<__int128>(bound) - off;
    if (need <= 0) return 0;
    const __int128 i = (need + step - 1) / step;
    return i > count ? count : static_cast<int64_t>(i);
  };
  int64_t first = std::min(at_least(lo), count);
  int64_t last = std::min(at_least(hi), count);
  return {first, std::max(first, last)};
}

/// Row-major data of `a` as Out; a's own data when it is already row-major Out.
template <class Out, class In>
const Out* contiguous_as(const Array& a, std::vector<Out>& storage) {
  const auto& n = a.node();
  if constexpr (std::is_same_v<In, Out>) {
    if (is_row_contiguous(n.shape, n.strides)) return in_ptr<Out>(a);
  }
  storage.resize(static_cast<size_t>(n.size()));
  Strides os = row_major_strides(n.shape);
  const In* src = in_ptr<In>(a);
  Out* dst = storage.data();
  parallel_strided<2>(n.shape, {&n.strides, &os},
                      [&](const std::array<int64_t, 2>& off, int64_t len, const std::array<int64_t, 2>& st) {
                        const In* s = src + off[0];
                        Out* d = dst + off[1];
                        for (int64_t i = 0; i < len; ++i) d[i * st[1]] = convert<Out, In>(s[i * st[0]]);
                      });
  return storage.data();
}

/// Converts a float result buffer into the half output.
template <class T>
void store_converted(const std::vector<float>& src, Array& out) {
  T* dst = out_ptr<T>(out);
  parallel_for(static_cast<int64_t>(src.size()), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] = convert<T, float>(src[i]);
  });
}

/// C[m,n] = op(A)[m,k] * B[k,n], row-major; op(A) = A or A^T. Cut into tiles fixed by the
/// shapes (gemm.h), spread over the pool unless this runs inside a parallel task already.
template <class S>
void gemm(bool trans_a, int64_t m, int64_t n, int64_t k, const S* a, int64_t lda, const S* b, int64_t ldb, S* c,
          int64_t ldc) {
  GemmArgs<S> g;
  g.trans_a = trans_a;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.lda = lda;
  g.b = b;
  g.ldb = ldb;
  g.c = c;
  g.ldc = ldc;
  cpu::gemm<S>(g);
}

/// Grain for a loop over `tasks` independent GEMM tasks of `gemm_size` multiply-adds each. Few
/// big tasks run in order so that the GEMM's tiles and the inner loops get the threads;
/// otherwise the tasks themselves are spread. Only the schedule changes: each output element is
/// computed by the same arithmetic (the GEMM's tiles are fixed by its shape), so the result does
/// not depend on the thread count.
int64_t task_grain(int64_t tasks, int64_t work_per_task, int64_t gemm_size) {
  if (gemm_size >= kBigGemm && tasks < num_threads()) return tasks;
  return std::max<int64_t>(1, kWorkGrain / std::max<int64_t>(1, work_per_task));
}

// ---- Conv -------------------------------------------------------------------------------------

/// Columns for output rows [row0, row1) of one group: col[(c,kd,kh,kw), (row,ow)], zeros where the
/// window reads padding. `x` is the group's first input channel.
template <class S>
void im2col(const S* x, const Geom& g, int64_t row0, int64_t row1, S* col) {
  const int64_t K = g.k_size(), rows_k = g.in_per_group() * K;
  const int64_t OW = g.out[2], OH = g.out[1], P = (row1 - row0) * OW;
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2];
  parallel_for(rows_k, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, P)), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const int64_t c = r / K, kk = r % K;
      const int64_t kd = kk / (g.k[1] * g.k[2]), kh = (kk / g.k[2]) % g.k[1], kw = kk % g.k[2];
      const int64_t off_w = kw * g.dil[2] - g.pad[2];
      const Range ow = valid_range(off_w, g.stride[2], 0, W, OW);
      const S* xc = x + c * g.in_size();
      S* dst = col + r * P;
      for (int64_t row = row0; row < row1; ++row, dst += OW) {
        const int64_t id = (row / OH) * g.stride[0] - g.pad[0] + kd * g.dil[0];
        const int64_t ih = (row % OH) * g.stride[1] - g.pad[1] + kh * g.dil[1];
        if (id < 0 || id >= D || ih < 0 || ih >= H) {
          std::fill(dst, dst + OW, S(0));
          continue;
        }
        const S* src = xc + (id * H + ih) * W;
        std::fill(dst, dst + ow.first, S(0));
        if (g.stride[2] == 1) {
          std::copy(src + ow.first + off_w, src + ow.last + off_w, dst + ow.first);
        } else {
          const int64_t s = g.stride[2];
          for (int64_t o = ow.first; o < ow.last; ++o) dst[o] = src[o * s + off_w];
        }
        std::fill(dst + ow.last, dst + OW, S(0));
      }
    }
  });
}

/// Conv by im2col + GEMM per (batch, group, tile of output rows). A pointwise convolution
/// (1x1 kernel, unit strides, no padding) multiplies the input plane directly.
template <class S>
void conv_gemm(const S* x, const S* w, S* y, const Geom& g) {
  const int64_t G = g.groups, Cg = g.in_per_group(), Og = g.out_per_group();
  const int64_t K = g.k_size(), CK = Cg * K;
  const int64_t Pin = g.in_size(), Pout = g.out_size(), OW = g.out[2], rows = g.out[0] * g.out[1];
  bool pointwise = K == 1;
  for (int i = 0; i < 3; ++i) pointwise = pointwise && g.stride[i] == 1 && g.pad[i] == 0 && g.out[i] == g.in[i];
  const int64_t row_bytes = CK * OW * static_cast<int64_t>(sizeof(S));
  const int64_t per_tile =
      pointwise ? rows : std::clamp<int64_t>(kColBudget / std::max<int64_t>(1, row_bytes), 1, rows);
  const int64_t tiles = (rows + per_tile - 1) / per_tile;
  const int64_t tasks = g.batch * G * tiles;
  const int64_t gemm_size = Og * CK * per_tile * OW;
  parallel_for(tasks, task_grain(tasks, gemm_size + CK * per_tile * OW, gemm_size), [&](int64_t b, int64_t e) {
    std::vector<S> col;
    for (int64_t t = b; t < e; ++t) {
      const int64_t n = t / (G * tiles), grp = (t / tiles) % G, tile = t % tiles;
      const int64_t row0 = tile * per_tile, row1 = std::min(rows, row0 + per_tile), P = (row1 - row0) * OW;
      const S* xg = x + (n * g.in_ch + grp * Cg) * Pin;
      const S* wg = w + grp * Og * CK;
      S* yg = y + (n * g.out_ch + grp * Og) * Pout + row0 * OW;
      if (pointwise) {
        gemm<S>(false, Og, P, Cg, wg, CK, xg + row0 * OW, Pin, yg, Pout);
        continue;
      }
      col.resize(static_cast<size_t>(CK * P));
      im2col<S>(xg, g, row0, row1, col.data());
      gemm<S>(false, Og, P, CK, wg, CK, col.data(), P, yg, Pout);
    }
  });
}

/// The accumulator of a direct loop: wrapping unsigned arithmetic for integers (exact modulo
/// 2^bits, with no signed overflow), float for halves, the type itself for float/double.
template <class T>
using acc_t =
    std::conditional_t<std::is_integral_v<T>, std::conditional_t<(sizeof(T) > 4), uint64_t, uint32_t>, compute_t<T>>;

template <class T>
acc_t<T> to_acc(T v) {
  if constexpr (is_half_v<T>)
    return static_cast<float>(v);
  else
    return static_cast<acc_t<T>>(v);  // signed to unsigned: sign-extended modulo 2^bits
}

template <class T>
T from_acc(acc_t<T> v) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(v);  // modular narrowing (C++20)
  else
    return convert<T, acc_t<T>>(v);
}

/// Conv as direct loops over each output row (exact for integers; used for floats when each
/// group has one input channel, where a GEMM would have a tiny inner dimension).
template <class T>
void conv_direct(const T* x, const T* w, T* y, const Geom& g) {
  using Acc = acc_t<T>;
  const int64_t Cg = g.in_per_group(), Og = g.out_per_group(), K = g.k_size();
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2];
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2];
  const int64_t rows = g.batch * g.out_ch * OD * OH;
  const int64_t work = std::max<int64_t>(1, Cg * K * OW);
  parallel_for(rows, std::max<int64_t>(1, kWorkGrain / work), [&](int64_t b, int64_t e) {
    std::vector<Acc> acc(static_cast<size_t>(OW));
    for (int64_t r = b; r < e; ++r) {
      const int64_t oh = r % OH, od = (r / OH) % OD, o = (r / (OH * OD)) % g.out_ch, n = r / (OH * OD * g.out_ch);
      const int64_t grp = o / Og;
      std::fill(acc.begin(), acc.end(), Acc(0));
      Acc* a = acc.data();
      for (int64_t c = 0; c < Cg; ++c) {
        const T* xc = x + (n * g.in_ch + grp * Cg + c) * g.in_size();
        const T* wc = w + (o * Cg + c) * K;
        for (int64_t kd = 0; kd < g.k[0]; ++kd) {
          const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dil[0];
          if (id < 0 || id >= D) continue;
          for (int64_t kh = 0; kh < g.k[1]; ++kh) {
            const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dil[1];
            if (ih < 0 || ih >= H) continue;
            const T* src = xc + (id * H + ih) * W;
            for (int64_t kw = 0; kw < g.k[2]; ++kw) {
              const Acc wv = to_acc(wc[(kd * g.k[1] + kh) * g.k[2] + kw]);
              const int64_t off = kw * g.dil[2] - g.pad[2];
              const Range ow = valid_range(off, g.stride[2], 0, W, OW);
              if (g.stride[2] == 1) {
                for (int64_t i = ow.first; i < ow.last; ++i) a[i] += wv * to_acc(src[i + off]);
              } else {
                const int64_t st = g.stride[2];
                for (int64_t i = ow.first; i < ow.last; ++i) a[i] += wv * to_acc(src[i * st + off]);
              }
            }
          }
        }
      }
      T* dst = y + r * OW;
      for (int64_t i = 0; i < OW; ++i) dst[i] = from_acc<T>(a[i]);
    }
  });
}

DnnlConv dnnl_geometry(const Geom& g) {
  DnnlConv c;
  c.spatial = g.spatial;
  c.batch = g.batch;
  c.in_ch = g.in_ch;
  c.out_ch = g.out_ch;
  c.groups = g.groups;
  for (int i = 0; i < 3; ++i) {
    c.in[i] = g.in[i];
    c.out[i] = g.out[i];
    c.k[i] = g.k[i];
    c.stride[i] = g.stride[i];
    c.pad_lo[i] = g.pad[i];
    c.pad_hi[i] = g.pad_hi[i];
    c.dil[i] = g.dil[i];
  }
  return c;
}

/// oneDNN's geometry of a Conv step whose Geom is `g`, with the step's layouts.
DnnlConv dnnl_step_geometry(const Geom& g, const ConvParams& p) {
  DnnlConv c = dnnl_geometry(g);
  c.src_block = p.src_block;
  c.dst_block = p.dst_block;
  return c;
}

}  // namespace

DnnlConv dnnl_conv_geometry(const Shape& x, const Shape& w, const Shape& y, const ConvParams& p) {
  return dnnl_step_geometry(conv_step_geom(x, y, w, p), p);
}

namespace {

// ---- 1x1 convolutions of a 1x1 image ----------------------------------------------------------

/// Whether `g` is a 1x1 convolution of a 1x1 image (dnnl.h's rule, which oneDNN declines).
bool is_matrix_vector(const Geom& g) { return is_matrix_vector(dnnl_geometry(g)); }

/// A matrix-vector product per image (is_matrix_vector) as dot products over the output
/// channels, each computed whole by one thread: the bits do not depend on the thread count, and
/// compiled calls run it as eager ones do (oneDNN declines the geometry: dnnl.cpp). oneDNN's
/// sgemm with one column had streamed the weights at ~30 GB/s: MobileNetV3-small's 576 -> 144
/// layer at 224 x 224 took 12 us on 2 threads (AMD EPYC, AVX-512).
template <class S>
void conv_matrix_vector(const S* x, const S* w, S* y, const Geom& g) {
  DotRowsFn<S> fn;
  if constexpr (std::is_same_v<S, float>) fn = dot_rows_for(cpu_isa());
  else fn = dot_rows_f64();
  const int64_t c = g.in_ch, o = g.out_ch;
  parallel_for(g.batch * o, std::max<int64_t>(1, kWorkGrain / std::max<int64_t>(1, c)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e;) {
      const int64_t n = t / o, o0 = t % o, o1 = std::min(o, o0 + (e - t));
      fn(w, x + n * c, y + n * o, c, o0, o1);
      t += o1 - o0;
    }
  });
}

/// Float convolutions: oneDNN takes float32 (halves arrive as float32) when built in and the
/// geometry suits it; the choice depends on the geometry alone, so it is the same on every call.
template <class S>
void conv_float(const S* x, const S* w, S* y, const Geom& g) {
  if (is_matrix_vector(g)) {
    conv_matrix_vector<S>(x, w, y, g);
    return;
  }
  if constexpr (std::is_same_v<S, float>) {
    if (dnnl_conv_f32(dnnl_geometry(g), x, w, y)) return;
  }
  if (g.in_per_group() == 1)
    conv_direct<S>(x, w, y, g);
  else
    conv_gemm<S>(x, w, y, g);
}

// ---- ConvTranspose ----------------------------------------------------------------------------

/// Transposed conv per (batch, group): col = W_g^T x_g by GEMM over tiles of input rows, then
/// col2im adds each column into the output, one output channel per thread.
template <class S>
void conv_transpose_gemm(const S* x, const S* w, S* y, const Geom& g) {
  const int64_t G = g.groups, Cg = g.in_per_group(), Og = g.out_per_group(), K = g.k_size(), OK = Og * K;
  const int64_t Pin = g.in_size(), Pout = g.out_size(), W = g.in[2], H = g.in[1], rows = g.in[0] * g.in[1];
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2];
  const int64_t row_bytes = OK * W * static_cast<int64_t>(sizeof(S));
  const int64_t per_tile = std::clamp<int64_t>(kColBudget / std::max<int64_t>(1, row_bytes), 1, rows);
  const int64_t tiles = (rows + per_tile - 1) / per_tile;
  const int64_t tasks = g.batch * G;
  const int64_t gemm_size = OK * Cg * per_tile * W;
  parallel_for(tasks, task_grain(tasks, (gemm_size + OK * per_tile * W) * tiles, gemm_size), [&](int64_t b, int64_t e) {
    std::vector<S> col;
    for (int64_t t = b; t < e; ++t) {
      const int64_t n = t / G, grp = t % G;
      const S* xg = x + (n * g.in_ch + grp * Cg) * Pin;
      const S* wg = w + grp * Cg * OK;
      S* yg = y + (n * g.out_ch + grp * Og) * Pout;
      for (int64_t tile = 0; tile < tiles; ++tile) {
        const int64_t row0 = tile * per_tile, row1 = std::min(rows, row0 + per_tile), P = (row1 - row0) * W;
        col.resize(static_cast<size_t>(OK * P));
        gemm<S>(true, OK, P, Cg, wg, OK, xg + row0 * W, Pin, col.data(), P);
        const S* cd = col.data();
        parallel_for(Og, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, K * P)), [&](int64_t ob, int64_t oe) {
          for (int64_t o = ob; o < oe; ++o) {
            S* yo = yg + o * Pout;
            for (int64_t kk = 0; kk < K; ++kk) {
              const int64_t kd = kk / (g.k[1] * g.k[2]), kh = (kk / g.k[2]) % g.k[1], kw = kk % g.k[2];
              const int64_t off_w = kw * g.dil[2] - g.pad[2];
              const Range iw = valid_range(off_w, g.stride[2], 0, OW, W);
              const S* src = cd + (o * K + kk) * P;
              for (int64_t row = row0; row < row1; ++row, src += W) {
                const int64_t od = (row / H) * g.stride[0] - g.pad[0] + kd * g.dil[0];
                const int64_t oh = (row % H) * g.stride[1] - g.pad[1] + kh * g.dil[1];
                if (od < 0 || od >= OD || oh < 0 || oh >= OH) continue;
                S* dst = yo + (od * OH + oh) * OW;
                const int64_t st = g.stride[2];
                for (int64_t i = iw.first; i < iw.last; ++i) dst[i * st + off_w] += src[i];
              }
            }
          }
        });
      }
    }
  });
}

/// Transposed conv as a gather per output row (exact for integers; floats with one input
/// channel per group).
template <class T>
void conv_transpose_direct(const T* x, const T* w, T* y, const Geom& g) {
  using Acc = acc_t<T>;
  const int64_t Cg = g.in_per_group(), Og = g.out_per_group(), K = g.k_size();
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2];
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2];
  const int64_t rows = g.batch * g.out_ch * OD * OH;
  const int64_t work = std::max<int64_t>(1, Cg * K * W);
  parallel_for(rows, std::max<int64_t>(1, kWorkGrain / work), [&](int64_t b, int64_t e) {
    std::vector<Acc> acc(static_cast<size_t>(OW));
    for (int64_t r = b; r < e; ++r) {
      const int64_t oh = r % OH, od = (r / OH) % OD, o = (r / (OH * OD)) % g.out_ch, n = r / (OH * OD * g.out_ch);
      const int64_t grp = o / Og, oo = o % Og;
      std::fill(acc.begin(), acc.end(), Acc(0));
      Acc* a = acc.data();
      for (int64_t c = 0; c < Cg; ++c) {
        const int64_t ci = grp * Cg + c;
        const T* xc = x + (n * g.in_ch + ci) * g.in_size();
        const T* wc = w + (ci * Og + oo) * K;
        for (int64_t kd = 0; kd < g.k[0]; ++kd) {
          // od = id*stride - pad + kd*dil  =>  id = (od + pad - kd*dil) / stride when it divides.
          const int64_t td = od + g.pad[0] - kd * g.dil[0];
          if (td < 0 || td % g.stride[0] != 0 || td / g.stride[0] >= D) continue;
          const int64_t id = td / g.stride[0];
          for (int64_t kh = 0; kh < g.k[1]; ++kh) {
            const int64_t th = oh + g.pad[1] - kh * g.dil[1];
            if (th < 0 || th % g.stride[1] != 0 || th / g.stride[1] >= H) continue;
            const T* src = xc + (id * H + th / g.stride[1]) * W;
            for (int64_t kw = 0; kw < g.k[2]; ++kw) {
              const Acc wv = to_acc(wc[(kd * g.k[1] + kh) * g.k[2] + kw]);
              const int64_t off = kw * g.dil[2] - g.pad[2];
              const Range iw = valid_range(off, g.stride[2], 0, OW, W);
              const int64_t st = g.stride[2];
              for (int64_t i = iw.first; i < iw.last; ++i) a[i * st + off] += wv * to_acc(src[i]);
            }
          }
        }
      }
      T* dst = y + r * OW;
      for (int64_t i = 0; i < OW; ++i) dst[i] = from_acc<T>(a[i]);
    }
  });
}

template <class S>
void conv_transpose_float(const S* x, const S* w, S* y, const Geom& g) {
  if (g.in_per_group() == 1) {
    conv_transpose_direct<S>(x, w, y, g);
    return;
  }
  std::fill(y, y + g.batch * g.out_ch * g.out_size(), S(0));
  conv_transpose_gemm<S>(x, w, y, g);
}

/// Runs a float kernel for any float dtype (halves through float32, rounded once at the end)
/// and `direct` for integers.
template <class T, class FloatKernel, class IntKernel>
void run_typed(const Array& xa, const Array& wa, Array& out, const Geom& g, FloatKernel float_kernel,
               IntKernel int_kernel) {
  if constexpr (std::is_same_v<T, bool>) {
    throw DtypeError("conv: bool is not supported");
  } else if constexpr (is_half_v<T>) {
    std::vector<float> xs, ws, ys(static_cast<size_t>(out.size()));
    const float* x = contiguous_as<float, T>(xa, xs);
    const float* w = contiguous_as<float, T>(wa, ws);
    float_kernel(x, w, ys.data(), g);
    store_converted<T>(ys, out);
  } else {
    std::vector<T> xs, ws;
    const T* x = contiguous_as<T, T>(xa, xs);
    const T* w = contiguous_as<T, T>(wa, ws);
    if constexpr (std::is_floating_point_v<T>)
      float_kernel(x, w, out_ptr<T>(out), g);
    else
      int_kernel(x, w, out_ptr<T>(out), g);
  }
}

// ---- Pool -------------------------------------------------------------------------------------

/// True when every window lies wholly inside the input, undilated and unpadded, and pool()'s
/// row loop would not vectorize (a column stride above 1, as 2x2 stride 2) or its rows are short:
/// pool_max_inside then runs instead of pool()'s span tables, whose setup per row costs more than
/// the few comparisons of a small output (the 4x4 outputs of tiny_cnn's last pooling).
bool max_windows_inside(const Geom& g) {
  if (g.stride[2] == 1 && g.out[2] > 8) return false;
  // Its table holds one offset per window position: large windows keep the general loop.
  if (g.k[0] > 64 || g.k[1] > 64 || g.k[2] > 64 || g.k_size() > 1024) return false;
  for (int d = 0; d < 3; ++d) {
    int64_t last;  // the input position after the last window: (out - 1) * stride + k
    if (g.pad[d] != 0 || g.dil[d] != 1 || g.k[d] < 1 || g.out[d] < 1 ||
        __builtin_mul_overflow(g.out[d] - 1, g.stride[d], &last) || __builtin_add_overflow(last, g.k[d], &last) ||
        last > g.in[d])
      return false;
  }
  return true;
}

/// Max pooling where max_windows_inside(g): each output compares its window's positions in
/// pool()'s order (kd, kh, kw ascending) with pool()'s comparison, so the bits are pool()'s.
template <class T>
void pool_max_inside(const T* x, T* y, const Geom& g) {
  using C = compute_t<T>;
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2], H = g.in[1], W = g.in[2];
  const int64_t KD = g.k[0], KH = g.k[1], KW = g.k[2];
  const C init = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                      : std::numeric_limits<C>::lowest();
  // The window's positions in pool()'s order, as offsets from its first.
  std::vector<int64_t> offsets;
  offsets.reserve(static_cast<size_t>(g.k_size()));
  for (int64_t i = 0; i < KD; ++i)
    for (int64_t j = 0; j < KH; ++j)
      for (int64_t l = 0; l < KW; ++l) offsets.push_back((i * H + j) * W + l);
  const int64_t rows = g.batch * g.in_ch * OD * OH;
  const int64_t work = std::max<int64_t>(1, OW * g.k_size());
  // A row's outputs go kTile at a time, window position by window position: the outputs are
  // independent, so their compares overlap instead of forming one chain per output (each output
  // still compares its positions in pool()'s order).
  constexpr int64_t kTile = 64;
  const int64_t SW = g.stride[2];
  parallel_for(rows, std::max<int64_t>(1, kGrain / work), [&](int64_t b, int64_t e) {
    C acc[kTile];
    for (int64_t r = b; r < e; ++r) {
      const int64_t oh = r % OH, od = (r / OH) % OD, plane = r / (OH * OD);
      const T* xr = x + plane * g.in_size() + (od * g.stride[0] * H + oh * g.stride[1]) * W;
      T* dst = y + r * OW;
      for (int64_t ow0 = 0; ow0 < OW; ow0 += kTile) {
        const int64_t n = std::min(kTile, OW - ow0);
        const T* xt = xr + ow0 * SW;
        for (int64_t j = 0; j < n; ++j) acc[j] = init;
        for (const int64_t off : offsets) {
          for (int64_t j = 0; j < n; ++j) {
            const C v = static_cast<C>(xt[j * SW + off]);
            if constexpr (std::is_floating_point_v<C>)
              acc[j] = scalar::select((v > acc[j]) | (v != v), v, acc[j]);  // NaN wins and stays; a mask, not a branch
            else
              acc[j] = v > acc[j] ? v : acc[j];
          }
        }
        for (int64_t j = 0; j < n; ++j) dst[ow0 + j] = convert<T, C>(acc[j]);
      }
    }
  });
}

/// Pooling over output rows. Each row accumulates window offset by window offset across the
/// whole row (the inner loop runs along the row and vectorizes), then divides once for averages.
template <class T, bool kMax>
void pool(const T* x, T* y, const Geom& g, bool count_include_pad) {
  using C = compute_t<T>;
  // Max compares in the element's compute type; average sums in double or wrapping 64-bit integers.
  using Acc = std::conditional_t<kMax, C, std::conditional_t<std::is_floating_point_v<C>, double, uint64_t>>;
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2];
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2], KW = g.k[2], SW = g.stride[2];
  if constexpr (kMax) {
    if (max_windows_inside(g)) {
      pool_max_inside<T>(x, y, g);
      return;
    }
  }
  // The kernel columns that read inside the row for some output, as ascending disjoint spans.
  // Only these are walked: a kernel far wider than the input (SAME padding with a kernel of 2^31)
  // must cost what it reads, not its width (the fuzzer found a 16 TiB table of columns and
  // loops of 2^40 empty columns). Output ow reads columns valid_range(ow*SW - pad, dil, 0, W, KW);
  // these move left as ow grows, so walking ow downwards yields them in ascending order.
  std::vector<std::pair<int64_t, int64_t>> spans;
  int64_t n_cols = 0;
  for (int64_t ow = OW - 1; ow >= 0; --ow) {
    const Range r = valid_range(ow * SW - g.pad[2], g.dil[2], 0, W, KW);
    if (r.first == r.last) continue;
    if (!spans.empty() && r.first <= spans.back().second) {
      const int64_t grow = std::max(spans.back().second, r.last) - spans.back().second;
      spans.back().second += grow;
      n_cols += grow;
    } else {
      spans.push_back({r.first, r.last});
      n_cols += r.last - r.first;
    }
  }
  // For each such column, the outputs whose window reads inside the row. Each column reads at
  // least once per row, so this table is never larger than one row's reads; beyond kMaxCachedCols
  // (a pathological stride and padding) the ranges are computed per row instead of stored.
  constexpr int64_t kMaxCachedCols = int64_t{1} << 16;
  const bool cached = n_cols <= kMaxCachedCols;
  auto column_range = [&](int64_t kw) { return valid_range(kw * g.dil[2] - g.pad[2], SW, 0, W, OW); };
  std::vector<Range> cols;
  if (cached)
    for (const auto& [first, last] : spans)
      for (int64_t kw = first; kw < last; ++kw) cols.push_back(column_range(kw));
  // Window positions counted along the row: inside the input, or inside input and padding.
  std::vector<int64_t> count_w(static_cast<size_t>(OW));
  for (int64_t ow = 0; ow < OW; ++ow) {
    const int64_t w0 = ow * SW - g.pad[2];
    const Range r = count_include_pad ? valid_range(w0, g.dil[2], -g.pad[2], W + g.pad_hi[2], KW)
                                      : valid_range(w0, g.dil[2], 0, W, KW);
    count_w[ow] = r.last - r.first;
  }
  const Acc init = kMax ? (std::numeric_limits<Acc>::has_infinity ? -std::numeric_limits<Acc>::infinity()
                                                                  : std::numeric_limits<Acc>::lowest())
                        : Acc(0);
  const int64_t rows = g.batch * g.in_ch * OD * OH;
  // Reads per row at most (saturating: only the grain depends on it).
  int64_t work = std::max<int64_t>(1, std::max(n_cols, OW));
  for (int64_t t : {std::min(g.k[0], D), std::min(g.k[1], H)})
    if (__builtin_mul_overflow(work, std::max<int64_t>(1, t), &work)) work = std::numeric_limits<int64_t>::max();
  parallel_for(rows, std::max<int64_t>(1, kGrain / work), [&](int64_t b, int64_t e) {
    std::vector<Acc> acc(static_cast<size_t>(OW));
    for (int64_t r = b; r < e; ++r) {
      const int64_t oh = r % OH, od = (r / OH) % OD, plane = r / (OH * OD);
      const T* xp = x + plane * g.in_size();
      const int64_t d0 = od * g.stride[0] - g.pad[0], h0 = oh * g.stride[1] - g.pad[1];
      const Range kd = valid_range(d0, g.dil[0], 0, D, g.k[0]);
      const Range kh = valid_range(h0, g.dil[1], 0, H, g.k[1]);
      std::fill(acc.begin(), acc.end(), init);
      Acc* a = acc.data();
      for (int64_t i = kd.first; i < kd.last; ++i)
        for (int64_t j = kh.first; j < kh.last; ++j) {
          const T* src = xp + ((d0 + i * g.dil[0]) * H + h0 + j * g.dil[1]) * W;
          size_t col = 0;
          for (const auto& [first, last] : spans)
            for (int64_t kw = first; kw < last; ++kw, ++col) {
              const int64_t off = kw * g.dil[2] - g.pad[2];
              const Range c = cached ? cols[col] : column_range(kw);
              for (int64_t ow = c.first; ow < c.last; ++ow) {
                const C v = static_cast<C>(src[ow * SW + off]);
                if constexpr (!kMax) {
                  a[ow] += static_cast<Acc>(v);
                } else if constexpr (std::is_floating_point_v<C>) {
                  a[ow] = (v > a[ow] || v != v) ? v : a[ow];  // NaN wins and stays
                } else {
                  a[ow] = v > a[ow] ? v : a[ow];
                }
              }
            }
        }
      T* dst = y + r * OW;
      if constexpr (kMax) {
        for (int64_t ow = 0; ow < OW; ++ow) dst[ow] = convert<T, C>(a[ow]);
        continue;
      } else {
        int64_t count_dh;
        if (count_include_pad) {
          // Padded positions count, but not window positions past the right padding (ceil_mode).
          const Range pd = valid_range(d0, g.dil[0], -g.pad[0], D + g.pad_hi[0], g.k[0]);
          const Range ph = valid_range(h0, g.dil[1], -g.pad[1], H + g.pad_hi[1], g.k[1]);
          count_dh = (pd.last - pd.first) * (ph.last - ph.first);
        } else {
          count_dh = (kd.last - kd.first) * (kh.last - kh.first);
        }
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t count = count_dh * count_w[ow];
          if constexpr (std::is_floating_point_v<C>) {
            dst[ow] = convert<T, double>(a[ow] / static_cast<double>(count));  // 0/0: NaN for an empty window
          } else if constexpr (std::is_signed_v<C>) {
            dst[ow] = count == 0 ? T(0) : static_cast<T>(static_cast<int64_t>(a[ow]) / count);
          } else {
            dst[ow] = count == 0 ? T(0) : static_cast<T>(a[ow] / static_cast<uint64_t>(count));
          }
        }
      }
    }
  });
}

/// A pooling's epilogue (PoolParams::epilogue_add, epilogue_relu) on the n values of one output
/// row of a block at `y` (positions of b lanes), `chan` that block's b channel values: the scalar
/// add in the replaced Add's operand order, then relu, as the eager steps compute them.
template <PoolEpilogueAdd kAdd, bool kRelu>
void pool_epilogue_row(float* y, int64_t n, int64_t b, const float* chan) {
  for (int64_t i = 0; i < n; i += b)
    for (int64_t l = 0; l < b; ++l) {
      float v = y[i + l];
      if constexpr (kAdd == PoolEpilogueAdd::AddAfter) v = scalar::add<float>(v, chan[l]);
      if constexpr (kAdd == PoolEpilogueAdd::AddBefore) v = scalar::add<float>(chan[l], v);
      if constexpr (kRelu) v = scalar::relu<float>(v);
      y[i + l] = v;
    }
}

using PoolEpilogueFn = void (*)(float*, int64_t, int64_t, const float*);

/// The epilogue's row function, or null when the pooling has none.
PoolEpilogueFn pool_epilogue_for(PoolEpilogueAdd add, bool relu) {
  switch (add) {
    case PoolEpilogueAdd::None: return relu ? pool_epilogue_row<PoolEpilogueAdd::None, true> : nullptr;
    case PoolEpilogueAdd::AddAfter:
      return relu ? pool_epilogue_row<PoolEpilogueAdd::AddAfter, true>
                  : pool_epilogue_row<PoolEpilogueAdd::AddAfter, false>;
    case PoolEpilogueAdd::AddBefore:
      return relu ? pool_epilogue_row<PoolEpilogueAdd::AddBefore, true>
                  : pool_epilogue_row<PoolEpilogueAdd::AddBefore, false>;
  }
  return nullptr;
}

/// What a blocked pooling applies to each output: the row function (for the rows the max row
/// kernels do not take), the channel values by blocked channel index (block * b + lane; null
/// without an add) and the operand order and relu flag for the row kernels.
struct PoolEpilogue {
  PoolEpilogueFn fn = nullptr;
  const float* channels = nullptr;
  bool add_before = false, relu = false;
};

/// Pooling of float32 data in the channel-blocked layout [N, C/b, D, H, W, b] (the compile pass
/// conv_layout): the b lanes of a block are b channels, each reduced over its window in pool()'s
/// order (kd, kh, kw ascending, the same valid positions) with the same comparison (NaN wins) or
/// double sum and division, so every value is pool()'s on the row-major data, bit for bit.
template <bool kMax>
void pool_blocked(const float* x, float* y, const Geom& g, int64_t b, bool count_include_pad, CpuIsa isa,
                  const PoolEpilogue& epilogue) {
  using Acc = std::conditional_t<kMax, float, double>;
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2];
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2];
  const int64_t rows = g.batch * (g.in_ch / b) * OD * OH;
  const Acc init = kMax ? -std::numeric_limits<Acc>::infinity() : Acc(0);
  // Window columns per output column (and their count with padding), computed once.
  std::vector<Range> cols(static_cast<size_t>(OW));
  std::vector<int64_t> padded_w(static_cast<size_t>(OW));
  for (int64_t ow = 0; ow < OW; ++ow) {
    const int64_t w0 = ow * g.stride[2] - g.pad[2];
    cols[ow] = valid_range(w0, g.dil[2], 0, W, g.k[2]);
    const Range pw = valid_range(w0, g.dil[2], -g.pad[2], W + g.pad_hi[2], g.k[2]);
    padded_w[ow] = pw.last - pw.first;
  }
  const int64_t work = std::max<int64_t>(1, OW * b * g.k_size());
  // Max pooling: the row kernel with a chunk of the block in registers, chunk by chunk.
  const int64_t chunk = kMax ? max_row_chunk(b) : 0;
  const BlockedMaxRowFn fixed = chunk ? blocked_max_row_for(chunk, isa) : nullptr;
  // The epilogue of output row r, right after the row (its lines still in the cache).
  const int64_t blocks = g.in_ch / b;
  auto channels_of = [&](int64_t r) {
    return epilogue.channels ? epilogue.channels + r / (OH * OD) % blocks * b : nullptr;
  };
  auto finish_row = [&](int64_t r) {
    if (epilogue.fn) epilogue.fn(y + r * OW * b, OW * b, b, channels_of(r));
  };
  parallel_for(rows, std::max<int64_t>(1, kGrain / work), [&](int64_t rb, int64_t re) {
    if (fixed) {
      for (int64_t r = rb; r < re; ++r) {
        const int64_t oh = r % OH, od = (r / OH) % OD, plane = r / (OH * OD);
        const int64_t d0 = od * g.stride[0] - g.pad[0], h0 = oh * g.stride[1] - g.pad[1];
        const Range kd = valid_range(d0, g.dil[0], 0, D, g.k[0]), kh = valid_range(h0, g.dil[1], 0, H, g.k[1]);
        const float* chan = channels_of(r);
        for (int64_t c = 0; c < b; c += chunk)
          fixed({x + plane * D * H * W * b + c, y + r * OW * b + c, cols.data(), kd, kh, d0, h0, H, W, OW,
                 g.stride[2], g.pad[2], g.dil[0], g.dil[1], g.dil[2], b, chan ? chan + c : nullptr,
                 epilogue.add_before, epilogue.relu});
      }
      return;
    }
    std::vector<Acc> acc(static_cast<size_t>(b));
    Acc* a = acc.data();
    for (int64_t r = rb; r < re; ++r) {
      const int64_t oh = r % OH, od = (r / OH) % OD, plane = r / (OH * OD);
      const float* xp = x + plane * D * H * W * b;
      float* yr = y + r * OW * b;
      const int64_t d0 = od * g.stride[0] - g.pad[0], h0 = oh * g.stride[1] - g.pad[1];
      const Range kd = valid_range(d0, g.dil[0], 0, D, g.k[0]);
      const Range kh = valid_range(h0, g.dil[1], 0, H, g.k[1]);
      int64_t count_dh = (kd.last - kd.first) * (kh.last - kh.first);
      if (count_include_pad) {
        const Range pd = valid_range(d0, g.dil[0], -g.pad[0], D + g.pad_hi[0], g.k[0]);
        const Range ph = valid_range(h0, g.dil[1], -g.pad[1], H + g.pad_hi[1], g.k[1]);
        count_dh = (pd.last - pd.first) * (ph.last - ph.first);
      }
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = ow * g.stride[2] - g.pad[2];
        const Range kw = cols[ow];
        std::fill(a, a + b, init);
        for (int64_t i = kd.first; i < kd.last; ++i)
          for (int64_t j = kh.first; j < kh.last; ++j)
            for (int64_t l = kw.first; l < kw.last; ++l) {
              const float* src = xp + (((d0 + i * g.dil[0]) * H + h0 + j * g.dil[1]) * W + w0 + l * g.dil[2]) * b;
              for (int64_t c = 0; c < b; ++c) {
                const float v = src[c];
                if constexpr (kMax)
                  a[c] = (v > a[c] || v != v) ? v : a[c];  // NaN wins and stays, as in pool()
                else
                  a[c] += static_cast<double>(v);
              }
            }
        float* dst = yr + ow * b;
        if constexpr (kMax) {
          for (int64_t c = 0; c < b; ++c) dst[c] = a[c];
        } else {
          const int64_t count = count_dh * (count_include_pad ? padded_w[ow] : kw.last - kw.first);
          for (int64_t c = 0; c < b; ++c) dst[c] = static_cast<float>(a[c] / static_cast<double>(count));
        }
      }
      finish_row(r);
    }
  });
}

}  // namespace

namespace {

/// A Conv with fused adds, a packed weight or blocked layouts (float32 only, made by the compile
/// passes conv_epilogue, conv_prepack and conv_layout): oneDNN applies the adds as post-ops;
/// where it does not take the geometry, smelt's kernel runs and the adds follow, in the same
/// order. Either way each add is one float32 addition of the convolution's float32 result, as
/// the separate adds would compute it. A packed weight and blocked layouts exist only where
/// oneDNN took the geometry at compile time (its choice does not depend on the thread count).
void conv_compiled(const ConvParams& p, const std::vector<Array>& inputs, Array& out, const Geom& g) {
  SMELT_ASSERT(out.dtype() == Dtype::Float32 && inputs.size() == 2 + p.adds.size(),
               "conv: fused adds and packed weights need float32 and one operand per add");
  // Copies of operands that are not row-major (rare: the compile passes feed row-major arrays).
  std::vector<std::vector<float>> storage;
  auto contiguous = [&](size_t i) {
    const auto& n = inputs[i].node();
    if (is_row_contiguous(n.shape, n.strides)) return in_ptr<float>(inputs[i]);
    storage.resize(inputs.size());
    return contiguous_as<float, float>(inputs[i], storage[i]);
  };
  std::vector<DnnlAdd> adds;
  adds.reserve(p.adds.size());
  for (size_t i = 0; i < p.adds.size(); ++i) {
    const Array& a = inputs[2 + i];
    const int64_t want = p.adds[i] == ConvAdd::Channel ? g.out_ch : out.size();
    SMELT_ASSERT(a.dtype() == Dtype::Float32 && a.size() == want, "conv: a fused add's operand has the wrong size");
    const float* d = contiguous(2 + i);
    adds.push_back({p.adds[i] == ConvAdd::Channel ? DnnlAddKind::Channel : DnnlAddKind::Tensor, d});
  }
  const float* x = contiguous(0);
  const float* w = contiguous(1);
  // A residual nothing else reads gives the output its buffer: oneDNN's sum post-op adds the
  // convolution to what the destination holds, so the residual need not be copied there first
  // (ResNet-18 at batch 8: 6.4 MB per block). try_donate declines a residual that is also the
  // input (the step then holds it twice) or a view of another buffer; a copied operand is not it.
  bool donated = false;
  for (size_t i = 0; i < p.adds.size() && !donated; ++i)
    if (p.adds[i] == ConvAdd::Tensor && in_ptr<float>(inputs[2 + i]) == adds[i].operand)
      donated = try_donate(out, inputs[2 + i]);
  float* y = out_ptr<float>(out);
  const DnnlConv geometry = dnnl_step_geometry(g, p);
  const int packed = static_cast<int>(p.packed_threads);
  if (inputs[0].size() > 0 && dnnl_conv_f32(geometry, x, w, y, adds, packed)) return;
  // The plain convolution, as eager runs it (oneDNN's plain primitive, else smelt's kernel), then
  // the adds: into a buffer of its own, so that a donated residual is read, not overwritten.
  if (donated) {
    alloc_contiguous(out);
    y = out_ptr<float>(out);
  }
  if (inputs[0].size() == 0) {
    std::fill(y, y + out.size(), 0.0f);
  } else if (!dnnl_conv_f32(geometry, x, w, y, {}, packed)) {
    SMELT_ASSERT(p.packed_weight.empty() && p.src_block == 0 && p.dst_block == 0,
                 "conv: oneDNN declined a convolution whose weight it packed or whose layouts it chose");
    conv_float<float>(x, w, y, g);
  }
  // Channel of element i: row-major [N, C, P], or blocked [N, C/b, P, b].
  const int64_t plane = g.out_size(), channels = g.out_ch, blk = p.dst_block;
  auto channel = [&](int64_t i) {
    return blk == 0 ? (i / plane) % channels : (i / (plane * blk)) % (channels / blk) * blk + i % blk;
  };
  for (const DnnlAdd& a : adds) {
    parallel_for(out.size(), kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        y[i] = y[i] + (a.kind == DnnlAddKind::Channel ? a.operand[channel(i)] : a.operand[i]);
    });
  }
}

}  // namespace

void eval_Conv(const ConvParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& xa = inputs[0];
  const Array& wa = inputs[1];
  Array& out = outputs[0];
  alloc_contiguous(out);
  if (out.size() == 0) return;
  const Shape& ws = p.packed_weight.empty() ? wa.shape() : p.packed_weight;
  Geom g = conv_step_geom(xa.shape(), out.shape(), ws, p);
  if (!p.adds.empty() || !p.packed_weight.empty() || p.src_block != 0 || p.dst_block != 0) {
    conv_compiled(p, inputs, out, g);
    return;
  }
  if (xa.size() == 0) {  // no input channels, or only padding: every sum is empty
    std::memset(out_ptr<uint8_t>(out), 0, static_cast<size_t>(out.size()) * out.itemsize());
    return;
  }
  dispatch_all(out.dtype(), [&]<class T>() {
    run_typed<T>(
        xa, wa, out, g, [](const auto* x, const auto* w, auto* y, const Geom& gg) { conv_float(x, w, y, gg); },
        [](const auto* x, const auto* w, auto* y, const Geom& gg) { conv_direct(x, w, y, gg); });
  });
}

void eval_ConvTranspose(const ConvTransposeParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& xa = inputs[0];
  const Array& wa = inputs[1];
  Array& out = outputs[0];
  alloc_contiguous(out);
  if (out.size() == 0) return;
  if (xa.size() == 0) {
    std::memset(out_ptr<uint8_t>(out), 0, static_cast<size_t>(out.size()) * out.itemsize());
    return;
  }
  const Shape& ws = wa.shape();
  Geom g = make_geom(xa.shape(), 0, out.shape(), 0, ws.data() + 2, ws.size() - 2, p.strides, p.padding_lo,
                     p.padding_hi, p.dilations, p.groups);
  dispatch_all(out.dtype(), [&]<class T>() {
    run_typed<T>(
        xa, wa, out, g,
        [](const auto* x, const auto* w, auto* y, const Geom& gg) { conv_transpose_float(x, w, y, gg); },
        [](const auto* x, const auto* w, auto* y, const Geom& gg) { conv_transpose_direct(x, w, y, gg); });
  });
}

void eval_Pool(const PoolParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  eval_pool_on_isa(p, inputs, outputs, cpu_isa());
}

void eval_pool_on_isa(const PoolParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs,
                      CpuIsa isa) {
  const Array& xa = inputs[0];
  Array& out = outputs[0];
  alloc_contiguous(out);
  if (out.size() == 0) return;
  Geom g = make_geom(xa.shape(), p.block, out.shape(), p.block, p.kernel.data(), p.kernel.size(), p.strides,
                     p.padding_lo, p.padding_hi, p.dilations, 1);
  if (p.block != 0) {  // float32 only (the compile pass conv_layout)
    SMELT_ASSERT(out.dtype() == Dtype::Float32 && xa.size() > 0, "pool: a blocked layout needs float32 data");
    std::vector<float> xs;
    const float* x = contiguous_as<float, float>(xa, xs);
    PoolEpilogue epilogue{pool_epilogue_for(p.epilogue_add, p.epilogue_relu), nullptr,
                          p.epilogue_add == PoolEpilogueAdd::AddBefore, p.epilogue_relu};
    std::vector<float> table, storage;
    if (p.epilogue_add != PoolEpilogueAdd::None) {
      // The channel values [1, C/b or 1, 1..., b or 1] (the pass pool_epilogue checked the shape),
      // spread to one per blocked channel.
      SMELT_ASSERT(inputs.size() == 2 && inputs[1].dtype() == Dtype::Float32,
                   "pool: the epilogue's add needs its channel values");
      const Shape& cs = inputs[1].shape();
      const float* c = contiguous_as<float, float>(inputs[1], storage);
      const int64_t blocks = g.in_ch / p.block, per_block = cs.back(), by_block = cs[1];
      SMELT_ASSERT(cs.size() == out.shape().size() && (by_block == 1 || by_block == blocks) &&
                       (per_block == 1 || per_block == p.block) && inputs[1].size() == by_block * per_block,
                   "pool: the epilogue's channel values have the wrong shape");
      if (by_block == blocks && per_block == p.block) {
        epilogue.channels = c;  // one value per channel in the blocked order already
      } else {
        table.resize(static_cast<size_t>(g.in_ch));
        for (int64_t k = 0; k < blocks; ++k)
          for (int64_t l = 0; l < p.block; ++l)
            table[k * p.block + l] = c[(by_block > 1 ? k : 0) * per_block + (per_block > 1 ? l : 0)];
        epilogue.channels = table.data();
      }
    }
    if (p.kind == PoolKind::Max)
      pool_blocked<true>(x, out_ptr<float>(out), g, p.block, false, isa, epilogue);
    else
      pool_blocked<false>(x, out_ptr<float>(out), g, p.block, p.count_include_pad, isa, epilogue);
    return;
  }
  SMELT_ASSERT(p.epilogue_add == PoolEpilogueAdd::None && !p.epilogue_relu,
               "pool: an epilogue needs the blocked layout (the pass pool_epilogue sets both)");
  dispatch_all(out.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      throw DtypeError("pool: bool is not supported");
    } else {
      std::vector<T> xs;
      const T* x = xa.size() == 0 ? nullptr : contiguous_as<T, T>(xa, xs);  // windows of only padding
      if (p.kind == PoolKind::Max)
        pool<T, true>(x, out_ptr<T>(out), g, false);
      else
        pool<T, false>(x, out_ptr<T>(out), g, p.count_include_pad);
    }
  });
}

}  // namespace smelt::cpu
