// Splits a row program into passes over the row (one per reduction, then the epilogue).
#include "src/codegen/row_plan.h"

#include <algorithm>

#include "smelt/errors.h"

namespace smelt::codegen {

const char* reduce_op_enumerator(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "Sum";
    case ReduceOp::Prod: return "Prod";
    case ReduceOp::Max: return "Max";
    case ReduceOp::Min: return "Min";
    case ReduceOp::All: return "All";
    case ReduceOp::Any: return "Any";
    case ReduceOp::Mean: return "Mean";
  }
  return "?";
}

namespace {

/// plan_row_program's passes; `keep_all` keeps every value an earlier pass computed (and every
/// reduction's operand), else only those marked in `keep`.
RowPlan plan_passes(const FusedProgram& p, bool keep_all, const std::vector<char>& keep) {
  const int n = static_cast<int>(p.instrs.size());
  RowPlan plan;
  plan.keep.assign(n, 0);
  const bool keep_values = keep_all || std::find(keep.begin(), keep.end(), 1) != keep.end();
  std::vector<char> done(n, 0);  // computed by an earlier pass
  // A pass computes the per-element instructions its roots need (a worklist over operands);
  // with keep_values it stops at values an earlier pass computed, which are then kept.
  auto make_loop = [&](int reduce, const std::vector<int>& roots) {
    RowLoop loop;
    loop.reduce = reduce;
    std::vector<char> in(n, 0);
    std::vector<int> work;
    for (int r : roots)
      if (!p.instrs[r].per_row) work.push_back(r);
    while (!work.empty()) {
      const int i = work.back();
      work.pop_back();
      if (in[i]) continue;
      const Instr& ins = p.instrs[i];
      SMELT_ASSERT(!ins.per_row, "row plan: a per-row value reached a pass");
      if (keep_values && done[i] && ins.kind != InstrKind::Input && (keep_all || keep[i])) {
        plan.keep[i] = 1;
        continue;
      }
      in[i] = 1;
      for (int o : ins.operands)
        if (!p.instrs[o].per_row) work.push_back(o);
    }
    for (int i = 0; i < n; ++i)
      if (in[i]) loop.compute.push_back(i), done[i] = 1;
    plan.loops.push_back(std::move(loop));
  };
  for (int i = 0; i < n; ++i) {
    const Instr& ins = p.instrs[i];
    if (ins.kind != InstrKind::Reduce) continue;
    SMELT_ASSERT(!p.instrs[ins.operands[0]].per_row, "row plan: a reduction of a per-row value");
    if (keep_all && p.instrs[ins.operands[0]].kind != InstrKind::Input) plan.keep[ins.operands[0]] = 1;
    make_loop(i, {ins.operands[0]});
  }
  std::vector<int> element_outputs;
  for (int o : p.outputs)
    if (!p.instrs[o].per_row) element_outputs.push_back(o);
  make_loop(-1, element_outputs);
  return plan;
}

}  // namespace

RowPlan plan_row_program(const FusedProgram& p, bool keep_values) { return plan_passes(p, keep_values, {}); }

RowPlan plan_row_program_keeping(const FusedProgram& p, const std::vector<char>& keep) {
  SMELT_ASSERT(keep.size() == p.instrs.size(), "row plan: one keep mark per instruction");
  return plan_passes(p, false, keep);
}

}  // namespace smelt::codegen
