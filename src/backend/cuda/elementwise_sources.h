// CUDA source of the element-wise kernels' rows layout (pure: no GPU), compiled for sm_90 by
// tests/backend/cuda/reduce_source_test.cpp on machines without a GPU.
#pragma once

#include <string>
#include <vector>

namespace smelt::cuda {

/// The kernel `k(EwArgs)` computing y = expr(v0, v1, v2) over a collapsed two-axis layout: a
/// block of 256 threads takes 1024 elements of one row (4 a thread, loads before stores).
/// `types` are the inputs' device types.
std::string elementwise_rows_source(const std::vector<std::string>& types, const std::string& out_type,
                                    const std::string& expr);

}  // namespace smelt::cuda
