// Device placement on a GPU (device.h's rule): arrays made from nothing follow the default device
// and DefaultDeviceScope; mixed CPU/GPU inputs give compiled results on eager's devices with
// eager's bits (layer_norm(add(x, r), w, b) of issue #11, a GPT-2 block, shapeless, compile_mut);
// random draws from fresh keys, eagerly and compiled. Skipped without a GPU.
#include <sstream>
#include <thread>

#include "smelt/compile.h"
#include "smelt/random.h"
#include "smelt/telemetry.h"
#include "tests/backend/cuda/cuda_test_utils.h"

namespace smelt {
namespace {

using namespace smelt::test;
using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

CompileOptions strict(CompileOptions o = {}) {
  o.fallback = CompileFallback::Raise;
  return o;
}

/// Each compiled output lives where the eager one does and has its bits: bit for bit on the CPU,
/// 0 ulps on the GPU (where NaN matches any NaN, as in the other CUDA compile tests).
void expect_like_eager(const std::vector<Array>& got, const std::vector<Array>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].device(), want[i].device()) << "output " << i;
    if (got[i].device() == Device::cpu()) {
      EXPECT_TRUE(bit_equal(got[i], want[i])) << "output " << i;
    } else {
      EXPECT_TRUE(same_as_cpu(got[i], on_cpu(want[i]))) << "output " << i;
    }
  }
}

/// Lines of a dumped tape that contain `text`.
std::vector<std::string> lines_with(const std::string& tape, const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(tape);
  for (std::string line; std::getline(in, line);)
    if (line.find(text) != std::string::npos) out.push_back(line);
  return out;
}

struct Maker {
  const char* name;
  std::function<Array()> make;
};

/// Every way to make an array without array inputs (device.h, rule 1).
std::vector<Maker> makers() {
  return {
      {"zeros", [] { return zeros({3, 4}); }},
      {"ones", [] { return ones({5}, int32); }},
      {"full of a number", [] { return full({2, 3}, Array(2.5f)); }},
      {"full of a host array", [] { return full({2, 3}, Array({1.0f, 2.0f, 3.0f})); }},
      {"arange", [] { return arange(0.0, 10.0, 1.5); }},
      {"arange int64", [] { return arange(7, int64); }},
      {"linspace", [] { return linspace(-1.0, 1.0, 9); }},
      {"eye", [] { return eye(4, 5, 1); }},
      {"identity", [] { return identity(3, float64); }},
      {"random::key", [] { return random::key(42); }},
      {"random::split", [] { return random::split(random::key(42), 3); }},
      {"random::bits", [] { return random::bits(random::key(5), {100}); }},
      {"random::uniform", [] { return random::uniform(random::key(1), {256}); }},
      {"random::uniform float64", [] { return random::uniform(random::key(1), {256}, -2.0, 3.0, float64); }},
      {"random::randint", [] { return random::randint(random::key(3), -5, 100, {64}); }},
      {"random::bernoulli", [] { return random::bernoulli(random::key(4), Array(0.3f), {64}); }},
  };
}

TEST(CudaDevicePlacement, ArraysMadeFromNothingFollowTheScope) {
  SMELT_REQUIRE_GPU();
  for (const Maker& m : makers()) {
    SCOPED_TRACE(m.name);
    Array host;
    {
      DefaultDeviceScope cpu(Device::cpu());
      host = m.make();
      EXPECT_EQ(host.device(), Device::cpu());
    }
    DefaultDeviceScope g(gpu());
    Array a = m.make();
    EXPECT_EQ(a.device(), gpu());
    // The same values on both devices: these are exact (fills, ranges, integer and uniform bits).
    EXPECT_TRUE(bit_equal(on_cpu(a), host));
    {
      DefaultDeviceScope inner(Device::cpu());  // scopes nest
      EXPECT_EQ(m.make().device(), Device::cpu());
    }
    EXPECT_EQ(m.make().device(), gpu());
  }
}

