// The matmul_prepack pass: constant float32 CPU Matmul operands stored transposed are made row-major once, at compile time.
#include <unordered_map>

#include "smelt/device.h"
#include "smelt/ops.h"
#include "src/backend/cpu/dnnl.h"
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

}  // namespace smelt::compiler
