// The CPU kernel of the Attention primitive: fused, blocked over keys with an online softmax.
//
// Why fused: the composed path (matmul, scale, mask, softmax, matmul as separate kernels) wrote
// and read the [B, H, S, T] scores about ten times and allocated each intermediate; here each
// task keeps a block of scores in a thread-local buffer and never materializes the whole matrix.
//
// Bits: a task is (batch, query head, block of kQueryRows query rows), computed by one thread,
// with the keys in blocks of kKeyBlock in order; every GEMM is one single-threaded call
// (gemm.h). The cut depends on the shapes alone, so the result does not depend on the thread
// count. Eager runs and compiled replays call this same kernel, so they agree bit for bit.
// Accuracy: float64 for float64 inputs, float32 otherwise (halves widened, rounded once at the
// end); the online softmax adds a rescaling product per key block to the error of the composed
// formula, well inside tests/ops/attention_test.cpp's bound 4(D² + 2T + 8)u.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "smelt/errors.h"
#include "src/backend/cpu/elementwise_math.h"
#include "src/backend/cpu/gemm.h"
#include "src/backend/cpu/kernel_utils.h"
#include "src/backend/cpu/kernels.h"
#include "src/core/convert.h"
#include "src/core/dispatch.h"
#include "src/core/node.h"
#include "src/ops/attention.h"

