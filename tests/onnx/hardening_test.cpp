// Regression tests of issue #12: hostile attribute values and malformed models fail with typed
// errors that name the node and the values, eagerly and compiled, instead of crashing or running.
#include <cmath>
#include <functional>
#include <limits>
#include <new>
#include <stdexcept>

#include "onnx/onnx_test_helpers.h"
#include "smelt/compile.h"
#include "smelt/memory.h"
#include "src/onnx/executor.h"
#include "src/onnx/registry.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

using onnx::Value;

constexpr int64_t k2p62 = int64_t{1} << 62;
constexpr int64_t k2p40 = int64_t{1} << 40;
constexpr int64_t k2p32 = int64_t{1} << 32;

/// Expects `f` to throw exactly E (or a subclass) whose message contains every one of `parts`.
template <class E>
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts, const std::string& mode) {
  try {
    f();
    ADD_FAILURE() << mode << ": expected an exception";
  } catch (const E& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << mode << ": message: " << e.what() << "\nexpected to contain: " << p;
  } catch (const std::exception& e) {
    ADD_FAILURE() << mode << ": another exception type: " << e.what();
  }
}

/// One node reading graph input "x" (when `x` is given) and int64 initializers, writing "y".
struct OneNode {
  pb::GraphProto g;
  std::vector<Value> inputs;

  explicit OneNode(pb::NodeProto node) {
    g.set_name("g");
    node.clear_output();
    node.add_output("y");
    *g.add_node() = std::move(node);
    pb::ValueInfoProto out;
    out.set_name("y");
    *g.add_output() = out;
  }
  OneNode& x(const Array& a) {
    pb::ValueInfoProto info;
    info.set_name("x");
    *g.add_input() = info;  // untyped: any value is accepted
    inputs.push_back(Value::tensor(a));
    return *this;
  }
  OneNode& ints(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& v) {
    *g.add_initializer() = raw_tensor<int64_t>(pb::TensorProto::INT64, dims, v, name);
    return *this;
  }
  OneNode& floats(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
    *g.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, dims, v, name);
    return *this;
  }
};

/// Runs the model eagerly and compiled; both must raise E naming everything in `parts`.
template <class E>
void expect_both(const OneNode& n, const std::vector<std::string>& parts, int64_t opset = 18) {
  onnx::Model m = load_proto(make_model(n.g, opset));
  expect_error<E>([&] { onnx::run(m, n.inputs); }, parts, "eager");
  expect_error<E>([&] { onnx::compile(m)(n.inputs); }, parts, "compiled");
}

pb::NodeProto node(const std::string& op, const std::vector<std::string>& in, const std::string& name) {
  return make_node(op, in, {"y"}, name);
}

// ---------------------------------------------------------------------------------------------
// Item 1: checked shape arithmetic
// ---------------------------------------------------------------------------------------------

TEST(OnnxHardening, PadWithHugePadsIsAShapeError) {
  OneNode n(node("Pad", {"x", "pads"}, "pad"));
  n.x(random_array({4}, float32)).ints("pads", {2}, {k2p62, k2p62});
  expect_both<ShapeError>(n, {"Pad 'pad' (inputs tensor(float)[4], tensor(int64)[2])", "4611686018427387908 + "
                                                                                     "4611686018427387904 overflows int64"});
  for (const char* mode : {"reflect", "edge", "wrap"}) {
    pb::NodeProto p = node("Pad", {"x", "pads"}, "pad");
    auto* a = p.add_attribute();
    a->set_name("mode");
    a->set_type(pb::AttributeProto::STRING);
    a->set_s(mode);
    OneNode m(p);
    m.x(random_array({4}, float32)).ints("pads", {2}, {k2p62, k2p62});
    expect_both<ShapeError>(m, {"Pad 'pad'", "overflows int64"});
  }
}

TEST(OnnxHardening, PadCroppingMoreThanTheAxisIsRefused) {
  OneNode n(node("Pad", {"x", "pads"}, "pad"));
  n.x(random_array({4}, float32)).ints("pads", {2}, {-3, -3});
  expect_both<InvalidArgument>(n, {"Pad 'pad'", "pads (-3, -3) on axis 0 crop more than its 4 elements"});
}

TEST(OnnxHardening, WrapPadBeyondTheAxisStillWraps) {
  // Wrap padding wider than the axis reads it cyclically (one gather, however wide).
  pb::NodeProto p = node("Pad", {"x", "pads"}, "pad");
  auto* a = p.add_attribute();
  a->set_name("mode");
  a->set_type(pb::AttributeProto::STRING);
  a->set_s("wrap");
  OneNode n(p);
  n.x(Array({1.0f, 2.0f, 3.0f}, Shape{3})).ints("pads", {2}, {4, 5});
  onnx::Model m = load_proto(make_model(n.g, 19));
  auto y = onnx::run(m, n.inputs)[0].array().to_vector<float>();
  EXPECT_EQ(y, (std::vector<float>{3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2}));
}

TEST(OnnxHardening, TileWithHugeRepeatsIsAShapeError) {
  OneNode n(node("Tile", {"x", "repeats"}, "tile"));
  n.x(random_array({4}, float32)).ints("repeats", {1}, {k2p62});
  expect_both<ShapeError>(n, {"Tile 'tile' (inputs tensor(float)[4], tensor(int64)[1])", "4 * 4611686018427387904 overflows int64"});
  OneNode neg(node("Tile", {"x", "repeats"}, "tile"));
  neg.x(random_array({4}, float32)).ints("repeats", {1}, {-2});
  expect_both<InvalidArgument>(neg, {"Tile 'tile'", "repeats [-2] entry 0 must be non-negative, got -2"});
}

TEST(OnnxHardening, DepthToSpaceWithHugeBlocksizeIsAShapeError) {
  pb::NodeProto d = node("DepthToSpace", {"x"}, "d2s");
  add_int_attr(d, "blocksize", k2p32);
  OneNode n(d);
  n.x(random_array({1, 4, 2, 2}, float32));
  expect_both<ShapeError>(n, {"DepthToSpace 'd2s'", "4294967296 * 4294967296 overflows int64"});
  pb::NodeProto s = node("SpaceToDepth", {"x"}, "s2d");
  add_int_attr(s, "blocksize", -1);
  OneNode m(s);
  m.x(random_array({1, 4, 2, 2}, float32));
  expect_both<InvalidArgument>(m, {"SpaceToDepth 's2d'", "blocksize must be positive, got -1"});
}

TEST(OnnxHardening, DftWithHugeLengthIsAShapeError) {
  OneNode n(node("DFT", {"x", "len"}, "dft"));
  n.x(random_array({1, 4, 1}, float32)).ints("len", {}, {k2p40});
  expect_both<ShapeError>(n, {"DFT 'dft'", "[1099511627776,1099511627776] has more elements than an int64 can count"}, 20);
  OneNode neg(node("DFT", {"x", "len"}, "dft"));
  neg.x(random_array({1, 4, 1}, float32)).ints("len", {}, {-4});
  expect_both<InvalidArgument>(neg, {"DFT 'dft'", "dft_length must be positive, got -4"}, 20);
}

