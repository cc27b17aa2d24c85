// The caching CUDA allocator: size-classed free lists over cuMemAlloc, statistics and a limit.
#include "src/backend/cuda/allocator.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "smelt/errors.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/runtime.h"

namespace smelt::cuda {

namespace {
constexpr size_t kMinBlock = 512;
constexpr size_t kMaxRequest = size_t{1} << 50;
}  // namespace

size_t parse_memory_limit(const char* text) {
  if (!text || !*text) return 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text) return 0;
  switch (*end) {
    case 'k': case 'K': v <<= 10; break;
    case 'm': case 'M': v <<= 20; break;
    case 'g': case 'G': v <<= 30; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

CudaAllocator::CudaAllocator(int device) : device_(device) {
  limit_ = parse_memory_limit(std::getenv("SMELT_CUDA_MEMORY_LIMIT"));
}

size_t CudaAllocator::size_class(size_t bytes) {
  return bytes <= kMinBlock ? kMinBlock : CpuAllocator::size_class(bytes);
}

void CudaAllocator::free_cached_locked() {
  if (free_.empty()) return;
  DeviceState& s = device_state(device_);
  const DriverApi& d = *driver();
  // Kernels still queued may use a cached block's last owner's data: wait for them first.
  check(d.cuStreamSynchronize(s.stream), "cuStreamSynchronize", "cuda free");
  for (auto& [size, p] : free_) d.cuMemFree(static_cast<CUdeviceptr>(p));
  free_.clear();
  stats_.cached_bytes = 0;
}

BufferPtr CudaAllocator::allocate(size_t bytes) {
  const Device dev = Device::cuda(device_);
  if (bytes > kMaxRequest)
    throw OutOfMemory("allocate: " + std::to_string(bytes) + " bytes is more than " + dev.str() + " can hold");
  const size_t cls = size_class(bytes);
  std::lock_guard lock(mutex_);
  stats_.num_allocs++;
  if (auto it = free_.find(cls); it != free_.end()) {
    const uint64_t p = it->second;
    free_.erase(it);
    stats_.cached_bytes -= cls;
    stats_.num_cache_hits++;
    stats_.active_bytes += cls;
    if (stats_.active_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.active_bytes;
    return std::make_shared<Buffer>(reinterpret_cast<void*>(p), cls, dev, this);
  }
  if (limit_ != 0 && stats_.active_bytes + stats_.cached_bytes + cls > limit_) {
    free_cached_locked();
    if (stats_.active_bytes + cls > limit_)
      throw OutOfMemory("allocate: " + std::to_string(bytes) + " bytes would exceed the " + dev.str() +
                        " memory limit of " + std::to_string(limit_) + " bytes (" +
                        std::to_string(stats_.active_bytes) + " active)");
  }
  DeviceState& s = device_state(device_);
  const DriverApi& d = *driver();
  CUdeviceptr p = 0;
  CUresult r = d.cuMemAlloc(&p, cls);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {  // give the cache back and try once more
    free_cached_locked();
    r = d.cuMemAlloc(&p, cls);
  }
  (void)s;
  if (r == CUDA_ERROR_OUT_OF_MEMORY)
    throw OutOfMemory("allocate: " + dev.str() + " is out of memory for " + std::to_string(bytes) + " bytes (" +
                      std::to_string(stats_.active_bytes) + " active in smelt)");
  check(r, "cuMemAlloc", "allocate");
  stats_.active_bytes += cls;
  if (stats_.active_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.active_bytes;
  return std::make_shared<Buffer>(reinterpret_cast<void*>(static_cast<uint64_t>(p)), cls, dev, this);
}

void CudaAllocator::release(void* ptr, size_t bytes) {
  std::lock_guard lock(mutex_);
  stats_.active_bytes -= bytes;
  const uint64_t p = reinterpret_cast<uint64_t>(ptr);
  if (limit_ != 0 && stats_.active_bytes + stats_.cached_bytes + bytes > limit_) {
    // Over the limit: free it for real (after the queued work that may still read it).
    if (const DriverApi* d = driver()) {
      DeviceState& s = device_state(device_);
      d->cuStreamSynchronize(s.stream);
      d->cuMemFree(static_cast<CUdeviceptr>(p));
    }
    return;
  }
  free_.emplace(bytes, p);
  stats_.cached_bytes += bytes;
}

MemoryStats CudaAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CudaAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_bytes = stats_.active_bytes;
}

void CudaAllocator::clear_cache() {
  std::lock_guard lock(mutex_);
  free_cached_locked();
}

void CudaAllocator::set_limit(size_t bytes) {
  std::lock_guard lock(mutex_);
  limit_ = bytes;
}

Allocator& allocator(Device device) {
  static std::mutex m;
  static auto* allocators = new std::vector<std::unique_ptr<CudaAllocator>>();  // never destroyed
  device_state(device.index);  // throws DeviceError for a GPU that does not exist
  std::lock_guard lock(m);
  if (allocators->size() <= static_cast<size_t>(device.index)) allocators->resize(static_cast<size_t>(device.index) + 1);
  auto& a = (*allocators)[static_cast<size_t>(device.index)];
  if (!a) a = std::make_unique<CudaAllocator>(device.index);
  return *a;
}

}  // namespace smelt::cuda
