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

// What a step contributes to a fused kernel, if anything: the primitive table's fuse role, and
// Reduce for reductions (they join as row programs; see row_join).
enum class Role : uint8_t { None, Compute, Broadcast, Constant, Reduce };

Role role_of(const Tape&, const Step& s) {
  if (s.prim.kind == PrimKind::Reduce) return Role::Reduce;
  switch (prim_fuse_role(s.prim.kind)) {
    case FuseRole::None: return Role::None;
    case FuseRole::Compute: return Role::Compute;
    case FuseRole::Broadcast: return Role::Broadcast;
    case FuseRole::Constant: return Role::Constant;
  }
  return Role::None;
}

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
  // Row groups (reductions joined): the trailing `nred` axes of `shape` are rows; per-row
  // values have `row_shape` (those axes set to 1).
  int nred = 0;
  Shape row_shape;
  bool has_reduce = false;
  // Casts of values no kernel computes (inputs, constants, matmul results) that this group
  // recomputes per element without owning them: several groups may each convert one (see the
  // join below).
  std::unordered_set<int> recomputed;
};

// Steps that compute (one per group, counted against the size limits).
bool arithmetic(Role r) { return r == Role::Compute || r == Role::Reduce; }

/// The number of trailing axes a Reduce step reduces when they are exactly the last k axes of
/// its input (k >= 1), else 0: row programs reduce rows.
int trailing_reduce(const Tape& tape, const Step& s) {
  if (s.prim.kind != PrimKind::Reduce) return 0;
  const auto& axes = s.prim.get<ReduceParams>().axes;
  const int nd = static_cast<int>(tape.values[s.inputs[0]].shape.size());
  const int k = static_cast<int>(axes.size());
  if (k == 0 || k > nd) return 0;
  for (int i = 0; i < k; ++i)
    if (axes[i] != nd - k + i) return 0;
  return k;
}

/// `full` with its trailing k axes set to 1.
Shape rows_of(const Shape& full, int k) {
  Shape r = full;
  for (size_t d = full.size() - k; d < full.size(); ++d) r[d] = 1;
  return r;
}

/// The counts k >= 1 of trailing axes for which `shape` is `full` with its last k axes set to 1,
/// fewest first. Several where `full` has axes of size 1 before its rows: [1, 1, 1] is the rows of
/// [1, 1, 256] for k = 1, 2 and 3 (a decode step's single row), and only the reduction that made
/// it tells which.
std::vector<int> row_shape_axes(const Shape& shape, const Shape& full) {
  std::vector<int> ks;
  if (shape.size() != full.size() || shape == full) return ks;
  for (int k = 1; k <= static_cast<int>(full.size()); ++k)
    if (rows_of(full, k) == shape) ks.push_back(k);
  return ks;
}

}  // namespace

