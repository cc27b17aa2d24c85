// CPU kernel for Matmul: oneDNN products (dnnl.h) or tiled BLAS GEMM (gemm.h) for floats (halves via float32), exact loops for integers and bool.
#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "smelt/errors.h"
#include "src/backend/cpu/dnnl.h"
#include "src/backend/cpu/gemm.h"
#include "src/backend/cpu/kernel_utils.h"
#include "src/backend/cpu/kernels.h"
#include "src/core/dispatch.h"

namespace smelt::cpu {

namespace {

/// One matrix operand inside a batch: element strides of its rows and columns.
struct Mat {
  int64_t rs, cs;
};

/// Element offsets of each batch matrix of `x` (batch axes = all but the last two).
class BatchOffsets {
 public:
  BatchOffsets() = default;  // one matrix for the whole batch
  explicit BatchOffsets(const Array& x) {
    const auto& n = x.node();
    int nb = x.ndim() - 2;
    shape_.assign(n.shape.begin(), n.shape.begin() + nb);
    strides_.assign(n.strides.begin(), n.strides.begin() + nb);
  }
  int64_t operator()(int64_t b) const {
    int64_t off = 0;
    for (int d = static_cast<int>(shape_.size()) - 1; d >= 0; --d) {
      off += (b % shape_[d]) * strides_[d];
      b /= shape_[d];
    }
    return off;
  }

