// The pool_epilogue pass: a blocked CPU pooling takes in the channel add and ReLU after it (pool_first's moved steps).
//
// After pool_first, a convolution's bias and ReLU run on the pooled values as a Broadcast, an Add
// and a Relu, which the fuse pass made one generated kernel: a step of its own that reads and
// writes the pooled tensor once more. On the bundled CNN at batch 1 those three steps cost about
// 0.3 us each, a twentieth of the compiled call. The pooling kernel now applies them to each
// output row while it is in its registers' cache lines: the same scalar add (in the Add's
// operand order) and relu, element by element, so the bits are those of the steps it replaces.
#include <vector>

#include "src/compile/passes.h"

namespace smelt::compiler {

namespace {

/// Whether `source` (the channel values the Add's Broadcast reads) has the blocked layout's rank
/// and varies at most along the block axis (1) and the lane axis (last), fully or not at all:
/// the kernel's channel table is indexed that way.
bool channel_source(const ValueInfo& source, const Shape& pooled) {
  const size_t rank = pooled.size();
  if (!is_cpu_f32(source) || source.shape.size() != rank) return false;
  for (size_t a = 0; a < rank; ++a) {
    const int64_t d = source.shape[a];
    const bool channel_axis = a == 1 || a + 1 == rank;
    if (d != 1 && !(channel_axis && d == pooled[a])) return false;
  }
  return true;
}

}  // namespace

void fuse_pool_epilogues(Tape& tape) {
  const ValueGraph g = value_graph(tape);
  auto single_use = [&](int v) { return g.readers[v].size() == 1 && !g.is_output[v]; };
  std::vector<char> removed(tape.steps.size(), 0);
  bool changed = false;
  for (size_t pi = 0; pi < tape.steps.size(); ++pi) {
    Step& pool = tape.steps[pi];
    if (pool.prim.kind != PrimKind::Pool || pool.device.type != Device::Type::Cpu || pool.inputs.size() != 1) continue;
    PoolParams params = pool.prim.get<PoolParams>();
    if (params.epilogue_add != PoolEpilogueAdd::None || params.epilogue_relu) continue;  // moved here below
    const ValueInfo& pooled = tape.values[pool.outputs[0]];
    if (params.block == 0 || !is_cpu_f32(pooled)) continue;
    int value = pool.outputs[0], channel = -1;
    size_t last = pi;  // the last step taken in
    // An Add of the pooled values and a Broadcast of channel values, then a Relu: each read by
    // the next step alone.
    if (single_use(value)) {
      const int ai = g.readers[value][0];
      const Step& add = tape.steps[ai];
      if (add.prim.kind == PrimKind::Binary && add.prim.get<BinaryParams>().op == BinaryOp::Add &&
          add.device.type == Device::Type::Cpu && tape.values[add.outputs[0]].shape == pooled.shape &&
          is_cpu_f32(tape.values[add.outputs[0]]) && add.inputs[0] != add.inputs[1]) {
        const int slot = add.inputs[0] == value ? 0 : 1;
        const int other = add.inputs[1 - slot];
        const int bi = g.producer[other];
        if (bi >= 0 && single_use(other) && tape.steps[bi].prim.kind == PrimKind::Broadcast &&
            channel_source(tape.values[tape.steps[bi].inputs[0]], pooled.shape)) {
          channel = tape.steps[bi].inputs[0];
          params.epilogue_add = slot == 0 ? PoolEpilogueAdd::AddAfter : PoolEpilogueAdd::AddBefore;
          removed[ai] = removed[bi] = 1;
          value = add.outputs[0];
          last = static_cast<size_t>(ai);
        }
      }
    }
    if (single_use(value)) {
      const int ri = g.readers[value][0];
      const Step& relu = tape.steps[ri];
      if (relu.prim.kind == PrimKind::Unary && relu.prim.get<UnaryParams>().op == UnaryOp::Relu &&
          relu.device.type == Device::Type::Cpu && is_cpu_f32(tape.values[relu.outputs[0]])) {
        params.epilogue_relu = true;
        removed[ri] = 1;
        value = relu.outputs[0];
        last = static_cast<size_t>(ri);
      }
    }
    if (value == pool.outputs[0]) continue;
    // The pooling runs where the last step it took in ran: the channel values may be made after
    // the pooling (a reshape of the bias traced later), and only the taken steps read its output.
    Step merged = pool;
    merged.prim = make_prim(PrimKind::Pool, std::move(params));
    if (channel >= 0) merged.inputs.push_back(channel);
    merged.outputs[0] = value;
    removed[pi] = 1;
    removed[last] = 0;
    tape.steps[last] = std::move(merged);
    changed = true;
  }
  if (changed) erase_steps(tape, removed);
}

}  // namespace smelt::compiler
