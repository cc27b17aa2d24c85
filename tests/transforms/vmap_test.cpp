// vmap: every primitive's batching rule against a loop of unbatched calls, bit for bit (the harness
// iterates the rules table), and the API: axes, trees, nesting, grad and compile, errors.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>

#include "smelt/compile.h"
#include "smelt/random.h"
#include "smelt/attention.h"
#include "smelt/transforms.h"
#include "src/transforms/rules.h"
#include "test_utils.h"

namespace smelt {
namespace {

using test::bit_equal;
using test::random_array;
using V = const std::vector<Array>&;

constexpr int64_t kBatch = 3;

struct BatchCase {
  std::string name;
  PrimKind kind;                          // the primitive whose batching rule the case exercises
  std::vector<Array> inputs;              // batched along their axis when mapped
  std::vector<std::optional<int>> axes;   // one per input
  std::function<std::vector<Array>(V)> f;
};

Array rnd(Shape s, uint32_t seed, Dtype dt = float32) { return random_array(s, dt, -2, 2, seed); }
/// Random integer indices in [0, n) (stored as int32 or int64).
Array indices(Shape s, int64_t n, uint32_t seed, Dtype dt = int32) {
  return astype(floor(random_array(s, float64, 0, static_cast<double>(n) - 1e-9, seed)), dt);
}
std::function<std::vector<Array>(V)> one(std::function<Array(V)> f) {
  return [f](V x) { return std::vector<Array>{f(x)}; };
}

std::vector<BatchCase> batch_cases() {
  const auto m0 = std::optional<int>(0);
  const auto no = std::optional<int>();
  const int64_t B = kBatch;
  return {
      {"exp", PrimKind::Unary, {rnd({B, 4, 5}, 1)}, {m0}, one([](V x) { return exp(x[0]); })},
      {"negative_axis1", PrimKind::Unary, {rnd({4, B, 5}, 2)}, {1}, one([](V x) { return -x[0]; })},
      {"add_unmapped", PrimKind::Binary, {rnd({B, 4, 5}, 3), rnd({5}, 4)}, {m0, no},
       one([](V x) { return x[0] + x[1]; })},
      {"mul_broadcast_both", PrimKind::Binary, {rnd({B, 5}, 5), rnd({4, B, 1}, 6)}, {m0, 1},
       one([](V x) { return x[0] * x[1]; })},
      {"where", PrimKind::Select, {rnd({B, 4}, 7) > Array(0.0f), rnd({B, 4}, 8), rnd({4}, 9)}, {m0, m0, no},
       one([](V x) { return where(x[0], x[1], x[2]); })},
      {"cast", PrimKind::Cast, {rnd({B, 4}, 10)}, {m0}, one([](V x) { return astype(x[0], float64); })},
      {"copy", PrimKind::Copy, {rnd({B, 4}, 11)}, {m0}, one([](V x) { return copy(x[0]); })},
      {"reshape", PrimKind::Reshape, {rnd({B, 4, 5}, 12)}, {m0}, one([](V x) { return reshape(x[0], {2, 10}); })},
      {"transpose", PrimKind::Transpose, {rnd({B, 4, 5}, 13)}, {m0}, one([](V x) { return transpose(x[0]); })},
      {"broadcast_to", PrimKind::Broadcast, {rnd({B, 5}, 14)}, {m0}, one([](V x) { return broadcast_to(x[0], {4, 5}); })},
      {"slice", PrimKind::Slice, {rnd({B, 6, 5}, 15)}, {m0}, one([](V x) { return slice(x[0], {5, 0}, {0, 5}, {-2, 2}); })},
      {"slice_update_mapped_update", PrimKind::SliceUpdate, {rnd({5, 4}, 16), rnd({B, 2, 2}, 17)}, {no, m0},
       one([](V x) { return slice_update(x[0], x[1], {1, 0}, {5, 4}, {2, 2}); })},
      {"slice_update_mapped_array", PrimKind::SliceUpdate, {rnd({B, 5, 4}, 18), rnd({2, 2}, 19)}, {m0, no},
       one([](V x) { return slice_update(x[0], x[1], {1, 0}, {5, 4}, {2, 2}); })},
      {"concatenate", PrimKind::Concatenate, {rnd({B, 2, 4}, 20), rnd({3, 4}, 21)}, {m0, no},
       one([](V x) { return concatenate({x[0], x[1]}, 0); })},
      {"pad", PrimKind::Pad, {rnd({B, 3, 4}, 22)}, {m0}, one([](V x) { return pad(x[0], {{1, 2}, {0, 1}}); })},
      {"pad_reflect", PrimKind::Pad, {rnd({B, 3, 5}, 23)}, {m0},
       one([](V x) { return pad(x[0], {{2, 1}, {3, 2}}, PadMode::Reflect); })},
      {"sum", PrimKind::Reduce, {rnd({B, 4, 37}, 24)}, {m0}, one([](V x) { return sum(x[0], {1}); })},
      {"sum_all", PrimKind::Reduce, {rnd({B, 4, 37}, 25)}, {m0}, one([](V x) { return sum(x[0]); })},
      {"var_axis2", PrimKind::Reduce, {rnd({4, 37, B}, 26)}, {2}, one([](V x) { return var(x[0], {1}, false, 1); })},
      {"max", PrimKind::Reduce, {rnd({B, 4, 5}, 27)}, {m0}, one([](V x) { return max(x[0], {0}); })},
      {"argmax", PrimKind::ArgReduce, {rnd({B, 4, 5}, 28)}, {m0}, one([](V x) { return argmax(x[0], 1); })},
      {"cumsum", PrimKind::Scan, {rnd({B, 4, 40}, 29)}, {m0}, one([](V x) { return cumsum(x[0], 1); })},
      {"cummax_reverse", PrimKind::Scan, {rnd({B, 6, 4}, 30)}, {m0}, one([](V x) { return cummax(x[0], 0, true); })},
      {"matmul_unmapped_weight", PrimKind::Matmul, {rnd({B, 3, 40}, 31), rnd({40, 2}, 32)}, {m0, no},
       one([](V x) { return matmul(x[0], x[1]); })},
      {"matmul_both", PrimKind::Matmul, {rnd({B, 2, 3, 40}, 33), rnd({40, 5, B}, 34)}, {m0, 2},
       one([](V x) { return matmul(x[0], x[1]); })},
      // Past 4 Mi elements the unbatched weight is not copied per example: one matmul each.
      {"matmul_large_unmapped_weight", PrimKind::Matmul, {rnd({B, 2, 1024}, 103), rnd({1024, 1400}, 104)}, {m0, no},
       one([](V x) { return matmul(x[0], x[1]); })},
      {"matmul_vector", PrimKind::Matmul, {rnd({B, 40}, 35), rnd({40, 3}, 36)}, {m0, no},
       one([](V x) { return matmul(x[0], x[1]); })},
      {"take_unmapped_indices", PrimKind::Gather, {rnd({B, 3, 4}, 37), Array(std::vector<int64_t>{2, 0, 2, -1}, {2, 2})},
       {m0, no}, one([](V x) { return take(x[0], x[1], 1); })},
      {"take_mapped_indices", PrimKind::Gather, {rnd({B, 3, 4, 2}, 38), indices({B, 5}, 4, 39)}, {m0, m0},
       one([](V x) { return take(x[0], x[1], 1); })},
      {"take_mapped_indices_only", PrimKind::Gather, {rnd({3, 4}, 40), indices({2, B}, 3, 41, int64)}, {no, 1},
       one([](V x) { return take(x[0], x[1], 0); })},
      {"take_along_axis", PrimKind::GatherElements, {rnd({B, 3, 4}, 42), indices({B, 2, 4}, 3, 43)}, {m0, m0},
       one([](V x) { return take_along_axis(x[0], x[1], 0); })},
      {"gather_nd", PrimKind::GatherND, {rnd({3, 4, 2}, 44), indices({B, 5, 2}, 3, 45)}, {no, m0},
       one([](V x) { return gather_nd(x[0], x[1]); })},
      {"gather_nd_batch_dims", PrimKind::GatherND, {rnd({B, 3, 4, 2}, 46), indices({B, 3, 5, 1}, 4, 47)}, {m0, m0},
       one([](V x) { return gather_nd(x[0], x[1], 1); })},
      {"scatter", PrimKind::Scatter, {rnd({B, 3, 4}, 48), indices({B, 2, 3}, 3, 49), rnd({B, 2, 3}, 50)}, {m0, m0, m0},
       one([](V x) { return scatter(x[0], x[1], x[2], 0); })},
      {"scatter_add_unmapped_array", PrimKind::Scatter, {rnd({3, 4}, 51), indices({B, 5, 4}, 3, 52), rnd({B, 5, 4}, 53)},
       {no, m0, m0}, one([](V x) { return scatter(x[0], x[1], x[2], 0, ScatterReduce::Add); })},
      {"scatter_nd", PrimKind::ScatterND, {rnd({B, 3, 4}, 54), indices({B, 4, 1}, 3, 55), rnd({B, 4, 4}, 56)}, {m0, m0, m0},
       one([](V x) { return scatter_nd(x[0], x[1], x[2]); })},
      {"scatter_nd_add_unmapped_indices", PrimKind::ScatterND,
       {rnd({B, 3, 4}, 57), Array(std::vector<int64_t>{2, 0, 2, 1, 2, 3}, {3, 2}), rnd({B, 3}, 58)}, {m0, no, m0},
       one([](V x) { return scatter_nd(x[0], x[1], x[2], ScatterReduce::Add); })},
      {"sort", PrimKind::Sort, {rnd({B, 4, 6}, 59)}, {m0}, one([](V x) { return sort(x[0], 1); })},
      {"argsort", PrimKind::ArgSort, {rnd({B, 4, 6}, 60)}, {m0}, one([](V x) { return argsort(x[0], 0, true); })},
      {"topk", PrimKind::TopK, {rnd({B, 4, 6}, 61)}, {m0},
       [](V x) {
         auto [v, i] = topk(x[0], 2, 1);
         return std::vector<Array>{v, i};
       }},
      {"conv", PrimKind::Conv, {rnd({B, 2, 2, 6, 5}, 62), rnd({3, 2, 3, 2}, 63)}, {m0, no},
       one([](V x) { return conv2d(x[0], x[1], {2, 1}, {1, 0}, {1, 2}); })},
      {"conv_mapped_weight", PrimKind::Conv, {rnd({2, 2, 6, 5}, 64), rnd({B, 3, 2, 3, 2}, 65)}, {no, m0},
       one([](V x) { return conv2d(x[0], x[1]); })},
      {"conv_transpose", PrimKind::ConvTranspose, {rnd({B, 1, 4, 5}, 66), rnd({4, 2, 3}, 67)}, {m0, no},
       one([](V x) { return conv_transpose(x[0], x[1], {.strides = {3}, .groups = 2}); })},
      {"conv_transpose_mapped_both", PrimKind::ConvTranspose, {rnd({B, 1, 4, 5}, 68), rnd({B, 4, 2, 3}, 69)}, {m0, m0},
       one([](V x) { return conv_transpose(x[0], x[1], {.groups = 2}); })},
      {"max_pool", PrimKind::Pool, {rnd({B, 2, 2, 6, 5}, 70)}, {m0},
       one([](V x) { return max_pool(x[0], {.kernel = {3, 2}, .strides = {2, 1}, .padding_lo = {1, 0}, .padding_hi = {1, 1}}); })},
      {"avg_pool", PrimKind::Pool, {rnd({B, 1, 2, 7}, 71)}, {m0},
       one([](V x) { return avg_pool(x[0], {.kernel = {3}, .strides = {2}, .padding_lo = {1}, .padding_hi = {1}, .ceil_mode = true}); })},
      {"random_mapped_key", PrimKind::RandomBits, {random::split(random::key(5), static_cast<int>(B))}, {m0},
       one([](V x) { return random::uniform(x[0], {2, 3}); })},
      {"attention_causal_gqa", PrimKind::Attention, {rnd({B, 1, 2, 3, 4}, 72), rnd({1, 1, 5, 4}, 73), rnd({B, 1, 1, 5, 4}, 74)},
       {m0, no, m0},
       one([](V x) { return scaled_dot_product_attention(x[0], x[1], x[2], {.causal = CausalMask::LowerRight}); })},
  };
}

/// Example i of a mapped input.
Array example_of(const Array& x, int axis, int64_t i) {
  Array s = slice(x, Axes{axis}, {i}, {i + 1}, {1});
  return squeeze(s, {axis});
}

void check_batch_case(const BatchCase& c) {
  SCOPED_TRACE(c.name);
  std::vector<Array> got = detail::vmap_flat(c.f, c.inputs, c.axes, {0});
  std::vector<std::vector<Array>> loop;
  for (int64_t i = 0; i < kBatch; ++i) {
    std::vector<Array> xs;
    for (size_t k = 0; k < c.inputs.size(); ++k)
      xs.push_back(c.axes[k] ? example_of(c.inputs[k], *c.axes[k], i) : c.inputs[k]);
    loop.push_back(c.f(xs));
  }
  ASSERT_EQ(got.size(), loop[0].size());
  for (size_t j = 0; j < got.size(); ++j) {
    std::vector<Array> parts;
    for (const auto& l : loop) parts.push_back(l[j]);
    EXPECT_TRUE(bit_equal(got[j], stack(parts, 0))) << "output " << j;
  }
}

TEST(VmapRules, EveryBatchingRuleMatchesALoopBitForBit) {
  for (const auto& c : batch_cases()) check_batch_case(c);
}

TEST(VmapRules, EveryPrimitiveKindDeclaresABatchingRuleWithACase) {
  std::set<PrimKind> covered;
  for (const auto& c : batch_cases()) covered.insert(c.kind);
  auto check = [&](PrimKind kind) {
    transforms::RuleInfo info = transforms::rule_info(kind);
    EXPECT_NE(std::string(info.batch_note), "?") << prim_name(kind);
    EXPECT_FALSE(std::string(info.batch_note).empty()) << prim_name(kind);
    const bool has_rule = info.batch == transforms::Rule::Full || info.batch == transforms::Rule::Partial ||
                          info.batch == transforms::Rule::Loop;
    if (has_rule) {
      EXPECT_TRUE(covered.count(kind)) << prim_name(kind) << " has a batching rule but no case";
    }
    // A kind without inputs is never batched; one without a rule says why.
    if (!has_rule) {
      EXPECT_TRUE(info.batch == transforms::Rule::NoInputs || info.batch == transforms::Rule::None);
    }
  };
  check(PrimKind::None);
#define X(name, ...) check(PrimKind::name);
  SMELT_PRIMITIVES(X)
#undef X
}

// ---- The API ---------------------------------------------------------------------------------------

struct Layer {
  Array w, b;
  int activation;  // a static leaf
};

}  // namespace
}  // namespace smelt

