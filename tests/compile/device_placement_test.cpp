// Device bookkeeping of compile without a GPU: the key holds every input's device, each tape step
// records and replays on its own device, CSE and fusion never merge across devices.
//
// A machine without a GPU cannot run GPU kernels, but tracing, the passes and replay only build
// graphs: arrays that claim to live on cuda:0 (never evaluated) exercise the same code paths the
// GPU tests in tests/backend/cuda/device_placement_test.cpp run for real.
#include <unordered_set>

#include "compile_helpers.h"
#include "src/compile/fuse.h"

namespace smelt {
namespace {

using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

const Device kGpu = Device::cuda(0);

/// An array that says it lives on cuda:0 and has no data: only for graphs that are never run.
Array unrun_gpu_array(const Shape& shape, Dtype dtype = float32) {
  return detail::make_leaf(shape, dtype, kGpu, nullptr, row_major_strides(shape));
}

Array rand(const Shape& shape, uint32_t seed) { return test::random_array(shape, float32, -2.0, 2.0, seed); }

/// What to_device makes (a Copy node on the target device), without its availability check.
Array copy_to(const Array& a, Device device) {
  return make_array(a.shape(), a.dtype(), device, make_prim(PrimKind::Copy, NoParams{}), {a});
}

/// Every node of the lazy graph above `root` (worklist walk).
std::vector<const detail::Node*> graph_nodes(const Array& root) {
  std::vector<const detail::Node*> out, work{&root.node()};
  std::unordered_set<const detail::Node*> seen{&root.node()};
  while (!work.empty()) {
    const detail::Node* n = work.back();
    work.pop_back();
    out.push_back(n);
    for (auto& in : n->inputs)
      if (seen.insert(&in.node()).second) work.push_back(&in.node());
  }
  return out;
}

// x on the CPU, y on the GPU: neg(exp(x)) runs on the CPU, is copied to the GPU (as an eager
// add with a GPU operand does), added to y there and exponentiated there.
std::vector<Array> mixed_chain(const std::vector<Array>& in) {
  Array b = negative(exp(in[0]));
  Array d = add(copy_to(b, in[1].device()), in[1]);
  return {exp(d), b};
}

TEST(DevicePlacement, EachStepRecordsAndReplaysOnItsOwnDevice) {
  const Array x = rand({4, 8}, 1);
  compiler::Tape tape = test::trace_tape(mixed_chain, {x, unrun_gpu_array({4, 8})});
  EXPECT_EQ(tape.values[0].device, Device::cpu());
  EXPECT_EQ(tape.values[1].device, kGpu);
  std::vector<std::pair<PrimKind, Device>> steps;
  for (auto& s : tape.steps) steps.emplace_back(s.prim.kind, s.device);
  const std::vector<std::pair<PrimKind, Device>> expected = {{PrimKind::Unary, Device::cpu()},
                                                             {PrimKind::Unary, Device::cpu()},
                                                             {PrimKind::Copy, kGpu},
                                                             {PrimKind::Binary, kGpu},
                                                             {PrimKind::Unary, kGpu}};
  EXPECT_EQ(steps, expected) << compiler::dump_tape(tape);
  // The dump names the devices that differ from the trace's default (the CPU here).
  const std::string dump = compiler::dump_tape(tape);
  EXPECT_NE(dump.find("%1 = input 1 : float32[4,8] on cuda:0"), std::string::npos) << dump;
  EXPECT_EQ(test::Dumps::count(dump, "Copy"), 1) << dump;
  EXPECT_NE(test::Dumps::lines(dump, "Copy")[0].find(" on cuda:0"), std::string::npos) << dump;
  EXPECT_EQ(test::Dumps::lines(dump, "Unary(Negative)")[0].find(" on "), std::string::npos) << dump;

  // Replayed on new inputs, each node is made on its step's device, not on input 0's.
  const Array x2 = rand({4, 8}, 2);
  std::vector<Array> outs = compiler::replay_tape(tape, {x2, unrun_gpu_array({4, 8})});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].device(), kGpu);
  EXPECT_EQ(outs[1].device(), Device::cpu());
  int transfers = 0;
  for (const detail::Node* n : graph_nodes(outs[0]))
    if (n->prim.kind == PrimKind::Copy) {
      ++transfers;
      EXPECT_EQ(n->device, kGpu);
      EXPECT_EQ(n->inputs[0].device(), Device::cpu());
    }
  EXPECT_EQ(transfers, 1);
  // The CPU part runs, and equals the eager result bit for bit.
  EXPECT_TRUE(test::bit_equal(outs[1], negative(exp(x2))));
}

