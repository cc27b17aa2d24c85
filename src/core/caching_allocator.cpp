// The caching policy shared by the CPU and CUDA allocators (see caching_allocator.h).
#include "src/core/caching_allocator.h"

#include <iterator>
#include <utility>

#include "smelt/errors.h"

namespace smelt {

Buffer::~Buffer() {
  if (allocator) allocator->release(ptr, bytes);
}

CachingAllocator::CachingAllocator(Device device, std::string name, size_t cache_limit, size_t limit)
    : device_(device), name_(std::move(name)) {
  stats_.cache_limit = cache_limit;
  stats_.limit = limit;
}

void CachingAllocator::take_all_cached_locked(std::vector<Block>& out) {
  out.insert(out.end(), lru_.begin(), lru_.end());
  lru_.clear();
  free_.clear();
  spare_lru_.clear();
  spare_free_.clear();
  stats_.cached_bytes = 0;
}

void CachingAllocator::evict_locked(size_t keep, std::vector<Block>& out) {
  while (stats_.cached_bytes > keep) {
    const Block old = lru_.front();
    auto range = free_.equal_range({old.stream, old.bytes});
    for (auto it = range.first; it != range.second; ++it)
      if (it->second == lru_.begin()) {
        free_.erase(it);
        break;
      }
    lru_.pop_front();
    stats_.cached_bytes -= old.bytes;
    stats_.num_evictions++;
    out.push_back(old);
  }
}

BufferPtr CachingAllocator::allocate(size_t bytes) {
  if (bytes > max_request())
    throw OutOfMemory("allocate: " + std::to_string(bytes) + " bytes is more than " + name_ + " memory can hold");
  const size_t size = block_size(bytes);
  const uint64_t stream = stream_tag();
  const std::pair<uint64_t, size_t> key{stream, size};
  std::vector<Block> to_free;
  {
    std::lock_guard lock(mutex_);
    stats_.num_allocs++;
    // The most recently freed block of the size: the likeliest to be warm in a CPU cache.
    auto it = free_.upper_bound(key);
    if (it != free_.begin() && std::prev(it)->first == key) {
      --it;
      void* p = it->second->ptr;
      constexpr size_t kMaxSpareNodes = 4096;  // bounds what a burst of live buffers leaves behind
      if (spare_lru_.size() < kMaxSpareNodes) {
        spare_lru_.splice(spare_lru_.end(), lru_, it->second);
        spare_free_.push_back(free_.extract(it));
      } else {
        lru_.erase(it->second);
        free_.erase(it);
      }
      stats_.cached_bytes -= size;
      stats_.num_cache_hits++;
      stats_.active_bytes += size;
      if (stats_.active_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.active_bytes;
      return std::make_shared<Buffer>(p, size, device_, this);
    }
    const size_t limit = stats_.limit;
    if (limit != 0 && stats_.active_bytes + stats_.cached_bytes + size > limit) {
      if (stats_.active_bytes + size > limit)  // flushing would not make room: keep the cache
        throw OutOfMemory("allocate: " + std::to_string(bytes) + " bytes would exceed the " + name_ +
                          " memory limit of " + std::to_string(limit) + " bytes (" +
                          std::to_string(stats_.active_bytes) + " active)");
      take_all_cached_locked(to_free);  // give the cache back rather than refuse
      stats_.num_flushes++;
    }
    // Counted before the system call so that concurrent requests respect the limit together.
    stats_.active_bytes += size;
    if (stats_.active_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.active_bytes;
  }
  system_free_some(to_free);
  // A system call that throws (a device error, not a refusal) must not leave `size` counted.
  auto try_system_alloc = [&] {
    try {
      return system_alloc(size);
    } catch (...) {
      std::lock_guard lock(mutex_);
      stats_.active_bytes -= size;
      throw;
    }
  };
  void* p = try_system_alloc();
  if (!p) {
    // The system refused: give it the cache back and ask once more.
    to_free.clear();
    {
      std::lock_guard lock(mutex_);
      take_all_cached_locked(to_free);
      if (!to_free.empty()) stats_.num_flushes++;
    }
    size_t flushed = 0;
    for (const Block& b : to_free) flushed += b.bytes;
    if (!to_free.empty()) {
      system_free(to_free);
      p = try_system_alloc();
    }
    if (!p) {
      std::lock_guard lock(mutex_);
      stats_.active_bytes -= size;
      throw OutOfMemory("allocate: " + name_ + " has no memory for " + std::to_string(bytes) + " bytes (a block of " +
                        std::to_string(size) + "), even after freeing " + std::to_string(flushed) +
                        " cached bytes; " + std::to_string(stats_.active_bytes) + " bytes are active in smelt");
    }
  }
  return std::make_shared<Buffer>(p, size, device_, this);
}

void CachingAllocator::release(void* ptr, size_t bytes) {
  const uint64_t stream = stream_tag();
  std::vector<Block> to_free;
  {
    std::lock_guard lock(mutex_);
    stats_.active_bytes -= bytes;
    const size_t cap = stats_.cache_limit, limit = stats_.limit;
    if (bytes > cap || (limit != 0 && stats_.active_bytes + stats_.cached_bytes + bytes > limit)) {
      to_free.push_back({ptr, bytes, stream});
    } else {
      // Make room under the cap by evicting the blocks freed longest ago.
      evict_locked(cap - bytes, to_free);
      const std::pair<uint64_t, size_t> key{stream, bytes};
      if (spare_lru_.empty()) {
        lru_.push_back({ptr, bytes, stream});
      } else {
        lru_.splice(lru_.end(), spare_lru_, spare_lru_.begin());
        lru_.back() = {ptr, bytes, stream};
      }
      if (spare_free_.empty()) {
        free_.emplace(key, std::prev(lru_.end()));
      } else {
        FreeMap::node_type node = std::move(spare_free_.back());
        spare_free_.pop_back();
        node.key() = key;
        node.mapped() = std::prev(lru_.end());
        free_.insert(std::move(node));
      }
      stats_.cached_bytes += bytes;
    }
  }
  system_free_some(to_free);
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_bytes = stats_.active_bytes;
}

void CachingAllocator::clear_cache() {
  std::vector<Block> to_free;
  {
    std::lock_guard lock(mutex_);
    take_all_cached_locked(to_free);
  }
  system_free_some(to_free);
}

void CachingAllocator::set_limit(size_t bytes) {
  std::lock_guard lock(mutex_);
  stats_.limit = bytes;
}

size_t CachingAllocator::set_cache_limit(size_t bytes) {
  std::vector<Block> to_free;
  size_t previous;
  {
    std::lock_guard lock(mutex_);
    previous = stats_.cache_limit;
    stats_.cache_limit = bytes;
    // A lower cap applies now: the blocks freed longest ago go first.
    evict_locked(bytes, to_free);
  }
  system_free_some(to_free);
  return previous;
}

}  // namespace smelt
