// The conv_layout pass: activations between float32 CPU convolutions stay in oneDNN's blocked
// layout, reorders only where a chain begins and ends; compiled == eager bit for bit, at 1, 2 and
// 3 threads.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "compile_helpers.h"
#include "smelt/memory.h"
#include "src/backend/cpu/dnnl.h"
#include "src/backend/cpu/elementwise_math.h"
#include "src/backend/cpu/kernels.h"
#include "src/core/node.h"
#include "src/core/node_state.h"

namespace smelt {
namespace {

using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

Array rand(const Shape& shape, uint32_t seed, double lo = -2, double hi = 2) {
  return test::random_array(shape, float32, lo, hi, seed);
}

int blocked_convs(const compiler::Tape& tape) {
  int n = 0;
  for (const auto* s : test::steps_of(tape, PrimKind::Conv)) {
    const auto& p = s->prim.get<ConvParams>();
    n += p.src_block != 0 || p.dst_block != 0;
  }
  return n;
}

/// Convs that read row-major data and write blocked data or the other way round: where a
/// compiled call moves an activation into or out of the blocked layout. (A conv from one block
/// size to another, as on AVX-512 from 16 to 32 channels, is not counted: oneDNN writes its output
/// in the other block itself.)
int layout_changes(const compiler::Tape& tape) {
  int n = 0;
  for (const auto* s : test::steps_of(tape, PrimKind::Conv)) {
    const auto& p = s->prim.get<ConvParams>();
    n += (p.src_block == 0) != (p.dst_block == 0);
  }
  return n;
}

// Three convolutions with a per-channel scale and shift (an unfolded BatchNorm) and a ReLU, a
// residual add and a pooling between them; weights and BatchNorm parameters are captured arrays
// (constants of the tape, as ONNX initializers are). `max`: max pooling, else average pooling
// with padding counted.
struct Chain {
  Array w1, w2, w3, scale, shift, b3;
  bool max = true;

