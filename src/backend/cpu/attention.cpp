// The CPU kernel of the Attention primitive: fused, blocked over keys with an online softmax.
//
// Why fused: the composed path (matmul, scale, mask, softmax, matmul as separate kernels) wrote
// and read the [B, H, S, T] scores about ten times and allocated each intermediate; here each
// task keeps a block of scores in a thread-local buffer and never materializes the whole matrix.
//
// Bits: a task is (batch, query head, block of at most kQueryRows query rows), computed by one thread,
// with the keys in blocks of kKeyBlock in order; every GEMM is one single-threaded call
// (gemm.h). The cut depends on the shapes alone, so the result does not depend on the thread
// count. Eager runs and compiled replays call this same kernel, so they agree bit for bit.
// Accuracy: float64 for float64 inputs, float32 otherwise (halves widened, rounded once at the
// end); the online softmax adds a rescaling product per key block to the error of the composed
// formula, well inside tests/ops/attention_test.cpp's bound 4(D² + 2T + 8)u.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "smelt/errors.h"
#include "src/backend/cpu/dnnl.h"
#include "src/backend/cpu/elementwise_math.h"
#include "src/backend/cpu/gemm.h"
#include "src/backend/cpu/kernel_utils.h"
#include "src/backend/cpu/kernels.h"
#include "src/backend/cpu/softmax_rows.h"
#include "src/core/convert.h"
#include "src/core/dispatch.h"
#include "src/core/node.h"
#include "src/ops/attention.h"

