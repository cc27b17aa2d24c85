// CUDA Matmul: cuBLASLt for float32/float16/bfloat16 (float32 accumulation; broadcast and
// transposed operands read in place), a plain exact kernel for the other dtypes (integers wrap,
// bool is an or of ands, float64 accumulates in float64).
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "smelt/errors.h"
#include "smelt/ops.h"
#include "src/backend/cuda/allocator.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/kernels.h"
#include "src/backend/cuda/matmul_plan.h"
#include "src/core/node.h"
#include "src/core/stream_state.h"

namespace smelt::cuda {

namespace {

constexpr size_t kWorkspace = size_t{32} << 20;

// cuBLASLt handles may be shared by threads; a workspace may not be shared by two streams
// (their matmuls may run at once), so each stream of a device has its own, kept for good.
struct LtHandle {
  cublasLtHandle_t handle = nullptr;
  std::map<uint64_t, BufferPtr> workspaces;  // stream id -> its workspace
};

/// What one cublasLtMatmul needs: the device's handle and the current stream's workspace.
struct LtCall {
  cublasLtHandle_t handle;
  void* workspace;
};

LtCall lt_handle(Device device) {
  static std::mutex m;
  static auto* handles = new std::map<int, LtHandle>();  // never destroyed; entries never move
  const uint64_t stream = smelt::detail::current_stream_id(device);
  std::lock_guard lock(m);
  LtHandle& h = (*handles)[device.index];
  if (!h.handle) check_cublas(cublaslt().cublasLtCreate(&h.handle), "cublasLtCreate", "matmul");
  BufferPtr& ws = h.workspaces[stream];
  if (!ws) ws = allocator(device).allocate(kWorkspace);
  return {h.handle, ws->ptr};
}

/// `x` itself when cuBLASLt can read its matrices in place (row-major or transposed), else a
/// contiguous copy of its distinct matrices: axes it is broadcast along (stride 0) stay
/// broadcast in the copy, so even this fallback never materializes a broadcast.
Array readable(const Array& x, int64_t rows, int64_t cols) {
  const auto& n = x.node();
  const int nd = x.ndim();
  if (gemm_operand(n.strides[nd - 2], n.strides[nd - 1], rows, cols).ok) return x;
  Shape start(nd, 0), stop = x.shape();
  for (int d = 0; d < nd - 2; ++d)
    if (n.strides[d] == 0) stop[d] = std::min<int64_t>(stop[d], 1);
  Array c = broadcast_to(copy(slice(x, start, stop)), x.shape());
  c.eval();
  return c;
}

cudaDataType_t lt_type(Dtype dt) {
  switch (dt) {
    case Dtype::Float16: return CUDA_R_16F;
    case Dtype::BFloat16: return CUDA_R_16BF;
    case Dtype::Float32: return CUDA_R_32F;
    case Dtype::Bool:
    case Dtype::Int8:
    case Dtype::Int16:
    case Dtype::Int32:
    case Dtype::Int64:
    case Dtype::UInt8:
    case Dtype::UInt16:
    case Dtype::UInt32:
    case Dtype::UInt64:
    case Dtype::Float64: break;
  }
  throw UnsupportedError(std::string("matmul: no cuBLASLt path for ") + dtype_name(dt));
}

/// Row-major C = A B through cuBLASLt with no copy of a broadcast or transposed operand: swapped
/// matrix axes become transpose flags, broadcast batch axes stride 0 (matmul_plan.h), and batch
/// axes that one stride cannot describe become a loop of calls over views. The product goes to
/// `c_ptr` in rows of `ldc` elements (the output's own buffer and n, or a padded scratch).
void lt_matmul(const Array& a0, const Array& b0, Array& out, uint64_t c_ptr, int64_t ldc, int64_t m, int64_t n,
               int64_t k) {
  const CublasLtApi& lt = cublaslt();
  DeviceState& s = state_of(out);
  const LtCall h = lt_handle(out.device());
  const Array a = readable(a0, m, k), b = readable(b0, k, n);
  const int nd = out.ndim();
  const auto &na = a.node(), &nb = b.node();
  const GemmOperand ga = gemm_operand(na.strides[nd - 2], na.strides[nd - 1], m, k);
  const GemmOperand gb = gemm_operand(nb.strides[nd - 2], nb.strides[nd - 1], k, n);
  SMELT_ASSERT(ga.ok && gb.ok, "matmul: an operand copy is still not readable by cuBLASLt");
  const Shape bshape(out.shape().begin(), out.shape().end() - 2);
  Strides sc(bshape.size());
  for (int64_t d = static_cast<int64_t>(bshape.size()) - 1, step = m * ldc; d >= 0; --d) {
    sc[d] = step;
    step *= bshape[d];
  }
  const BatchPlan plan = plan_batches(bshape, Strides(na.strides.begin(), na.strides.end() - 2),
                                      Strides(nb.strides.begin(), nb.strides.end() - 2), sc);
  const cudaDataType_t type = lt_type(out.dtype());
  const uint64_t es = size_of(out.dtype());
  const std::string what = "matmul";
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  struct Cleanup {
    const CublasLtApi& lt;
    cublasLtMatmulDesc_t& d;
    cublasLtMatrixLayout_t &a, &b, &c;
    cublasLtMatmulPreference_t& p;
    ~Cleanup() {
      if (p) lt.cublasLtMatmulPreferenceDestroy(p);
      if (c) lt.cublasLtMatrixLayoutDestroy(c);
      if (b) lt.cublasLtMatrixLayoutDestroy(b);
      if (a) lt.cublasLtMatrixLayoutDestroy(a);
      if (d) lt.cublasLtMatmulDescDestroy(d);
    }
  } cleanup{lt, desc, la, lb, lc, pref};
  // Exact float32 products (no TF32): results stay comparable with the CPU's.
  check_cublas(lt.cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate", what);
  // Row-major C = A B is column-major C^T = B^T A^T: b's buffer is cuBLAS's A, a's its B. A
  // row-major matrix read column-major is its transpose, so a row-major operand is used as it is
  // and an operand stored transposed (unit row stride) gets the transpose flag.
  const cublasOperation_t op_b = gb.trans ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = ga.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_cublas(lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof op_b),
               "cublasLtMatmulDescSetAttribute", what);
  check_cublas(lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof op_a),
               "cublasLtMatmulDescSetAttribute", what);
  auto layout = [&](cublasLtMatrixLayout_t* l, int64_t rows, int64_t cols, int64_t ld) {
    check_cublas(lt.cublasLtMatrixLayoutCreate(l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
                 "cublasLtMatrixLayoutCreate", what);
  };
  if (gb.trans) layout(&la, k, n, gb.ld); else layout(&la, n, k, gb.ld);
  if (ga.trans) layout(&lb, m, k, ga.ld); else layout(&lb, k, m, ga.ld);
  layout(&lc, n, m, ldc);
  if (plan.count > 1) {
    SMELT_ASSERT(plan.count <= INT32_MAX, "matmul: a strided batch longer than cuBLASLt's batch count");
    const int32_t count = static_cast<int32_t>(plan.count);
    const int64_t strides[3] = {plan.stride[1], plan.stride[0], plan.stride[2]};  // la = b, lb = a, lc
    const cublasLtMatrixLayout_t layouts[3] = {la, lb, lc};
    for (int i = 0; i < 3; ++i) {
      check_cublas(lt.cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                   "cublasLtMatrixLayoutSetAttribute", what);
      check_cublas(lt.cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                       &strides[i], sizeof strides[i]),
                   "cublasLtMatrixLayoutSetAttribute", what);
    }
  }
  // Views start anywhere: tell the heuristic how aligned every pointer of every call (and the
  // batch strides) really is, so that it never picks a kernel that needs more.
  std::vector<uint64_t> b_addrs, a_addrs, c_addrs;
  for (const auto& off : plan.offsets) {
    a_addrs.push_back(dptr(a) + static_cast<uint64_t>(off[0]) * es);
    b_addrs.push_back(dptr(b) + static_cast<uint64_t>(off[1]) * es);
    c_addrs.push_back(c_ptr + static_cast<uint64_t>(off[2]) * es);
  }
  if (plan.count > 1) {
    a_addrs.push_back(static_cast<uint64_t>(plan.stride[0]) * es);
    b_addrs.push_back(static_cast<uint64_t>(plan.stride[1]) * es);
    c_addrs.push_back(static_cast<uint64_t>(plan.stride[2]) * es);
  }
  check_cublas(lt.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", what);
  size_t ws = kWorkspace;
  check_cublas(lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
               "cublasLtMatmulPreferenceSetAttribute", what);
  const uint32_t align_a = common_alignment(b_addrs), align_b = common_alignment(a_addrs),
                 align_c = common_alignment(c_addrs);
  for (auto [attr, value] : {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
                             std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
                             std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c},
                             std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c}})
    check_cublas(lt.cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof value),
                 "cublasLtMatmulPreferenceSetAttribute", what);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  check_cublas(lt.cublasLtMatmulAlgoGetHeuristic(h.handle, desc, la, lb, lc, lc, pref, 1, &result, &found),
               "cublasLtMatmulAlgoGetHeuristic", what);
  if (found == 0)
    throw UnsupportedError("matmul: cuBLASLt has no algorithm for " + std::string(dtype_name(out.dtype())) + " [" +
                           std::to_string(m) + "x" + std::to_string(k) + "] @ [" + std::to_string(k) + "x" +
                           std::to_string(n) + "]");
  const float alpha = 1.0f, beta = 0.0f;
  for (size_t i = 0; i < plan.offsets.size(); ++i) {
    const auto* pb = reinterpret_cast<const void*>(b_addrs[i]);
    const auto* pa = reinterpret_cast<const void*>(a_addrs[i]);
    auto* pc = reinterpret_cast<void*>(c_addrs[i]);
    check_cublas(lt.cublasLtMatmul(h.handle, desc, &alpha, pb, la, pa, lb, &beta, pc, lc, pc, lc, &result.algo,
                                   h.workspace, kWorkspace, current_stream(s)),
                 "cublasLtMatmul", what);
  }
  // A copy made by readable() is released here; the stream orders the reuse of its memory.
}

