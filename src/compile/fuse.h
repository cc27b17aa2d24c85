// The fuse pass: element-wise chains become single generated kernels.
#pragma once

#include <string>
#include <vector>

#include "src/compile/tape.h"

namespace smelt::codegen {
struct FusedProgram;
}

namespace smelt::compiler {

/// Limits that keep generated kernels small enough to build quickly.
inline constexpr int kMaxFusedInstructions = 160;
inline constexpr int kMaxFusedArguments = 24;

/// Groups chains of Unary/Binary/Select/Cast steps (with the broadcasts and scalar constants that
/// feed them) into Fused steps. A value joins a group only when every consumer is in the group;
/// a group value that is also a function output becomes an extra kernel output. Groups with a
/// single operation stay as they are. A kernel's steps all run on one device and read only
/// values of that device: a step on another device (or reading one) is never in it. When a
/// kernel cannot be built (no working compiler), the group stays unfused and a
/// `compile.fallback` event says why.
/// `function` names the compiled function in the events.
/// With `unbuilt`, nothing is compiled or read from disk (tiered execution): a group whose CPU
/// kernel this process has not loaded stays unfused and its program is appended to `*unbuilt`,
/// for the background builder; the pass run again once they are loaded fuses them all.
void fuse_elementwise(Tape& tape, const std::string& function = "",
                      std::vector<codegen::FusedProgram>* unbuilt = nullptr);

}  // namespace smelt::compiler