namespace smelt::cpu {

namespace {

/// Query rows per task, at most: the scores GEMM has this many rows (and the key/value blocks are
/// repacked once per task, so fewer rows repack more). A sequence is cut into blocks of equal
/// size (to one row): ViT's 197 queries as 99 + 98, not 128 + 69, whose tasks left one of two
/// threads waiting for a third of a task.
constexpr int64_t kQueryRows = 128;
/// Keys per block of the online softmax: a task's scores buffer is kQueryRows x kKeyBlock.
constexpr int64_t kKeyBlock = 256;
/// Multiply-adds below which a chunk of tasks takes several (tiny heads stay on one thread).
constexpr int64_t kTaskWork = int64_t{1} << 16;

/// Element strides of a rank-4 operand and its first element.
template <class T>
struct View4 {
  const T* p;
  int64_t s0, s1, s2, s3;
  explicit View4(const Array& a)
      : p(in_ptr<T>(a)), s0(a.node().strides[0]), s1(a.node().strides[1]), s2(a.node().strides[2]),
        s3(a.node().strides[3]) {}
  const T* at(int64_t i0, int64_t i1, int64_t i2) const { return p + i0 * s0 + i1 * s1 + i2 * s2; }
};

/// Per-thread buffers (reused across calls: no allocation per task).
template <class C>
struct Scratch {
  std::vector<C> q, k, v, s, pv, o, m, l, alpha;
};

template <class C>
Scratch<C>& scratch() {
  thread_local Scratch<C> s;
  return s;
}

/// Lanes of the generic row max and the double row sums (independent accumulators combined in
/// a fixed order); the float fast paths are softmax_rows.h's, built per ISA.
constexpr int kLanes = 8;

/// row[j] = e^(row[j] - shift) for j < n; returns their sum.
float exp_shifted_sum(float* row, int64_t n, float shift) { return softmax_rows().exp_shifted_sum(row, n, shift); }

double exp_shifted_sum(double* row, int64_t n, double shift) {
  double acc[kLanes] = {};
  int64_t j = 0;
  for (; j < n; ++j) {
    row[j] = std::exp(row[j] - shift);
    acc[j % kLanes] += row[j];
  }
  double sum = acc[0];
  for (int l = 1; l < kLanes; ++l) sum += acc[l];
  return sum;
}

float exp_one(float x) { return softmax_exp(x); }
double exp_one(double x) { return std::exp(x); }

template <class C>
void tanh_inplace(C* d, int64_t n) {
  if constexpr (std::is_same_v<C, float>) {
    math_kernels().unary[static_cast<int>(MathFn::Tanh)](d, 1, d, n);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = std::tanh(d[i]);
  }
}

/// The largest of x[0..n) (NaNs skipped; -inf for none).
template <class C>
C row_max(const C* x, int64_t n) {
  C acc[kLanes];
  for (C& a : acc) a = -std::numeric_limits<C>::infinity();
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
  for (int l = 0; j < n; ++j, ++l) acc[l] = x[j] > acc[l] ? x[j] : acc[l];
  C m = acc[0];
  for (int l = 1; l < kLanes; ++l) m = acc[l] > m ? acc[l] : m;
  return m;
}

/// row[j] *= scale for j < n; returns the largest product.
float scale_max(float* row, int64_t n, float scale) { return softmax_rows().scale_max(row, n, scale); }

double scale_max(double* row, int64_t n, double scale) {
  for (int64_t j = 0; j < n; ++j) row[j] *= scale;
  return row_max(row, n);
}

/// row[j] = row[j] * scale + add[j] for j < n (the scaling, then an additive mask); returns the
/// largest result, as row_max would.
float scale_add_max(float* row, const float* add, int64_t n, float scale) {
  return softmax_rows().scale_add_max(row, add, n, scale);
}

double scale_add_max(double* row, const double* add, int64_t n, double scale) {
  for (int64_t j = 0; j < n; ++j) row[j] = row[j] * scale + add[j];
  return row_max(row, n);
}

/// o[j] = o[j] * alpha + p[j] for j < n.
void scale_add(float* o, const float* p, int64_t n, float alpha) { softmax_rows().scale_add(o, p, n, alpha); }

void scale_add(double* o, const double* p, int64_t n, double alpha) {
  for (int64_t j = 0; j < n; ++j) o[j] = o[j] * alpha + p[j];
}

/// Converts n values at stride `st` to the compute type, contiguous.
template <class C, class T>
void load_row(const T* src, int64_t st, int64_t n, C* dst) {
  if (st == 1) {
    for (int64_t c = 0; c < n; ++c) dst[c] = static_cast<C>(src[c]);
  } else {
    for (int64_t c = 0; c < n; ++c) dst[c] = static_cast<C>(src[c * st]);
  }
}

/// C[m,n] = A[m,k] op(B) (op(B) = B[k,n], or B[n,k] transposed) on the calling thread, one BLAS
/// call: oneDNN's sgemm for float when built in (it reads transposed operands itself; these
/// products need not match the matmul kernel's bits), else CBLAS.
template <class C>
void gemm_1(bool trans_b, int64_t m, int64_t n, int64_t k, const C* a, int64_t lda, const C* b, int64_t ldb, C* c,
            int64_t ldc) {
  if constexpr (std::is_same_v<C, float>) {
    if (dnnl_sgemm_1thread(false, trans_b, m, n, k, a, lda, b, ldb, c, ldc)) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m),
                static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f,
                c, static_cast<int>(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m),
                static_cast<int>(n), static_cast<int>(k), 1.0, a, static_cast<int>(lda), b, static_cast<int>(ldb), 0.0, c,
                static_cast<int>(ldc));
  }
}

/// Rows [r0, r0 + rows) of a [.., rows, cols] operand as a row-major matrix the GEMM reads: in
/// place when it already is one in the compute type (returns its row stride), else converted
/// into `buf` (row stride `cols`).
template <class C, class T>
const C* rows_of(const View4<T>& x, int64_t i0, int64_t i1, int64_t r0, int64_t rows, int64_t cols,
                 std::vector<C>& buf, int64_t& ld) {
  if constexpr (std::is_same_v<C, T>) {
    if (x.s3 == 1 && x.s2 >= cols && x.s2 <= INT_MAX) {
      ld = std::max<int64_t>(1, x.s2);
      return x.at(i0, i1, r0);
    }
  }
  buf.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i) load_row<C>(x.at(i0, i1, r0 + i), x.s3, cols, buf.data() + i * cols);
  ld = std::max<int64_t>(1, cols);
  return buf.data();
}

