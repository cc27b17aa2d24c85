// CUDA graphs of compiled replays: a graph is captured and used, its results equal the plain
// replay's and eager evaluation's bit for bit, moved inputs and held outputs are patched, lazy
// inputs, streams and threads work, host inputs are uploaded before the graph, gathers and scatters
// are captured with their index checks, and replays that cannot be captured fall back with a reason.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "smelt/compile.h"
#include "smelt/stream.h"
#include "smelt/telemetry.h"
#include "src/backend/cuda/compiler.h"
#include "src/backend/cuda/graph.h"
#include "tests/backend/cuda/cuda_test_utils.h"

namespace smelt {
namespace {

using namespace smelt::test;

// Several kernels: two cuBLASLt matmuls, a fused tanh-GELU, a row reduction and an epilogue.
Array model(const Array& x, const Array& w1, const Array& w2) {
  Array h = matmul(x, w1);
  h = h * 0.5f * (tanh((h + h * h * h * 0.044715f) * 0.7978845608f) + 1.0f);
  Array y = matmul(h, w2);
  return y - sum(y, {1}, true) * (1.0f / 48.0f);
}

Array model3(const std::vector<Array>& in) { return model(in[0], in[1], in[2]); }

// Bit-for-bit equality of two GPU (or CPU) arrays, NaN payloads included.
::testing::AssertionResult same_bits(const Array& a, const Array& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << "shape or dtype differs: " << shape_to_string(a.shape()) << " vs "
                                         << shape_to_string(b.shape());
  const auto x = raw_bytes(on_cpu(a)), y = raw_bytes(on_cpu(b));
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] != y[i]) return ::testing::AssertionFailure() << "byte " << i << " differs";
  return ::testing::AssertionSuccess();
}

struct Inputs {
  Array x, w1, w2;
};

Inputs inputs(uint32_t seed) {
  Inputs in{on_gpu(special_array({64, 32}, float32, -2, 2, seed)), on_gpu(special_array({32, 96}, float32, -1, 1, seed + 1)),
            on_gpu(special_array({96, 48}, float32, -1, 1, seed + 2))};
  eval({in.x, in.w1, in.w2});
  return in;
}

// Graphs off while it lives (set_graphs_enabled is process-wide: single-threaded parts only).
struct GraphsOff {
  GraphsOff() : was(cuda::graphs_enabled()) { cuda::set_graphs_enabled(false); }
  ~GraphsOff() { cuda::set_graphs_enabled(was); }
  bool was;
};

CompileOptions raise_on_fallback() {
  CompileOptions o;
  o.fallback = CompileFallback::Raise;
  return o;
}

// The reference of a graph's result: the plain compiled replay of the same function (graphs
// off), so that these tests check graphs against the replay they stand for.
Array plain_model(const Inputs& in) {
  static auto f = compile(model, raise_on_fallback(), "graph_reference");
  GraphsOff off;
  Array r = f(in.x, in.w1, in.w2);
  r.eval();
  return r;
}

// Graphs on for the test (the environment may have switched them off), restored after.
class CudaGraph : public ::testing::Test {
 protected:
  void SetUp() override {
    was_ = cuda::graphs_enabled();
    cuda::set_graphs_enabled(true);
  }
  void TearDown() override { cuda::set_graphs_enabled(was_); }

 private:
  bool was_ = true;
};

TEST_F(CudaGraph, MultiKernelFunctionReplaysAsOneGraph) {
  SMELT_REQUIRE_GPU();
  DefaultDeviceScope scope(gpu());
  Inputs in = inputs(1);
  std::vector<telemetry::Event> captures;
  telemetry::Subscription sub("cuda.graph.*", [&](const telemetry::Event& e) { captures.push_back(e); });
  auto f = compile(model, raise_on_fallback(), "graph_used");
  const Array want = plain_model(in);
  const auto before = cuda::graph_counters();
  for (int call = 0; call < 5; ++call) {
    Array y = f(in.x, in.w1, in.w2);
    EXPECT_TRUE(same_bits(y, want)) << "call " << call;
  }
  const auto after = cuda::graph_counters();
  EXPECT_EQ(after.captures - before.captures, 1u);  // the second call captures
  EXPECT_EQ(after.launches - before.launches, 4u);  // calls 2-5: one graph launch each
  EXPECT_EQ(after.patched_launches - before.patched_launches, 0u);  // same inputs, outputs dropped
  EXPECT_EQ(after.failed_captures - before.failed_captures, 0u);
  ASSERT_EQ(captures.size(), 1u);
  EXPECT_EQ(captures[0].name, "cuda.graph.capture") << captures[0].field("reason");
  EXPECT_EQ(captures[0].field("patchable"), "yes");
  EXPECT_EQ(captures[0].field("function"), "graph_used");
  EXPECT_GE(std::stoi(captures[0].field("kernels")), 3);
}