TEST(CudaDevicePlacement, TheProcessDefaultAndThreadsScopes) {
  SMELT_REQUIRE_GPU();
  const Device before = default_device();
  set_default_device(gpu());
  EXPECT_EQ(random::key(1).device(), gpu());
  EXPECT_EQ(random::normal(random::key(1), {8}).device(), gpu());
  {
    DefaultDeviceScope cpu(Device::cpu());
    EXPECT_EQ(random::key(1).device(), Device::cpu());
    Device other;
    std::thread([&] { other = random::key(1).device(); }).join();
    EXPECT_EQ(other, gpu());  // the scope is this thread's only
  }
  set_default_device(before);
}

TEST(CudaDevicePlacement, HostDataStaysOnTheCpuUntilMoved) {
  SMELT_REQUIRE_GPU();
  const std::vector<float> v{1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
  DefaultDeviceScope g(gpu());
  EXPECT_EQ(Array(v, {6}).device(), Device::cpu());  // even inside a GPU scope
  Array a = to_device(Array(v, {2, 3}), default_device());
  EXPECT_EQ(a.device(), gpu());
  EXPECT_TRUE(bit_equal(on_cpu(a), Array(v, {2, 3})));
  // An op with a GPU operand moves the host one.
  EXPECT_EQ(add(Array(v, {2, 3}), a).device(), gpu());
}

// Issue #11: x and r on the CPU, w and b on the GPU. Eagerly the add runs on the CPU and its
// result moves to the GPU for the norm; compiled must do the same, not run every step on input
// 0's device (which read GPU pointers in a CPU kernel and crashed).
TEST(CudaDevicePlacement, MixedDeviceLayerNormCompiledEqualsEager) {
  SMELT_REQUIRE_GPU();
  DefaultDeviceScope cpu(Device::cpu());  // the dump names the steps off the default device
  Fn fn = [](const std::vector<Array>& in) { return std::vector<Array>{layer_norm(add(in[0], in[1]), in[2], in[3])}; };
  const int64_t rows = 16384, cols = 4096;  // the shape
  Array x = special_array({rows, cols}, bfloat16, -3, 3, 1), r = special_array({rows, cols}, bfloat16, -3, 3, 2);
  Array w = on_gpu(special_array({cols}, bfloat16, 0.5, 1.5, 3)), b = on_gpu(special_array({cols}, bfloat16, -1, 1, 4));
  std::string final_tape;
  CompileOptions o = strict();
  o.dump = [&](const std::string&, const std::string& text) { final_tape = text; };
  auto f = compile_flat(fn, o, "mixed_layer_norm");
  const std::vector<Array> eager = fn({x, r, w, b});
  ASSERT_EQ(eager[0].device(), gpu());
  expect_like_eager(f({x, r, w, b}), eager);
  // layer_norm normalizes on x's device (the CPU) and meets w on the GPU: the tape has one
  // transfer step there, as the eager graph has one to_device of a computed value.
  const auto copies = lines_with(final_tape, " = Copy()(");
  ASSERT_EQ(copies.size(), 1u) << final_tape;
  EXPECT_NE(copies[0].find(": float32[16384,4096] on cuda:0"), std::string::npos) << final_tape;
  // A second call replays.
  Array x2 = special_array({rows, cols}, bfloat16, -3, 3, 5);
  expect_like_eager(f({x2, r, w, b}), fn({x2, r, w, b}));
  EXPECT_EQ(f.stats().traces, 1u);
}

TEST(CudaDevicePlacement, MixedDeviceLayerNormShapelessAndUnfused) {
  SMELT_REQUIRE_GPU();
  Fn fn = [](const std::vector<Array>& in) { return std::vector<Array>{layer_norm(add(in[0], in[1]), in[2], in[3])}; };
  Array w = on_gpu(special_array({256}, float32, 0.5, 1.5, 3)), b = on_gpu(special_array({256}, float32, -1, 1, 4));
  CompileOptions shapeless = strict();
  shapeless.shapeless = true;
  CompileOptions unfused = strict();
  unfused.fuse = false;
  for (const CompileOptions& o : {shapeless, unfused}) {
    auto f = compile_flat(fn, o);
    for (int64_t rows : {8, 33}) {
      Array x = special_array({rows, 256}, float32, -3, 3, 10 + rows), r = special_array({rows, 256}, float32, -3, 3, 20);
      expect_like_eager(f({x, r, w, b}), fn({x, r, w, b}));
    }
    EXPECT_EQ(f.stats().traces, o.shapeless ? 1u : 2u);
  }
}

// A GPT-2 block (pre-norm attention and MLP, causal mask) with its weights split between the CPU
// and the GPU and its input on the CPU.
std::vector<Array> gpt2_block(const std::vector<Array>& p) {
  const int64_t heads = 4;
  const Array& x = p[0];
  const int64_t t = x.shape(0), c = x.shape(1), d = c / heads;
  Array h = layer_norm(x, p[1], p[2]);
  Array qkv = matmul(h, p[3]) + p[4];
  auto head = [&](int64_t part) {
    Array s = slice(qkv, {0, part * c}, {t, (part + 1) * c});
    return transpose(reshape(s, {t, heads, d}), {1, 0, 2});
  };
  Array scores = matmul(head(0), transpose(head(1), {0, 2, 1})) * static_cast<float>(1.0 / std::sqrt(double(d)));
  Array causal = tril(ones({t, t}, bool_));
  Array att = softmax(where(causal, scores, Array(-INFINITY)), {-1});
  Array y = reshape(transpose(matmul(att, head(2)), {1, 0, 2}), {t, c});
  Array x1 = x + matmul(y, p[5]) + p[6];
  Array m = gelu(matmul(layer_norm(x1, p[7], p[8]), p[9]) + p[10]);
  return {x1 + matmul(m, p[11]) + p[12]};
}

TEST(CudaDevicePlacement, Gpt2BlockWithMixedDeviceWeights) {
  SMELT_REQUIRE_GPU();
  const int64_t t = 64, c = 128;
  const std::vector<Shape> shapes = {{t, c},     {c},     {c}, {c, 3 * c}, {3 * c}, {c, c}, {c},
                                     {c},        {c},     {c, 4 * c},      {4 * c}, {4 * c, c}, {c}};
  std::vector<Array> p;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Array a = random_array(shapes[i], float32, -0.5, 0.5, static_cast<uint32_t>(40 + i));
    p.push_back(i % 2 == 1 ? on_gpu(a) : a);  // x and every other weight stay on the CPU
  }
  auto f = compile_flat(gpt2_block, strict());
  const std::vector<Array> eager = gpt2_block(p);
  ASSERT_EQ(eager[0].device(), gpu());
  expect_like_eager(f(p), eager);
  p[0] = random_array({t, c}, float32, -0.5, 0.5, 99);
  expect_like_eager(f(p), gpt2_block(p));
  EXPECT_EQ(f.stats().traces, 1u);
}

