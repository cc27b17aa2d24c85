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

/// The device of arrays made without inputs (zeros, arange, ...). The CPU unless
/// SMELT_DEFAULT_DEVICE=cuda (or auto) and a GPU is present: CUDA becomes the default once every
/// primitive has a CUDA kernel (docs/cuda.md).
Device default_device();
/// Changes the default device for arrays created afterwards.
void set_default_device(Device device);
/// True when this build includes the CUDA backend and a GPU is visible.
bool cuda_available();
/// Number of visible GPUs (0 without the CUDA backend, a driver or a GPU).
int cuda_device_count();
/// Waits until every kernel and copy queued on `device` has finished (a no-op for the CPU,
/// whose kernels run inside eval). For timing; reads of device arrays wait by themselves.
void synchronize(Device device);

}  // namespace smelt