TEST_F(CudaGraph, BitIdenticalWithAndWithoutGraphs) {
  SMELT_REQUIRE_GPU();
  DefaultDeviceScope scope(gpu());
  Inputs in = inputs(11);
  cuda::set_graphs_enabled(false);
  auto plain = compile(model, raise_on_fallback(), "graph_off");
  std::vector<Array> off;
  for (int call = 0; call < 3; ++call) off.push_back(plain(in.x, in.w1, in.w2));
  eval(off);
  cuda::set_graphs_enabled(true);
  auto graphed = compile(model, raise_on_fallback(), "graph_on");
  const auto before = cuda::graph_counters();
  for (int call = 0; call < 3; ++call) EXPECT_TRUE(same_bits(graphed(in.x, in.w1, in.w2), off[call])) << "call " << call;
  EXPECT_EQ(cuda::graph_counters().captures - before.captures, 1u);
  // And both equal eager evaluation, NaN and ±inf included in the inputs.
  EXPECT_TRUE(same_bits(off[0], model(in.x, in.w1, in.w2)));
}

TEST_F(CudaGraph, SwitchedOffCapturesNothing) {
  SMELT_REQUIRE_GPU();
  DefaultDeviceScope scope(gpu());
  Inputs in = inputs(21);
  const Array want = plain_model(in);
  cuda::set_graphs_enabled(false);
  auto f = compile(model, raise_on_fallback(), "graph_switched_off");
  const auto before = cuda::graph_counters();
  for (int call = 0; call < 3; ++call) EXPECT_TRUE(same_bits(f(in.x, in.w1, in.w2), want));
  EXPECT_EQ(cuda::graph_counters().captures, before.captures);
  EXPECT_EQ(cuda::graph_counters().launches, before.launches);
}

TEST_F(CudaGraph, MovedInputsArePatched) {
  SMELT_REQUIRE_GPU();
  DefaultDeviceScope scope(gpu());
  Inputs a = inputs(31), b = inputs(41);
  auto f = compile(model, raise_on_fallback(), "graph_moved_inputs");
  std::vector<std::string> plain;  // why a call could not use the graph
  telemetry::Subscription sub("cuda.graph.plain", [&](const telemetry::Event& e) { plain.push_back(e.field("reason")); });
  f(a.x, a.w1, a.w2).eval();
  f(a.x, a.w1, a.w2).eval();  // captured with a's buffers
  const auto before = cuda::graph_counters();
  const Inputs mixed{a.x, b.w1, a.w2};
  const Array want_b = plain_model(b), want_mixed = plain_model(mixed), want_a = plain_model(a);
  // Every input at another address, then one, then the captured ones again.
  EXPECT_TRUE(same_bits(f(b.x, b.w1, b.w2), want_b));
  EXPECT_TRUE(same_bits(f(a.x, b.w1, a.w2), want_mixed));
  EXPECT_TRUE(same_bits(f(a.x, a.w1, a.w2), want_a));
  const auto after = cuda::graph_counters();
  EXPECT_EQ(after.launches - before.launches, 3u);
  EXPECT_EQ(after.patched_launches - before.patched_launches, 3u);
  EXPECT_EQ(after.captures, before.captures);
  EXPECT_TRUE(plain.empty()) << plain[0];
}

TEST_F(CudaGraph, HeldOutputsAreNotOverwritten) {
  SMELT_REQUIRE_GPU();
  DefaultDeviceScope scope(gpu());
  std::vector<Inputs> ins;
  for (uint32_t i = 0; i < 5; ++i) ins.push_back(inputs(50 + 10 * i));
  std::vector<Array> want;
  for (const Inputs& in : ins) want.push_back(plain_model(in));
  auto f = compile(model, raise_on_fallback(), "graph_held_outputs");
  const auto before = cuda::graph_counters();
  std::vector<Array> kept;
  for (const Inputs& in : ins) kept.push_back(f(in.x, in.w1, in.w2));  // all held until the end
  for (size_t i = 0; i < ins.size(); ++i) EXPECT_TRUE(same_bits(kept[i], want[i])) << "call " << i;
  const auto after = cuda::graph_counters();
  EXPECT_EQ(after.launches - before.launches, 4u);  // calls 2-5, each with moved inputs and a new output
  EXPECT_EQ(after.patched_launches - before.patched_launches, 3u);  // call 2 is the capture
}

