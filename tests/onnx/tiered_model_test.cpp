// Tiered execution of compiled ONNX models: with a cold kernel cache the first call runs the
// segment unfused while its kernels build, gives the eager bits (NaN and ±inf included), and the
// calls after the switch run fused with the same bits; the stats and events say which tier ran.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "env_test_utils.h"
#include "smelt/compile.h"
#include "smelt/onnx.h"
#include "smelt/smelt.h"
#include "smelt/telemetry.h"
#include "src/codegen/kernel_builder.h"
#include "test_utils.h"

namespace smelt {
namespace {

namespace fs = std::filesystem;
using test::ScopedEnv;

fs::path repo_root() { return fs::path(__FILE__).parent_path().parent_path().parent_path(); }
std::string model_path(const std::string& name) { return (repo_root() / "models" / (name + ".onnx")).string(); }

/// A fresh kernel cache folder and tiering left to the options, for the scope.
struct ColdCache : test::ColdKernelCache {
  ColdCache() : ColdKernelCache("smelt-tiered-onnx") {}
};

struct Tiers {
  std::vector<std::string> runs;  // the tier of each segment.run event
  telemetry::Subscription sub{"segment.run", [this](const telemetry::Event& e) { runs.push_back(e.field("tier")); }};
};

void expect_bit_equal(const std::vector<onnx::Value>& got, const std::vector<onnx::Value>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(test::bit_equal(got[i].array(), want[i].array())) << what << ", output " << i;
}

/// Compiles `model` tiered with a cold cache and checks both tiers against the eager run.
void check_tiers(const onnx::Model& model, const std::vector<onnx::Value>& in) {
  const std::vector<onnx::Value> eager = onnx::run(model, in);
  Tiers tiers;
  onnx::CompiledModel cm = onnx::compile(model);
  onnx::CompiledModelStats s;
  {
    codegen::BackgroundBuildsPaused hold;  // however fast a build, the first call runs unfused
    expect_bit_equal(cm(in), eager, "interpreter tier");
    s = cm.stats();
  }
  ASSERT_EQ(s.segments.size(), 1u);
  EXPECT_EQ(s.interpreter_runs, 1u);
  EXPECT_EQ(s.fused_runs, 0u);
  EXPECT_EQ(s.segments[0].interpreter_runs, 1u);

  wait_for_kernel_builds();
  expect_bit_equal(cm(in), eager, "fused tier");
  s = cm.stats();
  EXPECT_EQ(s.interpreter_runs, 1u);
  EXPECT_EQ(s.fused_runs, 1u);
  EXPECT_EQ(s.segments[0].compiled_runs, 2u);
  EXPECT_EQ(tiers.runs, (std::vector<std::string>{"interpreter", "fused"}));
  // The overlay names the kernels of the tier that ran last.
  const onnx::Overlay ov = cm.overlay();
  ASSERT_EQ(ov.segments.size(), 1u);
  EXPECT_FALSE(ov.segments[0].fused.empty());
}

TEST(TieredModel, TransformerFirstCallUnfusedThenFusedBitForBit) {
  ColdCache cold;
  const onnx::Model m = onnx::load(model_path("tiny_transformer"));
  std::vector<int64_t> ids(2 * 16);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 37 + 11) % 1000);
  check_tiers(m, {onnx::Value::tensor(Array(ids.data(), {2, 16}, int64))});
}

TEST(TieredModel, CnnWithNanAndInfinityFirstCallUnfusedThenFusedBitForBit) {
  ColdCache cold;
  const onnx::Model m = onnx::load(model_path("tiny_cnn"));
  std::vector<float> x = test::random_array({2, 3, 32, 32}, float32, -1.0, 1.0, 4).to_vector<float>();
  // Image 0 gets one NaN, image 1 both infinities (whose inf - inf NaNs all have the default
  // NaN's bits): NaNs of different bits never meet in an add, where IEEE 754 leaves the result
  // to the implementation (tests/compile/bitexact_test.cpp, align_nans).
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[3072 + 700] = std::numeric_limits<float>::infinity();
  x[3072 + 2000] = -std::numeric_limits<float>::infinity();
  x[3072 + 4] = -0.0f;
  check_tiers(m, {onnx::Value::tensor(Array(x.data(), {2, 3, 32, 32}, float32))});
}

TEST(TieredModel, OffBuildsTheKernelsBeforeTheFirstCall) {
  ColdCache cold;
  const onnx::Model m = onnx::load(model_path("tiny_cnn"));
  const Array x = test::random_array({1, 3, 32, 32}, float32, -1.0, 1.0, 5);
  onnx::CompileModelOptions o;
  o.tiered = false;
  onnx::CompiledModel cm = onnx::compile(m, {}, o);
  expect_bit_equal(cm({onnx::Value::tensor(x)}), onnx::run(m, {onnx::Value::tensor(x)}), "synchronous");
  EXPECT_EQ(cm.stats().interpreter_runs, 0u);
  EXPECT_EQ(cm.stats().fused_runs, 1u);
}

}  // namespace
}  // namespace smelt
