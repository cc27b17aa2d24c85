// The tape: a traced function as a list of steps over numbered values, and its replay.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "smelt/array.h"
#include "src/primitives/primitive.h"

namespace smelt::detail {
struct Node;
}

namespace smelt::compiler {

/// The static type of a value on the tape.
struct ValueInfo {
  Shape shape;
  Dtype dtype;
};

/// One primitive application: outputs = prim(inputs), by value id.
struct Step {
  Primitive prim;
  std::vector<int> inputs;
  std::vector<int> outputs;
};

/// Values [0, num_inputs) are the function's inputs; constants are captured arrays, frozen at
/// trace time; every other value is defined by exactly one step, before any use.
struct Tape {
  std::vector<ValueInfo> values;
  int num_inputs = 0;
  std::vector<std::pair<int, Array>> constants;
  std::vector<Step> steps;
  std::vector<int> outputs;
  Device device;

  int add_value(Shape shape, Dtype dtype) {
    values.push_back({std::move(shape), dtype});
    return static_cast<int>(values.size()) - 1;
  }
};

/// Records the graph between `placeholders` and `outputs` (a worklist walk; graphs can be deep).
/// Arrays that do not depend on a placeholder become constants and are evaluated now.
/// `step_nodes`, when given, receives per step the graph node it was recorded from (callers that
/// know where nodes came from map steps back to their source: ONNX nodes for compiled models).
Tape build_tape(const std::vector<Array>& placeholders, const std::vector<Array>& outputs, Device device,
                std::vector<const detail::Node*>* step_nodes = nullptr);

/// Checks the tape's invariants (each value defined once, before use; arities; shapes of
/// element-wise steps); throws an internal error naming the pass that broke them.
void verify_tape(const Tape& tape, const std::string& after_pass);

/// A readable listing: one line per step, `%5 = Unary(Exp)(%2) : float32[8,512]`.
std::string dump_tape(const Tape& tape);

/// Builds the lazy graph of the tape over real inputs (same dtypes; shapes as traced).
std::vector<Array> replay_tape(const Tape& tape, const std::vector<Array>& inputs);

}  // namespace smelt::compiler
