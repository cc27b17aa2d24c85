// The bundled models (models/*.onnx) run through smelt::onnx and match ONNX Runtime's outputs.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "smelt/compile.h"
#include "smelt/errors.h"
#include "smelt/io.h"
#include "smelt/memory.h"
#include "smelt/onnx.h"
#include "smelt/smelt.h"
#include "onnx/ort_bounds.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

namespace fs = std::filesystem;

/// The repository root: this file lives in tests/onnx/ (CMake compiles it by absolute path).
fs::path repo_root() { return fs::path(__FILE__).parent_path().parent_path().parent_path(); }
std::string model_path(const std::string& name) { return (repo_root() / "models" / (name + ".onnx")).string(); }
// The fixtures were written by scripts/make_models.py from onnxruntime's CPU provider. The
// tolerances are the error bounds of ort_bounds.h, computed from each run's operands.
Array fixture(const std::string& model, const std::string& kind, const std::string& name) {
  return load((repo_root() / "tests" / "onnx" / "fixtures" / (model + "." + kind + "." + name + ".npy")).string());
}

TEST(BundledModels, TransformerMatchesOnnxRuntime) {
  onnx::Model m = onnx::load(model_path("tiny_transformer"));
  const Array ids = fixture("tiny_transformer", "input", "input_ids");
  auto out = onnx::run_named(m, {{"input_ids", onnx::Value::tensor(ids)}});
  ASSERT_EQ(out.size(), 2u);
  const Array hidden_ort = fixture("tiny_transformer", "output", "last_hidden_state");
  const TransformerBounds bounds = transformer_bounds(m, ids, hidden_ort);
  for (const std::string name : {"logits", "last_hidden_state"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(out.count(name));
    const Array expected = fixture("tiny_transformer", "output", name);
    const Array& got = out.at(name).array();
    EXPECT_EQ(got.dtype(), expected.dtype());
    ASSERT_EQ(got.shape(), expected.shape());
    EXPECT_TRUE(within_bound(got, expected, name == "logits" ? bounds.logits : bounds.last_hidden_state));
  }
}

// The bounds are tight enough to catch a real difference: ORT's outputs moved by 1e-3 of their
// value (a wrong LayerNorm epsilon or a coarse erf would do more) fall outside them.
TEST(BundledModels, BoundsRejectARelativeErrorOf1e3) {
  onnx::Model m = onnx::load(model_path("tiny_transformer"));
  const Array ids = fixture("tiny_transformer", "input", "input_ids");
  auto out = onnx::run_named(m, {{"input_ids", onnx::Value::tensor(ids)}});
  const Array hidden_ort = fixture("tiny_transformer", "output", "last_hidden_state");
  const TransformerBounds bounds = transformer_bounds(m, ids, hidden_ort);
  const Array nudge(1.001f);
  EXPECT_FALSE(
      within_bound(out.at("last_hidden_state").array(), multiply(hidden_ort, nudge), bounds.last_hidden_state));
  EXPECT_FALSE(within_bound(out.at("logits").array(), multiply(fixture("tiny_transformer", "output", "logits"), nudge),
                            bounds.logits));
  onnx::Model cnn = onnx::load(model_path("tiny_cnn"));
  const Array input = fixture("tiny_cnn", "input", "input");
  const Array probs = onnx::run(cnn, {onnx::Value::tensor(input)})[0].array();
  const Array probs_ort = fixture("tiny_cnn", "output", "probs");
  EXPECT_FALSE(within_bound(probs, multiply(probs_ort, nudge), cnn_probs_bound(cnn, input)));
}

TEST(BundledModels, CnnMatchesOnnxRuntime) {
  onnx::Model m = onnx::load(model_path("tiny_cnn"));
  const Array input = fixture("tiny_cnn", "input", "input");
  auto out = onnx::run_named(m, {{"input", onnx::Value::tensor(input)}});
  ASSERT_EQ(out.size(), 1u);
  const Array expected = fixture("tiny_cnn", "output", "probs");
  const Array& got = out.at("probs").array();
  EXPECT_EQ(got.dtype(), expected.dtype());
  ASSERT_EQ(got.shape(), expected.shape());
  EXPECT_TRUE(within_bound(got, expected, cnn_probs_bound(m, input)));
}

// Compiled, the CNN pools each convolution's output before its bias add and ReLU (the
// pool_first pass: ONNX Relu is smelt's relu, which never gives -0, so the pooling's choice among
// tied values cannot change bits), and each pooling then applies them itself (pool_epilogue), at
// batch 32 as at batch 1; the same bits as eager.
TEST(BundledModels, CnnCompiledPoolsBeforeItsReLUs) {
  onnx::Model m = onnx::load(model_path("tiny_cnn"));
  std::string tape, epilogues;
  CompileOptions o;
  o.dump = [&](const std::string& pass, const std::string& t) {
    if (pass == "pool_first") tape = t;  // before the fuse pass folds the ReLUs into kernels
    if (pass == "pool_epilogue") epilogues = t;
  };
  auto traced = compile(
      [&](const std::vector<Array>& in) { return std::vector<Array>{onnx::run(m, {onnx::Value::tensor(in[0])})[0].array()}; },
      o);
  for (int64_t n : {1, 32}) {
    const Array x = random_array({n, 3, 32, 32}, float32, -1, 1, 51);
    const Array got = traced({x})[0];
    EXPECT_TRUE(bit_equal(got, onnx::run(m, {onnx::Value::tensor(x)})[0].array())) << n;
    size_t pools = 0;
    for (size_t at = tape.find("= Pool(max"); at != std::string::npos; at = tape.find("= Pool(max", at + 1)) {
      ++pools;
      const size_t relu = tape.find("= Unary(Relu)", at);
      const size_t next_conv = tape.find("= Conv(", at);
      ASSERT_NE(relu, std::string::npos) << tape;
      EXPECT_TRUE(next_conv == std::string::npos || relu < next_conv) << "a pooling not followed by its ReLU:\n" << tape;
    }
    EXPECT_EQ(pools, 3u) << tape;
    EXPECT_EQ(tape.find("Binary(Maximum)"), std::string::npos) << tape;
    size_t with_epilogue = 0;
    for (size_t at = epilogues.find("then + channel, then relu"); at != std::string::npos;
         at = epilogues.find("then + channel, then relu", at + 1))
      ++with_epilogue;
    EXPECT_EQ(with_epilogue, 3u) << epilogues;
    EXPECT_EQ(epilogues.find("Unary(Relu)"), std::string::npos) << epilogues;
  }
}

TEST(BundledModels, CnnProbabilitiesSumToOne) {
  onnx::Model m = onnx::load(model_path("tiny_cnn"));
  auto out = onnx::run(m, {onnx::Value::tensor(fixture("tiny_cnn", "input", "input"))});
  ASSERT_EQ(out.size(), 1u);
  // Softmax's sum of 10 exponentials and its division (or reciprocal and product) leave each
  // p_i within gamma_12 of e_i / sum e relative to p_i; the float32 sum of the 10 probabilities
  // adds gamma_9 of their total: |sum p - 1| <= gamma_21, rounded up to gamma_24.
  EXPECT_TRUE(all_close(sum(out[0].array(), {-1}), {1.0, 1.0}, 0.0, gamma32(24)));
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
  Array hidden_row = slice(fixture("tiny_transformer", "output", "last_hidden_state"), {1, 0, 0}, {2, 16, 128});
  ASSERT_EQ(out.at("logits").array().shape(), (Shape{1, 16, 1000}));
  EXPECT_TRUE(within_bound(out.at("logits").array(), expected_row, transformer_bounds(m, row, hidden_row).logits));

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
