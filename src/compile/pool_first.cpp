// The pool_first pass: a max pooling moves before the ReLU and constant adds that feed it, which then run on the pooled values.
//
// A convolution's bias add and ReLU, read only by a max pooling, ran over the whole convolution
// output (a read and a write of it) before the pooling read it again. Both are monotone
// non-decreasing per element, so max over a window of f(x) is f(max over the window of x): the
// pass pools the convolution's output first and applies the steps to the pooled values, a
// quarter of them for 2 x 2 windows.
//
// The bits are the eager path's, not only the values:
//  - relu(x) is x (NaN included) or +0.0, never -0.0, so tied outputs have equal bits and the
//    pooling's choice among them (the first strictly greater) does not matter;
//  - x + b with b a finite constant (checked now, every value) is NaN exactly when x is, with
//    x's payload; tied sums are equal floats, whose bits could differ only as -0.0 and +0.0, and
//    a sum is -0.0 only when both terms are (b = -0.0 adds nothing: f is the identity then);
//  - the pooling's NaN rule (a NaN wins, the last of the window stays) picks f of the window's
//    last NaN either way;
//  - every window holds at least one position (no ceil mode; padding only when the pooling is
//    undilated and each side's padding is shorter than the window: then the first window ends
//    past position 0 and, with floor-mode sizes, the last starts at or before the last position):
//    an empty window's -inf would become f(-inf).
// b must be the same for every position of a window: a broadcast of a constant whose pooled
// axes have size 1, or a constant that does not vary along them.
#include <cmath>
#include <cstring>
#include <vector>

#include "smelt/device.h"
#include "smelt/ops.h"
#include "src/compile/passes.h"

