// CUDA graphs for compiled replays: a tape's kernels captured once per stream, relaunched as one
// graph, with buffer addresses patched in the graph when inputs or held outputs move.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "src/compile/graph_replay.h"

namespace smelt::cuda {

/// Whether compiled entries use CUDA graphs: SMELT_CUDA_GRAPHS (0 off, 1 on; default on) read
/// once, then set_graphs_enabled (tests and benchmarks compare both in one process).
bool graphs_enabled();
void set_graphs_enabled(bool on);

/// Process-wide counts of what graphed entries did (the telemetry events say why).
struct GraphCounters {
  uint64_t captures = 0;          // graphs captured and instantiated
  uint64_t launches = 0;          // calls that ran as one graph launch (each capture's call included)
  uint64_t patched_launches = 0;  // of those, calls whose input or output buffers moved (patched)
  uint64_t failed_captures = 0;   // captures that failed or were refused: plain replays for good
  uint64_t plain_replays = 0;     // calls of a graph-eligible entry that ran the plain replay
};
GraphCounters graph_counters();

/// The graph replayer of a compiled tape that runs wholly on one CUDA device, or null (graphs
/// off, no driver support, values on several devices, fewer than two steps).
std::unique_ptr<compiler::GraphReplay> make_tape_graph(const compiler::Tape& tape, const std::string& name);

}  // namespace smelt::cuda
