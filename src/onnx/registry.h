// The ONNX operator registry, keyed by (domain, op type, since-version), and the context an op runs in.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "smelt/errors.h"
#include "smelt/onnx.h"
#include "smelt/ops.h"
#include "src/onnx/run_guard.h"

namespace smelt::onnx {

/// What an operator sees: its node (attributes already resolved inside functions), the opset
/// version of its domain, its input values (None for omitted ones), and a way to run subgraphs.
class OpContext {
 public:
  using GraphRunner = std::function<std::vector<Value>(const Graph&, const std::vector<Value>&)>;

  OpContext(const Node& node, int64_t opset, const std::vector<Value>& inputs, GraphRunner run_graph,
            const detail::RunGuard* guard = nullptr)
      : node_(node), opset_(opset), inputs_(inputs), run_graph_(std::move(run_graph)), guard_(guard) {}

  const Node& node() const { return node_; }
  int64_t opset() const { return opset_; }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return node_.outputs.size(); }
  /// Whether output i is wanted (present and named).
  bool wants_output(size_t i) const { return i < node_.outputs.size() && !node_.outputs[i].empty(); }
  /// Whether input i was given (present and not omitted).
  bool has(size_t i) const { return i < inputs_.size() && !inputs_[i].is_none(); }
  const Value& input(size_t i) const;
  const std::vector<Value>& inputs() const { return inputs_; }
  /// Input i as a tensor (raises naming the op when it is missing or not a tensor).
  const Array& tensor(size_t i) const;
  /// Input i as a tensor on the host: a device value is copied once and the copy kept with the
  /// value (Value::host_array), so every later host read of it is free.
  const Array& host_tensor(size_t i) const;
  /// Input i's ONNX element type (tensor inputs).
  ElemType elem_type(size_t i) const;
  /// Input i read on the host as int64 values (an integer tensor: shapes, axes, indices).
  std::vector<int64_t> ints(size_t i) const;
  /// Input i read on the host as one number (a scalar or one-element tensor).
  double scalar(size_t i) const;
  int64_t scalar_int(size_t i) const;

  bool has_attr(const char* name) const { return node_.attribute(name) != nullptr; }
  int64_t attr_int(const char* name, int64_t fallback) const;
  float attr_float(const char* name, float fallback) const;
  std::string attr_string(const char* name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const char* name, std::vector<int64_t> fallback = {}) const;
  std::vector<float> attr_floats(const char* name, std::vector<float> fallback = {}) const;
  std::vector<std::string> attr_strings(const char* name, std::vector<std::string> fallback = {}) const;
  const Value& attr_tensor(const char* name) const;
  const Graph& attr_graph(const char* name) const;
  /// Runs a subgraph with values for its inputs; it sees this node's scope.
  std::vector<Value> run_graph(const Graph& g, const std::vector<Value>& in) const { return run_graph_(g, in); }

  /// The run's bounds (null when run outside onnx::run / a compiled call).
  const detail::RunGuard* guard() const { return guard_; }
  /// The nodes of the graph (or function body) this node belongs to, or null when the runner does
  /// not know them. ai.onnx.preview.training Gradient differentiates the nodes before it.
  const std::vector<Node>* graph_nodes() const { return graph_nodes_; }
  void set_graph_nodes(const std::vector<Node>* nodes) { graph_nodes_ = nodes; }
  /// Raises Cancelled or DeadlineExceeded naming this node when the run must stop. Operators call
  /// it in each iteration of a loop that can run long (subgraph loops, host loops over elements).
  void check_stop(int64_t iteration = -1) const {
    if (guard_) guard_->check(node_, iteration);
  }
  /// Raises OutOfMemory naming this node when `bytes` more (a host buffer sized by the model's
  /// values, about to be filled) would pass the run's memory budget.
  void check_room(int64_t bytes, const std::string& what) const {
    if (guard_) guard_->check_room(bytes, node_, what);
  }
  /// Says that this node computes on the host on device inputs, for lack of a GPU kernel
  /// (RunStats::host_computed, telemetry event onnx.host_compute).
  void note_host_compute(const std::string& what) const {
    if (guard_) guard_->note_host_compute(node_, what);
  }

  /// Raises OnnxError "Op 'name': message".
  [[noreturn]] void fail(const std::string& message) const;
  /// Raises unless input i's element type is one of `allowed`.
  void require_types(size_t i, std::initializer_list<ElemType> allowed) const;
  /// Raises unless inputs i and j have the same element type (ONNX's shared type parameter).
  void require_same_type(size_t i, size_t j) const;

 private:
  const Attribute& attr_of(const char* name, Attribute::Type type) const;
  const Node& node_;
  int64_t opset_;
  const std::vector<Value>& inputs_;
  GraphRunner run_graph_;
  const detail::RunGuard* guard_;
  const std::vector<Node>* graph_nodes_ = nullptr;
};

using OpFn = std::vector<Value> (*)(OpContext&);

/// Operators by (domain, op type); each has one or more since-versions. A model with opset v
/// for a domain binds a node to the entry with the greatest since-version <= v.
class OpRegistry {
 public:
  /// The registry with every built-in operator.
  static const OpRegistry& global();

  void add(const std::string& domain, const std::string& op_type, int since_version, OpFn fn);
  /// The implementation for the model's opset `version`, or null.
  OpFn find(std::string_view domain, std::string_view op_type, int64_t version) const;
  /// The newest opset of `domain` this registry implements (its greatest since-version), or 0
  /// when it has no operator in that domain.
  int newest_opset(std::string_view domain) const;
  /// Every (domain, op type) with its since-versions, sorted (for listings).
  std::vector<std::pair<std::string, std::vector<int>>> entries() const;

 private:
  std::unordered_map<std::string, std::vector<std::pair<int, OpFn>>> ops_;
};

/// "" for the default domain (written "" or "ai.onnx").
inline std::string normalize_domain(const std::string& d) { return d == "ai.onnx" ? std::string() : d; }

// The family files register their operators through these.
void register_elementwise_ops(OpRegistry& r);
void register_shape_ops(OpRegistry& r);
void register_reduce_ops(OpRegistry& r);
void register_nn_ops(OpRegistry& r);
void register_cast_ops(OpRegistry& r);
void register_sequence_ops(OpRegistry& r);
void register_extra_ops(OpRegistry& r);
void register_more_ops(OpRegistry& r);
void register_rnn_ops(OpRegistry& r);
void register_image_ops(OpRegistry& r);
void register_string_ops(OpRegistry& r);
void register_resize_ops(OpRegistry& r);
void register_attention_ops(OpRegistry& r);
void register_control_ops(OpRegistry& r);
void register_ml_ops(OpRegistry& r);
void register_signal_ops(OpRegistry& r);
void register_training_ops(OpRegistry& r);

// Helpers shared by the op families.
/// A tensor value from an array (the element type is the dtype).
inline Value tv(Array a) { return Value::tensor(std::move(a)); }
/// A 1-d int64 array of `v`.
Array int64_array(const std::vector<int64_t>& v);
/// The ONNX type of a tensor for messages: "tensor(float)[2,3]".
std::string type_text(const Value& v);
/// ONNX Cast of a tensor or string tensor to `to` (failing through `ctx` when given).
Value cast_value(const Value& v, ElemType to, bool saturate, const OpContext* ctx = nullptr);

}  // namespace smelt::onnx
