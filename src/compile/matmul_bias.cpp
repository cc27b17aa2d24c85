// The matmul_bias pass: a per-column vector added to a float32 CPU Matmul's result is added by the Matmul, to each tile as it is computed.
//
// Why: a transformer's query, key and value projections are each a Matmul and an Add of a bias
// that only a reshape reads, so the fuse pass left the Add a kernel of its own: one more pass over
// the product, 6-20 us a projection at batch 1 (BERT-small: 12 a call, 3% of it). The Matmul now
// adds the bias to each output tile right after the tile's GEMM call, while it is in cache: one
// IEEE addition per element, in the Add's operand order, after the product's whole reduction, so
// the bits are those of the separate add (MatmulParams).
#include <vector>

#include "smelt/device.h"
#include "smelt/ops.h"
#include "src/backend/cpu/gemm.h"
#include "src/compile/passes.h"
#include "src/core/node.h"

namespace smelt::compiler {

namespace {

/// True when broadcasting a value of shape `from` to `to` repeats one vector of `to`'s last axis
/// over the others: right-aligned, every axis is 1 except the last, which is N.
bool per_column(const Shape& from, const Shape& to) {
  if (from.empty() || to.empty() || from.size() > to.size() || from.back() != to.back()) return false;
  for (size_t i = 0; i + 1 < from.size(); ++i)
    if (from[i] != 1) return false;
  return true;
}

/// Whether the Matmul's bias runs (one per tile row, each as wide as its tile) give the Add
/// kernel's bits: that kernel's loop takes the first operand's NaN in a run of one element and the
/// second's in longer ones (the compiler's choice of instructions), and the Add it replaces runs
/// the product's rows whole (or in whole periods of the bias); a run of one happens for a single
/// column or a last column tile one wide.
bool runs_match_the_add(const Shape& out, int64_t k) {
  const int64_t n = out.back(), m = out.size() >= 2 ? out[out.size() - 2] : 1;
  if (n < 2) return false;
  const cpu::GemmTiles tiles = cpu::gemm_tiles(m, n, k);
  return n % tiles.tile_n != 1;
}

}  // namespace

void fuse_matmul_biases(Tape& tape) {
  const ValueGraph g = value_graph(tape);
  // The single reader of `v` (-1: none, several, or the caller's: a function output).
  auto only_reader = [&](int v) { return g.readers[v].size() == 1 && !g.is_output[v] ? g.readers[v][0] : -1; };
  std::vector<char> removed(tape.steps.size(), 0);
  for (size_t si = 0; si < tape.steps.size(); ++si) {
    const Step& mm = tape.steps[si];
    if (mm.prim.kind != PrimKind::Matmul || mm.device.type != Device::Type::Cpu) continue;
    if (mm.prim.get<MatmulParams>().bias != MatmulBias::None || mm.inputs.size() != 2) continue;
    const int out = mm.outputs[0];
    const ValueInfo& ov = tape.values[out];
    const int ai = only_reader(out);
    if (!is_cpu_f32(ov) || ov.shape.empty() || tape.values[mm.inputs[0]].shape.back() == 0 || ai < 0) continue;
    const Step& add = tape.steps[ai];
    if (add.prim.kind != PrimKind::Binary || add.prim.get<BinaryParams>().op != BinaryOp::Add) continue;
    if (!(add.device == mm.device) || !is_cpu_f32(tape.values[add.outputs[0]])) continue;
    if (tape.values[add.outputs[0]].shape != ov.shape) continue;
    const int other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
    if (other == out) continue;  // y + y
    if (!runs_match_the_add(ov.shape, tape.values[mm.inputs[0]].shape.back())) continue;
    // An element-wise reader (a GELU, a residual add) takes the add into its fused kernel, which
    // reads the product once either way.
    const int sum = add.outputs[0];
    if (const int r = only_reader(sum); r >= 0) {
      const PrimKind kind = tape.steps[r].prim.kind;
      if (kind == PrimKind::Unary || kind == PrimKind::Binary) continue;
    }
    const int op = g.producer[other];
    int bias = -1;
    if (op >= 0 && tape.steps[op].prim.kind == PrimKind::Broadcast &&
        is_cpu_f32(tape.values[tape.steps[op].inputs[0]]) &&
        per_column(tape.values[tape.steps[op].inputs[0]].shape, ov.shape)) {
      bias = tape.steps[op].inputs[0];
    } else if (op < 0 && is_cpu_f32(tape.values[other])) {
      bias = axis_constant(tape, other, ov.shape, ov.shape.size() - 1);  // a broadcast frozen at trace time
    }
    if (bias < 0) continue;
    MatmulParams params;
    params.bias = add.inputs[0] == out ? MatmulBias::After : MatmulBias::Before;
    Step fused{make_prim(PrimKind::Matmul, params), {mm.inputs[0], mm.inputs[1], bias}, {sum}, mm.device};
    // The fused Matmul takes the place of the add, where the bias is defined.
    removed[si] = 1;
    tape.steps[static_cast<size_t>(ai)] = std::move(fused);
  }
  erase_steps(tape, removed);
  eliminate_dead_steps(tape);  // the broadcasts that only fed the absorbed adds
}

}  // namespace smelt::compiler
