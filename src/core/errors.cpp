// The always-on assertion and device basics.
#include "smelt/errors.h"

#include "smelt/device.h"

#include <cstdlib>
#include <cstring>

#if SMELT_HAS_CUDA
#include "src/backend/cuda/cuda.h"
#endif

namespace smelt {

void assertion_failed(const char* expr, const char* file, int line, const std::string& msg) {
  throw Error("internal error: " + msg + " (" + expr + " at " + file + ":" + std::to_string(line) + ")");
}

std::string Device::str() const {
  return type == Type::Cpu ? "cpu" : "cuda:" + std::to_string(index);
}

namespace {
// SMELT_DEFAULT_DEVICE=cuda (or auto) picks the GPU when one is present. The default stays the
// CPU until every primitive has a CUDA kernel (docs/cuda.md): the ONNX layer and the CLI use ops
// that the GPU cannot run yet.
// The first GPU when one is present, unless SMELT_DEFAULT_DEVICE=cpu.
Device initial_default_device() {
  const char* env = std::getenv("SMELT_DEFAULT_DEVICE");
  if (env && std::strcmp(env, "cpu") == 0) return Device::cpu();
  return cuda_available() ? Device::cuda(0) : Device::cpu();
}

// The innermost DefaultDeviceScope of this thread, if any.
thread_local bool scoped = false;
thread_local Device scoped_device;

Device& default_device_ref() {
  static Device d = initial_default_device();
  return d;
}
}  // namespace

bool cuda_available() { return cuda_device_count() > 0; }

void synchronize(Device device) {
  if (device.type == Device::Type::Cpu) return;
#if SMELT_HAS_CUDA
  cuda::synchronize(device);
#else
  throw DeviceError("synchronize: " + device.str() + " is not available (no CUDA in this build)");
#endif
}

int cuda_device_count() {
#if SMELT_HAS_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

Device default_device() { return scoped ? scoped_device : default_device_ref(); }

DefaultDeviceScope::DefaultDeviceScope(Device device) : had_previous_(scoped), previous_(scoped_device) {
  if (device.type == Device::Type::Cuda && !cuda_available())
    throw DeviceError("DefaultDeviceScope: " + device.str() + " is not available (no CUDA in this build or no GPU)");
  scoped = true;
  scoped_device = device;
}

DefaultDeviceScope::~DefaultDeviceScope() {
  scoped = had_previous_;
  scoped_device = previous_;
}

void set_default_device(Device device) {
  if (device.type == Device::Type::Cuda && !cuda_available())
    throw DeviceError("set_default_device: " + device.str() + " is not available (no CUDA in this build or no GPU)");
  default_device_ref() = device;
}

}  // namespace smelt