TEST(OnnxHardening, RangeWhoseCountOverflowsIsAShapeError) {
  OneNode n(node("Range", {"start", "limit", "delta"}, "range"));
  n.ints("start", {}, {std::numeric_limits<int64_t>::min()})
      .ints("limit", {}, {std::numeric_limits<int64_t>::max()})
      .ints("delta", {}, {1});
  onnx::Model m = load_proto(make_model(n.g, 18));
  expect_error<ShapeError>([&] { onnx::run(m, {}); },
                           {"Range 'range'", "Range(-9223372036854775808, 9223372036854775807, 1) has more elements"},
                           "eager");
  OneNode f(node("Range", {"start", "limit", "delta"}, "range"));
  f.floats("start", {}, {0.0f}).floats("limit", {}, {std::numeric_limits<float>::infinity()}).floats("delta", {}, {1.0f});
  onnx::Model mf = load_proto(make_model(f.g, 18));
  expect_error<ShapeError>([&] { onnx::run(mf, {}); }, {"Range 'range'", "too large an element count"}, "eager");
  // A count that fits is still exact.
  OneNode ok(node("Range", {"start", "limit", "delta"}, "range"));
  ok.ints("start", {}, {std::numeric_limits<int64_t>::max() - 5}).ints("limit", {}, {std::numeric_limits<int64_t>::max()}).ints("delta", {}, {2});
  auto y = onnx::run(load_proto(make_model(ok.g, 18)), {})[0].array().to_vector<int64_t>();
  const int64_t top = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(y, (std::vector<int64_t>{top - 5, top - 3, top - 1}));
}

TEST(OnnxHardening, ExpandToAShapeWithTooManyElementsIsAShapeError) {
  OneNode n(node("Expand", {"x", "shape"}, "expand"));
  n.x(random_array({1}, float32)).ints("shape", {2}, {k2p32, k2p32});
  expect_both<ShapeError>(n, {"Expand 'expand' (inputs tensor(float)[1], tensor(int64)[2])",
                              "[4294967296,4294967296] has more elements than an int64 can count"});
}

TEST(OnnxHardening, AnArrayBeyondTheAddressSpaceIsAShapeError) {
  // 2^48 float32 elements: the count fits in int64, the 2^50 bytes do not fit in memory.
  OneNode n(node("ConstantOfShape", {"shape"}, "cos"));
  n.ints("shape", {2}, {int64_t{1} << 24, int64_t{1} << 24});
  onnx::Model m = load_proto(make_model(n.g, 18));
  expect_error<ShapeError>([&] { onnx::run(m, {}); },
                           {"ConstantOfShape 'cos'", "float32[16777216,16777216]", "2^47 bytes"}, "eager");
}

TEST(OnnxHardening, ResizeWithNonFiniteScalesOrHugeSizesIsRefused) {
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), -2.0f}) {
    OneNode n(node("Resize", {"x", "", "scales"}, "resize"));
    n.x(random_array({1, 1, 2, 2}, float32)).floats("scales", {4}, {1, 1, bad, 2});
    expect_both<InvalidArgument>(n, {"Resize 'resize'", "scales must be positive and finite", "for axis 2"});
  }
  OneNode big(node("Resize", {"x", "", "", "sizes"}, "resize"));
  big.x(random_array({1, 1, 2, 2}, float32)).ints("sizes", {4}, {1, 1, k2p40, k2p40});
  expect_both<ShapeError>(big, {"Resize 'resize'", "has more elements than an int64 can count"});
  OneNode neg(node("Resize", {"x", "", "", "sizes"}, "resize"));
  neg.x(random_array({1, 1, 2, 2}, float32)).ints("sizes", {4}, {1, 1, -3, 2});
  expect_both<InvalidArgument>(neg, {"Resize 'resize'", "sizes entry for axis 2 must be non-negative, got -3"});
}

// ---------------------------------------------------------------------------------------------
// Item 2: every error inside a model names the node
// ---------------------------------------------------------------------------------------------

TEST(OnnxHardening, ArrayOpErrorsNameTheNodeAndItsInputs) {
  pb::GraphProto g;
  g.set_name("g");
  *g.add_node() = make_node("Add", {"a", "b"}, {"y"}, "add_3");
  *g.add_input() = tensor_info("a", pb::TensorProto::FLOAT, {2, 3});
  *g.add_input() = tensor_info("b", pb::TensorProto::FLOAT, {4});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {2, 3});
  onnx::Model m = load_proto(make_model(g));
  std::vector<Value> in{Value::tensor(random_array({2, 3}, float32)), Value::tensor(random_array({4}, float32))};
  const std::vector<std::string> parts{"Add 'add_3' (inputs tensor(float)[2,3], tensor(float)[4]): add: shapes cannot be "
                                       "broadcast together (float32[2,3], float32[4])"};
  expect_error<ShapeError>([&] { onnx::run(m, in); }, parts, "eager");
  expect_error<ShapeError>([&] { onnx::compile(m)(in); }, parts, "compiled");
}

TEST(OnnxHardening, ErrorsInsideSubgraphsNameEveryEnclosingNode) {
  pb::GraphProto then_g;
  then_g.set_name("then");
  *then_g.add_node() = make_node("Add", {"a", "b"}, {"t"}, "inner_add");
  *then_g.add_output() = tensor_info("t", pb::TensorProto::FLOAT, {});
  pb::GraphProto else_g;
  else_g.set_name("else");
  *else_g.add_node() = make_node("Identity", {"a"}, {"e"}, "inner_id");
  *else_g.add_output() = tensor_info("e", pb::TensorProto::FLOAT, {});
  pb::NodeProto iff = make_node("If", {"c"}, {"y"}, "branch");
  add_graph_attr(iff, "then_branch", then_g);
  add_graph_attr(iff, "else_branch", else_g);
  pb::GraphProto g;
  g.set_name("g");
  *g.add_node() = iff;
  for (auto [name, t] : {std::pair<const char*, int>{"c", pb::TensorProto::BOOL}, {"a", pb::TensorProto::FLOAT},
                         {"b", pb::TensorProto::FLOAT}}) {
    pb::ValueInfoProto v;
    v.set_name(name);
    v.mutable_type()->mutable_tensor_type()->set_elem_type(t);
    *g.add_input() = v;
  }
  pb::ValueInfoProto out;
  out.set_name("y");
  *g.add_output() = out;
  onnx::Model m = load_proto(make_model(g));
  std::vector<Value> in{Value::tensor(Array(true)), Value::tensor(random_array({2, 3}, float32)),
                        Value::tensor(random_array({4}, float32))};
  expect_error<ShapeError>([&] { onnx::run(m, in); },
                           {"If 'branch' (inputs tensor(bool)[]): Add 'inner_add' (inputs tensor(float)[2,3], "
                            "tensor(float)[4]): add: shapes"},
                           "eager");
}

