// ONNX models on the GPU: onnx::run with RunOptions::device = cuda against ONNX Runtime's outputs
// within the stated bounds, initializers uploaded once per model and device, compiled models on the
// GPU (bit-equal to the GPU eager run), and graph breaks reading back only the host values they need.
#include <gtest/gtest.h>

#include "backend/cuda/cuda_test_utils.h"
#include "smelt/smelt.h"

#if SMELT_ONNX
#include <filesystem>

#include "bench/w11_model.h"
#include "onnx/model_builder.h"
#include "onnx/ort_bounds.h"
#include "smelt/onnx.h"
#include "src/onnx/device_constants.h"

namespace smelt::test {
namespace {

namespace fs = std::filesystem;

fs::path repo_root() { return fs::path(__FILE__).parent_path().parent_path().parent_path().parent_path(); }
std::string model_path(const std::string& name) { return (repo_root() / "models" / (name + ".onnx")).string(); }
Array fixture(const std::string& model, const std::string& kind, const std::string& name) {
  return load((repo_root() / "tests" / "onnx" / "fixtures" / (model + "." + kind + "." + name + ".npy")).string());
}

// The ORT bounds (ort_bounds.h) hold for any summation order, so they hold for cuBLAS too.
TEST(OnnxOnGpu, TransformerMatchesOnnxRuntime) {
  SMELT_REQUIRE_GPU();
  onnx::Model m = onnx::load(model_path("tiny_transformer"));
  const Array ids = fixture("tiny_transformer", "input", "input_ids");
  auto out = onnx::run_named(m, {{"input_ids", onnx::Value::tensor(ids)}}, {.device = gpu()});
  const Array hidden_ort = fixture("tiny_transformer", "output", "last_hidden_state");
  const TransformerBounds bounds = transformer_bounds(m, ids, hidden_ort);
  for (const std::string name : {"logits", "last_hidden_state"}) {
    SCOPED_TRACE(name);
    const Array& got = out.at(name).array();
    EXPECT_EQ(got.device(), gpu());
    EXPECT_TRUE(within_bound(on_cpu(got), fixture("tiny_transformer", "output", name),
                             name == "logits" ? bounds.logits : bounds.last_hidden_state));
  }
}

TEST(OnnxOnGpu, InitializersAreUploadedOnce) {
  SMELT_REQUIRE_GPU();
  onnx::Model m = onnx::load(model_path("tiny_transformer"));
  const auto& [name, host] = m.graph->initializers.front();
  onnx::Value first = onnx::detail::initializer_on(*m.graph, name, host, gpu());
  onnx::Value again = onnx::detail::initializer_on(*m.graph, name, host, gpu());
  EXPECT_EQ(first.array().device(), gpu());
  EXPECT_EQ(first.array().node_ptr(), again.array().node_ptr());
  EXPECT_TRUE(bit_equal(on_cpu(first.array()), host.array()));
  // Two runs: the second makes no new copies (the cache holds one entry per initializer).
  const Array ids = fixture("tiny_transformer", "input", "input_ids");
  auto a = onnx::run(m, {onnx::Value::tensor(ids)}, {.device = gpu()});
  auto b = onnx::run(m, {onnx::Value::tensor(ids)}, {.device = gpu()});
  EXPECT_TRUE(bit_equal(on_cpu(a[0].array()), on_cpu(b[0].array())));
  onnx::Value after = onnx::detail::initializer_on(*m.graph, name, host, gpu());
  EXPECT_EQ(first.array().node_ptr(), after.array().node_ptr());
}

// The CNN (Conv, pooling, BatchNormalization folded at load) on the GPU against the CPU run,
// within a bound of 64 float32 ulps of the output's magnitude (convolution sums of at most a few
// hundred products, accumulated in another order by cuDNN/cuBLAS).
TEST(OnnxOnGpu, CnnMatchesTheCpuRun) {
  SMELT_REQUIRE_GPU();
  onnx::Model m = onnx::load(model_path("tiny_cnn"));
  const auto& in = m.graph->inputs.front();
  Shape shape;
  for (const auto& d : *in.type.shape) shape.push_back(d.value > 0 ? d.value : 2);
  const Array x = random::uniform(random::key(5), shape, -1.0, 1.0);
  auto cpu = onnx::run(m, {onnx::Value::tensor(x)}, {.device = Device::cpu()});
  auto gpu_out = onnx::run(m, {onnx::Value::tensor(x)}, {.device = gpu()});
  ASSERT_EQ(cpu.size(), gpu_out.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(gpu_out[i].array().device(), gpu());
    auto want = cpu[i].array().to_vector<float>();
    auto got = on_cpu(gpu_out[i].array()).to_vector<float>();
    ASSERT_EQ(want.size(), got.size());
    float scale = 0;
    for (float v : want) scale = std::max(scale, std::fabs(v));
    for (size_t k = 0; k < want.size(); ++k)
      ASSERT_NEAR(got[k], want[k], 64 * 1.1920929e-7f * scale + 1e-30f) << "output " << i << " element " << k;
  }
}

/// Every output of `a` and `b` on `device`, bit for bit equal (compared on the host).
void expect_same_outputs(const std::vector<onnx::Value>& a, const std::vector<onnx::Value>& b, Device device) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].array().device(), device) << "output " << i;
    EXPECT_EQ(b[i].array().device(), device) << "output " << i;
    EXPECT_TRUE(bit_equal(on_cpu(a[i].array()), on_cpu(b[i].array()))) << "output " << i;
  }
}

