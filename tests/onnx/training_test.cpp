// Tests of ONNX training: ai.onnx.preview.training ops, training-mode Dropout, and gradients of a
// loss with respect to a loaded model's initializers (RunOptions::initializers, onnx::parameters).
#include <cmath>
#include <filesystem>
#include <memory>
#include <set>
#include <thread>

#include "onnx/model_builder.h"
#include "onnx/training_models.h"
#include "smelt/compile.h"
#include "smelt/transforms.h"
#include "src/transforms/origin.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

namespace fs = std::filesystem;
using onnx::ElemType;
using onnx::Value;
using Params = std::map<std::string, Array>;

const char* kTraining = "ai.onnx.preview.training";

onnx::Attribute attr_strings(const std::string& name, std::vector<std::string> v) {
  onnx::Attribute a;
  a.name = name;
  a.type = onnx::Attribute::Type::Strings;
  a.strings = std::move(v);
  return a;
}
onnx::Attribute attr_string(const std::string& name, std::string v) {
  onnx::Attribute a;
  a.name = name;
  a.type = onnx::Attribute::Type::String;
  a.s = std::move(v);
  return a;
}

/// A model of `g` whose nodes of the op types in `training_ops` are in the training domain.
onnx::Model training_model(const GraphBuilder& b, const std::set<std::string>& training_ops, int64_t opset = 18) {
  auto g = std::make_shared<onnx::Graph>(*b.graph());
  for (auto& n : g->nodes)
    if (training_ops.count(n.op_type)) n.domain = kTraining;
  onnx::Model m = make_model(g, opset);
  m.opsets.push_back({kTraining, 1});
  return m;
}

std::vector<double> host(const Array& a) { return as_doubles(a); }

// ---------------------------------------------------------------------------------------------
// Gradient
// ---------------------------------------------------------------------------------------------

TEST(OnnxTraining, GradientOfAddAndMulMatchesAnalytic) {
  // c = a + b, d = a * c: dd/da = c + a = 2a + b, dd/db = a (elementwise; d is summed).
  GraphBuilder b;
  b.input("a", ElemType::Double, 2);
  b.input("b", ElemType::Double, 2);
  std::string c = b.node("Add", {"a", "b"});
  std::string d = b.node("Mul", {"a", c});
  auto grads = b.node_n("Gradient", {"a", "b"}, 2, {attr_strings("xs", {"a", "b"}), attr_string("y", d)});
  b.output(d);
  b.output(grads[0]);
  b.output(grads[1]);
  onnx::Model m = training_model(b, {"Gradient"});
  Array av = random_array({2, 3}, float64, -2, 2, 1), bv = random_array({2, 3}, float64, -2, 2, 2);
  auto out = onnx::run(m, {Value::tensor(av), Value::tensor(bv)});
  auto a = host(av), bb = host(bv);
  std::vector<double> da, db;
  for (size_t i = 0; i < a.size(); ++i) {
    da.push_back(2 * a[i] + bb[i]);
    db.push_back(a[i]);
  }
  // One multiply-add per element in float64: exact to an ulp.
  EXPECT_TRUE(all_close(out[1].array(), da, 1e-15, 0));
  EXPECT_TRUE(all_close(out[2].array(), db, 0, 0));
}

TEST(OnnxTraining, GradientCompiledEqualsEager) {
  // y = sum(softmax(a * b)) over a row, differentiated inside a compiled segment.
  GraphBuilder b;
  b.input("a", ElemType::Float, 2);
  b.input("b", ElemType::Float, 2);
  std::string y = b.node("Softmax", {b.node("Mul", {"a", "b"})}, {attr_int("axis", -1)});
  std::string e = b.node("Exp", {y});
  auto g = b.node_n("Gradient", {"a", "b"}, 2, {attr_strings("xs", {"a", "b"}), attr_string("y", e)});
  b.output(g[0]);
  b.output(g[1]);
  onnx::Model m = training_model(b, {"Gradient"}, 18);
  std::vector<Value> in{Value::tensor(random_array({3, 5}, float32, -2, 2, 6)),
                        Value::tensor(random_array({3, 5}, float32, -2, 2, 7))};
  auto eager = onnx::run(m, in);
  onnx::CompiledModel cm = onnx::compile(m);
  auto compiled = cm(in);
  // The whole graph, Gradient included, is one compiled segment.
  ASSERT_EQ(cm.overlay().segments.size(), 1u);
  EXPECT_TRUE(cm.overlay().segments[0].compiled) << cm.overlay().segments[0].reason;
  EXPECT_TRUE(bit_equal(compiled[0].array(), eager[0].array()));
  EXPECT_TRUE(bit_equal(compiled[1].array(), eager[1].array()));
}

