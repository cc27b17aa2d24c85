// The calling thread's current stream per device, for the backends' launch sites.
#pragma once

#include <cstdint>

#include "smelt/device.h"

namespace smelt::detail {

/// The id of this thread's current stream of `device` (0: the device's default stream).
uint64_t current_stream_id(Device device);

}  // namespace smelt::detail
