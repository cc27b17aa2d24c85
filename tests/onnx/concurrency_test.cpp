// One loaded model called from many threads: compiled (segments, breaks, caches) and eager, bit for bit.
#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "smelt/io.h"
#include "smelt/onnx.h"
#include "tests/onnx/model_builder.h"
#include "tests/test_utils.h"
#include "thread_test_utils.h"

namespace smelt::test {
namespace {

namespace fs = std::filesystem;
using onnx::ElemType;
using onnx::Value;

fs::path repo_root() { return fs::path(__FILE__).parent_path().parent_path().parent_path(); }

onnx::Model tiny_transformer() { return onnx::load((repo_root() / "models" / "tiny_transformer.onnx").string()); }

/// Inputs of the tiny transformer: token ids in [0, 1000) of shape [batch, seq].
Value token_ids(int64_t batch, int64_t seq, uint32_t seed) {
  return Value::tensor(astype(random_array({batch, seq}, float32, 0.0, 999.0, seed), int64));
}

bool same_bits(const std::vector<Value>& got, const std::vector<Value>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (!bit_equal(got[i].array(), want[i].array())) return false;
  return true;
}

// A model with a break (NonZero) between two compiled segments, and an initializer that is still
// an unevaluated graph when the threads first read it.
onnx::Model break_model() {
  GraphBuilder b;
  auto x = b.input("x", ElemType::Float, 1);
  Array lazy_weight = exp(random_array({1}, float32, -1.0, 1.0, 77)) + Array(0.5f);
  auto w = b.constant("w", lazy_weight);
  auto y = b.node("Mul", {x, w});
  for (int i = 0; i < 4; ++i) y = b.node("Tanh", {b.node("Add", {y, x})});
  auto nz = b.node("NonZero", {b.node("Greater", {y, b.float_scalar("zero", 0.0f)})});
  auto idx = b.node("Squeeze", {nz, b.int64s("ax0", {0})});
  auto picked = b.node("Gather", {y, idx}, {attr_int("axis", 0)});
  for (int i = 0; i < 4; ++i) picked = b.node("Sin", {b.node("Mul", {picked, w})});
  b.output(picked);
  b.output(b.node("ReduceSum", {picked, b.int64s("axes", {0})}, {attr_int("keepdims", 0)}));
  return make_model(b.graph());
}

// One compiled tiny transformer called from 8 threads, on inputs of three shapes (new signatures
// are traced while other threads hit): every output equals the single-threaded call's bits.
TEST(OnnxConcurrency, CompiledTransformerFromManyThreads) {
  onnx::Model m = tiny_transformer();
  std::vector<Value> inputs;
  std::vector<std::vector<Value>> want;
  for (int i = 0; i < 6; ++i) inputs.push_back(token_ids(1 + i % 2, 8 + 4 * (i % 3), static_cast<uint32_t>(i)));
  {
    auto reference = onnx::compile(m);
    for (auto& in : inputs) want.push_back(reference({in}));
  }
  auto cm = onnx::compile(m);
  std::atomic<int> mismatches{0};
  constexpr int kThreads = 8, kCalls = 12;
  on_threads(kThreads, [&](int t) {
    for (int c = 0; c < kCalls; ++c) {
      const size_t i = static_cast<size_t>(t + c) % inputs.size();
      if (!same_bits(cm({inputs[i]}), want[i])) mismatches++;
    }
  });
  EXPECT_EQ(mismatches.load(), 0);
  auto st = cm.stats();
  EXPECT_EQ(st.calls, static_cast<uint64_t>(kThreads) * kCalls);
  ASSERT_EQ(st.segments.size(), 1u);
  EXPECT_EQ(st.segments[0].misses, 6u);  // one trace per signature, however many threads missed it
  EXPECT_EQ(st.segments[0].hits + st.segments[0].misses, st.calls);
}

// onnx::run of one loaded model from several threads: the same bits as one thread.
TEST(OnnxConcurrency, EagerRunOfOneModelFromManyThreads) {
  onnx::Model m = tiny_transformer();
  std::vector<Value> inputs;
  std::vector<std::vector<Value>> want;
  for (int i = 0; i < 4; ++i) {
    inputs.push_back(token_ids(2, 16, static_cast<uint32_t>(100 + i)));
    want.push_back(onnx::run(m, {inputs.back()}));
  }
  std::atomic<int> mismatches{0};
  on_threads(4, [&](int t) {
    for (int c = 0; c < 4; ++c) {
      const size_t i = static_cast<size_t>(t + c) % inputs.size();
      if (!same_bits(onnx::run(m, {inputs[i]}), want[i])) mismatches++;
    }
  });
  EXPECT_EQ(mismatches.load(), 0);
}

// A compiled model with a break: segments before and after it, the break run eagerly, a lazy
// initializer, and a new count of positions (a new key of the second segment) on most calls.
TEST(OnnxConcurrency, CompiledModelWithBreakFromManyThreads) {
  std::vector<Value> inputs;
  for (int i = 0; i < 8; ++i)
    inputs.push_back(Value::tensor(random_array({40 + i}, float32, -2.0, 2.0, static_cast<uint32_t>(200 + i))));
  onnx::Model m = break_model();
  std::vector<std::vector<Value>> want;
  for (auto& in : inputs) want.push_back(onnx::run(m, {in}));
  onnx::Model fresh = break_model();  // its initializer is unevaluated again
  onnx::CompileModelOptions o;
  o.eager_below = 0;
  auto cm = onnx::compile(fresh, {}, o);
  std::atomic<int> mismatches{0};
  on_threads(8, [&](int t) {
    for (int c = 0; c < 10; ++c) {
      const size_t i = static_cast<size_t>(t * 3 + c) % inputs.size();
      if (!same_bits(cm({inputs[i]}), want[i])) mismatches++;
    }
  });
  EXPECT_EQ(mismatches.load(), 0);
  auto st = cm.stats();
  EXPECT_EQ(st.calls, 80u);
  EXPECT_EQ(st.break_runs, 80u);
}

}  // namespace
}  // namespace smelt::test