TEST(OnnxTraining, GradientHoldsZsFixedAndReadsInitializers) {
  // y = tanh(x * w + z) summed; xs = [x], zs = [z]; w is an initializer read through the scope.
  GraphBuilder b;
  b.input("x", ElemType::Float, 1);
  b.input("z", ElemType::Float, 1);
  Array w = random_array({4}, float32, -1, 1, 3);
  b.constant("w", w);
  std::string y = b.node("Tanh", {b.node("Add", {b.node("Mul", {"x", "w"}), "z"})});
  auto g = b.node_n("Gradient", {"x", "z"}, 1, {attr_strings("xs", {"x"}), attr_strings("zs", {"z"}), attr_string("y", y)});
  b.output(g[0]);
  onnx::Model m = training_model(b, {"Gradient"});
  Array x = random_array({4}, float32, -1, 1, 4), z = random_array({4}, float32, -1, 1, 5);
  auto out = onnx::run(m, {Value::tensor(x), Value::tensor(z)});
  auto xv = host(x), zv = host(z), wv = host(w);
  std::vector<double> want;
  for (size_t i = 0; i < 4; ++i) {
    double t = std::tanh(xv[i] * wv[i] + zv[i]);
    want.push_back((1 - t * t) * wv[i]);
  }
  // float32 forward and backward: a few roundings of values below 1 (rtol 1e-5 covers ~20 ulps).
  EXPECT_TRUE(all_close(out[0].array(), want, 1e-5, 1e-6));
}

TEST(OnnxTraining, GradientErrorsNameTheNode) {
  GraphBuilder b;
  b.input("a", ElemType::Float, 1);
  b.node("Neg", {"a"});
  b.output(b.node_n("Gradient", {"a"}, 1, {attr_strings("xs", {"a"}), attr_string("y", "nope")})[0]);
  onnx::Model m = training_model(b, {"Gradient"});
  Value a = Value::tensor(zeros({2}, float32));
  EXPECT_THROW_MSG(onnx::run(m, {a}), OnnxError, "Gradient 'Gradient_0'");
  EXPECT_THROW_MSG(onnx::run(m, {a}), OnnxError, "y 'nope' is not computed by a node of this graph");

  GraphBuilder b2;
  b2.input("a", ElemType::Float, 1);
  std::string n2 = b2.node("Neg", {"a"});
  b2.output(b2.node_n("Gradient", {"a", "a"}, 1, {attr_strings("xs", {"a"}), attr_string("y", n2)})[0]);
  EXPECT_THROW_MSG(onnx::run(training_model(b2, {"Gradient"}), {a}), OnnxError,
                   "takes one input per name of 'xs' then 'zs' (1), got 2");

  GraphBuilder b3;
  b3.input("i", ElemType::Int64, 1);
  std::string n3 = b3.node("Neg", {"i"});
  b3.output(b3.node_n("Gradient", {"i"}, 1, {attr_strings("xs", {"i"}), attr_string("y", n3)})[0]);
  EXPECT_THROW_MSG(onnx::run(training_model(b3, {"Gradient"}), {Value::tensor(zeros({2}, int64))}), OnnxError,
                   "xs 'i' (input 0) is tensor(int64)[2]; only floating-point tensors can be differentiated");
}