TEST_F(CudaGraph, OutputsFedBackAsInputs) {
  SMELT_REQUIRE_GPU();
  DefaultDeviceScope scope(gpu());
  // A stateful step: each call's outputs are the next call's inputs (compile_mut).
  Inputs in = inputs(101);
  auto step_fn = [](std::vector<Array>& s, const Array& w) {
    Array h = tanh(matmul(s[0], w)) * 0.5f + s[0] * 0.25f;
    s[0] = h - sum(h, {1}, true) * (1.0f / 32.0f);
    return sum(s[0]);
  };
  Array w = on_gpu(special_array({32, 32}, float32, -0.3, 0.3, 102));
  std::vector<Array> graphed{in.x}, plain{in.x};
  auto step = compile_mut(step_fn, raise_on_fallback(), "graph_state_step");
  auto plain_step = compile_mut(step_fn, raise_on_fallback(), "graph_state_step_plain");
  for (int call = 0; call < 6; ++call) {
    Array c = step(graphed, w);
    Array p;
    {
      GraphsOff off;
      p = plain_step(plain, w);
      p.eval();
    }
    EXPECT_TRUE(same_bits(c, p)) << "call " << call;
    EXPECT_TRUE(same_bits(graphed[0], plain[0])) << "call " << call;
  }
}

TEST_F(CudaGraph, LazyInputs) {
  SMELT_REQUIRE_GPU();
  DefaultDeviceScope scope(gpu());
  Inputs in = inputs(61);
  auto f = compile(model, raise_on_fallback(), "graph_lazy_inputs");
  for (int call = 0; call < 4; ++call) {
    Array x = in.x * static_cast<float>(call + 1);  // not evaluated before the call
    Inputs evaluated{in.x * static_cast<float>(call + 1), in.w1, in.w2};
    evaluated.x.eval();
    EXPECT_TRUE(same_bits(f(x, in.w1, in.w2), plain_model(evaluated))) << "call " << call;
  }
}

TEST_F(CudaGraph, LaunchesOnTheCallersStream) {
  SMELT_REQUIRE_GPU();
  DefaultDeviceScope scope(gpu());
  Inputs in = inputs(71);
  const Array want = plain_model(in);
  auto f = compile(model, raise_on_fallback(), "graph_streams");
  Stream s1 = Stream::create(gpu()), s2 = Stream::create(gpu());
  const auto before = cuda::graph_counters();
  for (const Stream* s : {&s1, &s2}) {
    StreamScope on(*s);
    for (int call = 0; call < 3; ++call) {
      Array y = f(in.x, in.w1, in.w2);
      y.eval();
      EXPECT_TRUE(same_bits(y, want));
    }
  }
  // One graph per stream (each uses its stream's cuBLASLt workspace).
  EXPECT_EQ(cuda::graph_counters().captures - before.captures, 2u);
}

