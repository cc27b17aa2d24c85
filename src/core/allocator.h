// Caching allocators with statistics (active, peak, cached), a limit and a cap on cached bytes.
#pragma once

#include <cstddef>

#include "src/core/caching_allocator.h"

namespace smelt {

/// The CPU allocator: size-classed free lists (powers of two split in four) over aligned_alloc.
/// The cache cap comes from SMELT_CPU_CACHE_LIMIT (bytes, or with a K/M/G suffix), else the
/// smaller of 1 GiB and a quarter of physical memory; set_cache_limit changes it.
class CpuAllocator final : public CachingAllocator {
 public:
  CpuAllocator();
  ~CpuAllocator() override;

  /// Rounds a request up to its size class.
  static size_t size_class(size_t bytes);
  /// The cache cap without SMELT_CPU_CACHE_LIMIT.
  static size_t default_cache_limit();

 protected:
  size_t block_size(size_t bytes) const override { return size_class(bytes); }
  size_t max_request() const override;
  void* system_alloc(size_t bytes) override;
  void system_free(const std::vector<Block>& blocks) override;
};

Allocator& allocator_for(Device device);
CpuAllocator& cpu_allocator();

}  // namespace smelt
