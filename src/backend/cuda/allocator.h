// The caching device allocator: freed blocks wait in size-classed lists for the next request.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "src/core/allocator.h"

namespace smelt::cuda {

/// Device memory of one GPU through cuMemAlloc, cached by size class (the CPU allocator's
/// classes, at least 512 bytes). Blocks are reused in stream order: every kernel of a device runs
/// on its one stream, so a block freed by one kernel's output and handed to the next is safe.
/// The limit comes from SMELT_CUDA_MEMORY_LIMIT (bytes, or with a K/M/G suffix) or set_limit.
class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int device);
  BufferPtr allocate(size_t bytes) override;
  void release(void* ptr, size_t bytes) override;
  MemoryStats stats() const override;
  void reset_peak() override;
  void clear_cache() override;
  void set_limit(size_t bytes) override;

  static size_t size_class(size_t bytes);

 private:
  void free_cached_locked();
  int device_;
  mutable std::mutex mutex_;
  std::multimap<size_t, uint64_t> free_;  // size class -> CUdeviceptr
  MemoryStats stats_;
  size_t limit_ = 0;
};

/// Parses "1073741824", "8G", "512M", "64K"; 0 for unset or unparsable.
size_t parse_memory_limit(const char* text);

}  // namespace smelt::cuda
