// Compiled ONNX models: segments at breaks, host values, static inputs, per-segment caches.
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "smelt/onnx.h"
#include "smelt/telemetry.h"
#include "tests/onnx/model_builder.h"
#include "tests/test_utils.h"

namespace smelt::test {
namespace {

using onnx::CompileModelOptions;
using onnx::ElemType;
using onnx::Value;

Value tensor(Array a) { return Value::tensor(std::move(a)); }

/// Compiled and eager outputs match bit for bit (tensors), or by content (other values).
void expect_same(const std::vector<Value>& got, const std::vector<Value>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].kind(), want[i].kind()) << "output " << i;
    if (got[i].is_tensor()) {
      EXPECT_EQ(got[i].elem_type(), want[i].elem_type()) << "output " << i;
      EXPECT_TRUE(bit_equal(got[i].array(), want[i].array())) << "output " << i;
    }
  }
}

/// Runs `cm` and the eager runner on the same inputs and compares.
std::vector<Value> check_call(const onnx::CompiledModel& cm, const std::vector<Value>& inputs) {
  std::vector<Value> got = cm(inputs);
  expect_same(got, onnx::run(cm.model(), inputs));
  return got;
}

const char* kind_text(onnx::SegmentKind k) {
  switch (k) {
    case onnx::SegmentKind::Compiled: return "compiled ";
    case onnx::SegmentKind::EagerSmall: return "eager ";
    case onnx::SegmentKind::Break: return "break ";
  }
  return "? ";
}

/// One line per segment, for failure messages.
std::string describe(const onnx::Overlay& ov) {
  std::string s;
  for (const auto& seg : ov.segments) {
    s += "[" + std::to_string(seg.start) + "," + std::to_string(seg.stop) + ") " + kind_text(seg.kind) +
         seg.start_node + " .. " + seg.stop_node + ": " + seg.reason + "\n";
    for (const auto& f : seg.fused) s += "    " + f.str() + "\n";
  }
  return s;
}

/// Every break's reason is phrased for its node: it starts with the node's label and carries
/// no evaluation error; `compiled` agrees with the kind.
void expect_phrased_breaks(const onnx::Overlay& ov) {
  for (const auto& seg : ov.segments) {
    EXPECT_EQ(seg.compiled, seg.kind == onnx::SegmentKind::Compiled) << describe(ov);
    if (seg.kind != onnx::SegmentKind::Break) continue;
    EXPECT_EQ(seg.stop, seg.start + 1) << describe(ov);
    EXPECT_EQ(seg.reason.rfind(seg.start_node + ": ", 0), 0u) << describe(ov);
    EXPECT_EQ(seg.reason.find("eval"), std::string::npos) << describe(ov);
    EXPECT_EQ(seg.reason.find("compiled function"), std::string::npos) << describe(ov);
  }
}

[[maybe_unused]] const onnx::SegmentStats& site(const onnx::CompiledModelStats& s, size_t position) {
  for (const auto& seg : s.segments)
    if (seg.position == position) return seg;
  static onnx::SegmentStats none;
  ADD_FAILURE() << "no segment starts at position " << position;
  return none;
}

/// x -> a chain of element-wise ops (no break).
onnx::Model chain_model() {
  GraphBuilder b;
  auto x = b.input("x", ElemType::Float, 2);
  auto two = b.float_scalar("two", 2.0f);
  auto y = b.node("Mul", {x, two});
  y = b.node("Tanh", {y});
  y = b.node("Add", {y, x});
  y = b.node("Exp", {y});
  auto s = b.node("ReduceSum", {y, b.int64s("axes", {1})}, {attr_int("keepdims", 0)});
  b.output(y);
  b.output(s);
  return make_model(b.graph());
}

/// The W11 shape: score threshold -> NonZero -> Gather -> NonMaxSuppression -> TopK.
onnx::Model detection_model() {
  GraphBuilder b;
  auto boxes = b.input("boxes", ElemType::Float, 2);   // [N,4]
  auto scores = b.input("scores", ElemType::Float, 1);  // [N]
  auto mask = b.node("Greater", {scores, b.float_scalar("thr", 0.3f)});
  auto nz = b.node("NonZero", {mask});                 // [1,K]
  auto idx = b.node("Squeeze", {nz, b.int64s("ax0", {0})});
  auto kb = b.node("Gather", {boxes, idx}, {attr_int("axis", 0)});
  auto ks = b.node("Gather", {scores, idx}, {attr_int("axis", 0)});
  auto ks_scaled = b.node("Mul", {ks, b.float_scalar("scale", 1.5f)});
  auto B = b.node("Unsqueeze", {kb, b.int64s("ax0b", {0})});
  auto S = b.node("Unsqueeze", {ks_scaled, b.int64s("ax01", {0, 1})});
  auto sel = b.node("NonMaxSuppression", {B, S, b.int64s("max_out", {50}), b.constant("iou", Array(0.5f)),
                                          b.constant("score_thr", Array(0.0f))});
  auto col = b.node("Gather", {sel, b.int64_scalar("two_i", 2)}, {attr_int("axis", 1)});
  auto s2 = b.node("Gather", {ks_scaled, col}, {attr_int("axis", 0)});
  auto n = b.node("Shape", {s2});
  auto k = b.node("Min", {n, b.int64s("ten", {10})});
  auto top = b.node_n("TopK", {s2, k}, 2);
  auto picked = b.node("Gather", {kb, b.node("Gather", {col, top[1]}, {attr_int("axis", 0)})}, {attr_int("axis", 0)});
  b.output(top[0]);
  b.output(picked);
  return make_model(b.graph());
}