  std::vector<Array> operator()(const std::vector<Array>& in) const {
    const int64_t c = w1.shape(0);
    Array y1 = relu(conv2d(in[0], w1, {1, 1}, {1, 1}) * reshape(scale, {1, c, 1, 1}) + reshape(shift, {c, 1, 1}));
    Array y2 = conv2d(y1, w2, {1, 1}, {1, 1}) + y1;  // a residual: the conv_epilogue pass takes it in
    PoolOptions po;
    po.kernel = {2, 2};
    po.strides = {2, 2};
    if (!max) {
      po.kernel = {3, 3};
      po.padding_lo = po.padding_hi = {1, 1};
      po.count_include_pad = true;
    }
    Array p = max ? max_pool(y2, po) : avg_pool(y2, po);
    return {conv2d(p, w3, {1, 1}, {1, 1}) + reshape(b3, {1, w3.shape(0), 1, 1})};
  }
};

Chain make_chain(int64_t in_ch, int64_t ch, uint32_t seed, bool max = true) {
  return {rand({ch, in_ch, 3, 3}, seed, -0.3, 0.3), rand({ch, ch, 3, 3}, seed + 1, -0.2, 0.2),
          rand({ch, ch, 3, 3}, seed + 2, -0.2, 0.2),  rand({ch}, seed + 3, 0.5, 1.5),
          rand({ch}, seed + 4),                        rand({ch}, seed + 5),
          max};
}

TEST(ConvLayout, AChainOfThreeConvsReordersTwice) {
  const Chain chain = make_chain(16, 32, 1);
  const std::vector<Array> inputs{rand({2, 16, 16, 16}, 10)};
  compiler::Tape tape = test::optimized_tape(chain, inputs);
  if (!cpu::dnnl_enabled()) {
    EXPECT_EQ(blocked_convs(tape), 0) << "without oneDNN the pass does nothing";
    return;
  }
  const std::string text = compiler::dump_tape(tape);
  EXPECT_EQ(blocked_convs(tape), 3) << text;
  EXPECT_EQ(layout_changes(tape), 2) << text;  // in at the first conv, out at the last
  ASSERT_EQ(test::steps_of(tape, PrimKind::Pool).size(), 1u);
  EXPECT_NE(test::steps_of(tape, PrimKind::Pool)[0]->prim.get<PoolParams>().block, 0) << text;
  for (const auto* s : test::steps_of(tape, PrimKind::Transpose)) ADD_FAILURE() << "a transpose: " << s->prim.str();

  // Counted where they run: eager reorders in and out of each of the 3 convolutions (its
  // residual is a separate add); the compiled call twice.
  const Fn fn = chain;
  auto f = compile_flat(fn);
  f(inputs);  // the first call plans the primitives
  int64_t before = cpu::dnnl_activation_reorders();
  const auto want = fn(inputs);
  eval(want);
  EXPECT_EQ(cpu::dnnl_activation_reorders() - before, 6);
  before = cpu::dnnl_activation_reorders();
  const auto got = f(inputs);
  eval(got);
  EXPECT_EQ(cpu::dnnl_activation_reorders() - before, 2);
  EXPECT_TRUE(test::bit_equal(got[0], want[0]));

  // With the pass off, every conv reorders its activations in and out again, and the second its
  // residual into its layout where the residual is a post-op (brgemm kernels; without AVX-512 it
  // is declined and added after the convolution).
  CompileOptions off;
  off.disabled_passes = {"conv_layout"};
  auto g = compile_flat(fn, off);
  g(inputs);
  before = cpu::dnnl_activation_reorders();
  const auto plain = g(inputs);
  eval(plain);
  const int64_t off_reorders = cpu::dnnl_activation_reorders() - before;
  EXPECT_TRUE(off_reorders == 6 || off_reorders == 7) << off_reorders;
  EXPECT_TRUE(test::bit_equal(plain[0], want[0]));
}

// The same primitives run on the same values, and the element-wise steps and the blocked pooling
// compute what they compute on row-major data: bit for bit, including NaN and infinities, and the
// same bits at every thread count (compiled under one count, called under others, or compiled
// under each).
TEST(ConvLayout, CompiledEqualsEagerBitForBitAtEveryThreadCount) {
  for (bool max : {true, false}) {
    SCOPED_TRACE(max ? "max pooling" : "average pooling");
    const Chain chain = make_chain(8, 32, 20, max);
    std::vector<float> x = rand({3, 8, 14, 14}, 30).to_vector<float>();
    x[17] = std::numeric_limits<float>::quiet_NaN();
    x[400] = std::numeric_limits<float>::infinity();
    x[901] = -std::numeric_limits<float>::infinity();
    const std::vector<Array> inputs{Array(x, {3, 8, 14, 14})};
    const Fn fn = chain;
    const int saved = cpu_threads();
    set_cpu_threads(1);
    const auto reference = fn(inputs);
    auto compiled_at_1 = compile_flat(fn);
    for (int threads : {1, 2, 3}) {
      set_cpu_threads(threads);
      const auto eager = fn(inputs);
      EXPECT_TRUE(test::bit_equal(eager[0], reference[0])) << threads << " threads, eager";
      EXPECT_TRUE(test::bit_equal(compiled_at_1(inputs)[0], reference[0])) << threads << " threads, compiled at 1";
      auto here = compile_flat(fn);
      EXPECT_TRUE(test::bit_equal(here(inputs)[0], reference[0])) << threads << " threads, compiled here";
    }
    set_cpu_threads(saved);
  }
}

// The blocked pooling against the row-major one, bit for bit, on the geometries it must match:
// 1-D, 2-D and 3-D, padding, dilation, ceil mode, average pooling with and without the padding
// counted, and a grouped (depthwise) convolution after it.
TEST(ConvLayout, BlockedPoolingMatchesRowMajorPooling) {
  struct Case {
    int spatial;
    PoolOptions pool;
    bool max;
  };
  const std::vector<Case> cases = {
      {2, {{3, 3}, {2, 2}, {1, 1}, {1, 1}, {}, false, false}, true},        // ResNet's stem pooling
      {2, {{2, 2}, {2, 2}, {}, {}, {}, true, false}, true},                 // ceil mode, odd size
      {2, {{3, 3}, {1, 1}, {}, {}, {2, 2}, false, false}, true},            // dilated
      {2, {{3, 3}, {2, 2}, {1, 1}, {1, 1}, {}, false, false}, false},       // padding not counted
      {2, {{2, 3}, {1, 2}, {0, 1}, {1, 2}, {}, true, true}, false},         // asymmetric, ceil, counted
      {1, {{3}, {2}, {1}, {1}, {}, false, false}, true},
      {3, {{2, 2, 2}, {2, 2, 2}, {}, {}, {}, false, false}, false},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE("case " + std::to_string(i));
    // w2: depthwise (32 groups) in 2-D; in 1-D and 3-D oneDNN's depthwise kernels want another
    // layout than the first convolution writes, so a dense one follows there.
    const int64_t groups = c.spatial == 2 ? 32 : 1;
    Shape x_shape{2, 16}, w1{32, 16}, w2{32, 32 / groups};
    for (int d = 0; d < c.spatial; ++d) {
      x_shape.push_back(c.spatial == 3 ? 6 : 11);
      w1.push_back(3);
      w2.push_back(3);
    }
    const Array a = rand(w1, 70 + i, -0.2, 0.2), b = rand(w2, 80 + i, -0.5, 0.5);
    ConvOptions same;
    same.padding_lo = same.padding_hi = std::vector<int64_t>(c.spatial, 1);
    ConvOptions depthwise = same;
    depthwise.groups = groups;
    const Fn fn = [=](const std::vector<Array>& in) {
      Array y = relu(conv(in[0], a, same));
      Array p = c.max ? max_pool(y, c.pool) : avg_pool(y, c.pool);
      return std::vector<Array>{conv(p, b, depthwise)};
    };
    std::vector<float> x = rand(x_shape, 90 + i).to_vector<float>();
    x[3] = std::numeric_limits<float>::quiet_NaN();
    const std::vector<Array> inputs{Array(x, x_shape)};
    const compiler::Tape tape = test::optimized_tape(fn, inputs);
    if (cpu::dnnl_enabled()) {
      EXPECT_NE(test::steps_of(tape, PrimKind::Pool)[0]->prim.get<PoolParams>().block, 0) << compiler::dump_tape(tape);
    }
    EXPECT_TRUE(test::bit_equal(compile_flat(fn)(inputs)[0], fn(inputs)[0]));
  }
}

// Blocked max pooling (the row kernel with the block of 8 or 16 channels in registers, built for
// each instruction set) keeps pool()'s comparison: NaN wins and stays, -inf and +inf compare as
// values. The convolution before it has no Relu, so NaN and inf reach the pooling.
TEST(ConvLayout, BlockedMaxPoolingKeepsNaNAndInfinities) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF)";
  const Array a = rand({32, 16, 3, 3}, 60, -0.2, 0.2), b = rand({32, 32, 3, 3}, 61, -0.2, 0.2);
  ConvOptions same;
  same.padding_lo = same.padding_hi = {1, 1};
  PoolOptions pool;
  pool.kernel = {2, 2};
  pool.strides = {2, 2};
  const Fn fn = [=](const std::vector<Array>& in) {
    return std::vector<Array>{conv(max_pool(conv(in[0], a, same), pool), b, same)};
  };
  std::vector<float> x = rand({2, 16, 12, 12}, 62).to_vector<float>();
  x[3] = std::numeric_limits<float>::quiet_NaN();                // a NaN in the first window rows
  x[12 * 12 * 5 + 40] = std::numeric_limits<float>::infinity();  // +inf and -inf in others
  x[12 * 12 * 16 + 100] = -std::numeric_limits<float>::infinity();
  const std::vector<Array> inputs{Array(x, Shape{2, 16, 12, 12})};
  const compiler::Tape tape = test::optimized_tape(fn, inputs);
  ASSERT_NE(test::steps_of(tape, PrimKind::Pool)[0]->prim.get<PoolParams>().block, 0) << compiler::dump_tape(tape);
  const Array want = fn(inputs)[0];
  // The NaN reaches the output (through the pooling): the comparison below sees what it does.
  const std::vector<float> w = want.to_vector<float>();
  ASSERT_TRUE(std::any_of(w.begin(), w.end(), [](float v) { return std::isnan(v); }));
  EXPECT_TRUE(test::bit_equal(compile_flat(fn)(inputs)[0], want));
}