// A model compiled for the GPU takes host inputs (moved there) and GPU inputs alike, returns its
// outputs on the GPU equal to the GPU eager run bit for bit, and shares the initializers that
// onnx::run uploaded (one copy per model and device).
TEST(OnnxOnGpu, CompiledModelRunsOnTheGpu) {
  SMELT_REQUIRE_GPU();
  onnx::Model m = onnx::load(model_path("tiny_transformer"));
  const Array ids = fixture("tiny_transformer", "input", "input_ids");
  auto eager = onnx::run(m, {onnx::Value::tensor(ids)}, {.device = gpu()});
  const auto& [name, host] = m.graph->initializers.front();
  const onnx::Value uploaded = onnx::detail::initializer_on(*m.graph, name, host, gpu());
  onnx::CompileModelOptions o;
  o.device = gpu();
  auto cm = onnx::compile(m, {}, o);
  EXPECT_EQ(cm.stats().device, gpu());
  EXPECT_EQ(onnx::detail::initializer_on(*m.graph, name, host, gpu()).array().node_ptr(), uploaded.array().node_ptr());
  auto from_host = cm({onnx::Value::tensor(ids)});
  auto from_gpu = cm({onnx::Value::tensor(on_gpu(ids))}, {.device = gpu()});
  expect_same_outputs(eager, from_host, gpu());
  expect_same_outputs(eager, from_gpu, gpu());
}

// CompileModelOptions::device unset: the default device when compile is called (here a scope's GPU).
TEST(OnnxOnGpu, CompiledModelFollowsTheDefaultDevice) {
  SMELT_REQUIRE_GPU();
  onnx::Model m = onnx::load(model_path("tiny_cnn"));
  DefaultDeviceScope scope(gpu());
  auto cm = onnx::compile(m);
  EXPECT_EQ(cm.stats().device, gpu());
}

/// x float[N] and t int64[2] -> Reshape(NonZero(x > 0), t + 0) twice (t computed on the device and
/// read by two Reshapes), and If(ReduceSum(x) > 0, Relu(x), Neg(x)).
onnx::Model breaks_model() {
  GraphBuilder then_b("then"), else_b("else");
  then_b.output(then_b.node("Relu", {"x"}));
  else_b.output(else_b.node("Neg", {"x"}));
  GraphBuilder b;
  auto x = b.input("x", onnx::ElemType::Float, 1);
  auto target = b.input("target", onnx::ElemType::Int64, 1);
  auto t = b.node("Add", {target, b.int64s("zeros", {0, 0})});
  auto nz = b.node("NonZero", {b.node("Greater", {x, b.float_scalar("zero", 0.0f)})});
  b.output(b.node("Reshape", {nz, t}));
  b.output(b.node("Reshape", {b.node("Cast", {nz}, {attr_int("to", 1)}), t}));
  auto sum = b.node("ReduceSum", {x}, {attr_int("keepdims", 0)});
  auto cond = b.node("Greater", {sum, b.float_scalar("zero_sum", 0.0f)});
  b.output(b.node("If", {cond}, {attr_graph("then_branch", then_b.graph()), attr_graph("else_branch", else_b.graph())}));
  return make_model(b.graph());
}

