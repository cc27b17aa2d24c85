// A device exclusive prefix sum over int64 (block scans, scanned block sums, added back), for reuse.
#pragma once

#include <cstdint>
#include <string>

#include "src/backend/cuda/runtime.h"

namespace smelt::cuda {

/// Items one block of the scan kernel covers (256 threads, 4 consecutive items each).
inline constexpr int64_t kScanBlockItems = 1024;

/// Device source of `block_exclusive_scan(v, &total)`: the exclusive prefix sum of one int64 per
/// thread over the block (blockDim.x a multiple of 32, at most 1024; every thread must call it),
/// the block's sum in `total`. Paste it after the preamble in kernels that rank items in a block.
std::string scan_device_source();

/// The block-scan kernel: each block scans kScanBlockItems items of `in` into `out` (which may be
/// `in`: a block reads all its items before writing) and stores its sum in `sums[block]`.
std::string scan_block_kernel_source();
/// The add-back kernel: out[i] += sums[i / kScanBlockItems].
std::string scan_add_kernel_source();

/// out[i] = in[0] + ... + in[i-1] for i < n (int64, device addresses on `s`'s GPU, queued on its
/// stream; `out` may equal `in`). When `total` is not 0 the sum of all n values is stored there
/// (one int64). n = 0 only stores the total 0. Integer sums: deterministic, no host wait.
void exclusive_scan_i64(DeviceState& s, uint64_t in, uint64_t out, int64_t n, uint64_t total, const std::string& what);

}  // namespace smelt::cuda
