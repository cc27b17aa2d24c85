// The conv_epilogue pass (bias and residual adds fold into float32 CPU convolutions as oneDNN
// post-ops) and the conv_prepack pass (constant weights reordered at compile time): compiled ==
// eager bit for bit, and what must not change stays.
#include <cmath>
#include <limits>

#include "compile_helpers.h"
#include "smelt/memory.h"
#include "src/backend/cpu/dnnl.h"

namespace smelt {
namespace {

using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

Array rand(const Shape& shape, uint32_t seed, Dtype dtype = float32, double lo = -2, double hi = 2) {
  return test::random_array(shape, dtype, lo, hi, seed);
}

/// Convs on the optimized tape whose parameters carry `adds` fused adds.
int convs_with_adds(const compiler::Tape& tape, size_t adds) {
  int n = 0;
  for (const auto* s : test::steps_of(tape, PrimKind::Conv)) n += s->prim.get<ConvParams>().adds.size() == adds;
  return n;
}

int adds_on(const compiler::Tape& tape) {
  int n = 0;
  for (const auto* s : test::steps_of(tape, PrimKind::Binary)) n += s->prim.get<BinaryParams>().op == BinaryOp::Add;
  return n;
}

/// Compiled (every pass, then with conv_epilogue off) against eager, bit for bit.
void expect_bit_exact(const Fn& fn, const std::vector<Array>& inputs) {
  const auto want = fn(inputs);
  for (bool epilogue : {true, false}) {
    SCOPED_TRACE(epilogue ? "conv_epilogue on" : "conv_epilogue off");
    CompileOptions o;
    if (!epilogue) o.disabled_passes = {"conv_epilogue"};
    auto f = compile_flat(fn, o);
    const auto got = f(inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(test::bit_equal(got[i], want[i])) << "output " << i;
  }
}

// A ResNet basic block: relu(conv(x) + bias + residual), then a second conv with its bias.
Fn resnet_block() {
  return [](const std::vector<Array>& in) {
    const int64_t c = in[2].size();
    Array y = conv2d(in[0], in[1], {1, 1}, {1, 1}) + reshape(in[2], {1, c, 1, 1}) + in[3];
    Array z = relu(y);
    Array out = conv2d(z, in[4], {1, 1}, {1, 1}) + reshape(in[5], {c, 1, 1});
    return std::vector<Array>{relu(out)};
  };
}

/// Whether oneDNN adds the bias of an n x c x hw x hw 3x3 convolution (padding 1) in its own kernel
/// (dnnl_conv_bias_free: its brgemm kernels, AVX-512), where conv_epilogue absorbs every bias.
bool bias_free(int64_t n, int64_t c, int64_t hw) {
  ConvParams p{{1, 1}, {1, 1}, {1, 1}, {1, 1}, 1};
  return cpu::dnnl_conv_bias_free(cpu::dnnl_conv_geometry({n, c, hw, hw}, {c, c, 3, 3}, {n, c, hw, hw}, p));
}

std::vector<Array> block_inputs(int64_t n, int64_t c, int64_t hw, uint32_t seed) {
  return {rand({n, c, hw, hw}, seed), rand({c, c, 3, 3}, seed + 1, float32, -0.2, 0.2), rand({c}, seed + 2),
          rand({n, c, hw, hw}, seed + 3), rand({c, c, 3, 3}, seed + 4, float32, -0.2, 0.2), rand({c}, seed + 5)};
}

TEST(ConvEpilogue, BiasAndResidualFoldIntoTheConv) {
  const auto inputs = block_inputs(2, 16, 10, 1);
  compiler::Tape tape = test::optimized_tape(resnet_block(), inputs);
  if (!cpu::dnnl_enabled()) {
    EXPECT_EQ(convs_with_adds(tape, 0), 2) << "without oneDNN the pass does nothing";
    return;
  }
  EXPECT_EQ(convs_with_adds(tape, 2), 1) << compiler::dump_tape(tape);  // bias + residual
  EXPECT_EQ(adds_on(tape), 0) << compiler::dump_tape(tape);
  if (bias_free(2, 16, 10)) {
    // oneDNN's kernel adds the second conv's bias ([C,1,1] broadcast) itself: the conv takes it,
    // and both ReLUs are single steps.
    EXPECT_EQ(convs_with_adds(tape, 1), 1) << compiler::dump_tape(tape);
    EXPECT_EQ(test::steps_of(tape, PrimKind::Fused).size(), 0u) << compiler::dump_tape(tape);
  } else {
    // The second conv's bias feeds a ReLU alone: it stays out of the conv, and the fuse pass puts
    // it in the ReLU's kernel (oneDNN's per-channel binary post-op costs more).
    EXPECT_EQ(convs_with_adds(tape, 1), 0) << compiler::dump_tape(tape);
    // One generated kernel, the bias and the second ReLU (the first ReLU is a single step).
    const auto fused = test::steps_of(tape, PrimKind::Fused);
    ASSERT_EQ(fused.size(), 1u) << compiler::dump_tape(tape);
    EXPECT_EQ(test::compute_instrs(fused[0]->prim.get<FusedParams>().kernel->program), 2) << compiler::dump_tape(tape);
  }
  // The ReLUs stay with the fuse pass (oneDNN's ReLU turns NaN into 0).
  const std::string text = compiler::dump_tape(tape);
  EXPECT_NE(text.find("+bias, +residual"), std::string::npos) << text;
}

// A bias feeding an element-wise step other than an Add (here a ReLU, then a scale) is left to
// the fuse pass unless oneDNN's kernel adds it itself; a bias feeding a pooling or returned is
// still taken by the conv.
TEST(ConvEpilogue, ABiasBeforeAnElementwiseStepStaysForTheFusePass) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF)";
  const auto inputs = block_inputs(1, 8, 6, 51);
  Fn relu_after = [](const std::vector<Array>& in) {
    return std::vector<Array>{relu(conv2d(in[0], in[1], {1, 1}, {1, 1}) + reshape(in[2], {1, 8, 1, 1})) * 0.5f};
  };
  Fn pool_after = [](const std::vector<Array>& in) {
    Array y = conv2d(in[0], in[1], {1, 1}, {1, 1}) + reshape(in[2], {1, 8, 1, 1});
    return std::vector<Array>{max_pool(y, PoolOptions{{2, 2}, {2, 2}})};
  };
  compiler::Tape a = test::optimized_tape(relu_after, inputs);
  const bool free = bias_free(1, 8, 6);
  EXPECT_EQ(convs_with_adds(a, free ? 1 : 0), 1) << compiler::dump_tape(a);
  EXPECT_EQ(test::steps_of(a, PrimKind::Fused).size(), 1u) << compiler::dump_tape(a);  // the ReLU and scale
  compiler::Tape b = test::optimized_tape(pool_after, inputs);
  EXPECT_EQ(convs_with_adds(b, 1), 1) << compiler::dump_tape(b);
  // Before a ReLU that a max pooling reads, the bias stays out of the conv even where oneDNN's
  // kernel would add it: pool_first moves both after the pooling.
  Fn relu_pool = [](const std::vector<Array>& in) {
    Array y = relu(conv2d(in[0], in[1], {1, 1}, {1, 1}) + reshape(in[2], {1, 8, 1, 1}));
    return std::vector<Array>{max_pool(y, PoolOptions{{2, 2}, {2, 2}})};
  };
  compiler::Tape c = test::optimized_tape(relu_pool, inputs);
  EXPECT_EQ(convs_with_adds(c, 0), 1) << compiler::dump_tape(c);
  expect_bit_exact(relu_after, inputs);
  expect_bit_exact(pool_after, inputs);
  expect_bit_exact(relu_pool, inputs);
}

TEST(ConvEpilogue, CompiledEqualsEagerBitForBit) {
  expect_bit_exact(resnet_block(), block_inputs(2, 16, 10, 11));
  // Deep reductions (the sum over input channels runs in several passes inside oneDNN).
  expect_bit_exact(resnet_block(), block_inputs(1, 256, 7, 21));
}

TEST(ConvEpilogue, NanAndInfinityMatchEager) {
  auto inputs = block_inputs(1, 16, 8, 31);
  std::vector<float> x = inputs[0].to_vector<float>(), r = inputs[3].to_vector<float>();
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[70] = std::numeric_limits<float>::infinity();
  r[9] = -std::numeric_limits<float>::infinity();
  r[200] = std::numeric_limits<float>::quiet_NaN();
  inputs[0] = Array(x, inputs[0].shape());
  inputs[3] = Array(r, inputs[3].shape());
  expect_bit_exact(resnet_block(), inputs);
}

TEST(ConvEpilogue, LeavesWhatItMustNotFold) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF)";
  const auto inputs = block_inputs(1, 8, 6, 41);
  // The conv's output is also returned: the add cannot take it over.
  Fn returned = [](const std::vector<Array>& in) {
    Array y = conv2d(in[0], in[1], {1, 1}, {1, 1});
    return std::vector<Array>{y, y + reshape(in[2], {1, 8, 1, 1})};
  };
  EXPECT_EQ(convs_with_adds(test::optimized_tape(returned, inputs), 0), 1);
  expect_bit_exact(returned, inputs);
  // Not per channel (one value per column): not a bias; the broadcast operand is added whole,
  // as a residual. float64: unchanged.
  Fn columns = [](const std::vector<Array>& in) {
    return std::vector<Array>{conv2d(in[0], in[1], {1, 1}, {1, 1}) + reshape(in[2], {1, 1, 1, 6})};
  };
  const std::vector<Array> col_inputs{inputs[0], inputs[1], rand({6}, 3)};
  const std::string col_tape = compiler::dump_tape(test::optimized_tape(columns, col_inputs));
  EXPECT_EQ(col_tape.find("+bias"), std::string::npos) << col_tape;
  expect_bit_exact(columns, col_inputs);
  Fn f64 = [](const std::vector<Array>& in) {
    return std::vector<Array>{conv2d(in[0], in[1], {1, 1}, {1, 1}) + reshape(in[2], {1, 8, 1, 1})};
  };
  const std::vector<Array> d_inputs{astype(inputs[0], float64), astype(inputs[1], float64), astype(inputs[2], float64)};
  EXPECT_EQ(convs_with_adds(test::optimized_tape(f64, d_inputs), 0), 1);
  // y + y and a second residual stay adds.
  Fn twice = [](const std::vector<Array>& in) {
    Array y = conv2d(in[0], in[1], {1, 1}, {1, 1});
    return std::vector<Array>{(y + in[3]) + in[3]};
  };
  compiler::Tape t = test::optimized_tape(twice, inputs);
  EXPECT_EQ(convs_with_adds(t, 1), 1) << compiler::dump_tape(t);
  expect_bit_exact(twice, inputs);
}

