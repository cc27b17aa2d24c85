// run_tape, the step-by-step replay straight into buffers: the same bits as replay_tape + eval on
// tapes with multi-output steps, repeated and dead values; the caller's inputs never donated,
// intermediates released after their last reader; which tapes it takes.
#include <gtest/gtest.h>

#include "smelt/compile.h"
#include "smelt/memory.h"
#include "smelt/random.h"
#include "smelt/smelt.h"
#include "src/compile/tape.h"
#include "test_utils.h"

namespace smelt {
namespace {

compiler::Step step(PrimKind kind, PrimParams params, std::vector<int> inputs, std::vector<int> outputs) {
  return {make_prim(kind, std::move(params)), std::move(inputs), std::move(outputs), Device::cpu()};
}

// x [4, 64], a constant [64]: a = exp(x); b = a * a (a read twice by its last reader);
// (v, i) = topk(b, 3) (i never read: a dead output); d = v + c[0:3]; outputs d, d again, the input and
// the constant.
compiler::Tape mixed_tape() {
  compiler::Tape t;
  t.device = Device::cpu();
  t.add_value({4, 64}, float32, Device::cpu());
  t.num_inputs = 1;
  const int c = t.add_value({64}, float32, Device::cpu());
  t.constants.emplace_back(c, random::normal(random::key(7), {64}));
  const int a = t.add_value({4, 64}, float32, Device::cpu()), b = t.add_value({4, 64}, float32, Device::cpu());
  const int v = t.add_value({4, 3}, float32, Device::cpu()), i = t.add_value({4, 3}, int64, Device::cpu());
  const int cs = t.add_value({3}, float32, Device::cpu()), cb = t.add_value({4, 3}, float32, Device::cpu());
  const int d = t.add_value({4, 3}, float32, Device::cpu());
  t.steps.push_back(step(PrimKind::Unary, UnaryParams{UnaryOp::Exp}, {0}, {a}));
  t.steps.push_back(step(PrimKind::Binary, BinaryParams{BinaryOp::Multiply}, {a, a}, {b}));
  t.steps.push_back(step(PrimKind::TopK, TopKParams{3, 1, true}, {b}, {v, i}));
  t.steps.push_back(step(PrimKind::Slice, SliceParams{{0}, {1}}, {c}, {cs}));
  t.steps.push_back(step(PrimKind::Broadcast, ShapeParams{{4, 3}}, {cs}, {cb}));
  t.steps.push_back(step(PrimKind::Binary, BinaryParams{BinaryOp::Add}, {v, cb}, {d}));
  t.outputs = {d, d, 0, c};
  compiler::verify_tape(t, "test");
  return t;
}

TEST(RunTape, SameBitsAsTheLazyReplay) {
  const compiler::Tape t = mixed_tape();
  const Array x = random::normal(random::key(3), {4, 64});
  std::vector<Array> lazy = compiler::replay_tape(t, {x});
  eval(lazy);
  ASSERT_TRUE(compiler::can_run_tape(t, {x}));
  // Twice: the second run reuses the thread's kept lists.
  for (int round = 0; round < 2; ++round) {
    std::vector<Array> direct = compiler::run_tape(t, {x});
    ASSERT_EQ(direct.size(), lazy.size());
    for (size_t k = 0; k < direct.size(); ++k) {
      EXPECT_TRUE(direct[k].is_evaluated()) << k;
      EXPECT_TRUE(test::bit_equal(direct[k], lazy[k])) << "output " << k << ", round " << round;
    }
    EXPECT_EQ(&direct[2].node(), &x.node());  // an input returned is the input itself
  }
}

TEST(RunTape, EvaluatesLazyInputsAndConstantsFirst) {
  const compiler::Tape t = mixed_tape();  // its constant is a lazy random draw
  ASSERT_FALSE(t.constants[0].second.is_evaluated());
  const Array base = random::normal(random::key(4), {4, 64});
  const Array lazy_x = base * 0.5f;
  ASSERT_FALSE(lazy_x.is_evaluated());
  std::vector<Array> direct = compiler::run_tape(t, {lazy_x});
  EXPECT_TRUE(lazy_x.is_evaluated());
  EXPECT_TRUE(t.constants[0].second.is_evaluated());
  std::vector<Array> lazy = compiler::replay_tape(t, {base * 0.5f});
  eval(lazy);
  for (size_t k = 0; k < direct.size(); ++k) EXPECT_TRUE(test::bit_equal(direct[k], lazy[k])) << k;
}

// x -> exp -> negative -> exp -> sqrt (abs first): four steps over 1 MiB.
compiler::Tape unary_chain() {
  compiler::Tape t;
  t.device = Device::cpu();
  t.add_value({1 << 18}, float32, Device::cpu());
  t.num_inputs = 1;
  int prev = 0;
  for (UnaryOp op : {UnaryOp::Exp, UnaryOp::Negative, UnaryOp::Exp, UnaryOp::Sqrt}) {
    const int next = t.add_value({1 << 18}, float32, Device::cpu());
    t.steps.push_back(step(PrimKind::Unary, UnaryParams{op}, {prev}, {next}));
    prev = next;
  }
  t.outputs = {prev};
  return t;
}

TEST(RunTape, NeverWritesTheCallersInputs) {
  const compiler::Tape t = unary_chain();
  const Array x = random::normal(random::key(5), {1 << 18});
  eval({x});
  const Array before = copy(x);
  eval({before});
  std::vector<Array> out = compiler::run_tape(t, {x});
  EXPECT_TRUE(test::bit_equal(x, before));
  EXPECT_NE(out[0].data(), x.data());
}

TEST(RunTape, ReleasesIntermediatesAfterTheirLastReader) {
  // Each step's input is read by it alone: its buffer is donated to the step's output (or freed),
  // so the chain holds at most two 1 MiB buffers at a time, never all four intermediates.
  const compiler::Tape t = unary_chain();
  const Array x = random::normal(random::key(6), {1 << 18});
  eval({x});
  const size_t mib = size_t{1} << 20;
  const size_t base = memory_info().active_bytes;
  reset_peak_memory();
  std::vector<Array> out = compiler::run_tape(t, {x});
  EXPECT_LE(memory_info().peak_bytes, base + 2 * mib);
  EXPECT_EQ(memory_info().active_bytes, base + mib);  // the output alone
}

TEST(RunTape, TakesCpuTapesOfRealInputsOnly) {
  const compiler::Tape t = unary_chain();
  EXPECT_TRUE(compiler::can_run_tape(t, {zeros({1 << 18}, float32)}));
  // Inside a trace the inputs are placeholders: the replay must build the trace's graph.
  bool traced_input_taken = true;
  auto f = compile([&](const std::vector<Array>& in) {
    traced_input_taken = compiler::can_run_tape(t, in);
    return std::vector<Array>{in[0] + 1.0f};
  });
  eval(f({zeros({1 << 18}, float32)}));
  EXPECT_FALSE(traced_input_taken);
  compiler::Tape gpu = unary_chain();
  gpu.values.back().device = Device::cuda(0);
  EXPECT_FALSE(compiler::can_run_tape(gpu, {zeros({1 << 18}, float32)}));
}

}  // namespace
}  // namespace smelt