TEST(OnnxTraining, GradientAttributeAndGraphErrors) {
  Value a = Value::tensor(zeros({2}, float32));
  {  // a name twice
    GraphBuilder b;
    b.input("a", ElemType::Float, 1);
    std::string n = b.node("Neg", {"a"});
    b.output(b.node_n("Gradient", {"a", "a"}, 1, {attr_strings("xs", {"a"}), attr_strings("zs", {"a"}), attr_string("y", n)})[0]);
    EXPECT_THROW_MSG(onnx::run(training_model(b, {"Gradient"}), {a}), OnnxError, "a name appears twice in 'xs' and 'zs'");
  }
  {  // more outputs than xs
    GraphBuilder b;
    b.input("a", ElemType::Float, 1);
    std::string n = b.node("Neg", {"a"});
    auto g = b.node_n("Gradient", {"a"}, 2, {attr_strings("xs", {"a"}), attr_string("y", n)});
    b.output(g[0]);
    EXPECT_THROW_MSG(onnx::run(training_model(b, {"Gradient"}), {a}), OnnxError,
                     "2 outputs named; it has one per name of 'xs' (1)");
  }
  {  // y computed from the Gradient node's own output
    GraphBuilder b;
    b.input("a", ElemType::Float, 1);
    auto g = b.node_n("Gradient", {"a"}, 1, {attr_strings("xs", {"a"}), attr_string("y", "Neg_0:0")});
    b.output(b.node("Neg", {g[0]}));
    EXPECT_THROW_MSG(onnx::run(training_model(b, {"Gradient"}), {a}), OnnxError,
                     "y 'Neg_0:0' depends on this Gradient node's own output 'Gradient_0:0'");
  }
  {  // an integer y
    GraphBuilder b;
    b.input("a", ElemType::Float, 1);
    std::string n = b.node("Cast", {"a"}, {attr_int("to", 7)});
    b.output(b.node_n("Gradient", {"a"}, 1, {attr_strings("xs", {"a"}), attr_string("y", n)})[0]);
    EXPECT_THROW_MSG(onnx::run(training_model(b, {"Gradient"}), {a}), OnnxError,
                     "y 'Cast_0:0' is tensor(int64)[2]; only a floating-point tensor can be differentiated");
  }
  {  // no xs
    GraphBuilder b;
    b.input("a", ElemType::Float, 1);
    b.output(b.node_n("Gradient", {"a"}, 1, {attr_string("y", "a")})[0]);
    EXPECT_THROW_MSG(onnx::run(training_model(b, {"Gradient"}), {a}), OnnxError,
                     "attribute 'xs' (the tensors to differentiate with respect to) is missing or empty");
  }
}

// ---------------------------------------------------------------------------------------------
// Optimizers: the spec's formulas on the host in float64
// ---------------------------------------------------------------------------------------------

struct OptCase {
  std::string op;
  std::vector<onnx::Attribute> attrs;
  size_t groups;  // inputs per tensor: X, G and the states
};

std::vector<Value> run_optimizer(const OptCase& oc, double r, int64_t t, const std::vector<Array>& tensors) {
  GraphBuilder b;
  b.constant("R", Array(r));
  b.constant("T", Array(t));
  std::vector<std::string> ins{"R", "T"};
  for (size_t i = 0; i < tensors.size(); ++i) ins.push_back(b.input("in" + std::to_string(i), ElemType::Double, 1));
  auto outs = b.node_n(oc.op, ins, oc.groups - 1, oc.attrs);
  for (const auto& o : outs) b.output(o);
  std::vector<Value> vals;
  for (const auto& a : tensors) vals.push_back(Value::tensor(a));
  return onnx::run(training_model(b, {oc.op}), vals);
}

