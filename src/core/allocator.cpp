// The caching CPU allocator: freed blocks wait in size-classed lists for the next request.
#include "src/core/allocator.h"

#include <cstdlib>
#include <string>

#include "smelt/errors.h"

#if SMELT_HAS_CUDA
#include "src/backend/cuda/cuda.h"
#endif

namespace smelt {

Buffer::~Buffer() {
  if (allocator) allocator->release(ptr, bytes);
}

namespace {
constexpr size_t kAlign = 64;
constexpr size_t kMaxCachedClass = size_t{1} << 30;
// Past this no system can serve a request, and rounding up to a class would overflow.
constexpr size_t kMaxRequest = size_t{1} << 56;
}  // namespace

size_t CpuAllocator::size_class(size_t bytes) {
  if (bytes <= kAlign) return kAlign;
  if (bytes > kMaxRequest) return bytes;  // refused by allocate; no power of two above it fits
  // Powers of two, each split into four steps: waste stays under 25%.
  size_t p = 1;
  while (p < bytes) p <<= 1;
  size_t step = p / 8;  // p/2 .. p in four steps of p/8
  if (step < kAlign) return p;
  size_t c = (bytes + step - 1) / step * step;
  return c;
}

BufferPtr CpuAllocator::allocate(size_t bytes) {
  if (bytes > kMaxRequest)
    throw OutOfMemory("allocate: " + std::to_string(bytes) + " bytes is more than any CPU memory can hold");
  size_t cls = size_class(bytes);
  void* p = nullptr;
  {
    std::lock_guard lock(mutex_);
    stats_.num_allocs++;
    auto it = free_.find(cls);
    if (it != free_.end()) {
      p = it->second;
      free_.erase(it);
      stats_.cached_bytes -= cls;
      stats_.num_cache_hits++;
    } else {
      if (limit_ != 0 && stats_.active_bytes + stats_.cached_bytes + cls > limit_) {
        // Give the cache back before refusing.
        for (auto& [size, block] : free_) std::free(block);
        free_.clear();
        stats_.cached_bytes = 0;
        if (stats_.active_bytes + cls > limit_)
          throw OutOfMemory("allocate: " + std::to_string(bytes) + " bytes would exceed the CPU memory limit of " +
                            std::to_string(limit_) + " bytes (" + std::to_string(stats_.active_bytes) +
                            " active)");
      }
    }
    stats_.active_bytes += cls;
    if (stats_.active_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.active_bytes;
  }
  if (!p) {
    p = std::aligned_alloc(kAlign, cls);
    if (!p) {
      std::lock_guard lock(mutex_);
      stats_.active_bytes -= cls;
      throw OutOfMemory("allocate: the system refused " + std::to_string(cls) + " bytes");
    }
  }
  return std::make_shared<Buffer>(p, cls, Device::cpu(), this);
}

void CpuAllocator::release(void* ptr, size_t bytes) {
  std::lock_guard lock(mutex_);
  stats_.active_bytes -= bytes;
  if (bytes > kMaxCachedClass || (limit_ != 0 && stats_.active_bytes + stats_.cached_bytes + bytes > limit_)) {
    std::free(ptr);
    return;
  }
  free_.emplace(bytes, ptr);
  stats_.cached_bytes += bytes;
}

MemoryStats CpuAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CpuAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_bytes = stats_.active_bytes;
}

void CpuAllocator::clear_cache() {
  std::lock_guard lock(mutex_);
  for (auto& [size, block] : free_) std::free(block);
  free_.clear();
  stats_.cached_bytes = 0;
}

void CpuAllocator::set_limit(size_t bytes) {
  std::lock_guard lock(mutex_);
  limit_ = bytes;
}

CpuAllocator::~CpuAllocator() { clear_cache(); }

CpuAllocator& cpu_allocator() {
  // Never destroyed: buffers held by static arrays may be released during exit.
  static CpuAllocator* a = new CpuAllocator();
  return *a;
}

Allocator& allocator_for(Device device) {
  if (device.type == Device::Type::Cpu) return cpu_allocator();
#if SMELT_HAS_CUDA
  return cuda::allocator(device);
#endif
  throw UnsupportedError("allocate: device " + device.str() + " is not available in this build");
}

}  // namespace smelt