TEST(OnnxHardening, OutOfMemoryNamesTheNodeAndTheBytes) {
  // 1 MiB of CPU memory; a [1024, 1024] float tensor needs 4 MiB.
  struct Limit {
    Limit() { set_memory_limit(size_t{1} << 20); }
    ~Limit() { set_memory_limit(0); }
  } limit;
  pb::GraphProto g;
  g.set_name("g");
  *g.add_initializer() = raw_tensor<int64_t>(pb::TensorProto::INT64, {2}, {1024, 1024}, "shape");
  *g.add_node() = make_node("ConstantOfShape", {"shape"}, {"big"}, "cos");
  *g.add_node() = make_node("NonZero", {"big"}, {"y"}, "nz");
  pb::ValueInfoProto out;
  out.set_name("y");
  *g.add_output() = out;
  onnx::Model m = load_proto(make_model(g));
  // Each node evaluates its outputs as it runs, so the allocation fails inside ConstantOfShape.
  const std::vector<std::string> parts{"ConstantOfShape 'cos' (inputs tensor(int64)[2]): allocate: 4194304 bytes would "
                                       "exceed the CPU memory limit"};
  expect_error<OutOfMemory>([&] { onnx::run(m, {}); }, parts, "eager");
  expect_error<OutOfMemory>([&] { onnx::compile(m)({}); }, parts, "compiled");
}

TEST(OnnxHardening, HostExceptionsBecomeTypedErrorsNamingTheNode) {
  onnx::Node n;
  n.op_type = "Resize";
  n.name = "r";
  std::vector<Value> in{Value::tensor(random_array({2}, float32))};
  auto raise = [&](auto exception) {
    try {
      throw exception;
    } catch (...) {
      onnx::detail::rethrow_in_node(n, in);
    }
  };
  expect_error<OutOfMemory>([&] { raise(std::bad_alloc()); },
                            {"Resize 'r' (inputs tensor(float)[2]): out of memory (std::bad_alloc"}, "bad_alloc");
  expect_error<ShapeError>([&] { raise(std::length_error("cannot create std::vector larger than max_size()")); },
                           {"Resize 'r' (inputs tensor(float)[2]): a size is too large (cannot create std::vector"},
                           "length_error");
  expect_error<OnnxError>([&] { raise(std::out_of_range("stoi")); }, {"Resize 'r' (inputs tensor(float)[2]): stoi"},
                          "out_of_range");
  expect_error<OutOfMemory>([&] { raise(OutOfMemory("allocate: the system refused 64 bytes")); },
                            {"Resize 'r' (inputs tensor(float)[2]): allocate: the system refused 64 bytes"}, "oom");
  // A message that starts with the node's label says it once.
  expect_error<OnnxError>([&] { raise(OnnxError("Resize 'r': bad mode")); }, {"Resize 'r' (inputs tensor(float)[2]): bad mode"},
                          "label");
  // The compiler's break signal passes through untouched.
  try {
    raise(UnknownValueError("NonZero 'nz': x is only known when the model runs"));
    ADD_FAILURE() << "expected UnknownValueError";
  } catch (const UnknownValueError& e) {
    EXPECT_STREQ(e.what(), "NonZero 'nz': x is only known when the model runs");
  }
  // Error types other parts derive keep their type.
  struct Custom : Error {
    using Error::Error;
  };
  try {
    raise(Custom("deadline"));
    ADD_FAILURE() << "expected Custom";
  } catch (const Custom& e) {
    EXPECT_STREQ(e.what(), "deadline");
  }
}

// ---------------------------------------------------------------------------------------------
// Item 7: validation of what ONNX forbids
// ---------------------------------------------------------------------------------------------

TEST(OnnxHardening, UnknownElementTypeAttributesAreRefused) {
  for (int64_t code : {int64_t{999}, int64_t{0}, int64_t{-1}, k2p40}) {
    pb::NodeProto c = node("Cast", {"x"}, "cast");
    add_int_attr(c, "to", code);
    OneNode n(c);
    n.x(random_array({3}, float32));
    expect_both<OnnxError>(n, {"Cast 'cast'", "attribute 'to' is " + std::to_string(code)});
  }
  pb::NodeProto e = node("EyeLike", {"x"}, "eye");
  add_int_attr(e, "dtype", 77);
  OneNode n(e);
  n.x(random_array({3, 3}, float32));
  expect_both<OnnxError>(n, {"EyeLike 'eye'", "attribute 'dtype' is 77, not a known element type"});
  pb::NodeProto w = node("HannWindow", {"size"}, "hann");
  add_int_attr(w, "output_datatype", 8);  // string
  OneNode hw(w);
  hw.ints("size", {}, {4});
  expect_both<OnnxError>(hw, {"HannWindow 'hann'", "attribute 'output_datatype' is 8 (string), a type it cannot produce"});
}

TEST(OnnxHardening, SplitSizesAreChecked) {
  pb::NodeProto s = make_node("Split", {"x", "split"}, {"a", "b"}, "split");
  auto build = [&](const std::vector<int64_t>& sizes) {
    pb::GraphProto g;
    g.set_name("g");
    *g.add_node() = s;
    pb::ValueInfoProto x;
    x.set_name("x");
    *g.add_input() = x;
    *g.add_initializer() = raw_tensor<int64_t>(pb::TensorProto::INT64, {static_cast<int64_t>(sizes.size())}, sizes, "split");
    for (const char* o : {"a", "b"}) {
      pb::ValueInfoProto v;
      v.set_name(o);
      *g.add_output() = v;
    }
    return load_proto(make_model(g));
  };
  std::vector<Value> in{Value::tensor(random_array({4}, float32))};
  onnx::Model neg = build({-1, 5});
  expect_error<OnnxError>([&] { onnx::run(neg, in); }, {"Split 'split'", "split sizes [-1,5] have a negative entry -1"}, "eager");
  expect_error<OnnxError>([&] { onnx::compile(neg)(in); }, {"Split 'split'", "negative entry -1"}, "compiled");
  onnx::Model sum = build({1, 2});
  expect_error<OnnxError>([&] { onnx::run(sum, in); }, {"Split 'split'", "split sizes [1,2] do not add up to the axis size 4"},
                          "eager");
  onnx::Model count = build({1, 1, 2});
  expect_error<OnnxError>([&] { onnx::run(count, in); }, {"Split 'split'", "split [1,1,2] has 3 sizes for 2 outputs"}, "eager");
}

TEST(OnnxHardening, TransposePermutationsAreChecked) {
  struct Case {
    std::vector<int64_t> perm;
    std::string message;
  };
  for (const auto& c : std::vector<Case>{{{k2p40}, "perm [1099511627776] has 1 entries for a rank-2 input"},
                                         {{0, k2p40}, "perm [0,1099511627776] has entry 1099511627776, out of range for rank 2"},
                                         {{-1, 0}, "has entry -1, out of range for rank 2"},
                                         {{0, 0}, "perm [0,0] repeats axis 0"},
                                         {{1, 0, 2}, "perm [1,0,2] has 3 entries for a rank-2 input"}}) {
    pb::NodeProto t = node("Transpose", {"x"}, "tr");
    add_ints_attr(t, "perm", c.perm);
    OneNode n(t);
    n.x(random_array({2, 3}, float32));
    expect_both<OnnxError>(n, {"Transpose 'tr'", c.message});
  }
}

