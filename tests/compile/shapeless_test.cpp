// Shapeless compile: one trace per rank signature, results bit-identical to eager for every new
// shape, never a stale shape, and named errors for primitives whose parameters fix a shape.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <thread>

#include "smelt/compile.h"
#include "smelt/random.h"
#include "smelt/telemetry.h"
#include "test_utils.h"

namespace smelt {
namespace {

using test::bit_equal;
using test::random_array;

// Generated kernels go to a folder of this binary under the temp dir (reused by the next run),
// not to the user's cache.
class KernelCacheEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* set = std::getenv("SMELT_CACHE_DIR");
    if (set && *set) return;
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/smelt-test-kernels-" + std::to_string(::getuid()) +
                      "/compile_shapeless_test";
    ::setenv("SMELT_CACHE_DIR", dir.c_str(), 1);
  }
};
::testing::Environment* const kernel_cache_environment =
    ::testing::AddGlobalTestEnvironment(new KernelCacheEnvironment);

using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

CompileOptions shapeless(bool fuse = true) {
  CompileOptions o;
  o.shapeless = true;
  o.fuse = fuse;
  o.fallback = CompileFallback::Raise;
  return o;
}

std::vector<Array> random_inputs(const std::vector<Shape>& shapes, uint32_t seed, Dtype dtype = float32) {
  std::vector<Array> in;
  for (size_t i = 0; i < shapes.size(); ++i)
    in.push_back(random_array(shapes[i], dtype, -3.0, 3.0, seed * 101 + static_cast<uint32_t>(i)));
  return in;
}

/// Compiles `f` shapeless once and calls it with inputs of each signature in `calls` (all of one
/// rank signature): every result must equal eager bit for bit, with eager's shape, and the
/// function must be traced `traces` times.
void expect_eager_results(const Fn& f, const std::vector<std::vector<Shape>>& calls, bool fuse = false,
                          uint64_t traces = 1, Dtype dtype = float32) {
  auto c = compile_flat(f, shapeless(fuse), "shapeless_test");
  uint32_t seed = 1;
  for (auto& shapes : calls) {
    std::vector<Array> in = random_inputs(shapes, seed++, dtype);
    std::vector<Array> want = f(in);
    std::vector<Array> got = c(in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].shape(), want[i].shape()) << "output " << i << " for input " << shape_to_string(shapes[0]);
      EXPECT_TRUE(bit_equal(got[i], want[i])) << "output " << i << " for input " << shape_to_string(shapes[0]);
    }
  }
  EXPECT_EQ(c.stats().traces, traces);
}

class ShapelessFuse : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(FuseOnOff, ShapelessFuse, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "fused" : "unfused"; });

// ---- Element-wise chains and broadcasting ------------------------------------------------------

TEST_P(ShapelessFuse, ElementwiseChainWithBroadcastOperand) {
  Fn f = [](const std::vector<Array>& a) { return std::vector<Array>{exp(a[0] * 0.5f + a[1]) - 1.0f}; };
  expect_eager_results(f, {{{4, 8}, {8}}, {{5, 3}, {3}}, {{1, 7}, {7}}, {{9, 2}, {1}}, {{3, 1}, {6}}, {{2, 5}, {5}}},
                       GetParam());
}

TEST_P(ShapelessFuse, ScalarAndCapturedConstantsBroadcastFreely) {
  Array bias = random_array({6}, float32, -1, 1, 7);
  Array scale = Array(1.5f);
  Fn f = [&](const std::vector<Array>& a) {
    Array y = maximum(a[0] * scale + bias, 0.0f);
    return std::vector<Array>{y, where(a[0] > 0.0f, y, -2.0f)};
  };
  expect_eager_results(f, {{{4, 6}}, {{7, 6}}, {{1, 6}}, {{2, 3, 6}}}, GetParam(), 2);
}

TEST_P(ShapelessFuse, OperandsOfEqualTracedShapesBroadcastLater) {
  // Traced with equal shapes (no broadcast on the tape), called with shapes that broadcast.
  Fn f = [](const std::vector<Array>& a) { return std::vector<Array>{a[0] * a[1] + a[0]}; };
  expect_eager_results(f, {{{3, 4}, {3, 4}}, {{3, 4}, {1, 4}}, {{1, 4}, {5, 4}}, {{2, 1}, {2, 7}}}, GetParam());
}

