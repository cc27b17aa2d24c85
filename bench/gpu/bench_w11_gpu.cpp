// W11 of bench/SUITE.md on the GPU: the ONNX graph-break model (score threshold -> NonZero -> gather
// -> NMS -> TopK) with a new box count (2,000-20,000) on every call, run by smelt on cuda eagerly and
// compiled (segments around the breaks at eager_below 20, the default, and 0: every segment compiled).
//
// Usage: bench_w11_gpu OUT.json [calls]. Makes `calls` + 8 input sets, each with its own box count
// drawn from [2000, 20000] (seed 11), on the GPU. Per implementation: 8 warm-up calls, then one call
// per remaining set (a box count not seen before on every call), timed on the host clock as
// call + synchronize; reports the median and the largest time per call, the traces (segment
// recompilations) during the timed calls from CompiledModelStats, and the device->host copies
// per call (RunStats) and the GPU memory peak (memory_info; the inputs of every call are resident).
// bench/gpu/peers_w11.py reads OUT.json (its box counts too) and adds
// PyTorch eager and torch.compile(dynamic=True) on the same counts.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/w11_model.h"
#include "smelt/memory.h"
#include "smelt/onnx.h"
#include "smelt/smelt.h"

using namespace smelt;
using onnx::Value;

namespace {

constexpr int kWarmup = 8;

double us_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Exits when a value is not on the GPU: the benchmark measures the GPU path or nothing.
void require_on(const std::vector<Value>& values, Device gpu, const char* what) {
  for (const auto& v : values)
    if (v.is_tensor() && !(v.array().device() == gpu)) {
      std::fprintf(stderr, "bench_w11_gpu: %s is on %s, not on %s\n", what, v.array().device().str().c_str(),
                   gpu.str().c_str());
      std::exit(1);
    }
}

struct Row {
  std::string impl;
  double median_us = 0, max_us = 0, first_us = 0;
  uint64_t traces_after_warmup = 0;
  double d2h_copies = 0, d2h_bytes = 0;  // per timed call
  double peak_mib = 0;                    // the GPU allocator's peak during the calls, inputs included
  std::string host_computed;
};

uint64_t traces_of(const onnx::CompiledModel& cm) {
  uint64_t t = 0;
  for (const auto& s : cm.stats().segments) t += s.traces;
  return t;
}

/// Times one implementation: `call(inputs, stats)` returns the outputs.
template <class Call>
Row measure(const std::string& impl, const std::vector<std::vector<Value>>& sets, Device gpu, Call call,
            const onnx::CompiledModel* cm) {
  Row row;
  row.impl = impl;
  onnx::RunStats stats;
  reset_peak_memory(gpu);
  for (int i = 0; i < kWarmup; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    require_on(call(sets[static_cast<size_t>(i)], stats), gpu, "an output");
    synchronize(gpu);
    if (i == 0) row.first_us = us_since(t0);  // the first call of all: kernel builds included
  }
  const uint64_t traces0 = cm ? traces_of(*cm) : 0;
  std::vector<double> times;
  double copies = 0, bytes = 0;
  for (size_t i = kWarmup; i < sets.size(); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto out = call(sets[i], stats);
    synchronize(gpu);
    times.push_back(us_since(t0));
    require_on(out, gpu, "an output");
    copies += static_cast<double>(stats.device_to_host_copies);
    bytes += static_cast<double>(stats.device_to_host_bytes);
    if (!stats.host_computed.empty()) row.host_computed = stats.host_computed.front();
  }
  row.median_us = median(times);
  row.max_us = *std::max_element(times.begin(), times.end());
  row.traces_after_warmup = cm ? traces_of(*cm) - traces0 : 0;
  row.d2h_copies = copies / static_cast<double>(times.size());
  row.d2h_bytes = bytes / static_cast<double>(times.size());
  row.peak_mib = static_cast<double>(memory_info(gpu).peak_bytes) / (1024.0 * 1024.0);
  return row;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) o += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_w11_gpu OUT.json [calls]\n");
    return 2;
  }
  const int calls = argc > 2 ? std::max(8, std::atoi(argv[2])) : 100;
  if (!cuda_available()) {
    std::fprintf(stderr, "bench_w11_gpu: no CUDA GPU\n");
    return 1;
  }
  const Device gpu = Device::cuda(0);
  // Distinct box counts, so that every timed call sees a count no call saw before.
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> count(2000, 20000);
  std::vector<int64_t> counts;
  while (counts.size() < static_cast<size_t>(calls + kWarmup)) {
    const int64_t n = count(rng);
    if (std::find(counts.begin(), counts.end(), n) == counts.end()) counts.push_back(n);
  }
  std::vector<std::vector<Value>> sets;
  for (size_t i = 0; i < counts.size(); ++i) {
    std::vector<Value> in;
    {
      DefaultDeviceScope scope(Device::cpu());  // drawn on the CPU, then moved: the GPU run starts there
      in = bench::w11_inputs(counts[i], 100 + i);
    }
    for (auto& v : in) {
      Array a = to_device(v.array(), gpu);
      a.eval();
      v = Value::tensor(a);
    }
    require_on(in, gpu, "an input");
    sets.push_back(std::move(in));
  }
  const onnx::Model& model = bench::w11_model();
  std::vector<Row> rows;
  rows.push_back(measure("smelt eager (onnx::run, device cuda)", sets, gpu,
                         [&](const std::vector<Value>& in, onnx::RunStats& s) {
                           onnx::RunOptions ro;
                           ro.device = gpu;
                           ro.stats = &s;
                           return onnx::run(model, in, ro);
                         },
                         nullptr));
  for (int eager_below : {20, 0}) {
    onnx::CompileModelOptions o;
    o.device = gpu;
    o.eager_below = eager_below;
    onnx::CompiledModel cm = onnx::compile(model, {}, o);
    rows.push_back(measure("smelt compiled (eager_below " + std::to_string(eager_below) + ")", sets, gpu,
                           [&](const std::vector<Value>& in, onnx::RunStats& s) {
                             onnx::RunOptions ro;
                             ro.stats = &s;
                             return cm(in, ro);
                           },
                           &cm));
  }
  FILE* f = std::fopen(argv[1], "w");
  if (!f) {
    std::fprintf(stderr, "bench_w11_gpu: cannot write %s\n", argv[1]);
    return 1;
  }
  std::fprintf(f, "{\"work\": \"W11\", \"warmup\": %d, \"counts\": [", kWarmup);
  for (size_t i = 0; i < counts.size(); ++i) std::fprintf(f, "%s%lld", i ? ", " : "", static_cast<long long>(counts[i]));
  std::fprintf(f, "],\n \"rows\": [\n");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f,
                 "  {\"impl\": \"%s\", \"median_us\": %.1f, \"max_us\": %.1f, \"first_call_us\": %.1f, "
                 "\"traces_after_warmup\": %llu, \"d2h_copies_per_call\": %.2f, \"d2h_bytes_per_call\": %.0f, "
                 "\"peak_mib\": %.1f, \"host_computed\": \"%s\"}%s\n",
                 json_escape(r.impl).c_str(), r.median_us, r.max_us, r.first_us,
                 static_cast<unsigned long long>(r.traces_after_warmup), r.d2h_copies, r.d2h_bytes, r.peak_mib,
                 json_escape(r.host_computed).c_str(), i + 1 < rows.size() ? "," : "");
    std::printf("W11 %-40s median %9.1f us  max %9.1f us  first %10.1f us  traces after warm-up %llu  "
                "d2h %.1f copies %.0f B per call\n",
                r.impl.c_str(), r.median_us, r.max_us, r.first_us, static_cast<unsigned long long>(r.traces_after_warmup),
                r.d2h_copies, r.d2h_bytes);
  }
  std::fprintf(f, " ]}\n");
  std::fclose(f);
  return 0;
}