TEST(OnnxHardening, GatherNDBatchDimsAreCheckedBeforeNarrowing) {
  for (int64_t b : {int64_t{1} << 32, int64_t{-1}, int64_t{2}}) {
    pb::NodeProto g = node("GatherND", {"x", "i"}, "gnd");
    add_int_attr(g, "batch_dims", b);
    OneNode n(g);
    n.x(random_array({2, 3}, float32)).ints("i", {2, 1}, {0, 1});
    expect_both<OnnxError>(n, {"GatherND 'gnd'", "batch_dims " + std::to_string(b) + " must be in [0, 2)"});
  }
}

pb::GraphProto neg_graph(const std::vector<std::pair<std::string, std::string>>& nodes) {
  pb::GraphProto g;
  g.set_name("g");
  *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {2});
  for (const auto& [name, out] : nodes) *g.add_node() = make_node("Neg", {"x"}, {out}, name);
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {2});
  return g;
}

TEST(OnnxHardening, DuplicateProducersAndInitializersFailAtLoad) {
  EXPECT_THROW_MSG(load_proto(make_model(neg_graph({{"first", "y"}, {"second", "y"}}))), OnnxError,
                   "load: graph 'g': node Neg 'second' writes 'y', which node Neg 'first' already produces");
  pb::GraphProto init = neg_graph({{"first", "y"}});
  *init.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {1}, {1.0f}, "w");
  *init.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {1}, {2.0f}, "w");
  EXPECT_THROW_MSG(load_proto(make_model(init)), OnnxError, "load: graph 'g': initializer 'w' is given twice");
  pb::GraphProto over = neg_graph({{"first", "y"}, {"second", "x"}});
  EXPECT_THROW_MSG(load_proto(make_model(over)), OnnxError,
                   "load: graph 'g': node Neg 'second' writes 'x', which a graph input already produces");
  // An input that shares an initializer's name (its default value) is valid ONNX.
  pb::GraphProto shared = neg_graph({{"first", "y"}});
  *shared.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {2}, {1.0f, 2.0f}, "x");
  EXPECT_NO_THROW(load_proto(make_model(shared)));
}

TEST(OnnxHardening, OpsetsNewerThanSupportedFailAtLoad) {
  int newest = onnx::OpRegistry::global().newest_opset("");
  EXPECT_GE(newest, 21);
  EXPECT_THROW_MSG(load_proto(make_model(neg_graph({{"n", "y"}}), 999)), OnnxError,
                   "load: the model imports opset 999 of ai.onnx; smelt supports opsets 1 to " + std::to_string(newest));
  EXPECT_THROW_MSG(load_proto(make_model(neg_graph({{"n", "y"}}), 0)), OnnxError, "imports opset 0 of ai.onnx");
  EXPECT_NO_THROW(load_proto(make_model(neg_graph({{"n", "y"}}), newest)));
  pb::ModelProto ml = make_model(neg_graph({{"n", "y"}}));
  auto* o = ml.add_opset_import();
  o->set_domain("ai.onnx.ml");
  o->set_version(1000);
  EXPECT_THROW_MSG(load_proto(ml), OnnxError, "imports opset 1000 of ai.onnx.ml; smelt supports opsets 1 to");
}

pb::GraphProto branch(const std::string& name, const std::vector<int>& types) {
  pb::GraphProto g;
  g.set_name(name);
  for (size_t i = 0; i < types.size(); ++i) {
    std::string out = name + "_" + std::to_string(i);
    pb::NodeProto c = make_node("Constant", {}, {out}, name + "_c" + std::to_string(i));
    auto* a = c.add_attribute();
    a->set_name("value");
    a->set_type(pb::AttributeProto::TENSOR);
    if (types[i] == pb::TensorProto::FLOAT) *a->mutable_t() = raw_tensor<float>(types[i], {1}, {1.0f}, "");
    else *a->mutable_t() = raw_tensor<int64_t>(types[i], {1}, {1}, "");
    *g.add_node() = c;
    *g.add_output() = tensor_info(out, types[i], {1});
  }
  return g;
}

onnx::Model if_model(const pb::GraphProto& then_g, const pb::GraphProto& else_g, size_t outputs) {
  std::vector<std::string> outs;
  for (size_t i = 0; i < outputs; ++i) outs.push_back("y" + std::to_string(i));
  pb::NodeProto iff = make_node("If", {"c"}, outs, "if");
  add_graph_attr(iff, "then_branch", then_g);
  add_graph_attr(iff, "else_branch", else_g);
  pb::GraphProto g;
  g.set_name("g");
  *g.add_node() = iff;
  *g.add_input() = tensor_info("c", pb::TensorProto::BOOL, {});
  for (const auto& o : outs) {
    pb::ValueInfoProto v;
    v.set_name(o);
    *g.add_output() = v;
  }
  return load_proto(make_model(g));
}

TEST(OnnxHardening, IfBranchesMustAgree) {
  const int f = pb::TensorProto::FLOAT, i = pb::TensorProto::INT64;
  std::vector<Value> in{Value::tensor(Array(true))};
  onnx::Model count = if_model(branch("then", {f, f}), branch("else", {f}), 1);
  expect_error<OnnxError>([&] { onnx::run(count, in); },
                          {"If 'if'", "then_branch has 2 outputs and else_branch 1; they must match"}, "eager");
  expect_error<OnnxError>([&] { onnx::compile(count)(in); }, {"If 'if'", "they must match"}, "compiled");
  onnx::Model types = if_model(branch("then", {f}), branch("else", {i}), 1);
  expect_error<OnnxError>([&] { onnx::run(types, in); },
                          {"If 'if'", "output 0 is tensor(float)[1] in then_branch ('then_0') but tensor(int64)[1] in "
                                      "else_branch ('else_0')"},
                          "eager");
  onnx::Model wide = if_model(branch("then", {f}), branch("else", {f}), 2);
  expect_error<OnnxError>([&] { onnx::run(wide, in); }, {"If 'if'", "the node has 2 outputs but its branches produce 1"},
                          "eager");
  onnx::Model good = if_model(branch("then", {f}), branch("else", {f}), 1);
  EXPECT_EQ(onnx::run(good, in)[0].array().to_vector<float>(), std::vector<float>{1.0f});
}

// ---------------------------------------------------------------------------------------------
// What the GCC ASan+UBSan structure-aware fuzzer found (fuzz/corpus/onnx_model_fuzz/*-<op>-*)
// ---------------------------------------------------------------------------------------------

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

TEST(OnnxHardeningFuzz, NonMaxSuppressionScoresMustMatchTheBoxes) {
  // Scores of another box count were read past their end.
  for (const std::vector<int64_t>& scores : {std::vector<int64_t>{1, 1, 5}, std::vector<int64_t>{2, 1, 6}}) {
    OneNode n(node("NonMaxSuppression", {"boxes", "scores"}, "nms"));
    n.floats("boxes", {1, 6, 4}, std::vector<float>(24, 0.5f))
        .floats("scores", scores, std::vector<float>(static_cast<size_t>(scores[0] * scores[1] * scores[2]), 0.5f));
    expect_both<OnnxError>(n, {"NonMaxSuppression 'nms'", "boxes must be [B, N, 4] and scores [B, C, N], got tensor(float)[1,6,4] and tensor(float)" +
                                                               shape_to_string(scores)});
  }
}

