// The conv_prepack pass: constant Conv weights are reordered once, at compile time, into the layout their library wants (oneDNN's on the CPU, cuDNN's OHWI on the GPU).
#include <unordered_map>
#include <vector>

#include "smelt/device.h"
#include "smelt/ops.h"
#include "src/core/allocator.h"
#include "src/core/node.h"
#include "src/backend/cpu/dnnl.h"
#include "src/backend/cuda/channels_last.h"
#include "src/compile/passes.h"

namespace smelt::compiler {

namespace {

/// A CUDA Conv that runs channels-last (src/backend/cuda/channels_last.h) with a constant
/// weight: the weight is transposed to OHWI now, on its device (an exact copy), and the Conv
/// reads it as it is (ConvParams::packed_weight); otherwise every call transposed it.
bool prepack_cuda_conv_weight(Tape& tape, Step& s, const std::unordered_map<int, size_t>& constant_at) {
  const auto& params = s.prim.get<ConvParams>();
  const ValueInfo& x = tape.values[s.inputs[0]];
  const ValueInfo& w = tape.values[s.inputs[1]];
  const ValueInfo& y = tape.values[s.outputs[0]];
  if (!params.packed_weight.empty() || params.src_block != 0 || w.device != s.device || w.dtype != y.dtype) return false;
  if (!cuda::conv_runs_channels_last(y.dtype, x.shape, w.shape, params)) return false;
  const auto c = constant_at.find(s.inputs[1]);
  if (c == constant_at.end()) return false;
  const Array& weight = tape.constants[c->second].second;
  if (weight.device() != s.device) return false;
  Array packed = copy(transpose(weight, {0, 2, 3, 1}));
  packed.eval();
  const int id = tape.add_value(packed.shape(), packed.dtype(), s.device);
  tape.constants.emplace_back(id, packed);
  ConvParams p = params;
  p.packed_weight = w.shape;
  s.prim = make_prim(PrimKind::Conv, std::move(p));
  s.inputs[1] = id;
  return true;
}

}  // namespace

int add_packed_constant(Tape& tape, const std::function<bool(const std::function<float*(size_t)>&)>& pack) {
  BufferPtr buffer;
  int64_t floats = 0;
  const bool packed = pack([&](size_t n) {
    buffer = cpu_allocator().allocate(n * sizeof(float));
    floats = static_cast<int64_t>(n);
    return static_cast<float*>(buffer->ptr);
  });
  if (!packed) return -1;
  const Shape shape{floats};
  const int id = tape.add_value(shape, Dtype::Float32, Device::cpu());
  tape.constants.emplace_back(
      id, smelt::detail::make_leaf(shape, Dtype::Float32, Device::cpu(), std::move(buffer), row_major_strides(shape)));
  return id;
}

void prepack_conv_weights(Tape& tape) {
  std::unordered_map<int, size_t> constant_at;  // value id -> index in tape.constants
  for (size_t i = 0; i < tape.constants.size(); ++i) constant_at[tape.constants[i].first] = i;
  bool changed = false;
  for (Step& s : tape.steps) {
    if (s.prim.kind == PrimKind::Conv && s.device.type == Device::Type::Cuda) {
      changed = prepack_cuda_conv_weight(tape, s, constant_at) || changed;
      continue;
    }
    if (s.prim.kind != PrimKind::Conv || s.device.type != Device::Type::Cpu || !cpu::dnnl_enabled()) continue;
    const auto& params = s.prim.get<ConvParams>();
    if (!params.packed_weight.empty()) continue;
    const ValueInfo& x = tape.values[s.inputs[0]];
    const ValueInfo& w = tape.values[s.inputs[1]];
    const ValueInfo& y = tape.values[s.outputs[0]];
    if (x.dtype != Dtype::Float32 || w.dtype != Dtype::Float32 || y.dtype != Dtype::Float32) continue;
    if (x.device.type != Device::Type::Cpu || w.device.type != Device::Type::Cpu) continue;
    const auto c = constant_at.find(s.inputs[1]);
    if (c == constant_at.end()) continue;
    Array weight = tape.constants[c->second].second;
    if (weight.device().type != Device::Type::Cpu || weight.size() == 0) continue;
    // Read where the constant lies and packed straight into the new constant's buffer (from the
    // caching allocator): copies through fresh pages had cost ResNet-18's compile tens of ms.
    {
      DefaultDeviceScope on_cpu(Device::cpu());
      weight.eval();
      if (!is_row_contiguous(weight.shape(), weight.node().strides)) {
        weight = copy(weight);
        weight.eval();
      }
    }
    int threads = 0;
    const int id = add_packed_constant(tape, [&](const std::function<float*(size_t)>& alloc) {
      return cpu::dnnl_pack_conv_weights(cpu::dnnl_conv_geometry(x.shape, w.shape, y.shape, params),
                                         static_cast<const float*>(weight.node().data_ptr()), alloc, &threads);
    });
    if (id < 0) continue;  // oneDNN does not take it: the plain Conv stays
    ConvParams p = params;
    p.packed_weight = w.shape;
    p.packed_threads = threads;
    s.prim = make_prim(PrimKind::Conv, std::move(p));
    s.inputs[1] = id;
    changed = true;
  }
  if (changed) eliminate_dead_steps(tape);  // the plain weights no step reads any more
}

}  // namespace smelt::compiler
