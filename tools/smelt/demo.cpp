// `smelt demo`: a tiny MLP forward pass, a matmul, an element-wise chain (eager and compiled) and a
// reduction, each built lazily, evaluated, checked against a float64 reference on the host, and timed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "smelt/compile.h"
#include "smelt/smelt.h"
#include "tools/smelt/args.h"
#include "tools/smelt/commands.h"
#include "tools/smelt/model_inputs.h"

namespace smelt::cli {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// Median wall time in ms of `reps` runs of f (after one untimed warm-up run).
template <class F>
double median_ms(int reps, F&& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    f();
    t.push_back(ms_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::string first_values(const std::vector<float>& v, size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < std::min(n, v.size()); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.5f", i ? ", " : "", static_cast<double>(v[i]));
    s += buf;
  }
  return s + (v.size() > n ? ", ...]" : "]");
}

void section(const char* title) { std::printf("\n== %s\n", title); }

// A 2-layer MLP: softmax(relu(x W1 + b1) W2 + b2) on a batch of random inputs.
void demo_mlp() {
  section("MLP forward: softmax(relu(x·W1 + b1)·W2 + b2)");
  const int64_t batch = 256, in = 784, hidden = 512, out = 10;
  auto keys = random::split(random::key(0), 5);
  auto row = [&](int i) { return reshape(slice(keys, {i, 0}, {i + 1, 2}), {2}); };
  Array x = random::normal(row(0), {batch, in});
  Array w1 = random::normal(row(1), {in, hidden}, 0.0, std::sqrt(2.0 / in));
  Array b1 = random::uniform(row(2), {hidden}, -0.1, 0.1);
  Array w2 = random::normal(row(3), {hidden, out}, 0.0, std::sqrt(1.0 / hidden));
  Array b2 = random::uniform(row(4), {out}, -0.1, 0.1);
  eval({x, w1, b1, w2, b2});
  auto forward = [&] { return softmax(add(matmul(relu(add(matmul(x, w1), b1)), w2), b2), {-1}); };
  auto t0 = Clock::now();
  Array probs = forward();
  double build_ms = ms_since(t0);
  probs.eval();
  double first_ms = ms_since(t0);
  double ms = median_ms(10, [&] { forward().eval(); });
  auto p = probs.to_vector<float>();
  double worst = 0;
  for (int64_t r = 0; r < batch; ++r) {
    double s = 0;
    for (int64_t c = 0; c < out; ++c) s += p[static_cast<size_t>(r * out + c)];
    worst = std::max(worst, std::fabs(s - 1.0));
  }
  std::printf("  x %s, W1 %s, W2 %s -> probs %s\n", shape_to_string(x.shape()).c_str(),
              shape_to_string(w1.shape()).c_str(), shape_to_string(w2.shape()).c_str(),
              shape_to_string(probs.shape()).c_str());
  std::printf("  probs[0] = %s\n", first_values(p, 10).c_str());
  std::printf("  rows sum to 1 within %.1e\n", worst);
  std::printf("  first call %.2f ms (graph built in %.3f ms), then %.2f ms per forward (median of 10)\n", first_ms,
              build_ms, ms);
}

// matmul 512×512 float32: GFLOP/s, and one entry checked in float64.
void demo_matmul() {
  section("matmul 512x512 float32");
  const int64_t n = 512;
  auto keys = random::split(random::key(1), 2);
  Array a = random::uniform(reshape(slice(keys, {0, 0}, {1, 2}), {2}), {n, n}, -1.0, 1.0);
  Array b = random::uniform(reshape(slice(keys, {1, 0}, {2, 2}), {2}), {n, n}, -1.0, 1.0);
  eval({a, b});
  Array c = matmul(a, b);
  double ms = median_ms(20, [&] { matmul(a, b).eval(); });
  auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  auto cv = c.to_vector<double>();
  double worst = 0;
  for (int64_t i : {int64_t{0}, int64_t{137}, n - 1}) {
    for (int64_t j : {int64_t{0}, int64_t{311}, n - 1}) {
      double ref = 0;
      for (int64_t k = 0; k < n; ++k) ref += av[static_cast<size_t>(i * n + k)] * bv[static_cast<size_t>(k * n + j)];
      worst = std::max(worst, std::fabs(cv[static_cast<size_t>(i * n + j)] - ref));
    }
  }
  std::printf("  c = a @ b: %s, c[0,0] = %.6f (max error vs float64 on 9 entries %.1e)\n",
              shape_to_string(c.shape()).c_str(), cv[0], worst);
  std::printf("  %.3f ms, %.1f GFLOP/s (median of 20)\n", ms, 2.0 * n * n * n / (ms * 1e6));
}

// An element-wise chain on 16 Mi float32: each op is its own kernel (no compile here).
void demo_elementwise() {
  section("element-wise chain on 16 Mi float32: tanh(1.5x + 0.5)·x - 1");
  const int64_t n = int64_t{1} << 24;
  Array x = random::uniform(random::key(2), {n}, -2.0, 2.0);
  x.eval();
  auto chain = [&] { return subtract(multiply(tanh(add(multiply(x, 1.5f), 0.5f)), x), 1.0f); };
  Array y = chain();
  double ms = median_ms(5, [&] { chain().eval(); });
  auto xv = x.to_vector<float>();
  auto yv = y.to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < xv.size(); i += 4099) {
    double xd = xv[i];
    double ref = std::tanh(1.5 * xd + 0.5) * xd - 1.0;
    worst = std::max(worst, std::fabs(yv[i] - ref) / std::max(1.0, std::fabs(ref)));
  }
  double gb = 2.0 * static_cast<double>(n) * 4 / 1e9;  // x read once, y written once
  std::printf("  y[:6] = %s (max rel. error vs float64 %.1e)\n", first_values(yv, 6).c_str(), worst);
  std::printf("  eager:    %8.2f ms, %5.1f GB/s counted as x read + y written (5 ops, 5 passes; median of 5)\n", ms,
              gb / (ms / 1e3));
  // The same function compiled: traced once, fused into one generated kernel, then replayed.
  auto fused = compile([](const Array& a) { return subtract(multiply(tanh(add(multiply(a, 1.5f), 0.5f)), a), 1.0f); },
                       CompileOptions{}, "demo_chain");
  auto t0 = Clock::now();
  Array yc = fused(x);
  yc.eval();
  double first_ms = ms_since(t0);
  double cms = median_ms(5, [&] { fused(x).eval(); });
  bool same = yc.to_vector<float>() == yv;
  std::printf("  compiled: %8.2f ms, %5.1f GB/s (first call %.0f ms: trace, codegen, kernel build or disk cache);"
              " bit-identical to eager: %s\n",
              cms, gb / (cms / 1e3), first_ms, same ? "yes" : "NO");
  if (!same) throw Error("demo: the compiled chain differs from the eager one");
}

// A full reduction and a row reduction.
void demo_reduction() {
  section("reductions on 16 Mi float32");
  const int64_t n = int64_t{1} << 24;
  Array x = random::normal(random::key(3), {4096, n / 4096});
  x.eval();
  Array total = sum(x);
  double ms = median_ms(10, [&] { sum(x).eval(); });
  auto xv = x.to_vector<double>();
  double ref = 0;
  for (double v : xv) ref += v;
  std::printf("  sum(x) = %.4f (float64 reference %.4f)\n", total.item<double>(), ref);
  std::printf("  %.2f ms, %.1f GB/s read (median of 10)\n", ms, static_cast<double>(n) * 4 / 1e9 / (ms / 1e3));
  Array rows = mean(x, {1});
  double rms = median_ms(10, [&] { mean(x, {1}).eval(); });
  auto rv = rows.to_vector<float>();
  std::printf("  mean(x, axis=1): %s, first %s, %.2f ms\n", shape_to_string(rows.shape()).c_str(),
              first_values(rv, 4).c_str(), rms);
}

}  // namespace