// A residual that nothing else reads gives the convolution its buffer (the sum post-op adds to
// what the destination holds: no copy of the residual first); one the caller or another step
// still reads is copied. Where oneDNN declines the post-op (its kernels below AVX-512:
// ONEDNN_MAX_CPU_ISA=AVX2) the convolution runs into a buffer of its own and the add follows.
// Every way gives the separate add's bits, NaN and infinity included.
TEST(ConvEpilogue, AResidualNothingElseReadsBecomesTheOutput) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF)";
  auto inputs = block_inputs(2, 16, 8, 61);
  std::vector<float> r = inputs[3].to_vector<float>();
  r[3] = std::numeric_limits<float>::quiet_NaN();
  r[77] = -std::numeric_limits<float>::infinity();
  inputs[3] = Array(r, inputs[3].shape());
  eval(inputs);
  ConvParams p{{1, 1}, {1, 1}, {1, 1}, {1, 1}, 1};
  p.adds = {ConvAdd::Tensor};
  const Primitive conv = make_prim(PrimKind::Conv, p);
  const Array want = conv2d(inputs[0], inputs[1], {1, 1}, {1, 1}) + inputs[3];
  const bool post_op = !cpu::dnnl_conv_impl(cpu::dnnl_conv_geometry(inputs[0].shape(), inputs[1].shape(), want.shape(), p),
                                            {{cpu::DnnlAddKind::Tensor, inputs[3].to_vector<float>().data()}})
                            .empty();
  for (const bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "the residual is held elsewhere" : "the residual is the step's alone");
    Array residual = copy(inputs[3]);
    residual.eval();
    const void* residual_data = residual.node().data_ptr();
    Array kept = shared ? residual : Array();
    std::vector<Array> in{inputs[0], inputs[1], std::move(residual)};
    std::vector<Array> out{Array(detail::make_node(want.shape(), float32, Device::cpu(), Primitive{}, {}))};
    detail::run_primitive(conv, Device::cpu(), in, out);
    EXPECT_EQ(out[0].node().data_ptr() == residual_data, !shared && post_op);
    EXPECT_TRUE(test::bit_equal(out[0], want));
    if (shared) {
      EXPECT_TRUE(test::bit_equal(kept, inputs[3])) << "the residual is unchanged";
    }
  }
  // Two residuals: oneDNN declines them, smelt's convolution runs into a buffer of its own and the
  // adds follow, the donated residual read, not overwritten.
  ConvParams two = p;
  two.adds = {ConvAdd::Tensor, ConvAdd::Tensor};
  {
    Array first = copy(inputs[3]), second = copy(inputs[0]);
    eval({first, second});
    std::vector<Array> in{inputs[0], inputs[1], std::move(first), std::move(second)};
    std::vector<Array> out{Array(detail::make_node(want.shape(), float32, Device::cpu(), Primitive{}, {}))};
    detail::run_primitive(make_prim(PrimKind::Conv, two), Device::cpu(), in, out);
    EXPECT_TRUE(test::bit_equal(out[0], want + inputs[0]));
  }
  // Compiled, the residual an intermediate value (its last reader is the conv): eager's bits.
  Fn block = [](const std::vector<Array>& in) {
    Array r = relu(in[3]) * 0.5f;
    return std::vector<Array>{relu(conv2d(in[0], in[1], {1, 1}, {1, 1}) + r)};
  };
  EXPECT_EQ(convs_with_adds(test::optimized_tape(block, inputs), 1), 1);
  expect_bit_exact(block, inputs);
}