TEST(Shapeless, NewShapesThatDoNotBroadcastRaise) {
  auto c = compile_flat([](const std::vector<Array>& a) { return std::vector<Array>{a[0] + a[1]}; }, shapeless());
  c({zeros({4, 8}), zeros({8})});
  EXPECT_THROW_MSG(c({zeros({4, 8}), zeros({5})}), ShapeError,
                   "compile(shapeless): the new input shapes do not fit the trace: Binary(Add): shapes [4,8] and [5] "
                   "cannot be broadcast together (function 'compiled')");
}

TEST(Shapeless, NaNAndInfinitiesMatchEager) {
  Fn f = [](const std::vector<Array>& a) { return std::vector<Array>{sqrt(a[0]) * a[1] - log(a[0] + 1.0f)}; };
  auto c = compile_flat(f, shapeless());
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int n : {3, 6}) {
    std::vector<float> v;
    for (int i = 0; i < 2 * n; ++i) v.push_back(i % 4 == 0 ? nan : i % 4 == 1 ? inf : i % 4 == 2 ? -inf : i - 2.5f);
    std::vector<Array> in{Array(v, {2, n}), Array(std::vector<float>(n, -0.0f), {n})};
    EXPECT_TRUE(bit_equal(c(in)[0], f(in)[0]));
  }
  EXPECT_EQ(c.stats().traces, 1u);
}

// ---- Reductions --------------------------------------------------------------------------------

TEST_P(ShapelessFuse, ReductionsFollowNewShapes) {
  for (bool keep : {false, true}) {
    Fn f = [keep](const std::vector<Array>& a) {
      const Array& x = a[0];
      return std::vector<Array>{sum(x, {1}, keep),  mean(x, {1}, keep), max(x, {0}, keep),
                                min(x, {0, 2}, keep), prod(x, {2}, keep), mean(x, {}, keep),
                                var(x, {1}, keep),   std(x, {0, 1}, keep, 1), logsumexp(x, {2}, keep)};
    };
    expect_eager_results(f, {{{2, 3, 4}}, {{5, 7, 2}}, {{1, 9, 3}}, {{4, 1, 6}}}, GetParam());
  }
}

TEST(Shapeless, MeanDividesByTheNewCount) {
  auto c = compile([](const Array& x) { return mean(x, {1}); }, shapeless());
  EXPECT_EQ(c(ones({2, 4})).to_vector<float>(), (std::vector<float>{1, 1}));
  Array x = reshape(arange(0, 30, 1, float32), {3, 10});
  Array m = c(x);
  EXPECT_EQ(m.shape(), (Shape{3}));
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{4.5f, 14.5f, 24.5f}));
  EXPECT_EQ(c.stats().traces, 1u);
}

TEST(Shapeless, ReductionsTracedOverSizeOneAxesStillReduce) {
  Fn f = [](const std::vector<Array>& a) {
    const Array& x = a[0];
    return std::vector<Array>{sum(x, {1}),  mean(x, {1}, true),      max(x, {1}), var(x, {1}), argmax(x, 1),
                              sum(x, {0, 1}), softmax(x, {-1}), x - mean(x, {1}, true)};
  };
  // Axis 1 has size 1 in the trace; later calls reduce over 7 and 3 elements.
  expect_eager_results(f, {{{4, 1}}, {{4, 7}}, {{2, 3}}, {{1, 1}}});
  Fn g = [](const std::vector<Array>& a) {
    return std::vector<Array>{softmax(a[0], {-1}), a[0] - mean(a[0], {1}, true)};
  };
  expect_eager_results(g, {{{4, 1}}, {{4, 7}}, {{2, 3}}}, true);
  auto c = compile([](const Array& x) { return sum(x, {1}); }, shapeless());
  c(ones({4, 1}));
  Array s = c(ones({4, 7}));
  EXPECT_EQ(s.shape(), (Shape{4}));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{7, 7, 7, 7}));
}

TEST(Shapeless, MeanAndVarAreBitIdenticalToSumOverCount) {
  // The Reduce(mean) kernel divides in the kernel with the scalar math of divide.
  for (Shape s : {Shape{5, 37}, Shape{3, 1000}, Shape{64, 3}}) {
    Array x = random_array(s, float32, -3, 3, 3);
    float n = static_cast<float>(s[1]);
    EXPECT_TRUE(bit_equal(mean(x, {1}), sum(x, {1}) / Array(n)));
    Array xd = astype(x, float64);
    Array d = xd - sum(xd, {1}, true) / Array(static_cast<double>(s[1]));
    EXPECT_TRUE(bit_equal(var(xd, {1}, false, 1), sum(d * d, {1}) / Array(static_cast<double>(s[1] - 1))));
  }
}