 private:
  Shape shape_;
  Strides strides_;
};

/// Multiply-adds per chunk of a batched product below which chunks take several tasks.
constexpr int64_t kTaskWork = int64_t{1} << 16;

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

// How an operand of `rows` x `cols` can be passed to BLAS without a copy.
struct BlasOperand {
  bool ok = false;
  bool trans = false;
  int64_t ld = 0;
};

BlasOperand blas_operand(Mat x, int64_t rows, int64_t cols) {
  // Row-major as stored (NoTrans), or the transpose of a row-major matrix (Trans). Axes of
  // size 1 have no meaningful stride.
  if ((cols <= 1 || x.cs == 1) && (rows <= 1 || x.rs >= std::max<int64_t>(1, cols))) {
    int64_t ld = rows <= 1 ? std::max<int64_t>(1, cols) : x.rs;
    if (fits_int(ld)) return {true, false, ld};
  }
  if ((rows <= 1 || x.rs == 1) && (cols <= 1 || x.cs >= std::max<int64_t>(1, rows))) {
    int64_t ld = cols <= 1 ? std::max<int64_t>(1, rows) : x.cs;
    if (fits_int(ld)) return {true, true, ld};
  }
  return {};
}

/// Copies (and converts) a rows x cols strided matrix to a row-major buffer of `To`.
template <class To, class From>
void pack(const From* src, Mat x, int64_t rows, int64_t cols, To* dst) {
  if (x.cs != 1 && x.rs == 1) {
    // A transposed matrix: in square blocks, so that both sides stay in cache.
    constexpr int64_t kB = 32;
    for (int64_t i0 = 0; i0 < rows; i0 += kB)
      for (int64_t j0 = 0; j0 < cols; j0 += kB) {
        const int64_t i1 = std::min(rows, i0 + kB), j1 = std::min(cols, j0 + kB);
        for (int64_t j = j0; j < j1; ++j)
          for (int64_t i = i0; i < i1; ++i) dst[i * cols + j] = static_cast<To>(src[i + j * x.cs]);
      }
    return;
  }
  for (int64_t i = 0; i < rows; ++i) {
    const From* s = src + i * x.rs;
    To* d = dst + i * cols;
    if (x.cs == 1) {
      for (int64_t j = 0; j < cols; ++j) d[j] = static_cast<To>(s[j]);
    } else {
      for (int64_t j = 0; j < cols; ++j) d[j] = static_cast<To>(s[j * x.cs]);
    }
  }
}

/// body(bi, scratch) for each of `nb` matrices of a product through oneDNN: the matrices shared
/// out over the threads when there are many (each oneDNN call then on its thread alone), else in
/// order with every call on all threads; the same bits either way (dnnl_product_f32).
template <class Scratch, class Body>
void each_product_matrix(int64_t nb, Body body) {
  if (nb >= 2 * num_threads() && !in_parallel_for()) {
    parallel_for(nb, 1, [&](int64_t b, int64_t e) {
      Scratch scratch;
      for (int64_t bi = b; bi < e; ++bi) body(bi, scratch);
    });
  } else {
    Scratch scratch;
    for (int64_t bi = 0; bi < nb; ++bi) body(bi, scratch);
  }
}

/// One matrix's product through oneDNN (dnnl_product_f32), with a bias row: a post-op where the
/// Add had the bias first (the post-op's operand order) and oneDNN takes it with the plain
/// product's kernel, else one add per row afterwards in the Add's operand order (x86 keeps the
/// first operand's NaN payload).
void run_product(DnnlProduct d, const float* a, const float* b, float* c, const float* bias, bool bias_first) {
  d.bias = bias != nullptr && bias_first;
  if (d.bias && dnnl_product_f32(d, a, b, c, bias)) return;
  d.bias = false;
  const bool ran = dnnl_product_f32(d, a, b, c);
  SMELT_ASSERT(ran, "matmul: oneDNN declined a product it had taken");
  if (bias != nullptr)
    for (int64_t i = 0; i < d.m; ++i) add_f32_run(c + i * d.n, bias, c + i * d.n, d.n, bias_first);
}

/// Products of batches of matrices through float/double GEMM (gemm.h: tiles fixed by the shapes,
/// single-threaded BLAS per tile). `T` is the storage type (halves are widened to float32 and
/// rounded once at the end).
template <class T>
void blas_matmul(const Array& a, const Array& b, Array& out, const MatmulParams& params, const Array* bias) {
  using G = compute_t<T>;
  const int nd = out.ndim();
  const int64_t m = out.shape()[nd - 2], n = out.shape()[nd - 1], k = a.shape()[nd - 1];
  const int64_t batches = shape_size(Shape(out.shape().begin(), out.shape().end() - 2));
  const Mat ma{a.node().strides[nd - 2], a.node().strides[nd - 1]};
  // B in column panels (matmul_pack, gemm_b_panels): one flat constant for the whole batch, read
  // by the tiles as panels; described here as the row-major matrix it holds.
  const bool panels = params.panel_n > 0;
  SMELT_ASSERT(!panels || (std::is_same_v<T, float> && b.ndim() == 1 && b.size() == k * n && gemm_b_panels(m, n, k) &&
                           gemm_tiles(m, n, k).tile_n == params.panel_n),
               "Matmul: B's column panels do not match the product " + shape_to_string(out.shape()));
  const Mat mb = panels ? Mat{n, 1} : Mat{b.node().strides[nd - 2], b.node().strides[nd - 1]};
  const BatchOffsets oa(a), ob = panels ? BatchOffsets() : BatchOffsets(b);
  const T* pa = in_ptr<T>(a);
  const T* pb = in_ptr<T>(b);
  T* pc = out_ptr<T>(out);
  constexpr bool kHalf = is_half_v<T>;

  // Every matrix of the batch is its own GEMM (tiles of gemm_tiles(m, n, k)), also when one
  // operand is broadcast over the batch and the batch could fold into M: BLAS's results for a
  // row depend on M (its small-matrix and edge kernels), so folding would make the bits depend on
  // how the operands are laid out, and differ from the product of the materialized operands.
  const int64_t nb = batches;
  BlasOperand direct_a = kHalf ? BlasOperand{} : blas_operand(ma, m, k);
  BlasOperand direct_b = kHalf ? BlasOperand{} : blas_operand(mb, k, n);
  // Products oneDNN's brgemm matmul takes (a shape rule: dnnl.h) run there, B reordered into its
  // layout (or packed so at compile time), whatever B's storage.
  const bool product = std::is_same_v<G, float> && dnnl_product_taken(m, n, k);
  // oneDNN's float tiles take row-major operands only (gemm.cpp copies a transposed one per
  // tile): pack a transposed operand once per matrix here instead of once per tile. The bits are
  // those of the per-tile copies (the same row-major values through the same calls).
  if constexpr (std::is_same_v<G, float>) {
    if (product && direct_a.ok && direct_a.trans) direct_a = {};
    if (product && direct_a.ok && m > 1 && direct_a.ld != k) direct_a = {};  // dense rows only
    if (dnnl_enabled() && !product) {
      if (direct_a.trans) direct_a = {};
      if (direct_b.trans) direct_b = {};
    }
  }
  // The bias as a contiguous row (a strided view is copied once).
  std::vector<float> bias_copy;
  const float* bias_row = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    if (bias != nullptr) {
      bias_row = in_ptr<float>(*bias);
      const int64_t bs = bias->node().strides.back();
      if (bs != 1 && n > 1) {
        bias_copy.resize(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) bias_copy[static_cast<size_t>(j)] = bias_row[j * bs];
        bias_row = bias_copy.data();
      }
    }
  }
  std::vector<G> wide;  // halves: the float32 products, rounded once at the end
  if constexpr (kHalf) wide.resize(static_cast<size_t>(nb * m * n));