int run_demo(const std::vector<std::string>& args) {
  constexpr const char* kUsage = "usage: smelt demo [--threads N]";
  ParsedArgs parsed = parse_command_line(args, {{"--threads", nullptr, true}}, kUsage);
  if (parsed.help) {
    std::printf("%s\n\nBuilds, evaluates and prints a few computations on the CPU with their timings: an MLP, a\n"
                "matmul, element-wise eager and compiled, a sum.\n\n"
                "  --threads N   CPU threads (default: SMELT_NUM_THREADS or all cores)\n"
                "  -h, --help    this text\n",
                kUsage);
    return 0;
  }
  if (!parsed.positionals.empty())
    throw UsageError("unexpected argument '" + parsed.positionals[0] + "' (demo takes options only)\n" + kUsage);
  for (const auto& [name, value] : parsed.options) {
    auto n = parse_count(value);
    if (!n || *n < 1 || *n > 1000000) throw UsageError("--threads needs a positive integer, got '" + value + "'\n" + kUsage);
    set_cpu_threads(static_cast<int>(*n));
  }
  std::printf("smelt %s demo: CPU, %d threads\n", SMELT_VERSION, cpu_threads());
  int failed = 0;
  for (auto* part : {demo_mlp, demo_matmul, demo_elementwise, demo_reduction}) {
    try {
      part();
    } catch (const Error& e) {
      // One missing piece should not hide the others' results.
      std::fprintf(stderr, "  failed: %s\n", e.what());
      ++failed;
    }
  }
  MemoryInfo m = memory_info();
  std::printf("\nmemory: %.1f MiB active, %.1f MiB peak, %.1f MiB cached\n", m.active_bytes / 1048576.0,
              m.peak_bytes / 1048576.0, m.cached_bytes / 1048576.0);
  return failed ? 1 : 0;
}

}  // namespace smelt::cli
