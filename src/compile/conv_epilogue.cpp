// The conv_epilogue pass: bias and residual adds after a float32 CPU Conv become part of that Conv (oneDNN's own bias or its post-ops).
#include <vector>

#include "smelt/device.h"
#include "smelt/ops.h"

#include "src/backend/cpu/dnnl.h"
#include "src/compile/passes.h"

namespace smelt::compiler {

namespace {

/// True when broadcasting a value of shape `from` to `to` ([N, C, spatial...]) repeats one
/// value per channel: right-aligned, every axis is 1 except axis 1, which is C (or 1).
bool per_channel(const Shape& from, const Shape& to) {
  if (from.size() > to.size() || to.size() < 3) return false;
  const size_t lead = to.size() - from.size();
  int64_t elements = 1;
  for (int64_t d : from) elements *= d;
  if (elements != to[1]) return false;  // a scalar broadcast over several channels is not C values
  for (size_t i = 0; i < from.size(); ++i) {
    const size_t axis = lead + i;
    if (from[i] != 1 && !(axis == 1 && from[i] == to[1])) return false;
  }
  return true;
}

/// True when `v` (a per-channel add's result) has one reader, an element-wise step other than
/// an Add (a Relu, a Clip, a Mul): where the add would be oneDNN's binary post-op (no brgemm
/// kernel, which takes a first bias as its own for free: dnnl_conv_bias_free), the fuse pass puts
/// it into that step's generated kernel instead, which reads the convolution's output once either
/// way. Measured on the bundled CNN (2 threads, AVX2): oneDNN 2.6's per-channel binary post-op
/// took its three convolutions from 199, 417 and 416 µs to 296, 478 and 462 µs at batch 32, and
/// the fused bias + Relu kernel cost less (the compiled call 1.69 -> 1.60 ms). An Add after it (a
/// residual) is still absorbed with it.
bool feeds_elementwise(const Tape& tape, const std::vector<int>& uses, const std::vector<int>& consumer, int v) {
  if (uses[v] != 1) return false;
  const Step& r = tape.steps[consumer[v]];
  if (r.device.type != Device::Type::Cpu || !is_cpu_f32(tape.values[r.outputs[0]])) return false;
  if (r.prim.kind == PrimKind::Unary) return true;
  return r.prim.kind == PrimKind::Binary && r.prim.get<BinaryParams>().op != BinaryOp::Add;
}

/// True when `v` (a per-channel add's result) reaches a pooling through single-reader unary
/// steps alone (a ReLU): the pass pool_first then runs the add on the pooled values, a quarter
/// of them for 2 x 2 windows, which costs less than even the kernel's own bias (the bundled CNN
/// at batch 32: its 3 x 3 convolutions 159 -> 169 and 142 -> 156 us with the bias inside).
bool feeds_pool(const Tape& tape, const std::vector<int>& uses, const std::vector<int>& consumer, int v) {
  while (uses[v] == 1) {
    const Step& r = tape.steps[consumer[v]];
    if (r.prim.kind == PrimKind::Pool) return true;
    if (r.prim.kind != PrimKind::Unary) return false;
    v = r.outputs[0];
  }
  return false;
}

/// The constant `v` when it is what channel_constant takes (a constant of shape `to` whose values
/// vary along axis 1 only), else null.
const Array* channel_constant_array(const Tape& tape, int v, const Shape& to) {
  return to.size() < 3 ? nullptr : axis_constant_array(tape, v, to, 1);
}

}  // namespace

int channel_constant(Tape& tape, int v, const Shape& to) {
  return to.size() < 3 ? -1 : axis_constant(tape, v, to, 1);
}

void fuse_conv_epilogues(Tape& tape) {
  if (!cpu::dnnl_enabled()) return;  // smelt's own kernel would gain nothing from the fusion
  const size_t n_values = tape.values.size();
  std::vector<int> uses(n_values, 0), consumer(n_values, -1), producer(n_values, -1);
  for (int o : tape.outputs) uses[o] += 2;  // a function output is read by the caller: never absorbed
  for (size_t i = 0; i < tape.steps.size(); ++i) {
    for (int in : tape.steps[i].inputs) {
      ++uses[in];
      consumer[in] = static_cast<int>(i);
    }
    for (int o : tape.steps[i].outputs) producer[o] = static_cast<int>(i);
  }

  std::vector<char> removed(tape.steps.size(), 0);
  for (size_t si = 0; si < tape.steps.size(); ++si) {
    Step& conv = tape.steps[si];
    if (conv.prim.kind != PrimKind::Conv || conv.device.type != Device::Type::Cpu) continue;
    if (!is_cpu_f32(tape.values[conv.outputs[0]]) || !conv.prim.get<ConvParams>().adds.empty()) continue;
    ConvParams params = conv.prim.get<ConvParams>();
    const Shape out_shape = tape.values[conv.outputs[0]].shape;
    std::vector<int> operands;
    int cur = conv.outputs[0], last = static_cast<int>(si);
    bool residual = false;
    // Asked only where it decides (planning the conv with a bias costs a primitive descriptor).
    auto bias_free = [&] {
      const Shape& x_shape = tape.values[conv.inputs[0]].shape;
      const Shape& w_shape = tape.values[conv.inputs[1]].shape;
      return cpu::dnnl_conv_bias_free(cpu::dnnl_conv_geometry(x_shape, w_shape, out_shape, params));
    };
    // Walks the chain conv -> add -> add ...: each value must have exactly one reader, the add.
    while (uses[cur] == 1) {
      const int ci = consumer[cur];
      const Step& add = tape.steps[ci];
      if (add.prim.kind != PrimKind::Binary || add.prim.get<BinaryParams>().op != BinaryOp::Add) break;
      if (!(add.device == conv.device) || !is_cpu_f32(tape.values[add.outputs[0]])) break;
      if (tape.values[add.outputs[0]].shape != out_shape) break;
      const int other = add.inputs[0] == cur ? add.inputs[1] : add.inputs[0];
      if (other == cur) break;  // y + y
      const int op = producer[other];
      int channel = -1;
      const bool bias = op >= 0 && tape.steps[op].prim.kind == PrimKind::Broadcast &&
                        per_channel(tape.values[tape.steps[op].inputs[0]].shape, out_shape) &&
                        is_cpu_f32(tape.values[tape.steps[op].inputs[0]]);
      // (The reader is checked first: the constant search then runs once, in channel_constant.)
      // A bias the primitive adds itself costs nothing there: it is absorbed whatever follows,
      // unless a pooling follows (pool_first makes it cheaper still).
      if (feeds_elementwise(tape, uses, consumer, add.outputs[0])) {
        const bool per_channel_add = bias || (op < 0 && is_cpu_f32(tape.values[other]) &&
                                              channel_constant_array(tape, other, out_shape) != nullptr);
        // Where oneDNN's kernel would add it itself, the conv takes it (the test runs last: it plans).
        if (per_channel_add &&
            !(params.adds.empty() && !feeds_pool(tape, uses, consumer, add.outputs[0]) && bias_free()))
          break;  // the fuse pass puts it in that step's kernel (see feeds_elementwise)
      }
      if (bias) {
        params.adds.push_back(ConvAdd::Channel);
        operands.push_back(tape.steps[op].inputs[0]);
      } else if (op < 0 && is_cpu_f32(tape.values[other]) && (channel = channel_constant(tape, other, out_shape)) >= 0) {
        params.adds.push_back(ConvAdd::Channel);
        operands.push_back(channel);
      } else if (!residual && is_cpu_f32(tape.values[other]) && tape.values[other].shape == out_shape) {
        params.adds.push_back(ConvAdd::Tensor);
        operands.push_back(other);
        residual = true;
      } else {
        break;
      }
      removed[ci] = 1;
      last = ci;
      cur = add.outputs[0];
    }
    if (operands.empty()) continue;
    Step fused{make_prim(PrimKind::Conv, params), conv.inputs, {cur}, conv.device};
    fused.inputs.insert(fused.inputs.end(), operands.begin(), operands.end());
    removed[si] = 1;
    // The fused Conv takes the place of its last add, where every operand is defined.
    removed[last] = 0;
    tape.steps[last] = std::move(fused);
  }
  erase_steps(tape, removed);
  eliminate_dead_steps(tape);  // the broadcasts that only fed the absorbed adds
}

}  // namespace smelt::compiler