std::vector<Value> detection_inputs(int64_t n, uint32_t seed) {
  Array xy = random_array({n, 2}, float32, 0.0, 100.0, seed);
  Array wh = random_array({n, 2}, float32, 1.0, 20.0, seed + 1);
  Array boxes = concatenate({xy, add(xy, wh)}, 1);
  return {tensor(boxes), tensor(random_array({n}, float32, 0.0, 1.0, seed + 2))};
}

/// Options that build the kernels before the first call (no tiered execution), for tests that
/// look at the fused kernels right after a call; tests/onnx/tiered_model_test.cpp tests tiering.
onnx::CompileModelOptions synchronous() {
  onnx::CompileModelOptions o;
  o.tiered = false;
  return o;
}

TEST(CompiledModel, ModelWithoutBreaksCompilesWholeAndMatchesEager) {
  onnx::Model m = chain_model();
  std::string fallbacks;
  telemetry::Subscription sub("compile.fallback", [&](const telemetry::Event& e) { fallbacks += e.field("reason") + "\n"; });
  auto cm = onnx::compile(m, {}, synchronous());
  for (uint32_t seed = 0; seed < 3; ++seed) check_call(cm, {tensor(random_array({4, 8}, float32, -3, 3, seed))});
  check_call(cm, {tensor(random_array({5, 8}, float32, -3, 3, 9))});
  auto st = cm.stats();
  ASSERT_EQ(st.segments.size(), 1u);
  EXPECT_EQ(st.segments[0].traces, 2u);
  EXPECT_EQ(st.segments[0].misses, 2u);
  EXPECT_EQ(st.segments[0].hits, 2u);
  EXPECT_EQ(st.segments[0].compiled_runs, 4u);
  EXPECT_EQ(st.break_runs, 0u);
  onnx::Overlay ov = cm.overlay();
  ASSERT_EQ(ov.segments.size(), 1u);
  EXPECT_TRUE(ov.segments[0].compiled);
  EXPECT_EQ(ov.segments[0].start, 0u);
  EXPECT_EQ(ov.segments[0].stop, 5u);
  EXPECT_EQ(ov.segments[0].reason, "end of graph");
  // Mul, Tanh, Add, Exp fuse (unless no kernel can be built here: then a fallback event says why).
  EXPECT_TRUE(!ov.fused.empty() || !fallbacks.empty());
}

TEST(CompiledModel, NaNAndInfAndEmptyInputsMatchEager) {
  onnx::Model m = chain_model();
  auto cm = onnx::compile(m);
  float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  check_call(cm, {tensor(Array({inf, -inf, nan, 0.0f, -0.0f, 1e30f}, Shape{2, 3}))});
  check_call(cm, {tensor(zeros({0, 3}, float32))});
}

TEST(CompiledModel, DetectionPipelineMatchesEagerForEveryBoxCount) {
  onnx::Model m = detection_model();
  CompileModelOptions o;
  o.eager_below = 0;
  auto cm = onnx::compile(m, detection_inputs(50, 1), o);
  for (int64_t n : {50, 200, 37, 200, 1}) check_call(cm, detection_inputs(n, static_cast<uint32_t>(n)));
  onnx::Overlay ov = cm.overlay();
  ASSERT_EQ(ov.segments.size(), 5u) << describe(ov);
  EXPECT_TRUE(ov.segments[0].compiled);
  EXPECT_EQ(ov.segments[1].start_node, "NonZero 'NonZero_0'");
  EXPECT_FALSE(ov.segments[1].compiled);
  EXPECT_TRUE(ov.segments[2].compiled);
  EXPECT_EQ(ov.segments[2].reason, "break: NonMaxSuppression 'NonMaxSuppression_0'");
  EXPECT_FALSE(ov.segments[3].compiled);
  EXPECT_EQ(ov.segments[1].kind, onnx::SegmentKind::Break);
  EXPECT_EQ(ov.segments[1].reason, "NonZero 'NonZero_0': output shape depends on the values of its input");
  EXPECT_EQ(ov.segments[3].kind, onnx::SegmentKind::Break);
  EXPECT_EQ(ov.segments[3].reason,
            "NonMaxSuppression 'NonMaxSuppression_0': output shape depends on the values of its inputs");
  expect_phrased_breaks(ov);
  // NonZero's positions enter as an argument, not as a key value: once per count of positions.
  EXPECT_TRUE(ov.segments[2].host_values.empty());
  EXPECT_TRUE(ov.segments[4].compiled);
  // Shape -> Min folds at trace time: TopK's k is known.
  EXPECT_NE(std::find(ov.host_folded.begin(), ov.host_folded.end(), "Shape 'Shape_0'"), ov.host_folded.end());
  EXPECT_NE(std::find(ov.host_folded.begin(), ov.host_folded.end(), "Min 'Min_0'"), ov.host_folded.end());
}