SMELT_TREE(smelt::Layer, w, b, activation)

namespace smelt {
namespace {

TEST(Vmap, InAxesOutAxesAndUnmappedArguments) {
  Array x = rnd({4, kBatch}, 80), y = rnd({4}, 81);
  auto f = [](const Array& x, const Array& y) { return x * y + sum(x); };
  Array got = vmap(f, {1, not_mapped}, {1})(x, y);
  ASSERT_EQ(got.shape(), (Shape{4, kBatch}));
  std::vector<Array> parts;
  for (int64_t i = 0; i < kBatch; ++i) parts.push_back(f(example_of(x, 1, i), y));
  EXPECT_TRUE(bit_equal(got, stack(parts, 1)));
}

TEST(Vmap, OverTreesWithStaticLeavesAndTreeOutputs) {
  Layer layer{rnd({kBatch, 3, 2}, 82), rnd({kBatch, 2}, 83), 1};
  Array x = rnd({5, 3}, 84);
  auto f = [](const Layer& l, const Array& x) {
    Array h = matmul(x, l.w) + l.b;
    return std::pair<Array, Array>{l.activation ? relu(h) : h, sum(h)};
  };
  auto [h, s] = vmap(f, {0, not_mapped})(layer, x);
  ASSERT_EQ(h.shape(), (Shape{kBatch, 5, 2}));
  ASSERT_EQ(s.shape(), (Shape{kBatch}));
  for (int64_t i = 0; i < kBatch; ++i) {
    auto [hi, si] = f(Layer{example_of(layer.w, 0, i), example_of(layer.b, 0, i), 1}, x);
    EXPECT_TRUE(bit_equal(example_of(h, 0, i), hi));
    EXPECT_TRUE(bit_equal(example_of(s, 0, i), si));
  }
}

TEST(Vmap, NestedVmapIsAnOuterProductOfBatches) {
  Array x = rnd({kBatch, 4}, 85), y = rnd({2, 4}, 86);
  auto dot = [](const Array& a, const Array& b) { return sum(a * b); };
  // Inner: over y's rows; outer: over x's rows. The result is x·yᵀ computed pair by pair.
  auto pairwise = vmap([dot](const Array& a, const Array& y) { return vmap(dot, {not_mapped, 0})(a, y); },
                       {0, not_mapped});
  Array got = pairwise(x, y);
  ASSERT_EQ(got.shape(), (Shape{kBatch, 2}));
  for (int64_t i = 0; i < kBatch; ++i)
    for (int64_t j = 0; j < 2; ++j)
      EXPECT_TRUE(bit_equal(reshape(slice(got, {i, j}, {i + 1, j + 1}), {}), dot(example_of(x, 0, i), example_of(y, 0, j))));
}

TEST(Vmap, AnOutputIndependentOfTheBatchIsBroadcast) {
  Array x = rnd({kBatch, 2}, 87), c = rnd({2}, 88);
  auto [a, b] = vmap([c](const Array& x) { return std::pair<Array, Array>{x, c * 2.0f}; })(x);
  EXPECT_TRUE(bit_equal(a, x));
  EXPECT_TRUE(bit_equal(b, broadcast_to(c * 2.0f, {kBatch, 2})));
}

TEST(Vmap, PerExampleGradientsVmapOfGrad) {
  // The classic use: one gradient per example, as one batched graph.
  Array w = rnd({4}, 89), xs = rnd({kBatch, 4}, 90);
  auto loss = [](const Array& w, const Array& x) { return sum(tanh(w * x) * x); };
  auto per_example = vmap(grad(loss), {not_mapped, 0});
  Array got = per_example(w, xs);
  std::vector<Array> parts;
  for (int64_t i = 0; i < kBatch; ++i) parts.push_back(grad(loss)(w, example_of(xs, 0, i)));
  EXPECT_TRUE(bit_equal(got, stack(parts, 0)));
}

TEST(Vmap, GradOfVmapMatchesTheGradientOfTheLoop) {
  Array w = rnd({4, 3}, 91, float64), xs = rnd({kBatch, 4}, 92, float64);
  auto f = [](const Array& w, const Array& x) { return sum(sin(matmul(x, w))); };
  Array g = grad([&](const Array& w) { return sum(vmap(f, {not_mapped, 0})(w, xs)); })(w);
  Array want = grad([&](const Array& w) {
    Array total;
    for (int64_t i = 0; i < kBatch; ++i) {
      Array l = f(w, example_of(xs, 0, i));
      total = total.valid() ? total + l : l;
    }
    return total;
  })(w);
  // The batched backward sums the per-example contributions in another order than the loop's
  // chain of additions: equal to rounding (float64, kBatch terms of magnitude <= 4).
  EXPECT_TRUE(test::all_close(g, test::as_doubles(want), 1e-14, 1e-14));
}

TEST(Vmap, JvpOfVmapEqualsVmapOfJvpAndNegativeAxes) {
  Array xs = rnd({4, kBatch}, 105, float64), ts = rnd({4, kBatch}, 106, float64);
  auto f = [](const Array& x) { return cumsum(sin(x), 0) * x; };
  ArrayFn batched = [&](const std::vector<Array>& in) { return std::vector<Array>{vmap(f, {-1}, {-1})(in[0])}; };
  Array forward = jvp(batched, {xs}, {ts}).second[0];
  auto per_example = [&](const Array& x, const Array& t) {
    ArrayFn g = [&](const std::vector<Array>& in) { return std::vector<Array>{f(in[0])}; };
    return jvp(g, {x}, {t}).second[0];
  };
  EXPECT_TRUE(bit_equal(forward, vmap(per_example, {-1}, {-1})(xs, ts)));
}

TEST(Vmap, ComposesWithCompileBitForBit) {
  Array xs = rnd({kBatch, 4, 8}, 93), w = rnd({8, 8}, 94);
  auto f = [](const Array& x, const Array& w) { return softmax(matmul(x, w)) * 2.0f + 1.0f; };
  Array eager = vmap(f, {0, not_mapped})(xs, w);
  Array of_compiled = vmap(compile(f), {0, not_mapped})(xs, w);
  auto compiled_vmap = compile(vmap(f, {0, not_mapped}));
  Array compiled = compiled_vmap(xs, w);
  EXPECT_TRUE(bit_equal(of_compiled, eager));
  EXPECT_TRUE(bit_equal(compiled, eager));
  EXPECT_TRUE(bit_equal(compiled_vmap(xs, w), eager));  // the replay
  EXPECT_EQ(compiled_vmap.stats().traces, 1u);
}

TEST(Vmap, StopGradientInsideVmapStillStopsTheGradient) {
  Array x = rnd({kBatch, 3}, 95, float64);
  Array g = grad([](const Array& x) { return sum(vmap([](const Array& r) { return r * stop_gradient(r); })(x)); })(x);
  EXPECT_TRUE(bit_equal(g, x));  // d/dx of x·sg(x) is sg(x) = x, not 2x
}

TEST(Vmap, DeepGraphsAreWalkedWithoutRecursion) {
  Array xs = rnd({kBatch, 2}, 96);
  auto f = [](const Array& x) {
    Array y = x;
    for (int i = 0; i < 20000; ++i) y = y * 0.999f;
    return y;
  };
  Array got = vmap(f)(xs);
  EXPECT_TRUE(bit_equal(example_of(got, 0, 1), f(example_of(xs, 0, 1))));
}

TEST(Vmap, AComposedModelEqualsTheLoopBitForBit) {
  // Many rules in one graph: matmul, softmax, cumsum, take, scatter-add, sort, reductions.
  auto f = [](const Array& x, const Array& w) {
    Array h = tanh(matmul(x, w));
    Array s = softmax(h, {-1}) + cumsum(h, 0) * 0.5f;
    Array picked = take(s, Array({2, 0, 1}), 1);
    Array sc = scatter(zeros_like(s), Array({1, 0, 2, 2, 4, 3}, {2, 3}), slice(picked, {0, 0}, {2, 3}), 0,
                       ScatterReduce::Add);
    return sum(sort(s + sc, 1), {0}) + max(h);
  };
  Array xs = rnd({kBatch, 5, 8}, 101), w = rnd({8, 3}, 102);
  Array got = vmap(f, {0, not_mapped})(xs, w);
  std::vector<Array> parts;
  for (int64_t i = 0; i < kBatch; ++i) parts.push_back(f(example_of(xs, 0, i), w));
  EXPECT_TRUE(bit_equal(got, stack(parts, 0)));
}

TEST(Vmap, Errors) {
  Array x = rnd({kBatch, 2}, 97), y = rnd({4, 2}, 98);
  auto add = [](const Array& a, const Array& b) { return a + b; };
  EXPECT_THROW_MSG(vmap(add)(x, rnd({4, 2}, 99)), ShapeError,
                   "vmap: mapped axes differ in size: input leaf 0 float32[3,2] axis 0 has 3, input leaf 1 float32[4,2] axis 0 has 4");
  EXPECT_THROW_MSG(vmap(add, {not_mapped})(x, y), InvalidArgument, "vmap: no input is mapped");
  EXPECT_THROW_MSG(vmap(add, {0, 0, 0})(x, y), InvalidArgument, "vmap: in_axes has 3 entries for 2 arguments");
  EXPECT_THROW_MSG(vmap(add, {2, not_mapped})(x, y), InvalidArgument,
                   "vmap: in_axes 2 is out of range for input leaf 0 float32[3,2]");
  EXPECT_THROW_MSG(vmap([](const Array& a) { return a; }, {0}, {3})(x), InvalidArgument,
                   "vmap: out_axes 3 is out of range for output leaf 0 float32[2]");
  EXPECT_THROW_MSG(vmap([](const Array& a) { return std::pair<Array, Array>{a, a}; }, {0}, {0, 1, 0})(x),
                   InvalidArgument, "vmap: out_axes has 3 entries for 2 output leaves");
  EXPECT_THROW_MSG(vmap([](const Array& a) { return a * a.item<float>(); })(rnd({kBatch}, 100)), UnknownValueError,
                   "vmap: the function evaluated a value that depends on a mapped input");
}

}  // namespace
}  // namespace smelt