TEST(OnnxTraining, OptimizersMatchTheSpecInFloat64) {
  Array x = random_array({5}, float64, -1, 1, 10), g = random_array({5}, float64, -1, 1, 11);
  Array v = random_array({5}, float64, -1, 1, 12), h = random_array({5}, float64, 0.1, 1, 13);
  auto X = host(x), G = host(g), V = host(v), H = host(h);
  const double r = 0.1;
  for (int64_t t : {0, 3}) {
    SCOPED_TRACE("T = " + std::to_string(t));
    {  // Momentum, nesterov
      auto out = run_optimizer({"Momentum", {attr_float("alpha", 0.9f), attr_float("beta", 0.5f),
                                             attr_float("norm_coefficient", 0.01f), attr_string("mode", "nesterov")}, 3},
                               r, t, {x, g, v});
      std::vector<double> wx, wv;
      const double alpha = 0.9f, beta = t > 0 ? 0.5 : 1.0, nc = 0.01f;
      for (size_t i = 0; i < 5; ++i) {
        double gr = nc * X[i] + G[i], vn = alpha * V[i] + beta * gr;
        wv.push_back(vn);
        wx.push_back(X[i] - r * (gr + alpha * vn));
      }
      EXPECT_TRUE(all_close(out[0].array(), wx, 1e-14, 1e-15));
      EXPECT_TRUE(all_close(out[1].array(), wv, 1e-14, 1e-15));
    }
    {  // Adagrad
      auto out = run_optimizer({"Adagrad", {attr_float("decay_factor", 0.1f), attr_float("epsilon", 1e-6f),
                                            attr_float("norm_coefficient", 0.01f)}, 3},
                               r, t, {x, g, h});
      std::vector<double> wx, wh;
      const double decay = 0.1f, eps = 1e-6f, nc = 0.01f;
      for (size_t i = 0; i < 5; ++i) {
        double gr = nc * X[i] + G[i], hn = H[i] + gr * gr, ra = r / (1 + t * decay);
        wh.push_back(hn);
        wx.push_back(X[i] - ra * gr / (std::sqrt(hn) + eps));
      }
      EXPECT_TRUE(all_close(out[0].array(), wx, 1e-14, 1e-15));
      EXPECT_TRUE(all_close(out[1].array(), wh, 1e-14, 1e-15));
    }
    {  // Adam with both weight decays
      auto out = run_optimizer({"Adam", {attr_float("alpha", 0.9f), attr_float("beta", 0.99f), attr_float("epsilon", 1e-6f),
                                         attr_float("norm_coefficient", 0.01f), attr_float("norm_coefficient_post", 0.02f)}, 4},
                               r, t, {x, g, v, h});
      std::vector<double> wx, wv, wh;
      const double alpha = 0.9f, beta = 0.99f, eps = 1e-6f, nc = 0.01f, post = 0.02f;
      const double ra = t > 0 ? r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : r;
      for (size_t i = 0; i < 5; ++i) {
        double gr = nc * X[i] + G[i];
        double vn = alpha * V[i] + (1 - alpha) * gr, hn = beta * H[i] + (1 - beta) * gr * gr;
        wv.push_back(vn);
        wh.push_back(hn);
        wx.push_back((1 - post) * (X[i] - ra * vn / (std::sqrt(hn) + eps)));
      }
      // pow and sqrt of the bias correction: a few ulps in float64.
      EXPECT_TRUE(all_close(out[0].array(), wx, 1e-13, 1e-15));
      EXPECT_TRUE(all_close(out[1].array(), wv, 1e-14, 1e-15));
      EXPECT_TRUE(all_close(out[2].array(), wh, 1e-14, 1e-15));
    }
  }
}

TEST(OnnxTraining, OptimizerErrorsNameTheNode) {
  Array x = zeros({3}, float64);
  EXPECT_THROW_MSG(run_optimizer({"Momentum", {}, 3}, 0.1, 0, {x, x}), OnnxError,
                   "Momentum 'Momentum_0'");
  EXPECT_THROW_MSG(run_optimizer({"Momentum", {}, 3}, 0.1, 0, {x, x}), OnnxError,
                   "takes R, T and 3 inputs per optimized tensor, got 4 inputs");
  EXPECT_THROW_MSG(run_optimizer({"Adagrad", {}, 3}, 0.1, 0, {x, x, zeros({4}, float64)}), OnnxError,
                   "input 4 is tensor(double)[4]; optimized tensor 0 (input 2) is tensor(double)[3]");
  EXPECT_THROW_MSG(run_optimizer({"Momentum", {attr_string("mode", "heavy")}, 3}, 0.1, 0, {x, x, x}), OnnxError,
                   "mode must be 'standard' or 'nesterov', got 'heavy'");
  // R and T must be one-element tensors; no more outputs than the updates it makes.
  GraphBuilder b;
  b.input("R", ElemType::Float, 1);
  b.input("T", ElemType::Int64, 1);
  b.input("X", ElemType::Float, 1);
  b.input("G", ElemType::Float, 1);
  b.input("H", ElemType::Float, 1);
  auto outs = b.node_n("Adagrad", {"R", "T", "X", "G", "H"}, 2);
  b.output(outs[0]);
  onnx::Model m = training_model(b, {"Adagrad"});
  Value v3 = Value::tensor(zeros({3}, float32)), r1 = Value::tensor(zeros({1}, float32));
  Value t1 = Value::tensor(zeros({1}, int64));
  EXPECT_THROW_MSG(onnx::run(m, {Value::tensor(zeros({2}, float32)), t1, v3, v3, v3}), OnnxError,
                   "R must be a scalar, got tensor(float)[2]");
  EXPECT_THROW_MSG(onnx::run(m, {r1, Value::tensor(zeros({2}, int64)), v3, v3, v3}), OnnxError,
                   "T must be a scalar, got tensor(int64)[2]");
  EXPECT_NO_THROW(onnx::run(m, {r1, t1, v3, v3, v3}));
  GraphBuilder b2;
  for (const char* n : {"R", "T", "X", "G", "H"}) b2.input(n, n[0] == 'T' ? ElemType::Int64 : ElemType::Float, 1);
  auto outs2 = b2.node_n("Adagrad", {"R", "T", "X", "G", "H"}, 3);
  b2.output(outs2[0]);
  EXPECT_THROW_MSG(onnx::run(training_model(b2, {"Adagrad"}), {r1, t1, v3, v3, v3}), OnnxError,
                   "3 outputs named; it has 2");
}

