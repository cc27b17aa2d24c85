// Float32 convolutions on the CPU (docs/cpu-kernels.md): ResNet-style layers (3x3 and 1x1, batch 1
// and 8), a 7x7 stem and a depthwise layer, eager (the plain Conv: oneDNN with reorders in and
// out when built with it, else im2col + GEMM), and a ResNet basic block conv + bias + residual +
// ReLU with captured weights, eager against compiled (bias and residual as oneDNN post-ops,
// weights packed at compile time, the ReLU one fused kernel). Same conventions as
// bench_matmul.cpp: one repetition per iteration after an untimed warm-up; counter `flops`.
#include <benchmark/benchmark.h>

#include <optional>
#include <string>
#include <vector>

#include "smelt/compile.h"
#include "smelt/smelt.h"

namespace {

using namespace smelt;

struct Layer {
  const char* name;
  int64_t n, c, hw, o, k, stride, groups;
};

// Input N, C, H=W; output channels O; kernel k x k; stride; groups. Padding keeps "same" sizes.
const Layer kLayers[] = {
    {"3x3_c64_56_n1", 1, 64, 56, 64, 3, 1, 1},    {"3x3_c64_56_n8", 8, 64, 56, 64, 3, 1, 1},
    {"1x1_c64to256_56_n1", 1, 64, 56, 256, 1, 1, 1}, {"1x1_c256to64_56_n8", 8, 256, 56, 64, 1, 1, 1},
    {"3x3_c128_28_n1", 1, 128, 28, 128, 3, 1, 1}, {"3x3_c256_14_n1", 1, 256, 14, 256, 3, 1, 1},
    {"3x3_c512_7_n1", 1, 512, 7, 512, 3, 1, 1},   {"3x3_c512_7_n8", 8, 512, 7, 512, 3, 1, 1},
    {"stem_7x7s2_c3_224_n1", 1, 3, 224, 64, 7, 2, 1}, {"dw_3x3_c32_112_n1", 1, 32, 112, 32, 3, 1, 32},
};

double flops(const Layer& l) {
  const int64_t out = (l.hw + 2 * (l.k / 2) - l.k) / l.stride + 1;
  return 2.0 * static_cast<double>(l.n * l.o * out * out * (l.c / l.groups) * l.k * l.k);
}

Array layer_conv(const Layer& l, const Array& x, const Array& w) {
  return conv2d(x, w, {l.stride, l.stride}, {l.k / 2, l.k / 2}, {1, 1}, l.groups);
}

void conv_eager(benchmark::State& state, Layer l) {
  Array x = random::uniform(random::key(1), {l.n, l.c, l.hw, l.hw}, -1.0, 1.0);
  Array w = random::uniform(random::key(2), {l.o, l.c / l.groups, l.k, l.k}, -0.1, 0.1);
  eval({x, w});
  auto body = [&] {
    Array y = layer_conv(l, x, w);
    y.eval();
    benchmark::DoNotOptimize(y.data());
  };
  body();  // warm-up: plans the primitive
  for (auto _ : state) body();
  state.counters["flops"] = flops(l);
}

// A basic block on a 3x3 layer: relu(conv(x) + bias + x), weights and bias captured.
void block(benchmark::State& state, Layer l, bool compiled) {
  Array x = random::uniform(random::key(3), {l.n, l.c, l.hw, l.hw}, -1.0, 1.0);
  Array w = random::uniform(random::key(4), {l.c, l.c, 3, 3}, -0.1, 0.1);
  Array b = random::uniform(random::key(5), {l.c}, -0.1, 0.1);
  eval({x, w, b});
  auto fn = [=](const std::vector<Array>& in) {
    return std::vector<Array>{relu(conv2d(in[0], w, {1, 1}, {1, 1}) + reshape(b, {1, l.c, 1, 1}) + in[0])};
  };
  std::optional<Compiled<std::vector<Array>, const std::vector<Array>&>> c;
  if (compiled) c.emplace(compile_flat(fn));
  auto body = [&] {
    std::vector<Array> r = compiled ? (*c)({x}) : fn({x});
    r[0].eval();
    benchmark::DoNotOptimize(r[0].data());
  };
  body();
  for (auto _ : state) body();
  state.counters["flops"] = 2.0 * static_cast<double>(l.n * l.c * l.hw * l.hw * l.c * 9);
}

void configure(benchmark::internal::Benchmark* b) { b->UseRealTime()->Unit(benchmark::kMicrosecond); }

}  // namespace

int main(int argc, char** argv) {
  // Names are work/system, as in the other benchmarks.
  for (const Layer& l : kLayers)
    benchmark::RegisterBenchmark((std::string("conv_") + l.name + "_f32/smelt").c_str(), conv_eager, l)
        ->Apply(configure);
  for (const Layer& l : {kLayers[0], kLayers[1], kLayers[4], kLayers[6]}) {
    benchmark::RegisterBenchmark((std::string("block_") + l.name + "_f32/smelt").c_str(), block, l, false)
        ->Apply(configure);
    benchmark::RegisterBenchmark((std::string("block_") + l.name + "_f32/smelt_compile").c_str(), block, l, true)
        ->Apply(configure);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
