// CUDA Matmul: cuBLASLt for float32/float16/bfloat16 (float32 accumulation), a plain exact kernel
// for the other dtypes (integers wrap, bool is an or of ands, float64 accumulates in float64).
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "smelt/errors.h"
#include "src/backend/cuda/allocator.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/kernels.h"
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

/// A batch operand as cuBLASLt sees it: row-major matrices `batch_stride` elements apart (0: one
/// matrix broadcast over the batch). Copies the operand when its layout is anything else.
struct Operand {
  Array data;
  int64_t batch_stride = 0;
};

Operand prepare(const Array& x, int64_t rows, int64_t cols) {
  const auto& n = x.node();
  const int nd = x.ndim();
  const bool mat_contig = (rows <= 1 || n.strides[nd - 2] == cols) && (cols <= 1 || n.strides[nd - 1] == 1);
  bool batch_zero = true;
  for (int d = 0; d < nd - 2; ++d)
    if (n.shape[d] != 1 && n.strides[d] != 0) batch_zero = false;
  if (mat_contig && batch_zero) return {x, 0};
  if (is_row_contiguous(n.shape, n.strides)) return {x, rows * cols};
  Array c = make_array(x.shape(), x.dtype(), x.device(), make_prim(PrimKind::Copy, NoParams{}), {x});
  c.eval();
  return {c, rows * cols};
}

void lt_matmul(const Array& a, const Array& b, Array& out, int64_t batch, int64_t m, int64_t n, int64_t k) {
  const CublasLtApi& lt = cublaslt();
  DeviceState& s = state_of(out);
  const LtCall h = lt_handle(out.device());
  const Operand pa = prepare(a, m, k), pb = prepare(b, k, n);
  cudaDataType_t type = CUDA_R_32F;
  switch (out.dtype()) {
    case Dtype::Float16: type = CUDA_R_16F; break;
    case Dtype::BFloat16: type = CUDA_R_16BF; break;
    default: type = CUDA_R_32F; break;
  }
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
  // Row-major C = A B is column-major C^T = B^T A^T: B's buffer is the first operand.
  check_cublas(lt.cublasLtMatrixLayoutCreate(&la, type, static_cast<uint64_t>(n), static_cast<uint64_t>(k), n),
               "cublasLtMatrixLayoutCreate", what);
  check_cublas(lt.cublasLtMatrixLayoutCreate(&lb, type, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k),
               "cublasLtMatrixLayoutCreate", what);
  check_cublas(lt.cublasLtMatrixLayoutCreate(&lc, type, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n),
               "cublasLtMatrixLayoutCreate", what);
  if (batch > 1) {
    int32_t count = static_cast<int32_t>(batch);
    int64_t sa = pb.batch_stride, sb = pa.batch_stride, sc = m * n;
    for (auto [layout, stride] : {std::pair{la, sa}, std::pair{lb, sb}, std::pair{lc, sc}}) {
      check_cublas(lt.cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                   "cublasLtMatrixLayoutSetAttribute", what);
      check_cublas(lt.cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                       sizeof stride),
                   "cublasLtMatrixLayoutSetAttribute", what);
    }
  }
  check_cublas(lt.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", what);
  size_t ws = kWorkspace;
  check_cublas(lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
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
  check_cublas(lt.cublasLtMatmul(h.handle, desc, &alpha, reinterpret_cast<const void*>(dptr(pb.data)), la,
                                 reinterpret_cast<const void*>(dptr(pa.data)), lb, &beta,
                                 reinterpret_cast<void*>(dptr(out)), lc, reinterpret_cast<void*>(dptr(out)), lc,
                                 &result.algo, h.workspace, kWorkspace, current_stream(s)),
               "cublasLtMatmul", what);
  // The copies made by prepare() are released here; the stream orders their reuse.
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
  CUfunction fn = get_kernel(s.index, "matmul_plain|" + t, [&] {
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
    case Dtype::BFloat16: lt_matmul(a, b, out, batch, m, n, k); return;
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
