// Small ONNX models the gradient tests train through onnx::run, on the CPU and on the GPU.
#pragma once

#include "onnx/model_builder.h"
#include "test_utils.h"

namespace smelt::test {

/// A tiny float64 model with seeded random initializers: Gather (embedding) ->
/// LayerNormalization -> MatMul + Add -> Gelu -> MatMul + Add -> Relu -> Softmax.
inline onnx::Model tiny_training_model() {
  GraphBuilder b;
  b.input("ids", onnx::ElemType::Int64, 2);
  b.constant("emb", random_array({10, 4}, float64, -1, 1, 40));
  b.constant("gamma", random_array({4}, float64, 0.5, 1.5, 41));
  b.constant("beta", random_array({4}, float64, -0.5, 0.5, 42));
  b.constant("w1", random_array({4, 6}, float64, -1, 1, 43));
  b.constant("b1", random_array({6}, float64, -0.5, 0.5, 44));
  b.constant("w2", random_array({6, 5}, float64, -1, 1, 45));
  b.constant("b2", random_array({5}, float64, -0.5, 0.5, 46));
  std::string x = b.node("Gather", {"emb", "ids"});
  std::string h = b.node("LayerNormalization", {x, "gamma", "beta"}, {attr_int("axis", -1)});
  std::string a1 = b.node("Gelu", {b.node("Add", {b.node("MatMul", {h, "w1"}), "b1"})});
  std::string a2 = b.node("Relu", {b.node("Add", {b.node("MatMul", {a1, "w2"}), "b2"})});
  b.output(b.node("Softmax", {a2}, {attr_int("axis", -1)}));
  return make_model(b.graph(), 20);
}

}  // namespace smelt::test
