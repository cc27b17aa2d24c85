// The device-graph replay hook: which tapes get a graph replayer (none on the CPU, none across
// devices), and replay_tape_values, the replay a graph capture evaluates.
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
  // A graph captures one GPU's stream: an input on the host (or steps on two devices) rules it out.
  EXPECT_EQ(compiler::make_graph_replay(chain(Device::cpu(), Device::cuda(0)), "mixed_chain"), nullptr);
  EXPECT_EQ(compiler::make_graph_replay(chain(Device::cuda(0), Device::cpu()), "mixed_chain"), nullptr);
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