TEST(ConvEpilogue, TheDisabledPassLeavesTheAdds) {
  const auto inputs = block_inputs(1, 8, 6, 51);
  compiler::PassOptions o;
  o.disabled = {"conv_epilogue"};
  o.fuse = false;
  compiler::Tape tape = test::optimized_tape(resnet_block(), inputs, o);
  EXPECT_EQ(convs_with_adds(tape, 0), 2);
  EXPECT_EQ(adds_on(tape), 3);
}

/// Convs on a tape whose weight input is packed.
int packed_convs(const compiler::Tape& tape) {
  int n = 0;
  for (const auto* s : test::steps_of(tape, PrimKind::Conv)) n += !s->prim.get<ConvParams>().packed_weight.empty();
  return n;
}

// Two convolutions whose weights and biases are captured arrays (constants of the tape, as ONNX
// initializers are in a compiled segment).
Fn captured_block(const Array& w1, const Array& b1, const Array& w2) {
  return [=](const std::vector<Array>& in) {
    Array y = relu(conv2d(in[0], w1, {1, 1}, {1, 1}) + reshape(b1, {1, w1.shape(0), 1, 1}));
    return std::vector<Array>{conv2d(y, w2, {2, 2}, {1, 1}) + in[1]};
  };
}

TEST(ConvPrepack, ConstantWeightsArePackedAtCompileTime) {
  const Array w1 = rand({16, 8, 3, 3}, 61, float32, -0.3, 0.3), b1 = rand({16}, 62), w2 = rand({24, 16, 3, 3}, 63);
  const std::vector<Array> inputs{rand({2, 8, 12, 12}, 64), rand({2, 24, 6, 6}, 65)};
  compiler::Tape tape = test::optimized_tape(captured_block(w1, b1, w2), inputs);
  if (!cpu::dnnl_enabled()) {
    EXPECT_EQ(packed_convs(tape), 0);
    return;
  }
  EXPECT_EQ(packed_convs(tape), 2) << compiler::dump_tape(tape);
  // The plain weights left the tape; the packed ones are 1-D float32 constants.
  for (const auto& [id, a] : tape.constants)
    EXPECT_TRUE(a.shape() != w1.shape() && a.shape() != w2.shape()) << "a plain weight stayed, value %" << id;
  expect_bit_exact(captured_block(w1, b1, w2), inputs);
}

