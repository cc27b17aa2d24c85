// The tape: a traced function as a list of steps over numbered values, and its replay.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "smelt/array.h"
#include "src/primitives/primitive.h"

namespace smelt::detail {
struct Node;
}

namespace smelt::compiler {

/// The static type of a value on the tape, and where it lives: an input's device (part of the
/// compile key), a constant's array's device, or the device of the step that makes it.
struct ValueInfo {
  Shape shape;
  Dtype dtype;
  Device device;
};

/// One primitive application: outputs = prim(inputs), by value id, run on `device`: the device
/// the eager op chose while tracing (device.h, rule 3). A step may read values of another device
/// only where the eager primitive does (a Copy is a transfer; conv moves a host operand).
struct Step {
  Primitive prim;
  std::vector<int> inputs;
  std::vector<int> outputs;
  Device device;
};

/// Values [0, num_inputs) are the function's inputs; constants are captured arrays, frozen at
/// trace time; every other value is defined by exactly one step, before any use. `device` is
/// the default device the tape was traced under (dumps name the devices of values elsewhere).
struct Tape {
  std::vector<ValueInfo> values;
  int num_inputs = 0;
  std::vector<std::pair<int, Array>> constants;
  std::vector<Step> steps;
  std::vector<int> outputs;
  Device device;

  int add_value(Shape shape, Dtype dtype, Device value_device = Device::cpu()) {
    values.push_back({std::move(shape), dtype, value_device});
    return static_cast<int>(values.size()) - 1;
  }
};

/// Records the graph between `placeholders` and `outputs` (a worklist walk; graphs can be deep).
/// Arrays that do not depend on a placeholder become constants and are evaluated now. Every value
/// and step keeps the device of its node; `device` is the default device of the trace.
/// `step_nodes`, when given, receives per step the graph node it was recorded from (callers that
/// know where nodes came from map steps back to their source: ONNX nodes for compiled models).
Tape build_tape(const std::vector<Array>& placeholders, const std::vector<Array>& outputs, Device device,
                std::vector<const detail::Node*>* step_nodes = nullptr);

/// Checks the tape's invariants (each value defined once, before use; arities; a step's outputs
/// and a constant live on their step's or array's device; each step's output shapes and dtypes
/// are what its primitive's shape and dtype rules give for its inputs); throws an internal error
/// naming the pass that broke them, and for a type the step, its primitive and both types.
void verify_tape(const Tape& tape, const std::string& after_pass);

/// A readable listing: one line per step, `%5 = Unary(Exp)(%2) : float32[8,512]`, with
/// ` on cuda:0` after values and steps that are not on the tape's default device.
std::string dump_tape(const Tape& tape);

/// Checks that `inputs` fit the tape's inputs in number and devices (an internal error if not:
/// the compile key guarantees it).
void check_replay_inputs(const Tape& tape, const std::vector<Array>& inputs);

/// Builds the lazy graph of the tape over real inputs (same dtypes and devices; shapes as
/// traced), each step on its own device.
std::vector<Array> replay_tape(const Tape& tape, const std::vector<Array>& inputs);

/// True when run_tape can run the tape on these inputs: every step on the CPU and no input a
/// tracer (a compiled model called inside a trace replays into the trace instead).
bool can_run_tape(const Tape& tape, const std::vector<Array>& inputs);

/// Runs the tape's steps one after another straight into buffers and returns its outputs,
/// evaluated: replay_tape and eval without the lazy graph between them (a node per step with a
/// copy of its primitive, eval's walk and claims). A value is released after its last reader,
/// which may take its buffer (donation), as eval's graph would. Inputs are evaluated first.
std::vector<Array> run_tape(const Tape& tape, const std::vector<Array>& inputs);

/// replay_tape, returning every value by id (inputs and constants included; steps' outputs lazy):
/// a graph capture keeps them all until the graph has launched.
std::vector<Array> replay_tape_values(const Tape& tape, const std::vector<Array>& inputs);

/// A tape cut in two for a device graph: a host prologue (the steps that run on the host, over
/// host inputs and host constants only, and the copies of their results to the device) and the
/// device part, a tape of its own whose inputs are the original inputs that live on the device,
/// then the uploads. A batch built from host data (device.h, rule 2) and reshaped or copied by
/// the traced function is such a prologue.
struct HostSplit {
  Tape device;                     // inputs: kept_inputs, then uploads, in order
  std::vector<int> kept_inputs;    // the original input index of each of the device's first inputs
  std::vector<size_t> host_steps;  // original step indices: host steps and upload copies, in order
  std::vector<int> uploads;        // original value ids of the uploads (the copies' results)
};

/// Splits `tape`, whose steps outside a host prologue all run on `device`, or returns nullopt and
/// says why in `why`: a step on another device, a device step that reads a host value other than
/// a constant without copying it, a host step that reads a device value, or a host value
/// returned. A tape without host steps splits into itself (no uploads).
std::optional<HostSplit> split_host_prologue(const Tape& tape, Device device, std::string& why);

/// The device tape's inputs for one call: runs the host steps on `inputs` (the original tape's)
/// and queues the uploads (lazy arrays on the device).
std::vector<Array> host_prologue_inputs(const Tape& tape, const HostSplit& split, const std::vector<Array>& inputs);

}  // namespace smelt::compiler
