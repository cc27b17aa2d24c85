// Memory statistics and limits of the caching allocators, and the kernel thread count.
#pragma once

#include <cstddef>

#include "smelt/device.h"

namespace smelt {

struct MemoryInfo {
  size_t active_bytes = 0;  // held by live arrays
  size_t peak_bytes = 0;    // highest active_bytes since the last reset
  size_t cached_bytes = 0;  // freed, kept for reuse
};

MemoryInfo memory_info(Device device = Device::cpu());
void reset_peak_memory(Device device = Device::cpu());
/// Frees the cached blocks of a device's allocator.
void clear_memory_cache(Device device = Device::cpu());
/// Active plus cached bytes may not exceed `bytes` (0 removes the limit); past it, allocation
/// raises OutOfMemory.
void set_memory_limit(size_t bytes, Device device = Device::cpu());

/// Threads used by CPU kernels (default: SMELT_NUM_THREADS or the hardware concurrency).
int cpu_threads();
void set_cpu_threads(int n);

}  // namespace smelt
