// Gradients through onnx::run with the parameters on the GPU: equal to the CPU's within float64
// rounding, and compiled equal to uncompiled bit for bit.
#include "smelt/compile.h"
#include "smelt/transforms.h"
#include "tests/backend/cuda/cuda_test_utils.h"

#ifdef SMELT_ONNX
#include "onnx/model_builder.h"
#include "onnx/training_models.h"

namespace smelt {
namespace {

using namespace smelt::test;
using Params = std::map<std::string, Array>;


struct Fixture {
  onnx::Model model = tiny_training_model();
  Array ids = Array(std::vector<int64_t>{1, 4, 9, 4, 0, 7}, Shape{2, 3});
  Array w = random_array({2, 3, 5}, float64, -1, 1, 47);
  Array loss(const Params& p, const Array& weight) const {
    auto out = onnx::run(model, {onnx::Value::tensor(ids)}, {.initializers = p});
    return sum(out[0].array() * weight);
  }
};

Params to(const Params& p, Device d) {
  Params out;
  for (const auto& [n, a] : p) out[n] = to_device(a, d);
  return out;
}

TEST(CudaOnnxGrad, ModelGradientsMatchTheCpu) {
  SMELT_REQUIRE_GPU();
  Fixture f;
  Params params = onnx::parameters(f.model);
  Array w_gpu = on_gpu(f.w);
  Params g_cpu = grad([&](const Params& p) { return f.loss(p, f.w); })(params);
  Params g_gpu = grad([&](const Params& p) { return f.loss(p, w_gpu); })(to(params, gpu()));
  // float64 throughout: some 40 ops forward and backward, each within 2 ulps of the CPU's
  // (libdevice's erf, exp, sqrt), and the layer norm's centering cancels at most a factor of
  // ~100 here: 40 · 2 · 2.2e-16 · 100 < 1e-11, so 1e-10 relative (and absolute near zero) holds.
  for (const auto& [name, g] : g_cpu) {
    EXPECT_EQ(g_gpu.at(name).device(), gpu()) << name;
    EXPECT_TRUE(all_close(on_cpu(g_gpu.at(name)), as_doubles(g), 1e-10, 1e-10)) << name;
  }
}

TEST(CudaOnnxGrad, CompiledModelGradientEqualsUncompiledBitForBit) {
  SMELT_REQUIRE_GPU();
  Fixture f;
  Array w_gpu = on_gpu(f.w);
  auto g = grad([&](const Params& p) { return f.loss(p, w_gpu); });
  Params params = to(onnx::parameters(f.model), gpu());
  Params eager = g(params), compiled = compile(g)(params);
  for (const auto& [name, a] : eager) EXPECT_TRUE(bit_equal(on_cpu(compiled.at(name)), on_cpu(a))) << name;
}

}  // namespace
}  // namespace smelt
#endif  // SMELT_ONNX