TEST(DevicePlacement, FusedKernelsStayOnOneDevice) {
  compiler::Tape tape = test::optimized_tape(mixed_chain, {rand({4, 8}, 3), unrun_gpu_array({4, 8})});
  compiler::verify_tape(tape, "test");
  const std::string dump = compiler::dump_tape(tape);
  // The copy between the devices stays, and no step reads across it except the copy itself.
  ASSERT_EQ(test::steps_of(tape, PrimKind::Copy).size(), 1u) << dump;
  int cpu_kernels = 0;
  for (auto& s : tape.steps) {
    if (s.prim.kind == PrimKind::Copy) continue;
    for (int in : s.inputs) EXPECT_EQ(tape.values[in].device, s.device) << s.prim.str() << "\n" << dump;
    if (s.prim.kind != PrimKind::Fused) continue;
    EXPECT_EQ(s.prim.get<FusedParams>().kernel->device, s.device) << dump;
    cpu_kernels += s.device == Device::cpu();
  }
  // exp and negative on the CPU are one kernel; add and exp on the GPU are one GPU kernel where
  // the build has CUDA, or stay two steps, but never join the CPU's.
  EXPECT_EQ(cpu_kernels, 1) << dump;
  auto fused = test::steps_of(tape, PrimKind::Fused);
  for (auto* s : fused) {
    if (s->device == kGpu) {
      EXPECT_EQ(test::compute_instrs(s->prim.get<FusedParams>().kernel->program), 2) << dump;
    }
  }
}

// A hand-made tape where an element-wise step reads a value of another device directly (no eager
// element-wise op does; the check keeps a kernel from ever taking a foreign pointer).
TEST(DevicePlacement, FusionDoesNotCrossAStepThatReadsAnotherDevice) {
  compiler::Tape t;
  t.device = Device::cpu();
  t.add_value({16}, float32, Device::cpu());
  t.num_inputs = 1;
  auto unary = [&](UnaryOp op, int in, Device d) {
    int out = t.add_value({16}, float32, d);
    t.steps.push_back({make_prim(PrimKind::Unary, UnaryParams{op}), {in}, {out}, d});
    return out;
  };
  int a = unary(UnaryOp::Exp, 0, Device::cpu());
  int b = unary(UnaryOp::Negative, a, Device::cpu());
  int c = unary(UnaryOp::Exp, b, kGpu);  // reads the CPU value b
  int d = unary(UnaryOp::Negative, c, kGpu);
  t.outputs = {d};
  compiler::verify_tape(t, "test");
  compiler::fuse_elementwise(t);
  compiler::verify_tape(t, "fuse");
  const std::string dump = compiler::dump_tape(t);
  // exp and negative on the CPU fuse; the GPU steps stay single (c cannot join d's kernel).
  ASSERT_EQ(t.steps.size(), 3u) << dump;
  EXPECT_EQ(t.steps[0].prim.kind, PrimKind::Fused) << dump;
  EXPECT_EQ(t.steps[0].device, Device::cpu());
  EXPECT_EQ(t.steps[0].prim.get<FusedParams>().kernel->device, Device::cpu());
  EXPECT_EQ(t.steps[1].prim.kind, PrimKind::Unary) << dump;
  EXPECT_EQ(t.steps[1].device, kGpu);
  EXPECT_EQ(t.steps[2].prim.kind, PrimKind::Unary) << dump;
  EXPECT_EQ(t.steps[2].device, kGpu);
}

TEST(DevicePlacement, CseKeepsEqualStepsOnTwoDevicesApart) {
  compiler::Tape t;
  t.device = Device::cpu();
  auto fill = [&](Device d) {
    int out = t.add_value({3}, float32, d);
    t.steps.push_back({make_prim(PrimKind::Full, FullParams{Scalar::of_float(1.0).cast(float32)}), {}, {out}, d});
    return out;
  };
  t.outputs = {fill(Device::cpu()), fill(kGpu), fill(Device::cpu())};
  compiler::eliminate_common_subexpressions(t);
  compiler::verify_tape(t, "cse");
  // The two CPU fills merge; the GPU fill stays its own value.
  ASSERT_EQ(t.steps.size(), 2u) << compiler::dump_tape(t);
  EXPECT_EQ(t.outputs[0], t.outputs[2]);
  EXPECT_NE(t.outputs[0], t.outputs[1]);
  EXPECT_EQ(t.values[t.outputs[1]].device, kGpu);
}