TEST(CompiledModel, GatherOfNonZeroPositionsCompilesOncePerCount) {
  GraphBuilder b;
  auto x = b.input("x", ElemType::Float, 1);
  auto nz = b.node("NonZero", {b.node("Greater", {x, b.float_scalar("zero", 0.0f)})});
  auto idx = b.node("Squeeze", {nz, b.int64s("ax0", {0})});
  auto y = b.node("Mul", {b.node("Gather", {x, idx}, {attr_int("axis", 0)}), b.float_scalar("two", 2.0f)});
  b.output(y);
  auto m = make_model(b.graph());
  CompileModelOptions o;
  o.eager_below = 0;
  auto cm = onnx::compile(m, {}, o);
  // Three positives in different places (same count), then four.
  check_call(cm, {tensor(Array({1.0f, -1.0f, 2.0f, 3.0f, -5.0f, -6.0f}))});
  check_call(cm, {tensor(Array({-1.0f, 1.5f, -2.0f, 3.5f, 5.0f, -6.0f}))});
  check_call(cm, {tensor(Array({-1.0f, 1.5f, 2.0f, 3.5f, 5.0f, -6.0f}))});
  auto st = cm.stats();
  const auto& after = site(st, 2);
  EXPECT_EQ(after.misses, 2u);  // counts 3 and 4
  EXPECT_EQ(after.hits, 1u);
  EXPECT_EQ(after.traces, 2u);
  EXPECT_EQ(site(st, 0).misses, 1u);
  EXPECT_EQ(site(st, 0).hits, 2u);
  EXPECT_EQ(st.break_runs, 3u);
  // No positives at all: an empty gather.
  check_call(cm, {tensor(Array({-1.0f, -2.0f}))});
}

/// Range on data (a break), then TopK and Reshape that need the range's length on the host.
onnx::Model range_topk_model() {
  GraphBuilder b;
  auto x = b.input("x", ElemType::Float, 1);
  auto pos = b.node("Cast", {b.node("Greater", {x, b.float_scalar("zero", 0.0f)})}, {attr_int("to", 7)});
  auto n = b.node("ReduceSum", {pos}, {attr_int("keepdims", 0)});
  auto r = b.node("Range", {b.int64_scalar("start", 0), n, b.int64_scalar("one", 1)});
  auto last = b.node("ReduceMax", {r}, {attr_int("keepdims", 0)});
  auto k = b.node("Unsqueeze", {b.node("Add", {last, b.int64_scalar("one_b", 1)}), b.int64s("ax0", {0})});
  auto top = b.node_n("TopK", {x, k}, 2);
  auto shape = b.node("Concat", {b.int64s("lead", {1}), k}, {attr_int("axis", 0)});
  auto vals = b.node("Reshape", {top[0], shape});
  auto idx = b.node("Mul", {top[1], b.int64_scalar("two", 2)});
  auto rr = b.node("Add", {r, b.int64_scalar("ten", 10)});
  b.output(vals);
  b.output(idx);
  b.output(rr);
  return make_model(b.graph());
}

TEST(CompiledModel, HostValueNeededOnTheHostIsStaticInTheKey) {
  onnx::Model m = range_topk_model();
  CompileModelOptions o;
  o.eager_below = 0;
  auto cm = onnx::compile(m, {}, o);
  auto with_positives = [](int positives, int64_t n, uint32_t seed) {
    Array a = random_array({n}, float32, -3.0, -0.5, seed);
    std::vector<float> v = a.to_vector<float>();
    for (int i = 0; i < positives; ++i) v[static_cast<size_t>(i * 2)] = 0.5f + static_cast<float>(seed % 7) + i;
    return tensor(Array(v, Shape{n}));
  };
  check_call(cm, {with_positives(3, 10, 1)});
  check_call(cm, {with_positives(3, 10, 2)});  // same count, other data: a hit
  check_call(cm, {with_positives(4, 10, 3)});  // another count: the range's values differ
  check_call(cm, {with_positives(3, 10, 4)});
  auto st = cm.stats();
  // Position 3 starts after Range (break at position 3 is Range itself: segments [0,3) and [4,..)).
  const auto& after = site(st, 4);
  EXPECT_EQ(after.misses, 2u);
  EXPECT_EQ(after.hits, 2u);
  // The first trace found that TopK needs the range on the host and traced again.
  EXPECT_EQ(after.traces, 3u);
  onnx::Overlay ov = cm.overlay();
  ASSERT_EQ(ov.segments.size(), 3u) << describe(ov);
  EXPECT_EQ(ov.segments[1].start_node, "Range 'Range_0'");
  ASSERT_EQ(ov.segments[2].host_values.size(), 1u);
  EXPECT_EQ(ov.segments[2].host_values[0], "Range_0:0=[0,1,2]");
}

/// y = If(cond, x * 2, x + 1) followed by Neg; cond is an input.
onnx::Model if_model(bool cond_from_data) {
  GraphBuilder then_b("then"), else_b("else");
  GraphBuilder b;
  auto x = b.input("x", ElemType::Float, 1);
  std::string cond;
  if (cond_from_data) {
    cond = b.node("Greater", {b.node("ReduceSum", {x}, {attr_int("keepdims", 0)}), b.float_scalar("zero", 0.0f)});
  } else {
    cond = b.input("cond", ElemType::Bool, 0);
  }
  then_b.output(then_b.node("Mul", {x, then_b.float_scalar("two", 2.0f)}));
  else_b.output(else_b.node("Add", {x, else_b.float_scalar("one", 1.0f)}));
  auto y = b.node("If", {cond}, {attr_graph("then_branch", then_b.graph()), attr_graph("else_branch", else_b.graph())});
  b.output(b.node("Neg", {y}));
  return make_model(b.graph());
}

