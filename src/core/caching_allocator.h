// The device-independent caching policy of the allocators: size classes, a cap on cached bytes
// with least-recently-freed eviction, a limit, and flush-and-retry before an allocation fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "src/core/buffer.h"

namespace smelt {

struct MemoryStats {
  size_t active_bytes = 0;  // held by live buffers
  size_t peak_bytes = 0;    // highest active_bytes since the last reset
  size_t cached_bytes = 0;  // freed by users, kept for reuse
  size_t num_allocs = 0;    // requests served
  size_t num_cache_hits = 0;
  size_t num_evictions = 0;  // cached blocks freed to keep the cache under its cap
  size_t num_flushes = 0;    // whole-cache flushes before an allocation (limit or system refusal)
  size_t cache_limit = 0;    // the cap on cached_bytes
  size_t limit = 0;          // the cap on active + cached bytes (0: none)
};

/// Base of the per-device allocators.
class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Memory for at least `bytes` (64-byte aligned); throws OutOfMemory past the limit.
  virtual BufferPtr allocate(size_t bytes) = 0;
  /// Called by ~Buffer.
  virtual void release(void* ptr, size_t bytes) = 0;
  virtual MemoryStats stats() const = 0;
  virtual void reset_peak() = 0;
  /// Frees every cached block.
  virtual void clear_cache() = 0;
  /// Active + cached bytes may not exceed this (0 = no limit).
  virtual void set_limit(size_t bytes) = 0;
  /// Cached bytes may not exceed this (0 = cache nothing); returns the previous cap.
  virtual size_t set_cache_limit(size_t bytes) = 0;
};

/// Caching over a system allocator that subclasses provide. Freed blocks wait in lists by block
/// size; a request takes a block of its exact size. The cache never holds more than the cache
/// limit: a freed block that would pass it first evicts the blocks freed longest ago (a block
/// larger than the cap is freed at once). Before an allocation fails, the cache is given back
/// and the allocation retried, whether the limit or the system refused it. Thread-safe; the
/// system calls run outside the lock. A device with several streams keeps a free list per stream
/// (stream_tag): a block freed on a stream is reused on that stream only, where stream order
/// makes it safe; other streams get it only after it went back to the system (which waits for
/// the whole device first).
class CachingAllocator : public Allocator {
 public:
  struct Block {
    void* ptr;
    size_t bytes;
    uint64_t stream = 0;  // the stream_tag() of the thread that freed it
  };

  BufferPtr allocate(size_t bytes) final;
  void release(void* ptr, size_t bytes) final;
  MemoryStats stats() const final;
  void reset_peak() final;
  void clear_cache() final;
  void set_limit(size_t bytes) final;
  size_t set_cache_limit(size_t bytes) final;

 protected:
  /// `name` for messages ("CPU", "cuda:0"). Subclasses' destructors must call clear_cache():
  /// this one cannot reach their system_free.
  CachingAllocator(Device device, std::string name, size_t cache_limit, size_t limit);

  /// The size of the block that serves a request of `bytes` (its class).
  virtual size_t block_size(size_t bytes) const = 0;
  /// Requests past this are refused without asking the system.
  virtual size_t max_request() const = 0;
  /// A new block of `bytes`, or null when the system has no memory for it (other failures throw).
  virtual void* system_alloc(size_t bytes) = 0;
  /// Gives blocks back to the system (in one call, so a device synchronizes once). Never throws.
  virtual void system_free(const std::vector<Block>& blocks) = 0;
  /// The calling thread's current stream, whose free list serves and receives its blocks
  /// (0: the default stream, and always on the CPU).
  virtual uint64_t stream_tag() const { return 0; }

 private:
  // Moves every cached block into `out` (to be freed after the lock is dropped).
  void take_all_cached_locked(std::vector<Block>& out);
  // Moves the blocks freed longest ago into `out` until at most `keep` bytes stay cached.
  void evict_locked(size_t keep, std::vector<Block>& out);
  void system_free_some(const std::vector<Block>& blocks) {
    if (!blocks.empty()) system_free(blocks);
  }

  const Device device_;
  const std::string name_;
  mutable std::mutex mutex_;
  using FreeMap = std::multimap<std::pair<uint64_t, size_t>, std::list<Block>::iterator>;
  std::list<Block> lru_;  // cached blocks, least recently freed first
  FreeMap free_;          // (stream, block size) -> its place in lru_
  // The list and map nodes of blocks taken from the cache, kept for the next blocks released into
  // it: a model's call allocates and frees hundreds of buffers, and each round trip would
  // otherwise cost two node allocations and two frees in the system heap.
  std::list<Block> spare_lru_;
  std::vector<FreeMap::node_type> spare_free_;
  MemoryStats stats_;
};

}  // namespace smelt
