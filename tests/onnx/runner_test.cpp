// Tests of the eager ONNX runner: input checks, graph order, subgraphs, registry, and ONNX type rules.
#include <cmath>

#include "onnx/onnx_test_helpers.h"
#include "smelt/compile.h"
#include "src/onnx/registry.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

using onnx::ElemType;
using onnx::Value;

pb::ModelProto binary_model(const std::string& op, int elem_type, const std::vector<int64_t>& a,
                            const std::vector<int64_t>& b, const std::vector<int64_t>& out, int64_t opset = 18) {
  pb::GraphProto g;
  g.set_name("g");
  *g.add_node() = make_node(op, {"a", "b"}, {"y"}, "n0");
  *g.add_input() = tensor_info("a", elem_type, a);
  *g.add_input() = tensor_info("b", elem_type, b);
  *g.add_output() = tensor_info("y", elem_type, out);
  return make_model(g, opset);
}

TEST(OnnxRunner, InputErrorsNameTheInput) {
  onnx::Model m = load_proto(binary_model("Add", pb::TensorProto::FLOAT, {2, 3}, {2, 3}, {2, 3}));
  Value f = Value::tensor(random_array({2, 3}, float32));
  EXPECT_THROW_MSG(onnx::run(m, {f}), OnnxError, "run: missing input 'b' (tensor(float)[2,3])");
  EXPECT_THROW_MSG(onnx::run(m, {f, Value::tensor(random_array({2, 3}, float64))}), OnnxError,
                   "run: input 'b' expects tensor(float)[2,3], got tensor(double)[2,3]");
  EXPECT_THROW_MSG(onnx::run(m, {f, Value::tensor(random_array({6}, float32))}), OnnxError,
                   "run: input 'b' expects tensor(float)[2,3], got tensor(float)[6]");
  EXPECT_THROW_MSG(onnx::run(m, {f, f, f}), OnnxError, "run: 3 inputs given; the model takes 2");
  std::map<std::string, Value> named{{"a", f}, {"bee", f}};
  EXPECT_THROW_MSG(onnx::run_named(m, named), OnnxError, "run: unknown input 'bee' (the model's inputs are: a, b)");
  onnx::StringTensor s{{2, 3}, {"a", "b", "c", "d", "e", "f"}};
  EXPECT_THROW_MSG(onnx::run(m, {f, Value::strings(s)}), OnnxError, "expects tensor(float)[2,3], got tensor(string)[2,3]");
}

TEST(OnnxRunner, AddMatchesReferenceAndNamedRun) {
  onnx::Model m = load_proto(binary_model("Add", pb::TensorProto::FLOAT, {2, 3}, {3}, {2, 3}));
  Array a = random_array({2, 3}, float32, -5, 5, 1), b = random_array({3}, float32, -5, 5, 2);
  auto out = onnx::run_named(m, std::map<std::string, Value>{{"a", Value::tensor(a)}, {"b", Value::tensor(b)}});
  auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> want;
  for (size_t i = 0; i < 6; ++i) want.push_back(static_cast<float>(av[i] + bv[i % 3]));
  EXPECT_TRUE(all_close(out.at("y").array(), want, 0, 0));
}

TEST(OnnxRunner, OnnxTypeRulesAreStricterThanNumpy) {
  // Add needs one shared type; NumPy would promote.
  pb::GraphProto g;
  g.set_name("g");
  *g.add_node() = make_node("Add", {"a", "b"}, {"y"}, "mixed");
  *g.add_input() = tensor_info("a", pb::TensorProto::FLOAT, {2});
  *g.add_input() = tensor_info("b", pb::TensorProto::DOUBLE, {2});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {2});
  onnx::Model m = load_proto(make_model(g));
  EXPECT_THROW_MSG(onnx::run(m, {Value::tensor(zeros({2}, float32)), Value::tensor(zeros({2}, float64))}), OnnxError,
                   "Add 'mixed' (inputs tensor(float)[2], tensor(double)[2]): inputs 0 and 1 must have the same type, got tensor(float)[2] and tensor(double)[2]");
  // Integer Div truncates toward zero (C), unlike NumPy's floor division; Mod follows the divisor.
  onnx::Model div = load_proto(binary_model("Div", pb::TensorProto::INT32, {4}, {4}, {4}));
  Value a = Value::tensor(Array(std::vector<int32_t>{7, -7, 7, -7}, Shape{4}));
  Value b = Value::tensor(Array(std::vector<int32_t>{2, 2, -2, -2}, Shape{4}));
  auto q = onnx::run(div, {a, b})[0];
  EXPECT_EQ(q.array().dtype(), int32);
  EXPECT_EQ(q.array().to_vector<int>(), (std::vector<int>{3, -3, -3, 3}));
  onnx::Model mod = load_proto(binary_model("Mod", pb::TensorProto::INT32, {4}, {4}, {4}));
  EXPECT_EQ(onnx::run(mod, {a, b})[0].array().to_vector<int>(), (std::vector<int>{1, 1, -1, -1}));
  // Sqrt of an integer tensor is not an ONNX operation.
  onnx::Model sq = load_proto(unary_model("Sqrt", pb::TensorProto::INT32, {2}));
  EXPECT_THROW_MSG(onnx::run(sq, {Value::tensor(Array(std::vector<int32_t>{4, 9}, Shape{2}))}), OnnxError,
                   "Sqrt 'n0' (inputs tensor(int32)[2]): input 0 has type int32; allowed: float, double, float16, bfloat16");
}

