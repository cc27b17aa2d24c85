// The matmul_prepack and matmul_pack passes: constant float32 CPU Matmul operands are made row-major, and B packed in oneDNN's layout (or, for products of few rows, in the column panels of smelt's tiles), once, at compile time.
#include <map>
#include <tuple>
#include <unordered_map>

#include "smelt/device.h"
#include "smelt/ops.h"
#include "src/backend/cpu/dnnl.h"
#include "src/backend/cpu/gemm.h"
#include "src/compile/passes.h"
#include "src/core/node.h"

namespace smelt::compiler {

namespace {

/// True when `a`'s last two axes are stored transposed (column-major matrices): the CPU kernel
/// would copy them to row-major on every call.
bool stored_transposed(const Array& a) {
  if (a.ndim() < 2) return false;
  const auto& n = a.node();
  const int nd = a.ndim();
  const int64_t rows = n.shape[nd - 2], cols = n.shape[nd - 1];
  return rows > 1 && cols > 1 && n.strides[nd - 2] == 1 && n.strides[nd - 1] != 1;
}

}  // namespace

void prepack_matmul_operands(Tape& tape) {
  // Only where the kernel's bits do not depend on the operand's storage (oneDNN's tiles read
  // row-major copies of transposed operands; OpenBLAS's transposed kernels sum in another order).
  if (!cpu::dnnl_enabled()) return;
  std::unordered_map<int, size_t> constant_at;  // value id -> index in tape.constants
  for (size_t i = 0; i < tape.constants.size(); ++i) constant_at[tape.constants[i].first] = i;
  std::unordered_map<int, int> packed;  // constant value id -> its row-major copy (shared by every reader)
  bool changed = false;
  for (Step& s : tape.steps) {
    if (s.prim.kind != PrimKind::Matmul || s.device.type != Device::Type::Cpu) continue;
    for (int& in : s.inputs) {
      const ValueInfo& v = tape.values[in];
      if (v.dtype != Dtype::Float32 || v.device.type != Device::Type::Cpu) continue;
      if (auto p = packed.find(in); p != packed.end()) {
        in = p->second;
        changed = true;
        continue;
      }
      const auto c = constant_at.find(in);
      if (c == constant_at.end()) continue;
      const Array& x = tape.constants[c->second].second;
      if (x.device().type != Device::Type::Cpu || !stored_transposed(x)) continue;
      Array rows = copy(x);
      rows.eval();
      const int id = tape.add_value(v.shape, v.dtype, v.device);
      tape.constants.emplace_back(id, rows);
      packed[in] = id;
      in = id;
      changed = true;
    }
  }
  if (changed) eliminate_dead_steps(tape);  // drops the transposed constants no step reads any more
}

void pack_matmul_weights(Tape& tape) {
  if (!cpu::dnnl_enabled()) return;
  std::unordered_map<int, size_t> constant_at;  // value id -> index in tape.constants
  for (size_t i = 0; i < tape.constants.size(); ++i) constant_at[tape.constants[i].first] = i;
  // (B's first element, its row and column strides, m, n, k) -> the packed copy and the thread
  // count it was packed for: products of one weight and shape share one, also through different
  // constants viewing it (a weight broadcast to two batches).
  using Key = std::tuple<const void*, int64_t, int64_t, int64_t, int64_t, int64_t>;
  std::map<Key, std::pair<int, int>> packed;
  bool changed = false;
  for (Step& s : tape.steps) {
    if (s.prim.kind != PrimKind::Matmul || s.device.type != Device::Type::Cpu) continue;
    MatmulParams params = s.prim.get<MatmulParams>();
    if (!params.packed_b.empty()) continue;
    const ValueInfo& a = tape.values[s.inputs[0]];
    const ValueInfo& b = tape.values[s.inputs[1]];
    const ValueInfo& y = tape.values[s.outputs[0]];
    if (a.dtype != Dtype::Float32 || b.dtype != Dtype::Float32 || y.dtype != Dtype::Float32) continue;
    if (a.device.type != Device::Type::Cpu || b.device.type != Device::Type::Cpu) continue;
    const size_t nd = y.shape.size();
    if (nd < 2 || b.shape.size() != nd) continue;
    const int64_t m = y.shape[nd - 2], n = y.shape[nd - 1], k = a.shape.back();
    const bool panels = !cpu::dnnl_product_taken(m, n, k) && cpu::gemm_b_panels(m, n, k);
    if (!panels && !cpu::dnnl_product_taken(m, n, k)) continue;
    const auto c = constant_at.find(s.inputs[1]);
    if (c == constant_at.end()) continue;
    Array weight = tape.constants[c->second].second;
    if (weight.device().type != Device::Type::Cpu) continue;
    {
      DefaultDeviceScope on_cpu(Device::cpu());
      weight.eval();
    }
    // One matrix for the whole batch: batch axes of size 1 or broadcast (stride 0).
    const auto& node = weight.node();
    bool shared = true;
    for (size_t d = 0; d + 2 < nd; ++d) shared = shared && (node.shape[d] == 1 || node.strides[d] == 0);
    if (!shared) continue;
    const int64_t rs = node.strides[nd - 2], cs = node.strides[nd - 1];
    const Key key{node.data_ptr(), rs, cs, m, n, k};
    // The step reads the packed copy `id` (packed for `threads`; panels: 0).
    auto read_packed = [&](int id, int threads) {
      params.packed_b = b.shape;
      params.packed_threads = threads;
      params.panel_n = panels ? cpu::gemm_tiles(m, n, k).tile_n : 0;
      s.prim = make_prim(PrimKind::Matmul, std::move(params));
      s.inputs[1] = id;
      changed = true;
    };
    if (auto p = packed.find(key); p != packed.end()) {
      read_packed(p->second.first, p->second.second);
      continue;
    }
    if (panels) {
      // A decode step's vector-matrix product: B in the column panels of smelt's own tiles, each
      // tile one contiguous read (GPT-2 base's 768 x 3072 projections: 35-41 -> 40-45 GB/s).
      const int id = add_packed_constant(tape, [&](const std::function<float*(size_t)>& alloc) {
        cpu::gemm_pack_b_panels(m, n, k, static_cast<const float*>(node.data_ptr()), rs, cs,
                                alloc(static_cast<size_t>(n * k)));
        return true;
      });
      packed[key] = {id, 0};
      read_packed(id, 0);
      continue;
    }
    cpu::DnnlProduct d;
    d.m = m;
    d.n = n;
    d.k = k;
    if ((n == 1 || cs == 1) && (k == 1 || rs >= n)) {
      d.ldb = k == 1 ? n : rs;
    } else if ((k == 1 || rs == 1) && (n == 1 || cs >= k)) {
      d.b_transposed = true;
      d.ldb = n == 1 ? k : cs;
    } else {
      continue;  // another storage: the kernel reorders it per call
    }
    int threads = 0;
    const int id = add_packed_constant(tape, [&](const std::function<float*(size_t)>& alloc) {
      return cpu::dnnl_pack_product_weights(d, static_cast<const float*>(node.data_ptr()), alloc, &threads);
    });
    if (id < 0) continue;
    packed[key] = {id, threads};
    read_packed(id, threads);
  }
  if (changed) eliminate_dead_steps(tape);  // the plain weights no step reads any more
}

}  // namespace smelt::compiler