TEST(OnnxTraining, OptimizerStepCountCanBeTraced) {
  // R and T are arrays in the op, so a compiled call takes new values without a retrace.
  GraphBuilder b;
  b.input("R", ElemType::Double, 0);
  b.input("T", ElemType::Int64, 0);
  for (const char* n : {"X", "G", "V", "H"}) b.input(n, ElemType::Double, 1);
  auto outs = b.node_n("Adam", {"R", "T", "X", "G", "V", "H"}, 3);
  for (const auto& o : outs) b.output(o);
  onnx::Model m = training_model(b, {"Adam"});
  Array x = random_array({4}, float64, -1, 1, 20), g = random_array({4}, float64, -1, 1, 21);
  Array v = random_array({4}, float64, -1, 1, 22), h = random_array({4}, float64, 0.1, 1, 23);
  auto f = compile_flat([&](const std::vector<Array>& in) {
    std::vector<Value> vals;
    for (const auto& a : in) vals.push_back(Value::tensor(a));
    return std::vector<Array>{onnx::run(m, vals)[0].array()};
  });
  for (int64_t t : {0, 1, 5}) {
    std::vector<Array> in{Array(0.01), Array(t), x, g, v, h};
    std::vector<Value> vals;
    for (const auto& a : in) vals.push_back(Value::tensor(a));
    EXPECT_TRUE(bit_equal(f(in)[0], onnx::run(m, vals)[0].array())) << "T = " << t;
  }
  EXPECT_EQ(f.stats().traces, 1u);
}

// ---------------------------------------------------------------------------------------------
// Dropout in training mode
// ---------------------------------------------------------------------------------------------

onnx::Model dropout_model(bool with_seed = false) {
  GraphBuilder b;
  b.input("x", ElemType::Float, 2);
  b.input("ratio", ElemType::Float, 0);
  b.input("training", ElemType::Bool, 0);
  std::vector<onnx::Attribute> attrs;
  if (with_seed) attrs.push_back(attr_int("seed", 7));
  auto outs = b.node_n("Dropout", {"x", "ratio", "training"}, 2, attrs);
  b.output(outs[0]);
  b.output(outs[1]);
  return make_model(b.graph(), 13);
}

std::vector<Value> dropout(const onnx::Model& m, const Array& x, float ratio, bool training,
                           const onnx::RunOptions& options = {}) {
  return onnx::run(m, {Value::tensor(x), Value::tensor(Array(ratio)), Value::tensor(Array(training))}, options);
}

TEST(OnnxTraining, DropoutTrainingIsDeterministicGivenTheKey) {
  onnx::Model m = dropout_model();
  Array x = random_array({100, 100}, float32, -3, 3, 30);
  const float ratio = 0.3f;
  auto a = dropout(m, x, ratio, true, {.key = random::key(1)});
  auto b = dropout(m, x, ratio, true, {.key = random::key(1)});
  auto c = dropout(m, x, ratio, true, {.key = random::key(2)});
  EXPECT_TRUE(bit_equal(a[0].array(), b[0].array()));
  EXPECT_TRUE(bit_equal(a[1].array(), b[1].array()));
  EXPECT_FALSE(bit_equal(a[1].array(), c[1].array()));
  // Kept elements are x / (1 - ratio) (one float32 multiply by the rounded scale), dropped are 0.
  auto xv = host(x), y = host(a[0].array()), keep = host(a[1].array());
  const float scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(ratio)));
  size_t kept = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    kept += keep[i] != 0;
    double want = keep[i] != 0 ? static_cast<double>(static_cast<float>(xv[i]) * scale) : 0.0;
    ASSERT_EQ(y[i], want) << "element " << i;
  }
  // 10000 draws kept with p = 0.7: mean 7000, standard deviation sqrt(10000·0.7·0.3) ≈ 46;
  // 6 standard deviations either side.
  EXPECT_NEAR(static_cast<double>(kept), 7000.0, 6 * 46.0);
  EXPECT_EQ(a[1].array().dtype(), bool_);
}

