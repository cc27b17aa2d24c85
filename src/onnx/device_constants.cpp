// Running a model on a chosen device: values moved there, initializers uploaded once per graph and device.
#include "src/onnx/device_constants.h"

#include <vector>

#include "smelt/ops.h"

namespace smelt::onnx::detail {

std::shared_ptr<DeviceConstants> make_device_constants() { return std::make_shared<DeviceConstants>(); }

Value value_to_device(const Value& v, Device device) {
  switch (v.kind()) {
    case Value::Kind::None:
    case Value::Kind::Strings:
      return v;
    case Value::Kind::Tensor:
      // A host tensor keeps its values as the copy's host copy: reading it on the host (a shape
      // given as an input) costs no transfer back.
      if (v.array().device() == device) return v;
      if (v.array().device().type == Device::Type::Cpu)
        return with_host_copy(Value::tensor(to_device(v.array(), device), v.elem_type()), v.array());
      return Value::tensor(to_device(v.array(), device), v.elem_type());
    case Value::Kind::Sequence: {
      std::vector<Value> items;
      items.reserve(v.items().size());
      for (const auto& item : v.items()) items.push_back(value_to_device(item, device));
      return Value::sequence(std::move(items), v.element_type());
    }
    case Value::Kind::Optional:
      return Value::optional(v.content() ? std::optional<Value>(value_to_device(*v.content(), device)) : std::nullopt,
                             v.element_type());
    case Value::Kind::Map:
      return Value::map(v.map_key_type(), v.map_int_keys(), v.map_string_keys(),
                        value_to_device(v.map_values(), device));
  }
  return v;
}

namespace {

/// Integer and bool initializers up to this many elements stay on the host.
constexpr int64_t kHostConstantLimit = 64;

/// Shape constants, axes, split sizes and the like: kept on the host so that the shape arithmetic
/// they enter (Concat of a Shape and a constant, then Reshape) stays there too. On a GPU, such a
/// sum would land on the device and each Reshape would read it back, a synchronization per layer.
bool stays_on_host(const Value& v) {
  const Dtype dt = v.array().dtype();
  return (is_integral(dt) || dt == Dtype::Bool) && v.array().size() <= kHostConstantLimit;
}

}  // namespace

Value initializer_on(const Graph& g, const std::string& name, const Value& host, Device device) {
  if (!host.is_tensor() || host.array().device() == device || stays_on_host(host)) return host;
  if (!g.device_constants) return value_to_device(host, device);
  DeviceConstants& cache = *g.device_constants;
  const std::pair<int, int> key{static_cast<int>(device.type), device.index};
  {
    std::lock_guard lock(cache.mutex);
    auto& on_device = cache.by_device[key];
    if (auto it = on_device.find(name); it != on_device.end() && it->second.source.node_ptr() == host.array().node_ptr())
      return it->second.value;
  }
  // Uploaded outside the lock: two threads may both upload a constant the first time, and one
  // copy is kept; runs never wait on another run's transfer.
  Value copy = value_to_device(host, device);
  copy.array().eval();
  std::lock_guard lock(cache.mutex);
  auto& entry = cache.by_device[key][name];
  if (entry.source.node_ptr() != host.array().node_ptr()) entry = {host.array(), copy};
  return entry.value;
}

}  // namespace smelt::onnx::detail
