// The reduction operators: one enum for the library, the CPU kernels and the CUDA kernels.
//
// Light on purpose (no includes but <cstdint> on the host): the kernel preambles of both devices
// embed this text, so a generated kernel names an operator by its enumerator
// (`smelt::ReduceOp::Sum`), never by a number.
#pragma once

#ifndef __CUDACC_RTC__
#include <cstdint>
#endif

namespace smelt {

// Mean: the sum divided by the number of reduced elements (less ReduceParams::ddof), so that the
// divisor follows the input's shape (a captured count would be stale under shapeless compile).
enum class ReduceOp : uint8_t { Sum, Prod, Max, Min, All, Any, Mean };

}  // namespace smelt
