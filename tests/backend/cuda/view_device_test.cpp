// The graph view of a model compiled for the GPU: the segments and fused kernels drawn are the GPU's.
#include <gtest/gtest.h>

#include "backend/cuda/cuda_test_utils.h"
#include "smelt/smelt.h"

#if SMELT_ONNX
#include <filesystem>

#include "smelt/onnx.h"
#include "smelt/view.h"
#include "src/view/graph_data.h"

namespace smelt::test {
namespace {

namespace fs = std::filesystem;

std::string model_path(const std::string& name) {
  return (fs::path(__FILE__).parent_path().parent_path().parent_path().parent_path() / "models" / (name + ".onnx"))
      .string();
}

TEST(ViewOnGpu, DrawsTheOverlayOfTheModelCompiledForTheGpu) {
  SMELT_REQUIRE_GPU();
  onnx::Model m = onnx::load(model_path("tiny_cnn"));
  const Array x = random_array({2, 3, 32, 32}, float32, -1.0, 1.0, 11);
  onnx::CompileModelOptions on_gpu_options;
  on_gpu_options.device = gpu();
  // The compiled model takes its inputs where they are: on its device, as `smelt view` gives them.
  const onnx::Overlay gpu_ov = onnx::overlay(m, {onnx::Value::tensor(on_gpu(x))}, on_gpu_options);
  const onnx::Overlay cpu_ov = onnx::overlay(m, {onnx::Value::tensor(x)});
  ASSERT_FALSE(gpu_ov.segments.empty());
  // Where the graph breaks does not depend on the device.
  ASSERT_EQ(gpu_ov.segments.size(), cpu_ov.segments.size());
  for (size_t k = 0; k < gpu_ov.segments.size(); ++k) {
    EXPECT_EQ(gpu_ov.segments[k].kind, cpu_ov.segments[k].kind) << k;
    EXPECT_EQ(gpu_ov.segments[k].start, cpu_ov.segments[k].start) << k;
    EXPECT_EQ(gpu_ov.segments[k].stop, cpu_ov.segments[k].stop) << k;
  }
  const view::detail::GraphData d = view::detail::graph_data(m, &gpu_ov);
  size_t kernels = 0;
  for (const auto& s : gpu_ov.segments) kernels += s.fused.size();
  EXPECT_EQ(d.fused.size(), kernels);
  for (const auto& v : d.vertices) {
    if (v.kind == view::detail::VertexKind::Node) {
      EXPECT_GE(v.segment, 0) << m.graph->nodes[v.ref].label();
    }
  }
  const std::string html = view::graph_html(m, &gpu_ov, view::GraphViewOptions{"", gpu().str()});
  EXPECT_NE(html.find("compiled for <b>" + gpu().str() + "</b>"), std::string::npos);
  size_t k = 0;
  for (const auto& s : gpu_ov.segments)
    for (const auto& f : s.fused) EXPECT_EQ(d.fused[k++].text, f.str());
}

}  // namespace
}  // namespace smelt::test
#endif  // SMELT_ONNX
