// Declarations that generated CPU kernels need from headers too heavy to embed (only embedded in
// the kernel preamble, never included by the library, which has them from primitive.h).
#pragma once

#include <cstdint>

namespace smelt {

// The names of src/primitives/primitive.h's ReduceOp: kernels name the operator of a row
// reduction (reduce_order.h); no value crosses between the library and a kernel.
enum class ReduceOp : uint8_t { Sum, Prod, Max, Min, All, Any, Mean };

}  // namespace smelt
