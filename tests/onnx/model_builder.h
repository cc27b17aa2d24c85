// A small builder of onnx::Model structures in C++ (no protobuf), for tests and benchmarks.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "smelt/onnx.h"
#include "smelt/ops.h"

namespace smelt::test {

inline onnx::Attribute attr_int(const std::string& name, int64_t v) {
  onnx::Attribute a;
  a.name = name;
  a.type = onnx::Attribute::Type::Int;
  a.i = v;
  return a;
}

inline onnx::Attribute attr_float(const std::string& name, float v) {
  onnx::Attribute a;
  a.name = name;
  a.type = onnx::Attribute::Type::Float;
  a.f = v;
  return a;
}

inline onnx::Attribute attr_ints(const std::string& name, std::vector<int64_t> v) {
  onnx::Attribute a;
  a.name = name;
  a.type = onnx::Attribute::Type::Ints;
  a.ints = std::move(v);
  return a;
}

inline onnx::Attribute attr_graph(const std::string& name, std::shared_ptr<const onnx::Graph> g) {
  onnx::Attribute a;
  a.name = name;
  a.type = onnx::Attribute::Type::Graph;
  a.g = std::move(g);
  return a;
}

/// Builds one graph: inputs, initializers and nodes named "<Op>_<k>" (k counts that op type),
/// whose outputs are "<node name>:<i>" unless given.
class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name = "g") : g_(std::make_shared<onnx::Graph>()) { g_->name = std::move(name); }

  /// A graph input of element type `t` and rank `rank` (dimensions symbolic).
  std::string input(const std::string& name, onnx::ElemType t, size_t rank) {
    onnx::ValueInfo v;
    v.name = name;
    v.type.kind = onnx::TypeInfo::Kind::Tensor;
    v.type.elem_type = t;
    v.type.shape = std::vector<onnx::Dim>(rank);
    g_->inputs.push_back(v);
    return name;
  }

  /// An initializer.
  std::string constant(const std::string& name, Array a) {
    g_->initializers.emplace_back(name, onnx::Value::tensor(std::move(a)));
    return name;
  }
  std::string int64s(const std::string& name, std::vector<int64_t> v) {
    return constant(name, Array(v, Shape{static_cast<int64_t>(v.size())}));
  }
  std::string int64_scalar(const std::string& name, int64_t v) { return constant(name, Array(v)); }
  std::string float_scalar(const std::string& name, float v) { return constant(name, Array(v)); }

  /// Adds a node; returns its output names.
  std::vector<std::string> node_n(const std::string& op, std::vector<std::string> inputs, size_t outputs,
                                  std::vector<onnx::Attribute> attrs = {}) {
    onnx::Node n;
    n.op_type = op;
    n.name = op + "_" + std::to_string(counts_[op]++);
    n.inputs = std::move(inputs);
    for (size_t i = 0; i < outputs; ++i) n.outputs.push_back(n.name + ":" + std::to_string(i));
    n.attributes = std::move(attrs);
    g_->nodes.push_back(n);
    return n.outputs;
  }
  std::string node(const std::string& op, std::vector<std::string> inputs, std::vector<onnx::Attribute> attrs = {}) {
    return node_n(op, std::move(inputs), 1, std::move(attrs))[0];
  }

  void output(const std::string& name) {
    onnx::ValueInfo v;
    v.name = name;
    g_->outputs.push_back(v);
  }

  std::shared_ptr<const onnx::Graph> graph() const { return g_; }

 private:
  std::shared_ptr<onnx::Graph> g_;
  std::map<std::string, int> counts_;
};

inline onnx::Model make_model(std::shared_ptr<const onnx::Graph> g, int64_t opset = 18) {
  onnx::Model m;
  m.ir_version = 9;
  m.opsets.push_back({"", opset});
  m.graph = std::move(g);
  return m;
}

/// boxes [N,4] and scores [N] -> NonMaxSuppression's selected indices (max 10, IoU 0.5): an
/// operator without a GPU kernel, computed on the host.
inline onnx::Model nms_model() {
  GraphBuilder b;
  auto boxes = b.input("boxes", onnx::ElemType::Float, 2);
  auto scores = b.input("scores", onnx::ElemType::Float, 1);
  auto B = b.node("Unsqueeze", {boxes, b.int64s("ax0", {0})});
  auto S = b.node("Unsqueeze", {scores, b.int64s("ax01", {0, 1})});
  b.output(b.node("NonMaxSuppression", {B, S, b.int64s("max_out", {10}), b.constant("iou", Array(0.5f))}));
  return make_model(b.graph());
}

}  // namespace smelt::test
