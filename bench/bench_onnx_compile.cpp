// W11 (bench/SUITE.md): a graph-break model, score threshold -> NonZero -> gather -> NMS -> TopK,
// with a new box count on each call, run eagerly and compiled (segments around the breaks).
//
// Each iteration is one model call on the next of 64 prepared inputs whose box counts are drawn
// from [200, 20000] (4_inputs:0, the suite's workload: the segments after the breaks see new
// shapes on almost every call and retrace), or on the next of 4 prepared inputs (4_inputs:1:
// after warm-up every segment is a cache hit). eager_below:20 is the default (this model's
// segments are all smaller, so they run eagerly); eager_below:0 compiles every segment.
// Counters: `traces` per call and `segments` (compiled segments of the last call).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "smelt/compile.h"
#include "smelt/onnx.h"
#include "smelt/random.h"
#include "smelt/smelt.h"
#include "bench/w11_model.h"

namespace {

using namespace smelt;
using onnx::Value;
using smelt::bench::w11_inputs;
using smelt::bench::w11_model;

/// 64 input sets with box counts from [200, 20000], or 4 of them.
const std::vector<std::vector<Value>>& input_sets(bool four) {
  static std::vector<std::vector<Value>> sets[2];
  auto& s = sets[four ? 1 : 0];
  if (s.empty()) {
    std::mt19937_64 rng(11);
    std::uniform_int_distribution<int64_t> count(200, 20000);
    for (int i = 0; i < (four ? 4 : 64); ++i) s.push_back(w11_inputs(count(rng), 100 + static_cast<uint64_t>(i)));
  }
  return s;
}

void BM_W11_Eager(benchmark::State& state) {
  const auto& sets = input_sets(state.range(0) != 0);
  size_t i = 0;
  onnx::run(w11_model(), sets[0]);  // untimed warm-up
  for (auto _ : state) benchmark::DoNotOptimize(onnx::run(w11_model(), sets[i++ % sets.size()]));
}

void BM_W11_Compiled(benchmark::State& state) {
  const bool four = state.range(0) != 0;
  const auto& sets = input_sets(four);
  onnx::CompileModelOptions o;
  o.eager_below = static_cast<int>(state.range(1));
  auto cm = onnx::compile(w11_model(), sets[0], o);
  if (four)
    for (const auto& in : sets) cm(in);  // fill the caches: timed calls are hits
  wait_for_kernel_builds();  // tiered execution: time the fused tier, not calls before the switch
  for (const auto& in : sets) cm(in);
  uint64_t traces0 = 0;
  for (const auto& s : cm.stats().segments) traces0 += s.traces;
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(cm(sets[i++ % sets.size()]));
  uint64_t traces = 0;
  for (const auto& s : cm.stats().segments) traces += s.traces;
  int compiled = 0;
  for (const auto& s : cm.overlay().segments) compiled += s.compiled ? 1 : 0;
  state.counters["traces"] = static_cast<double>(traces - traces0) / static_cast<double>(state.iterations());
  state.counters["segments"] = compiled;
}

// Args: {4_inputs} and {4_inputs, eager_below}.
BENCHMARK(BM_W11_Eager)->ArgName("4_inputs")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_W11_Compiled)
    ->ArgNames({"4_inputs", "eager_below"})
    ->Args({0, 20})
    ->Args({0, 0})
    ->Args({1, 20})
    ->Args({1, 0})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
