// The keys ONNX random operators draw from: the run's key (RunOptions::key) or the thread's sequence.
#pragma once

#include <string>

#include "smelt/array.h"

namespace smelt::onnx {
class OpContext;
}

namespace smelt::onnx::detail {

/// Raises InvalidArgument "`what` must be a uint32[2] key (random::key), got ..." unless it is one.
void check_key(const Array& key, const std::string& what);
/// Splits `state` in two: `state` becomes one half (the sequence advances) and the other is
/// returned. The new state is evaluated unless it is being traced, so a long sequence of draws
/// never builds a long lazy chain.
Array split_key(Array& state);
/// The key for the next draw of `c`'s node: key(seed) when the node has a `seed` attribute (the
/// same values on every run), else split from the run's key, else from this thread's sequence
/// (started from key(0) at the thread's first unseeded draw).
Array draw_key(const OpContext& c);

}  // namespace smelt::onnx::detail
