// The caching CPU allocator: size classes over aligned_alloc, and the allocator of each device.
#include "src/core/allocator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "smelt/errors.h"
#include "src/core/byte_size.h"

#if SMELT_HAS_CUDA
#include "src/backend/cuda/cuda.h"
#endif

namespace smelt {

namespace {
constexpr size_t kAlign = 64;
// Past this no system can serve a request, and rounding up to a class would overflow.
constexpr size_t kMaxRequest = size_t{1} << 56;
constexpr size_t kDefaultCacheCap = size_t{1} << 30;
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

size_t CpuAllocator::default_cache_limit() {
  // A quarter of physical memory on small machines: the cache must not be what exhausts them.
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return kDefaultCacheCap;
  return std::min(kDefaultCacheCap, static_cast<size_t>(pages) / 4 * static_cast<size_t>(page));
}

CpuAllocator::CpuAllocator()
    : CachingAllocator(Device::cpu(), "CPU", byte_size_from_env("SMELT_CPU_CACHE_LIMIT", default_cache_limit()), 0) {}

CpuAllocator::~CpuAllocator() { clear_cache(); }

size_t CpuAllocator::max_request() const { return kMaxRequest; }

void* CpuAllocator::system_alloc(size_t bytes) { return std::aligned_alloc(kAlign, bytes); }

void CpuAllocator::system_free(const std::vector<Block>& blocks) {
  for (const Block& b : blocks) std::free(b.ptr);
}

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