namespace smelt::compiler {

namespace {

/// True when every value of the float32 constant `a` is finite (inf + -inf would be a NaN that
/// the pooled input does not have).
bool all_finite(const Array& a) {
  DefaultDeviceScope on_cpu(Device::cpu());
  Array c = copy(a);  // a small constant (the pass only reaches here for window-constant ones)
  c.eval();
  const float* d = static_cast<const float*>(c.data());
  for (int64_t i = 0; i < c.size(); ++i)
    if (!std::isfinite(d[i])) return false;
  return true;
}

/// The pooled axes of a value of `rank` for a pooling of `spatial` axes: [2, 2 + spatial) (the
/// blocked layout's lane axis comes after them).
bool pooled_axis(int axis, int spatial) { return axis >= 2 && axis < 2 + spatial; }

/// How an Add's constant operand is given after the pooling.
struct WindowConstant {
  int broadcast_source = -1;  // the Broadcast's input (broadcast again to the pooled shape)
  int constant = -1;          // or a constant of the full shape (sliced to the pooled shape)
};

/// Whether `v` (of shape `shape`) holds values that do not vary over the pooled axes and are
/// finite (checked now); how to give it after the pooling.
bool window_constant(const Tape& tape, const std::vector<int>& producer, int v, const Shape& shape, int spatial,
                     WindowConstant& out) {
  const int rank = static_cast<int>(shape.size());
  const int p = producer[v];
  if (p >= 0 && tape.steps[p].prim.kind == PrimKind::Broadcast) {
    const int src = tape.steps[p].inputs[0];
    const Shape& from = tape.values[src].shape;
    const int lead = rank - static_cast<int>(from.size());
    for (int i = 0; i < static_cast<int>(from.size()); ++i)
      if (pooled_axis(lead + i, spatial) && from[i] != 1) return false;
    // Its values: through reshapes and broadcasts (views of the same values) to a constant.
    int at = src;
    while (producer[at] >= 0 && (tape.steps[producer[at]].prim.kind == PrimKind::Reshape ||
                                 tape.steps[producer[at]].prim.kind == PrimKind::Broadcast))
      at = tape.steps[producer[at]].inputs[0];
    const Array* c = find_constant(tape, at);
    if (c == nullptr || c->dtype() != Dtype::Float32 || !all_finite(*c)) return false;
    out.broadcast_source = src;
    return true;
  }
  if (p >= 0) return false;
  const Array* c = find_constant(tape, v);
  if (c == nullptr || c->dtype() != Dtype::Float32 || c->device().type != Device::Type::Cpu || c->shape() != shape)
    return false;
  // A frozen broadcast: stride 0 along every pooled axis; its distinct values are one window's.
  std::vector<int64_t> lo(rank, 0), hi(shape.begin(), shape.end());
  for (int a = 0; a < rank; ++a) {
    if (!pooled_axis(a, spatial)) continue;
    if (shape[a] > 1 && c->strides()[a] != 0) return false;
    hi[a] = 1;
  }
  DefaultDeviceScope on_cpu(Device::cpu());
  if (!all_finite(slice(*c, lo, hi))) return false;
  out.constant = v;
  return true;
}

/// A step of the chain the pass moves: a Relu, or an Add of `data` and a window constant.
struct Moved {
  int step;
  int data;  // the input that carries the pooled values (the other is the constant)
  WindowConstant constant;
  int constant_slot = -1;  // the Add's input slot of the constant
};

}  // namespace

void pool_before_monotone_steps(Tape& tape) {
  const ValueGraph g = value_graph(tape);
  const std::vector<int>& producer = g.producer;
  // Read by one step only (a function output keeps its steps).
  auto single_use = [&](int v) { return g.readers[v].size() == 1 && !g.is_output[v]; };
  std::vector<char> removed(tape.steps.size(), 0);
  std::vector<std::vector<Step>> after(tape.steps.size());  // steps to insert after a pooling
  bool changed = false;
  for (size_t pi = 0; pi < tape.steps.size(); ++pi) {
    Step& pool = tape.steps[pi];
    if (pool.prim.kind != PrimKind::Pool || pool.device.type != Device::Type::Cpu) continue;
    const PoolParams& pp = pool.prim.get<PoolParams>();
    const ValueInfo& pooled = tape.values[pool.outputs[0]];
    if (pp.kind != PoolKind::Max || pp.ceil_mode || !is_cpu_f32(pooled)) continue;
    // Padding only where every window still holds a position of the input: undilated, padding
    // below the window's length at both ends (a ResNet stem's 3 x 3 pooling with padding 1).
    bool empty_windows = false;
    for (size_t a = 0; a < pp.kernel.size(); ++a) {
      const int64_t lo = pp.padding_lo[a], hi = pp.padding_hi[a];
      if ((lo != 0 || hi != 0) && (pp.dilations[a] != 1 || lo >= pp.kernel[a] || hi >= pp.kernel[a]))
        empty_windows = true;
    }
    if (empty_windows) continue;
    const int spatial = static_cast<int>(pp.kernel.size());
    const Shape& shape = tape.values[pool.inputs[0]].shape;
    // The chain of Relus and constant adds that only feed the pooling, last step first.
    std::vector<Moved> chain;
    int cur = pool.inputs[0];
    while (single_use(cur) && producer[cur] >= 0) {
      const int si = producer[cur];
      const Step& s = tape.steps[si];
      if (s.device.type != Device::Type::Cpu || s.outputs.size() != 1 || !is_cpu_f32(tape.values[cur])) break;
      if (s.prim.kind == PrimKind::Unary && s.prim.get<UnaryParams>().op == UnaryOp::Relu &&
          tape.values[s.inputs[0]].shape == shape && is_cpu_f32(tape.values[s.inputs[0]])) {
        chain.push_back({si, s.inputs[0], {}});
      } else if (s.prim.kind == PrimKind::Binary && s.prim.get<BinaryParams>().op == BinaryOp::Add) {
        Moved m{si, -1, {}};
        for (int slot = 0; slot < 2 && m.data < 0; ++slot) {
          const int other = s.inputs[1 - slot];
          if (tape.values[s.inputs[slot]].shape != shape || !is_cpu_f32(tape.values[s.inputs[slot]])) continue;
          if (tape.values[other].shape != shape || other == s.inputs[slot]) continue;
          if (window_constant(tape, producer, other, shape, spatial, m.constant)) {
            m.data = s.inputs[slot];
            m.constant_slot = 1 - slot;
          }
        }
        if (m.data < 0) break;
        chain.push_back(m);
      } else {
        break;
      }
      cur = chain.back().data;
    }
    if (chain.empty()) continue;
    // Pool `cur`, then the chain's steps from the first to the last, on the pooled shape; the
    // last writes the pooling's old output, so its readers are unchanged.
    const int final_out = pool.outputs[0];
    int value = tape.add_value(pooled.shape, Dtype::Float32, pooled.device);
    pool.inputs[0] = cur;
    pool.outputs[0] = value;
    std::vector<Step>& inserted = after[pi];
    for (size_t k = chain.size(); k-- > 0;) {
      const Moved& m = chain[k];
      Step s = tape.steps[m.step];
      removed[m.step] = 1;
      const int out = k == 0 ? final_out : tape.add_value(pooled.shape, Dtype::Float32, pooled.device);
      if (s.prim.kind == PrimKind::Binary) {
        int operand;
        if (m.constant.broadcast_source >= 0) {
          operand = tape.add_value(pooled.shape, Dtype::Float32, pooled.device);
          inserted.push_back({make_prim(PrimKind::Broadcast, ShapeParams{pooled.shape}),
                              {m.constant.broadcast_source}, {operand}, s.device});
        } else {
          const Array& c = *find_constant(tape, m.constant.constant);
          std::vector<int64_t> lo(pooled.shape.size(), 0), hi(pooled.shape.begin(), pooled.shape.end());
          DefaultDeviceScope on_cpu(Device::cpu());
          Array sliced = slice(c, lo, hi);  // the same values: they do not vary over the pooled axes
          sliced.eval();
          operand = tape.add_value(pooled.shape, Dtype::Float32, c.device());
          tape.constants.emplace_back(operand, sliced);
        }
        s.inputs[m.constant_slot] = operand;
        s.inputs[1 - m.constant_slot] = value;
      } else {
        s.inputs[0] = value;
      }
      s.outputs[0] = out;
      inserted.push_back(std::move(s));
      value = out;
    }
    changed = true;
  }
  if (!changed) return;
  std::vector<Step> steps;
  steps.reserve(tape.steps.size());
  for (size_t i = 0; i < tape.steps.size(); ++i) {
    if (removed[i]) continue;
    steps.push_back(std::move(tape.steps[i]));
    for (Step& s : after[i]) steps.push_back(std::move(s));
  }
  tape.steps = std::move(steps);
  eliminate_dead_steps(tape);  // the broadcasts of the full shape that only the moved adds read
}

}  // namespace smelt::compiler
