// The bundled models (models/*.onnx) run through smelt::onnx and match ONNX Runtime's outputs.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "smelt/errors.h"
#include "smelt/io.h"
#include "smelt/memory.h"
#include "smelt/onnx.h"
#include "smelt/smelt.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

namespace fs = std::filesystem;

// The fixtures were written by scripts/make_models.py from onnxruntime's CPU provider; the
// tolerances are the ones the issue asks for (float32 sums in a different order).
constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-5;

/// The repository root: this file lives in tests/onnx/ (CMake compiles it by absolute path).
fs::path repo_root() { return fs::path(__FILE__).parent_path().parent_path().parent_path(); }
std::string model_path(const std::string& name) { return (repo_root() / "models" / (name + ".onnx")).string(); }
Array fixture(const std::string& model, const std::string& kind, const std::string& name) {
  return load((repo_root() / "tests" / "onnx" / "fixtures" / (model + "." + kind + "." + name + ".npy")).string());
}

/// Runs `model` on its fixture inputs and compares every output with ORT's.
void check_against_ort(const std::string& name, const std::vector<std::string>& input_names,
                       const std::vector<std::string>& output_names) {
  onnx::Model m = onnx::load(model_path(name));
  std::map<std::string, onnx::Value> inputs;
  for (const auto& in : input_names) inputs[in] = onnx::Value::tensor(fixture(name, "input", in));
  auto outputs = onnx::run_named(m, inputs);
  ASSERT_EQ(outputs.size(), output_names.size());
  for (const auto& out : output_names) {
    SCOPED_TRACE(name + " output " + out);
    ASSERT_TRUE(outputs.count(out));
    Array expected = fixture(name, "output", out);
    const Array& got = outputs.at(out).array();
    EXPECT_EQ(got.dtype(), expected.dtype());
    ASSERT_EQ(got.shape(), expected.shape());
    EXPECT_TRUE(all_close(got, as_doubles(expected), kRtol, kAtol));
  }
}

TEST(BundledModels, TransformerMatchesOnnxRuntime) {
  check_against_ort("tiny_transformer", {"input_ids"}, {"logits", "last_hidden_state"});
}

TEST(BundledModels, CnnMatchesOnnxRuntime) { check_against_ort("tiny_cnn", {"input"}, {"probs"}); }

TEST(BundledModels, CnnProbabilitiesSumToOne) {
  onnx::Model m = onnx::load(model_path("tiny_cnn"));
  auto out = onnx::run(m, {onnx::Value::tensor(fixture("tiny_cnn", "input", "input"))});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(all_close(sum(out[0].array(), {-1}), {1.0, 1.0}, 1e-5, 1e-6));
}

// The batch dimension is symbolic and rows do not interact: one row run alone gives that row of
// the batched result, and a shorter sequence slices the position table correctly.
TEST(BundledModels, TransformerSymbolicDims) {
  onnx::Model m = onnx::load(model_path("tiny_transformer"));
  Array ids = fixture("tiny_transformer", "input", "input_ids");  // [2, 16]
  Array row = copy(slice(ids, {1, 0}, {2, 16}));
  auto out = onnx::run_named(m, {{"input_ids", onnx::Value::tensor(row)}});
  Array expected = fixture("tiny_transformer", "output", "logits");
  Array expected_row = slice(expected, {1, 0, 0}, {2, 16, 1000});
  ASSERT_EQ(out.at("logits").array().shape(), (Shape{1, 16, 1000}));
  EXPECT_TRUE(all_close(out.at("logits").array(), as_doubles(expected_row), kRtol, kAtol));

  Array short_ids = copy(slice(ids, {0, 0}, {2, 3}));
  auto short_out = onnx::run_named(m, {{"input_ids", onnx::Value::tensor(short_ids)}});
  EXPECT_EQ(short_out.at("last_hidden_state").array().shape(), (Shape{2, 3, 128}));
}

// The same bits with one thread and with several.
TEST(BundledModels, ThreadCountDoesNotChangeResults) {
  const int saved = cpu_threads();
  for (const std::string name : {"tiny_transformer", "tiny_cnn"}) {
    SCOPED_TRACE(name);
    onnx::Model m = onnx::load(model_path(name));
    std::string in = name == "tiny_cnn" ? "input" : "input_ids";
    onnx::Value x = onnx::Value::tensor(fixture(name, "input", in));
    set_cpu_threads(1);
    auto one = onnx::run(m, {x});
    set_cpu_threads(4);
    auto four = onnx::run(m, {x});
    ASSERT_EQ(one.size(), four.size());
    for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(bit_equal(one[i].array(), four[i].array()));
  }
  set_cpu_threads(saved);
}

TEST(BundledModels, WrongInputsNameTheInput) {
  onnx::Model m = onnx::load(model_path("tiny_transformer"));
  Array ids32 = astype(fixture("tiny_transformer", "input", "input_ids"), int32);
  EXPECT_THROW_MSG(onnx::run(m, {onnx::Value::tensor(ids32)}), OnnxError,
                   "input 'input_ids' expects tensor(int64)[batch,seq], got tensor(int32)[2,16]");
  Array flat = reshape(fixture("tiny_transformer", "input", "input_ids"), {32});
  EXPECT_THROW_MSG(onnx::run(m, {onnx::Value::tensor(flat)}), OnnxError,
                   "input 'input_ids' expects tensor(int64)[batch,seq], got tensor(int64)[32]");
  EXPECT_THROW_MSG(onnx::run_named(m, {{"ids", onnx::Value::tensor(flat)}}), OnnxError,
                   "unknown input 'ids' (the model's inputs are: input_ids)");
  EXPECT_THROW_MSG(onnx::run(m, {}), OnnxError, "missing input 'input_ids'");
}

}  // namespace
}  // namespace smelt::test