TEST_F(CudaGraph, ThreadsShareOneCompiledFunction) {
  SMELT_REQUIRE_GPU();
  DefaultDeviceScope scope(gpu());  // the references' default device: the threads' too
  auto f = compile_flat([](const std::vector<Array>& in) { return std::vector<Array>{model3(in)}; }, raise_on_fallback(),
                        "graph_threads");
  constexpr int kThreads = 4;
  std::vector<Inputs> ins;
  std::vector<Array> want;
  for (int t = 0; t < kThreads; ++t) {
    ins.push_back(inputs(200 + 10 * t));
    want.push_back(plain_model(ins.back()));
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      DefaultDeviceScope scope(gpu());
      const Inputs& in = ins[static_cast<size_t>(t)];
      for (int call = 0; call < 20; ++call)
        if (!same_bits(f({in.x, in.w1, in.w2})[0], want[static_cast<size_t>(t)])) bad++;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

// An embedding's forward and backward: a gather, and a scatter-add whose targets repeat.
std::vector<Array> embedding_step(const Array& w, const Array& idx, const Array& g) {
  Array rows = take(w, idx, 0);  // [n, d]
  Array targets = broadcast_to(reshape(idx, {idx.size(), 1}), g.shape());
  Array grad = scatter(zeros_like(w), targets, g, 0, ScatterReduce::Add);
  return {exp(rows) + 1.0f, grad * 0.5f};
}

TEST_F(CudaGraph, GathersAndScattersAreCapturedAndTheirIndicesChecked) {
  SMELT_REQUIRE_GPU();
  DefaultDeviceScope scope(gpu());
  // Gathers and scatters validate their indices on the device; a graph reads the validation
  // words after its launch instead of after each kernel, so such a tape is captured.
  Array w = on_gpu(special_array({9, 16}, float32, -1, 1, 81));
  auto indices = [](int32_t shift, int32_t bad) {
    std::vector<int32_t> v(24);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>((i * 5 + static_cast<size_t>(shift)) % 9);
    if (bad) v[7] = bad;
    return on_gpu(Array(v, {24}));
  };
  Array g = on_gpu(special_array({24, 16}, float32, -1, 1, 82));
  auto f = compile_flat([](const std::vector<Array>& in) { return embedding_step(in[0], in[1], in[2]); },
                        raise_on_fallback(), "graph_index_ops");
  std::vector<std::string> plain;
  telemetry::Subscription sub("cuda.graph.plain", [&](const telemetry::Event& e) { plain.push_back(e.field("reason")); });
  const auto before = cuda::graph_counters();
  for (int call = 0; call < 4; ++call) {
    Array idx = indices(call, 0);
    std::vector<Array> want;
    {
      GraphsOff off;
      auto reference = compile_flat([](const std::vector<Array>& in) { return embedding_step(in[0], in[1], in[2]); },
                                    raise_on_fallback(), "graph_index_ops_plain");
      want = reference({w, idx, g});
    }
    std::vector<Array> got = f({w, idx, g});
    EXPECT_TRUE(same_bits(got[0], want[0])) << "call " << call;
    EXPECT_TRUE(same_bits(got[1], want[1])) << "call " << call;
    EXPECT_TRUE(same_bits(got[1], embedding_step(w, idx, g)[1])) << "call " << call;  // and eager
  }
  auto after = cuda::graph_counters();
  EXPECT_EQ(after.captures - before.captures, 1u);
  EXPECT_EQ(after.launches - before.launches, 3u);
  EXPECT_EQ(after.failed_captures, before.failed_captures);
  // A bad index: the graph's call is computed again by the plain replay, which raises the
  // eager error; the graph serves the next good call.
  std::string eager_error;
  try {
    eval(embedding_step(w, indices(0, 12), g));
  } catch (const InvalidArgument& e) {
    eager_error = e.what();
  }
  ASSERT_NE(eager_error.find("index 12 is out of range for axis 0 with size 9"), std::string::npos) << eager_error;
  try {
    eval(f({w, indices(0, 12), g}));
    ADD_FAILURE() << "a bad index did not raise";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("index 12 is out of range for axis 0 with size 9"), std::string::npos) << e.what();
  }
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_NE(plain[0].find("out of range"), std::string::npos) << plain[0];
  const auto launches = cuda::graph_counters().launches;
  EXPECT_TRUE(same_bits(f({w, indices(2, 0), g})[1], embedding_step(w, indices(2, 0), g)[1]));
  EXPECT_EQ(cuda::graph_counters().launches - launches, 1u);
}

TEST_F(CudaGraph, HostInputsAreUploadedBeforeTheGraph) {
  SMELT_REQUIRE_GPU();
  DefaultDeviceScope scope(gpu());
  // A batch built from host data each call (as a training loop does): the tape copies it to the
  // GPU; the graph takes the upload as its input and is patched to each call's.
  Inputs in = inputs(111);
  auto f = compile([](const Array& host_x, const Array& w1, const Array& w2) { return model(host_x, w1, w2); },
                   raise_on_fallback(), "graph_host_inputs");
  std::vector<std::string> none;
  telemetry::Subscription sub("cuda.graph.none", [&](const telemetry::Event& e) { none.push_back(e.field("reason")); });
  const auto before = cuda::graph_counters();
  for (int call = 0; call < 5; ++call) {
    Array host_x = on_cpu(special_array({64, 32}, float32, -2, 2, 120 + static_cast<uint32_t>(call)));
    host_x.eval();
    ASSERT_EQ(host_x.device(), Device::cpu());
    const Array want = plain_model({on_gpu(host_x), in.w1, in.w2});
    Array y = f(host_x, in.w1, in.w2);
    EXPECT_EQ(y.device(), gpu());
    EXPECT_TRUE(same_bits(y, want)) << "call " << call;
  }
  const auto after = cuda::graph_counters();
  EXPECT_EQ(after.captures - before.captures, 1u);
  EXPECT_EQ(after.launches - before.launches, 4u);  // (an upload at a new address is patched in)
  EXPECT_TRUE(none.empty()) << none[0];
}

TEST_F(CudaGraph, HostStepsBeforeTheUploadRunBeforeTheGraph) {
  SMELT_REQUIRE_GPU();
  DefaultDeviceScope scope(gpu());
  // A host input reshaped on the host before its copy (cross-entropy's flattened targets): the
  // reshape and the upload are the host prologue of each call, the rest is the graph.
  auto g = [](const Array& host_x, const Array& w) { return tanh(matmul(reshape(host_x, {4, 8}), w)) + 1.0f; };
  Array w = on_gpu(special_array({8, 8}, float32, -1, 1, 131));
  std::vector<std::string> none;
  telemetry::Subscription sub("cuda.graph.none", [&](const telemetry::Event& e) { none.push_back(e.field("reason")); });
  auto f = compile(g, raise_on_fallback(), "graph_host_step");
  const auto before = cuda::graph_counters();
  for (int call = 0; call < 4; ++call) {
    Array x = on_cpu(special_array({32}, float32, -1, 1, 132 + static_cast<uint32_t>(call)));
    x.eval();
    EXPECT_TRUE(same_bits(f(x, w), g(x, w))) << "call " << call;
  }
  const auto after = cuda::graph_counters();
  EXPECT_EQ(after.captures - before.captures, 1u);
  EXPECT_EQ(after.launches - before.launches, 3u);
  EXPECT_TRUE(none.empty()) << none[0];
}

// One fused kernel and views of its result are graphed too: a graph launch costs the host less
// than the plain replay of one fused step. Views of an input alone are never launched as a
// graph (their output is the input's buffer, and they launch no kernel): refused once, with a
// reason, and every call then replays plainly.
TEST_F(CudaGraph, SingleKernelIsGraphedAndViewsAloneAreNot) {
  SMELT_REQUIRE_GPU();
  DefaultDeviceScope scope(gpu());
  auto g = [](const Array& x) { return transpose(reshape(tanh(x * 2.0f) + 1.0f, {10, 100})); };
  auto f = compile(g, raise_on_fallback(), "graph_one_kernel");
  Array x = on_gpu(special_array({1000}, float32, -2, 2, 91));
  auto before = cuda::graph_counters();
  const Array first = f(x);
  EXPECT_TRUE(same_bits(first, g(x)));
  for (int call = 1; call < 4; ++call) EXPECT_TRUE(same_bits(f(x), first)) << "call " << call;
  auto after = cuda::graph_counters();
  EXPECT_EQ(after.captures - before.captures, 1u);
  EXPECT_EQ(after.launches - before.launches, 3u);
  EXPECT_EQ(after.failed_captures, before.failed_captures);

  std::vector<std::string> reasons;
  telemetry::Subscription sub("cuda.graph.fallback", [&](const telemetry::Event& e) { reasons.push_back(e.field("reason")); });
  auto v = [](const Array& y) { return transpose(reshape(y, {10, 100})); };
  auto fv = compile(v, raise_on_fallback(), "graph_views_only");
  before = cuda::graph_counters();
  for (int call = 0; call < 4; ++call) EXPECT_TRUE(same_bits(fv(x), v(x))) << "call " << call;
  after = cuda::graph_counters();
  EXPECT_EQ(after.captures, before.captures);
  EXPECT_EQ(after.launches, before.launches);
  EXPECT_LE(after.failed_captures - before.failed_captures, 1u);
  EXPECT_LE(reasons.size(), 1u);
  for (const auto& r : reasons) EXPECT_FALSE(r.empty());
}

// Column sums of [20000, 512] split their rows into groups whose last block combines them,
// counting the groups in zeroed counters: a graph holds its own (zeroed by a memset node each
// launch), eager calls use their stream's. Graphed, plain and eager calls on two streams from two
// threads at once, repeated, give the eager bits each time.
TEST_F(CudaGraph, SplitColumnSumsCountInTheirOwnCounters) {
  SMELT_REQUIRE_GPU();
  DefaultDeviceScope scope(gpu());
  auto g = [](const Array& x) { return sum(x, {0}) * 2.0f + max(x * x, {0}); };
  auto f = compile(g, raise_on_fallback(), "graph_split_columns");
  std::vector<Array> xs, want;
  for (uint32_t t = 0; t < 2; ++t) {
    xs.push_back(on_gpu(special_array({20000, 512}, float32, -2, 2, 300 + t)));
    want.push_back(g(xs.back()));
    eval({xs.back(), want.back()});
  }
  const auto before = cuda::graph_counters();
  Stream streams[2] = {Stream::create(gpu()), Stream::create(gpu())};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      DefaultDeviceScope dev(gpu());
      StreamScope on(streams[t]);
      for (int call = 0; call < 4; ++call) {
        Array graphed = f(xs[t]), eager = g(xs[t]);
        eval({graphed, eager});
        if (!same_bits(graphed, want[t]) || !same_bits(eager, want[t])) bad++;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(cuda::graph_counters().captures - before.captures, 2u);
  GraphsOff off;
  EXPECT_TRUE(same_bits(f(xs[0]), want[0]));
}

// Eager launches that repeat exactly (the same kernel, stream, configuration and argument
// bytes) replay a one-kernel graph: the same bits, data written into a reused buffer is read at
// launch time, and SMELT_CUDA_GRAPHS=0 (set_graphs_enabled(false)) launches them plainly.
TEST_F(CudaGraph, RepeatedEagerLaunchesReplayAsGraphsWithTheSameBits) {
  SMELT_REQUIRE_GPU();
  Array a = random_array({4096}, float32, -3, 3, 21), b = random_array({4096}, float32, -3, 3, 22);
  Array ga = on_gpu(a), gb = on_gpu(b);
  Array first = sum(multiply(ga, gb), {0});
  first.eval();
  const uint64_t before = cuda::replayed_launches();
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(same_bits(sum(multiply(ga, gb), {0}), first)) << "call " << i;
  // Each call frees the buffers the next one gets back: from the second call on, both kernels
  // repeat their launches, and the third sighting of a launch replays it.
  EXPECT_GE(cuda::replayed_launches() - before, 6u);
  // New values in the same buffers on every call.
  for (int i = 0; i < 6; ++i) {
    Array x = random_array({4096}, float32, -3, 3, 100 + static_cast<uint32_t>(i));
    Array gx = on_gpu(x);
    EXPECT_TRUE(same_as_cpu(multiply(gx, gb), multiply(x, b))) << "call " << i;
  }
  cuda::set_graphs_enabled(false);  // TearDown restores it
  const uint64_t off = cuda::replayed_launches();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(same_bits(sum(multiply(ga, gb), {0}), first));
  EXPECT_EQ(cuda::replayed_launches(), off);
}

// A kernel whose repeated launches stop repeating soon after their graph is made (W11: each call a
// new box count, so new sizes) stops making graphs: after 16 graphs launched fewer than 4 times
// each, its launches are plain, even ones that then repeat for good. Same bits either way.
TEST_F(CudaGraph, LaunchesThatRepeatOnlyBrieflyStopBeingGraphed) {
  SMELT_REQUIRE_GPU();
  for (int size = 0; size < 40; ++size) {
    // Three identical launches (the third is graphed), then never again: a new size (whole
    // vectors each, so that every size takes the same kernel).
    Array x = random_array({1024 + 64 * size}, float32, -3, 3, 40 + static_cast<uint32_t>(size));
    Array gx = on_gpu(x);
    for (int r = 0; r < 3; ++r) EXPECT_TRUE(same_as_cpu(negative(gx), negative(x))) << size;
  }
  Array x = random_array({4096 + 64}, float32, -3, 3, 99);
  Array gx = on_gpu(x);
  const Array want = negative(gx);
  want.eval();
  const uint64_t before = cuda::replayed_launches();
  for (int r = 0; r < 10; ++r) EXPECT_TRUE(same_bits(negative(gx), want)) << r;
  EXPECT_EQ(cuda::replayed_launches(), before);
}

}  // namespace
}  // namespace smelt
