// The public memory and thread-count API over the allocators and the thread pool.
#include "smelt/memory.h"

#include "src/core/allocator.h"
#include "src/core/thread_pool.h"

namespace smelt {

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