TEST(OnnxHardeningFuzz, MaxUnpoolAttributesAndIndicesAreChecked) {
  auto unpool = [](const std::vector<int64_t>& strides, const std::vector<int64_t>& pads, const Shape& idx) {
    pb::NodeProto p = node("MaxUnpool", {"x", "i"}, "unpool");
    add_ints_attr(p, "kernel_shape", {2, 2});
    add_ints_attr(p, "strides", strides);
    add_ints_attr(p, "pads", pads);
    OneNode n(p);
    n.x(random_array({1, 1, 3, 3}, float32)).ints("i", idx, std::vector<int64_t>(static_cast<size_t>(numel(idx)), 0));
    return n;
  };
  // A short strides was read past its end.
  expect_both<OnnxError>(unpool({2}, {0, 0, 0, 0}, {1, 1, 3, 3}),
                         {"MaxUnpool 'unpool'", "kernel_shape [2,2], strides [2] and pads [0,0,0,0] must have 2, 2 and 4 values "
                                                "for input tensor(float)[1,1,3,3]"});
  expect_both<InvalidArgument>(unpool({std::numeric_limits<int64_t>::min(), 1}, {0, 0, 0, 0}, {1, 1, 3, 3}),
                               {"MaxUnpool 'unpool'", "strides[0] must be positive, got -9223372036854775808"});
  expect_both<InvalidArgument>(unpool({1, 1}, {0, -1, 0, 0}, {1, 1, 3, 3}), {"MaxUnpool 'unpool'", "pads[1] must be non-negative, got -1"});
  // The output's size overflowed in an unchecked product.
  expect_both<ShapeError>(unpool({k2p62, 1}, {0, 0, 0, 0}, {1, 1, 3, 3}),
                          {"MaxUnpool 'unpool'", "size 2 * 4611686018427387904 overflows int64"});
  expect_both<ShapeError>(unpool({k2p40, k2p40}, {0, 0, 0, 0}, {1, 1, 3, 3}),
                          {"MaxUnpool 'unpool'", "[1,1,2199023255554,2199023255554] has more elements than an int64 can count"});
  expect_both<OnnxError>(unpool({1, 1}, {3, 0, 3, 0}, {1, 1, 3, 3}),
                         {"MaxUnpool 'unpool'", "pads [3,0,3,0] remove more than the unpooled axis 2 holds"});
  expect_both<OnnxError>(unpool({2, 2}, {0, 0, 0, 0}, {1, 1, 3}),
                         {"MaxUnpool 'unpool'", "indices must have the input's shape, got tensor(float)[1,1,3,3] and tensor(int64)[1,1,3]"});
}

TEST(OnnxHardeningFuzz, TensorScatterShapesAndIndicesAreChecked) {
  auto scatter_node = [](const Shape& update, const std::vector<int64_t>& starts) {
    OneNode n(node("TensorScatter", {"x", "update", "starts"}, "ts"));
    n.x(random_array({2, 1, 4, 5}, float32))
        .floats("update", update, std::vector<float>(static_cast<size_t>(numel(update)), 1.0f))
        .ints("starts", {static_cast<int64_t>(starts.size())}, starts);
    return n;
  };
  // An update of lower rank was indexed at past's axis.
  expect_both<OnnxError>(scatter_node({2}, {0, 0}), {"TensorScatter 'ts'", "update must have past's shape except along axis 2, got "
                                                                          "tensor(float)[2,1,4,5] and tensor(float)[2]"}, 24);
  expect_both<OnnxError>(scatter_node({2, 1, 1, 4}, {0, 0}), {"TensorScatter 'ts'", "update must have past's shape except along axis 2"}, 24);
  expect_both<OnnxError>(scatter_node({2, 1, 1, 5}, {0}), {"TensorScatter 'ts'", "write_indices has 1 values for a batch of 2"}, 24);
  // start + length overflowed int64 and passed the check.
  expect_both<OnnxError>(scatter_node({2, 1, 1, 5}, {0, std::numeric_limits<int64_t>::max()}),
                         {"TensorScatter 'ts'", "write index 9223372036854775807 + 1 exceeds 4"}, 24);
  // Circular writes take the start modulo the axis first: a start near 2^63 plus a position
  // would overflow int64 in the index arithmetic. INT64_MAX = 3 (mod 4).
  auto circular = [&](std::vector<int64_t> starts) {
    OneNode n = scatter_node({2, 1, 3, 5}, starts);
    auto* a = n.g.mutable_node(0)->add_attribute();
    a->set_name("mode");
    a->set_type(pb::AttributeProto::STRING);
    a->set_s("circular");
    return onnx::run(load_proto(make_model(n.g, 24)), n.inputs)[0].array();
  };
  EXPECT_TRUE(bit_equal(circular({std::numeric_limits<int64_t>::max(), 1}), circular({3, 1})));
}

TEST(OnnxHardeningFuzz, ConvIntegerChecksRanksBeforeShapingTheZeroPoint) {
  // A 0-d W was indexed at its first axis to shape a per-channel zero point (SIGSEGV; found by
  // the release-build standalone fuzzer).
  OneNode n(node("ConvInteger", {"x", "w", "", "wz"}, "ci"));
  n.x(Array(std::vector<uint8_t>(9, 1), Shape{1, 1, 3, 3}));
  *n.g.add_initializer() = raw_tensor<uint8_t>(pb::TensorProto::UINT8, {}, {2}, "w");
  *n.g.add_initializer() = raw_tensor<uint8_t>(pb::TensorProto::UINT8, {2}, {0, 1}, "wz");
  expect_both<OnnxError>(n, {"ConvInteger 'ci'", "X and W must have the same rank, at least 3, got tensor(uint8)[1,1,3,3] and tensor(uint8)[]"});
}

TEST(OnnxHardeningFuzz, CenterCropPadShapeMustBeNonNegative) {
  // d - t overflowed for t = INT64_MIN.
  OneNode n(node("CenterCropPad", {"x", "shape"}, "ccp"));
  n.x(random_array({4, 4}, float32)).ints("shape", {2}, {std::numeric_limits<int64_t>::min(), 2});
  expect_both<InvalidArgument>(n, {"CenterCropPad 'ccp'", "shape[0] must be non-negative, got -9223372036854775808"}, 18);
}

