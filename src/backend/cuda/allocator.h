// The caching device allocator: the shared caching policy over cuMemAlloc.
#pragma once

#include <cstdint>

#include "src/core/allocator.h"

namespace smelt::cuda {

/// Device memory of one GPU through cuMemAlloc, cached by size class (the CPU allocator's
/// classes, at least 512 bytes) with the policy of CachingAllocator. Blocks are reused in stream
/// order: a block freed by a thread goes to the free list of its current stream and is handed
/// only to later requests on that stream, whose kernels run after every kernel queued before the
/// free; before blocks go back to the driver the whole device is synchronized (every stream). The limit comes from SMELT_CUDA_MEMORY_LIMIT and the cache cap from
/// SMELT_CUDA_CACHE_LIMIT (bytes, or with a K/M/G suffix; default half the device's memory).
class CudaAllocator final : public CachingAllocator {
 public:
  explicit CudaAllocator(int device);
  ~CudaAllocator() override;

  static size_t size_class(size_t bytes);

 protected:
  size_t block_size(size_t bytes) const override { return size_class(bytes); }
  size_t max_request() const override;
  void* system_alloc(size_t bytes) override;
  void system_free(const std::vector<Block>& blocks) override;
  uint64_t stream_tag() const override;

 private:
  int device_;
};

/// Parses "1073741824", "8G", "512M", "64K"; 0 for unset or unparsable.
size_t parse_memory_limit(const char* text);

}  // namespace smelt::cuda