// Max pooling of a channels-last activation (the blocked layout with b = C, which oneDNN picks for
// some convolutions: the bundled CNN's last one writes b = 64) runs the row kernels in chunks of
// 32, 16, 8 or 4 channels where one divides C (64 and 72 in chunks, 6 through pool_blocked's
// general loop); every block gives the row-major pooling's bits on every instruction set the CPU
// has (the row kernels are built for each), through a Pool step made directly. The inputs hold
// what the kernels' maximum-alone rows must hand to pool()'s exact rule: NaN in a window's first
// and in its last position, +inf and -inf, a +0/-0 tie (the first stays) and a window of -inf.
TEST(ConvLayout, ChannelsLastMaxPoolingOfAnyBlockMatchesRowMajorPooling) {
  struct Window {
    std::vector<int64_t> kernel, strides, pad, dilations;
  };
  const std::vector<Window> windows = {{{2, 2}, {2, 2}, {0, 0}, {1, 1}},
                                       {{3, 3}, {2, 2}, {1, 1}, {1, 1}},
                                       {{3, 2}, {1, 2}, {1, 0}, {2, 1}}};
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (int64_t c : {4, 8, 12, 20, 24, 64, 72, 6}) {
    std::vector<float> x = rand({2, c, 9, 10}, 200 + static_cast<uint32_t>(c)).to_vector<float>();
    auto at = [&](int64_t n, int64_t ch, int64_t h, int64_t w) -> float& {
      return x[static_cast<size_t>(((n * c + ch) * 9 + h) * 10 + w)];
    };
    at(0, 0, 0, 5) = nan;          // a 2 x 2 window's first position
    at(0, c - 1, 5, 3) = nan;      // another's last
    at(1, 0, 0, 7) = inf;
    at(1, 0, 9 - 1, 1) = -inf;
    at(1, 1, 2, 2) = -0.0f;        // a window of -0, +0 and negatives: -0 comes first and stays
    at(1, 1, 2, 3) = 0.0f;
    at(1, 1, 3, 2) = -1.0f;
    at(1, 1, 3, 3) = -2.0f;
    for (int64_t h : {6, 7})
      for (int64_t w : {4, 5}) at(0, c / 2, h, w) = -inf;  // a window of -inf alone
    const Array rows(x, Shape{2, c, 9, 10});
    // [N, C, H, W] -> [N, 1, H, W, C]: the blocked layout with one block of all C channels.
    const Array blocked = reshape(copy(transpose(rows, {0, 2, 3, 1})), {2, 1, 9, 10, c});
    eval({blocked});
    for (size_t i = 0; i < windows.size(); ++i) {
      const Window& w = windows[i];
      PoolOptions o;
      o.kernel = w.kernel;
      o.strides = w.strides;
      o.padding_lo = o.padding_hi = w.pad;
      o.dilations = w.dilations;
      const Array want = max_pool(rows, o);
      PoolParams p{PoolKind::Max, w.kernel, w.strides, w.pad, w.pad, w.dilations, false};
      p.block = c;
      const Shape out{2, 1, want.shape()[2], want.shape()[3], c};
      for (cpu::CpuIsa isa : {cpu::CpuIsa::Baseline, cpu::CpuIsa::Avx2, cpu::CpuIsa::Avx512}) {
        if (isa > cpu::cpu_isa_supported()) continue;
        SCOPED_TRACE("C " + std::to_string(c) + ", window " + std::to_string(i) + ", " + cpu::cpu_isa_name(isa));
        std::vector<Array> got{make_array(out, float32, Device::cpu(), Primitive{}, {})};
        cpu::eval_pool_on_isa(p, {blocked}, got, isa);
        detail::set_evaluated(got[0].node());
        EXPECT_TRUE(test::bit_equal(reshape(transpose(got[0], {0, 1, 4, 2, 3}), want.shape()), want));
      }
      // And through a step, on the instruction set the process uses.
      const Array step = make_array(out, float32, Device::cpu(), make_prim(PrimKind::Pool, p), {blocked});
      EXPECT_TRUE(test::bit_equal(reshape(transpose(step, {0, 1, 4, 2, 3}), want.shape()), want));
    }
  }
}

