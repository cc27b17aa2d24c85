// GPU benchmark of smelt (SUITE.md W1 and W3, eager: one kernel per op) and the device copy floor.
//
// Usage: bench_gpu OUT.json [reps]. Times each workload as eval + synchronize on the host clock,
// after warm-up (kernel builds stay out of the numbers), median of `reps` (default 50) on random
// data; checks each GPU result against the CPU's on the same inputs (relative L2 error).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "smelt/compile.h"
#include "smelt/smelt.h"
#include "bench/workloads.h"

using namespace smelt;
using bench::gelu_tanh;
using bench::w3_chain;

namespace {

Array uniform(int64_t n, float lo, float hi, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (auto& x : v) x = d(rng);
  return Array(v, Shape{n});
}

// The compiled variants take the scalars as 0-d device arguments: the compile layer cannot yet
// capture constants that live on the GPU (docs/cuda.md). The fused kernel reads them as
// broadcast values, which costs no bandwidth.
Array gelu_tanh_args(const Array& x, const std::vector<Array>& c) {
  Array inner = multiply(add(x, multiply(multiply(multiply(x, x), x), c[0])), c[1]);
  return multiply(multiply(x, c[2]), add(tanh(inner), c[3]));
}

Array w3_chain_args(const Array& x, const Array& y, const std::vector<Array>& c) {
  Array t = add(multiply(x, c[0]), y);
  t = exp(negative(multiply(t, t)));
  t = subtract(multiply(t, y), c[1]);
  t = add(sin(t), cos(x));
  t = add(abs(t), c[2]);
  t = multiply(log(t), c[3]);
  t = sqrt(add(t, c[2]));
  t = maximum(t, y);
  return divide(t, add(multiply(x, x), c[2]));
}

std::vector<Array> device_scalars(const std::vector<float>& v, Device d) {
  std::vector<Array> out;
  for (float x : v) out.push_back(to_device(Array(x), d));
  eval(out);
  return out;
}

double median_us(const std::function<Array()>& f, Device dev, int reps) {
  for (int i = 0; i < 3; ++i) {
    Array r = f();
    r.eval();
  }
  synchronize(dev);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    Array r = f();
    r.eval();
    synchronize(dev);
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double rel_error(const Array& gpu_result, const Array& cpu_result) {
  auto g = to_device(gpu_result, Device::cpu()).to_vector<double>();
  auto c = cpu_result.to_vector<double>();
  double num = 0, den = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    num += (g[i] - c[i]) * (g[i] - c[i]);
    den += c[i] * c[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_gpu OUT.json [reps]\n");
    return 2;
  }
  if (!cuda_available()) {
    std::fprintf(stderr, "bench_gpu: no CUDA GPU\n");
    return 1;
  }
  const int reps = argc > 2 ? std::atoi(argv[2]) : 50;
  const Device g = Device::cuda(0);
  struct Row {
    std::string work, system;
    double time_us, bytes, rel_err;
  };
  std::vector<Row> rows;

  // Copy floor: 1 GiB read + 1 GiB written, device to device.
  {
    Array src = to_device(uniform(int64_t{1} << 28, -1, 1, 1), g);
    src.eval();
    double us = median_us([&] { return copy(src); }, g, reps);
    rows.push_back({"copy_1GiB", "smelt_eager", us, 2.0 * 4 * (1 << 28), 0});
  }
  {
    const int64_t n = int64_t{64} << 20;
    Array x = uniform(n, -4, 4, 2);
    Array gx = to_device(x, g);
    gx.eval();
    double us = median_us([&] { return gelu_tanh(gx); }, g, reps);
    rows.push_back({"W1_gelu_tanh_64Mi_f32", "smelt_eager", us, 2.0 * 4 * n, rel_error(gelu_tanh(gx), gelu_tanh(x))});
    try {  // compiled: one fused NVRTC kernel; the warm-up calls trace and build it
      CompileOptions o;
      o.fallback = CompileFallback::Raise;  // a fallback to eager would time the wrong thing
      auto f = compile([](const Array& a, const std::vector<Array>& c) { return gelu_tanh_args(a, c); }, o, "bench_gpu_w1");
      auto c = device_scalars({0.044715f, 0.79788456f, 0.5f, 1.0f}, g);
      us = median_us([&] { return f(gx, c); }, g, reps);
      rows.push_back({"W1_gelu_tanh_64Mi_f32", "smelt_compile", us, 2.0 * 4 * n, rel_error(f(gx, c), gelu_tanh(x))});
    } catch (const std::exception& e) {
      std::fprintf(stderr, "W1 compiled: %s\n", e.what());
    }
  }
  {
    const int64_t n = int64_t{16} << 20;
    Array x = uniform(n, -1, 1, 3), y = uniform(n, 0.5f, 2.0f, 4);
    Array gx = to_device(x, g), gy = to_device(y, g);
    eval({gx, gy});
    double us = median_us([&] { return w3_chain(gx, gy); }, g, reps);
    rows.push_back({"W3_chain16_16Mi_f32", "smelt_eager", us, 3.0 * 4 * n, rel_error(w3_chain(gx, gy), w3_chain(x, y))});
    try {
      CompileOptions o;
      o.fallback = CompileFallback::Raise;
      auto f = compile([](const Array& a, const Array& b, const std::vector<Array>& c) { return w3_chain_args(a, b, c); },
                       o, "bench_gpu_w3");
      auto c = device_scalars({1.5f, 0.25f, 1.0f, 0.5f}, g);
      us = median_us([&] { return f(gx, gy, c); }, g, reps);
      rows.push_back({"W3_chain16_16Mi_f32", "smelt_compile", us, 3.0 * 4 * n, rel_error(f(gx, gy, c), w3_chain(x, y))});
    } catch (const std::exception& e) {
      std::fprintf(stderr, "W3 compiled: %s\n", e.what());
    }
  }
  FILE* f = std::fopen(argv[1], "w");
  if (!f) {
    std::perror(argv[1]);
    return 1;
  }
  std::fprintf(f, "[\n");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f, "  {\"work\": \"%s\", \"system\": \"%s\", \"time_us\": %.3f, \"bytes\": %.0f, \"check_rel_err\": %.3g}%s\n",
                 r.work.c_str(), r.system.c_str(), r.time_us, r.bytes, r.rel_err, i + 1 < rows.size() ? "," : "");
    std::printf("%-24s %-12s %10.1f us  %7.1f GB/s  rel_err vs CPU %.2g\n", r.work.c_str(), r.system.c_str(), r.time_us,
                r.bytes / r.time_us / 1e3, r.rel_err);
  }
  std::fprintf(f, "]\n");
  std::fclose(f);
  return 0;
}
