// compile_mut: a stateful step (Adam over parameters and moments) traced once, replayed on the
// current state, bit-exact with the uncompiled step; the state is unchanged when a step fails.
#include <gtest/gtest.h>

#include "compile_helpers.h"
#include "smelt/compile.h"
#include "smelt/random.h"
#include "smelt/smelt.h"
#include "test_utils.h"

namespace smelt {
namespace {

struct AdamState {
  Array p, m, v;
  Array step;  // a float32 scalar: a counter as an array, so each step does not retrace
};

}  // namespace
}  // namespace smelt

SMELT_TREE(smelt::AdamState, p, m, v, step)

namespace smelt {
namespace {

/// One Adam step; returns the parameters' sum (an output besides the state).
Array adam_step(AdamState& s, const Array& g) {
  const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  s.step = s.step + 1.0f;
  s.m = s.m * b1 + g * (1.0f - b1);
  s.v = s.v * b2 + g * g * (1.0f - b2);
  Array mhat = s.m / (1.0f - power(Array(b1), s.step));
  Array vhat = s.v / (1.0f - power(Array(b2), s.step));
  Array update = mhat / (sqrt(vhat) + eps) * lr;
  s.p = s.p - update;
  return sum(s.p);
}

AdamState fresh_state(int64_t n) {
  return {test::random_array({n}, float32, -1, 1, 1), zeros({n}, float32), zeros({n}, float32), Array(0.0f)};
}

TEST(CompileMut, AdamStepsAreBitExactWithTheUncompiledStepAndTraceOnce) {
  auto step = compile_mut(adam_step);
  AdamState compiled = fresh_state(1000), eager = fresh_state(1000);
  for (int i = 0; i < 4; ++i) {
    Array g = test::random_array({1000}, float32, -1, 1, 10 + i);
    Array norm_c = step(compiled, g);
    Array norm_e = adam_step(eager, g);
    EXPECT_TRUE(test::bit_equal(norm_c, norm_e)) << "step " << i;
    EXPECT_TRUE(test::bit_equal(compiled.p, eager.p)) << "step " << i;
    EXPECT_TRUE(test::bit_equal(compiled.m, eager.m)) << "step " << i;
    EXPECT_TRUE(test::bit_equal(compiled.v, eager.v)) << "step " << i;
    EXPECT_EQ(compiled.step.item<float>(), static_cast<float>(i + 1));
  }
  EXPECT_EQ(step.stats().traces, 1u);
  EXPECT_EQ(step.stats().hits, 3u);
}

TEST(CompileMut, TheStepFusesTheElementWiseUpdate) {
  test::Dumps dumps;
  CompileOptions o = dumps.options();
  o.fallback = CompileFallback::Raise;
  auto step = compile_mut(adam_step, o);
  AdamState s = fresh_state(64);
  step(s, test::random_array({64}, float32, -1, 1, 3));
  // The update of p, m and v is one generated kernel with three outputs; only 0-d steps (the
  // counter and the bias corrections) and the sum stay outside.
  const std::string tape = dumps.final_tape();
  const auto fused = test::Dumps::lines(tape, "Fused");
  int full_size = 0;
  for (const auto& line : fused) full_size += line.find("float32[64], float32[64], float32[64]") != std::string::npos;
  EXPECT_EQ(full_size, 1) << tape;
  for (const char* prim : {"Unary", "Binary", "Select", "Cast"})
    for (const auto& line : test::Dumps::lines(tape, prim))
      EXPECT_EQ(line.find("[64]"), std::string::npos) << line;
  EXPECT_EQ(step.stats().fallbacks, 0u);
}

TEST(CompileMut, AFailedStepLeavesTheStateUnchanged) {
  auto step = compile_mut(adam_step);
  AdamState s = fresh_state(8);
  step(s, test::random_array({8}, float32, -1, 1, 4));
  const auto p_before = s.p.to_vector<float>();
  const auto m_before = s.m.to_vector<float>();
  // A gradient of another length: the trace for the new signature raises a ShapeError.
  EXPECT_THROW_MSG(step(s, test::random_array({5}, float32, -1, 1, 5)), ShapeError, "float32[8], float32[5]");
  EXPECT_EQ(s.p.to_vector<float>(), p_before);
  EXPECT_EQ(s.m.to_vector<float>(), m_before);
  EXPECT_EQ(s.step.item<float>(), 1.0f);
}

TEST(CompileMut, ANewStateShapeRetracesAndExplainsTheMiss) {
  test::EventLog log;
  auto step = compile_mut(adam_step);
  AdamState a = fresh_state(16), b = fresh_state(32);
  step(a, test::random_array({16}, float32, -1, 1, 6));
  step(b, test::random_array({32}, float32, -1, 1, 7));
  EXPECT_EQ(step.stats().traces, 2u);
  const auto reasons = log.field("compile.cache.miss", "reason");
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_NE(reasons[1].find("[16] -> [32]"), std::string::npos) << reasons[1];
}

TEST(CompileMut, ARandomKeyInTheStateDrawsNewValuesEachStep) {
  auto step = compile_mut([](std::tuple<Array, Array>& s, const Array& scale) {
    Array keys = random::split(std::get<0>(s), 2);
    std::get<0>(s) = reshape(slice(keys, {0, 0}, {1, 2}), {2});
    Array draw = random::uniform(reshape(slice(keys, {1, 0}, {2, 2}), {2}), {4}) * scale;
    std::get<1>(s) = std::get<1>(s) + draw;
    return draw;
  });
  std::tuple<Array, Array> s{random::key(7), zeros({4}, float32)};
  Array d1 = step(s, Array(1.0f));
  Array d2 = step(s, Array(1.0f));
  EXPECT_NE(d1.to_vector<float>(), d2.to_vector<float>());
  EXPECT_EQ(step.stats().traces, 1u);
  // The same steps run eagerly give the same draws.
  Array key = random::key(7);
  for (const Array& expected : {d1, d2}) {
    Array keys = random::split(key, 2);
    key = reshape(slice(keys, {0, 0}, {1, 2}), {2});
    Array draw = random::uniform(reshape(slice(keys, {1, 0}, {2, 2}), {2}), {4});
    EXPECT_TRUE(test::bit_equal(draw, expected));
  }
}

TEST(CompileMut, CallsInsideAnotherTraceRunTheStepDirectly) {
  auto step = compile_mut(adam_step);
  auto outer = compile([&](const Array& p, const Array& g) {
    AdamState s{p, zeros_like(p), zeros_like(p), Array(0.0f)};
    step(s, g);
    return s.p;
  });
  Array p = test::random_array({16}, float32, -1, 1, 8), g = test::random_array({16}, float32, -1, 1, 9);
  AdamState e{p, zeros_like(p), zeros_like(p), Array(0.0f)};
  adam_step(e, g);
  EXPECT_TRUE(test::bit_equal(outer(p, g), e.p));
  EXPECT_EQ(step.stats().traces, 0u);
}

}  // namespace
}  // namespace smelt