TEST(DevicePlacement, VerifierChecksStepAndConstantDevices) {
  {
    compiler::Tape t;
    t.add_value({3}, float32, Device::cpu());
    t.num_inputs = 1;
    int out = t.add_value({3}, float32, Device::cpu());
    t.steps.push_back({make_prim(PrimKind::Unary, UnaryParams{UnaryOp::Exp}), {0}, {out}, kGpu});
    t.outputs = {out};
    EXPECT_THROW_MSG(compiler::verify_tape(t, "bogus"), Error,
                     "after pass 'bogus': Unary(Exp) runs on cuda:0 but its output %1 is on cpu");
  }
  {
    compiler::Tape t;
    int c = t.add_value({2}, float32, kGpu);
    t.constants.emplace_back(c, Array({1.0f, 2.0f}));
    t.outputs = {c};
    EXPECT_THROW_MSG(compiler::verify_tape(t, "bogus"), Error, "constant %0 is recorded on cuda:0 but lives on cpu");
  }
}

// The key holds every input's device: the same shapes on another device trace again, the miss
// says which input moved, and each entry replays its own devices.
TEST(DevicePlacement, TheKeyHoldsEveryInputsDevice) {
  for (bool shapeless : {false, true}) {
    SCOPED_TRACE(shapeless ? "shapeless" : "shaped");
    test::EventLog log;
    Fn fn = [](const std::vector<Array>& in) { return std::vector<Array>{exp(in[0]), negative(exp(in[1]))}; };
    auto f = compile_flat(fn, {.shapeless = shapeless, .fallback = CompileFallback::Raise});
    const Array x = rand({5, 3}, 4), y = rand({5, 3}, 5);
    auto a = f({x, y});
    EXPECT_TRUE(test::bit_equal(a[1], fn({x, y})[1]));
    auto b = f({x, unrun_gpu_array({5, 3})});
    EXPECT_EQ(f.stats().traces, 2u);
    const auto reasons = log.field("compile.cache.miss", "reason");
    ASSERT_EQ(reasons.size(), 2u);
    EXPECT_EQ(reasons[1], "input 1: device cpu -> cuda:0");
    EXPECT_EQ(b[0].device(), Device::cpu());
    EXPECT_EQ(b[1].device(), kGpu);
    EXPECT_TRUE(test::bit_equal(b[0], exp(x)));
    // Back on the CPU: the first entry serves it (another shape too, when shapeless).
    const Array x3 = rand(shapeless ? Shape{7, 3} : Shape{5, 3}, 6), y3 = rand(shapeless ? Shape{7, 3} : Shape{5, 3}, 7);
    auto c = f({x3, y3});
    EXPECT_EQ(f.stats().traces, 2u);
    EXPECT_EQ(c[1].device(), Device::cpu());
    EXPECT_TRUE(test::bit_equal(c[1], fn({x3, y3})[1]));
  }
}

struct MixedState {
  Array on_gpu, on_cpu;
};

}  // namespace
}  // namespace smelt

SMELT_TREE(smelt::MixedState, on_gpu, on_cpu)

namespace smelt {
namespace {

TEST(DevicePlacement, CompileMutKeepsEachStateLeafOnItsDevice) {
  auto step = compile_mut(
      [](MixedState& s, const Array& x) {
        s.on_gpu = exp(s.on_gpu);
        s.on_cpu = s.on_cpu * x;
        return sum(s.on_cpu);
      },
      {.fallback = CompileFallback::Raise});
  const Array x = rand({6}, 8), start = rand({6}, 9);
  MixedState s{unrun_gpu_array({6}), start};
  Array total = step(s, x);
  EXPECT_EQ(s.on_gpu.device(), kGpu);
  EXPECT_EQ(s.on_cpu.device(), Device::cpu());
  EXPECT_TRUE(test::bit_equal(s.on_cpu, start * x));
  EXPECT_TRUE(test::bit_equal(total, sum(start * x)));
  step(s, x);
  EXPECT_EQ(step.stats().traces, 1u);
  EXPECT_EQ(s.on_gpu.device(), kGpu);
}

}  // namespace
}  // namespace smelt