// ---- Matmul, compositions, convolutions ---------------------------------------------------------

TEST_P(ShapelessFuse, MatmulFollowsBatchAndOuterSizes) {
  Array w = random_array({6, 3}, float32, -1, 1, 11);
  Fn f = [&](const std::vector<Array>& a) {
    return std::vector<Array>{matmul(a[0], w) + 1.0f, matmul(a[0], a[1])};
  };
  expect_eager_results(f, {{{2, 4, 6}, {6, 5}}, {{3, 1, 6}, {6, 2}}, {{1, 7, 6}, {6, 1}}, {{5, 2, 6}, {6, 9}}},
                       GetParam());
  Fn vec = [](const std::vector<Array>& a) {
    return std::vector<Array>{matmul(a[0], a[1]), matmul(a[1], transpose(a[0]))};
  };
  expect_eager_results(vec, {{{4, 3}, {3}}, {{2, 5}, {5}}, {{7, 2}, {2}}}, GetParam());
}

TEST_P(ShapelessFuse, SoftmaxLayerNormAndFriends) {
  Array weight = random_array({8}, float32, 0.5, 1.5, 21), bias = random_array({8}, float32, -1, 1, 22);
  // Every kernel of a fused run is generated and built once: the fused run takes the main ones.
  const bool fused = GetParam();
  Fn f = [&](const std::vector<Array>& a) {
    const Array& x = a[0];
    if (fused) return std::vector<Array>{softmax(x, {-1}), layer_norm(x, weight, bias, 1e-5)};
    return std::vector<Array>{softmax(x, {-1}), log_softmax(x, {0}), layer_norm(x, weight, bias, 1e-5),
                              rms_norm(x, weight, 1e-6), gelu(x), gelu(x, true), silu(x)};
  };
  expect_eager_results(f, {{{4, 8}}, {{3, 8}}, {{1, 8}}, {{2, 5, 8}}}, GetParam(), 2);
  Fn g = [](const std::vector<Array>& a) {
    return std::vector<Array>{layer_norm(a[0], std::nullopt, std::nullopt, 1e-5), softmax(a[0], {0, 1})};
  };
  expect_eager_results(g, {{{4, 8}}, {{3, 5}}, {{6, 1}}, {{1, 16}}}, GetParam());
  if (!fused) expect_eager_results(g, {{{4, 8}}, {{3, 5}}}, false, 1, float16);
}

TEST(Shapeless, ConvolutionAndPoolingFollowSpatialSizes) {
  Array w = random_array({4, 3, 3, 3}, float32, -1, 1, 31);
  Fn f = [&](const std::vector<Array>& a) {
    Array y = conv2d(a[0], w, {2, 1}, {1, 1});
    PoolOptions p;
    p.kernel = {2, 2};
    p.strides = {2, 2};
    p.ceil_mode = true;
    return std::vector<Array>{relu(y), max_pool(y, p), avg_pool(a[0], {{3, 3}, {1, 1}, {1, 1}, {1, 1}})};
  };
  expect_eager_results(f, {{{1, 3, 8, 8}}, {{2, 3, 9, 5}}, {{3, 3, 4, 11}}});
}

TEST(Shapeless, OtherShapeFollowingPrimitives) {
  Fn f = [](const std::vector<Array>& a) {
    const Array& x = a[0];
    auto [v, i] = topk(x, 2, 1);
    return std::vector<Array>{transpose(x),
                              concatenate({x, x * 2.0f}, 1),
                              pad(x, {{1, 2}, {0, 1}}),
                              cumsum(x, 1),
                              sort(x, 0),
                              argsort(x, 1),
                              v,
                              i,
                              take(x, Array(std::vector<int32_t>{0, 1, 0}, {3}), 1),
                              flatten(x),
                              expand_dims(x, 1) * 3.0f};
  };
  expect_eager_results(f, {{{3, 4}}, {{5, 2}}, {{2, 9}}});
}