TEST(OnnxTraining, DropoutDrawsFromTheThreadSequenceWithoutAKey) {
  onnx::Model m = dropout_model();
  Array x = random_array({8, 8}, float32, 1, 2, 31);
  eval({x});
  // Successive runs draw new masks; a fresh thread starts the same sequence again.
  auto masks = [&] {
    std::vector<Array> out;
    std::thread t([&] {
      for (int i = 0; i < 2; ++i) out.push_back(dropout(m, x, 0.5f, true)[1].array());
    });
    t.join();
    return out;
  };
  auto first = masks(), second = masks();
  EXPECT_FALSE(bit_equal(first[0], first[1]));
  EXPECT_TRUE(bit_equal(first[0], second[0]));
  EXPECT_TRUE(bit_equal(first[1], second[1]));
  // A seed attribute draws the same values on every run.
  onnx::Model seeded = dropout_model(true);
  EXPECT_TRUE(bit_equal(dropout(seeded, x, 0.5f, true)[1].array(), dropout(seeded, x, 0.5f, true)[1].array()));
}

TEST(OnnxTraining, DropoutOutsideTrainingIsTheIdentity) {
  onnx::Model m = dropout_model();
  Array x = random_array({3, 4}, float32, -1, 1, 32);
  for (auto [ratio, training] : {std::pair{0.5f, false}, std::pair{0.0f, true}}) {
    auto out = dropout(m, x, ratio, training);
    EXPECT_TRUE(bit_equal(out[0].array(), x));
    EXPECT_TRUE(bit_equal(out[1].array(), ones({3, 4}, bool_)));
  }
}

TEST(OnnxTraining, DropoutErrors) {
  onnx::Model m = dropout_model();
  Array x = zeros({2, 2}, float32);
  EXPECT_THROW_MSG(dropout(m, x, 1.5f, true), OnnxError, "Dropout 'Dropout_0'");
  EXPECT_THROW_MSG(dropout(m, x, 1.5f, true), OnnxError, "ratio must be in [0, 1], got 1.5");
  EXPECT_THROW_MSG(dropout(m, x, 0.5f, true, {.key = zeros({2}, float32)}), InvalidArgument,
                   "run: RunOptions::key must be a uint32[2] key (random::key), got float32[2]");
}

TEST(OnnxTraining, CompiledModelsDrawNewDropoutMasksEachCall) {
  onnx::Model m = dropout_model();
  Array x = random_array({8, 8}, float32, 1, 2, 33);
  std::vector<Value> in{Value::tensor(x), Value::tensor(Array(0.5f)), Value::tensor(Array(true))};
  onnx::CompiledModel cm = onnx::compile(m);
  Array m1 = cm(in)[1].array(), m2 = cm(in)[1].array();
  EXPECT_FALSE(bit_equal(m1, m2));
  bool reason = false;
  for (const auto& s : cm.overlay().segments) reason = reason || s.reason.find("random operator") != std::string::npos;
  EXPECT_TRUE(reason);
  // The same key gives the compiled model the eager run's values.
  EXPECT_TRUE(bit_equal(cm(in, {.key = random::key(5)})[0].array(), onnx::run(m, in, {.key = random::key(5)})[0].array()));
}

// ---------------------------------------------------------------------------------------------
// Gradients with respect to a model's initializers
// ---------------------------------------------------------------------------------------------


TEST(OnnxTraining, ParametersAreTheFloatInitializers) {
  onnx::Model m = tiny_training_model();
  Params p = onnx::parameters(m);
  std::vector<std::string> names;
  for (const auto& [n, a] : p) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"b1", "b2", "beta", "emb", "gamma", "w1", "w2"}));
}

