// Shapeless compile: checks that a tape can follow new input shapes of the traced ranks, and
// replays it with every value's shape recomputed from the real inputs.
#pragma once

#include <string>
#include <vector>

#include "src/compile/tape.h"

namespace smelt::compiler {

/// One output axis of a reshape under new shapes: the product of input axes [first, last], or a
/// new axis of size 1 when first < 0.
struct ReshapeAxis {
  int first = -1;
  int last = -1;
  bool operator==(const ReshapeAxis&) const = default;
};

/// How a shapeless replay computes one step.
struct ShapelessStep {
  enum class Rule : uint8_t {
    Infer,        // the primitive's shape rule over its operands' new shapes
    Elementwise,  // operands broadcast to their joint shape (Binary, Select, Fused)
    Matmul,       // batch axes broadcast, then the shape rule
    Scatter,      // updates broadcast to the shape the new array and indices need
    Reshape,      // the axis map below
    Skip,         // a broadcast an element-wise consumer makes itself: nothing to build
    Fixed,        // the traced shapes: no input of the step changes shape
  };
  Rule rule = Rule::Infer;
  /// Values read at replay: the step's inputs, with an implicit broadcast replaced by its source.
  std::vector<int> operands;
  std::vector<ReshapeAxis> axes;    // Reshape: one per output axis
  std::vector<int> must_be_one;     // Reshape: removed input axes that had size 1 in the trace
};

/// A tape's shapeless plan: one entry per step, in tape order.
struct ShapelessPlan {
  std::vector<ShapelessStep> steps;
};

/// Prepares a freshly traced tape for shapeless replay, before the passes:
///  - captured constants that are broadcast views (a captured bias that an element-wise op
///    broadcast to the traced shape) become their compact view plus a Broadcast step, so that the
///    broadcast can follow new shapes like one of a traced value;
///  - checks the tape with plan_shapeless, so that errors name the ops as traced;
///  - a broadcast to a fixed shape that must be built (its input never changes shape) is read
///    through a Copy, so that a fused kernel, whose shape is the joint shape of its inputs, keeps
///    the broadcast's shape.
void prepare_shapeless(Tape& tape, const std::string& function);

/// Plans the shapeless replay of `tape` and checks that the plan reproduces every traced shape.
/// Throws ShapeError naming the primitive and the op (`reshape ... (Reshape)`) for steps whose
/// parameters fix a shape that would depend on the inputs' shapes; `function` names the compiled
/// function in messages.
ShapelessPlan plan_shapeless(const Tape& tape, const std::string& function);

/// Builds the lazy graph of `tape` over `inputs` (same dtypes and ranks as traced, any sizes),
/// every shape recomputed by `plan`. Throws ShapeError when the new shapes do not fit (operands
/// that no longer broadcast, a matmul's inner dimensions, ...).
std::vector<Array> replay_shapeless(const Tape& tape, const ShapelessPlan& plan, const std::vector<Array>& inputs,
                                    const std::string& function);

}  // namespace smelt::compiler