// A chain that ends in a pooling read by another kind of step (the CNN's global average pool, a
// flatten): the pooling still runs blocked, and its output is copied to row-major for that reader
// (a transpose view and a reshape), so the last convolution writes blocked data and no pooling
// runs row-major. Bit for bit, NaN and infinities included, max and average pooling, returned
// and reduced.
TEST(ConvLayout, APoolingsRowMajorReadersGetACopyOfItsOutput) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF)";
  const Array w1 = rand({16, 8, 3, 3}, 100, -0.3, 0.3), w2 = rand({32, 16, 3, 3}, 101, -0.2, 0.2);
  PoolOptions pool;
  pool.kernel = {2, 2};
  pool.strides = {2, 2};
  for (bool max : {true, false}) {
    SCOPED_TRACE(max ? "max pooling" : "average pooling");
    const Fn fn = [=](const std::vector<Array>& in) {
      Array y = relu(conv2d(relu(conv2d(in[0], w1, {1, 1}, {1, 1})), w2, {1, 1}, {1, 1}));
      Array p = max ? max_pool(y, pool) : avg_pool(y, pool);
      return std::vector<Array>{mean(p, {2, 3}), reshape(p, {p.shape(0), -1})};
    };
    std::vector<float> x = rand({3, 8, 12, 12}, 102).to_vector<float>();
    x[5] = std::numeric_limits<float>::quiet_NaN();
    x[12 * 12 * 8 + 30] = std::numeric_limits<float>::infinity();
    x[12 * 12 * 9 + 31] = -std::numeric_limits<float>::infinity();
    const std::vector<Array> inputs{Array(x, Shape{3, 8, 12, 12})};
    const compiler::Tape tape = test::optimized_tape(fn, inputs);
    const std::string text = compiler::dump_tape(tape);
    ASSERT_EQ(test::steps_of(tape, PrimKind::Pool).size(), 1u) << text;
    EXPECT_NE(test::steps_of(tape, PrimKind::Pool)[0]->prim.get<PoolParams>().block, 0) << text;
    EXPECT_EQ(layout_changes(tape), 1) << text;  // into the blocked layout at the first conv only
    EXPECT_EQ(test::steps_of(tape, PrimKind::Transpose).size(), 1u) << text;  // one copy for both readers
    const auto want = fn(inputs);
    const auto got = compile_flat(fn)(inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(test::bit_equal(got[i], want[i])) << "output " << i;
  }
}

