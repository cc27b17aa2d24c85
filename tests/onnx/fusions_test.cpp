// Load-time fusions: each pattern rewritten matches the unfused run; near-misses stay unfused.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "model_builder.h"
#include "smelt/errors.h"
#include "smelt/onnx.h"
#include "smelt/smelt.h"
#include "src/onnx/fusions.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

using onnx::ElemType;
using onnx::Model;
using onnx::Value;

constexpr double kRtol = 1e-5;

/// The model with the fusions applied (the input model stays as it was).
Model fused(const Model& m, onnx::FusionCounts* counts = nullptr) {
  Model f = m;
  onnx::FusionCounts c = onnx::apply_fusions(f);
  if (counts) *counts = c;
  return f;
}

/// Runs both models on the same inputs and checks every output agrees within kRtol.
void expect_same_results(const Model& plain, const Model& fused_model, const std::vector<Value>& inputs,
                         double atol = 1e-6) {
  auto want = onnx::run(plain, inputs);
  auto got = onnx::run(fused_model, inputs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].array().dtype(), want[i].array().dtype());
    ASSERT_EQ(got[i].array().shape(), want[i].array().shape());
    EXPECT_TRUE(all_close(got[i].array(), as_doubles(want[i].array()), kRtol, atol));
  }
}

/// Same nodes (op types, names, inputs, outputs) and initializers.
void expect_unchanged(const Model& before, const Model& after) {
  ASSERT_EQ(before.graph->nodes.size(), after.graph->nodes.size());
  for (size_t i = 0; i < before.graph->nodes.size(); ++i) {
    EXPECT_EQ(before.graph->nodes[i].op_type, after.graph->nodes[i].op_type);
    EXPECT_EQ(before.graph->nodes[i].name, after.graph->nodes[i].name);
    EXPECT_EQ(before.graph->nodes[i].inputs, after.graph->nodes[i].inputs);
    EXPECT_EQ(before.graph->nodes[i].outputs, after.graph->nodes[i].outputs);
  }
  EXPECT_EQ(before.graph->initializers.size(), after.graph->initializers.size());
  EXPECT_EQ(before.opsets.size(), after.opsets.size());
}

Value rand_input(const Shape& s, uint32_t seed) { return Value::tensor(random_array(s, float32, -3.0, 3.0, seed)); }

// ---------------------------------------------------------------------------------------------
// GELU
// ---------------------------------------------------------------------------------------------

enum class GeluForm { DivThenHalf, MulHalfFirst, HalfOnErfSide };

struct GeluSpec {
  GeluForm form = GeluForm::DivThenHalf;
  float inner = 0.0f;  // 0: the right constant for the form
  float one = 1.0f;
  float half = 0.5f;
  bool erf_is_output = false;  // an extra reader of an intermediate
  bool extra_add_reader = false;
};

Model gelu_model(const GeluSpec& s) {
  GraphBuilder b;
  std::string x = b.input("x", ElemType::Float, 2);
  std::string z;
  if (s.form == GeluForm::DivThenHalf)
    z = b.node("Div", {x, b.float_scalar("sqrt2", s.inner != 0.0f ? s.inner : 1.4142135f)});
  else
    z = b.node("Mul", {b.float_scalar("rsqrt2", s.inner != 0.0f ? s.inner : 0.70710678f), x});
  std::string e = b.node("Erf", {z});
  std::string a = b.node("Add", {b.float_scalar("one", s.one), e});
  std::string y;
  switch (s.form) {
    case GeluForm::DivThenHalf: y = b.node("Mul", {b.node("Mul", {x, a}), b.float_scalar("half", s.half)}); break;
    case GeluForm::MulHalfFirst: y = b.node("Mul", {b.node("Mul", {x, b.float_scalar("half", s.half)}), a}); break;
    case GeluForm::HalfOnErfSide: y = b.node("Mul", {x, b.node("Mul", {a, b.float_scalar("half", s.half)})}); break;
  }
  b.output(y);
  if (s.erf_is_output) b.output(e);
  if (s.extra_add_reader) b.output(b.node("Neg", {a}));
  return make_model(b.graph());
}

