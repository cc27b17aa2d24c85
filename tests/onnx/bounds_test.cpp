// Bounded execution (RunOptions: deadline, cancellation, memory budget, nesting depth), recursive
// functions refused at load, linear-time regexes, and external data confined to the model's folder.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "onnx/model_builder.h"
#include "onnx/onnx_test_helpers.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

namespace fs = std::filesystem;
using onnx::Value;

constexpr int64_t kEndless = int64_t{1} << 62;

// ---------------------------------------------------------------------------------------------
// Models
// ---------------------------------------------------------------------------------------------

/// Loop(M, cond, x) whose body adds 1 to the state x (float [n]) and emits x as a scan output; the
/// body's condition stays true. `trip` < 0 leaves the trip count out (the loop then runs while
/// the condition holds, which is forever).
pb::ModelProto loop_model(int64_t trip, int64_t n) {
  pb::GraphProto body;
  body.set_name("body");
  *body.add_input() = tensor_info("i", pb::TensorProto::INT64, {});
  *body.add_input() = tensor_info("c", pb::TensorProto::BOOL, {});
  *body.add_input() = tensor_info("x_in", pb::TensorProto::FLOAT, {n});
  *body.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {}, {1.0f}, "one");
  *body.add_node() = make_node("Identity", {"c"}, {"c_out"}, "keep_going");
  *body.add_node() = make_node("Add", {"x_in", "one"}, {"x_out"}, "step");
  *body.add_node() = make_node("Identity", {"x_in"}, {"s_out"}, "emit");
  *body.add_output() = tensor_info("c_out", pb::TensorProto::BOOL, {});
  *body.add_output() = tensor_info("x_out", pb::TensorProto::FLOAT, {n});
  *body.add_output() = tensor_info("s_out", pb::TensorProto::FLOAT, {n});

  pb::GraphProto g;
  g.set_name("g");
  *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {n});
  if (trip >= 0) *g.add_initializer() = raw_tensor<int64_t>(pb::TensorProto::INT64, {}, {trip}, "M");
  *g.add_initializer() = raw_tensor<uint8_t>(pb::TensorProto::BOOL, {}, {1}, "cond");
  auto loop = make_node("Loop", {trip >= 0 ? "M" : "", "cond", "x"}, {"y", "ys"}, "loop");
  add_graph_attr(loop, "body", body);
  *g.add_node() = loop;
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {n});
  pb::ValueInfoProto ys;
  ys.set_name("ys");
  *g.add_output() = ys;
  return make_model(g, 18);
}

Value ones_input(int64_t n) { return Value::tensor(ones({n}, float32)); }

/// A FunctionProto named `name` in domain "custom" whose body is one node calling `callee` (in
/// "custom" too), optionally inside an If's then-branch.
pb::FunctionProto calling_function(const std::string& name, const std::string& callee, bool inside_if = false) {
  pb::FunctionProto f;
  f.set_domain("custom");
  f.set_name(name);
  f.add_input("a");
  f.add_output("b");
  auto call = make_node(callee, {"a"}, {inside_if ? "inner" : "b"}, "call_" + callee);
  call.set_domain("custom");
  if (inside_if) {
    pb::GraphProto then_branch;
    then_branch.set_name("then");
    *then_branch.add_node() = call;
    pb::ValueInfoProto out;
    out.set_name("inner");
    *then_branch.add_output() = out;
    pb::GraphProto else_branch = then_branch;
    else_branch.set_name("else");
    *f.add_node() = make_node("Constant", {}, {"t"}, "truth");
    auto* v = f.mutable_node(0)->add_attribute();
    v->set_name("value");
    v->set_type(pb::AttributeProto::TENSOR);
    *v->mutable_t() = raw_tensor<uint8_t>(pb::TensorProto::BOOL, {}, {1}, "t");
    auto n_if = make_node("If", {"t"}, {"b"}, "branch");
    add_graph_attr(n_if, "then_branch", then_branch);
    add_graph_attr(n_if, "else_branch", else_branch);
    *f.add_node() = n_if;
  } else {
    *f.add_node() = call;
  }
  for (const char* d : {"", "custom"}) {
    auto* o = f.add_opset_import();
    o->set_domain(d);
    o->set_version(d[0] ? 1 : 18);
  }
  return f;
}

