// The fuse pass: finds element-wise groups on the tape and replaces each by one Fused step.
#include "src/compile/fuse.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "smelt/errors.h"
#include "smelt/ops.h"
#include "smelt/telemetry.h"
#include "src/codegen/fused_kernel.h"
#include "src/codegen/kernel_builder.h"
#include "src/compile/passes.h"

namespace smelt::compiler {

namespace {

// What a step contributes to a fused kernel, if anything: the primitive table's fuse role.
using Role = FuseRole;

Role role_of(const Tape&, const Step& s) { return prim_fuse_role(s.prim.kind); }

bool broadcastable_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 0; i < from.size(); ++i) {
    int64_t f = from[from.size() - 1 - i], t = to[to.size() - 1 - i];
    if (f != t && f != 1) return false;
  }
  return true;
}

struct Group {
  Shape shape;
  Device device;           // every member runs here: one kernel never mixes devices
  std::vector<int> steps;  // indices into tape.steps, in tape order once sorted
};

}  // namespace

void fuse_elementwise(Tape& tape, const std::string& function) {
  const int nsteps = static_cast<int>(tape.steps.size());
  std::vector<int> producer(tape.values.size(), -1);  // value -> step index
  for (int i = 0; i < nsteps; ++i)
    for (int o : tape.steps[i].outputs) producer[o] = i;
  std::vector<std::vector<int>> consumers(tape.values.size());  // value -> consuming steps
  for (int i = 0; i < nsteps; ++i)
    for (int in : tape.steps[i].inputs)
      if (consumers[in].empty() || consumers[in].back() != i) consumers[in].push_back(i);
  std::vector<char> is_output(tape.values.size(), 0);
  for (int o : tape.outputs) is_output[o] = 1;

  // Captured scalars (0-d constants, such as the C++ numbers in `x * 2.0f`) become literals.
  std::unordered_map<int, const Array*> scalar_constant;
  for (auto& [id, a] : tape.constants)
    if (a.ndim() == 0) scalar_constant[id] = &a;

  // A step can be part of a kernel on `device` when it runs there and reads only values that
  // live there (captured scalars become literals, so theirs does not matter). Eager element-wise
  // ops move their operands first, so this holds for them; the check keeps a kernel from ever
  // taking a pointer of another device.
  auto fits_device = [&](const Step& s, Device device) {
    if (!(s.device == device)) return false;
    return std::all_of(s.inputs.begin(), s.inputs.end(),
                       [&](int in) { return scalar_constant.count(in) || tape.values[in].device == device; });
  };

  std::vector<int> group_of(nsteps, -1);
  std::vector<Group> groups;
  // Roots from the end: a compute step not yet taken starts a group that grows toward inputs.
  for (int root = nsteps - 1; root >= 0; --root) {
    const Step& rs = tape.steps[root];
    if (group_of[root] >= 0 || role_of(tape, rs) != Role::Compute || !fits_device(rs, rs.device)) continue;
    Group g;
    g.shape = tape.values[rs.outputs[0]].shape;
    g.device = rs.device;
    int gid = static_cast<int>(groups.size());
    group_of[root] = gid;
    g.steps.push_back(root);
    // Members of this group. Broadcasts and constants cost nothing to recompute, so several
    // groups may each take a copy of one (a scalar broadcast feeding many chains); only
    // arithmetic steps belong to one group (group_of).
    std::unordered_set<int> in_group{root};
    int compute = 1;
    // The kernel's arguments as the group grows: values read from outside (scalar constants
    // are literals, not arguments) and the outputs. A step that would push them past
    // kMaxFusedArguments stays outside, so a wide tree splits into several kernels instead of
    // none.
    std::unordered_set<int> reads;
    int outputs = 1;
    auto external_reads = [&](const Step& s, std::vector<int>& out) {
      for (int in : s.inputs)
        if (!scalar_constant.count(in) && (producer[in] < 0 || !in_group.count(producer[in])) && !reads.count(in))
          out.push_back(in);
    };
    {
      std::vector<int> first;
      external_reads(rs, first);
      reads.insert(first.begin(), first.end());
    }
    // Grow toward the inputs until nothing more joins: a value rejected because one of its
    // consumers had not joined yet is looked at again on the next sweep.
    for (bool added = true; added;) {
      added = false;
      for (size_t k = 0; k < g.steps.size(); ++k) {
        for (int in : tape.steps[g.steps[k]].inputs) {
          int p = producer[in];
          if (p < 0 || group_of[p] >= 0 || in_group.count(p)) continue;
          const Step& ps = tape.steps[p];
          Role r = role_of(tape, ps);
          if (r == Role::None || ps.outputs.size() != 1 || !fits_device(ps, g.device)) continue;
          const Shape& pshape = tape.values[ps.outputs[0]].shape;
          // Computing at the group's index recomputes values of smaller shapes: allowed for
          // broadcasts and constants (free), not for arithmetic (it could multiply the work).
          if (r == Role::Compute && pshape != g.shape) continue;
          if (r != Role::Compute && !broadcastable_to(pshape, g.shape)) continue;
          if (is_output[ps.outputs[0]] && (pshape != g.shape || r != Role::Compute)) continue;
          // An arithmetic value joins only when every consumer is an arithmetic step of this
          // group: otherwise it must still be stored for the others.
          bool all_inside = std::all_of(consumers[ps.outputs[0]].begin(), consumers[ps.outputs[0]].end(),
                                        [&](int c) { return group_of[c] == gid; });
          if (r == Role::Compute && !all_inside) continue;
          if (r == Role::Compute && compute + 1 > kMaxFusedInstructions) continue;
          std::vector<int> fresh;
          external_reads(ps, fresh);
          std::sort(fresh.begin(), fresh.end());
          fresh.erase(std::unique(fresh.begin(), fresh.end()), fresh.end());
          const int pout = ps.outputs[0];
          const int args = static_cast<int>(reads.size()) - static_cast<int>(reads.count(pout)) +
                           static_cast<int>(fresh.size()) + outputs + (is_output[pout] ? 1 : 0);
          if (args > kMaxFusedArguments) continue;
          reads.erase(pout);
          reads.insert(fresh.begin(), fresh.end());
          outputs += is_output[pout] ? 1 : 0;
          if (r == Role::Compute) group_of[p] = gid;
          in_group.insert(p);
          g.steps.push_back(p);
          if (r == Role::Compute) ++compute;
          added = true;
        }
      }
    }
    if (compute < 2) {  // a single operation is not wrapped
      for (int s : g.steps) group_of[s] = -1;
      continue;
    }
    std::sort(g.steps.begin(), g.steps.end());
    groups.push_back(std::move(g));
  }
  if (groups.empty()) return;

  // Lower each group to a program; on failure the group's steps stay as they are.
  std::vector<std::optional<Step>> fused_at(nsteps);  // replacement placed at the group's last step
  std::vector<char> removed(nsteps, 0);
  for (auto& g : groups) {
    codegen::FusedProgram prog;
    std::unordered_map<int, int> instr_of;  // tape value -> instruction
    std::vector<int> arg_values;            // tape values read as kernel inputs
    std::unordered_set<int> members(g.steps.begin(), g.steps.end());
    auto operand = [&](int value) -> int {
      if (auto it = instr_of.find(value); it != instr_of.end()) return it->second;
      if (auto c = scalar_constant.find(value); c != scalar_constant.end()) {
        codegen::Instr k{};
        k.kind = codegen::InstrKind::Constant;
        k.dtype = tape.values[value].dtype;
        // A captured scalar may live on the GPU: its value is read through the host.
        Array host = c->second->device().type == Device::Type::Cpu ? *c->second : to_device(*c->second, Device::cpu());
        host.eval();
        k.value = Scalar::load(host.data(), k.dtype);
        prog.instrs.push_back(k);
        int idx = static_cast<int>(prog.instrs.size()) - 1;
        instr_of[value] = idx;
        return idx;
      }
      // A value from outside the group: a kernel input.
      codegen::Instr in{};
      in.kind = codegen::InstrKind::Input;
      in.dtype = tape.values[value].dtype;
      in.index = static_cast<int>(arg_values.size());
      prog.input_dtypes.push_back(tape.values[value].dtype);
      arg_values.push_back(value);
      prog.instrs.push_back(in);
      int idx = static_cast<int>(prog.instrs.size()) - 1;
      instr_of[value] = idx;
      return idx;
    };
    for (int si : g.steps) {
      const Step& s = tape.steps[si];
      int out = s.outputs[0];
      Dtype dt = tape.values[out].dtype;
      codegen::Instr ins{};
      ins.dtype = dt;
      if (s.prim.kind == PrimKind::Broadcast) {
        instr_of[out] = operand(s.inputs[0]);  // identity at the group's index
        continue;
      }
      if (s.prim.kind == PrimKind::Full) {
        ins.kind = codegen::InstrKind::Constant;
        ins.value = s.prim.get<FullParams>().value.cast(dt);
      } else if (s.prim.kind == PrimKind::Unary) {
        ins.kind = codegen::InstrKind::Unary;
        ins.unary = s.prim.get<UnaryParams>().op;
        ins.operands = {operand(s.inputs[0])};
      } else if (s.prim.kind == PrimKind::Binary) {
        ins.kind = codegen::InstrKind::Binary;
        ins.binary = s.prim.get<BinaryParams>().op;
        ins.operands = {operand(s.inputs[0]), operand(s.inputs[1])};
      } else if (s.prim.kind == PrimKind::Select) {
        ins.kind = codegen::InstrKind::Select;
        ins.operands = {operand(s.inputs[0]), operand(s.inputs[1]), operand(s.inputs[2])};
      } else {
        SMELT_ASSERT(s.prim.kind == PrimKind::Cast, "fuse: unexpected step " + s.prim.str());
        ins.kind = codegen::InstrKind::Cast;
        ins.operands = {operand(s.inputs[0])};
      }
      prog.instrs.push_back(std::move(ins));
      instr_of[out] = static_cast<int>(prog.instrs.size()) - 1;
    }
    // Outputs: the root, and any arithmetic member used outside the group (function outputs).
    std::vector<int> out_values;
    for (int si : g.steps) {
      if (role_of(tape, tape.steps[si]) != Role::Compute) continue;
      int v = tape.steps[si].outputs[0];
      bool outside = is_output[v];
      for (int c : consumers[v]) outside = outside || !members.count(c);
      if (si == g.steps.back() || outside) out_values.push_back(v);
    }
    if (static_cast<int>(arg_values.size() + out_values.size()) > kMaxFusedArguments) continue;
    for (int v : out_values) prog.outputs.push_back(instr_of.at(v));
    std::shared_ptr<const codegen::FusedKernel> kernel;
    try {
      kernel = codegen::make_fused_kernel(std::move(prog), g.device);
    } catch (const UnsupportedError& e) {
      if (telemetry::enabled())
        telemetry::emit({"compile.fallback", 0.0, {{"function", function}, {"op", "fuse"}, {"reason", e.what()}}});
      break;  // keep this and every later group unfused (the compiler is not usable); earlier ones stay fused
    }
    Step fused;
    fused.prim = make_prim(PrimKind::Fused, FusedParams{kernel});
    fused.device = g.device;
    fused.inputs = arg_values;
    fused.outputs = out_values;
    // Broadcasts and constants stay: other groups or steps may read them; the DCE below drops
    // those that nobody reads any more.
    for (int si : g.steps)
      if (role_of(tape, tape.steps[si]) == Role::Compute) removed[si] = 1;
    fused_at[g.steps.back()] = std::move(fused);
  }
  std::vector<Step> steps;
  for (int i = 0; i < nsteps; ++i) {
    if (fused_at[i]) steps.push_back(std::move(*fused_at[i]));
    else if (!removed[i]) steps.push_back(std::move(tape.steps[i]));
  }
  tape.steps = std::move(steps);
  eliminate_dead_steps(tape);  // constants now inlined as literals
}

}  // namespace smelt::compiler