TEST(CompiledModel, IfOnAStaticInputTracesOnlyItsBranch) {
  onnx::Model m = if_model(false);
  for (bool c : {true, false}) {
    CompileModelOptions o;
    o.static_inputs["cond"] = tensor(Array(c));
    auto cm = onnx::compile(m, {}, o);
    Array x = random_array({7}, float32, -3, 3, 5);
    auto got = cm({tensor(x)});
    expect_same(got, onnx::run(m, {tensor(x), tensor(Array(c))}));
    // All inputs, the static one equal (or None), are accepted too.
    expect_same(cm({tensor(x), tensor(Array(c))}), got);
    expect_same(cm({tensor(x), Value()}), got);
    expect_same({cm.run_named({{"x", tensor(x)}}).at("Neg_0:0")}, got);
    onnx::Overlay ov = cm.overlay();
    ASSERT_EQ(ov.segments.size(), 1u) << describe(ov);
    EXPECT_TRUE(ov.segments[0].compiled);
    EXPECT_EQ(cm.stats().break_runs, 0u);
    EXPECT_THROW_MSG(cm({tensor(x), tensor(Array(!c))}), OnnxError,
                     "compiled model: input 'cond' is static; it was given tensor(bool)[] at compile time and "
                     "differs in this call (tensor(bool)[]). Compile again to change it.");
  }
}

TEST(CompiledModel, IfOnADataValueIsABreak) {
  onnx::Model m = if_model(true);
  CompileModelOptions o;
  o.eager_below = 0;
  auto cm = onnx::compile(m, {}, o);
  for (uint32_t seed = 0; seed < 4; ++seed) check_call(cm, {tensor(random_array({6}, float32, -3, 3, seed))});
  onnx::Overlay ov = cm.overlay();
  ASSERT_EQ(ov.segments.size(), 3u) << describe(ov);
  EXPECT_EQ(ov.segments[1].start_node, "If 'If_0'");
  EXPECT_FALSE(ov.segments[1].compiled);
  EXPECT_EQ(ov.segments[0].reason, "break: If 'If_0'");
  EXPECT_EQ(ov.segments[1].reason, "If 'If_0': which branch runs depends on the value of input 'cond'");
  expect_phrased_breaks(ov);
}

TEST(CompiledModel, LoopWithADataDependentTripCountIsABreak) {
  GraphBuilder body("body");
  body.input("i", ElemType::Int64, 0);
  auto c = body.input("c", ElemType::Bool, 0);
  auto acc = body.input("acc", ElemType::Float, 1);
  GraphBuilder b;
  auto x = b.input("x", ElemType::Float, 1);
  body.output(body.node("Identity", {c}));
  body.output(body.node("Add", {acc, x}));
  auto trip = b.node("Cast", {b.node("ReduceSum", {b.node("Cast", {b.node("Greater", {x, b.float_scalar("z", 0.0f)})},
                                                                {attr_int("to", 7)})},
                                       {attr_int("keepdims", 0)})},
                     {attr_int("to", 7)});
  auto start = b.node("Mul", {x, b.float_scalar("half", 0.5f)});
  auto loop = b.node("Loop", {trip, b.constant("true", Array(true)), start}, {attr_graph("body", body.graph())});
  b.output(b.node("Sqrt", {b.node("Abs", {loop})}));
  auto m = make_model(b.graph());
  CompileModelOptions o;
  o.eager_below = 0;
  auto cm = onnx::compile(m, {}, o);
  for (uint32_t seed = 0; seed < 3; ++seed) check_call(cm, {tensor(random_array({5}, float32, -3, 3, seed))});
  onnx::Overlay ov = cm.overlay();
  ASSERT_EQ(ov.segments.size(), 3u) << describe(ov);
  EXPECT_EQ(ov.segments[1].start_node, "Loop 'Loop_0'");
  EXPECT_EQ(ov.segments[1].reason, "Loop 'Loop_0': needs the values of input 'M' on the host");
  expect_phrased_breaks(ov);

  // A constant trip count: the Loop still runs eagerly, and says why.
  GraphBuilder b2;
  auto x2 = b2.input("x", ElemType::Float, 1);
  auto start2 = b2.node("Mul", {x2, b2.float_scalar("half", 0.5f)});
  auto loop2 = b2.node("Loop", {b2.int64_scalar("three", 3), b2.constant("true", Array(true)), start2},
                       {attr_graph("body", body.graph())});
  b2.output(b2.node("Neg", {loop2}));
  auto cm2 = onnx::compile(make_model(b2.graph()), {}, o);
  check_call(cm2, {tensor(random_array({5}, float32, -3, 3, 8))});
  ov = cm2.overlay();
  ASSERT_EQ(ov.segments.size(), 3u) << describe(ov);
  EXPECT_EQ(ov.segments[1].reason,
            "Loop 'Loop_0': runs eagerly: a Loop evaluates its condition and state on the host after every iteration");
}