pb::ModelProto model_calling(const std::string& fn, const std::vector<pb::FunctionProto>& functions) {
  pb::GraphProto g;
  g.set_name("g");
  auto call = make_node(fn, {"x"}, {"y"}, "top");
  call.set_domain("custom");
  *g.add_node() = call;
  *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {2});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {2});
  pb::ModelProto mp = make_model(g);
  auto* o = mp.add_opset_import();
  o->set_domain("custom");
  o->set_version(1);
  for (const auto& f : functions) *mp.add_functions() = f;
  return mp;
}

onnx::Attribute attr_string(const std::string& name, const std::string& v) {
  onnx::Attribute a;
  a.name = name;
  a.type = onnx::Attribute::Type::String;
  a.s = v;
  return a;
}

std::vector<bool> regex_full_match(const std::string& pattern, const std::vector<std::string>& strings,
                                   const onnx::RunOptions& options = {}) {
  GraphBuilder b;
  b.output(b.node("RegexFullMatch", {b.input("s", onnx::ElemType::String, 1)}, {attr_string("pattern", pattern)}));
  onnx::Model m = make_model(b.graph(), 20);
  auto out = onnx::run(
      m, {Value::strings(onnx::StringTensor{Shape{static_cast<int64_t>(strings.size())}, strings})}, options);
  std::vector<bool> result;
  for (auto v : out[0].array().to_vector<uint8_t>()) result.push_back(v != 0);
  return result;
}

// ---------------------------------------------------------------------------------------------
// Loop with 2^62 trips (or none and a condition that stays true): stopped by the run's bounds
// ---------------------------------------------------------------------------------------------

TEST(OnnxBounds, EndlessLoopStoppedByTimeout) {
  onnx::Model m = load_proto(loop_model(kEndless, 4));
  onnx::RunOptions o;
  o.timeout = std::chrono::milliseconds(100);
  // Without checks inside the Loop's iterations these runs would never end.
  EXPECT_THROW_MSG(onnx::run(m, {ones_input(4)}, o), DeadlineExceeded, "Loop 'loop'");
  EXPECT_THROW_MSG(onnx::run(m, {ones_input(4)}, o), DeadlineExceeded, "the run passed its timeout of 100 ms after ");
  // No trip count and a condition that stays true: the same.
  onnx::Model unbounded = load_proto(loop_model(-1, 4));
  EXPECT_THROW_MSG(onnx::run(unbounded, {ones_input(4)}, o), DeadlineExceeded, "Loop 'loop'");
}

TEST(OnnxBounds, EndlessLoopStoppedByAbsoluteDeadline) {
  onnx::Model m = load_proto(loop_model(kEndless, 4));
  onnx::RunOptions o;
  o.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  EXPECT_THROW_MSG(onnx::run(m, {ones_input(4)}, o), DeadlineExceeded, "Loop 'loop'");
  // A deadline already passed stops the run before its first node.
  o.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  EXPECT_THROW_MSG(onnx::run(m, {ones_input(4)}, o), DeadlineExceeded,
                   "Loop 'loop': the run passed its deadline (already past when it started)");
}

TEST(OnnxBounds, EndlessLoopCancelledFromAnotherThread) {
  onnx::Model m = load_proto(loop_model(kEndless, 4));
  onnx::RunOptions o;
  o.cancel = std::make_shared<onnx::CancelToken>();
  std::thread canceller([token = o.cancel] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    token->cancel();
  });
  EXPECT_THROW_MSG(onnx::run(m, {ones_input(4)}, o), Cancelled, "Loop 'loop'");
  canceller.join();
  EXPECT_TRUE(o.cancel->cancelled());
  // The token stays cancelled: the next run with it stops before its first node.
  EXPECT_THROW_MSG(onnx::run(m, {ones_input(4)}, o), Cancelled,
                   "Loop 'loop': the run was cancelled (RunOptions::cancel)");
}

TEST(OnnxBounds, EndlessLoopWithScanOutputStoppedByMemoryBudget) {
  // Each iteration keeps 4 KiB of scan output: a 1 MiB budget ends it after about 256.
  onnx::Model m = load_proto(loop_model(kEndless, 1024));
  onnx::RunOptions o;
  o.memory_budget_bytes = 1 << 20;
  // The iteration's own values or the loop's gathered outputs pass it: the message names the
  // Loop either way ("Loop 'loop' > Identity 'emit': ..." or "Loop 'loop': ...").
  EXPECT_THROW_MSG(onnx::run(m, {ones_input(1024)}, o), OutOfMemory, "Loop 'loop'");
  EXPECT_THROW_MSG(onnx::run(m, {ones_input(1024)}, o), OutOfMemory,
                   "bytes of tensors, over its memory budget of 1048576 bytes (RunOptions::memory_budget_bytes)");
}

