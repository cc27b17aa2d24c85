// The caching CUDA allocator: CachingAllocator's policy over cuMemAlloc and cuMemFree.
#include "src/backend/cuda/allocator.h"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "smelt/errors.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/runtime.h"
#include "src/core/byte_size.h"
#include "src/core/stream_state.h"

namespace smelt::cuda {

namespace {
constexpr size_t kMinBlock = 512;
constexpr size_t kMaxRequest = size_t{1} << 50;

// Half the device's memory: a cache that size serves the steady state of most workloads, and
// allocation flushes it anyway before giving up.
size_t default_cache_limit(int device) {
  device_state(device);  // the device's context is current
  size_t free_bytes = 0, total = 0;
  if (driver()->cuMemGetInfo(&free_bytes, &total) != CUDA_SUCCESS || total == 0) return size_t{4} << 30;
  return total / 2;
}
}  // namespace

size_t parse_memory_limit(const char* text) { return parse_byte_size(text).value_or(0); }

CudaAllocator::CudaAllocator(int device)
    : CachingAllocator(Device::cuda(device), Device::cuda(device).str(),
                       byte_size_from_env("SMELT_CUDA_CACHE_LIMIT", default_cache_limit(device)),
                       parse_memory_limit(std::getenv("SMELT_CUDA_MEMORY_LIMIT"))),
      device_(device) {}

CudaAllocator::~CudaAllocator() { clear_cache(); }

size_t CudaAllocator::size_class(size_t bytes) {
  return bytes <= kMinBlock ? kMinBlock : CpuAllocator::size_class(bytes);
}

size_t CudaAllocator::max_request() const { return kMaxRequest; }

void* CudaAllocator::system_alloc(size_t bytes) {
  device_state(device_);  // the device's context is current
  const DriverApi& d = *driver();
  CUdeviceptr p = 0;
  const CUresult r = d.cuMemAlloc(&p, bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return nullptr;
  check(r, "cuMemAlloc", "allocate");
  return reinterpret_cast<void*>(static_cast<uint64_t>(p));
}

void CudaAllocator::system_free(const std::vector<Block>& blocks) {
  const DriverApi* d = driver();
  if (!d) return;
  try {
    // Kernels still queued on any stream may use a block's last owner's data: wait for them
    // first, once.
    synchronize_all_streams(device_state(device_), "free");
  } catch (const Error&) {
    return;  // the device is gone: nothing can be freed (called from ~Buffer, so no throw)
  }
  for (const Block& b : blocks) d->cuMemFree(static_cast<CUdeviceptr>(reinterpret_cast<uint64_t>(b.ptr)));
}

uint64_t CudaAllocator::stream_tag() const { return smelt::detail::current_stream_id(Device::cuda(device_)); }

Allocator& allocator(Device device) {
  // A stream capture on this thread keeps the blocks its work uses (graph.cpp).
  if (const ThreadCapture* c = thread_capture(); c && c->device == device.index) return *c->allocator;
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
