// Chooses the device graph replayer of a compiled entry (CUDA graphs when built with CUDA).
#include "src/compile/graph_replay.h"

#if SMELT_HAS_CUDA
#include "src/backend/cuda/graph.h"
#endif

namespace smelt::compiler {

std::unique_ptr<GraphReplay> make_graph_replay([[maybe_unused]] const Tape& tape, [[maybe_unused]] const std::string& name) {
#if SMELT_HAS_CUDA
  return cuda::make_tape_graph(tape, name);
#else
  return nullptr;
#endif
}

}  // namespace smelt::compiler