TEST(OnnxBounds, CompiledModelCallIsBoundedToo) {
  onnx::Model m = load_proto(loop_model(kEndless, 4));
  onnx::CompiledModel cm = onnx::compile(m);
  onnx::RunOptions o;
  o.timeout = std::chrono::milliseconds(100);
  EXPECT_THROW_MSG(cm({ones_input(4)}, o), DeadlineExceeded, "Loop 'loop'");
  onnx::RunOptions c;
  c.cancel = std::make_shared<onnx::CancelToken>();
  c.cancel->cancel();
  EXPECT_THROW_MSG(cm.run_named({{"x", ones_input(4)}}, c), Cancelled, "Loop 'loop'");
  onnx::RunOptions b;
  b.memory_budget_bytes = 1 << 20;
  EXPECT_THROW_MSG(cm({ones_input(1024)}, b), OutOfMemory, "Loop 'loop'");
}

TEST(OnnxBounds, FiniteLoopGivesTheSameResultsWithBounds) {
  // Bounds that are not reached change nothing, bit for bit.
  onnx::Model m = load_proto(loop_model(5, 3));
  Array x = random_array({3}, float32, -1, 1, 7);
  auto plain = onnx::run(m, {Value::tensor(x)});
  onnx::RunOptions o;
  o.timeout = std::chrono::seconds(600);
  o.cancel = std::make_shared<onnx::CancelToken>();
  o.memory_budget_bytes = 1 << 20;
  auto bounded = onnx::run(m, {Value::tensor(x)}, o);
  ASSERT_EQ(plain.size(), 2u);
  ASSERT_EQ(bounded.size(), 2u);
  for (size_t k = 0; k < 2; ++k) EXPECT_TRUE(bit_equal(plain[k].array(), bounded[k].array()));
  // y = x + 5, ys[i] = x + i: float additions of small integers are exact.
  auto xv = x.to_vector<float>();
  auto yv = bounded[0].array().to_vector<float>();
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(yv[i], xv[i] + 1.0f + 1.0f + 1.0f + 1.0f + 1.0f);
  EXPECT_EQ(bounded[1].shape(), (Shape{5, 3}));
}

TEST(OnnxBounds, MemoryBudgetNamesTheNodeThatPassesIt) {
  // Expand to 2^20 floats (4 MiB) under a 1 MiB budget: refused at the node, before it runs.
  GraphBuilder b;
  std::string x = b.input("x", onnx::ElemType::Float, 1);
  std::string shape = b.int64s("shape", {1 << 20});
  std::string small = b.node("Relu", {x});
  b.output(b.node("Expand", {small, shape}));
  onnx::Model m = make_model(b.graph());
  onnx::RunOptions o;
  o.memory_budget_bytes = 1 << 20;
  EXPECT_THROW_MSG(onnx::run(m, {ones_input(1)}, o), OutOfMemory,
                   "Expand 'Expand_0' (inputs tensor(float)[1], tensor(int64)[1]): the run would hold 4194308 bytes of "
                   "tensors, over its memory budget of 1048576");
  o.memory_budget_bytes = 8 << 20;
  auto out = onnx::run(m, {ones_input(1)}, o);
  EXPECT_EQ(out[0].shape(), (Shape{1 << 20}));
}

TEST(OnnxBounds, InvalidOptions) {
  onnx::Model m = load_proto(loop_model(1, 2));
  onnx::RunOptions o;
  o.memory_budget_bytes = -1;
  EXPECT_THROW_MSG(onnx::run(m, {ones_input(2)}, o), InvalidArgument,
                   "run: RunOptions::memory_budget_bytes must be >= 0 (0: no limit), got -1");
  onnx::RunOptions d;
  d.max_call_depth = 0;
  EXPECT_THROW_MSG(onnx::run(m, {ones_input(2)}, d), InvalidArgument, "run: RunOptions::max_call_depth must be >= 1, got 0");
}

// ---------------------------------------------------------------------------------------------
// Recursion: refused at load (functions), capped at run time (nesting depth)
// ---------------------------------------------------------------------------------------------

TEST(OnnxBounds, SelfRecursiveFunctionRefusedAtLoad) {
  EXPECT_THROW_MSG(load_proto(model_calling("F", {calling_function("F", "F")})), OnnxError,
                   "load: function custom.F calls itself (custom.F -> custom.F): recursive functions are not allowed");
}