TEST(Shapeless, ScatterUpdatesFollowTheIndices) {
  auto c = compile(
      [](const Array& x, const Array& idx, const Array& nd) {
        return std::make_pair(scatter(x, idx, Array(5.0f), 1, ScatterReduce::Add), scatter_nd(x, nd, Array(-1.0f)));
      },
      shapeless(false));
  auto run = [&](int64_t n, int64_t m, std::vector<int64_t> idx, Shape ishape, std::vector<int64_t> nd, Shape nshape) {
    Array x = random_array({n, m}, float32);
    Array i = Array(idx, ishape), j = Array(nd, nshape);
    auto [a, b] = c(x, i, j);
    EXPECT_TRUE(bit_equal(a, scatter(x, i, Array(5.0f), 1, ScatterReduce::Add)));
    EXPECT_TRUE(bit_equal(b, scatter_nd(x, j, Array(-1.0f))));
  };
  run(3, 4, {0, 2, 1}, {3, 1}, {0, 1, 2, 3}, {2, 2});
  run(5, 6, {0, 5, 1, 1, 2, 2, 3, 0, 4, 4}, {5, 2}, {4, 5, 0, 0, 1, 2}, {3, 2});
  run(2, 3, {2, 2}, {2, 1}, {1}, {1, 1});
  EXPECT_EQ(c.stats().traces, 1u);
}

// ---- Fused kernels ----------------------------------------------------------------------------

TEST(Shapeless, OneFusedKernelServesEveryShape) {
  std::string fused_dump;
  CompileOptions o = shapeless();
  o.tiered = false;  // the dump shows the fused tape (tiered, the first tape leaves it unfused)
  o.dump = [&](const std::string& pass, const std::string& text) {
    if (pass == "fuse") fused_dump = text;
  };
  auto c = compile([](const Array& x, const Array& b) { return tanh(x * 0.25f - b) * x + 1.0f; }, o);
  for (Shape s : {Shape{4, 8}, Shape{1, 8}, Shape{16, 3}, Shape{2, 1}, Shape{33, 17}, Shape{128, 64}}) {
    Array x = random_array(s, float32, -3, 3, static_cast<uint32_t>(s[0]));
    Array b = random_array({s[1]}, float32, -1, 1, 5);
    Array want = tanh(x * 0.25f - b) * x + 1.0f;
    Array got = c(x, b);
    ASSERT_EQ(got.shape(), s);
    EXPECT_TRUE(bit_equal(got, want)) << shape_to_string(s);
  }
  EXPECT_EQ(c.stats().traces, 1u);
  EXPECT_NE(fused_dump.find("Fused("), std::string::npos) << fused_dump;
}

// ---- Shapes are never stale; ranks, zero sizes ------------------------------------------------

TEST(Shapeless, NeverReturnsAStaleShape) {
  auto c = compile(
      [](const Array& x, const Array& y) {
        return std::make_tuple(x * 2.0f, sum(x, {0}), matmul(x, y), squeeze(mean(x, {1}, true), {1}), flatten(y));
      },
      shapeless());
  c(ones({4, 8}), ones({8, 2}));
  auto [a, b, m, s, f] = c(ones({3, 5}), ones({5, 7}));
  EXPECT_EQ(a.shape(), (Shape{3, 5}));
  EXPECT_EQ(b.shape(), (Shape{5}));
  EXPECT_EQ(m.shape(), (Shape{3, 7}));
  EXPECT_EQ(s.shape(), (Shape{3}));
  EXPECT_EQ(f.shape(), (Shape{35}));
  EXPECT_EQ(m.to_vector<float>(), std::vector<float>(21, 5.0f));
  EXPECT_EQ(c.stats().traces, 1u);
}

TEST(Shapeless, ANewRankTracesAgain) {
  std::vector<std::string> reasons;
  telemetry::Subscription sub("compile.cache.miss", [&](const telemetry::Event& e) { reasons.push_back(e.field("reason")); });
  auto c = compile([](const Array& x) { return sum(x * x, {-1}); }, shapeless());
  c(ones({4, 8}));
  c(ones({6, 3}));
  EXPECT_EQ(c(ones({2, 3, 4})).shape(), (Shape{2, 3}));
  EXPECT_EQ(c(ones({5, 2})).shape(), (Shape{5}));
  EXPECT_EQ(c.stats().traces, 2u);
  EXPECT_EQ(c.stats().hits, 2u);
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_EQ(reasons[1], "input 0: rank 2 -> 3");
}

