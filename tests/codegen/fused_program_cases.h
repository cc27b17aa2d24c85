// Fused programs for the kernel-identity tests, and one variant per field of the IR.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "src/codegen/fused_program.h"

namespace smelt::test {

/// softmax over rows of float32 with a float16 second input: max, x - max, exp, sum, e / sum,
/// and a cast; a row program (reduced_axes = 1) with per-row and per-element outputs.
inline codegen::FusedProgram softmax_row_program() {
  using codegen::Instr;
  using codegen::InstrKind;
  codegen::FusedProgram p;
  p.input_dtypes = {float32, float16};
  auto push = [&](Instr in) {
    p.instrs.push_back(std::move(in));
    return static_cast<int>(p.instrs.size()) - 1;
  };
  Instr x{InstrKind::Input, float32, {}, 0};
  const int xi = push(x);
  Instr mx{InstrKind::Reduce, float32, {xi}};
  mx.reduce = ReduceOp::Max;
  mx.per_row = true;
  const int mi = push(mx);
  Instr d{InstrKind::Binary, float32, {xi, mi}};
  d.binary = BinaryOp::Subtract;
  const int di = push(d);
  Instr e{InstrKind::Unary, float32, {di}};
  e.unary = UnaryOp::Exp;
  const int ei = push(e);
  Instr s{InstrKind::Reduce, float32, {ei}};
  s.reduce = ReduceOp::Mean;
  s.per_row = true;
  const int si = push(s);
  Instr q{InstrKind::Binary, float32, {ei, si}};
  q.binary = BinaryOp::Divide;
  const int qi = push(q);
  Instr h{InstrKind::Input, float16, {}, 1};
  const int hi = push(h);
  Instr c{InstrKind::Constant, float32, {}};
  c.value = Scalar::of_float(0.5, float32);
  const int ci = push(c);
  Instr hf{InstrKind::Cast, float32, {hi}};
  const int hfi = push(hf);
  Instr m{InstrKind::Binary, float32, {qi, hfi}};
  m.binary = BinaryOp::Multiply;
  const int mmi = push(m);
  Instr a{InstrKind::Binary, float32, {mmi, ci}};
  a.binary = BinaryOp::Add;
  const int ai = push(a);
  p.outputs = {ai, si};
  p.reduced_axes = 1;
  return p;
}

/// One variant of `base` per field of FusedProgram and Instr, each differing from it in that
/// field only, named by the field.
inline std::vector<std::pair<std::string, codegen::FusedProgram>> program_field_variants(
    const codegen::FusedProgram& base) {
  std::vector<std::pair<std::string, codegen::FusedProgram>> out;
  auto add = [&](const std::string& name, const std::function<void(codegen::FusedProgram&)>& change) {
    codegen::FusedProgram p = base;
    change(p);
    out.emplace_back(name, std::move(p));
  };
  add("input_dtypes", [](auto& p) { p.input_dtypes[1] = bfloat16; });
  add("instr.kind", [](auto& p) { p.instrs[8].kind = codegen::InstrKind::Unary, p.instrs[8].unary = UnaryOp::Abs; });
  add("instr.dtype", [](auto& p) { p.instrs[7].dtype = float64; });
  add("instr.operands", [](auto& p) { p.instrs[2].operands = {1, 0}; });
  add("instr.index", [](auto& p) { p.instrs[6].index = 0; });
  add("instr.unary", [](auto& p) { p.instrs[3].unary = UnaryOp::Exp2; });
  add("instr.binary", [](auto& p) { p.instrs[5].binary = BinaryOp::Multiply; });
  add("instr.value", [](auto& p) { p.instrs[7].value = Scalar::of_float(0.25, float32); });
  add("instr.value -0", [](auto& p) { p.instrs[7].value = Scalar::of_float(-0.0, float32); });
  add("instr.reduce", [](auto& p) { p.instrs[1].reduce = ReduceOp::Min; });
  add("instr.ddof", [](auto& p) { p.instrs[4].ddof = 1; });
  add("instr.per_row", [](auto& p) { p.instrs[3].per_row = true; });
  add("outputs", [](auto& p) { p.outputs = {10}; });
  add("reduced_axes", [](auto& p) { p.reduced_axes = 2; });
  return out;
}

}  // namespace smelt::test
