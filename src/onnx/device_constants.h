// Running a model on a chosen device: values moved there, initializers uploaded once per graph and device.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "smelt/onnx.h"

namespace smelt::onnx::detail {

/// The device copies behind Graph::device_constants (RunOptions::device).
struct DeviceConstants {
  struct Entry {
    Array source;  // the host initializer it was made from: a graph copy may have replaced it
    Value value;   // evaluated, on the device
  };
  std::mutex mutex;
  std::map<std::pair<int, int>, std::unordered_map<std::string, Entry>> by_device;  // (type, index)
};

std::shared_ptr<DeviceConstants> make_device_constants();

/// `v` with every tensor inside it (sequence items, optional contents, map values) on `device`,
/// as lazy copies; string tensors and map keys stay on the host.
Value value_to_device(const Value& v, Device device);

/// The initializer `name` of `g` (host value `host`) on `device`: from g.device_constants when the
/// graph has one (uploaded and evaluated on first use), else a lazy copy. Small integer and bool
/// initializers (at most 64 elements: shapes, axes, sizes) stay on the host, where the operators'
/// shape arithmetic runs; ops that use them on the GPU copy them there (a fill for a scalar).
Value initializer_on(const Graph& g, const std::string& name, const Value& host, Device device);

}  // namespace smelt::onnx::detail