TEST(Fusions, GeluDivFormBecomesOneNode) {
  Model m = gelu_model({});
  onnx::FusionCounts c;
  Model f = fused(m, &c);
  EXPECT_EQ(c.gelu, 1);
  ASSERT_EQ(m.graph->nodes.size(), 5u);
  ASSERT_EQ(f.graph->nodes.size(), 1u);
  const onnx::Node& n = f.graph->nodes[0];
  EXPECT_EQ(n.domain, "ai.smelt");
  EXPECT_EQ(n.op_type, "Gelu");
  EXPECT_EQ(n.name, "gelu(Div_0,Erf_0,Add_0,Mul_0,Mul_1)");
  EXPECT_EQ(n.inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(n.outputs, std::vector<std::string>{m.graph->outputs[0].name});
  EXPECT_EQ(f.opset("ai.smelt"), 1);
  EXPECT_EQ(m.opset("ai.smelt"), 0);  // the input model is untouched
  // The constants the pattern read are gone with it.
  EXPECT_TRUE(f.graph->initializers.empty());
  expect_same_results(m, f, {rand_input({7, 33}, 1)});
}

TEST(Fusions, GeluOtherOperandOrders) {
  for (GeluForm form : {GeluForm::MulHalfFirst, GeluForm::HalfOnErfSide}) {
    SCOPED_TRACE(static_cast<int>(form));
    GeluSpec s;
    s.form = form;
    Model m = gelu_model(s);
    Model f = fused(m);
    ASSERT_EQ(f.graph->nodes.size(), 1u);
    EXPECT_EQ(f.graph->nodes[0].op_type, "Gelu");
    EXPECT_EQ(f.graph->nodes[0].name, "gelu(Mul_0,Erf_0,Add_0,Mul_1,Mul_2)");
    EXPECT_EQ(f.graph->nodes[0].outputs[0], m.graph->outputs[0].name);
    expect_same_results(m, f, {rand_input({4, 50}, 2)});
  }
}

TEST(Fusions, GeluWithExtraReaderOfAnIntermediateIsKept) {
  GeluSpec s;
  s.erf_is_output = true;
  Model m = gelu_model(s);
  Model f = fused(m);
  expect_unchanged(m, f);
  GeluSpec t;
  t.extra_add_reader = true;
  t.form = GeluForm::MulHalfFirst;
  Model m2 = gelu_model(t);
  expect_unchanged(m2, fused(m2));
}

TEST(Fusions, GeluWithWrongConstantIsKept) {
  GeluSpec a;
  a.inner = 1.5f;
  GeluSpec b;
  b.half = 0.6f;
  GeluSpec c;
  c.one = 1.00001f;  // off by 1e-5 relative: more than the 1e-6 allowed
  GeluSpec d;
  d.form = GeluForm::MulHalfFirst;
  d.inner = 0.7072f;
  for (const GeluSpec& s : {a, b, c, d}) {
    Model m = gelu_model(s);
    expect_unchanged(m, fused(m));
  }
}

/// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), x^3 as Pow or two Muls.
Model gelu_tanh_model(bool pow, float kappa = 0.044715f) {
  GraphBuilder b;
  std::string x = b.input("x", ElemType::Float, 2);
  std::string cube =
      pow ? b.node("Pow", {x, b.float_scalar("three", 3.0f)}) : b.node("Mul", {x, b.node("Mul", {x, x})});
  std::string inner = b.node("Add", {x, b.node("Mul", {b.float_scalar("kappa", kappa), cube})});
  std::string t = b.node("Tanh", {b.node("Mul", {inner, b.float_scalar("beta", 0.7978845608f)})});
  std::string a = b.node("Add", {t, b.float_scalar("one", 1.0f)});
  b.output(b.node("Mul", {b.node("Mul", {b.float_scalar("half", 0.5f), x}), a}));
  return make_model(b.graph());
}

TEST(Fusions, GeluTanhForm) {
  for (bool pow : {true, false}) {
    SCOPED_TRACE(pow);
    Model m = gelu_tanh_model(pow);
    onnx::FusionCounts c;
    Model f = fused(m, &c);
    EXPECT_EQ(c.gelu, 1);
    ASSERT_EQ(m.graph->nodes.size(), pow ? 8u : 9u);
    ASSERT_EQ(f.graph->nodes.size(), 1u);
    const onnx::Node& n = f.graph->nodes[0];
    EXPECT_EQ(n.op_type, "Gelu");
    ASSERT_NE(n.attribute("approximate"), nullptr);
    EXPECT_EQ(n.attribute("approximate")->i, 1);
    EXPECT_EQ(n.name, pow ? "gelu_tanh(Pow_0,Mul_0,Add_0,Mul_1,Tanh_0,Add_1,Mul_2,Mul_3)"
                          : "gelu_tanh(Mul_0,Mul_1,Mul_2,Add_0,Mul_3,Tanh_0,Add_1,Mul_4,Mul_5)");
    expect_same_results(m, f, {rand_input({6, 40}, 10)});
  }
  Model wrong = gelu_tanh_model(true, 0.0447f);
  expect_unchanged(wrong, fused(wrong));
}

TEST(Fusions, GeluWithConstantNodes) {
  // Exporters often write the scalars as Constant nodes; those feeding only the pattern go too.
  GraphBuilder b;
  std::string x = b.input("x", ElemType::Float, 2);
  auto constant = [&](float v) {
    onnx::Attribute a;
    a.name = "value";
    a.type = onnx::Attribute::Type::Tensor;
    a.t = Value::tensor(Array(v));
    return b.node("Constant", {}, {a});
  };
  std::string half = constant(0.5f);
  std::string kept = constant(2.0f);  // read outside the pattern
  std::string z = b.node("Div", {x, constant(1.4142135f)});
  std::string a = b.node("Add", {b.node("Erf", {z}), constant(1.0f)});
  b.output(b.node("Mul", {b.node("Mul", {a, half}), x}));
  b.output(b.node("Mul", {x, kept}));
  Model m = make_model(b.graph());
  Model f = fused(m);
  ASSERT_EQ(m.graph->nodes.size(), 10u);
  ASSERT_EQ(f.graph->nodes.size(), 3u);  // the kept Constant, the Gelu, the other Mul
  EXPECT_EQ(f.graph->nodes[0].op_type, "Constant");
  EXPECT_EQ(f.graph->nodes[0].outputs[0], kept);
  EXPECT_EQ(f.graph->nodes[1].name, "gelu(Div_0,Erf_0,Add_0,Mul_0,Mul_1)");
  expect_same_results(m, f, {rand_input({5, 9}, 12)});
}

// ---------------------------------------------------------------------------------------------
// LayerNorm
// ---------------------------------------------------------------------------------------------

struct LnSpec {
  bool pow = true;          // Pow(d, 2), else Mul(d, d)
  bool affine = true;       // Mul gamma, Add beta
  bool axes_input = false;  // opset 18: axes as an input
  int64_t axis = -1;
  int64_t keepdims = 1;
  bool extra_d_reader = false;
};

Model layer_norm_model(const LnSpec& s, int64_t width = 24) {
  GraphBuilder b;
  std::string x = b.input("x", ElemType::Float, 3);
  auto mean_of = [&](const std::string& v) {
    if (s.axes_input)
      return b.node("ReduceMean", {v, b.int64s("axes_" + v, {s.axis})}, {attr_int("keepdims", s.keepdims)});
    return b.node("ReduceMean", {v}, {attr_ints("axes", {s.axis}), attr_int("keepdims", s.keepdims)});
  };
  std::string d = b.node("Sub", {x, mean_of(x)});
  std::string sq = s.pow ? b.node("Pow", {d, b.float_scalar("two", 2.0f)}) : b.node("Mul", {d, d});
  std::string var = mean_of(sq);
  std::string sd = b.node("Sqrt", {b.node("Add", {var, b.float_scalar("eps", 1e-5f)})});
  std::string y = b.node("Div", {d, sd});
  if (s.affine) {
    y = b.node("Mul", {y, b.constant("gamma", random_array({width}, float32, 0.5, 1.5, 11))});
    y = b.node("Add", {b.constant("beta", random_array({width}, float32, -1.0, 1.0, 12)), y});
  }
  b.output(y);
  if (s.extra_d_reader) b.output(b.node("Neg", {d}));
  return make_model(b.graph(), s.axes_input ? 18 : 13);
}

TEST(Fusions, LayerNormWithScaleAndShift) {
  Model m = layer_norm_model({});
  onnx::FusionCounts c;
  Model f = fused(m, &c);
  EXPECT_EQ(c.layer_norm, 1);
  ASSERT_EQ(m.graph->nodes.size(), 9u);
  ASSERT_EQ(f.graph->nodes.size(), 1u);
  const onnx::Node& n = f.graph->nodes[0];
  EXPECT_EQ(n.domain, "ai.smelt");
  EXPECT_EQ(n.op_type, "LayerNorm");
  EXPECT_EQ(n.name, "layer_norm(ReduceMean_0,Sub_0,Pow_0,ReduceMean_1,Add_0,Sqrt_0,Div_0,Mul_0,Add_1)");
  EXPECT_EQ(n.inputs, (std::vector<std::string>{"x", "gamma", "beta"}));
  ASSERT_NE(n.attribute("epsilon"), nullptr);
  EXPECT_FLOAT_EQ(n.attribute("epsilon")->f, 1e-5f);
  EXPECT_EQ(f.graph->initializers.size(), 2u);  // gamma and beta stay; two and eps go
  expect_same_results(m, f, {rand_input({2, 5, 24}, 3)}, 1e-5);
}

TEST(Fusions, LayerNormMulSquareAxesInputNoAffine) {
  LnSpec s;
  s.pow = false;
  s.affine = false;
  s.axes_input = true;
  Model m = layer_norm_model(s);
  Model f = fused(m);
  ASSERT_EQ(m.graph->nodes.size(), 7u);
  ASSERT_EQ(f.graph->nodes.size(), 1u);
  EXPECT_EQ(f.graph->nodes[0].inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(f.graph->nodes[0].name, "layer_norm(ReduceMean_0,Sub_0,Mul_0,ReduceMean_1,Add_0,Sqrt_0,Div_0)");
  expect_same_results(m, f, {rand_input({3, 4, 17}, 4)}, 1e-5);
}

TEST(Fusions, LayerNormNearMissesAreKept) {
  LnSpec other_axis;
  other_axis.axis = 1;  // not the last axis (or not provably so)
  LnSpec no_keep;
  no_keep.keepdims = 0;
  LnSpec extra;
  extra.extra_d_reader = true;
  for (const LnSpec& s : {other_axis, no_keep, extra}) {
    Model m = layer_norm_model(s);
    expect_unchanged(m, fused(m));
  }
}

// ---------------------------------------------------------------------------------------------
// Conv + BatchNormalization
// ---------------------------------------------------------------------------------------------

struct ConvBnSpec {
  bool conv_bias = true;
  bool conv_out_is_output = false;
  bool mean_is_input = false;  // a BN parameter the caller can override
};

Model conv_bn_model(const ConvBnSpec& s) {
  GraphBuilder b;
  std::string x = b.input("x", ElemType::Float, 4);
  std::vector<std::string> conv_in{x, b.constant("w", random_array({6, 3, 3, 3}, float32, -1.0, 1.0, 21))};
  if (s.conv_bias) conv_in.push_back(b.constant("cb", random_array({6}, float32, -1.0, 1.0, 22)));
  std::string y = b.node("Conv", conv_in, {attr_ints("pads", {1, 1, 1, 1})});
  std::string mean = b.constant("mean", random_array({6}, float32, -0.5, 0.5, 25));
  if (s.mean_is_input) b.input("mean", ElemType::Float, 1);
  std::string z = b.node("BatchNormalization",
                         {y, b.constant("scale", random_array({6}, float32, 0.5, 2.0, 23)),
                          b.constant("bias", random_array({6}, float32, -1.0, 1.0, 24)), mean,
                          b.constant("var", random_array({6}, float32, 0.2, 3.0, 26))},
                         {attr_float("epsilon", 1e-3f)});
  b.output(b.node("Relu", {z}));
  if (s.conv_out_is_output) b.output(y);
  return make_model(b.graph());
}

TEST(Fusions, ConvBatchNormFolds) {
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias);
    ConvBnSpec s;
    s.conv_bias = bias;
    Model m = conv_bn_model(s);
    onnx::FusionCounts c;
    Model f = fused(m, &c);
    EXPECT_EQ(c.conv_bn, 1);
    ASSERT_EQ(f.graph->nodes.size(), 2u);
    const onnx::Node& n = f.graph->nodes[0];
    EXPECT_EQ(n.op_type, "Conv");
    EXPECT_EQ(n.domain, "");
    EXPECT_EQ(n.name, "conv_bn(Conv_0,BatchNormalization_0)");
    ASSERT_EQ(n.inputs.size(), 3u);
    EXPECT_EQ(n.inputs[1], "w_bn_folded");
    ASSERT_NE(n.attribute("pads"), nullptr);
    EXPECT_EQ(f.opset("ai.smelt"), 0);  // no ai.smelt op was needed
    // Only the two folded tensors remain: the BN parameters and the old weights went.
    EXPECT_EQ(f.graph->initializers.size(), 2u);
    for (const auto& [name, v] : f.graph->initializers) EXPECT_EQ(v.array().dtype(), float32) << name;
    expect_same_results(m, f, {rand_input({2, 3, 9, 8}, 5)}, 1e-5);
  }
}