TEST(OnnxRunner, NodesRunInTopologicalOrder) {
  pb::GraphProto g;
  g.set_name("g");
  // Listed out of order: y = Neg(t), t = Relu(x).
  *g.add_node() = make_node("Neg", {"t"}, {"y"});
  *g.add_node() = make_node("Relu", {"x"}, {"t"});
  *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {4});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {4});
  onnx::Model m = load_proto(make_model(g));
  auto out = onnx::run(m, {Value::tensor(Array(std::vector<float>{-1, 2, -3, 4}, Shape{4}))});
  EXPECT_TRUE(all_close(out[0].array(), {0, -2, 0, -4}, 0, 0));

  pb::GraphProto cyc;
  cyc.set_name("c");
  *cyc.add_node() = make_node("Neg", {"b"}, {"a"}, "first");
  *cyc.add_node() = make_node("Neg", {"a"}, {"b"}, "second");
  *cyc.add_output() = tensor_info("a", pb::TensorProto::FLOAT, {1});
  EXPECT_THROW_MSG(onnx::run(load_proto(make_model(cyc)), std::vector<Value>{}), OnnxError,
                   "Neg 'first': the graph has a cycle through this node");

  pb::GraphProto dangling;
  dangling.set_name("d");
  *dangling.add_node() = make_node("Neg", {"ghost"}, {"y"}, "lost");
  *dangling.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {1});
  EXPECT_THROW_MSG(onnx::run(load_proto(make_model(dangling)), std::vector<Value>{}), OnnxError,
                   "Neg 'lost': input 'ghost' is neither a graph input, an initializer, nor the output of another node");
}

/// If 'if' on input "c", writing "y", with the two branches given.
pb::NodeProto if_node(const pb::GraphProto& then_branch, const pb::GraphProto& else_branch) {
  auto n = make_node("If", {"c"}, {"y"}, "if");
  add_graph_attr(n, "then_branch", then_branch);
  add_graph_attr(n, "else_branch", else_branch);
  return n;
}

TEST(OnnxRunner, IfBranchReadsOuterScope) {
  auto branch = [](const std::string& op) {
    pb::GraphProto b;
    b.set_name(op);
    *b.add_node() = make_node(op, {"x"}, {"r"});  // x comes from the enclosing graph
    *b.add_output() = tensor_info("r", pb::TensorProto::FLOAT, {3});
    return b;
  };
  pb::GraphProto g;
  g.set_name("g");
  *g.add_node() = if_node(branch("Neg"), branch("Abs"));
  *g.add_input() = tensor_info("c", pb::TensorProto::BOOL, {});
  *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {3});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {3});
  onnx::Model m = load_proto(make_model(g));
  Value x = Value::tensor(Array(std::vector<float>{-1, 2, -3}, Shape{3}));
  EXPECT_TRUE(all_close(onnx::run(m, {Value::tensor(Array(true)), x})[0].array(), {1, -2, 3}, 0, 0));
  EXPECT_TRUE(all_close(onnx::run(m, {Value::tensor(Array(false)), x})[0].array(), {1, 2, 3}, 0, 0));
}

