// compile benchmarks: W8 (host time per call of a cache hit) and W12 (first-call latency of W3
// and W8 in a fresh process, with an empty and with a warm kernel disk cache).
//
// W12 runs this program again as a child (`--w12-child=NAME`) with SMELT_CACHE_DIR pointing at a
// fresh empty folder (cold) or at a folder an untimed child filled before (warm); the child
// times its own first call (trace + passes + code generation + kernel build or disk load + run)
// and prints it, and the parent reports that figure as manual time. Process start-up and library
// loading are therefore not counted, as in SUITE.md's definition. The inputs are small (1 Ki
// elements for W3) so that the figure is the compile latency, not the arithmetic.
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "smelt/compile.h"
#include "smelt/smelt.h"
#include "bench/workloads.h"

namespace {

using namespace smelt;
using bench::w3_chain;
using bench::w8_chain;
namespace fs = std::filesystem;

Array uniform_input(uint64_t seed, int64_t n) {
  Array a = random::uniform(random::key(seed), {n}, -2.0, 2.0);
  a.eval();
  return a;
}

constexpr int kCallsPerIteration = 2000;

// W8: back-to-back calls, each evaluated (a call's host work includes scheduling its kernel).
template <class F>
void time_calls(benchmark::State& state, F&& call) {
  for (int i = 0; i < 100; ++i) call();  // warm-up: trace, kernel build, allocator cache
  wait_for_kernel_builds();  // tiered execution: time the fused tier, not calls before the switch
  call();
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCallsPerIteration; ++i) call();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(s / kCallsPerIteration);
  }
}

void w8_eager(benchmark::State& state) {
  Array x = uniform_input(1, 16);
  time_calls(state, [&] {
    Array r = w8_chain(x);
    r.eval();
    benchmark::DoNotOptimize(r.data());
  });
}

void w8_compiled(benchmark::State& state) {
  static auto f = compile([](const Array& x) { return w8_chain(x); }, CompileOptions{}, "bench_w8");
  Array x = uniform_input(1, 16);
  time_calls(state, [&] {
    Array r = f(x);
    r.eval();
    benchmark::DoNotOptimize(r.data());
  });
}

// ---- W12 ------------------------------------------------------------------------------------

// The child: one first call of the named workload, timed, printed as "first_call_us N".
int run_child(const std::string& name) {
  Array x = uniform_input(3, name == "W8" ? 16 : 1024);
  Array y = uniform_input(4, name == "W8" ? 16 : 1024);
  auto t0 = std::chrono::steady_clock::now();
  Array r;
  if (name == "W3") {
    auto f = compile([](const Array& a, const Array& b) { return w3_chain(a, b); }, CompileOptions{}, "w12_w3");
    r = f(x, y);
  } else {
    auto f = compile([](const Array& a) { return w8_chain(a); }, CompileOptions{}, "w12_w8");
    r = f(x);
  }
  r.eval();
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  std::printf("first_call_us %.1f\n", us);
  return 0;
}

// Runs the child with SMELT_CACHE_DIR=cache_dir and returns its first-call time in seconds.
double child_first_call(const std::string& name, const fs::path& cache_dir) {
  std::string cmd = "SMELT_CACHE_DIR='" + cache_dir.string() + "' '" + fs::read_symlink("/proc/self/exe").string() +
                    "' --w12-child=" + name;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("W12: cannot start the child process");
  double us = -1;
  char line[256];
  while (fgets(line, sizeof line, p))
    if (std::sscanf(line, "first_call_us %lf", &us) == 1) break;
  int rc = pclose(p);
  if (rc != 0 || us < 0) throw std::runtime_error("W12: the child failed (" + cmd + ")");
  return us * 1e-6;
}

fs::path fresh_dir() {
  std::string tmpl = (fs::temp_directory_path() / "smelt-w12-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("W12: mkdtemp failed");
  return tmpl;
}

void w12_cold(benchmark::State& state, const std::string& name) {
  for (auto _ : state) {
    fs::path dir = fresh_dir();
    state.SetIterationTime(child_first_call(name, dir));
    fs::remove_all(dir);
  }
}

void w12_warm(benchmark::State& state, const std::string& name) {
  fs::path dir = fresh_dir();
  child_first_call(name, dir);  // fills the disk cache, untimed
  for (auto _ : state) state.SetIterationTime(child_first_call(name, dir));
  fs::remove_all(dir);
}

void configure_calls(benchmark::internal::Benchmark* b) {
  b->Iterations(1)->UseManualTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace

// Names are work/system; run.sh reads them back. W12 rows: the system names the cache state.
BENCHMARK(w8_eager)->Name("W8_dispatch_32ops_16_f32/smelt")->Apply(configure_calls);
BENCHMARK(w8_compiled)->Name("W8_dispatch_32ops_16_f32/smelt_compile")->Apply(configure_calls);
BENCHMARK_CAPTURE(w12_cold, w3, std::string("W3"))->Name("W12_first_call_W3/smelt_compile_cold")->Apply(configure_calls);
BENCHMARK_CAPTURE(w12_warm, w3, std::string("W3"))->Name("W12_first_call_W3/smelt_compile_warm")->Apply(configure_calls);
BENCHMARK_CAPTURE(w12_cold, w8, std::string("W8"))->Name("W12_first_call_W8/smelt_compile_cold")->Apply(configure_calls);
BENCHMARK_CAPTURE(w12_warm, w8, std::string("W8"))->Name("W12_first_call_W8/smelt_compile_warm")->Apply(configure_calls);

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--w12-child=", 12) == 0) return run_child(argv[i] + 12);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