// The key holds each input's device and the default device: each combination traces once and
// runs where eager runs.
TEST(CudaDevicePlacement, EachInputsDeviceAndTheDefaultDeviceAreInTheKey) {
  SMELT_REQUIRE_GPU();
  Fn fn = [](const std::vector<Array>& in) { return std::vector<Array>{in[0] * in[1] + 1.0f, exp(in[0])}; };
  auto f = compile_flat(fn, strict());
  Array x = special_array({100}, float32, -3, 3, 1), y = special_array({100}, float32, -3, 3, 2);
  for (auto [a, b] : {std::pair{x, y}, std::pair{x, on_gpu(y)}, std::pair{on_gpu(x), y}, std::pair{x, y}})
    expect_like_eager(f({a, b}), fn({a, b}));
  EXPECT_EQ(f.stats().traces, 3u);

  std::vector<std::string> reasons;
  telemetry::Subscription sub("compile.cache.miss", [&](const telemetry::Event& e) { reasons.push_back(e.field("reason")); });
  Fn plus_ones = [](const std::vector<Array>& in) { return std::vector<Array>{in[0] + ones(in[0].shape())}; };
  auto g = compile_flat(plus_ones, strict());
  {
    DefaultDeviceScope scope(Device::cpu());  // with a GPU present the default is the GPU
    expect_like_eager(g({x}), plus_ones({x}));
  }
  {
    DefaultDeviceScope scope(gpu());
    const std::vector<Array> eager = plus_ones({x});
    EXPECT_EQ(eager[0].device(), gpu());
    expect_like_eager(g({x}), eager);
  }
  EXPECT_EQ(g.stats().traces, 2u);
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_EQ(reasons[1], "default device cpu -> cuda:0");
}