/// Gemm(x, W, b, transB=1) twice over one constant W (and, with `w_also_read`, a Relu of W; with
/// `w_is_input`, W also a graph input the caller may override).
Model gemm_model(bool w_also_read, bool w_is_input) {
  GraphBuilder b;
  std::string x = b.input("x", ElemType::Float, 2);
  std::string w = b.constant("w", random_array({24, 40}, float32, -1.0, 1.0, 31));  // [N, K]
  if (w_is_input) b.input("w", ElemType::Float, 2);
  std::string bias = b.constant("b", random_array({24}, float32, -1.0, 1.0, 32));
  std::string y1 = b.node("Gemm", {x, w, bias}, {attr_int("transB", 1)});
  std::string y2 = b.node("Gemm", {b.node("Relu", {x}), w}, {attr_int("transB", 1), attr_float("alpha", 0.5f)});
  b.output(y1);
  b.output(y2);
  if (w_also_read) b.output(b.node("Relu", {w}));
  return make_model(b.graph());
}

TEST(Fusions, GemmWeightsReadTransposedAreStoredTransposedOnce) {
  Model m = gemm_model(false, false);
  onnx::FusionCounts c;
  Model f = fused(m, &c);
  EXPECT_EQ(c.gemm_weights, 2);
  ASSERT_EQ(f.graph->nodes.size(), 3u);
  const onnx::Node& g0 = f.graph->nodes[0];
  EXPECT_EQ(g0.name, "gemm_wt(Gemm_0)");
  EXPECT_EQ(g0.inputs[1], "w_transposed");
  EXPECT_EQ(g0.attribute("transB"), nullptr);
  EXPECT_EQ(f.graph->nodes[2].inputs[1], "w_transposed");  // both Gemms share one copy
  ASSERT_NE(f.graph->nodes[2].attribute("alpha"), nullptr);
  // w went, its transposed copy ([K, N]) came.
  EXPECT_EQ(f.graph->initializers.size(), 2u);
  for (const auto& [name, v] : f.graph->initializers) {
    if (name == "w_transposed") {
      EXPECT_EQ(v.array().shape(), (Shape{40, 24}));
    }
  }
  // The same values reach the same GEMM call: bit for bit, eager and compiled.
  const std::vector<Value> in{rand_input({5, 40}, 33)};
  auto want = onnx::run(m, in);
  auto got = onnx::run(f, in);
  auto compiled = onnx::compile(f)(in);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(bit_equal(got[i].array(), want[i].array())) << i;
    EXPECT_TRUE(bit_equal(compiled[i].array(), want[i].array())) << i;
  }
}