TEST(Shapeless, ZeroSizeInputsAreTracedForTheirShape) {
  // Ops take other paths for empty arrays, so an empty input gets its own exact-shape entry.
  std::vector<std::string> reasons;
  telemetry::Subscription sub("compile.cache.miss", [&](const telemetry::Event& e) { reasons.push_back(e.field("reason")); });
  Fn f = [](const std::vector<Array>& a) { return std::vector<Array>{softmax(a[0], {-1}), logsumexp(a[0], {1})}; };
  auto c = compile_flat(f, shapeless(false));
  for (Shape s : {Shape{0, 4}, Shape{3, 4}, Shape{0, 4}, Shape{5, 2}, Shape{2, 0}}) {
    std::vector<Array> in{random_array(s, float32)};
    auto got = c(in), want = f(in);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(bit_equal(got[i], want[i])) << shape_to_string(s);
  }
  EXPECT_EQ(c.stats().traces, 3u);  // [0,4], rank 2, [2,0]
  ASSERT_EQ(reasons.size(), 3u);
  EXPECT_EQ(reasons[1], "input 0: shape [0,4] -> rank 2");
  EXPECT_EQ(reasons[2], "input 0: rank 2 -> shape [2,0]");
}

TEST(Shapeless, ReshapesThatInsertRemoveOrMergeAxesFollow) {
  Fn f = [](const std::vector<Array>& a) {
    const Array& x = a[0];
    return std::vector<Array>{expand_dims(x, {0, 2}), squeeze(expand_dims(x, 1), {1}), flatten(expand_dims(x, -1)),
                              reshape(sum(x, {1}, true), {-1}), mean(expand_dims(x, 0), {0, 2})};
  };
  expect_eager_results(f, {{{4, 8}}, {{3, 5}}, {{2, 2}}, {{7, 3}}});
}

TEST(Shapeless, ARemovedAxisThatWasOneMustStayOne) {
  auto c = compile([](const Array& x) { return squeeze(x) + 1.0f; }, shapeless());
  EXPECT_EQ(c(ones({1})).shape(), (Shape{}));
  EXPECT_EQ(c(full({1}, Array(4.0f))).item<float>(), 5.0f);
  EXPECT_THROW_MSG(c(ones({3})), ShapeError,
                   "reshape from [1] to [] (Reshape) removes axis 0, which had size 1 when traced, but the input is "
                   "now [3]");
}

// ---- Errors for primitives whose parameters fix a shape ---------------------------------------

template <class F>
void expect_trace_error(F f, const std::vector<Array>& inputs, const std::string& message) {
  for (auto fallback : {CompileFallback::Raise, CompileFallback::Eager}) {
    CompileOptions o = shapeless(false);
    o.fallback = fallback;
    auto c = compile_flat([&](const std::vector<Array>& a) { return std::vector<Array>{f(a)}; }, o, "fixed");
    EXPECT_THROW_MSG(c(inputs), ShapeError, message);
    EXPECT_THROW_MSG(c(inputs), ShapeError, message);  // not cached: traced again, fails again
    EXPECT_EQ(c.stats().traces, 2u);
    EXPECT_EQ(c.stats().hits, 0u);
  }
  // Without shapeless the same function compiles.
  CompileOptions po;
  po.fuse = false;
  auto plain = compile_flat([&](const std::vector<Array>& a) { return std::vector<Array>{f(a)}; }, po);
  EXPECT_TRUE(bit_equal(plain(inputs)[0], f(inputs)));
}

TEST(Shapeless, FixedShapePrimitivesFailTheTraceWithTheirNames) {
  Array x = random_array({4, 8}, float32);
  expect_trace_error([](auto& a) { return reshape(a[0], {8, 4}); }, {x},
                     "compile(shapeless): reshape from [4,8] to the fixed shape [8,4] (Reshape) cannot follow new "
                     "input shapes; only reshapes that insert or remove size-1 axes or merge adjacent axes "
                     "(expand_dims, squeeze, flatten) can; compile without shapeless to trace each shape (function "
                     "'fixed')");
  expect_trace_error([](auto& a) { return reshape(a[0], {2, 16}); }, {x},
                     "reshape from [4,8] to the fixed shape [2,16] (Reshape) cannot follow new input shapes");
  expect_trace_error([](auto& a) { return exp(broadcast_to(a[0], {3, 4, 8})); }, {x},
                     "compile(shapeless): broadcast_to from [4,8] to the fixed shape [3,4,8] (Broadcast) cannot "
                     "follow new input shapes; the broadcasts that element-wise ops and matmul make follow their "
                     "operands, an explicit broadcast_to does not");
  expect_trace_error([](auto& a) { return slice(a[0], {1, 0}, {3, 8}) * 2.0f; }, {x},
                     "compile(shapeless): slice of [4,8] to the fixed shape [2,8] (Slice) cannot follow new input "
                     "shapes");
  expect_trace_error([](auto& a) { return slice_update(a[0], Array(0.0f), {0, 0}, {1, 8}); }, {x},
                     "compile(shapeless): slice_update of a fixed region of [4,8] (SliceUpdate) cannot follow new "
                     "input shapes");
  expect_trace_error([](auto& a) { return random::uniform(a[1], {4, 8}) + a[0]; }, {x, random::key(3)},
                     "compile(shapeless): random bits of the fixed shape [4,8] (RandomBits) cannot follow new input "
                     "shapes");
}

