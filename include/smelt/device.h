// Devices: the CPU and CUDA GPUs, and the process-wide default device.
#pragma once

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

/// CUDA when the build has CUDA and a GPU is present at run time, else the CPU.
Device default_device();
/// Changes the default device for arrays created afterwards.
void set_default_device(Device device);
/// True when this build includes the CUDA backend and a GPU is visible.
bool cuda_available();

}  // namespace smelt