TEST(OnnxRunner, SubgraphReadOfALaterNodeRunsItFirst) {
  // The If is listed before the node that makes the value its branches read: the runner's
  // file-order fast path must see the subgraph's read and order the graph by its dependencies.
  auto branch = [](const std::string& op) {
    pb::GraphProto b;
    b.set_name(op);
    *b.add_node() = make_node(op, {"t"}, {"r"});  // t is made by a node listed after the If
    *b.add_output() = tensor_info("r", pb::TensorProto::FLOAT, {3});
    return b;
  };
  pb::GraphProto g;
  g.set_name("g");
  *g.add_node() = if_node(branch("Neg"), branch("Abs"));
  *g.add_node() = make_node("Relu", {"x"}, {"t"}, "later");
  *g.add_input() = tensor_info("c", pb::TensorProto::BOOL, {});
  *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {3});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {3});
  onnx::Model m = load_proto(make_model(g));
  Value x = Value::tensor(Array(std::vector<float>{-1, 2, -3}, Shape{3}));
  EXPECT_TRUE(all_close(onnx::run(m, {Value::tensor(Array(true)), x})[0].array(), {0, -2, 0}, 0, 0));
}

TEST(OnnxRunner, LoopCarriesStateAndStacksScanOutputs) {
  // for i in range(M): s = s + i; scan out s.
  pb::GraphProto body;
  body.set_name("body");
  *body.add_input() = tensor_info("i", pb::TensorProto::INT64, {});
  *body.add_input() = tensor_info("cond_in", pb::TensorProto::BOOL, {});
  *body.add_input() = tensor_info("s_in", pb::TensorProto::INT64, {});
  *body.add_node() = make_node("Identity", {"cond_in"}, {"cond_out"});
  *body.add_node() = make_node("Add", {"s_in", "i"}, {"s_out"});
  *body.add_node() = make_node("Identity", {"s_out"}, {"scan"});
  *body.add_output() = tensor_info("cond_out", pb::TensorProto::BOOL, {});
  *body.add_output() = tensor_info("s_out", pb::TensorProto::INT64, {});
  *body.add_output() = tensor_info("scan", pb::TensorProto::INT64, {});
  pb::GraphProto g;
  g.set_name("g");
  auto n = make_node("Loop", {"M", "", "s0"}, {"s", "all"});
  add_graph_attr(n, "body", body);
  *g.add_node() = n;
  *g.add_input() = tensor_info("M", pb::TensorProto::INT64, {});
  *g.add_input() = tensor_info("s0", pb::TensorProto::INT64, {});
  *g.add_output() = tensor_info("s", pb::TensorProto::INT64, {});
  *g.add_output() = tensor_info("all", pb::TensorProto::INT64, {5});
  onnx::Model m = load_proto(make_model(g));
  auto out = onnx::run(m, {Value::tensor(Array(int64_t{5})), Value::tensor(Array(int64_t{100}))});
  EXPECT_EQ(out[0].array().item<int64_t>(), 110);
  EXPECT_EQ(out[1].array().to_vector<int64_t>(), (std::vector<int64_t>{100, 101, 103, 106, 110}));
}

TEST(OnnxRunner, GemmMatchesFloat64Reference) {
  pb::GraphProto g;
  g.set_name("g");
  auto n = make_node("Gemm", {"a", "b", "c"}, {"y"});
  add_int_attr(n, "transB", 1);
  auto* alpha = n.add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(pb::AttributeProto::FLOAT);
  alpha->set_f(0.5f);
  *g.add_node() = n;
  *g.add_input() = tensor_info("a", pb::TensorProto::FLOAT, {3, 4});
  *g.add_input() = tensor_info("b", pb::TensorProto::FLOAT, {5, 4});
  *g.add_input() = tensor_info("c", pb::TensorProto::FLOAT, {5});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {3, 5});
  onnx::Model m = load_proto(make_model(g));
  Array a = random_array({3, 4}, float32, -2, 2, 31), b = random_array({5, 4}, float32, -2, 2, 32);
  Array c = random_array({5}, float32, -2, 2, 33);
  auto av = a.to_vector<double>(), bv = b.to_vector<double>(), cv = c.to_vector<double>();
  std::vector<double> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      double s = 0;
      for (int k = 0; k < 4; ++k) s += av[i * 4 + k] * bv[j * 4 + k];
      want.push_back(0.5 * s + cv[j]);
    }
  auto out = onnx::run(m, {Value::tensor(a), Value::tensor(b), Value::tensor(c)});
  EXPECT_TRUE(all_close(out[0].array(), want, 1e-5, 1e-5));
}