  // Operands BLAS cannot read in place are packed row-major (and widened), once per matrix: the
  // buffers keep the last matrix packed, so a batch-broadcast operand is packed once per chunk.
  struct Packed {
    std::vector<G> a, b;
    int64_t a_at = -1, b_at = -1;
  };
  auto args_for = [&](int64_t bi, Packed& p) {
    GemmArgs<G> g;
    g.m = m;
    g.n = n;
    g.k = k;
    const T* xa = pa + oa(bi);
    const T* xb = pb + ob(bi);
    if (direct_a.ok) {
      g.a = reinterpret_cast<const G*>(xa);
      g.trans_a = direct_a.trans;
      g.lda = direct_a.ld;
    } else {
      if (p.a_at != oa(bi)) {
        p.a.resize(static_cast<size_t>(m * k));
        pack<G>(xa, ma, m, k, p.a.data());
        p.a_at = oa(bi);
      }
      g.a = p.a.data();
      g.lda = std::max<int64_t>(1, k);
    }
    if (direct_b.ok) {
      g.b = reinterpret_cast<const G*>(xb);
      g.trans_b = direct_b.trans;
      g.ldb = direct_b.ld;
    } else {
      if (p.b_at != ob(bi)) {
        p.b.resize(static_cast<size_t>(k * n));
        pack<G>(xb, mb, k, n, p.b.data());
        p.b_at = ob(bi);
      }
      g.b = p.b.data();
      g.ldb = std::max<int64_t>(1, n);
    }
    g.panel_n = params.panel_n;
    if constexpr (kHalf)
      g.c = wide.data() + bi * m * n;
    else
      g.c = pc + bi * m * n;
    g.ldc = n;
    if constexpr (std::is_same_v<T, float>) {
      if (bias != nullptr) {
        g.bias = bias_row;
        g.bias_first = params.bias == MatmulBias::Before;
      }
    }
    return g;
  };

  if constexpr (std::is_same_v<G, float>) {
    if (product) {
      each_product_matrix<Packed>(nb, [&](int64_t bi, Packed& p) {
        const GemmArgs<G> g = args_for(bi, p);
        DnnlProduct d;
        d.m = m;
        d.n = n;
        d.k = k;
        d.b_transposed = g.trans_b;
        d.ldb = g.ldb;
        run_product(d, g.a, g.b, g.c, g.bias, g.bias_first);
      });
      if constexpr (kHalf) {
        parallel_for(static_cast<int64_t>(wide.size()), kGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) pc[i] = T(wide[i]);
        });
      }
      return;
    }
  }
  blas_single_thread();
  if (nb == 1) {
    Packed p;
    gemm<G>(args_for(0, p));
  } else {
    // Every (matrix, tile) pair is a task; each is the same BLAS call whichever thread runs it.
    const GemmTiles tiles = gemm_tiles(m, n, k);
    const int64_t per = tiles.count();
    parallel_for(nb * per, std::max<int64_t>(1, kTaskWork / tiles.work(k)), [&](int64_t tb, int64_t te) {
      Packed p;
      for (int64_t t = tb; t < te; ++t) gemm_tile<G>(args_for(t / per, p), tiles, t % per);
    });
  }
  if constexpr (kHalf) {
    parallel_for(static_cast<int64_t>(wide.size()), kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) pc[i] = T(wide[i]);
    });
  }
}

