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

// Where arrays live: one rule, the same eagerly and compiled.
//
//  1. Arrays made without array inputs go to default_device(): zeros, ones, full (of a host
//     value), arange, linspace, eye, identity, random::key, and so every random draw from a
//     fresh key. Inside a DefaultDeviceScope that is the scope's device.
//  2. Arrays built from host data (the Array constructors from numbers, lists and vectors, and
//     loaded files) are host arrays on the CPU; to_device right after puts them on a device
//     (`to_device(Array(v, shape), default_device())`). Ops move host arrays where needed (3).
//  3. An op's result lives on its inputs' device. When the inputs are on the CPU and on one GPU,
//     the op runs on the GPU and its CPU inputs are copied there (a lazy to_device); inputs on two
//     different GPUs raise DeviceError naming the op and both devices. Single-input ops (views,
//     unary math, reductions, casts) stay where their input is.
//  4. A compiled function does exactly what the eager code does: its key holds the default
//     device and every input's device, each step of its trace runs on the device the eager op
//     chose, transfers happen where eager ones do, and fused kernels never mix devices. So a
//     compiled result has the eager result's device and bits.

/// The device of arrays made without array inputs (rule 1 above): the innermost
/// DefaultDeviceScope of this thread, else the process default. The process default is the
/// first GPU when the build has CUDA and a GPU is present, else the CPU; the environment
/// variable SMELT_DEFAULT_DEVICE (read on first use) or set_default_device changes it.
/// SMELT_DEFAULT_DEVICE accepts `auto` (the rule above; also when unset or empty), `cpu`, `cuda`
/// (the first GPU) and `cuda:N`; any other value, or a GPU that is not there, makes this raise
/// InvalidArgument / DeviceError naming the variable and the accepted values.
Device default_device();
/// Changes the process default device for arrays created afterwards (DeviceError for a GPU
/// that this build or machine does not have).
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
/// A device from its name: "cpu", "cuda" (GPU 0), "cuda:N", or "auto"/"" (the first GPU when
/// there is one, else the CPU) — the values SMELT_DEFAULT_DEVICE and the CLI's --device accept.
/// Other text raises InvalidArgument listing the accepted values, and a GPU this process cannot
/// use raises DeviceError; both messages start with `what` (the setting's name). With
/// `check_available` false only the text is checked (no GPU is touched: a process about to fork
/// workers must not initialize CUDA), except that "auto" and "" still look for a GPU.
Device parse_device(const std::string& text, const std::string& what, bool check_available = true);
/// Raises DeviceError starting with `what` when `device` is a GPU this process cannot use.
void check_device(Device device, const std::string& what);

bool cuda_available();
/// Number of visible GPUs (0 without the CUDA backend, a driver or a GPU).
int cuda_device_count();
/// Waits until every kernel and copy queued on `device` has finished (a no-op for the CPU,
/// whose kernels run inside eval). For timing; reads of device arrays wait by themselves.
void synchronize(Device device);

}  // namespace smelt