TEST(OnnxTraining, GradientsOfAModelMatchFiniteDifferences) {
  onnx::Model m = tiny_training_model();
  Params params = onnx::parameters(m);
  Array ids(std::vector<int64_t>{1, 4, 9, 4, 0, 7}, Shape{2, 3});
  Array w = random_array({2, 3, 5}, float64, -1, 1, 47);
  auto loss = [&](const Params& p) {
    auto out = onnx::run(m, {Value::tensor(ids)}, {.initializers = p});
    return sum(out[0].array() * w);
  };
  Params g = grad(loss)(params);
  ASSERT_EQ(g.size(), params.size());
  // Central differences along a random direction per parameter: |F| <= 6 and the third
  // derivatives of these smooth layers stay below ~1e3 on these inputs (no Relu input lies within
  // 1e-3 of its kink here, checked by the result), so with h = 1e-5 the difference is within
  // 1e3·1e-10/6 + 2.2e-16·6/1e-5 ≈ 2e-8 of <g, u>; 1e-6 relative to 1 + |<g, u>| is above that.
  const double h = 1e-5;
  uint32_t seed = 50;
  for (const auto& [name, p] : params) {
    SCOPED_TRACE(name);
    Array u = random_array(p.shape(), float64, -1, 1, seed++);
    Params plus = params, minus = params;
    plus[name] = p + u * h;
    minus[name] = p - u * h;
    double fd = (loss(plus).item<double>() - loss(minus).item<double>()) / (2 * h);
    double an = sum(g.at(name) * u).item<double>();
    EXPECT_NEAR(an, fd, 1e-6 * (1 + std::abs(an)));
  }
  // The gradient of the embedding is zero on rows no id selects.
  auto ge = host(g.at("emb"));
  for (int64_t row : {2, 3, 5, 6, 8})
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(ge[static_cast<size_t>(row * 4 + j)], 0.0);
  // Compiled gradients equal the uncompiled ones bit for bit.
  auto compiled = compile(grad(loss));
  Params gc = compiled(params);
  for (const auto& [name, a] : g) EXPECT_TRUE(bit_equal(gc.at(name), a)) << name;
}

TEST(OnnxTraining, InitializerOverrideErrors) {
  onnx::Model m = tiny_training_model();
  Value ids = Value::tensor(Array(std::vector<int64_t>{1, 2}, Shape{1, 2}));
  EXPECT_THROW_MSG(onnx::run(m, {ids}, {.initializers = {{"w3", zeros({2}, float64)}}}), OnnxError,
                   "run: RunOptions::initializers names 'w3', which is not an initializer of the model (its "
                   "floating-point initializers are: emb, gamma, beta, w1, b1, w2, b2)");
  EXPECT_THROW_MSG(onnx::run(m, {ids}, {.initializers = {{"w1", zeros({4, 6}, float32)}}}), OnnxError,
                   "run: RunOptions::initializers['w1'] is float32[4,6]; the initializer is tensor(double)[4,6]");
  EXPECT_THROW_MSG(onnx::run(m, {ids}, {.initializers = {{"w1", zeros({6, 4}, float64)}}}), OnnxError,
                   "run: RunOptions::initializers['w1'] is float64[6,4]; the initializer is tensor(double)[4,6]");
  EXPECT_THROW_MSG(onnx::run(m, {ids}, {.initializers = {{"w1", Array()}}}), InvalidArgument,
                   "run: RunOptions::initializers['w1'] is an empty array handle");
  // An initializer that is also a graph input: given one way or the other, not both.
  GraphBuilder b;
  b.input("x", ElemType::Float, 1);
  b.input("w", ElemType::Float, 1);
  b.constant("w", ones({3}, float32));
  b.output(b.node("Mul", {"x", "w"}));
  onnx::Model mw = make_model(b.graph());
  Value x = Value::tensor(ones({3}, float32));
  EXPECT_TRUE(bit_equal(onnx::run(mw, {x}, {.initializers = {{"w", full({3}, Array(2.0f))}}})[0].array(),
                        full({3}, Array(2.0f))));
  EXPECT_THROW_MSG(onnx::run(mw, {x, x}, {.initializers = {{"w", ones({3}, float32)}}}), OnnxError,
                   "run: 'w' is given both as a graph input and in RunOptions::initializers");
}

TEST(OnnxTraining, CompiledModelsRefuseInitializerOverrides) {
  onnx::Model m = tiny_training_model();
  std::vector<Value> in{Value::tensor(Array(std::vector<int64_t>{1, 2}, Shape{1, 2}))};
  onnx::CompiledModel cm = onnx::compile(m);
  EXPECT_THROW_MSG(cm(in, {.initializers = onnx::parameters(m)}), OnnxError,
                   "compiled model: RunOptions::initializers is not supported by compiled models");
}