/// Runs one node on the given tensors (inputs named i0, i1, ...; one output).
std::vector<Value> run_node(pb::NodeProto node, const std::vector<Value>& inputs, int64_t opset = 18) {
  pb::GraphProto g;
  g.set_name("g");
  node.clear_input();
  for (size_t i = 0; i < inputs.size(); ++i) {
    node.add_input("i" + std::to_string(i));
    pb::ValueInfoProto info;
    info.set_name("i" + std::to_string(i));
    *g.add_input() = info;  // no declared type: any value is accepted
  }
  node.clear_output();
  node.add_output("y");
  *g.add_node() = node;
  pb::ValueInfoProto out;
  out.set_name("y");
  *g.add_output() = out;
  return onnx::run(load_proto(make_model(g, opset)), inputs);
}

Value ints_value(const std::vector<int64_t>& v) { return Value::tensor(Array(v, Shape{static_cast<int64_t>(v.size())})); }

// MatMul of a batch of short matrices by one matrix (a decode step's projection of [batch, 1, d]
// activations) is one product of all of A's rows: the bits of the 2-d product of the folded rows,
// within the float64 reference's bound, zero-size batches included; compiled equal to eager.
// Matrices of 16 rows or more stay a batched product.
TEST(OnnxRunner, MatMulOfABatchByAMatrixIsOneProductOfAllRows) {
  pb::GraphProto g;
  g.set_name("g");
  *g.add_node() = make_node("MatMul", {"a", "w"}, {"y"}, "mm");
  *g.add_input() = tensor_info("a", pb::TensorProto::FLOAT, {-1, -1, -1, 48});
  *g.add_input() = tensor_info("w", pb::TensorProto::FLOAT, {48, 40});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {-1, -1, -1, 40});
  const onnx::Model m = load_proto(make_model(g));
  const Array w = random_array({48, 40}, float32, -1, 1, 35);
  for (const Shape& lead : std::vector<Shape>{{2, 3, 5}, {8, 1, 1}, {1, 1, 7}, {0, 3, 5}, {2, 0, 1}, {2, 1, 20}}) {
    Shape as = lead;
    as.push_back(48);
    const Array a = random_array(as, float32, -1, 1, 36);
    auto out = onnx::run(m, {Value::tensor(a), Value::tensor(w)});
    const int64_t rows = lead[0] * lead[1] * lead[2];
    Shape ys = lead;
    ys.push_back(40);
    const Array want = lead[2] < 16 ? reshape(matmul(reshape(a, {rows, 48}), w), ys) : matmul(a, w);
    ASSERT_EQ(out[0].array().shape(), ys);
    EXPECT_TRUE(bit_equal(out[0].array(), want)) << shape_to_string(as);
    // Each output is a float32 sum of 48 products of values in [-1, 1): within 48 * 2^-24 * 48 of
    // the float64 sum (|a||w| <= 1 per term).
    auto av = a.to_vector<double>(), wv = w.to_vector<double>(), yv = out[0].array().to_vector<double>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < 40; ++j) {
        double s = 0;
        for (int64_t k = 0; k < 48; ++k) s += av[r * 48 + k] * wv[k * 40 + j];
        ASSERT_NEAR(yv[r * 40 + j], s, 48 * 48 * std::ldexp(1.0, -24)) << r << "," << j;
      }
    auto compiled = onnx::compile(m)({Value::tensor(a), Value::tensor(w)});
    EXPECT_TRUE(bit_equal(compiled[0].array(), out[0].array())) << shape_to_string(as);
  }
  // The node's steps, traced: one 2-d product of the 30 rows, not a batched one.
  std::string tape;
  CompileOptions o;
  o.dump = [&](const std::string&, const std::string& t) { tape = t; };
  auto traced = compile(
      [&](const std::vector<Array>& in) {
        return std::vector<Array>{onnx::run(m, {Value::tensor(in[0]), Value::tensor(in[1])})[0].array()};
      },
      o);
  auto matmul_line = [&](const Shape& as) {
    eval(traced({random_array(as, float32, -1, 1, 37), w}));
    const size_t at = tape.find("= Matmul()");
    return at == std::string::npos ? tape : tape.substr(at, tape.find('\n', at) - at);
  };
  std::string line = matmul_line({2, 3, 5, 48});
  EXPECT_NE(line.find(": float32[30,40]"), std::string::npos) << line;
  line = matmul_line({2, 3, 16, 48});
  EXPECT_NE(line.find(": float32[2,3,16,40]"), std::string::npos) << line;
}