void fuse_elementwise(Tape& tape, const std::string& function, std::vector<codegen::FusedProgram>* unbuilt) {
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
  // Reductions join only where the device has row kernels.
  const bool rows_allowed = codegen::supports_row_programs(tape.device);
  // Whether a row-shaped value of a group of shape `full` leads (through row-shaped element-wise
  // steps) to a reduction of `full`'s rows that could join: only then do row-shaped steps join.
  auto leads_to_reduce = [&](int step, const Shape& full, int k) {
    std::vector<int> work{step};
    std::unordered_set<int> seen;
    while (!work.empty()) {
      const int i = work.back();
      work.pop_back();
      if (!seen.insert(i).second || seen.size() > 64) continue;
      const Step& st = tape.steps[i];
      if (trailing_reduce(tape, st) == k && tape.values[st.inputs[0]].shape == full) return true;
      if (role_of(tape, st) == Role::None) continue;
      for (int in : st.inputs)
        if (producer[in] >= 0) work.push_back(producer[in]);
    }
    return false;
  };
  // Whether value v's consumers are all arithmetic steps of group gid, or broadcasts in it that
  // only such steps read.
  auto consumed_inside = [&](int v, int gid, const std::unordered_set<int>& in_group) {
    for (int c : consumers[v]) {
      if (group_of[c] == gid) continue;
      if (role_of(tape, tape.steps[c]) != Role::Broadcast || !in_group.count(c)) return false;
      for (int cc : consumers[tape.steps[c].outputs[0]])
        if (group_of[cc] != gid) return false;
    }
    return true;
  };
  // How a reduction or a row-shaped step joins group g (see Group): `ok` when it may, `per_row`
  // for a value of the group's rows, `becomes_rows` with the index space (`shape`) and its row
  // axes when the group turns into a row group.
  struct RowJoin {
    bool ok = true, per_row = false, becomes_rows = false;
    Shape shape;
    int nred = 0;
  };
  auto row_join = [&](const Group& g, const Step& ps, Role r, const Shape& pshape) {
    RowJoin j;
    j.shape = g.shape;
    if (r == Role::Reduce) {
      const int k = trailing_reduce(tape, ps);
      const Shape& in_shape = tape.values[ps.inputs[0]].shape;
      j.ok = k > 0;
      if (!j.ok) return j;
      j.per_row = true;
      if (g.nred > 0) {
        j.ok = k == g.nred && in_shape == g.shape;
      } else if (in_shape == g.shape || pshape == g.shape) {
        // The group so far computes the reduction's consumers at the full shape or at its rows.
        j.becomes_rows = true;
        j.shape = in_shape;
        j.nred = k;
      } else {
        j.ok = false;
      }
      return j;
    }
    if (r != Role::Compute || pshape == g.shape || !rows_allowed) return j;
    if (g.nred > 0) {
      j.per_row = pshape == g.row_shape;
      return j;
    }
    // A row-shaped step of a group not yet of rows: joins when a reduction of the group's rows
    // produces it, which then makes the group a row group.
    for (const int k : row_shape_axes(pshape, g.shape)) {
      if (!leads_to_reduce(producer[ps.outputs[0]], g.shape, k)) continue;
      j.per_row = j.becomes_rows = true;
      j.nred = k;
      break;
    }
    return j;
  };
  // Roots from the end: a compute step not yet taken starts a group that grows toward inputs.
  for (int root = nsteps - 1; root >= 0; --root) {
    const Step& rs = tape.steps[root];
    if (group_of[root] >= 0 || !fits_device(rs, rs.device)) continue;
    const Role root_role = role_of(tape, rs);
    if (root_role != Role::Compute && !(root_role == Role::Reduce && rows_allowed && trailing_reduce(tape, rs) > 0))
      continue;
    Group g;
    g.shape = tape.values[rs.outputs[0]].shape;
    g.device = rs.device;
    if (root_role == Role::Reduce) {  // a reduction ends the chain: its rows are the index space
      g.nred = trailing_reduce(tape, rs);
      g.shape = tape.values[rs.inputs[0]].shape;
      g.row_shape = tape.values[rs.outputs[0]].shape;
      g.has_reduce = true;
    }
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
          if (r == Role::Reduce && !rows_allowed) continue;
          const Shape& pshape = tape.values[ps.outputs[0]].shape;
          // A reduction or a row-shaped step makes (or keeps) this a row group.
          const RowJoin rj = row_join(g, ps, r, pshape);
          if (!rj.ok) continue;
          // A cast of a value no kernel computes (an input, a constant, a matmul's result) is
          // recomputed by every group that reads it, as broadcasts are, without belonging to
          // one: a conversion per element costs less than storing the wider value and reading
          // it back, the group reads the narrower source, and a norm's bfloat16 weight cast to
          // float32 is no kernel launch of its own on every call (nor two groups' shared x cast
          // a value written in full). A cast that is a function output keeps its own step.
          const int cast_source = ps.inputs.empty() ? -1 : producer[ps.inputs[0]];
          const bool recomputed_cast = r == Role::Compute && ps.prim.kind == PrimKind::Cast && !is_output[ps.outputs[0]] &&
                                       broadcastable_to(pshape, g.shape) &&
                                       (cast_source < 0 || role_of(tape, tape.steps[cast_source]) == Role::None);
          // Computing at the group's index recomputes values of smaller shapes: allowed for
          // broadcasts, constants and those casts (cheap), not for other arithmetic (it could
          // multiply the work); per-row values of a row group are computed once per row.
          if (r == Role::Compute && pshape != g.shape && !rj.per_row && !recomputed_cast) continue;
          if (r != Role::Compute && r != Role::Reduce && !broadcastable_to(pshape, g.shape)) continue;
          if (is_output[ps.outputs[0]] && !(arithmetic(r) && (pshape == rj.shape || rj.per_row))) continue;
          // An arithmetic value joins only when every consumer is an arithmetic step of this
          // group (or a broadcast in it that only such steps read): otherwise it must still be
          // stored for the others.
          if (arithmetic(r) && !recomputed_cast && !consumed_inside(ps.outputs[0], gid, in_group)) continue;
          if (arithmetic(r) && compute + 1 > kMaxFusedInstructions) continue;
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
          if (recomputed_cast) g.recomputed.insert(p);
          else if (arithmetic(r)) group_of[p] = gid;
          in_group.insert(p);
          g.steps.push_back(p);
          if (arithmetic(r)) ++compute;
          if (rj.becomes_rows) {
            g.shape = rj.shape;
            g.nred = rj.nred;
            g.row_shape = rows_of(rj.shape, rj.nred);
          }
          g.has_reduce = g.has_reduce || r == Role::Reduce;
          added = true;
        }
      }
    }
    // Row-shaped steps that joined for a reduction that then could not: no kernel for them.
    if (compute < 2 || (g.nred > 0 && !g.has_reduce)) {  // a single operation is not wrapped
      for (int s : g.steps) group_of[s] = -1;
      continue;
    }
    std::sort(g.steps.begin(), g.steps.end());
    groups.push_back(std::move(g));
  }
  if (groups.empty()) return;

  // A row group's program: which values are per row, checked against the shapes. False when the
  // group cannot run as a row kernel (it then stays unfused).
  auto mark_rows = [&](codegen::FusedProgram& prog, const Group& g, const std::vector<int>& arg_values,
                       const std::vector<int>& out_values) {
    prog.reduced_axes = g.nred;
    // The kernel's index space is its inputs' broadcast shape: it must be the group's.
    Shape full;
    for (int v : arg_values) full = broadcast_shapes(full, tape.values[v].shape);
    if (full != g.shape) return false;
    for (auto& ins : prog.instrs) {
      switch (ins.kind) {
        case codegen::InstrKind::Input: {
          const Shape& s = tape.values[arg_values[ins.index]].shape;
          ins.per_row = true;
          for (int k = 0; k < g.nred && k < static_cast<int>(s.size()); ++k) ins.per_row = ins.per_row && s[s.size() - 1 - k] == 1;
          break;
        }
        case codegen::InstrKind::Constant: ins.per_row = true; break;
        case codegen::InstrKind::Reduce:
          if (prog.instrs[ins.operands[0]].per_row) return false;  // a reduction of a broadcast value
          ins.per_row = true;
          break;
        case codegen::InstrKind::Unary:
        case codegen::InstrKind::Binary:
        case codegen::InstrKind::Select:
        case codegen::InstrKind::Cast:
          ins.per_row = std::all_of(ins.operands.begin(), ins.operands.end(), [&](int o) { return prog.instrs[o].per_row; });
          break;
      }
    }
    // Each output is per row exactly when its value has the rows' shape.
    for (size_t o = 0; o < out_values.size(); ++o)
      if (prog.instrs[prog.outputs[o]].per_row != (tape.values[out_values[o]].shape == g.row_shape)) return false;
    return true;
  };

  // Lower each group to a program; on failure the group's steps stay as they are.
  std::vector<std::optional<Step>> fused_at(nsteps);  // replacement placed at the group's last step
  std::vector<char> removed(nsteps, 0);
  std::vector<Device> unusable_devices;  // devices whose kernel generator refused a group
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
      } else if (s.prim.kind == PrimKind::Reduce) {
        const auto& rp = s.prim.get<ReduceParams>();
        ins.kind = codegen::InstrKind::Reduce;
        ins.reduce = rp.op;
        ins.ddof = rp.ddof;
        ins.operands = {operand(s.inputs[0])};
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
      if (!arithmetic(role_of(tape, tape.steps[si])) || g.recomputed.count(si)) continue;
      int v = tape.steps[si].outputs[0];
      bool outside = is_output[v];
      for (int c : consumers[v]) outside = outside || !members.count(c);
      if (si == g.steps.back() || outside) out_values.push_back(v);
    }
    if (static_cast<int>(arg_values.size() + out_values.size()) > kMaxFusedArguments) continue;
    for (int v : out_values) prog.outputs.push_back(instr_of.at(v));
    if (g.nred > 0 && !mark_rows(prog, g, arg_values, out_values)) continue;
    if (std::find(unusable_devices.begin(), unusable_devices.end(), g.device) != unusable_devices.end()) continue;
    std::shared_ptr<const codegen::FusedKernel> kernel;
    try {
      if (unbuilt) {
        kernel = codegen::find_fused_kernel(prog, g.device);
        if (!kernel) {  // not built yet: stays unfused until the background builder has it
          unbuilt->push_back(std::move(prog));
          continue;
        }
      } else {
        kernel = codegen::make_fused_kernel(std::move(prog), g.device);
      }
    } catch (const UnsupportedError& e) {
      if (telemetry::enabled())
        telemetry::emit({"compile.fallback", 0.0, {{"function", function}, {"op", "fuse"}, {"reason", e.what()}}});
      // Keep this and every later group of this device unfused (its compiler is not usable:
      // each try would fail the same way); earlier groups and other devices' groups stay fused.
      unusable_devices.push_back(g.device);
      continue;
    }
    Step fused;
    fused.prim = make_prim(PrimKind::Fused, FusedParams{kernel});
    fused.device = g.device;
    fused.inputs = arg_values;
    fused.outputs = out_values;
    // Broadcasts, constants and recomputed casts stay: other groups or steps may read them; the
    // DCE below drops those that nobody reads any more.
    for (int si : g.steps)
      if (arithmetic(role_of(tape, tape.steps[si])) && !g.recomputed.count(si)) removed[si] = 1;
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
