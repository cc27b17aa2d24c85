// Bit-for-bit comparison of two ONNX values (eager against compiled), shared by `smelt run` and `smelt check`.
#pragma once

#ifdef SMELT_ONNX
#include <string>

#include "smelt/onnx.h"

namespace smelt::cli {

/// The first difference between an eager and a compiled value, bit for bit (NaNs compare by
/// their bits; device values are read to the host), or "" when they are equal.
std::string first_difference(const onnx::Value& eager, const onnx::Value& compiled);

}  // namespace smelt::cli
#endif  // SMELT_ONNX
