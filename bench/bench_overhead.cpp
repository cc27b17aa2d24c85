// Per-node overhead of the eager ONNX runner, a compiled ONNX model and a smelt::compile'd chain (issue #15 item 4).
//
// A plain program (steady_clock, medians; no benchmark framework, no perf): the machines it runs
// on are shared, and a median of repetitions is what survives their noise.
//
// What it measures: a chain of N element-wise nodes on a [16] f32 tensor (alternately Mul by 0.5
// and Add 0.25, so values stay bounded), where the arithmetic is a few nanoseconds and
// everything else is overhead:
//   - onnx::run (the eager runner: one operator call and one eval per node),
//   - onnx::compile with fuse = false (one compiled segment whose tape has one step per node),
//   - smelt::compile of the same chain with fuse = false (a replay of N steps),
// each at N = 64 and N = 256. µs per node is the marginal cost (t(256) - t(64)) / 192, which
// takes out the fixed per-call cost (argument checks, cache lookups, output evaluation); the
// per-call time at N = 64 is printed too. Then the bundled tiny transformer (models/, b1 s32)
// eager and compiled, per call.
//
// Usage: bench_overhead [repetitions (default 15)] [--chain: the chains only]. SMELT_NUM_THREADS sets
// the pool size. Under `valgrind --tool=callgrind` (`bench_overhead 1 --chain`), the inclusive
// instruction counts of time_chain's lambdas divided by the nodes they ran give a per-node cost
// that the machine's load does not change (docs/onnx.md, "Overhead").
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "smelt/compile.h"
#include "smelt/onnx.h"
#include "smelt/random.h"
#include "smelt/smelt.h"
#include "src/core/thread_pool.h"
#include "tests/onnx/model_builder.h"

namespace {

using namespace smelt;
using Clock = std::chrono::steady_clock;

/// Median over `reps` repetitions of the mean time of one call, in microseconds; each repetition
/// runs `iters` calls after the warm-up ones.
double median_us(const std::function<void()>& call, int reps, int iters) {
  for (int i = 0; i < 3; ++i) call();  // warm: traces, kernel builds, allocator pools
  wait_for_kernel_builds();  // tiered execution: time the fused tier, not calls before the switch
  call();
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) call();
    auto t1 = Clock::now();
    times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

onnx::Model chain_model(int n) {
  test::GraphBuilder b("chain");
  std::string x = b.input("x", onnx::ElemType::Float, 1);
  std::string half = b.float_scalar("half", 0.5f);
  std::string quarter = b.float_scalar("quarter", 0.25f);
  for (int i = 0; i < n; ++i) x = b.node(i % 2 ? "Add" : "Mul", {x, i % 2 ? quarter : half});
  b.output(x);
  return test::make_model(b.graph());
}

Array chain(Array x, int n) {
  for (int i = 0; i < n; ++i) x = i % 2 ? x + 0.25f : x * 0.5f;
  return x;
}

struct ChainTimes {
  double eager, onnx_compiled, smelt_compiled;  // µs per call
};

ChainTimes time_chain(int n, int reps) {
  const Array x = random::uniform(random::key(1), {16}, -1.0, 1.0);
  const onnx::Model model = chain_model(n);
  const std::vector<onnx::Value> in{onnx::Value::tensor(x)};
  const int iters = std::max(2, 4096 / n);
  ChainTimes t{};
  t.eager = median_us([&] { onnx::run(model, in); }, reps, iters);
  onnx::CompileModelOptions co;
  co.fuse = false;
  co.eager_below = 0;
  onnx::CompiledModel cm = onnx::compile(model, in, co);
  t.onnx_compiled = median_us([&] { cm(in); }, reps, iters);
  CompileOptions so;
  so.fuse = false;
  auto f = compile([n](const Array& a) { return chain(a, n); }, so, "bench_overhead_chain");
  t.smelt_compiled = median_us([&] { eval({f(x)}); }, reps, iters);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 15;
  const bool chain_only = argc > 2 && std::string(argv[2]) == "--chain";
  set_default_device(Device::cpu());
  std::printf("threads %d, %d repetitions, medians\n\n", num_threads(), reps);

  const int n0 = 64, n1 = 256;
  ChainTimes a = time_chain(n0, reps), b = time_chain(n1, reps);
  auto per_node = [&](double ChainTimes::*m) { return (b.*m - a.*m) / (n1 - n0); };
  std::printf("chain of [16] f32 element-wise nodes    us/call N=%d  us/call N=%d  us/node (marginal)\n", n0, n1);
  std::printf("  onnx::run (eager)                     %12.1f  %12.1f  %10.2f\n", a.eager, b.eager,
              per_node(&ChainTimes::eager));
  std::printf("  onnx::compile, fuse=false             %12.1f  %12.1f  %10.2f\n", a.onnx_compiled, b.onnx_compiled,
              per_node(&ChainTimes::onnx_compiled));
  std::printf("  smelt::compile, fuse=false            %12.1f  %12.1f  %10.2f\n", a.smelt_compiled,
              b.smelt_compiled, per_node(&ChainTimes::smelt_compiled));

  if (chain_only) return 0;
  const std::string path = std::string(SMELT_SOURCE_DIR) + "/models/tiny_transformer.onnx";
  onnx::Model tf = onnx::load(path);
  std::vector<int64_t> ids(32);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 37) % 100);
  const std::vector<onnx::Value> tin{onnx::Value::tensor(Array(ids, Shape{1, 32}))};
  const size_t nodes = tf.graph->nodes.size();
  const double eager = median_us([&] { onnx::run(tf, tin); }, reps, 20);
  onnx::CompiledModel ctf = onnx::compile(tf, tin);
  const double compiled = median_us([&] { ctf(tin); }, reps, 20);
  std::printf("\ntiny transformer b1 s32 (%zu nodes)      us/call\n", nodes);
  std::printf("  onnx::run (eager)                     %12.1f\n", eager);
  std::printf("  onnx::compile (default options)       %12.1f\n", compiled);
  return 0;
}
