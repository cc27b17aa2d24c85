// ONNX models on the GPU: onnx::run with RunOptions::device = cuda, against ONNX Runtime's outputs
// within the stated bounds, and the initializers uploaded once per model and device.
#include <gtest/gtest.h>

#include "backend/cuda/cuda_test_utils.h"
#include "smelt/smelt.h"

#if SMELT_ONNX
#include <filesystem>

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

}  // namespace
}  // namespace smelt::test

#else
TEST(OnnxOnGpu, NeedsTheOnnxLayer) { GTEST_SKIP() << "built without SMELT_ONNX"; }
#endif