TEST(OnnxHardeningFuzz, RoiAlignRefusesEmptyImagesAndUnboundedSamplingGrids) {
  auto roi_align = [](const Shape& x, const std::vector<float>& roi, int64_t ratio) {
    pb::NodeProto p = node("RoiAlign", {"x", "rois", "batch"}, "roi");
    add_int_attr(p, "sampling_ratio", ratio);
    OneNode n(p);
    n.x(random_array(x, float32)).floats("rois", {1, 4}, roi).ints("batch", {1}, {0});
    return n;
  };
  // An empty H indexed an empty buffer.
  expect_both<OnnxError>(roi_align({1, 1, 0, 10}, {0, 0, 1, 1}, 0),
                         {"RoiAlign 'roi'", "X must have non-empty H and W, got tensor(float)[1,1,0,10]"});
  // ceil(roi size / bins) of a non-finite or huge roi did not fit int64 (INT64_MIN * 10).
  const float inf = std::numeric_limits<float>::infinity();
  expect_both<OnnxError>(roi_align({1, 1, 4, 4}, {0, 0, inf, 1}, 2),
                         {"RoiAlign 'roi'", "roi 0 (0.000000, 0.000000, inf, 1.000000) at spatial_scale 1.000000 is not finite"});
  expect_both<OnnxError>(roi_align({1, 1, 4, 4}, {0, std::numeric_limits<float>::quiet_NaN(), 1, 1}, 0),
                         {"RoiAlign 'roi'", "is not finite"});
  OneNode scaled = roi_align({1, 1, 4, 4}, {0, 0, 1, 1}, 2);
  auto* scale = scaled.g.mutable_node(0)->add_attribute();
  scale->set_name("spatial_scale");
  scale->set_type(pb::AttributeProto::FLOAT);
  scale->set_f(std::numeric_limits<float>::quiet_NaN());
  expect_both<OnnxError>(scaled, {"RoiAlign 'roi'", "spatial_scale must be finite, got nan"});
  expect_both<OnnxError>(roi_align({1, 1, 4, 4}, {0, 0, 1, 1e30f}, 0), {"RoiAlign 'roi'", "samples per bin along the height, more than 2^32"});
  expect_both<ShapeError>(roi_align({1, 1, 4, 4}, {0, 0, 1, 1}, std::numeric_limits<int64_t>::max()),
                          {"RoiAlign 'roi'", "size 9223372036854775807 * 9223372036854775807 overflows int64"});
}

