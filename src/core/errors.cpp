// The always-on assertion and device basics.
#include "smelt/errors.h"

#include "smelt/device.h"

namespace smelt {

void assertion_failed(const char* expr, const char* file, int line, const std::string& msg) {
  throw Error("internal error: " + msg + " (" + expr + " at " + file + ":" + std::to_string(line) + ")");
}

std::string Device::str() const {
  return type == Type::Cpu ? "cpu" : "cuda:" + std::to_string(index);
}

namespace {
Device& default_device_ref() {
  static Device d = cuda_available() ? Device::cuda(0) : Device::cpu();
  return d;
}
}  // namespace

bool cuda_available() { return false; }  // the CUDA backend replaces this (a later seam)

Device default_device() { return default_device_ref(); }

void set_default_device(Device device) {
  if (device.type == Device::Type::Cuda && !cuda_available())
    throw DeviceError("set_default_device: " + device.str() + " is not available (no CUDA in this build or no GPU)");
  default_device_ref() = device;
}

}  // namespace smelt