// Relu is max(0, x) with NaN kept and +0.0 for -0.0 (ONNX names neither zero; a ReLU that never
// gives -0 lets the compiler pool before it without changing bits), in every float dtype.
TEST(OnnxRunner, ReluKeepsNaNAndGivesPositiveZero) {
  pb::NodeProto n = make_node("Relu", {"x"}, {"y"});
  const std::vector<double> in{-0.0, 0.0, -1.5, 2.5, NAN, -INFINITY, INFINITY};
  for (Dtype dt : {float32, float64, float16, bfloat16}) {
    const Array x = astype(Array(in, Shape{7}), dt);
    const Array y = run_node(n, {Value::tensor(x)})[0].array();
    ASSERT_EQ(y.dtype(), dt);
    const std::vector<double> v = as_doubles(y);
    for (size_t i : {0, 1, 2, 5}) EXPECT_TRUE(v[i] == 0.0 && !std::signbit(v[i])) << dtype_name(dt) << " " << i;
    EXPECT_EQ(v[3], 2.5);
    EXPECT_TRUE(std::isnan(v[4])) << dtype_name(dt);
    EXPECT_EQ(v[6], INFINITY);
  }
  const Array xi(std::vector<int32_t>{-3, 0, 4}, Shape{3});
  EXPECT_EQ(run_node(n, {Value::tensor(xi)})[0].array().to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 4}));
}

TEST(OnnxRunner, OperatorErrorsNameTheNodeAndValues) {
  Value x = Value::tensor(random_array({2, 3}, float32));
  EXPECT_THROW_MSG(run_node(make_node("Reshape", {}, {}, "r"), {x, ints_value({-1, -1})}), OnnxError,
                   "Reshape 'r' (inputs tensor(float)[2,3], tensor(int64)[2]): shape [-1,-1] has more than one -1");
  auto concat = make_node("Concat", {}, {}, "cat");
  add_int_attr(concat, "axis", 0);
  EXPECT_THROW_MSG(run_node(concat, {x, Value::tensor(random_array({2, 3}, int32))}), OnnxError,
                   "Concat 'cat' (inputs tensor(float)[2,3], tensor(int32)[2,3]): inputs 0 and 1 must have the same type, got tensor(float)[2,3] and tensor(int32)[2,3]");
  EXPECT_THROW_MSG(run_node(make_node("Gather", {}, {}, "g"), {x, ints_value({0, 5})}), OnnxError,
                   "Gather 'g' (inputs tensor(float)[2,3], tensor(int64)[2]): index 5 is out of range for a dimension of size 2");
  auto split = make_node("Split", {}, {}, "s");
  EXPECT_THROW_MSG(run_node(split, {x, ints_value({1, 2})}), OnnxError,
                   "Split 's' (inputs tensor(float)[2,3], tensor(int64)[2]): split sizes [1,2] do not add up to the axis size 2");
  auto pad = make_node("Pad", {}, {}, "p");
  auto* mode = pad.add_attribute();
  mode->set_name("mode");
  mode->set_type(pb::AttributeProto::STRING);
  mode->set_s("mirror");
  EXPECT_THROW_MSG(run_node(pad, {x, ints_value({0, 0, 0, 0})}), OnnxError,
                   "Pad 'p' (inputs tensor(float)[2,3], tensor(int64)[4]): mode must be constant, reflect, edge or wrap, got \"mirror\"");
  auto cast = make_node("Cast", {}, {}, "c");
  add_int_attr(cast, "to", pb::TensorProto::COMPLEX64);
  EXPECT_THROW_MSG(run_node(cast, {x}), OnnxError, "Cast 'c' (inputs tensor(float)[2,3]): cannot cast float to complex64");
  auto transpose_node = make_node("Transpose", {}, {}, "t");
  auto* perm = transpose_node.add_attribute();
  perm->set_name("perm");
  perm->set_type(pb::AttributeProto::FLOAT);
  perm->set_f(1.0f);
  EXPECT_THROW_MSG(run_node(transpose_node, {x}), OnnxError, "Transpose 't' (inputs tensor(float)[2,3]): attribute 'perm' must be ints, got float");
  EXPECT_THROW_MSG(run_node(make_node("Add", {}, {}, "a"), {x}), OnnxError, "Add 'a' (inputs tensor(float)[2,3]): input 1 is required but missing");
  onnx::StringTensor s{{1}, {"a"}};
  EXPECT_THROW_MSG(run_node(make_node("Relu", {}, {}, "rl"), {Value::strings(s)}), OnnxError,
                   "Relu 'rl' (inputs tensor(string)[1]): input 0 has type string; allowed: float, double");
}