TEST(CompiledModel, LruOfTwoCountsEvictionsAndRecompilesExactly) {
  onnx::Model m = chain_model();
  CompileModelOptions o;
  o.cache_size = 2;
  auto cm = onnx::compile(m, {}, o);
  std::vector<std::string> misses;
  std::vector<std::string> events;
  telemetry::Subscription sub("segment.cache.*", [&](const telemetry::Event& e) {
    events.push_back(e.name);
    if (e.name == "segment.cache.miss") misses.push_back(e.field("reason"));
  });
  auto in = [](int64_t rows) { return std::vector<Value>{tensor(random_array({rows, 3}, float32, -2, 2, 7))}; };
  for (int64_t rows : {2, 3, 2, 4, 3, 2, 2}) check_call(cm, in(rows));
  // 2 miss, 3 miss, 2 hit, 4 miss (evicts 3), 3 miss (evicts 2), 2 miss (evicts 4), 2 hit.
  auto st = cm.stats();
  ASSERT_EQ(st.segments.size(), 1u);
  EXPECT_EQ(st.segments[0].misses, 5u);
  EXPECT_EQ(st.segments[0].hits, 2u);
  EXPECT_EQ(st.segments[0].evictions, 3u);
  EXPECT_EQ(st.segments[0].traces, 5u);
  EXPECT_EQ(st.segments[0].cached, 2u);
  EXPECT_EQ(st.calls, 7u);
  ASSERT_EQ(misses.size(), 5u);
  EXPECT_EQ(misses[0], "first call");
  EXPECT_EQ(misses[1], "x: tensor(float)[2,3]@cpu -> tensor(float)[3,3]@cpu");
  EXPECT_EQ(misses[3], "evicted earlier (cache_size 2)");
  EXPECT_EQ(misses[4], "evicted earlier (cache_size 2)");
  EXPECT_EQ(std::count(events.begin(), events.end(), "segment.cache.evict"), 3);
  EXPECT_EQ(std::count(events.begin(), events.end(), "segment.cache.hit"), 2);
}

TEST(CompiledModel, ABreakWithoutSplittingRaisesNamingTheInput) {
  GraphBuilder b;
  auto ids = b.input("input_ids", ElemType::Int64, 2);
  auto nz = b.node("NonZero", {b.node("Greater", {ids, b.int64_scalar("pad", 0)})});
  b.output(b.node("Add", {nz, b.int64_scalar("one", 1)}));
  auto m = make_model(b.graph());
  CompileModelOptions o;
  o.allow_breaks = false;
  Value ids_v = tensor(Array(std::vector<int64_t>{5, 0, 7, 9, 0, 0}, Shape{2, 3}));
  auto cm = onnx::compile(m, {}, o);
  EXPECT_THROW_MSG(cm({ids_v}), UnknownValueError,
                   "NonZero NonZero_0: input_ids is only known when the model runs. Pass the graph inputs it "
                   "depends on as static_inputs, or call smelt::onnx::run without compiling.");
  try {
    cm({ids_v});
  } catch (const UnknownValueError& e) {
    EXPECT_EQ(std::string("UnknownValueError: ") + e.what(),
              "UnknownValueError: NonZero NonZero_0: input_ids is only known when the model runs. Pass the graph "
              "inputs it depends on as static_inputs, or call smelt::onnx::run without compiling.");
  }
  // The advice works: with input_ids static, NonZero folds at trace time.
  o.static_inputs["input_ids"] = ids_v;
  auto fixed = onnx::compile(m, {}, o);
  expect_same(fixed({}), onnx::run(m, {ids_v}));
  EXPECT_EQ(fixed.stats().segments.size(), 1u);
  // With breaks allowed (the default) the same model runs, NonZero eagerly.
  o = {};
  o.eager_below = 0;
  auto split = onnx::compile(m, {ids_v}, o);
  expect_same(split({ids_v}), onnx::run(m, {ids_v}));
}

TEST(CompiledModel, SegmentCompileEventsCarryReasonsHostValuesAndDurations) {
  onnx::Model m = range_topk_model();
  std::vector<telemetry::Event> stops;
  telemetry::Subscription sub("segment.compile.stop", [&](const telemetry::Event& e) { stops.push_back(e); });
  CompileModelOptions o;
  o.eager_below = 0;
  auto cm = onnx::compile(m, {tensor(Array({1.0f, -2.0f, 3.0f}))}, o);
  ASSERT_EQ(stops.size(), 2u);
  EXPECT_EQ(stops[0].field("segment"), "0");
  EXPECT_EQ(stops[0].field("start"), "Greater 'Greater_0'");
  EXPECT_EQ(stops[0].field("reason"), "Range 'Range_0'");
  EXPECT_EQ(stops[0].field("compiled"), "true");
  // Why the break could not be traced: phrased for the node, and the evaluation error behind it.
  EXPECT_EQ(stops[0].field("break_reason"), "Range 'Range_0': needs the values of input 'limit' on the host");
  EXPECT_EQ(stops[0].field("break_error").rfind("eval: ", 0), 0u) << stops[0].field("break_error");
  EXPECT_EQ(stops[0].field("host_values"), "");
  EXPECT_EQ(stops[1].field("segment"), "2");
  EXPECT_EQ(stops[1].field("reason"), "end of graph");
  EXPECT_EQ(stops[1].field("break_reason"), "");
  EXPECT_EQ(stops[1].field("host_values"), "Range_0:0=[0,1]");
  EXPECT_GE(stops[1].duration_ms, 0.0);
  EXPECT_FALSE(stops[1].field("trace_ms").empty());
  EXPECT_FALSE(stops[1].field("build_ms").empty());
  int calls = 0;
  telemetry::Subscription on_call("segment.call", [&](const telemetry::Event& e) {
    ++calls;
    EXPECT_EQ(e.field("segments"), "3");
  });
  cm({tensor(Array({1.0f, -2.0f, 3.0f}))});
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(stops.size(), 2u);  // a hit: nothing traced
}