TEST(Shapeless, ReshapesMadeAmbiguousBySizeOneAxesFailTheTrace) {
  Array x = random_array({4, 1}, float32);
  expect_trace_error([](auto& a) { return squeeze(a[0], {1}); }, {x},
                     "compile(shapeless): reshape from [4,1] to [4] (Reshape) cannot follow new input shapes; input "
                     "axes of size 1 in the trace make it ambiguous which axes it inserts, removes or merges; trace "
                     "with sizes other than 1");
  expect_trace_error([](auto& a) { return expand_dims(a[0], 2); }, {x}, "reshape from [4,1] to [4,1,1] (Reshape)");
}

TEST_P(ShapelessFuse, FixedShapeStepsOverFixedShapesAreFine) {
  // A total keeps its shape whatever the input's: reshaping, slicing and broadcasting it to fixed
  // shapes is no error.
  Fn f = [](const std::vector<Array>& a) {
    Array total = reshape(sum(a[0], {0, 1}, true), {1});
    Array wide = broadcast_to(total, {3}) * 2.0f;
    return std::vector<Array>{wide, slice(concatenate({wide, total}), {1}, {4}), a[0] - total};
  };
  expect_eager_results(f, {{{3, 4}}, {{6, 2}}, {{1, 1}}}, GetParam());
  // Broadcasts to a fixed shape of a captured array, and of a traced value whose shape cannot
  // change, keep that shape, also inside a fused kernel.
  Array c = random_array({8}, float32, -1, 1, 51);
  Fn g = [&](const std::vector<Array>& a) {
    Array t = broadcast_to(sum(a[0]) * 0.01f, {3, 4, 8});
    return std::vector<Array>{exp(broadcast_to(c, {3, 4, 8})) * a[0] - 1.0f, exp(t) * a[0] + t};
  };
  expect_eager_results(g, {{{4, 8}}, {{1, 8}}, {{4, 1}}, {{1, 1}}}, GetParam());
  auto compiled = compile_flat(g, shapeless(GetParam()));
  compiled({zeros({4, 8})});
  EXPECT_THROW_MSG(compiled({zeros({5, 8})}), ShapeError, "cannot be broadcast together");
}

TEST(Shapeless, ARankChangeOfAnInnerValueRaises) {
  // gather_nd's output rank depends on the indices' last axis: a new depth cannot replay.
  auto c = compile([](const Array& x, const Array& idx) { return gather_nd(x, idx); }, shapeless(false));
  Array x = random_array({3, 4}, float32);
  EXPECT_EQ(c(x, Array(std::vector<int64_t>{0, 1, 2, 3}, {2, 2})).shape(), (Shape{2}));
  EXPECT_EQ(c(x, Array(std::vector<int64_t>{0, 1, 2, 3, 1, 0}, {3, 2})).shape(), (Shape{3}));
  EXPECT_THROW_MSG(c(x, Array(std::vector<int64_t>{0, 1}, {2, 1})), ShapeError,
                   "compile(shapeless): GatherND(batch_dims=0) would change the rank of its output from 1 to 2 under "
                   "the new input shapes");
}

TEST(Shapeless, CalledFromManyThreadsWithDifferentShapes) {
  auto c = compile([](const Array& x) { return softmax(x * 2.0f, {-1}); }, shapeless(false));
  c(ones({2, 2}));
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        Array x = random_array({t + 1, i + 1}, float32, -3, 3, static_cast<uint32_t>(t * 100 + i));
        Array got = c(x);
        if (got.shape() != x.shape() || !bit_equal(got, softmax(x * 2.0f, {-1}))) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(c.stats().traces, 1u);
}

}  // namespace
}  // namespace smelt
