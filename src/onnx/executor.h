// The eager runner's executor, shared with compiled models: scopes, node order, running one node.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "smelt/onnx.h"
#include "src/onnx/run_guard.h"

namespace smelt::onnx::detail {

/// Values visible to a graph: its own, then those of the enclosing graphs.
struct Scope {
  const Scope* parent = nullptr;
  /// How many subgraphs and function calls enclose this scope (0: the top-level graph); the run's
  /// max_call_depth bounds it. Carried by the scopes, so it follows each chain of calls.
  int depth = 0;
  std::unordered_map<std::string, Value> values;

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent) {
      auto it = s->values.find(name);
      if (it != s->values.end()) return &it->second;
    }
    return nullptr;
  }
};

using Opsets = std::unordered_map<std::string, int64_t>;

Opsets opsets_of(const std::vector<OpsetImport>& list, const Opsets* fallback = nullptr);

/// Every value name that nodes inside the subgraphs of `n` read (an over-approximation of what
/// they read from outside, which is all a dependency needs).
void subgraph_reads(const Node& n, std::vector<std::string>& out);
/// The names node `n` reads, its inputs and what its subgraphs read, sorted and unique.
std::vector<std::string> node_reads(const Node& n);

/// The order the runner executes `nodes` in: Kahn's algorithm preferring file order. A cycle
/// raises OnnxError naming a node on it.
std::vector<size_t> topological_order(const std::vector<Node>& nodes);

class Executor {
 public:
  /// `guard` (the run's bounds) may be null: nothing is checked then.
  explicit Executor(const Model& model, const RunGuard* guard = nullptr)
      : model_(model), model_opsets_(opsets_of(model.opsets)), guard_(guard) {}

  /// Runs `nodes` in `scope`; values not in `keep` are dropped after their last use.
  void run_nodes(const std::vector<Node>& nodes, Scope& scope, const Opsets& opsets,
                 const std::unordered_set<std::string>& keep) const;
  /// Runs a subgraph (If/Loop/Scan body) with its inputs bound positionally.
  std::vector<Value> run_graph(const Graph& g, const std::vector<Value>& inputs, const Scope* parent,
                               const Opsets& opsets) const;
  /// Runs one node on its input values (subgraphs see `scope`). `graph` is the list of nodes `node`
  /// belongs to (for Gradient); null: the top-level graph's when `node` is one of its nodes.
  std::vector<Value> run_node(const Node& node, const std::vector<Value>& inputs, const Scope& scope,
                              const Opsets& opsets, const std::vector<Node>* graph = nullptr) const;
  /// The values of `n`'s inputs in `scope` (None for omitted ones); raises naming a missing one.
  static std::vector<Value> gather_inputs(const Node& n, const Scope& scope);
  /// Stores `outputs` under `n`'s output names; raises when a wanted output was not produced.
  static void bind_outputs(const Node& n, std::vector<Value> outputs, Scope& scope,
                           const std::unordered_set<std::string>& keep);
  const Opsets& model_opsets() const { return model_opsets_; }
  const RunGuard* guard() const { return guard_; }

 private:
  std::vector<Value> run_function(const Function& f, const Node& call, const std::vector<Value>& inputs,
                                  int depth) const;
  /// Raises OnnxError naming `n` when entering `what` at `depth` passes the run's max_call_depth.
  void check_depth(const Node& n, int depth, const std::string& what) const;
  const Function* function_for(const Node& n) const {
    for (const auto& f : model_.functions)
      if (f.domain == n.domain && f.name == n.op_type && f.overload == n.overload) return &f;
    return nullptr;
  }

  const Model& model_;
  Opsets model_opsets_;
  const RunGuard* guard_ = nullptr;
};

/// "Add 'add_3' (inputs tensor(float)[2,3], tensor(float)[4])" for error messages.
std::string node_context(const Node& node, const std::vector<Value>& inputs);
/// Inside a catch block: re-raises the current exception with `node` and its inputs in front of
/// the message, keeping smelt's exception type; std::bad_alloc becomes OutOfMemory,
/// std::length_error ShapeError and any other std::exception OnnxError, so nothing a model can
/// cause reaches a user as an untyped error.
[[noreturn]] void rethrow_in_node(const Node& node, const std::vector<Value>& inputs);
/// Inside a catch block: the same with any `context` ("compiled segment Add 'a' .. Relu 'r'");
/// a message that starts with `label` has it dropped, as the context says it.
[[noreturn]] void rethrow_with_context(const std::string& context, const std::string& label);

/// Checks a given graph input against its declaration: kind, element type and rank.
void check_input(const ValueInfo& info, const Value& v);
/// Appends the arrays inside `v` (tensors, sequence items, optional contents, map values).
void collect_arrays(const Value& v, std::vector<Array>& out);

}  // namespace smelt::onnx::detail