TEST(Fusions, GemmWeightsReadOtherwiseStayAsTheyAre) {
  for (auto [also_read, is_input] : {std::pair{true, false}, std::pair{false, true}}) {
    SCOPED_TRACE(also_read ? "w read by a Relu too" : "w a graph input");
    Model m = gemm_model(also_read, is_input);
    onnx::FusionCounts c;
    Model f = fused(m, &c);
    EXPECT_EQ(c.gemm_weights, 0);
    expect_unchanged(m, f);
  }
}

TEST(Fusions, ConvBatchNormNearMissesAreKept) {
  ConvBnSpec shared;
  shared.conv_out_is_output = true;
  ConvBnSpec overridable;
  overridable.mean_is_input = true;
  for (const ConvBnSpec& s : {shared, overridable}) {
    Model m = conv_bn_model(s);
    expect_unchanged(m, fused(m));
  }
}

// ---------------------------------------------------------------------------------------------
// Subgraphs, the fused ops' own checks, loading
// ---------------------------------------------------------------------------------------------

TEST(Fusions, RewritesInsideIfBranches) {
  Model inner = gelu_model({});
  // The branch reads the outer graph's "x" and outputs the GELU.
  auto then_g = std::make_shared<onnx::Graph>(*inner.graph);
  then_g->inputs.clear();
  GraphBuilder b;
  b.input("x", ElemType::Float, 2);
  b.input("c", ElemType::Bool, 0);
  GraphBuilder e("else");
  e.output(e.node("Identity", {"x"}));
  std::string y = b.node("If", {"c"}, {attr_graph("then_branch", then_g), attr_graph("else_branch", e.graph())});
  b.output(y);
  Model m = make_model(b.graph());
  onnx::FusionCounts c;
  Model f = fused(m, &c);
  EXPECT_EQ(c.gelu, 1);
  const onnx::Attribute* then_attr = f.graph->nodes[0].attribute("then_branch");
  ASSERT_NE(then_attr, nullptr);
  ASSERT_EQ(then_attr->g->nodes.size(), 1u);
  EXPECT_EQ(then_attr->g->nodes[0].op_type, "Gelu");
  EXPECT_EQ(m.graph->nodes[0].attribute("then_branch")->g->nodes.size(), 5u);
  expect_same_results(m, f, {rand_input({3, 8}, 6), Value::tensor(Array(true))});
}

