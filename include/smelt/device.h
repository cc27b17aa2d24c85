// Devices: the CPU and CUDA GPUs, and the process-wide default device.
#pragma once

#include <cstdint>
#include <string>

namespace smelt {

/// Where an array's data lives and where its kernels run.
struct Device {
  enum class Type : uint8_t { Cpu, Cuda };
  Type type = Type::Cpu;
  int index = 0;

  static Device cpu() { return Device{Type::Cpu, 0}; }
  static Device cuda(int index = 0) { return Device{Type::Cuda, index}; }
  bool operator==(const Device&) const = default;
  std::string str() const;
};

/// The device of arrays made without inputs (zeros, arange, random draws, ...): the innermost
/// DefaultDeviceScope of this thread, else the process default. The process default is the
/// first GPU when the build has CUDA and a GPU is present, else the CPU; the environment
/// variable SMELT_DEFAULT_DEVICE=cpu|cuda|auto (auto: the rule above) or set_default_device
/// changes it.
Device default_device();
/// Changes the process default device for arrays created afterwards.
void set_default_device(Device device);

/// Makes `device` this thread's default device while it lives (scopes nest). Libraries use it to
/// pin where their arrays are made without touching the process default: the ONNX runner runs
/// in a scope of its own device.
class DefaultDeviceScope {
 public:
  explicit DefaultDeviceScope(Device device);
  ~DefaultDeviceScope();
  DefaultDeviceScope(const DefaultDeviceScope&) = delete;
  DefaultDeviceScope& operator=(const DefaultDeviceScope&) = delete;

 private:
  bool had_previous_;
  Device previous_;
};

/// True when this build includes the CUDA backend and a GPU is visible.
bool cuda_available();
/// Number of visible GPUs (0 without the CUDA backend, a driver or a GPU).
int cuda_device_count();
/// Waits until every kernel and copy queued on `device` has finished (a no-op for the CPU,
/// whose kernels run inside eval). For timing; reads of device arrays wait by themselves.
void synchronize(Device device);

}  // namespace smelt