TEST(OnnxRunner, ReductionsFollowOnnxRules) {
  // ReduceSum keeps int32 (NumPy would widen to int64) and wraps; an empty ReduceMax is -inf.
  Value big = Value::tensor(Array(std::vector<int32_t>{2147483647, 1}, Shape{2}));
  auto sum = run_node(make_node("ReduceSum", {}, {}, "s"), {big}, 18)[0];
  EXPECT_EQ(sum.array().dtype(), int32);
  EXPECT_EQ(sum.array().to_vector<int32_t>(), (std::vector<int32_t>{-2147483648}));
  auto rmax = run_node(make_node("ReduceMax", {}, {}, "m"), {Value::tensor(zeros({0, 3}, float32)), ints_value({0})}, 18)[0];
  EXPECT_EQ(rmax.shape(), (Shape{1, 3}));
  EXPECT_TRUE(all_close(rmax.array(), {-INFINITY, -INFINITY, -INFINITY}, 0, 0));
  // Random inputs against a float64 reference, negative axis, keepdims=0.
  Array x = random_array({3, 4, 5}, float32, -2, 2, 77);
  auto node = make_node("ReduceMean", {}, {}, "mean");
  add_int_attr(node, "keepdims", 0);
  auto mean = run_node(node, {Value::tensor(x), ints_value({-1})}, 18)[0];
  auto xv = x.to_vector<double>();
  std::vector<double> want;
  for (int i = 0; i < 12; ++i) {
    double acc = 0;
    for (int k = 0; k < 5; ++k) acc += xv[static_cast<size_t>(i * 5 + k)];
    want.push_back(acc / 5);
  }
  EXPECT_EQ(mean.shape(), (Shape{3, 4}));
  EXPECT_TRUE(all_close(mean.array(), want, 1e-5, 1e-6));
}

TEST(OnnxRunner, RegistryPicksGreatestSinceVersion) {
  const auto& r = onnx::OpRegistry::global();
  EXPECT_EQ(r.find("", "Squeeze", 12), r.find("", "Squeeze", 1));
  EXPECT_NE(r.find("", "Squeeze", 13), r.find("", "Squeeze", 12));
  EXPECT_EQ(r.find("ai.onnx", "Squeeze", 21), r.find("", "Squeeze", 13));
  EXPECT_EQ(r.find("", "Gelu", 19), nullptr);
  EXPECT_NE(r.find("", "Gelu", 20), nullptr);
  EXPECT_EQ(r.find("com.example", "Relu", 20), nullptr);
  EXPECT_FALSE(r.entries().empty());
}

TEST(OnnxRunner, ValueKinds) {
  Value none;
  EXPECT_TRUE(none.is_none());
  EXPECT_EQ(none.describe(), "none");
  onnx::TypeInfo elem;
  elem.kind = onnx::TypeInfo::Kind::Tensor;
  elem.elem_type = ElemType::Float;
  Value empty_seq = Value::sequence({}, elem);
  EXPECT_EQ(empty_seq.type().to_string(), "seq(tensor(float))");
  Value empty_opt = Value::optional(std::nullopt, elem);
  EXPECT_EQ(empty_opt.describe(), "optional(tensor(float)) empty");
  Value t = Value::tensor(zeros({0, 2}, float32));
  EXPECT_EQ(t.describe(), "tensor(float)[0,2]");
  EXPECT_THROW_MSG(Value::tensor(zeros({2}, float32), ElemType::Float8E4M3FN), DtypeError,
                   "float8e4m3fn cannot be held in float32 (it needs uint8)");
  EXPECT_THROW_MSG((void)t.items(), InvalidArgument, "items() asked of a tensor(float)[0,2]");
  EXPECT_THROW_MSG(Value::strings(onnx::StringTensor{{3}, {"a"}}), ShapeError, "1 strings for shape [3]");
  EXPECT_EQ(onnx::elem_type_name(ElemType::Float4E2M1), "float4e2m1");
  EXPECT_EQ(onnx::storage_dtype(ElemType::Int4), int8);
  EXPECT_FALSE(onnx::storage_dtype(ElemType::String).has_value());
  EXPECT_EQ(onnx::elem_type_of(bfloat16), ElemType::BFloat16);
}

}  // namespace
}  // namespace smelt::test
