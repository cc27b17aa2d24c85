// The CUDA backend's entry points for the core (eval, allocators, devices); built with SMELT_HAS_CUDA.
#pragma once

#include <cstdint>

#include "smelt/array.h"

namespace smelt {
class Backend;
class Allocator;
}  // namespace smelt

namespace smelt::cuda {

/// Number of visible GPUs; 0 when the driver (libcuda.so.1) cannot be loaded or has none.
int device_count();
/// The backend that evaluates nodes of `device` (a GPU that exists).
Backend& backend(Device device);
/// The caching allocator of `device`.
Allocator& allocator(Device device);
/// Waits for every stream of the device.
void synchronize(Device device);
/// A new stream of GPU `device`; returns its id (1, 2, ...). From the first one on, the device
/// orders work across streams (see finish_node in runtime.h).
uint64_t create_stream(int device);
/// Waits for stream `id` of GPU `device` (0: the default stream).
void synchronize_stream(int device, uint64_t id);
/// Evaluates a Copy node whose input lives on another device: host<->device transfers.
void transfer(const Array& in, Array& out);

}  // namespace smelt::cuda