TEST(Fusions, IntermediateReadByASubgraphIsKept) {
  // The Erf output is read (implicitly) inside an If branch: the chain must stay.
  GeluSpec s;
  Model base = gelu_model(s);
  auto g = std::make_shared<onnx::Graph>(*base.graph);
  GraphBuilder t("then");
  t.output(t.node("Identity", {"Erf_0:0"}));
  onnx::Node branch;
  branch.op_type = "If";
  branch.name = "If_0";
  branch.inputs = {"c"};
  branch.outputs = {"branch_out"};
  branch.attributes = {attr_graph("then_branch", t.graph()), attr_graph("else_branch", t.graph())};
  g->nodes.push_back(branch);
  g->outputs.push_back({"branch_out", {}});
  Model m = make_model(g);
  expect_unchanged(m, fused(m));
}

TEST(Fusions, FusedOpsCheckTheirInputs) {
  GraphBuilder b;
  std::string x = b.input("x", ElemType::Int32, 2);
  onnx::Node n;
  n.op_type = "Gelu";
  n.domain = "ai.smelt";
  n.name = "g";
  n.inputs = {x};
  n.outputs = {"y"};
  auto g = std::make_shared<onnx::Graph>(*b.graph());
  g->nodes.push_back(n);
  g->outputs.push_back({"y", {}});
  Model m = make_model(g);
  m.opsets.push_back({"ai.smelt", 1});
  EXPECT_THROW_MSG(onnx::run(m, {Value::tensor(Array({1, 2}, Shape{1, 2}))}), OnnxError,
                   "Gelu 'g' (inputs tensor(int32)[1,2]): input 0 has type int32; allowed: float");
  g->nodes[0].op_type = "LayerNorm";
  g->inputs[0].type.elem_type = ElemType::Float;
  g->inputs[0].type.shape = std::vector<onnx::Dim>{};
  EXPECT_THROW_MSG(onnx::run(m, {Value::tensor(Array(1.0f))}), OnnxError,
                   "LayerNorm 'g' (inputs tensor(float)[]): input must have rank >= 1, got tensor(float)");
}