TEST(OnnxBounds, MutuallyRecursiveFunctionsRefusedAtLoad) {
  EXPECT_THROW_MSG(load_proto(model_calling("A", {calling_function("A", "B"), calling_function("B", "A")})), OnnxError,
                   "load: functions call each other in a cycle (custom.A -> custom.B -> custom.A)");
  // The call may hide in a subgraph of the body; a cycle not reached from the graph counts too.
  EXPECT_THROW_MSG(load_proto(model_calling("C", {calling_function("C", "C2"), calling_function("A", "B", true),
                                                  calling_function("B", "A"), calling_function("C2", "Relu")})),
                   OnnxError, "(custom.A -> custom.B -> custom.A)");
}

TEST(OnnxBounds, FunctionChainWithoutCycleLoadsAndRuns) {
  // A -> B -> (If) C -> Relu: no cycle.
  pb::FunctionProto c = calling_function("C", "Relu");
  c.mutable_node(0)->set_domain("");
  onnx::Model m = load_proto(model_calling("A", {calling_function("A", "B"), calling_function("B", "C", true), c}));
  auto out = onnx::run(m, {Value::tensor(Array(std::vector<float>{-1, 2}, Shape{2}))});
  EXPECT_TRUE(all_close(out[0].array(), {0, 2}, 0, 0));
  // Its nesting (A, B, the If's branch, C) is 4 deep: a limit of 3 stops it, naming the node.
  onnx::RunOptions o;
  o.max_call_depth = 3;
  EXPECT_THROW_MSG(onnx::run(m, {Value::tensor(Array(std::vector<float>{-1, 2}, Shape{2}))}, o), OnnxError,
                   "C 'call_C': the call of function C would nest 4 levels deep, past the run's max_call_depth of 3");
}

TEST(OnnxBounds, RecursionInAModelBuiltInMemoryHitsTheDepthLimit) {
  // A model built in C++ skips the loader's check: the run's depth limit still stops it.
  pb::FunctionProto relu = calling_function("G", "Relu");
  relu.mutable_node(0)->set_domain("");
  onnx::Model m = load_proto(model_calling("G", {relu}));
  onnx::Function& g = m.functions[0];
  g.nodes[0].op_type = "G";
  g.nodes[0].domain = "custom";
  EXPECT_THROW_MSG(onnx::run(m, {Value::tensor(Array(std::vector<float>{1, 2}, Shape{2}))}), OnnxError,
                   "the call of function G would nest 65 levels deep, past the run's max_call_depth of 64");
}

TEST(OnnxBounds, NestedSubgraphsHitTheDepthLimit) {
  // If inside If inside If: 3 levels of subgraphs.
  auto make_if = [](const std::string& name, std::shared_ptr<const onnx::Graph> branch) {
    GraphBuilder g(name + "_outer");
    std::string c = g.constant("c_" + name, Array(true));
    g.output(g.node("If", {c}, {attr_graph("then_branch", branch), attr_graph("else_branch", branch)}));
    return g.graph();
  };
  GraphBuilder leaf("leaf");
  leaf.output(leaf.float_scalar("v", 3.0f));
  auto level1 = make_if("l1", leaf.graph());
  auto level2 = make_if("l2", level1);
  auto level3 = make_if("l3", level2);
  onnx::Model m = make_model(level3);
  auto out = onnx::run(m, {});
  EXPECT_EQ(out[0].array().item<float>(), 3.0f);
  onnx::RunOptions o;
  o.max_call_depth = 2;
  EXPECT_THROW_MSG(onnx::run(m, {}, o), OnnxError,
                   "If 'If_0' (inputs tensor(bool)[]): subgraph 'leaf' would nest 3 levels deep, past the run's max_call_depth of 2");
}

// ---------------------------------------------------------------------------------------------
// RegexFullMatch: RE2, linear time, no recursion
// ---------------------------------------------------------------------------------------------

TEST(OnnxBounds, RegexAlternationStarOnALongString) {
  // std::regex recursed once per character: 200 KB overflowed the stack.
  std::string ab;
  for (int i = 0; i < 100000; ++i) ab += "ab";
  auto r = regex_full_match("(a|b)*", {ab, ab + "c", ""});
  EXPECT_EQ(r, (std::vector<bool>{true, false, true}));
}