TEST(CompiledModel, SmallSegmentsNextToBreaksRunEagerly) {
  onnx::Model m = detection_model();
  auto cm = onnx::compile(m);  // eager_below = 20: every segment of this model is smaller
  for (int64_t n : {30, 60}) check_call(cm, detection_inputs(n, static_cast<uint32_t>(n)));
  onnx::Overlay ov = cm.overlay();
  for (const auto& s : ov.segments) EXPECT_FALSE(s.compiled) << describe(ov);
  EXPECT_NE(ov.segments[0].reason.find("fewer than eager_below = 20 nodes"), std::string::npos);
  ASSERT_EQ(ov.segments.size(), 5u) << describe(ov);
  for (size_t i : {0, 2, 4}) EXPECT_EQ(ov.segments[i].kind, onnx::SegmentKind::EagerSmall) << describe(ov);
  for (size_t i : {1, 3}) EXPECT_EQ(ov.segments[i].kind, onnx::SegmentKind::Break) << describe(ov);
  expect_phrased_breaks(ov);
  auto st = cm.stats();
  EXPECT_EQ(site(st, 0).compiled_runs, 0u);
  EXPECT_EQ(site(st, 0).eager_runs, 2u);
  // The position remembers that its segment is small: the second call neither keys nor traces.
  EXPECT_EQ(site(st, 0).traces, 1u);
  EXPECT_EQ(site(st, 0).misses, 1u);
  EXPECT_EQ(site(st, 0).hits, 0u);
  EXPECT_EQ(site(st, 0).cached, 0u);
}

TEST(CompiledModel, BreakReasonsNameTheInputNeededOnTheHost) {
  // Reshape, TopK and Range on graph inputs (data): each breaks and says which of its inputs it
  // needs on the host, by the operator's own input name.
  GraphBuilder b;
  auto x = b.input("x", ElemType::Float, 1);
  auto shape = b.input("target", ElemType::Int64, 1);
  auto k = b.input("k", ElemType::Int64, 1);
  auto n = b.input("n", ElemType::Int64, 0);
  auto y = b.node("Mul", {x, b.float_scalar("two", 2.0f)});
  auto r = b.node("Reshape", {y, shape});
  auto top = b.node_n("TopK", {b.node("Neg", {x}), k}, 2);
  auto rg = b.node("Range", {b.int64_scalar("zero", 0), n, b.int64_scalar("one", 1)});
  b.output(r);
  b.output(top[0]);
  b.output(rg);
  auto m = make_model(b.graph());
  CompileModelOptions o;
  o.eager_below = 0;
  auto cm = onnx::compile(m, {}, o);
  Value xs = tensor(random_array({6}, float32, -3, 3, 4));
  check_call(cm, {xs, tensor(Array(std::vector<int64_t>{2, 3}, Shape{2})), tensor(Array(std::vector<int64_t>{4}, Shape{1})),
                  tensor(Array(int64_t{5}))});
  onnx::Overlay ov = cm.overlay();
  expect_phrased_breaks(ov);
  std::map<std::string, std::string> reasons;
  for (const auto& s : ov.segments)
    if (s.kind == onnx::SegmentKind::Break) reasons[s.start_node] = s.reason;
  ASSERT_EQ(reasons.size(), 3u) << describe(ov);
  EXPECT_EQ(reasons["Reshape 'Reshape_0'"], "Reshape 'Reshape_0': needs the values of input 'shape' on the host");
  EXPECT_EQ(reasons["TopK 'TopK_0'"], "TopK 'TopK_0': needs the values of input 'K' on the host");
  EXPECT_EQ(reasons["Range 'Range_0'"], "Range 'Range_0': needs the values of input 'limit' on the host");
}