TEST(OnnxHardeningFuzz, ConvTransposeSizesMustBePositive) {
  // kernel_shape INT64_MIN overflowed kernel - 1 in the SAME padding.
  pb::NodeProto p = node("ConvTranspose", {"x", "w"}, "ct");
  add_ints_attr(p, "kernel_shape", {std::numeric_limits<int64_t>::min(), 3});
  add_ints_attr(p, "output_shape", {5, 5});
  OneNode n(p);
  n.x(random_array({1, 1, 3, 3}, float32)).floats("w", {1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  expect_both<InvalidArgument>(n, {"ConvTranspose 'ct'", "kernel_shape[0] must be positive, got -9223372036854775808"});
  pb::NodeProto q = node("ConvTranspose", {"x", "w"}, "ct");
  add_ints_attr(q, "dilations", {0, 1});
  OneNode m(q);
  m.x(random_array({1, 1, 3, 3}, float32)).floats("w", {1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  expect_both<InvalidArgument>(m, {"ConvTranspose 'ct'", "dilations[0] must be positive, got 0"});
}

TEST(OnnxHardeningFuzz, LpPoolAttributeLengthsAndStridesAreChecked) {
  auto lp = [](const std::string& attr, const std::vector<int64_t>& v, const std::string& auto_pad) {
    pb::NodeProto p = node("LpPool", {"x"}, "lp");
    add_ints_attr(p, "kernel_shape", {2, 2});
    add_ints_attr(p, attr, v);
    auto* a = p.add_attribute();
    a->set_name("auto_pad");
    a->set_type(pb::AttributeProto::STRING);
    a->set_s(auto_pad);
    OneNode n(p);
    n.x(random_array({1, 3, 8, 8}, float32));
    return n;
  };
  // A short pads was copied past its end.
  expect_both<OnnxError>(lp("pads", {-1}, "NOTSET"), {"LpPool 'lp'", "strides [1,1], dilations [1,1] and pads [-1] must have 2, 2 and 4 "
                                                                      "values for kernel_shape [2,2]"});
  // SAME padding divided by the strides.
  expect_both<InvalidArgument>(lp("strides", {0, 1}, "SAME_UPPER"), {"LpPool 'lp'", "strides[0] must be positive, got 0"});
  expect_both<ShapeError>(lp("dilations", {std::numeric_limits<int64_t>::max(), 1}, "SAME_UPPER"),
                          {"LpPool 'lp'", "size 9223372036854775807 + 1 overflows int64"});
}

TEST(OnnxHardeningFuzz, FlexAttentionWithZeroKeyHeadsIsRefused) {
  // hq % 0 divided by zero.
  pb::NodeProto p = node("FlexAttention", {"x", "k", "v"}, "flex");
  p.set_domain("ai.onnx.preview");
  OneNode n(p);
  n.x(random_array({1, 2, 3, 4}, float32)).floats("k", {1, 0, 3, 4}, {}).floats("v", {1, 2, 3, 4}, std::vector<float>(24, 1.0f));
  pb::ModelProto model = make_model(n.g, 18);
  auto* o = model.add_opset_import();
  o->set_domain("ai.onnx.preview");
  o->set_version(1);
  onnx::Model m = load_proto(model);
  expect_error<OnnxError>([&] { onnx::run(m, n.inputs); }, {"FlexAttention 'flex'", "2 query heads are not a multiple of 0 key heads"},
                          "eager");
}

TEST(OnnxHardeningFuzz, MemoryBudgetIsCheckedBeforeANodeComputes) {
  // Pad, MaxPool and ConvTranspose outputs of 17-300 GB and a Range of 2^31 values were
  // allocated and filled (seconds, or the machine's memory) before the budget was looked at.
  onnx::RunOptions o;
  o.memory_budget_bytes = int64_t{256} << 20;
  OneNode pad(node("Pad", {"x", "pads"}, "pad"));
  pad.x(random_array({2, 2}, float32)).ints("pads", {4}, {0, 0, 0, int64_t{1} << 32});
  onnx::Model pm = load_proto(make_model(pad.g, 18));
  expect_error<OutOfMemory>([&] { onnx::run(pm, pad.inputs, o); },
                            {"Pad 'pad' (inputs tensor(float)[2,2], tensor(int64)[4]): the run would hold 34359738384 bytes of "
                             "tensors, over its memory budget of 268435456 bytes (RunOptions::memory_budget_bytes)"},
                            "eager");
  OneNode range(node("Range", {"start", "limit", "delta"}, "range"));
  range.ints("start", {}, {-(int64_t{1} << 31)}).ints("limit", {}, {0}).ints("delta", {}, {1});
  onnx::Model rm = load_proto(make_model(range.g, 18));
  expect_error<OutOfMemory>([&] { onnx::run(rm, {}, o); },
                            {"Range 'range'", "Range(-2147483648, 0, 1) of 2147483648 values: the run would hold 17179869184 bytes"},
                            "eager");
  // Under a budget that fits, the node runs as before.
  onnx::RunOptions roomy;
  roomy.memory_budget_bytes = 1 << 20;
  OneNode small(node("Pad", {"x", "pads"}, "pad"));
  small.x(Array({1.0f, 2.0f}, Shape{1, 2})).ints("pads", {4}, {0, 1, 0, 1});
  onnx::Model sm = load_proto(make_model(small.g, 18));
  EXPECT_EQ(onnx::run(sm, small.inputs, roomy)[0].array().to_vector<float>(), (std::vector<float>{0, 1, 2, 0}));
}


// ---------------------------------------------------------------------------------------------
// Today's GCC ASan+UBSan fuzz run (fuzz/corpus/onnx_model_fuzz/{asan,ubsan,slow}-*)
// ---------------------------------------------------------------------------------------------

void add_string_attr(pb::NodeProto& p, const std::string& name, const std::string& v) {
  auto* a = p.add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::STRING);
  a->set_s(v);
}

/// A pool node over x [1, 3, 32, 32] with SAME_UPPER padding and `kernel`.
OneNode same_pool(const std::string& op, const std::vector<int64_t>& kernel, const Array& x, bool indices = false) {
  pb::NodeProto p = node(op, {"x"}, "pool");
  add_string_attr(p, "auto_pad", "SAME_UPPER");
  add_ints_attr(p, "kernel_shape", kernel);
  OneNode n(p);
  n.x(x);
  if (indices) {
    n.g.mutable_node(0)->add_output("i");
    pb::ValueInfoProto info;
    info.set_name("i");
    *n.g.add_output() = info;
  }
  return n;
}

TEST(OnnxHardeningFuzz, MaxPoolIndicesWithHugePadsFailFastUnderTheBudget) {
  // MaxPool with its Indices output, kernel 5x5 on a 5x5 input, pads [2, 2, 2^31, 2]: the output
  // has 2^31 rows. The search for the kernel offsets that read the input took one step per output
  // row (2^31 steps: seconds, a 20 s hang under ASan, found by fuzzing) before the allocation
  // failed. Now the output is checked against the budget first, and only the outputs whose window
  // touches the input are visited.
  pb::NodeProto p = node("MaxPool", {"x"}, "pool");
  add_ints_attr(p, "kernel_shape", {5, 5});
  add_ints_attr(p, "pads", {2, 2, int64_t{1} << 31, 2});
  OneNode n(p);
  n.x(random_array({1, 1, 5, 5}, float32));
  n.g.mutable_node(0)->add_output("i");
  pb::ValueInfoProto info;
  info.set_name("i");
  *n.g.add_output() = info;
  onnx::RunOptions o;
  o.memory_budget_bytes = int64_t{256} << 20;
  onnx::Model m = load_proto(make_model(n.g, 18));
  expect_error<OutOfMemory>([&] { onnx::run(m, n.inputs, o); },
                            {"MaxPool 'pool'", "the output and its indices", "over its memory budget of 268435456 bytes"}, "eager");
  // The same pads with a budget that fits a small output: pads [2, 2, 3, 2] (9 x 5 windows) run,
  // and the maxima equal the plain MaxPool's.
  pb::NodeProto q = node("MaxPool", {"x"}, "pool");
  add_ints_attr(q, "kernel_shape", {5, 5});
  add_ints_attr(q, "pads", {2, 2, 3, 2});
  OneNode plain(q);
  plain.x(n.inputs[0].array());
  OneNode both(q);
  both.x(n.inputs[0].array());
  both.g.mutable_node(0)->add_output("i");
  *both.g.add_output() = info;
  auto want = onnx::run(load_proto(make_model(plain.g, 18)), plain.inputs)[0].array();
  auto got = onnx::run(load_proto(make_model(both.g, 18)), both.inputs, o);
  EXPECT_EQ(got[0].array().shape(), (Shape{1, 1, 6, 5}));
  EXPECT_EQ(got[0].array().to_vector<float>(), want.to_vector<float>());
  // An empty batch with the 2^31 pad: the result is empty, but the indices were built over the
  // 2^31 output rows first (16 GB: a 20 s hang under ASan, the next fuzz run). Now nothing is
  // computed for an empty output, eagerly and compiled.
  OneNode empty(p);
  empty.x(random_array({0, 1, 5, 5}, float32));
  empty.g.mutable_node(0)->add_output("i");
  *empty.g.add_output() = info;
  onnx::Model em = load_proto(make_model(empty.g, 18));
  const Shape want_shape{0, 1, (int64_t{1} << 31) + 3, 5};  // 5 + 2 + 2^31 - 5 + 1
  for (bool compiled : {false, true}) {
    SCOPED_TRACE(compiled ? "compiled" : "eager");
    auto out = compiled ? onnx::compile(em)(empty.inputs) : onnx::run(em, empty.inputs, o);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].array().shape(), want_shape);
    EXPECT_EQ(out[1].array().shape(), want_shape);
    EXPECT_EQ(out[1].array().dtype(), int64);
  }
}

TEST(OnnxHardeningFuzz, PoolKernelsFarWiderThanTheInputCostWhatTheyRead) {
  // Kernel [2, 2^32] with SAME padding: the CPU kernel kept a table of all 2^32 kernel columns
  // (a 16 TiB std::vector under ASan) and walked every one of them per row (slow-*, asan-*).
  // Only the columns that read the input are walked now. Each window spans whole rows: the
  // result is the max or mean of rows h and h+1 (h = 31: row 31 alone).
  Array x = random_array({1, 3, 32, 32}, float32);
  auto xv = x.to_vector<float>();
  std::vector<float> want_max, idx_of_max;
  std::vector<double> want_mean;
  std::vector<int64_t> want_idx;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t h = 0; h < 32; ++h) {
      double sum = 0, n = 0;
      float m = -std::numeric_limits<float>::infinity();
      int64_t at = -1;
      for (int64_t r = h; r < std::min<int64_t>(h + 2, 32); ++r)
        for (int64_t w = 0; w < 32; ++w) {
          const int64_t i = (c * 32 + r) * 32 + w;
          sum += xv[static_cast<size_t>(i)], ++n;
          if (xv[static_cast<size_t>(i)] > m) m = xv[static_cast<size_t>(i)], at = i;
        }
      for (int64_t w = 0; w < 32; ++w) {
        want_max.push_back(m);
        want_mean.push_back(sum / n);
        want_idx.push_back(at);
      }
    }
  const std::vector<int64_t> kernel{2, k2p32};
  for (bool compiled : {false, true}) {
    SCOPED_TRACE(compiled ? "compiled" : "eager");
    auto run = [&](const OneNode& n) {
      onnx::Model m = load_proto(make_model(n.g, 18));
      return compiled ? onnx::compile(m)(n.inputs) : onnx::run(m, n.inputs);
    };
    EXPECT_EQ(run(same_pool("MaxPool", kernel, x))[0].array().to_vector<float>(), want_max);
    auto with_idx = run(same_pool("MaxPool", kernel, x, true));
    EXPECT_EQ(with_idx[0].array().to_vector<float>(), want_max);
    EXPECT_EQ(with_idx[1].array().to_vector<int64_t>(), want_idx);
    // The mean of at most 64 floats summed in double and rounded once: within one float ulp.
    auto mean = run(same_pool("AveragePool", kernel, x))[0].array().to_vector<float>();
    ASSERT_EQ(mean.size(), want_mean.size());
    for (size_t i = 0; i < mean.size(); ++i)
      EXPECT_NEAR(mean[i], want_mean[i], std::fabs(want_mean[i]) * 0x1p-23 + 1e-30) << i;
  }
}