TEST(OnnxBounds, RegexNestedQuantifiersDoNotBacktrack) {
  // (a+)+$ on 30 a's and a b backtracks 2^30 times in a backtracking engine.
  std::string s(30, 'a');
  auto r = regex_full_match("(a+)+$", {s + "b", s, "b"});
  EXPECT_EQ(r, (std::vector<bool>{false, true, false}));
}

TEST(OnnxBounds, RegexFullMatchSemantics) {
  // Full match (anchored at both ends), RE2 syntax: classes, counted repetition, alternation.
  EXPECT_EQ(regex_full_match("[a-z]+@[a-z]+\\.com", {"ab@cd.com", "ab@cd.com.au", "x ab@cd.com"}),
            (std::vector<bool>{true, false, false}));
  EXPECT_EQ(regex_full_match("\\d{3}-\\d{4}", {"555-1234", "5555-1234", "555-123"}),
            (std::vector<bool>{true, false, false}));
  EXPECT_EQ(regex_full_match("(?i)hello|bye", {"HeLLo", "bye", "byebye"}), (std::vector<bool>{true, true, false}));
  // A pattern RE2 cannot compile (backreferences are not RE2 syntax).
  EXPECT_THROW_MSG(regex_full_match("(a)\\1", {"aa"}), OnnxError,
                   "RegexFullMatch 'RegexFullMatch_0' (inputs tensor(string)[1]): invalid pattern \"(a)\\1\": invalid escape sequence");
}

TEST(OnnxBounds, RegexOverManyStringsIsCancellable) {
  onnx::RunOptions o;
  o.cancel = std::make_shared<onnx::CancelToken>();
  o.cancel->cancel();
  EXPECT_THROW_MSG(regex_full_match("a*", std::vector<std::string>(1000, "aaa"), o), Cancelled,
                   "RegexFullMatch 'RegexFullMatch_0': the run was cancelled");
}

// ---------------------------------------------------------------------------------------------
// External data: confined to the model's folder, regular files only, lengths checked
// ---------------------------------------------------------------------------------------------

/// A model whose initializer w (float [n]) is external data at `location`.
pb::ModelProto external_model(const std::string& location, int64_t n, const std::string& offset = "",
                              const std::string& length = "") {
  pb::GraphProto g;
  g.set_name("g");
  *g.add_initializer() = external_float_tensor("w", n, location, offset, length);
  *g.add_node() = make_node("Identity", {"w"}, {"y"});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {n});
  return make_model(g);
}

void write_floats(const std::string& path, const std::vector<float>& v) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
}

TEST(OnnxBounds, ExternalDataSymlinkToAFileOutsideIsRefused) {
  std::string dir = temp_dir("bounds_symlink_file");
  std::string outside = temp_dir("bounds_symlink_file_outside");
  write_floats(outside + "/secret.bin", {1, 2, 3, 4});
  fs::create_symlink(outside + "/secret.bin", dir + "/w.bin");
  EXPECT_THROW_MSG(load_proto(external_model("w.bin", 4), dir), OnnxError,
                   "initializer 'w': external data location 'w.bin' resolves to '" +
                       fs::canonical(outside + "/secret.bin").string() + "', outside the model's folder '" +
                       fs::canonical(dir).string() + "'");
  // /etc/passwd through a symlink: the bytes never become weights.
  fs::create_symlink("/etc/passwd", dir + "/passwd.bin");
  EXPECT_THROW_MSG(load_proto(external_model("passwd.bin", 4), dir), OnnxError, "outside the model's folder");
  // A symlink that stays inside the folder is fine.
  write_floats(dir + "/real.bin", {5, 6, 7, 8});
  fs::create_symlink("real.bin", dir + "/alias.bin");
  onnx::Model m = load_proto(external_model("alias.bin", 4), dir);
  EXPECT_EQ(m.graph->initializers[0].second.array().to_vector<float>(), (std::vector<float>{5, 6, 7, 8}));
  fs::remove_all(dir);
  fs::remove_all(outside);
}