TEST(OnnxTraining, TracedRunsDrawDropoutFromATracedKey) {
  // smelt::compile of onnx::run: the key is an input of the trace, so each call's key is used.
  onnx::Model m = dropout_model();
  Array x = random_array({8, 8}, float32, 1, 2, 34);
  auto f = compile_flat([&](const std::vector<Array>& in) {
    auto out = dropout(m, in[0], 0.5f, true, {.key = in[1]});
    return std::vector<Array>{out[0].array()};
  });
  for (uint64_t seed : {1u, 2u}) {
    Array key = random::key(seed);
    EXPECT_TRUE(bit_equal(f({x, key})[0], dropout(m, x, 0.5f, true, {.key = key})[0].array())) << seed;
  }
  EXPECT_EQ(f.stats().traces, 1u);
  // Without a traced key the draw would be frozen into the trace: the trace refuses, so the
  // function runs eagerly (compile's fallback) and each call draws a new mask.
  auto body = [&](const std::vector<Array>& in) {
    return std::vector<Array>{dropout(m, in[0], 0.5f, true)[1].array()};
  };
  auto eager = compile_flat(body);
  EXPECT_FALSE(bit_equal(eager({x})[0], eager({x})[0]));
  EXPECT_EQ(eager.stats().fallbacks, 1u);
  auto strict = compile_flat(body, {.fallback = CompileFallback::Raise});
  EXPECT_THROW_MSG(strict({x}), UnknownValueError,
                   "Dropout 'Dropout_0': Dropout in training mode draws new values on every run");
}

// The runner records each ONNX node as the origin of what it builds under a transform, so a
// missing vjp rule would name the node (every primitive an operator builds has a rule today: the
// origin's message is tested in tests/transforms/origin_test.cpp); here, that the record is made.
TEST(OnnxTraining, RunUnderATransformRecordsTheOnnxNode) {
  GraphBuilder b;
  b.input("x", ElemType::Float, 1);
  b.constant("data", random_array({4}, float32, 1, 2, 60));
  b.constant("idx", Array(std::vector<int64_t>{0, 2}, Shape{2}));
  std::string upd = b.node("Neg", {"x"});
  onnx::Attribute red = attr_string("reduction", "mul");
  std::string s = b.node("ScatterElements", {"data", "idx", upd}, {red});
  b.output(s);
  onnx::Model m = make_model(b.graph(), 18);
  std::string seen;
  auto loss = [&](const Params& p) {
    Array out = onnx::run(m, {Value::tensor(random_array({2}, float32, 1, 2, 61))}, {.initializers = p})[0].array();
    seen = transforms::origin_of(out);
    return sum(out);
  };
  auto g = grad(loss)(onnx::parameters(m));
  EXPECT_EQ(seen, "ONNX node ScatterElements 'ScatterElements_0'");
  ASSERT_TRUE(g.count("data"));
  EXPECT_EQ(g.at("data").shape(), Shape{4});
}

fs::path repo_root() { return fs::path(__FILE__).parent_path().parent_path().parent_path(); }

TEST(OnnxTraining, SgdStepsOnTheBundledTransformerLowerTheLoss) {
  // Next-token cross-entropy on a fixed batch; a few plain SGD steps over every initializer.
  onnx::Model m = onnx::load((repo_root() / "models" / "tiny_transformer.onnx").string());
  Params params = onnx::parameters(m);
  Array ids = random::randint(random::key(3), 0, 1000, {2, 16}, int64);
  Array targets = random::randint(random::key(4), 0, 1000, {2, 16, 1}, int64);
  auto loss = [&](const Params& p) {
    auto out = onnx::run_named(m, {{"input_ids", Value::tensor(ids)}}, {.initializers = p});
    Array logp = log_softmax(out.at("logits").array(), {-1});
    return -mean(take_along_axis(logp, targets, -1));
  };
  auto step = value_and_grad(loss);
  std::vector<double> losses;
  // The tied N(0, 1) embeddings give large logits (a loss near 80 at the start) and large
  // gradients: a small step keeps plain SGD from overshooting.
  const float lr = 0.01f;
  for (int i = 0; i < 4; ++i) {
    auto [l, g] = step(params);
    losses.push_back(l.item<double>());
    for (auto& [name, p] : params) p = p - g.at(name) * lr;
    eval([&] {
      std::vector<Array> all;
      for (const auto& [n, p] : params) all.push_back(p);
      return all;
    }());
  }
  for (size_t i = 1; i < losses.size(); ++i) EXPECT_LT(losses[i], losses[i - 1]) << "step " << i;
}

}  // namespace
}  // namespace smelt::test
