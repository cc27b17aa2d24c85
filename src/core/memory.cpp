// The public memory and thread-count API over the allocators and the thread pool.
#include "smelt/memory.h"

#include "src/core/allocator.h"
#include "src/core/thread_pool.h"
#include "src/core/transfer_counts.h"

namespace smelt {

namespace {
// Per thread, so that runs in parallel each count their own copies without sharing a cache line.
thread_local TransferCounts t_transfers;
}  // namespace

namespace detail {
void count_device_to_host(size_t bytes) {
  t_transfers.device_to_host_copies++;
  t_transfers.device_to_host_bytes += bytes;
}
void count_host_to_device(size_t bytes) {
  t_transfers.host_to_device_copies++;
  t_transfers.host_to_device_bytes += bytes;
}
}  // namespace detail

TransferCounts thread_transfer_counts() { return t_transfers; }

MemoryInfo memory_info(Device device) {
  auto s = allocator_for(device).stats();
  return MemoryInfo{s.active_bytes, s.peak_bytes, s.cached_bytes, s.cache_limit, s.limit};
}
void reset_peak_memory(Device device) { allocator_for(device).reset_peak(); }
void clear_memory_cache(Device device) { allocator_for(device).clear_cache(); }
void set_memory_limit(size_t bytes, Device device) { allocator_for(device).set_limit(bytes); }
size_t set_cache_limit(size_t bytes, Device device) { return allocator_for(device).set_cache_limit(bytes); }
int cpu_threads() { return num_threads(); }
void set_cpu_threads(int n) { set_num_threads(n); }

}  // namespace smelt
