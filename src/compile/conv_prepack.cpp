// The conv_prepack pass: constant float32 CPU Conv weights are reordered into oneDNN's layout once, at compile time.
#include <unordered_map>
#include <vector>

#include "smelt/device.h"
#include "src/backend/cpu/dnnl.h"
#include "src/compile/passes.h"

namespace smelt::compiler {

void prepack_conv_weights(Tape& tape) {
  if (!cpu::dnnl_enabled()) return;
  std::unordered_map<int, size_t> constant_at;  // value id -> index in tape.constants
  for (size_t i = 0; i < tape.constants.size(); ++i) constant_at[tape.constants[i].first] = i;
  bool changed = false;
  for (Step& s : tape.steps) {
    if (s.prim.kind != PrimKind::Conv || s.device.type != Device::Type::Cpu) continue;
    const auto& params = s.prim.get<ConvParams>();
    if (!params.packed_weight.empty()) continue;
    const ValueInfo& x = tape.values[s.inputs[0]];
    const ValueInfo& w = tape.values[s.inputs[1]];
    const ValueInfo& y = tape.values[s.outputs[0]];
    if (x.dtype != Dtype::Float32 || w.dtype != Dtype::Float32 || y.dtype != Dtype::Float32) continue;
    if (x.device.type != Device::Type::Cpu || w.device.type != Device::Type::Cpu) continue;
    const auto c = constant_at.find(s.inputs[1]);
    if (c == constant_at.end()) continue;
    const Array& weight = tape.constants[c->second].second;
    if (weight.device().type != Device::Type::Cpu || weight.size() == 0) continue;
    const std::vector<float> plain = weight.to_vector<float>();
    int threads = 0;
    std::vector<float> packed =
        cpu::dnnl_pack_conv_weights(cpu::dnnl_conv_geometry(x.shape, w.shape, y.shape, params), plain.data(), &threads);
    if (packed.empty()) continue;  // oneDNN does not take it: the plain Conv stays
    const Shape packed_shape{static_cast<int64_t>(packed.size())};
    const int id = tape.add_value(packed_shape, Dtype::Float32, Device::cpu());
    DefaultDeviceScope on_cpu(Device::cpu());  // the array goes to the default device otherwise
    tape.constants.emplace_back(id, Array(packed, packed_shape));
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