template <class T>
void attention_typed(const AttentionParams& p, const std::vector<Array>& inputs, Array& out) {
  using C = compute_t<T>;
  const Array &q = inputs[0], &k = inputs[1], &v = inputs[2];
  const int64_t nb = q.shape()[0], hq = q.shape()[1], s = q.shape()[2], d = q.shape()[3];
  const int64_t hkv = k.shape()[1], t = k.shape()[2], dv = v.shape()[3];
  const int64_t group = hq / hkv;
  const View4<T> vq(q), vk(k), vv(v);
  const bool has_mask = p.mask != AttentionMaskKind::None;
  // Additive masks arrive in the compute dtype, boolean ones as bool (scaled_dot_product_attention).
  const Array* mask = has_mask ? &inputs[3] : nullptr;
  const C scale = static_cast<C>(detail::attention_scale(p, d));
  const C softcap = static_cast<C>(p.softcap);
  const int64_t causal_offset = p.causal == CausalMask::LowerRight ? t - s : 0;
  constexpr C kNegInf = -std::numeric_limits<C>::infinity();
  T* po = out_ptr<T>(out);

  // An additive mask whose rows are contiguous (no softcap) joins the scaling's pass.
  const bool one_pass_mask =
      has_mask && p.mask == AttentionMaskKind::Additive && !(p.softcap > 0) && mask->node().strides[3] == 1;
  const C* mask_data = one_pass_mask ? in_ptr<C>(*mask) : nullptr;
  const int64_t ms0 = has_mask ? mask->node().strides[0] : 0, ms1 = has_mask ? mask->node().strides[1] : 0,
                ms2 = has_mask ? mask->node().strides[2] : 0;
  const int64_t row_blocks = (s + kQueryRows - 1) / kQueryRows;
  const int64_t block_rows = (s + row_blocks - 1) / row_blocks;
  const int64_t tasks = nb * hq * row_blocks;
  const int64_t task_work = block_rows * t * (d + dv);
  blas_single_thread();
  parallel_for(tasks, std::max<int64_t>(1, kTaskWork / std::max<int64_t>(1, task_work)), [&](int64_t tb, int64_t te) {
    Scratch<C>& w = scratch<C>();
    for (int64_t task = tb; task < te; ++task) {
      const int64_t bi = task / (hq * row_blocks), h = (task / row_blocks) % hq;
      const int64_t i0 = (task % row_blocks) * block_rows, r = std::min(block_rows, s - i0);
      const int64_t hk = h / group;
      int64_t ldq = 0, ldk = 0, ldv = 0;
      const C* qa = rows_of<C>(vq, bi, h, i0, r, d, w.q, ldq);
      w.o.assign(static_cast<size_t>(r * dv), C(0));
      w.m.assign(static_cast<size_t>(r), kNegInf);
      w.l.assign(static_cast<size_t>(r), C(0));
      w.alpha.resize(static_cast<size_t>(r));
      for (int64_t j0 = 0; j0 < t; j0 += kKeyBlock) {
        const int64_t cb = std::min(kKeyBlock, t - j0);
        // The block's keys [cb, d] (read transposed by the GEMM) and values [cb, dv].
        const C* kb = rows_of<C>(vk, bi, hk, j0, cb, d, w.k, ldk);
        const C* vb = rows_of<C>(vv, bi, hk, j0, cb, dv, w.v, ldv);
        w.s.resize(static_cast<size_t>(r * cb));
        gemm_1<C>(true, r, cb, d, qa, ldq, kb, ldk, w.s.data(), cb);
        // The composed formula's steps in its order: scale, softcap, mask, causal mask.
        for (int64_t i = 0; i < r; ++i) {
          C* row = w.s.data() + i * cb;
          // Keys j0 + j > i0 + i + offset are causally masked: the row's first `visible` keys are not.
          const int64_t visible = p.causal == CausalMask::None
                                      ? cb
                                      : std::clamp<int64_t>(i0 + i + causal_offset + 1 - j0, 0, cb);
          C bmax;
          if (!has_mask && !(p.softcap > 0)) {
            bmax = scale_max(row, visible, scale);  // the common case in one pass
            std::fill(row + visible, row + cb, kNegInf);
          } else if (one_pass_mask && visible == cb) {
            // A padding mask (BERT's) in the same pass: the scaling, then the mask, then the maximum.
            const int64_t moff = bi * ms0 + h * ms1 + (i0 + i) * ms2 + j0;
            bmax = scale_add_max(row, mask_data + moff, cb, scale);
          } else {
            for (int64_t j = 0; j < cb; ++j) row[j] *= scale;
            if (p.softcap > 0) {
              for (int64_t j = 0; j < cb; ++j) row[j] /= softcap;
              tanh_inplace<C>(row, cb);
              for (int64_t j = 0; j < cb; ++j) row[j] = softcap * row[j];
            }
            if (has_mask) {
              const auto& mn = mask->node();
              const int64_t ms = mn.strides[3];
              const int64_t moff = bi * mn.strides[0] + h * mn.strides[1] + (i0 + i) * mn.strides[2] + j0 * ms;
              if (p.mask == AttentionMaskKind::Additive) {
                const C* mrow = in_ptr<C>(*mask) + moff;
                for (int64_t j = 0; j < cb; ++j) row[j] += mrow[j * ms];
              } else {
                const bool* mrow = in_ptr<bool>(*mask) + moff;
                for (int64_t j = 0; j < cb; ++j)
                  if (!mrow[j * ms]) row[j] = kNegInf;
              }
            }
            std::fill(row + visible, row + cb, kNegInf);
            bmax = row_max(row, cb);
          }
          // Online softmax: the running max m, the running sum l and the output rescaled by
          // e^(m_old - m_new). A row whose keys are all masked so far keeps m = -inf: the shift
          // is 0 then, every e^x is 0, and a row masked to the end gives zeros (l = 0 -> 1).
          const C m_old = w.m[i];
          const C m_new = bmax > m_old ? bmax : m_old;
          const C shift = m_new == kNegInf ? C(0) : m_new;
          // A row's first block (m_old = -inf) rescales nothing: e^-inf = 0 without the exponential,
          // whose clamped argument made a subnormal product (slow) before its select gave 0.
          const C alpha = m_old == kNegInf ? C(0) : exp_one(m_old - shift);
          w.l[i] = w.l[i] * alpha + exp_shifted_sum(row, cb, shift);
          w.m[i] = m_new;
          w.alpha[i] = alpha;
        }
        w.pv.resize(static_cast<size_t>(r * dv));
        gemm_1<C>(false, r, dv, cb, w.s.data(), cb, vb, ldv, w.pv.data(), dv);
        // The output rescaled by each row's alpha, then the block's weighted values added.
        for (int64_t i = 0; i < r; ++i) scale_add(w.o.data() + i * dv, w.pv.data() + i * dv, dv, w.alpha[i]);
      }
      for (int64_t i = 0; i < r; ++i) {
        const C l = w.l[i] == C(0) ? C(1) : w.l[i];
        T* dst = po + ((bi * s + i0 + i) * hq + h) * dv;  // [B, S, Hq, Dv] memory (eval_Attention)
        for (int64_t c = 0; c < dv; ++c) dst[c] = static_cast<T>(w.o[i * dv + c] / l);
      }
    }
  });
}

}  // namespace