/// Mirrors the device struct PitchArgs.
struct PitchArgs {
  uint64_t src, dst;
  int64_t rows, cols, src_ld, dst_ld, end;
};

/// Copies `rows` rows of `cols` elements between row pitches (elements), zeroing the rest of each
/// destination row up to `dst_ld` when `zero_tail`: one block a row, its threads across the row,
/// so both sides are read and written in order.
void pitch_copy(DeviceState& s, uint64_t src, int64_t src_ld, uint64_t dst, int64_t dst_ld, int64_t rows, int64_t cols,
                bool zero_tail, Dtype dt) {
  if (rows <= 0 || cols <= 0) return;
  PitchArgs args{src, dst, rows, cols, src_ld, dst_ld, zero_tail ? dst_ld : cols};
  const std::string t = bits_type(dt);
  const Kernel fn = get_kernel(s.index, "pitch_copy|" + t, [&] {
    return "struct PitchArgs { u64 src, dst; i64 rows, cols, src_ld, dst_ld, end; };\n"
           "extern \"C\" __global__ void k(PitchArgs a) {\n"
           "  const i64 r = bid();\n  if (r >= a.rows) return;\n"
           "  const " + t + "* s = (const " + t + "*)a.src + r * a.src_ld;\n"
           "  " + t + "* d = (" + t + "*)a.dst + r * a.dst_ld;\n"
           "  for (i64 c = threadIdx.x; c < a.end; c += blockDim.x) d[c] = c < a.cols ? s[c] : (" + t + ")0;\n}\n";
  }, "matmul");
  launch(s, fn, static_cast<uint64_t>(rows), 256, &args, "matmul");
}

