// Keys for ONNX random operators: seeded nodes, the run's key, or this thread's key sequence.
#include "src/onnx/random_key.h"

#include <optional>

#include "smelt/compile.h"
#include "smelt/device.h"
#include "smelt/ops.h"
#include "smelt/random.h"
#include "src/onnx/registry.h"
#include "src/ops/op_utils.h"

namespace smelt::onnx::detail {

void check_key(const Array& key, const std::string& what) {
  if (!key.valid() || key.dtype() != uint32 || key.shape() != Shape{2})
    throw InvalidArgument(what + " must be a uint32[2] key (random::key), got " +
                          (key.valid() ? describe(key) : std::string("an empty array handle")));
}

Array split_key(Array& state) {
  Array both = random::split(state, 2);
  Array next = reshape(slice(both, Axes{0}, {0}, {1}, {1}), {2});
  Array draw = reshape(slice(both, Axes{0}, {1}, {2}, {1}), {2});
  if (!smelt::detail::is_tracer(next)) eval({next, draw});
  state = next;
  return draw;
}

Array draw_key(const OpContext& c) {
  if (c.has_attr("seed")) {
    DefaultDeviceScope cpu(Device::cpu());
    return random::key(static_cast<uint64_t>(c.attr_int("seed", 0)));
  }
  if (c.guard())
    if (auto k = c.guard()->next_key()) return *k;
  // The thread's key sequence (random::next_key): the one compile_mut carries through a compiled
  // step, so Dropout in an ONNX model advances it exactly as other random draws do.
  return random::next_key();
}

}  // namespace smelt::onnx::detail