void eval_Attention(const AttentionParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  Array& out = outputs[0];
  alloc_contiguous(out);
  // The output is laid out as [B, S, Hq, Dv] (its [B, Hq, S, Dv] view has strides S·Hq·Dv, Dv,
  // Hq·Dv, 1), as on the GPU: the transpose back to [B, S, Hq·Dv] that follows attention in a
  // transformer block is then a view, not a copy (BERT-small's 128 x 256 per layer: 6-20 us).
  {
    auto& n = out.node();
    const int64_t hq = out.shape()[1], sq = out.shape()[2], dv = out.shape()[3];
    n.strides = {sq * hq * dv, dv, hq * dv, 1};
  }
  if (out.size() == 0) return;
  // No keys (an empty weighted sum) or head_dim 0: zeros, as the composed path on other
  // devices gives (detail::attention_composed).
  if (inputs[1].shape()[2] == 0 || inputs[0].shape()[3] == 0) {
    std::memset(out.node().data_ptr(), 0, out.nbytes());
    return;
  }
  dispatch_all(out.dtype(), [&]<class T>() {
    if constexpr (std::is_floating_point_v<T> || is_half_v<T>) {
      attention_typed<T>(p, inputs, out);
    } else {
      SMELT_ASSERT(false, "Attention: non-floating dtype reached the CPU kernel");
    }
  });
}

}  // namespace smelt::cpu