/// Whether large products with unaligned rows are padded (SMELT_CUDA_GEMM_PAD=0 turns it off, to
/// measure against; read once).
bool gemm_padding() {
  static const bool on = [] {
    const char* v = std::getenv("SMELT_CUDA_GEMM_PAD");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

/// cuBLASLt's fast kernels need the rows of every matrix 16-byte aligned and their lengths a
/// multiple of the vector they load: with N = 50257 (GPT-2's logits, [4096x768] @ [768x50257] in
/// bfloat16) it ran CUTLASS's align-1 kernel, 3.6 ms on the H200, even with every row padded
/// (the length alone forbids the vector kernels). A large product pays for copies instead: b's one
/// matrix (read in place, not transposed) into rows of N rounded up to 16 bytes, the padding
/// zeroed, the product into rows as wide, and their first N columns copied into the output (the
/// pitch copies move every element once each way). False when the product is small or aligned
/// already, or b is not of that form: lt_matmul then runs as it is.
bool padded_lt_matmul(const Array& a, const Array& b, Array& out, int64_t m, int64_t n, int64_t k) {
  const int64_t es = out.itemsize();
  const int64_t rows = out.size() / n;  // m over the whole batch
  if (!gemm_padding() || (n * es) % 16 == 0 || rows < 256 || n < 256 || k < 64) return false;
  const auto& nb = b.node();
  const int nd = out.ndim();  // the operands have the output's rank (eval_matmul)
  if (nb.strides[nd - 1] != 1 || nb.strides[nd - 2] != n) return false;  // b's rows as they are (ld n)
  for (int d = 0; d < nd - 2; ++d)
    if (nb.strides[d] != 0 && b.shape()[d] != 1) return false;  // one matrix of b for the whole batch
  DeviceState& s = state_of(out);
  const int64_t step = 16 / es, npad = (n + step - 1) / step * step;
  BufferPtr bbuf = allocator(out.device()).allocate(static_cast<size_t>(k * npad * es));
  pitch_copy(s, dptr(b), n, reinterpret_cast<uint64_t>(bbuf->ptr), npad, k, n, true, out.dtype());
  Shape bshape = b.shape();
  bshape[nd - 1] = npad;
  Strides bst(nd, 0);
  bst[nd - 2] = npad;
  bst[nd - 1] = 1;
  const Array bp = detail::make_leaf(bshape, b.dtype(), b.device(), bbuf, bst);
  BufferPtr cbuf = allocator(out.device()).allocate(static_cast<size_t>(rows * npad * es));
  const uint64_t c = reinterpret_cast<uint64_t>(cbuf->ptr);
  lt_matmul(a, bp, out, c, npad, m, npad, k);
  pitch_copy(s, c, npad, dptr(out), n, rows, n, false, out.dtype());
  return true;  // the scratch buffers are released in stream order
}

/// Mirrors the device struct MmArgs.
struct MmArgs {
  uint64_t a, b, out;
  int64_t batch, m, n, k;
  int64_t ars, acs, brs, bcs;
  Layout bl;  // batch axes: st[0] of a, st[1] of b
};

void plain_matmul(const Array& a, const Array& b, Array& out, int64_t batch, int64_t m, int64_t n, int64_t k) {
  DeviceState& s = state_of(out);
  const auto &na = a.node(), &nb = b.node();
  const int nd = out.ndim();
  MmArgs args{dptr(a), dptr(b), dptr(out), batch, m, n, k,
              na.strides[nd - 2], na.strides[nd - 1], nb.strides[nd - 2], nb.strides[nd - 1], {}};
  const Shape bshape(out.shape().begin(), out.shape().end() - 2);
  const Strides sa(na.strides.begin(), na.strides.end() - 2), sb(nb.strides.begin(), nb.strides.end() - 2);
  args.bl = collapse_layout(bshape, {&sa, &sb}, "matmul");
  const Dtype dt = out.dtype();
  const std::string t = device_type(dt);
  std::string acc, step, fin;
  if (dt == Dtype::Bool) {
    acc = "bool";
    step = "acc = acc || (x && y);";
    fin = "acc";
  } else if (is_integral(dt)) {
    acc = size_of(dt) <= 4 ? "u32" : "u64";
    // Sign-extended operands, products and sums modulo 2^32 or 2^64, truncated at the end.
    const std::string w = is_signed_integral(dt) ? (size_of(dt) <= 4 ? "(Acc)(i32)" : "(Acc)(i64)") : "(Acc)";
    step = "acc = (Acc)(acc + (Acc)(" + w + "x * " + w + "y));";
    fin = "(" + t + ")acc";
  } else {
    acc = "double";
    step = "acc = acc + (double)up(x) * (double)up(y);";
    fin = "cvt<" + t + ", double>(acc)";
  }
  const Kernel fn = get_kernel(s.index, "matmul_plain|" + t, [&] {
    return "struct MmArgs { u64 a, b, out; i64 batch, m, n, k; i64 ars, acs, brs, bcs; Layout bl; };\n"
           "typedef " + acc + " Acc;\n"
           "extern \"C\" __global__ void k(MmArgs p) {\n"
           "  const i64 idx = gid();\n  if (idx >= p.batch * p.m * p.n) return;\n"
           "  const i64 j = idx % p.n, i = (idx / p.n) % p.m, bi = idx / (p.n * p.m);\n"
           "  i64 oa = 0, ob = 0, r = bi;\n"
           "  for (int d = (int)p.bl.nd - 1; d >= 0; --d) { const i64 c = r % p.bl.shape[d]; r /= p.bl.shape[d];"
           " oa += c * p.bl.st[0][d]; ob += c * p.bl.st[1][d]; }\n"
           "  const " + t + "* A = (const " + t + "*)p.a + oa + i * p.ars;\n"
           "  const " + t + "* B = (const " + t + "*)p.b + ob + j * p.bcs;\n"
           "  Acc acc = Acc(0);\n"
           "  for (i64 q = 0; q < p.k; ++q) { const " + t + " x = A[q * p.acs], y = B[q * p.brs]; " + step + " }\n"
           "  ((" + t + "*)p.out)[idx] = " + fin + ";\n}\n";
  }, "matmul");
  launch(s, fn, blocks_for(batch * m * n, 256), 256, &args, "matmul");
}

}  // namespace

void eval_matmul(const std::vector<Array>& inputs, Array& out) {
  const Array &a = inputs[0], &b = inputs[1];
  alloc_output(out);
  const int nd = out.ndim();
  const int64_t m = out.shape()[nd - 2], n = out.shape()[nd - 1], k = a.shape()[nd - 1];
  const int64_t batch = shape_size(Shape(out.shape().begin(), out.shape().end() - 2));
  if (out.size() == 0) return;
  if (k == 0) {  // sums of nothing
    fill_bits(out, 0);
    return;
  }
  switch (out.dtype()) {
    case Dtype::Float32:
    case Dtype::Float16:
    case Dtype::BFloat16:
      if (!padded_lt_matmul(a, b, out, m, n, k)) lt_matmul(a, b, out, dptr(out), n, m, n, k);
      return;
    case Dtype::Bool:
    case Dtype::Int8:
    case Dtype::Int16:
    case Dtype::Int32:
    case Dtype::Int64:
    case Dtype::UInt8:
    case Dtype::UInt16:
    case Dtype::UInt32:
    case Dtype::UInt64:
    case Dtype::Float64: plain_matmul(a, b, out, batch, m, n, k); return;
  }
}

}  // namespace smelt::cuda
