// A generated transformer-like ONNX graph with exporter-style scoped names, and an overlay over it, for the view's tests.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "smelt/onnx.h"
#include "src/onnx/executor.h"
#include "tests/onnx/model_builder.h"

namespace smelt::test {

/// Builds nodes named as PyTorch's exporter names them ("/model/layers.3/self_attn/q_proj/MatMul",
/// outputs "<name>_output_0"); initializers "model.layers.3.self_attn.q_proj.weight".
class ScopedGraph {
 public:
  ScopedGraph() : g_(std::make_shared<onnx::Graph>()) { g_->name = "scoped_transformer"; }

  std::string input(const std::string& name) {
    onnx::ValueInfo v;
    v.name = name;
    v.type.kind = onnx::TypeInfo::Kind::Tensor;
    v.type.elem_type = onnx::ElemType::Float;
    v.type.shape = std::vector<onnx::Dim>{{-1, "batch"}, {-1, "seq"}, {64, ""}};
    g_->inputs.push_back(v);
    return name;
  }
  std::string weight(const std::string& name) {
    g_->initializers.emplace_back(name, onnx::Value::tensor(Array(0.5f)));
    return name;
  }
  std::vector<std::string> node_n(const std::string& scope, const std::string& op, std::vector<std::string> inputs,
                                  size_t outputs = 1) {
    const int k = counts_[scope + "/" + op]++;
    onnx::Node n;
    n.op_type = op;
    n.name = scope + "/" + op + (k ? "_" + std::to_string(k) : "");
    n.inputs = std::move(inputs);
    for (size_t i = 0; i < outputs; ++i) n.outputs.push_back(n.name + "_output_" + std::to_string(i));
    g_->nodes.push_back(n);
    return n.outputs;
  }
  std::string node(const std::string& scope, const std::string& op, std::vector<std::string> inputs) {
    return node_n(scope, op, std::move(inputs))[0];
  }
  std::string constant(const std::string& scope) {
    onnx::Node n;
    n.op_type = "Constant";
    n.name = scope + "/Constant" + std::to_string(counts_[scope + "/Constant"]++);
    n.outputs = {n.name + "_output_0"};
    g_->nodes.push_back(n);
    return n.outputs[0];
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

/// Exporter-style LayerNorm in `scope`: 9 nodes and 2 Constant nodes.
inline std::string layer_norm(ScopedGraph& b, const std::string& scope, const std::string& wname, const std::string& x) {
  auto mean = b.node(scope, "ReduceMean", {x});
  auto d = b.node(scope, "Sub", {x, mean});
  auto sq = b.node(scope, "Pow", {d, b.constant(scope)});
  auto var = b.node(scope, "ReduceMean", {sq});
  auto eps = b.node(scope, "Add", {var, b.constant(scope)});
  auto sd = b.node(scope, "Sqrt", {eps});
  auto nrm = b.node(scope, "Div", {d, sd});
  auto sc = b.node(scope, "Mul", {nrm, b.weight(wname + ".weight")});
  return b.node(scope, "Add", {sc, b.weight(wname + ".bias")});
}

inline std::string linear(ScopedGraph& b, const std::string& scope, const std::string& wname, const std::string& x) {
  auto mm = b.node(scope, "MatMul", {x, b.weight(wname + ".weight")});
  return b.node(scope, "Add", {b.weight(wname + ".bias"), mm});
}

/// Shape arithmetic of a head split, as exporters write it: Shape, Gather, Unsqueeze, Concat, Reshape, Transpose.
inline std::string split_heads(ScopedGraph& b, const std::string& scope, const std::string& x) {
  auto shape = b.node(scope, "Shape", {x});
  auto dim = b.node(scope, "Gather", {shape, b.constant(scope)});
  auto un = b.node(scope, "Unsqueeze", {dim, b.constant(scope)});
  auto cat = b.node(scope, "Concat", {un, b.constant(scope), b.constant(scope)});
  auto r = b.node(scope, "Reshape", {x, cat});
  return b.node(scope, "Transpose", {r});
}

/// A transformer-like graph of `layers` layers (about 100 nodes each) with scoped names; every
/// `break_every`-th layer's attention mask goes through a NonZero (a graph break in an overlay).
inline onnx::Model scoped_transformer(int layers, int break_every = 10) {
  ScopedGraph b;
  std::string h = b.input("input_ids");
  auto mask = b.input("attention_mask");
  h = b.node("/model/embed_tokens", "Gather", {b.weight("model.embed_tokens.weight"), h});
  for (int l = 0; l < layers; ++l) {
    const std::string L = "/model/layers." + std::to_string(l);
    const std::string W = "model.layers." + std::to_string(l);
    auto x = layer_norm(b, L + "/input_layernorm", W + ".input_layernorm", h);
    const std::string A = L + "/self_attn";
    auto q = split_heads(b, A, linear(b, A + "/q_proj", W + ".self_attn.q_proj", x));
    auto k = split_heads(b, A, linear(b, A + "/k_proj", W + ".self_attn.k_proj", x));
    auto v = split_heads(b, A, linear(b, A + "/v_proj", W + ".self_attn.v_proj", x));
    auto kt = b.node(A, "Transpose", {k});
    auto s = b.node(A, "Div", {b.node(A, "MatMul", {q, kt}), b.constant(A)});
    std::string m = mask;
    if (break_every > 0 && l % break_every == break_every - 1) {
      auto nz = b.node(A + "/mask", "NonZero", {mask});
      m = b.node(A + "/mask", "ScatterND", {mask, b.node(A + "/mask", "Transpose", {nz}), b.constant(A + "/mask")});
    }
    auto p = b.node(A, "Softmax", {b.node(A, "Add", {s, m})});
    auto o = b.node(A, "Transpose", {b.node(A, "MatMul", {p, v})});
    auto shape = b.node(A, "Shape", {o});
    auto cat = b.node(A, "Concat", {b.node(A, "Unsqueeze", {b.node(A, "Gather", {shape, b.constant(A)}), b.constant(A)}),
                                     b.constant(A)});
    o = linear(b, A + "/o_proj", W + ".self_attn.o_proj", b.node(A, "Reshape", {o, cat}));
    h = b.node(L, "Add", {h, o});
    x = layer_norm(b, L + "/post_attention_layernorm", W + ".post_attention_layernorm", h);
    const std::string M = L + "/mlp";
    auto f = linear(b, M + "/fc1", W + ".mlp.fc1", x);
    // GELU (tanh form) as exporters write it.
    const std::string act = M + "/act";
    auto cube = b.node(act, "Pow", {f, b.constant(act)});
    auto inner = b.node(act, "Add", {f, b.node(act, "Mul", {cube, b.constant(act)})});
    auto th = b.node(act, "Tanh", {b.node(act, "Mul", {inner, b.constant(act)})});
    auto g = b.node(act, "Mul", {b.node(act, "Mul", {f, b.constant(act)}), b.node(act, "Add", {th, b.constant(act)})});
    h = b.node(L, "Add", {h, linear(b, M + "/fc2", W + ".mlp.fc2", g)});
  }
  h = layer_norm(b, "/model/norm", "model.norm", h);
  b.output(b.node("/lm_head", "MatMul", {h, b.weight("lm_head.weight")}));
  return make_model(b.graph());
}

/// An overlay as a compiled call of `m` would give: a Break segment at each NonZero, Compiled
/// segments between, each GELU (the nodes of an ".../act" scope) one fused kernel, the shape
/// arithmetic (Shape, Gather of a shape, Unsqueeze, Concat) host-folded.
inline onnx::Overlay scoped_overlay(const onnx::Model& m) {
  const auto& nodes = m.graph->nodes;
  const std::vector<size_t> order = onnx::detail::topological_order(nodes);
  onnx::Overlay ov;
  auto close = [&](size_t start, size_t stop, onnx::SegmentKind kind, const std::string& reason) {
    if (stop <= start) return;
    onnx::OverlaySegment s;
    s.start = start;
    s.stop = stop;
    s.start_node = nodes[order[start]].label();
    s.stop_node = nodes[order[stop - 1]].label();
    s.kind = kind;
    s.compiled = kind == onnx::SegmentKind::Compiled;
    s.reason = reason;
    std::map<std::string, onnx::FusedGroup> gelu;  // by scope
    for (size_t p = start; p < stop && kind == onnx::SegmentKind::Compiled; ++p) {
      const auto& n = nodes[order[p]];
      const size_t slash = n.name.rfind('/');
      const std::string scope = n.name.substr(0, slash == std::string::npos ? 0 : slash);
      if (scope.size() > 4 && scope.compare(scope.size() - 4, 4, "/act") == 0 && n.op_type != "Constant")
        gelu[scope].nodes.push_back(n.label());
    }
    for (auto& [scope, f] : gelu) {
      f.kernel = "gelu_tanh(x)";
      s.fused.push_back(f);
    }
    ov.segments.push_back(s);
  };
  size_t start = 0;
  for (size_t p = 0; p < order.size(); ++p) {
    const auto& n = nodes[order[p]];
    if (n.op_type == "Shape" || n.op_type == "Unsqueeze" || n.op_type == "Concat" ||
        (n.op_type == "Gather" && n.inputs[0].find("Shape") != std::string::npos))
      ov.host_folded.push_back(n.label());
    if (n.op_type != "NonZero") continue;
    close(start, p, onnx::SegmentKind::Compiled, "break: " + n.label());
    close(p, p + 1, onnx::SegmentKind::Break, n.label() + ": output shape depends on the values of its input");
    start = p + 1;
  }
  close(start, order.size(), onnx::SegmentKind::Compiled, "end of graph");
  return ov;
}

}  // namespace smelt::test
