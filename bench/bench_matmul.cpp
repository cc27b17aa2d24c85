// Matmul with its epilogue on the CPU: x[512,768] @ w[768,3072] + b, tanh-GELU (a GPT-2 MLP's first
// layer), eager (four passes over the product: add, then GELU's element-wise chain) against
// compiled (the product written once, bias and GELU one fused kernel that reads it once), next to
// the bare product. Same conventions as bench_arrays.cpp: one repetition per iteration after an
// untimed warm-up; counters `flops` (2 M N K) and `bytes`.
#include <benchmark/benchmark.h>

#include <functional>
#include <optional>
#include <vector>

#include "smelt/compile.h"
#include "smelt/smelt.h"

namespace {

using namespace smelt;

constexpr int64_t kM = 512, kK = 768, kN = 3072;
constexpr double kFlops = 2.0 * kM * kN * kK;
// Inputs read once and the output written once (float32).
constexpr double kBytes = 4.0 * (kM * kK + kK * kN + kN + kM * kN);

struct Inputs {
  Array x = random::uniform(random::key(21), {kM, kK}, -1.0, 1.0);
  Array w = random::uniform(random::key(22), {kK, kN}, -0.05, 0.05);
  Array b = random::uniform(random::key(23), {kN}, -0.1, 0.1);
  Inputs() { eval({x, w, b}); }
};
Inputs& inputs() {
  static Inputs in;
  return in;
}

using VecFn = std::function<std::vector<Array>(const std::vector<Array>&)>;

std::vector<Array> mlp_up(const std::vector<Array>& in) { return {gelu(matmul(in[0], in[1]) + in[2], true)}; }
std::vector<Array> product(const std::vector<Array>& in) { return {matmul(in[0], in[1])}; }

void run(benchmark::State& state, const VecFn& fn, bool compiled) {
  const std::vector<Array> in = {inputs().x, inputs().w, inputs().b};
  std::optional<Compiled<std::vector<Array>, const std::vector<Array>&>> c;
  if (compiled) c.emplace(compile_flat(fn));
  auto body = [&] {
    std::vector<Array> r = compiled ? (*c)(in) : fn(in);
    r[0].eval();
    benchmark::DoNotOptimize(r[0].data());
  };
  body();  // warm-up: traces and builds the kernel, BLAS threads, allocator cache
  for (auto _ : state) body();
  state.counters["bytes"] = kBytes;
  state.counters["flops"] = kFlops;
}

void matmul_only(benchmark::State& s) { run(s, product, false); }
void epilogue_eager(benchmark::State& s) { run(s, mlp_up, false); }
void epilogue_compiled(benchmark::State& s) { run(s, mlp_up, true); }

void configure(benchmark::internal::Benchmark* b) { b->Iterations(1)->UseRealTime()->Unit(benchmark::kMicrosecond); }

}  // namespace

// Names are work/system; run.sh reads them back.
BENCHMARK(matmul_only)->Name("matmul_512x768x3072_f32/smelt")->Apply(configure);
BENCHMARK(epilogue_eager)->Name("matmul_bias_gelu_512x768x3072_f32/smelt")->Apply(configure);
BENCHMARK(epilogue_compiled)->Name("matmul_bias_gelu_512x768x3072_f32/smelt_compile")->Apply(configure);
BENCHMARK_MAIN();
