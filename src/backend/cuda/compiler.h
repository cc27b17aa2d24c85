// Run-time kernel builds: NVRTC for the running GPU's architecture, cached in memory and on disk.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "src/backend/cuda/runtime.h"

namespace smelt::cuda {

/// The device-side preamble pasted in front of every kernel: element types, conversions with
/// astype's rules, the scalar math of every operator, reduction operators (device_math.cpp).
const char* device_preamble();

/// Compiles `source` (the whole translation unit, preamble included) with NVRTC for compute
/// capability `compute_capability` (90 for sm_90) and smelt's options; returns a cubin (`sass`)
/// or PTX. Needs NVRTC but no GPU: tests use it to check kernel sources on machines without one.
/// Throws DeviceError with NVRTC's log.
std::string nvrtc_compile(int compute_capability, const std::string& source, bool sass, const std::string& what);

/// The kernel `k` of `body` (CUDA C++ after the preamble) on GPU `device`. `key` names the kernel
/// uniquely among those of the process (op, dtypes, layout): found in memory by key without
/// building the source; else the source is built, looked up on disk under
/// $SMELT_CACHE_DIR/cuda/<hash>.cubin (source beside it as .cu), else compiled by NVRTC to SASS
/// for the device's compute capability. `what` names the op in error messages.
CUfunction get_kernel(int device, const std::string& key, const std::function<std::string()>& body,
                      const std::string& what);

/// The kernel of `key` on GPU `device` if this process has it already (no build, no disk), else
/// null: lets hot paths skip preparing get_kernel's arguments.
CUfunction find_kernel(int device, const std::string& key);

/// Launches `fn` with one by-value argument struct (`args`, `size` bytes) on the device stream.
void launch(const DeviceState& s, CUfunction fn, uint64_t grid, unsigned block, void* args, const std::string& what);

/// The block size that gives `fn` the most resident threads per SM (the driver's occupancy
/// calculator, asked once per kernel), between 128 and 1024. Kernels whose launches use it must
/// work for any block size.
unsigned occupancy_block_size(CUfunction fn);

/// Blocks of `block` threads covering n items (at least 1).
inline uint64_t blocks_for(int64_t n, int64_t per_block) {
  return n <= 0 ? 1 : static_cast<uint64_t>((n + per_block - 1) / per_block);
}

}  // namespace smelt::cuda