TEST(CompiledModel, FusedGroupsNameTheOnnxNodesTheyCameFrom) {
  onnx::Model m = chain_model();
  std::string fallbacks;
  telemetry::Subscription sub("compile.fallback", [&](const telemetry::Event& e) { fallbacks += e.field("reason") + "\n"; });
  auto cm = onnx::compile(m, {tensor(random_array({4, 8}, float32, -3, 3, 1))}, synchronous());
  if (!fallbacks.empty()) GTEST_SKIP() << "no fused kernels here: " << fallbacks;
  onnx::Overlay ov = cm.overlay();
  ASSERT_EQ(ov.segments.size(), 1u);
  ASSERT_EQ(ov.segments[0].fused.size(), 1u) << describe(ov);
  const onnx::FusedGroup& g = ov.segments[0].fused[0];
  // Mul by a constant, Tanh, Add, Exp: in execution order, each once; the ReduceSum over the
  // last axis joins them (a row kernel).
  EXPECT_EQ(g.nodes, (std::vector<std::string>{"Mul 'Mul_0'", "Tanh 'Tanh_0'", "Add 'Add_0'", "Exp 'Exp_0'",
                                               "ReduceSum 'ReduceSum_0'"}));
  EXPECT_EQ(g.str(), "Fused[Mul 'Mul_0', Tanh 'Tanh_0', Add 'Add_0', Exp 'Exp_0', ReduceSum 'ReduceSum_0']");
  EXPECT_FALSE(g.kernel.empty());
  ASSERT_EQ(ov.fused.size(), 1u);
  EXPECT_EQ(ov.fused[0], "segment 0: Fused[Mul 'Mul_0', Tanh 'Tanh_0', Add 'Add_0', Exp 'Exp_0', ReduceSum 'ReduceSum_0']");

  // Two independent chains and a node that makes several steps (HardSigmoid: multiply, add,
  // clip): two kernels, each naming only its own nodes, a node once however many steps it made.
  GraphBuilder b;
  auto x = b.input("x", ElemType::Float, 2);
  auto z = b.input("z", ElemType::Float, 2);
  auto p = b.node("HardSigmoid", {b.node("Sin", {x})});
  auto q = b.node("Sqrt", {b.node("Abs", {z})});
  auto both = b.node("MatMul", {p, b.node("Transpose", {q}, {attr_ints("perm", {1, 0})})});
  b.output(both);
  auto m2 = make_model(b.graph());
  Value xv = tensor(random_array({3, 5}, float32, -2, 2, 2));
  Value zv = tensor(random_array({4, 5}, float32, -2, 2, 3));
  auto cm2 = onnx::compile(m2, {}, synchronous());
  check_call(cm2, {xv, zv});
  ov = cm2.overlay();
  ASSERT_EQ(ov.segments.size(), 1u);
  std::set<std::string> groups;
  for (const auto& f : ov.segments[0].fused) groups.insert(f.str());
  EXPECT_EQ(groups, (std::set<std::string>{"Fused[Sin 'Sin_0', HardSigmoid 'HardSigmoid_0']",
                                             "Fused[Abs 'Abs_0', Sqrt 'Sqrt_0']"}))
      << describe(ov);
}

TEST(CompiledModel, CallsFromSeveralThreadsMatchEager) {
  onnx::Model m = detection_model();
  CompileModelOptions o;
  o.eager_below = 0;
  auto cm = onnx::compile(m, {}, o);
  std::vector<std::vector<Value>> inputs, want;
  for (int i = 0; i < 8; ++i) {
    inputs.push_back(detection_inputs(20 + 10 * (i % 3), static_cast<uint32_t>(i)));
    want.push_back(onnx::run(m, inputs.back()));
  }
  std::vector<std::vector<Value>> got(inputs.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t i = t; i < inputs.size(); i += 4) got[i] = cm(inputs[i]);
    });
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < inputs.size(); ++i) expect_same(got[i], want[i]);
  auto st = cm.stats();
  EXPECT_EQ(st.calls, 8u);
  EXPECT_GT(st.compile_ms, 0.0);
  EXPECT_EQ(st.break_runs, 16u);
}

TEST(CompiledModel, InputErrorsNameTheInput) {
  onnx::Model m = if_model(false);
  CompileModelOptions o;
  o.static_inputs["nope"] = tensor(Array(true));
  EXPECT_THROW_MSG(onnx::compile(m, {}, o), OnnxError,
                   "compile: static input 'nope' is not a graph input (the model's inputs are: x, cond)");
  o.static_inputs.clear();
  o.static_inputs["cond"] = tensor(Array(1.0f));
  EXPECT_THROW_MSG(onnx::compile(m, {}, o), OnnxError, "run: input 'cond' expects tensor(bool)");
  auto cm = onnx::compile(m);
  EXPECT_THROW_MSG(cm({tensor(Array({1.0f})), tensor(Array(true)), tensor(Array(true))}), OnnxError,
                   "compiled model: 3 inputs given; the model takes 2 besides its static inputs (or 2 with them)");
  EXPECT_THROW_MSG(cm({tensor(Array({1.0f}))}), OnnxError, "run: missing input 'cond' (tensor(bool)[])");
  EXPECT_THROW_MSG(cm({tensor(Array({1}))}), OnnxError, "run: input 'x' expects tensor(float)[?], got tensor(int32)[1]");
  EXPECT_THROW_MSG(cm.run_named({{"y", tensor(Array({1.0f}))}}), OnnxError, "run: unknown input 'y'");
  // A bad call leaves the compiled model usable.
  Array x = random_array({3}, float32, -1, 1, 3);
  expect_same(cm({tensor(x), tensor(Array(false))}), onnx::run(m, {tensor(x), tensor(Array(false))}));
}

TEST(CompiledModel, ErrorsOfTheModelAreRaisedAsInEagerRuns) {
  // Gather with an index out of range: the eager error is raised from the compiled model too.
  GraphBuilder b;
  auto x = b.input("x", ElemType::Float, 1);
  auto i = b.input("i", ElemType::Int64, 1);
  b.output(b.node("Gather", {x, i}, {attr_int("axis", 0)}));
  auto m = make_model(b.graph());
  auto cm = onnx::compile(m);
  // Traced indices are checked by the gather kernel when the segment runs.
  EXPECT_THROW_MSG(cm({tensor(Array({1.0f, 2.0f})), tensor(Array(std::vector<int64_t>{5}, Shape{1}))}), InvalidArgument,
                   "index 5 is out of range for axis 0 with size 2");
  EXPECT_THROW_MSG(onnx::run(m, {tensor(Array({1.0f, 2.0f})), tensor(Array(std::vector<int64_t>{5}, Shape{1}))}),
                   OnnxError, "index 5 is out of range for a dimension of size 2");
  expect_same(cm({tensor(Array({1.0f, 2.0f})), tensor(Array(std::vector<int64_t>{-1}, Shape{1}))}),
              onnx::run(m, {tensor(Array({1.0f, 2.0f})), tensor(Array(std::vector<int64_t>{-1}, Shape{1}))}));
}

