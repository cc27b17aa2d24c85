// Counting the copies between the host and GPUs per thread (smelt::thread_transfer_counts).
#pragma once

#include <cstddef>

namespace smelt::detail {

/// Called by the GPU backend for each copy it makes: array transfers (to_device either way) and
/// the values its kernels read back to the host (a NonZero count, an index bound check).
void count_device_to_host(size_t bytes);
void count_host_to_device(size_t bytes);

}  // namespace smelt::detail
