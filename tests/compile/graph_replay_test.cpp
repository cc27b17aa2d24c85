// The device-graph replay hook: which tapes get a graph replayer (none on the CPU, none across
// devices), the host prologue split off a GPU tape, and replay_tape_values, the replay a graph
// capture evaluates.
#include <gtest/gtest.h>

#include "smelt/smelt.h"
#include "src/compile/graph_replay.h"
#include "src/compile/tape.h"
#include "test_utils.h"

namespace smelt {
namespace {

// x -> exp(x) -> exp(exp(x)) + x: the input on `input_device`, the steps on `step_device`.
compiler::Tape chain(Device input_device, Device step_device) {
  compiler::Tape t;
  t.device = step_device;
  t.add_value({3}, float32, input_device);
  t.num_inputs = 1;
  int a = t.add_value({3}, float32, step_device), b = t.add_value({3}, float32, step_device);
  int c = t.add_value({3}, float32, step_device);
  t.steps.push_back({make_prim(PrimKind::Unary, UnaryParams{UnaryOp::Exp}), {0}, {a}, step_device});
  t.steps.push_back({make_prim(PrimKind::Unary, UnaryParams{UnaryOp::Exp}), {a}, {b}, step_device});
  t.steps.push_back({make_prim(PrimKind::Binary, BinaryParams{BinaryOp::Add}), {b, 0}, {c}, step_device});
  t.outputs = {c};
  return t;
}

TEST(GraphReplay, CpuTapesReplayPlainly) {
  EXPECT_EQ(compiler::make_graph_replay(chain(Device::cpu(), Device::cpu()), "cpu_chain"), nullptr);
}

TEST(GraphReplay, TapesAcrossDevicesReplayPlainly) {
  // A graph captures one GPU's stream: a step that reads a host input without copying it (or
  // steps on two devices) rules it out.
  EXPECT_EQ(compiler::make_graph_replay(chain(Device::cpu(), Device::cuda(0)), "mixed_chain"), nullptr);
  EXPECT_EQ(compiler::make_graph_replay(chain(Device::cuda(0), Device::cpu()), "mixed_chain"), nullptr);
}

// A batch made on the host: input 0 (host) reshaped on the host and copied to cuda:0, then added
// to input 1 (on cuda:0); a host constant is read by the device step as a literal.
compiler::Tape host_batch_tape(bool copy_before_use) {
  const Device g = Device::cuda(0), h = Device::cpu();
  compiler::Tape t;
  t.device = g;
  t.add_value({2, 3}, float32, h);
  t.add_value({6}, float32, g);
  t.num_inputs = 2;
  const int scale = t.add_value({}, float32, h);
  t.constants.emplace_back(scale, Array(2.0f));
  const int flat = t.add_value({6}, float32, h);
  t.steps.push_back({make_prim(PrimKind::Reshape, ShapeParams{{6}}), {0}, {flat}, h});
  int on_gpu = flat;
  if (copy_before_use) {
    on_gpu = t.add_value({6}, float32, g);
    t.steps.push_back({make_prim(PrimKind::Copy, NoParams{}), {flat}, {on_gpu}, g});
  }
  const int sum = t.add_value({6}, float32, g), scaled = t.add_value({6}, float32, g);
  t.steps.push_back({make_prim(PrimKind::Binary, BinaryParams{BinaryOp::Add}), {on_gpu, 1}, {sum}, g});
  t.steps.push_back({make_prim(PrimKind::Binary, BinaryParams{BinaryOp::Multiply}), {sum, scale}, {scaled}, g});
  t.outputs = {scaled};
  return t;
}

TEST(GraphReplay, HostPrologueSplitsOff) {
  const compiler::Tape t = host_batch_tape(true);
  compiler::verify_tape(t, "test");
  std::string why;
  auto split = compiler::split_host_prologue(t, Device::cuda(0), why);
  ASSERT_TRUE(split) << why;
  EXPECT_EQ(split->kept_inputs, std::vector<int>{1});
  EXPECT_EQ(split->host_steps, (std::vector<size_t>{0, 1}));  // the reshape and the upload
  ASSERT_EQ(split->uploads.size(), 1u);
  const compiler::Tape& d = split->device;
  EXPECT_EQ(d.num_inputs, 2);  // input 1, then the upload
  EXPECT_EQ(d.values[0].device, Device::cuda(0));
  EXPECT_EQ(d.values[1].device, Device::cuda(0));
  EXPECT_EQ(d.values[1].shape, Shape{6});
  ASSERT_EQ(d.steps.size(), 2u);  // the add and the multiply
  EXPECT_EQ(d.steps[0].prim.kind, PrimKind::Binary);
  EXPECT_EQ(d.steps[0].inputs, (std::vector<int>{1, 0}));
  ASSERT_EQ(d.constants.size(), 1u);
  EXPECT_EQ(d.outputs.size(), 1u);
  compiler::verify_tape(d, "test");
  EXPECT_NE(compiler::dump_tape(d).find("Multiply"), std::string::npos) << compiler::dump_tape(d);
}

TEST(GraphReplay, HostPrologueRefusalsSayWhy) {
  std::string why;
  // A device step that reads a host value (not a constant) without a copy.
  EXPECT_FALSE(compiler::split_host_prologue(host_batch_tape(false), Device::cuda(0), why));
  EXPECT_NE(why.find("step 1 (Binary) reads host value %3 on cuda:0 without copying it first"), std::string::npos) << why;
  // Steps on another GPU.
  EXPECT_FALSE(compiler::split_host_prologue(host_batch_tape(true), Device::cuda(1), why));
  EXPECT_NE(why.find("runs on cuda:0, not on cuda:1"), std::string::npos) << why;
  // A host step that reads a device value (a download), and a host value returned.
  compiler::Tape down = chain(Device::cuda(0), Device::cpu());
  down.steps[0].device = Device::cuda(0);
  down.values[1].device = Device::cuda(0);
  EXPECT_FALSE(compiler::split_host_prologue(down, Device::cuda(0), why));
  EXPECT_NE(why.find("step 1 (Unary) runs on cpu and reads a value on cuda:0"), std::string::npos) << why;
  compiler::Tape returns_host = host_batch_tape(true);
  returns_host.outputs.push_back(3);
  EXPECT_FALSE(compiler::split_host_prologue(returns_host, Device::cuda(0), why));
  EXPECT_NE(why.find("the function returns host value %3"), std::string::npos) << why;
  // A tape without host steps is its own device part.
  auto same = compiler::split_host_prologue(chain(Device::cuda(0), Device::cuda(0)), Device::cuda(0), why);
  ASSERT_TRUE(same);
  EXPECT_TRUE(same->host_steps.empty());
  EXPECT_EQ(same->device.steps.size(), 3u);
}

TEST(GraphReplay, ReplayTapeValuesKeepsEveryValue) {
  compiler::Tape t = chain(Device::cpu(), Device::cpu());
  Array x(std::vector<float>{0.5f, -1.0f, 2.0f}, {3});
  std::vector<Array> values = compiler::replay_tape_values(t, {x});
  ASSERT_EQ(values.size(), t.values.size());
  EXPECT_EQ(&values[0].node(), &x.node());  // the input itself
  for (const Array& v : values) EXPECT_TRUE(v.valid());
  std::vector<Array> outs = compiler::replay_tape(t, {x});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_TRUE(test::bit_equal(values[static_cast<size_t>(t.outputs[0])], outs[0]));
  EXPECT_TRUE(test::bit_equal(values[1], exp(x)));
  EXPECT_TRUE(test::bit_equal(outs[0], exp(exp(x)) + x));
}

}  // namespace
}  // namespace smelt