// Graph breaks on the GPU read back only the host values they need, once each: NonZero's count
// (8 bytes), the If condition (1 byte) and the shape t (16 bytes) that two Reshapes read (the host
// copy is kept with the value). x and NonZero's indices stay on the GPU.
TEST(OnnxOnGpu, BreaksReadBackOnlyTheirHostValues) {
  SMELT_REQUIRE_GPU();
  const onnx::Model m = breaks_model();
  const int64_t n = 64;
  const Array x = on_gpu(random::uniform(random::key(2), {n}, -1.0, 1.0));
  const onnx::Value target = onnx::Value::tensor(Array(std::vector<int64_t>{-1, 1}, {2}));
  const std::vector<onnx::Value> in{onnx::Value::tensor(x), target};
  auto cpu = onnx::run(m, {onnx::Value::tensor(on_cpu(x)), target});
  onnx::RunStats first, second;
  auto a = onnx::run(m, in, {.device = gpu(), .stats = &first});
  auto b = onnx::run(m, in, {.device = gpu(), .stats = &second});
  for (const onnx::RunStats* s : {&first, &second}) {
    EXPECT_EQ(s->device_to_host_copies, 3u);
    EXPECT_EQ(s->device_to_host_bytes, 8u + 1u + 16u);
    EXPECT_TRUE(s->host_computed.empty());
  }
  expect_same_outputs(a, b, gpu());
  for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(bit_equal(on_cpu(a[i].array()), cpu[i].array())) << "output " << i;
  // Compiled (default eager_below: these segments are small and run eagerly after the first call's
  // trace): the same outputs, and no more reads than the eager run plus NonZero's indices once
  // (a host value the first trace may make static in a segment's key).
  onnx::CompileModelOptions o;
  o.device = gpu();
  auto cm = onnx::compile(m, {}, o);
  cm(in);
  onnx::RunStats compiled;
  auto c = cm(in, {.stats = &compiled});
  expect_same_outputs(a, c, gpu());
  EXPECT_LE(compiled.device_to_host_copies, 4u);
  EXPECT_LE(compiled.device_to_host_bytes, 8u + 1u + 16u + 8u * static_cast<uint64_t>(n));
  EXPECT_GE(cm.stats().device_to_host_copies, compiled.device_to_host_copies);
}

// NonMaxSuppression has no GPU kernel: on GPU inputs it computes on the host, says so in
// RunStats::host_computed, and returns its indices on the GPU, equal to the CPU run's.
TEST(OnnxOnGpu, HostComputedNmsIsReported) {
  SMELT_REQUIRE_GPU();
  const onnx::Model m = nms_model();
  const Array bx(std::vector<float>{0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 5, 5, 6, 6}, {3, 4});
  const Array sc(std::vector<float>{0.9f, 0.8f, 0.7f}, {3});
  onnx::RunStats stats;
  auto out = onnx::run(m, {onnx::Value::tensor(bx), onnx::Value::tensor(sc)}, {.device = gpu(), .stats = &stats});
  EXPECT_EQ(out[0].array().device(), gpu());
  EXPECT_EQ(on_cpu(out[0].array()).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0, 0, 2}));
  ASSERT_EQ(stats.host_computed.size(), 1u);
  EXPECT_EQ(stats.host_computed[0],
            "NonMaxSuppression 'NonMaxSuppression_0': no GPU kernel; boxes and scores read to the host (60 bytes)");
}

// W11 (bench/SUITE.md) on the GPU, eager and compiled, on three box counts: outputs on the GPU,
// compiled equal to eager bit for bit.
TEST(OnnxOnGpu, W11CompiledEqualsEager) {
  SMELT_REQUIRE_GPU();
  const onnx::Model& m = bench::w11_model();
  onnx::CompileModelOptions o;
  o.device = gpu();
  o.eager_below = 0;  // every segment compiled
  auto cm = onnx::compile(m, {}, o);
  for (int64_t count : {2000, 5003, 20000}) {
    SCOPED_TRACE(count);
    std::vector<onnx::Value> in;
    {
      DefaultDeviceScope scope(Device::cpu());
      in = bench::w11_inputs(count, static_cast<uint64_t>(count));
    }
    auto eager = onnx::run(m, in, {.device = gpu()});
    auto compiled = cm(in);
    expect_same_outputs(eager, compiled, gpu());
  }
}

}  // namespace
}  // namespace smelt::test

#else
TEST(OnnxOnGpu, NeedsTheOnnxLayer) { GTEST_SKIP() << "built without SMELT_ONNX"; }
#endif