/// Exact matmul with a loop: integers wrap (accumulated modulo 2^64 or 2^32 and truncated,
/// which is the same), bool is an or of ands. Also the float fallback past BLAS's int sizes.
template <class T>
void loop_matmul(const Array& a, const Array& b, Array& out) {
  using Acc = std::conditional_t<std::is_same_v<T, bool>, uint8_t,
              std::conditional_t<std::is_floating_point_v<T>, T,
              std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>>>;
  const int nd = out.ndim();
  const int64_t m = out.shape()[nd - 2], n = out.shape()[nd - 1], k = a.shape()[nd - 1];
  const int64_t batches = shape_size(Shape(out.shape().begin(), out.shape().end() - 2));
  const Mat ma{a.node().strides[nd - 2], a.node().strides[nd - 1]};
  const Mat mb{b.node().strides[nd - 2], b.node().strides[nd - 1]};
  const BatchOffsets oa(a), ob(b);
  const T* pa = in_ptr<T>(a);
  const T* pb = in_ptr<T>(b);
  T* pc = out_ptr<T>(out);
  constexpr int64_t kRows = 4, kCols = 256;
  const int64_t row_blocks = (m + kRows - 1) / kRows;
  const int64_t work = std::max<int64_t>(1, kRows * k * n);
  parallel_for(batches * row_blocks, std::max<int64_t>(1, kGrain / work), [&](int64_t tb, int64_t te) {
    std::vector<Acc> bp;  // B converted to Acc, row-major, for the current batch
    int64_t cached = -1;
    Acc acc[kRows][kCols];
    for (int64_t t = tb; t < te; ++t) {
      int64_t bi = t / row_blocks, i0 = (t % row_blocks) * kRows, rows = std::min(kRows, m - i0);
      const T* xa = pa + oa(bi);
      if (cached != ob(bi)) {
        bp.resize(static_cast<size_t>(k * n));
        pack<Acc>(pb + ob(bi), mb, k, n, bp.data());
        cached = ob(bi);
      }
      T* xc = pc + bi * m * n;
      for (int64_t j0 = 0; j0 < n; j0 += kCols) {
        int64_t w = std::min(kCols, n - j0);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < w; ++j) acc[r][j] = Acc(0);
        for (int64_t kk = 0; kk < k; ++kk) {
          const Acc* brow = bp.data() + kk * n + j0;
          for (int64_t r = 0; r < rows; ++r) {
            Acc av = static_cast<Acc>(xa[(i0 + r) * ma.rs + kk * ma.cs]);
            Acc* ar = acc[r];
            if constexpr (std::is_same_v<T, bool>) {
              if (!av) continue;
              for (int64_t j = 0; j < w; ++j) ar[j] |= brow[j];
            } else {
              for (int64_t j = 0; j < w; ++j) ar[j] = static_cast<Acc>(ar[j] + static_cast<Acc>(av * brow[j]));
            }
          }
        }
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < w; ++j) xc[(i0 + r) * n + j0 + j] = static_cast<T>(acc[r][j]);
      }
    }
  });
}