TEST(CudaDevicePlacement, CompiledRandomDrawsFromFreshAndPassedKeys) {
  SMELT_REQUIRE_GPU();
  DefaultDeviceScope scope(gpu());
  // A key passed in (made on the GPU by the scope).
  Fn draws = [](const std::vector<Array>& in) {
    return std::vector<Array>{random::uniform(in[0], {4096}), random::normal(in[0], {4096}, 1.0, 2.0, bfloat16),
                              random::randint(in[0], 0, 1000, {4096})};
  };
  auto f = compile_flat(draws, strict());
  for (uint64_t seed : {1u, 2u}) {
    Array k = random::key(seed);
    ASSERT_EQ(k.device(), gpu());
    expect_like_eager(f({k}), draws({k}));
  }
  EXPECT_EQ(f.stats().traces, 1u);
  // A fresh key inside the function, and a CPU input: eager draws on the GPU and moves x there.
  Fn noisy = [](const std::vector<Array>& in) { return std::vector<Array>{in[0] + random::uniform(random::key(3), in[0].shape())}; };
  auto g = compile_flat(noisy, strict());
  Array x = special_array({64, 33}, float32, -3, 3, 7);
  const std::vector<Array> eager = noisy({x});
  EXPECT_EQ(eager[0].device(), gpu());
  expect_like_eager(g({x}), eager);
}

TEST(CudaDevicePlacement, CompileMutCarriesAGpuKeyInItsState) {
  SMELT_REQUIRE_GPU();
  auto step_fn = [](std::tuple<Array, Array>& s, const Array& scale) {
    Array keys = random::split(std::get<0>(s), 2);
    std::get<0>(s) = reshape(slice(keys, {0, 0}, {1, 2}), {2});
    Array draw = random::uniform(reshape(slice(keys, {1, 0}, {2, 2}), {2}), {256}) * scale;
    std::get<1>(s) = std::get<1>(s) + draw;
    return draw;
  };
  auto step = compile_mut(step_fn, strict());
  std::tuple<Array, Array> s, e;
  {
    DefaultDeviceScope scope(gpu());
    s = {random::key(7), zeros({256})};
  }
  e = s;
  const Array scale = Array(0.5f);  // a host scalar: moved by the op, eagerly and compiled
  for (int i = 0; i < 3; ++i) {
    Array got = step(s, scale);
    Array want = step_fn(e, scale);
    expect_like_eager({got, std::get<0>(s), std::get<1>(s)}, {want, std::get<0>(e), std::get<1>(e)});
  }
  EXPECT_EQ(std::get<0>(s).device(), gpu());
  EXPECT_EQ(step.stats().traces, 1u);
}

TEST(CudaDevicePlacement, TwoGpusInOneOpRaiseEagerlyAndCompiled) {
  SMELT_REQUIRE_GPU();
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  Array a = on_gpu(Array({1.0f, 2.0f})), b = to_device(Array({3.0f, 4.0f}), Device::cuda(1));
  EXPECT_THROW_MSG(add(a, b), DeviceError, "add: inputs live on different devices (cuda:0 and cuda:1)");
  auto f = compile([](const Array& x, const Array& y) { return x + y; });
  EXPECT_THROW_MSG(f(a, b), DeviceError, "add: inputs live on different devices (cuda:0 and cuda:1)");
}

}  // namespace
}  // namespace smelt
