// compile_mut and the thread's key sequence and state structure: draws inside a compiled step
// advance the key as the uncompiled step does, a state that changes structure retraces once, and
// one that changes on two consecutive calls is an error that leaves the state and key unchanged.
#include <gtest/gtest.h>

#include "smelt/compile.h"
#include "smelt/random.h"
#include "smelt/smelt.h"
#include "smelt/transforms.h"
#include "test_utils.h"

namespace smelt {
namespace {

using test::bit_equal;

// A step that draws from the thread's sequence twice (as two dropout layers would).
Array noisy_step(Array& acc, const Array& scale) {
  Array a = random::uniform(random::next_key(), {6});
  Array b = random::normal(random::next_key(), {6});
  acc = acc + a * scale + b;
  return sum(a);
}

TEST(CompileMutKeys, DrawsAdvanceTheThreadKeyExactlyAsTheUncompiledStep) {
  auto step = compile_mut(noisy_step);
  random::seed(11);
  Array acc_c = zeros({6});
  std::vector<Array> outs_c;
  for (int i = 0; i < 3; ++i) outs_c.push_back(step(acc_c, Array(2.0f)));
  Array key_after_c = random::thread_key();
  random::seed(11);
  Array acc_e = zeros({6});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(bit_equal(outs_c[i], noisy_step(acc_e, Array(2.0f)))) << "step " << i;
  EXPECT_TRUE(bit_equal(acc_c, acc_e));
  EXPECT_TRUE(bit_equal(key_after_c, random::thread_key()));
  EXPECT_NE(outs_c[0].item<float>(), outs_c[1].item<float>());  // each step draws anew
  EXPECT_EQ(step.stats().traces, 1u);
}

TEST(CompileMutKeys, AStepWithoutDrawsLeavesTheKeyAsItWas) {
  auto step = compile_mut([](Array& w, const Array& x) {
    w = w + x;
    return sum(w);
  });
  random::seed(3);
  Array before = random::thread_key();
  Array w = zeros({2});
  step(w, Array(1.0f));
  step(w, Array(1.0f));
  EXPECT_TRUE(bit_equal(random::thread_key(), before));
}

TEST(CompileMutKeys, NextKeyMatchesSplittingTheSeedKey) {
  random::seed(5);
  Array k1 = random::next_key();
  Array keys = random::split(random::key(5), 2);
  EXPECT_TRUE(bit_equal(k1, reshape(slice(keys, {1, 0}, {2, 2}), {2})));
  EXPECT_TRUE(bit_equal(random::thread_key(), reshape(slice(keys, {0, 0}, {1, 2}), {2})));
}

TEST(CompileMutKeys, SetThreadKeyChecksTheKey) {
  EXPECT_THROW_MSG(random::set_thread_key(zeros({3})), InvalidArgument,
                   "random::set_thread_key: the key must be uint32[2] (from random::key), got float32[3]");
}

TEST(CompileMutKeys, AFailedStepRestoresTheKeyAndTheState) {
  auto step = compile_mut([](Array& w, const Array& x) {
    Array d = random::uniform(random::next_key(), {2});
    w = w + d * x;  // x of another length fails at trace time
    return sum(w);
  });
  random::seed(9);
  Array w = zeros({2});
  step(w, ones({2}));
  Array key = random::thread_key();
  const auto w_before = w.to_vector<float>();
  EXPECT_THROW(step(w, ones({3})), ShapeError);
  EXPECT_TRUE(bit_equal(random::thread_key(), key));
  EXPECT_EQ(w.to_vector<float>(), w_before);
}

// A state whose moments are created on the first step, as a lazily initialized optimizer does.
struct LazyState {
  Array w;
  std::vector<Array> moments;
};

}  // namespace
}  // namespace smelt

SMELT_TREE(smelt::LazyState, w, moments)

namespace smelt {
namespace {

Array lazy_step(LazyState& s, const Array& g) {
  if (s.moments.empty()) s.moments.push_back(zeros_like(s.w));
  s.moments[0] = s.moments[0] * 0.5f + g;
  s.w = s.w - s.moments[0] * 0.1f;
  return sum(s.w);
}

TEST(CompileMutStructure, AStateThatChangesStructureOnceRetracesOnce) {
  auto step = compile_mut(lazy_step);
  LazyState c{ones({4}), {}}, e{ones({4}), {}};
  for (int i = 0; i < 4; ++i) {
    Array g = test::random_array({4}, float32, -1, 1, 40 + i);
    EXPECT_TRUE(bit_equal(step(c, g), lazy_step(e, g)));
  }
  EXPECT_TRUE(bit_equal(c.w, e.w));
  EXPECT_EQ(c.moments.size(), 1u);
  EXPECT_EQ(step.stats().traces, 2u);  // the empty state, then the initialized one
  EXPECT_EQ(step.stats().hits, 2u);
}

TEST(CompileMutStructure, AStructureThatChangesOnTwoConsecutiveCallsIsAnError) {
  auto step = compile_mut([](LazyState& s, const Array& g) {
    s.moments.push_back(g);  // grows every step: every call would retrace
    s.w = s.w + g;
    return sum(s.w);
  }, CompileOptions{}, "growing_step");
  LazyState s{zeros({2}), {}};
  step(s, ones({2}));
  ASSERT_EQ(s.moments.size(), 1u);
  random::seed(1);
  Array key = random::thread_key();
  const auto w_before = s.w.to_vector<float>();
  EXPECT_THROW_MSG(step(s, ones({2})), InvalidArgument,
                   "growing_step: the state's structure changed on two consecutive calls (2 array leaves -> 3), so "
                   "every step would be traced again. Initialize the optimizer before the loop");
  EXPECT_EQ(s.moments.size(), 1u);
  EXPECT_EQ(s.w.to_vector<float>(), w_before);
  EXPECT_TRUE(bit_equal(random::thread_key(), key));
}

TEST(CompileMutStructure, ADtypeChangeCountsAsAStructureChange) {
  auto step = compile_mut([](Array& w, const Array& g) {
    w = astype(w + g, w.dtype() == float32 ? float64 : float32);
    return w;
  }, CompileOptions{}, "flip");
  Array w = zeros({2});
  step(w, ones({2}));
  EXPECT_THROW_MSG(step(w, ones({2})), InvalidArgument, "(leaf 0: float64[2] -> float32[2])");
}

TEST(CompileMutStructure, TheIssueExampleConverges) {
  auto step = compile_mut([](Array& w, const std::pair<Array, Array>& xy) {
    auto loss = [&](const Array& w) {
      Array r = w * xy.first - xy.second;
      return sum(r * r);
    };
    auto [l, g] = value_and_grad(loss)(w);
    w = w - g * 0.1f;
    return l;
  });
  Array w = zeros({1});
  for (int i = 0; i < 50; ++i) step(w, {Array({1.0f}), Array({2.0f})});
  EXPECT_NEAR(w.item<float>(), 2.0f, 1e-4);
  EXPECT_EQ(step.stats().traces, 1u);
}

}  // namespace
}  // namespace smelt
