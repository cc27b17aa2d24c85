// Concurrent calls: calls per second of one shared compiled function (W1) and one shared compiled
// tiny transformer (ONNX builds only) from 1, 2, 4 and 8 threads on the CPU, and of W1 and of a
// compiled MLP block (matmul, GELU, matmul, residual, LayerNorm: several kernels and cuBLAS calls
// per call) from 1-4 threads on the GPU, all on the default stream and then each thread on its own
// smelt::Stream (1-4 streams). Built by the bench preset and by scripts/gpu.sh (without ONNX).
//
// A plain program (no benchmark framework): each figure is the total number of calls the threads
// finish in a fixed window after a warm-up, over the window's length; the median of --reps windows
// is reported, with the speed-up over one thread. The inputs are small on purpose: the figure is
// the host work of a call (key, cache, replay, scheduling) plus a small kernel, which is what a
// process-wide lock used to serialize.
//
//   bench_concurrency [--seconds S] [--reps R] [--threads 1,2,4,8] [--model PATH] [--json FILE]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/workloads.h"
#include "smelt/compile.h"
#include "smelt/memory.h"
#if SMELT_BENCH_HAS_ONNX
#include "smelt/onnx.h"
#endif
#include "smelt/smelt.h"

namespace {

using namespace smelt;
using Clock = std::chrono::steady_clock;

struct Options {
  double seconds = 1.0;
  int reps = 3;
  std::vector<int> threads{1, 2, 4, 8};
  std::string model = std::string(SMELT_SOURCE_DIR) + "/models/tiny_transformer.onnx";
  std::string json;
};

struct Row {
  std::string work, device;
  int threads = 1;
  double calls_per_s = 0.0;
  double speedup = 1.0;
};

/// Calls per second of `call` from `threads` threads at once: the median of `reps` windows.
/// With `streams`, thread t makes streams[t] its current stream for the whole window.
double calls_per_second(int threads, const Options& o, const std::function<void()>& call,
                        const std::vector<Stream>* streams = nullptr) {
  std::vector<double> rates;
  for (int rep = 0; rep < o.reps; ++rep) {
    std::atomic<bool> go{false}, stop{false};
    std::atomic<int64_t> total{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        std::optional<StreamScope> scope;
        if (streams) scope.emplace((*streams)[static_cast<size_t>(t)]);
        while (!go.load()) std::this_thread::yield();
        int64_t n = 0;
        while (!stop.load(std::memory_order_relaxed)) {
          call();
          ++n;
        }
        total += n;
      });
    auto t0 = Clock::now();
    go = true;
    std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
    stop = true;
    for (auto& th : pool) th.join();
    // Calls that were running when the window closed finish after it: count the time they took.
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    rates.push_back(static_cast<double>(total.load()) / s);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

void measure(const std::string& work, const std::string& device, const std::vector<int>& threads, const Options& o,
             const std::function<void()>& call, std::vector<Row>& rows, const std::vector<Stream>* streams = nullptr) {
  for (int i = 0; i < 20; ++i) call();  // warm-up: trace, kernel build, allocator cache
  wait_for_kernel_builds();  // tiered execution: time the fused tier, not calls before the switch
  call();
  double one = 0.0;
  for (int t : threads) {
    Row r{work, device, t, calls_per_second(t, o, call, streams), 1.0};
    if (t == threads.front()) one = r.calls_per_s;
    r.speedup = one > 0 ? r.calls_per_s / one : 0.0;
    std::printf("%-34s %-6s %3d threads %12.0f calls/s  x%.2f\n", work.c_str(), device.c_str(), t, r.calls_per_s,
                r.speedup);
    std::fflush(stdout);
    rows.push_back(r);
  }
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    v.push_back(std::atoi(p));
    p = std::strchr(p, ',');
    if (!p) break;
    ++p;
  }
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    auto value = [&](const char* flag) -> const char* {
      if (std::strcmp(argv[i], flag) != 0) return nullptr;
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_concurrency: %s needs a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (const char* v = value("--seconds")) o.seconds = std::atof(v);
    else if (const char* v = value("--reps")) o.reps = std::max(1, std::atoi(v));
    else if (const char* v = value("--threads")) o.threads = parse_list(v);
    else if (const char* v = value("--model")) o.model = v;
    else if (const char* v = value("--json")) o.json = v;
    else {
      std::fprintf(stderr,
                   "usage: bench_concurrency [--seconds S] [--reps R] [--threads 1,2,4,8] [--model PATH] [--json FILE]\n");
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  std::printf("bench_concurrency: %u hardware threads, kernel threads %d, window %.2f s, median of %d\n",
              std::thread::hardware_concurrency(), cpu_threads(), o.seconds, o.reps);
  std::vector<Row> rows;
  {
    DefaultDeviceScope cpu(Device::cpu());
    // W1 on 1 Ki elements: one fused kernel per call.
    auto gelu = compile([](const Array& x) { return bench::gelu_tanh(x); });
    Array x = random::uniform(random::key(1), {1024}, -3.0, 3.0);
    x.eval();
    measure("W1 gelu [1024] f32, compiled", "cpu", o.threads, o,
            [&] {
              Array y = gelu(x);
              y.eval();
            },
            rows);
#if SMELT_BENCH_HAS_ONNX
    // The tiny transformer, compiled once and shared, on [2, 16] token ids.
    onnx::Model m = onnx::load(o.model);
    Array ids = astype(random::randint(random::key(2), 0, 1000, {2, 16}), int64);
    ids.eval();
    onnx::CompiledModel cm = onnx::compile(m, {onnx::Value::tensor(ids)});
    measure("tiny_transformer [2,16], compiled", "cpu", o.threads, o, [&] { cm({onnx::Value::tensor(ids)}); }, rows);
#endif
  }
  if (cuda_available()) {
    // First every thread issues on the device's default stream; the figure is host throughput
    // with the GPU working behind it (a wait at the end of each call for that call's kernel).
    // Measured before any Stream exists: the first one switches the device to cross-stream
    // ordering (a wait at the end of each node), which the default-stream figure must not pay.
    DefaultDeviceScope gpu(Device::cuda(0));
    auto gelu = compile([](const Array& x) { return bench::gelu_tanh(x); });
    Array x = random::uniform(random::key(3), {1 << 20}, -3.0, 3.0);
    x.eval();
    measure("W1 gelu [1Mi] f32, compiled", "cuda", {1, 2, 3, 4}, o,
            [&] {
              Array y = gelu(x);
              y.eval();
              synchronize(Device::cuda(0));
            },
            rows);
    // Then thread t on stream t (1-4 streams): kernels of different threads may overlap.
    std::vector<Stream> streams;
    for (int t = 0; t < 4; ++t) streams.push_back(Stream::create(Device::cuda(0)));
    measure("W1 gelu [1Mi] f32, compiled, streams", "cuda", {1, 2, 3, 4}, o,
            [&] {
              Array y = gelu(x);
              y.eval();
              synchronize(current_stream(Device::cuda(0)));  // this thread's own stream only
            },
            rows, &streams);
    // A compiled MLP block on [64, 256] f32: per call two cuBLAS matmuls and fused kernels, so the
    // host work per call is larger and kernels of different streams can overlap.
    auto block = compile([](const Array& h, const Array& w1, const Array& w2, const Array& g, const Array& b) {
      Array u = bench::gelu_tanh(matmul(h, w1));
      return layer_norm(add(h, matmul(u, w2)), g, b, 1e-5);
    });
    Array h = random::normal(random::key(4), {64, 256});
    Array w1 = multiply(random::normal(random::key(5), {256, 1024}), 0.05f);
    Array w2 = multiply(random::normal(random::key(6), {1024, 256}), 0.05f);
    Array g = ones({256});
    Array b = zeros({256});
    for (Array* a : {&h, &w1, &w2, &g, &b}) {
      a->eval();
      if (a->device() != Device::cuda(0)) {
        std::fprintf(stderr, "bench_concurrency: a GPU input is on %s\n", a->device().str().c_str());
        return 1;
      }
    }
    measure("MLP block [64,256] f32, compiled", "cuda", {1, 2, 3, 4}, o,
            [&] {
              Array y = block(h, w1, w2, g, b);
              y.eval();
              synchronize(Device::cuda(0));
            },
            rows);
    measure("MLP block [64,256] f32, compiled, streams", "cuda", {1, 2, 3, 4}, o,
            [&] {
              Array y = block(h, w1, w2, g, b);
              y.eval();
              synchronize(current_stream(Device::cuda(0)));
            },
            rows, &streams);
  }
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << "[\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      f << "  {\"work\": \"" << r.work << "\", \"device\": \"" << r.device << "\", \"threads\": " << r.threads
        << ", \"calls_per_s\": " << r.calls_per_s << ", \"speedup\": " << r.speedup << "}"
        << (i + 1 < rows.size() ? ",\n" : "\n");
    }
    f << "]\n";
  }
  return 0;
}