/// Equal bits, except that a NaN may be any NaN: x86 keeps the first operand's payload in
/// NaN * NaN, and GCC orders the operands of a commutative multiply differently in the eager
/// kernel's broadcast loop and its contiguous loop, so the same product of two NaNs has another
/// sign through a broadcast [N, C, 1, 1] operand than through a full-shape one.
::testing::AssertionResult equal_but_nan_payloads(const Array& got, const Array& want) {
  const std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
  if (g.size() != w.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) && std::isnan(w[i])) continue;
    if (std::memcmp(&g[i], &w[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << g[i] << " against " << w[i];
  }
  return ::testing::AssertionSuccess();
}

// A squeeze-and-excitation block (MobileNetV3's): a global pooling of the blocked activation (a
// mean, max or sum over the spatial axes) reads it in the blocked layout through a transposed
// view, and the per-sample, per-channel scale it gives multiplies it there, so the chain keeps
// its layout; compiled == eager bit for bit at batch 1 and 3, at 1, 2 and 3 threads (and with
// NaN and infinities in the input, up to the payloads of NaN * NaN, see above).
TEST(ConvLayout, ASqueezeAndExcitationBlockStaysBlocked) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF)";
  const Array w1 = rand({16, 8, 3, 3}, 60, -0.3, 0.3), w2 = rand({16, 16, 1, 1}, 61, -0.3, 0.3);
  const Array f1 = rand({4, 16, 1, 1}, 62, -0.5, 0.5), f2 = rand({16, 4, 1, 1}, 63, -0.5, 0.5);
  const Array w3 = rand({16, 16, 1, 1}, 64, -0.3, 0.3);
  for (int pooling = 0; pooling < 3; ++pooling) {
    const Fn fn = [=](const std::vector<Array>& in) {
      Array y = conv2d(relu(conv2d(in[0], w1, {1, 1}, {1, 1})), w2);
      Array g = pooling == 0 ? mean(y, {2, 3}, true) : pooling == 1 ? max(y, {2, 3}, true) : sum(y, {2, 3}, true);
      Array scale = sigmoid(conv2d(relu(conv2d(g, f1)), f2));
      return std::vector<Array>{conv2d(y * scale, w3)};
    };
    for (int64_t n : {1, 3}) {
      SCOPED_TRACE("pooling " + std::to_string(pooling) + ", batch " + std::to_string(n));
      const std::vector<Array> inputs{rand({n, 8, 10, 10}, 65)};
      std::vector<float> x = inputs[0].to_vector<float>();
      x[7] = std::numeric_limits<float>::quiet_NaN();
      x[150] = std::numeric_limits<float>::infinity();
      x[x.size() - 3] = -std::numeric_limits<float>::infinity();
      const std::vector<Array> special{Array(x, {n, 8, 10, 10})};
      const compiler::Tape tape = test::optimized_tape(fn, inputs);
      const std::string text = compiler::dump_tape(tape);
      const auto reduces = test::steps_of(tape, PrimKind::Reduce);
      ASSERT_EQ(reduces.size(), 1u) << text;
      // The reduction reads the transposed view of the blocked activation (no copy to row-major).
      const auto transposes = test::steps_of(tape, PrimKind::Transpose);
      ASSERT_EQ(transposes.size(), 1u) << text;
      EXPECT_EQ(reduces[0]->inputs[0], transposes[0]->outputs[0]) << text;
      EXPECT_EQ(tape.values[transposes[0]->inputs[0]].shape.size(), 5u) << text;
      const int saved = cpu_threads();
      set_cpu_threads(1);
      const auto want = fn(inputs), want_special = fn(special);
      auto f = compile_flat(fn);
      for (int threads : {1, 2, 3}) {
        set_cpu_threads(threads);
        EXPECT_TRUE(test::bit_equal(f(inputs)[0], want[0])) << threads << " threads";
        EXPECT_TRUE(equal_but_nan_payloads(f(special)[0], want_special[0])) << threads << " threads, NaN and inf";
      }
      set_cpu_threads(saved);
    }
  }
}

