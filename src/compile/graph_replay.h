// The hook through which a compiled entry replays as one device graph (CUDA graphs), kept
// device-independent so that the engine builds the same way with and without CUDA.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "smelt/array.h"
#include "src/compile/tape.h"

namespace smelt::compiler {

/// Replays one compiled entry's tape as a device graph. An entry owns one; calls may come from
/// several threads (implementations lock).
class GraphReplay {
 public:
  virtual ~GraphReplay() = default;
  /// The outputs of `tape` on `inputs`, already queued on the caller's current stream; nullopt
  /// when this call must run the plain replay (before the graph is captured, after a capture
  /// failed, or when the inputs cannot be bound to the graph).
  virtual std::optional<std::vector<Array>> run(const Tape& tape, const std::vector<Array>& inputs) = 0;
};

/// A graph replayer for `tape`, or null where graphs do not apply: a tape that does not run
/// wholly on one CUDA device, a build without CUDA, or graphs switched off (SMELT_CUDA_GRAPHS=0).
std::unique_ptr<GraphReplay> make_graph_replay(const Tape& tape, const std::string& name);

}  // namespace smelt::compiler