TEST(Fusions, LayerNormScaleThatBroadcasts) {
  // A [1] scale broadcasts in the exporter's Mul; the fused op applies it the same way.
  GraphBuilder b;
  std::string x = b.input("x", ElemType::Float, 2);
  onnx::Node n;
  n.op_type = "LayerNorm";
  n.domain = "ai.smelt";
  n.inputs = {x, b.constant("gamma", Array(std::vector<float>{2.0f}, Shape{1}))};
  n.outputs = {"y"};
  auto g = std::make_shared<onnx::Graph>(*b.graph());
  g->nodes.push_back(n);
  g->outputs.push_back({"y", {}});
  Model m = make_model(g);
  m.opsets.push_back({"ai.smelt", 1});
  Array in = random_array({3, 6}, float32, -2.0, 2.0, 9);
  auto out = onnx::run(m, {Value::tensor(in)});
  std::vector<double> v = as_doubles(in), want(v.size());
  for (size_t r = 0; r < 3; ++r) {
    double mean = 0, var = 0;
    for (size_t k = 0; k < 6; ++k) mean += v[r * 6 + k] / 6;
    for (size_t k = 0; k < 6; ++k) var += (v[r * 6 + k] - mean) * (v[r * 6 + k] - mean) / 6;
    for (size_t k = 0; k < 6; ++k) want[r * 6 + k] = 2.0 * (v[r * 6 + k] - mean) / std::sqrt(var + 1e-5);
  }
  EXPECT_TRUE(all_close(out[0].array(), want, 1e-5, 1e-5));
}