TEST(CompiledModel, GatherElementsWithTracedNegativeIndicesMatchesEager) {
  GraphBuilder b;
  auto x = b.input("x", ElemType::Float, 2);
  auto i = b.input("i", ElemType::Int32, 2);
  b.output(b.node("GatherElements", {x, i}, {attr_int("axis", 1)}));
  auto m = make_model(b.graph());
  auto cm = onnx::compile(m);
  Array idx = astype(random_array({3, 5}, int64, -4, 4, 2), int32);
  check_call(cm, {tensor(random_array({3, 4}, float32, -3, 3, 1)), tensor(idx)});
}

TEST(CompiledModel, EveryDtypeOfAnIdentityChainMatchesEager) {
  for (Dtype dt : {Dtype::Bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32,
                   float64}) {
    GraphBuilder b;
    auto x = b.input("x", onnx::elem_type_of(dt), 2);
    auto t = b.node("Transpose", {x}, {attr_ints("perm", {1, 0})});
    auto f = b.node("Flatten", {t}, {attr_int("axis", 1)});
    b.output(b.node("Identity", {f}));
    auto m = make_model(b.graph());
    auto cm = onnx::compile(m);
    check_call(cm, {tensor(random_array({3, 4}, dt, 0, 5, 1))});
    check_call(cm, {tensor(random_array({0, 2}, dt, 0, 5, 1))});
  }
}

/// A few node-suite models run compiled (every segment traced) and eagerly.
TEST(CompiledModel, NodeSuiteModelsMatchEager) {
  namespace fs = std::filesystem;
  const char* env = std::getenv("SMELT_ONNX_NODE_SUITE");
  fs::path root = env ? fs::path(env)
                      : fs::path(__FILE__).parent_path().parent_path().parent_path() / ".." / "shared" / "onnx-tests" / "node";
  if (!fs::exists(root)) GTEST_SKIP() << "no node suite at " << root;
  const char* names[] = {"test_nonzero_example", "test_range_int32_type_negative_delta", "test_top_k",
                         "test_reshape_negative_dim", "test_if", "test_loop11", "test_nonmaxsuppression_two_batches",
                         "test_gather_0", "test_expand_dim_changed", "test_tile", "test_slice", "test_compress_0",
                         "test_unique_sorted_with_axis", "test_scan9_sum", "test_gelu_tanh_1", "test_layer_normalization_4d_axis0",
                         "test_cumsum_2d", "test_onehot_with_axis", "test_resize_downsample_scales_linear",
                         "test_sequence_map_add_2_sequences"};
  // SMELT_COMPILED_SUITE_ALL=1 runs every model of the suite (those the eager runner runs).
  const bool all = std::getenv("SMELT_COMPILED_SUITE_ALL") != nullptr;
  std::vector<std::string> dirs(std::begin(names), std::end(names));
  if (all) {
    dirs.clear();
    for (const auto& d : fs::directory_iterator(root)) dirs.push_back(d.path().filename().string());
    std::sort(dirs.begin(), dirs.end());
  }
  int ran = 0;
  for (const auto& name : dirs) {
    fs::path dir = root / name;
    if (!fs::exists(dir / "model.onnx")) continue;
    SCOPED_TRACE(name);
    onnx::Model m;
    try {
      m = onnx::load((dir / "model.onnx").string());
    } catch (const Error&) {
      if (all) continue;
      throw;
    }
    std::vector<Value> inputs;
    for (size_t k = 0; k < m.graph->inputs.size(); ++k) {
      fs::path f = dir / "test_data_set_0" / ("input_" + std::to_string(k) + ".pb");
      if (!fs::exists(f)) break;
      inputs.push_back(onnx::load_value(f.string(), m.graph->inputs[k].type));
    }
    CompileModelOptions o;
    o.eager_below = 0;
    o.fuse = false;
    std::vector<Value> want;
    try {
      want = onnx::run(m, inputs);
    } catch (const Error&) {
      if (all) continue;  // not supported eagerly either (the skip list)
      throw;
    }
    auto cm = onnx::compile(m, {}, o);
    auto got = cm(inputs);
    expect_phrased_breaks(cm.overlay());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].kind(), want[i].kind());
      if (got[i].is_tensor()) {
        EXPECT_TRUE(bit_equal(got[i].array(), want[i].array())) << "output " << i;
      }
      if (got[i].is_sequence()) {
        ASSERT_EQ(got[i].items().size(), want[i].items().size());
        for (size_t j = 0; j < got[i].items().size(); ++j) {
          EXPECT_TRUE(bit_equal(got[i].items()[j].array(), want[i].items()[j].array()));
        }
      }
    }
    ++ran;
  }
  EXPECT_GT(ran, 10);
}

}  // namespace
}  // namespace smelt::test