// What must stay row-major: a value the function returns, a value a non-element-wise step reads
// (a reduction), channels that are not a multiple of a block, float64.
TEST(ConvLayout, ValuesOtherStepsReadStayRowMajor) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF)";
  const Array w1 = rand({16, 16, 3, 3}, 40, -0.2, 0.2), w2 = rand({16, 16, 3, 3}, 41, -0.2, 0.2);
  const std::vector<Array> inputs{rand({1, 16, 10, 10}, 42)};
  // The middle value is returned too: both convolutions keep row-major outputs.
  const Fn returned = [=](const std::vector<Array>& in) {
    Array y = relu(conv2d(in[0], w1, {1, 1}, {1, 1}));
    return std::vector<Array>{y, conv2d(y, w2, {1, 1}, {1, 1})};
  };
  compiler::Tape t = test::optimized_tape(returned, inputs);
  EXPECT_EQ(blocked_convs(t), 0) << compiler::dump_tape(t);
  // A reduction reads the ReLU's output: it stays row-major as well.
  const Fn reduced = [=](const std::vector<Array>& in) {
    Array y = relu(conv2d(in[0], w1, {1, 1}, {1, 1}));
    return std::vector<Array>{conv2d(y, w2, {1, 1}, {1, 1}) + sum(y, {1}, true)};
  };
  t = test::optimized_tape(reduced, inputs);
  EXPECT_EQ(blocked_convs(t), 0) << compiler::dump_tape(t);
  for (const Fn& fn : {returned, reduced}) {
    const auto want = fn(inputs);
    const auto got = compile_flat(fn)(inputs);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(test::bit_equal(got[i], want[i])) << i;
  }
  // A residual that is an input (row-major) of a convolution: its output stays row-major too.
  const Fn residual = [=](const std::vector<Array>& in) {
    Array y = relu(conv2d(in[0], w1, {1, 1}, {1, 1}));
    return std::vector<Array>{relu(conv2d(y, w2, {1, 1}, {1, 1}) + in[0])};
  };
  const auto want = residual(inputs);
  EXPECT_TRUE(test::bit_equal(compile_flat(residual)(inputs)[0], want[0]));
  // 12 channels (not a multiple of 8 or 16), and float64: compiled == eager whatever the pass does.
  const Chain odd = make_chain(4, 12, 50);
  const std::vector<Array> odd_inputs{rand({2, 4, 9, 9}, 51)};
  const Fn odd_fn = odd;
  EXPECT_TRUE(test::bit_equal(compile_flat(odd_fn)(odd_inputs)[0], odd_fn(odd_inputs)[0]));
  const Fn f64 = [=](const std::vector<Array>& in) {
    Array a = astype(w1, float64), b = astype(w2, float64);
    return std::vector<Array>{conv2d(relu(conv2d(in[0], a, {1, 1}, {1, 1})), b, {1, 1}, {1, 1})};
  };
  const std::vector<Array> d_inputs{astype(inputs[0], float64)};
  EXPECT_EQ(blocked_convs(test::optimized_tape(f64, d_inputs)), 0);
}

}  // namespace
}  // namespace smelt