namespace smelt::cpu {

namespace {

/// Query rows per task: the scores GEMM has this many rows (and the key/value blocks are
/// repacked once per task, so fewer rows repack more).
constexpr int64_t kQueryRows = 64;
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
  std::vector<C> q, kt, v, s, pv, o, m, l;
};

template <class C>
Scratch<C>& scratch() {
  thread_local Scratch<C> s;
  return s;
}

/// d[i] = e^(d[i]) in place, n contiguous values: the per-ISA float32 kernel, std::exp in double.
template <class C>
void exp_inplace(C* d, int64_t n) {
  if constexpr (std::is_same_v<C, float>) {
    math_kernels().unary[static_cast<int>(MathFn::Exp)](d, 1, d, n);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = std::exp(d[i]);
  }
}

template <class C>
void tanh_inplace(C* d, int64_t n) {
  if constexpr (std::is_same_v<C, float>) {
    math_kernels().unary[static_cast<int>(MathFn::Tanh)](d, 1, d, n);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = std::tanh(d[i]);
  }
}

/// Lanes of the row max and sum: independent accumulators that vectorize, combined in a fixed
/// order at the end (the order depends on the row length only).
constexpr int kLanes = 8;

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

/// x[0] + ... + x[n-1] in kLanes strided partial sums, then summed in order.
template <class C>
C row_sum(const C* x, int64_t n) {
  C acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += x[j + l];
  for (int l = 0; j < n; ++j, ++l) acc[l] += x[j];
  C sum = acc[0];
  for (int l = 1; l < kLanes; ++l) sum += acc[l];
  return sum;
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

/// One C[m,n] = A[m,k] B[k,n] call on the calling thread (row-major, packed operands).
template <class C>
void gemm_1(int64_t m, int64_t n, int64_t k, const C* a, const C* b, C* c) {
  GemmArgs<C> g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.lda = std::max<int64_t>(1, k);
  g.b = b;
  g.ldb = std::max<int64_t>(1, n);
  g.c = c;
  g.ldc = std::max<int64_t>(1, n);
  GemmTiles whole;
  whole.tile_m = m;
  whole.tile_n = n;
  gemm_tile<C>(g, whole, 0);
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

  const int64_t row_blocks = (s + kQueryRows - 1) / kQueryRows;
  const int64_t tasks = nb * hq * row_blocks;
  const int64_t task_work = std::min(s, kQueryRows) * t * (d + dv);
  blas_single_thread();
  parallel_for(tasks, std::max<int64_t>(1, kTaskWork / std::max<int64_t>(1, task_work)), [&](int64_t tb, int64_t te) {
    Scratch<C>& w = scratch<C>();
    for (int64_t task = tb; task < te; ++task) {
      const int64_t bi = task / (hq * row_blocks), h = (task / row_blocks) % hq;
      const int64_t i0 = (task % row_blocks) * kQueryRows, r = std::min(kQueryRows, s - i0);
      const int64_t hk = h / group;
      w.q.resize(static_cast<size_t>(r * d));
      for (int64_t i = 0; i < r; ++i) load_row<C>(vq.at(bi, h, i0 + i), vq.s3, d, w.q.data() + i * d);
      w.o.assign(static_cast<size_t>(r * dv), C(0));
      w.m.assign(static_cast<size_t>(r), kNegInf);
      w.l.assign(static_cast<size_t>(r), C(0));
      for (int64_t j0 = 0; j0 < t; j0 += kKeyBlock) {
        const int64_t cb = std::min(kKeyBlock, t - j0);
        // K^T of the block, [d, cb] row-major, and V of the block, [cb, dv] row-major.
        w.kt.resize(static_cast<size_t>(d * cb));
        for (int64_t j = 0; j < cb; ++j) {
          const T* src = vk.at(bi, hk, j0 + j);
          for (int64_t c = 0; c < d; ++c) w.kt[c * cb + j] = static_cast<C>(src[c * vk.s3]);
        }
        w.v.resize(static_cast<size_t>(cb * dv));
        for (int64_t j = 0; j < cb; ++j) load_row<C>(vv.at(bi, hk, j0 + j), vv.s3, dv, w.v.data() + j * dv);
        w.s.resize(static_cast<size_t>(r * cb));
        gemm_1<C>(r, cb, d, w.q.data(), w.kt.data(), w.s.data());
        // The composed formula's steps in its order: scale, softcap, mask, causal mask.
        for (int64_t i = 0; i < r; ++i) {
          C* row = w.s.data() + i * cb;
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
          if (p.causal != CausalMask::None) {
            // Keys j0 + j > i0 + i + offset are masked.
            const int64_t first = std::max<int64_t>(0, i0 + i + causal_offset + 1 - j0);
            for (int64_t j = std::min(first, cb); j < cb; ++j) row[j] = kNegInf;
          }
          // Online softmax: the running max m, the running sum l and the output rescaled by
          // e^(m_old - m_new). A row whose keys are all masked so far keeps m = -inf: the shift
          // is 0 then, every e^x is 0, and a row masked to the end gives zeros (l = 0 -> 1).
          const C bmax = row_max(row, cb);
          const C m_old = w.m[i];
          const C m_new = bmax > m_old ? bmax : m_old;
          const C shift = m_new == kNegInf ? C(0) : m_new;
          for (int64_t j = 0; j < cb; ++j) row[j] -= shift;
          exp_inplace<C>(row, cb);
          C alpha = m_old - shift;
          exp_inplace<C>(&alpha, 1);
          w.l[i] = w.l[i] * alpha + row_sum(row, cb);
          w.m[i] = m_new;
          C* orow = w.o.data() + i * dv;
          for (int64_t c = 0; c < dv; ++c) orow[c] *= alpha;
        }
        w.pv.resize(static_cast<size_t>(r * dv));
        gemm_1<C>(r, dv, cb, w.s.data(), w.v.data(), w.pv.data());
        for (int64_t x = 0; x < r * dv; ++x) w.o[x] += w.pv[x];
      }
      for (int64_t i = 0; i < r; ++i) {
        const C l = w.l[i] == C(0) ? C(1) : w.l[i];
        T* dst = po + ((bi * hq + h) * s + i0 + i) * dv;
        for (int64_t c = 0; c < dv; ++c) dst[c] = static_cast<T>(w.o[i * dv + c] / l);
      }
    }
  });
}

}  // namespace

void eval_Attention(const AttentionParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  Array& out = outputs[0];
  alloc_contiguous(out);
  if (out.size() == 0) return;
  if (inputs[1].shape()[2] == 0) {
    std::memset(out.node().data_ptr(), 0, out.nbytes());  // no keys: an empty weighted sum
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
