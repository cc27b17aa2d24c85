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
Device initial_default_device() {
  const char* env = std::getenv("SMELT_DEFAULT_DEVICE");
  const bool want_cuda = env && (std::strcmp(env, "cuda") == 0 || std::strcmp(env, "auto") == 0);
  return want_cuda && cuda_available() ? Device::cuda(0) : Device::cpu();
}

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

Device default_device() { return default_device_ref(); }

void set_default_device(Device device) {
  if (device.type == Device::Type::Cuda && !cuda_available())
    throw DeviceError("set_default_device: " + device.str() + " is not available (no CUDA in this build or no GPU)");
  default_device_ref() = device;
}

}  // namespace smelt
