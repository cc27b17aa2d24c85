// What the transforms share: fresh primal nodes, the worklist order of the nodes that depend on
// them, stop_gradient and checkpoint marks, and the flat cores of vmap and checkpoint.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <unordered_set>
#include <vector>

#include "smelt/transforms.h"
#include "src/core/node.h"

namespace smelt::transforms {

/// One call of a checkpointed function: what the backward pass needs to run it again.
struct CheckpointCall {
  ArrayFn f;
  std::vector<Array> inputs;  // held: the backward pass recomputes from them
  size_t outputs = 0;
};

/// The mark on an output of a checkpointed call (its node is an identity view of f's output).
struct CheckpointMark {
  std::shared_ptr<const CheckpointCall> call;
  size_t index = 0;
};

/// A fresh node standing for a primal: an identity reshape (a metadata-only view, which compile's
/// simplify pass removes), so a walk can tell where the function's inputs enter its graph.
Array primal_node(const Array& a);

/// Runs `f` with the thread marked as inside a transform (compiled functions then run their
/// function directly) and checks its outputs are valid handles.
std::vector<Array> run_fn(const ArrayFn& f, const std::vector<Array>& primals, const char* op);

/// Throws InvalidArgument when a handle is empty: "<op>: <what> <i> is an empty array handle".
void check_arrays(const std::vector<Array>& arrays, const char* op, const char* what);

bool is_stop_gradient(const detail::Node& n);
/// The checkpoint mark of a node, or nullopt.
std::optional<CheckpointMark> checkpoint_mark(const detail::Node& n);

/// The nodes that depend on a primal, inputs before the nodes that use them. A depth-first walk
/// with an explicit stack (graphs can be thousands of nodes deep). It does not go above a primal or
/// an evaluated node (whose graph above has been released), nor above a stop_gradient node unless
/// `through_stop_gradient` (vmap must batch what flows through one). A checkpoint mark's inputs
/// are its call's inputs: every transform handles the call as one step.
std::vector<Array> dependent_order(const std::vector<Array>& outputs,
                                   const std::unordered_set<const detail::Node*>& primals,
                                   bool through_stop_gradient = false);

}  // namespace smelt::transforms
