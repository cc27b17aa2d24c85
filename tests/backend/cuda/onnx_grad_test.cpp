// Gradients through onnx::run with the parameters on the GPU: equal to the CPU's within float64
// rounding, and compiled equal to uncompiled bit for bit.
#include "smelt/compile.h"
#include "smelt/transforms.h"
#include "tests/backend/cuda/cuda_test_utils.h"

#ifdef SMELT_ONNX
#include "onnx/model_builder.h"

namespace smelt {
namespace {

using namespace smelt::test;
using Params = std::map<std::string, Array>;

/// Gather -> LayerNormalization -> MatMul + Add -> Gelu -> MatMul + Add -> Relu -> Softmax, float64.
onnx::Model tiny_model() {
  GraphBuilder b;
  b.input("ids", onnx::ElemType::Int64, 2);
  b.constant("emb", random_array({10, 4}, float64, -1, 1, 40));
  b.constant("gamma", random_array({4}, float64, 0.5, 1.5, 41));
  b.constant("beta", random_array({4}, float64, -0.5, 0.5, 42));
  b.constant("w1", random_array({4, 6}, float64, -1, 1, 43));
  b.constant("b1", random_array({6}, float64, -0.5, 0.5, 44));
  b.constant("w2", random_array({6, 5}, float64, -1, 1, 45));
  b.constant("b2", random_array({5}, float64, -0.5, 0.5, 46));
  std::string x = b.node("Gather", {"emb", "ids"});
  std::string h = b.node("LayerNormalization", {x, "gamma", "beta"}, {attr_int("axis", -1)});
  std::string a1 = b.node("Gelu", {b.node("Add", {b.node("MatMul", {h, "w1"}), "b1"})});
  std::string a2 = b.node("Relu", {b.node("Add", {b.node("MatMul", {a1, "w2"}), "b2"})});
  b.output(b.node("Softmax", {a2}, {attr_int("axis", -1)}));
  return make_model(b.graph(), 20);
}

struct Fixture {
  onnx::Model model = tiny_model();
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
