// Devices: names, the process default (SMELT_DEFAULT_DEVICE), per-thread scopes, GPU presence.
#include "smelt/device.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "smelt/errors.h"

#if SMELT_HAS_CUDA
#include "src/backend/cuda/cuda.h"
#endif

namespace smelt {

std::string Device::str() const { return type == Type::Cpu ? "cpu" : "cuda:" + std::to_string(index); }

namespace {

constexpr const char* kAcceptedValues = "cpu, cuda, cuda:N (a GPU index), auto";

// Raises DeviceError naming `what` when `device` is a GPU this process cannot use.
void check_usable(Device device, const std::string& what) {
  if (device.type != Device::Type::Cuda) return;
  const int count = cuda_device_count();
  if (device.index >= 0 && device.index < count) return;
  throw DeviceError(what + ": " + device.str() + " is not available (" + std::to_string(count) + " GPUs visible" +
                    (count == 0 ? "; no CUDA in this build or no GPU" : "") + ")");
}

// "cuda:N" -> N, or -1 when the text after "cuda:" is not a plain non-negative number.
int gpu_index(const std::string& digits) {
  if (digits.empty() || digits.size() > 6) return -1;
  int n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

// The process default as one atomic word (the default can change while other threads make
// arrays): -1 for the CPU, else the GPU index; kUnset until first read or set.
constexpr int kUnset = -2;
std::atomic<int> process_default{kUnset};
int encode(Device d) { return d.type == Device::Type::Cpu ? -1 : d.index; }
Device decode(int v) { return v < 0 ? Device::cpu() : Device::cuda(v); }

// SMELT_DEFAULT_DEVICE: unset, empty or auto picks the first GPU when there is one, else the CPU;
// cpu, cuda and cuda:N pick that device (a GPU that is not there is an error, not a silent CPU).
Device default_device_from_env() {
  const char* env = std::getenv("SMELT_DEFAULT_DEVICE");
  return parse_device(env ? env : "", "SMELT_DEFAULT_DEVICE");
}

// The process default, read from the environment on first use. A bad value throws here, and
// again on every later use until set_default_device replaces it, so it is never silently ignored.
Device process_default_device() {
  int v = process_default.load(std::memory_order_relaxed);
  if (v != kUnset) return decode(v);
  int expected = kUnset;
  process_default.compare_exchange_strong(expected, encode(default_device_from_env()), std::memory_order_relaxed);
  return decode(process_default.load(std::memory_order_relaxed));
}

// The innermost DefaultDeviceScope of this thread, if any.
thread_local bool scoped = false;
thread_local Device scoped_device;

}  // namespace

Device parse_device(const std::string& v, const std::string& what, bool check_available) {
  if (v.empty() || v == "auto") return cuda_available() ? Device::cuda(0) : Device::cpu();
  if (v == "cpu") return Device::cpu();
  Device d;
  if (v == "cuda") {
    d = Device::cuda(0);
  } else if (v.rfind("cuda:", 0) == 0 && gpu_index(v.substr(5)) >= 0) {
    d = Device::cuda(gpu_index(v.substr(5)));
  } else {
    throw InvalidArgument(what + ": unknown value '" + v + "'; accepted values: " + kAcceptedValues);
  }
  if (check_available) check_usable(d, what + "=" + v);
  return d;
}

void check_device(Device device, const std::string& what) { check_usable(device, what); }

bool cuda_available() { return cuda_device_count() > 0; }

int cuda_device_count() {
#if SMELT_HAS_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

void synchronize(Device device) {
  if (device.type == Device::Type::Cpu) return;
#if SMELT_HAS_CUDA
  cuda::synchronize(device);
#else
  throw DeviceError("synchronize: " + device.str() + " is not available (no CUDA in this build)");
#endif
}

Device default_device() { return scoped ? scoped_device : process_default_device(); }

DefaultDeviceScope::DefaultDeviceScope(Device device) : had_previous_(scoped), previous_(scoped_device) {
  check_usable(device, "DefaultDeviceScope");
  scoped = true;
  scoped_device = device;
}

DefaultDeviceScope::~DefaultDeviceScope() {
  scoped = had_previous_;
  scoped_device = previous_;
}

void set_default_device(Device device) {
  check_usable(device, "set_default_device");
  process_default.store(encode(device), std::memory_order_relaxed);
}

}  // namespace smelt