/// A float32 product whose B the compile pass matmul_pack packed in oneDNN's layout (one
/// matrix for the whole batch): the same oneDNN calls as blas_matmul's for that shape, so the same
/// bits as the product of the plain B.
void packed_product(const Array& a, const Array& packed_b, Array& out, const MatmulParams& params, const Array* bias) {
  const int nd = out.ndim();
  const int64_t m = out.shape()[nd - 2], n = out.shape()[nd - 1], k = a.shape()[nd - 1];
  const int64_t nb = shape_size(Shape(out.shape().begin(), out.shape().end() - 2));
  SMELT_ASSERT(a.dtype() == float32 && packed_b.dtype() == float32 && dnnl_product_taken(m, n, k),
               "Matmul: a packed B without oneDNN's product for " + shape_to_string(out.shape()));
  const Mat ma{a.node().strides[nd - 2], a.node().strides[nd - 1]};
  const BatchOffsets oa(a);
  BlasOperand direct_a = blas_operand(ma, m, k);
  if (direct_a.trans || (m > 1 && direct_a.ld != k)) direct_a = {};
  std::vector<float> bias_row;
  if (bias != nullptr) {
    bias_row.resize(static_cast<size_t>(n));
    const float* v = in_ptr<float>(*bias);
    for (int64_t j = 0; j < n; ++j) bias_row[static_cast<size_t>(j)] = v[j * bias->node().strides.back()];
  }
  DnnlProduct d;
  d.m = m;
  d.n = n;
  d.k = k;
  d.ldb = n;
  d.packed_threads = static_cast<int>(params.packed_threads);
  each_product_matrix<std::vector<float>>(nb, [&](int64_t bi, std::vector<float>& rows) {
    const float* xa = in_ptr<float>(a) + oa(bi);
    if (!direct_a.ok) {
      rows.resize(static_cast<size_t>(m * k));
      pack<float>(xa, ma, m, k, rows.data());
      xa = rows.data();
    }
    float* c = out_ptr<float>(out) + bi * m * n;
    run_product(d, xa, in_ptr<float>(packed_b), c, bias != nullptr ? bias_row.data() : nullptr,
                params.bias == MatmulBias::Before);
  });
}

}  // namespace

void eval_Matmul(const MatmulParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& a = inputs[0];
  const Array& b = inputs[1];
  Array& out = outputs[0];
  SMELT_ASSERT(a.dtype() == b.dtype() && a.dtype() == out.dtype(), "Matmul: operand dtypes differ");
  // A bias (the compile pass matmul_bias, float32 only): a [N] vector, the last input.
  const Array* bias = p.bias == MatmulBias::None ? nullptr : &inputs[2];
  SMELT_ASSERT(bias == nullptr || (out.dtype() == float32 && bias->dtype() == float32 &&
                                   bias->shape().back() == out.shape().back()),
               "Matmul: a bias must be a float32 vector of the product's columns");
  alloc_contiguous(out);
  const int nd = out.ndim();
  const int64_t m = out.shape()[nd - 2], n = out.shape()[nd - 1], k = a.shape()[nd - 1];
  if (out.size() == 0) return;
  // The bias of the paths that do not add it per tile: after the whole product.
  auto add_bias = [&] {
    if (bias == nullptr) return;
    float* c = out_ptr<float>(out);
    const float* v = in_ptr<float>(*bias);
    std::vector<float> row(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) row[static_cast<size_t>(j)] = v[j * bias->node().strides.back()];
    for (int64_t i = 0; i < out.size() / n; ++i)
      add_f32_run(c + i * n, row.data(), c + i * n, n, p.bias == MatmulBias::Before);
  };
  if (k == 0) {
    std::memset(out.node().data_ptr(), 0, out.nbytes());  // an empty sum: zeros of every dtype
    add_bias();
    return;
  }
  if (!p.packed_b.empty() && p.panel_n == 0) {
    packed_product(a, b, out, p, bias);
    return;
  }
  dispatch_all(out.dtype(), [&]<class T>() {
    if constexpr (std::is_floating_point_v<T> || is_half_v<T>) {
      if (fits_int(m * std::max<int64_t>(1, shape_size(Shape(out.shape().begin(), out.shape().end() - 2)))) &&
          fits_int(n) && fits_int(k)) {
        blas_matmul<T>(a, b, out, p, bias);
        return;
      }
    }
    if constexpr (is_half_v<T>) {
      throw UnsupportedError("matmul: " + std::string(dtype_name(out.dtype())) + " product of shape " +
                             shape_to_string(out.shape()) + " exceeds BLAS's 32-bit sizes");
    } else {
      loop_matmul<T>(a, b, out);
      add_bias();
    }
  });
}

}  // namespace smelt::cpu
