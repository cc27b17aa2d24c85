// The device exclusive int64 prefix sum: one block scan per 1024 items, the block sums scanned the
// same way (one level per factor of 1024), then added back. No host wait, no atomics.
#include "src/backend/cuda/scan_util.h"

#include "src/backend/cuda/allocator.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/kernels.h"
#include "src/core/buffer.h"

namespace smelt::cuda {

namespace {

/// Mirrors the device struct ScanArgs.
struct ScanArgs {
  uint64_t in = 0, out = 0, sums = 0;
  int64_t n = 0;
};
/// Mirrors the device struct ScanAddArgs.
struct ScanAddArgs {
  uint64_t out = 0, sums = 0;
  int64_t n = 0;
};

constexpr unsigned kScanThreads = 256;

}  // namespace

std::string scan_device_source() {
  // Warp scans by shuffles, then warp 0 scans the per-warp sums. The trailing barrier lets a
  // kernel call it again (the shared sums are reused).
  return R"CUDA(
__device__ inline i64 block_exclusive_scan(i64 v, i64* block_total) {
  __shared__ i64 warp_sums[32];
  const unsigned lane = threadIdx.x & 31u, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  i64 inc = v;
  for (unsigned d = 1; d < 32; d <<= 1) {
    const i64 o = __shfl_up_sync(0xffffffffu, inc, d);
    if (lane >= d) inc += o;
  }
  if (lane == 31) warp_sums[w] = inc;
  __syncthreads();
  if (w == 0) {
    i64 s = lane < nw ? warp_sums[lane] : 0;
    for (unsigned d = 1; d < 32; d <<= 1) {
      const i64 o = __shfl_up_sync(0xffffffffu, s, d);
      if (lane >= d) s += o;
    }
    if (lane < nw) warp_sums[lane] = s;
  }
  __syncthreads();
  const i64 excl = inc - v + (w > 0 ? warp_sums[w - 1] : 0);
  *block_total = warp_sums[nw - 1];
  __syncthreads();
  return excl;
}
)CUDA";
}

std::string scan_block_kernel_source() {
  return scan_device_source() + R"CUDA(
struct ScanArgs { u64 in, out, sums; i64 n; };
extern "C" __global__ void k(ScanArgs a) {
  const i64 b = bid();
  const i64 base = b * 1024 + (i64)threadIdx.x * 4;
  const i64* x = (const i64*)a.in;
  i64 v[4];
  i64 t = 0;
  #pragma unroll
  for (int j = 0; j < 4; ++j) {
    const i64 i = base + j;
    v[j] = i < a.n ? x[i] : 0;
    t += v[j];
  }
  // Every read of the block happens before the barriers inside: `out` may be `in`.
  i64 total;
  i64 e = block_exclusive_scan(t, &total);
  i64* y = (i64*)a.out;
  #pragma unroll
  for (int j = 0; j < 4; ++j) {
    const i64 i = base + j;
    if (i < a.n) y[i] = e;
    e += v[j];
  }
  if (threadIdx.x == 0 && a.sums != 0) ((i64*)a.sums)[b] = total;
}
)CUDA";
}

std::string scan_add_kernel_source() {
  return R"CUDA(
struct ScanAddArgs { u64 out, sums; i64 n; };
extern "C" __global__ void k(ScanAddArgs a) {
  const i64 i = gid();
  if (i >= a.n || i < 1024) return;
  ((i64*)a.out)[i] += ((const i64*)a.sums)[i / 1024];
}
)CUDA";
}

void exclusive_scan_i64(DeviceState& s, uint64_t in, uint64_t out, int64_t n, uint64_t total, const std::string& what) {
  static_assert(kScanBlockItems == 1024 && kScanThreads * 4 == kScanBlockItems, "the kernels assume 256 x 4 items");
  const DriverApi& d = *driver();
  if (n <= 0) {
    if (total != 0)
      check(d.cuMemsetD32Async(static_cast<CUdeviceptr>(total), 0u, 2, current_stream(s)), "cuMemsetD32Async", what);
    return;
  }
  const int64_t blocks = (n + kScanBlockItems - 1) / kScanBlockItems;
  BufferPtr sums;  // freed in stream order: the kernels queued below still see it
  uint64_t sums_ptr = total;  // a single block's sum is the total
  if (blocks > 1) {
    sums = allocator(Device::cuda(s.index)).allocate(static_cast<size_t>(blocks) * sizeof(int64_t));
    sums_ptr = reinterpret_cast<uint64_t>(sums->ptr);
  }
  ScanArgs args{in, out, sums_ptr, n};
  const Kernel fn = get_kernel(s.index, "scan_i64|block", [] { return scan_block_kernel_source(); }, what);
  launch(s, fn, static_cast<uint64_t>(blocks), kScanThreads, &args, what);
  if (blocks == 1) return;
  // One more level per factor of 1024: at most five for any size that fits in memory.
  exclusive_scan_i64(s, sums_ptr, sums_ptr, blocks, total, what);
  ScanAddArgs add{out, sums_ptr, n};
  const Kernel fa = get_kernel(s.index, "scan_i64|add", [] { return scan_add_kernel_source(); }, what);
  launch(s, fa, blocks_for(n, kScanThreads), kScanThreads, &add, what);
}

}  // namespace smelt::cuda
