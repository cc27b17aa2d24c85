// The loops of a row program (fused reductions): which instructions each pass over a row computes.
#pragma once

#include <string>
#include <vector>

#include "src/codegen/fused_program.h"

namespace smelt::codegen {

/// One pass over the elements of a row: a reduction's prologue (its operand, ending in the
/// Reduce instruction `reduce`) or the epilogue (reduce = -1: the per-element outputs).
struct RowLoop {
  int reduce = -1;
  std::vector<int> compute;  // per-element instructions computed in this pass, in program order
};

/// The passes of a row program in order, and the per-element values that later passes read
/// again (`keep`): with `keep_values`, a value computed in one pass and needed by a later one is
/// kept in a row buffer instead of recomputed (every reduction's operand always is, as the
/// reduction reads it from memory). Without it, later passes recompute from the inputs.
struct RowPlan {
  std::vector<RowLoop> loops;
  std::vector<char> keep;  // per instruction
};

RowPlan plan_row_program(const FusedProgram& program, bool keep_values);

/// The passes when the values marked in `keep` (per instruction; not inputs, constants or per-row
/// values) are kept by the pass that first computes them: later passes stop at them instead of
/// recomputing them (plan.keep marks those a later pass reads). With no value marked,
/// plan_row_program(p, false).
RowPlan plan_row_program_keeping(const FusedProgram& program, const std::vector<char>& keep);

/// "Sum", "Max", ...: the ReduceOp enumerator's name in generated code.
const char* reduce_op_enumerator(ReduceOp op);

}  // namespace smelt::codegen