TEST(OnnxBounds, ExternalDataInASymlinkedFolderOutsideIsRefused) {
  std::string dir = temp_dir("bounds_symlink_folder");
  std::string outside = temp_dir("bounds_symlink_folder_outside");
  write_floats(outside + "/w.bin", {1, 2, 3, 4});
  fs::create_directory_symlink(outside, dir + "/data");
  EXPECT_THROW_MSG(load_proto(external_model("data/w.bin", 4), dir), OnnxError,
                   "external data location 'data/w.bin' resolves to '" + fs::canonical(outside + "/w.bin").string() +
                       "', outside the model's folder");
  // The model's folder itself may be reached through a symlink: it is resolved too.
  std::string link = dir + "_link";
  fs::remove_all(link);
  fs::create_directory_symlink(outside, link);
  onnx::Model m = load_proto(external_model("w.bin", 4), link);
  EXPECT_EQ(m.graph->initializers[0].second.array().to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  fs::remove(link);
  fs::remove_all(dir);
  fs::remove_all(outside);
}

TEST(OnnxBounds, ExternalDataFifoIsRefusedWithoutBlocking) {
  // Opening a FIFO for reading blocks until a writer comes; none will.
  std::string dir = temp_dir("bounds_fifo");
  ASSERT_EQ(mkfifo((dir + "/w.bin").c_str(), 0600), 0);
  EXPECT_THROW_MSG(load_proto(external_model("w.bin", 4), dir), OnnxError,
                   "initializer 'w': external data location 'w.bin' is not a regular file");
  fs::remove_all(dir);
}

TEST(OnnxBounds, ExternalDataOffsetAndLengthPastTheEnd) {
  std::string dir = temp_dir("bounds_past_end");
  write_floats(dir + "/w.bin", {1, 2, 3, 4});
  EXPECT_THROW_MSG(load_proto(external_model("w.bin", 4, "17"), dir), OnnxError,
                   "external data file 'w.bin' has 16 bytes; offset 17 + length 0 is past its end");
  EXPECT_THROW_MSG(load_proto(external_model("w.bin", 4, "8", "16"), dir), OnnxError,
                   "external data file 'w.bin' has 16 bytes; offset 8 + length 16 is past its end");
  // offset + length would overflow int64: still compared correctly.
  EXPECT_THROW_MSG(load_proto(external_model("w.bin", 4, "8", "9223372036854775807"), dir), OnnxError,
                   "has 16 bytes; offset 8 + length 9223372036854775807 is past its end");
  EXPECT_THROW_MSG(load_proto(external_model("w.bin", 4, "9223372036854775807", "16"), dir), OnnxError,
                   "is past its end");
  // Past int64 altogether: not a number smelt accepts.
  EXPECT_THROW_MSG(load_proto(external_model("w.bin", 4, "99999999999999999999"), dir), OnnxError,
                   "external data offset '99999999999999999999' is not a non-negative integer");
  // In range: read.
  onnx::Model m = load_proto(external_model("w.bin", 2, "8", "8"), dir);
  EXPECT_EQ(m.graph->initializers[0].second.array().to_vector<float>(), (std::vector<float>{3, 4}));
  fs::remove_all(dir);
}

// ---------------------------------------------------------------------------------------------
// smelt run --timeout
// ---------------------------------------------------------------------------------------------

/// The smelt binary: $SMELT_CLI, else tools/smelt/smelt in the build folder holding this test.
std::string cli_path() {
  if (const char* env = std::getenv("SMELT_CLI")) return env;
  return (fs::canonical("/proc/self/exe").parent_path().parent_path() / "tools" / "smelt" / "smelt").string();
}

TEST(OnnxBounds, CliRunTimeout) {
  std::string dir = temp_dir("bounds_cli");
  std::string model = dir + "/endless.onnx";
  {
    std::ofstream out(model, std::ios::binary);
    out << serialize(loop_model(kEndless, 4));
  }
  for (const std::string extra : {"", " --compile"}) {
    std::string cmd = "SMELT_NUM_THREADS=1 '" + cli_path() + "' run '" + model + "' --timeout 0.2" + extra + " >'" +
                      dir + "/out' 2>'" + dir + "/err'";
    int raw = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(raw)) << cmd;
    EXPECT_EQ(WEXITSTATUS(raw), 1) << cmd;
    std::ifstream f(dir + "/err");
    std::string err((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_NE(err.find("smelt run: Loop 'loop'"), std::string::npos) << err;
    EXPECT_NE(err.find("the run passed its timeout of 200 ms"), std::string::npos) << err;
  }
  // A value that is not a positive number is a usage error (status 2).
  int raw = std::system(("'" + cli_path() + "' run '" + model + "' --timeout -1 >/dev/null 2>'" + dir + "/err'").c_str());
  ASSERT_TRUE(WIFEXITED(raw));
  EXPECT_EQ(WEXITSTATUS(raw), 2);
  std::ifstream f(dir + "/err");
  std::string err((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(err.find("--timeout needs a positive number of seconds, got '-1'"), std::string::npos) << err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace smelt::test
