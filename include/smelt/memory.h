// Memory statistics and limits of the caching allocators, and the kernel thread count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "smelt/device.h"

namespace smelt {

struct MemoryInfo {
  size_t active_bytes = 0;       // held by live arrays
  size_t peak_bytes = 0;         // highest active_bytes since the last reset
  size_t cached_bytes = 0;       // freed, kept for reuse (at most cache_limit_bytes)
  size_t cache_limit_bytes = 0;  // the cap on cached bytes (set_cache_limit)
  size_t limit_bytes = 0;        // the cap on active plus cached bytes (set_memory_limit; 0: none)
};

MemoryInfo memory_info(Device device = Device::cpu());
void reset_peak_memory(Device device = Device::cpu());
/// Frees the cached blocks of a device's allocator.
void clear_memory_cache(Device device = Device::cpu());
/// Active plus cached bytes may not exceed `bytes` (0 removes the limit); past it, allocation
/// gives the cache back and retries, then raises OutOfMemory.
void set_memory_limit(size_t bytes, Device device = Device::cpu());
/// Cached bytes (freed blocks kept for reuse) may not exceed `bytes`; 0 caches nothing. Past the
/// cap, the blocks freed longest ago are given back to the system. Returns the previous cap.
/// Defaults: SMELT_CPU_CACHE_LIMIT / SMELT_CUDA_CACHE_LIMIT (bytes, or with a K/M/G suffix),
/// else the smaller of 1 GiB and a quarter of physical memory on the CPU, half of the GPU's memory.
size_t set_cache_limit(size_t bytes, Device device = Device::cpu());

/// Copies between the host and GPUs made by one thread: array transfers either way (to_device,
/// reads of device arrays such as to_vector and item) and the values GPU kernels read back to the
/// host (a NonZero count, an index bound check). Counters only grow; the difference of two
/// readings counts the work in between (onnx::RunStats does so per run). Without a GPU they stay 0.
struct TransferCounts {
  uint64_t device_to_host_copies = 0;
  uint64_t device_to_host_bytes = 0;
  uint64_t host_to_device_copies = 0;
  uint64_t host_to_device_bytes = 0;
};
/// This thread's counts since it started (kernels of an eval run on the thread that called it).
TransferCounts thread_transfer_counts();

/// Threads used by CPU kernels (default: SMELT_NUM_THREADS or the hardware concurrency).
int cpu_threads();
void set_cpu_threads(int n);

}  // namespace smelt