TEST(OnnxHardeningFuzz, PoolWindowPositionsMustFitInt64) {
  // kernel [2^62, 2]: the window's position count overflowed in the CPU kernel (UBSan).
  pb::NodeProto p = node("LpPool", {"x"}, "lp");
  add_string_attr(p, "auto_pad", "SAME_LOWER");
  add_ints_attr(p, "kernel_shape", {k2p62, 2});
  OneNode n(p);
  n.x(random_array({1, 3, 32, 32}, float32));
  expect_both<ShapeError>(n, {"LpPool 'lp'", "avg_pool: kernel [4611686018427387904,2] has more window positions than an "
                                             "int64 can count"});
  OneNode m = same_pool("MaxPool", {k2p62, 4}, random_array({1, 3, 32, 32}, float32));
  expect_both<ShapeError>(m, {"MaxPool 'pool'", "max_pool: kernel [4611686018427387904,4] has more window positions"});
}

TEST(OnnxHardeningFuzz, RangeStepsWithoutOverflowingInt64) {
  // start + i * delta overflowed in i * delta although every value fits (UBSan).
  OneNode n(node("Range", {"start", "limit", "delta"}, "range"));
  const int64_t lowest = std::numeric_limits<int64_t>::min();
  n.ints("start", {}, {lowest + 1}).ints("limit", {}, {2}).ints("delta", {}, {k2p62});
  auto y = onnx::run(load_proto(make_model(n.g, 18)), {})[0].array().to_vector<int64_t>();
  EXPECT_EQ(y, (std::vector<int64_t>{lowest + 1, lowest + 1 + k2p62, 1}));
  OneNode down(node("Range", {"start", "limit", "delta"}, "range"));
  const int64_t top = std::numeric_limits<int64_t>::max();
  down.ints("start", {}, {top}).ints("limit", {}, {lowest}).ints("delta", {}, {lowest});
  EXPECT_EQ(onnx::run(load_proto(make_model(down.g, 18)), {})[0].array().to_vector<int64_t>(),
            (std::vector<int64_t>{top, -1}));
}

TEST(OnnxHardeningFuzz, StringConcatChecksTheInputShapes) {
  // A 0-d string input was indexed at the concatenation axis (UBSan: reference to null).
  auto concat = [](const Shape& b_shape, std::vector<std::string> b) {
    OneNode n(node("Concat", {"a", "b"}, "cat"));
    add_int_attr(*n.g.mutable_node(0), "axis", 0);
    for (const char* name : {"a", "b"}) {
      pb::ValueInfoProto info;
      info.set_name(name);
      *n.g.add_input() = info;
    }
    n.inputs = {Value::strings(onnx::StringTensor{{2}, {"p", "q"}}), Value::strings(onnx::StringTensor{b_shape, std::move(b)})};
    return n;
  };
  OneNode bad = concat({}, {"r"});
  onnx::Model m = load_proto(make_model(bad.g, 18));
  expect_error<OnnxError>([&] { onnx::run(m, bad.inputs); },
                          {"Concat 'cat'", "input 1 tensor(string)[] must have the shape of input 0 tensor(string)[2] except "
                                           "on axis 0"},
                          "eager");
  OneNode good = concat({1}, {"r"});
  auto y = onnx::run(load_proto(make_model(good.g, 18)), good.inputs)[0].string_tensor();
  EXPECT_EQ(y.shape, (Shape{3}));
  EXPECT_EQ(y.data, (std::vector<std::string>{"p", "q", "r"}));
}

TEST(OnnxHardeningFuzz, SplitToSequenceSizesMustBeNonNegative) {
  // INT64_MIN sizes overflowed their sum (UBSan).
  OneNode n(node("SplitToSequence", {"x", "split"}, "sts"));
  const int64_t lowest = std::numeric_limits<int64_t>::min();
  n.x(random_array({3}, float32)).ints("split", {3}, {lowest, lowest, 3});
  onnx::Model m = load_proto(make_model(n.g, 18));
  expect_error<OnnxError>([&] { onnx::run(m, n.inputs); },
                          {"SplitToSequence 'sts'", "split sizes [-9223372036854775808,-9223372036854775808,3] have a "
                                                    "negative entry -9223372036854775808"},
                          "eager");
}

TEST(OnnxHardeningFuzz, ResizeRefusesEmptyAxesAndNonFiniteCoordinates) {
  auto resize = [](const Shape& x, const std::vector<float>& roi, const std::vector<int64_t>& sizes) {
    pb::NodeProto p = node("Resize", {"x", roi.empty() ? "" : "roi", "", "sizes"}, "rs");
    if (!roi.empty()) add_string_attr(p, "coordinate_transformation_mode", "tf_crop_and_resize");
    OneNode n(p);
    n.x(random_array(x, float32)).ints("sizes", {static_cast<int64_t>(sizes.size())}, sizes);
    if (!roi.empty()) n.floats("roi", {static_cast<int64_t>(roi.size())}, roi);
    return n;
  };
  // An empty axis resized to 8 had an infinite scale and source index INT64_MIN - 1 (UBSan).
  expect_both<OnnxError>(resize({1, 1, 0, 4}, {}, {1, 1, 8, 8}),
                         {"Resize 'rs'", "axis 2 of input [1,1,0,4] is empty and cannot be resized to 8 elements"});
  const float inf = std::numeric_limits<float>::infinity();
  expect_both<OnnxError>(resize({1, 1, 4, 4}, {0, 0, 0, 0, 1, 1, inf, 1}, {1, 1, 3, 3}),
                         {"Resize 'rs'", "output 0 on axis 2 has the source coordinate", "nan (scale 0.750000, roi 0.000000 to inf)"});
  // A roi far outside the input is extrapolated (it was converted to int64 past its range).
  OneNode far = resize({1, 1, 4, 4}, {0, 0, 0, 0, 1, 1, 1e30f, 1}, {1, 1, 2, 4});
  Array y = onnx::run(load_proto(make_model(far.g, 18)), far.inputs)[0].array();
  auto xv = far.inputs[0].array().to_vector<float>();
  std::vector<float> want(xv.begin(), xv.begin() + 4);  // row 0, then the extrapolation value 0
  want.resize(8, 0.0f);
  EXPECT_EQ(y.to_vector<float>(), want);
}

TEST(OnnxHardeningFuzz, AttentionFusionSkipsASoftmaxWithoutOutputs) {
  // fuse_attention read the output of a Softmax that had none while loading (UBSan).
  pb::GraphProto g;
  g.set_name("g");
  *g.add_node() = make_node("Softmax", {"x"}, {}, "smx");
  *g.add_node() = make_node("Relu", {"x"}, {"y"}, "relu");
  *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {1, 3});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {1, 3});
  onnx::Model m = load_proto(make_model(g, 13));
  Array x = random_array({1, 3}, float32);
  EXPECT_TRUE(bit_equal(onnx::run(m, {Value::tensor(x)})[0].array(), maximum(x, Array(0.0f))));
}

}  // namespace
}  // namespace smelt::test