// A weight packed under one thread count serves calls under another: the same primitive runs
// (reordering the packed weight if that count's plan wants another layout), so the bits are
// those of eager at the new count.
TEST(ConvPrepack, CallsAtAnotherThreadCountKeepTheBits) {
  const Array w1 = rand({32, 16, 3, 3}, 71, float32, -0.3, 0.3), b1 = rand({32}, 72), w2 = rand({32, 32, 3, 3}, 73);
  const std::vector<Array> inputs{rand({4, 16, 20, 20}, 74), rand({4, 32, 10, 10}, 75)};
  const Fn fn = captured_block(w1, b1, w2);
  const int saved = cpu_threads();
  set_cpu_threads(1);
  auto f = compile_flat(fn);
  const auto first = f(inputs);
  for (int threads : {1, 2, 3}) {
    set_cpu_threads(threads);
    const auto got = f(inputs);
    const auto want = fn(inputs);
    EXPECT_TRUE(test::bit_equal(got[0], want[0])) << threads << " threads";
    EXPECT_TRUE(test::bit_equal(got[0], first[0])) << threads << " threads";
  }
  set_cpu_threads(saved);
}

TEST(ConvPrepack, WeightsThatAreInputsOrShapelessStayPlain) {
  const std::vector<Array> inputs{rand({1, 8, 6, 6}, 81), rand({8, 8, 3, 3}, 82)};
  Fn fn = [](const std::vector<Array>& in) { return std::vector<Array>{conv2d(in[0], in[1], {1, 1}, {1, 1})}; };
  EXPECT_EQ(packed_convs(test::optimized_tape(fn, inputs)), 0);
  expect_bit_exact(fn, inputs);
  // Shapeless: neither conv pass runs (they bake the traced shapes into oneDNN plans).
  const Array w = rand({8, 8, 3, 3}, 83), b = rand({8}, 84);
  Fn captured = [=](const std::vector<Array>& in) {
    return std::vector<Array>{conv2d(in[0], w, {1, 1}, {1, 1}) + reshape(b, {1, 8, 1, 1})};
  };
  test::Dumps dumps;
  CompileOptions o;
  o.shapeless = true;
  auto f = compile_flat(captured, dumps.options(o));
  for (int64_t hw : {6, 9}) {
    const Array x = rand({1, 8, hw, hw}, 85);
    EXPECT_TRUE(test::bit_equal(f({x})[0], captured({x})[0])) << hw;
  }
  EXPECT_EQ(dumps.of("conv_epilogue"), "");
  EXPECT_EQ(dumps.of("conv_prepack"), "");
}

}  // namespace
}  // namespace smelt
