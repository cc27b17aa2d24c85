// Caching allocators with statistics (active, peak, cached) and an optional limit.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>

#include "src/core/buffer.h"

namespace smelt {

struct MemoryStats {
  size_t active_bytes = 0;  // held by live buffers
  size_t peak_bytes = 0;    // highest active_bytes since the last reset
  size_t cached_bytes = 0;  // freed by users, kept for reuse
  size_t num_allocs = 0;    // requests served
  size_t num_cache_hits = 0;
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
};

/// The CPU allocator: size-classed free lists (powers of two split in four up to 1 GiB);
/// larger blocks are not cached.
class CpuAllocator final : public Allocator {
 public:
  BufferPtr allocate(size_t bytes) override;
  void release(void* ptr, size_t bytes) override;
  MemoryStats stats() const override;
  void reset_peak() override;
  void clear_cache() override;
  void set_limit(size_t bytes) override;
  ~CpuAllocator() override;

  /// Rounds a request up to its size class.
  static size_t size_class(size_t bytes);

 private:
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> free_;  // size class -> block
  MemoryStats stats_;
  size_t limit_ = 0;
};

Allocator& allocator_for(Device device);
CpuAllocator& cpu_allocator();

}  // namespace smelt