std::string model_path(const std::string& name) {
  return (std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "models" / (name + ".onnx"))
      .string();
}

TEST(Fusions, BundledModelsFuseAtLoadAndNotWithFuseFalse) {
  Model cnn = onnx::load(model_path("tiny_cnn"));
  Model cnn_plain = onnx::load(model_path("tiny_cnn"), {.fuse = false});
  EXPECT_EQ(cnn_plain.graph->nodes.size(), 16u);
  EXPECT_EQ(cnn.graph->nodes.size(), 13u);  // three Conv+BatchNormalization pairs folded
  for (const auto& n : cnn_plain.graph->nodes) EXPECT_EQ(n.name.find("conv_bn("), std::string::npos);
  expect_same_results(cnn_plain, cnn, {rand_input({2, 3, 32, 32}, 7)}, 1e-5);

  Model tr = onnx::load(model_path("tiny_transformer"));
  Model tr_plain = onnx::load(model_path("tiny_transformer"), {.fuse = false});
  EXPECT_EQ(tr_plain.graph->nodes.size(), 68u);
  // Two 5-node GELUs, two 5-node attentions (Transpose k, MatMul, Mul, Softmax, MatMul).
  EXPECT_EQ(tr.graph->nodes.size(), 52u);
  int gelus = 0;
  for (const auto& n : tr.graph->nodes) gelus += n.op_type == "Gelu" && n.name.rfind("gelu(", 0) == 0;
  EXPECT_EQ(gelus, 2);
  Array ids = astype(random_array({2, 16}, float32, 0.0, 99.0, 8), int64);
  // The fused Gelu and the file's Mul/Erf/Mul/Add chain round x/sqrt(2) differently, and erf is
  // within 1.08 ulp (vector_math.h): gelu(x) = x (1 + erf(x/sqrt2)) / 2 may differ by
  // (2 * 1.08 + 0.48) 2^-24 |x| / 2 < 8e-8 |x|, so by 4e-7 at the MLP's |x| <= 5. The fixture's
  // weights have std 1/sqrt(d_in): the second MLP matmul (d_in 512) moves an output by at most
  // 0.8 sqrt(512) 4e-7 = 7e-6 per layer, and the head (d_in 128) the logits by at most
  // 0.8 sqrt(128) (2 layers, residual and LayerNorm gains ~1.5) 1.5e-5 = 1.4e-4.
  expect_same_results(tr_plain, tr, {Value::tensor(ids)}, 2e-4);
}

}  // namespace
}  // namespace smelt::test
