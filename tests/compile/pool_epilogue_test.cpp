// The pool_epilogue pass: a blocked pooling applies the channel add and the ReLU after it; compiled
// == eager bit for bit (NaN, infinities, signed zeros), and the pooling kernel's epilogue gives
// the separate steps' bits on every instruction set and channel layout.
#include <cmath>
#include <limits>

#include "compile_helpers.h"
#include "src/backend/cpu/dnnl.h"
#include "src/backend/cpu/elementwise_math.h"
#include "src/backend/cpu/kernels.h"
#include "src/core/node.h"
#include "src/core/node_state.h"

namespace smelt {
namespace {

using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

PoolOptions two_by_two() {
  PoolOptions p;
  p.kernel = {2, 2};
  p.strides = {2, 2};
  return p;
}

/// The optimized tape's one pooling, which must carry the epilogue `add` and `relu` with no Add or
/// Relu step left, and the function compiled with and without the pass against eager.
void check(const Fn& fn, const std::vector<Array>& inputs, PoolEpilogueAdd add, bool relu) {
  const compiler::Tape tape = test::optimized_tape(fn, inputs);
  const std::string text = compiler::dump_tape(tape);
  const auto pools = test::steps_of(tape, PrimKind::Pool);
  ASSERT_EQ(pools.size(), 1u) << text;
  const PoolParams& p = pools[0]->prim.get<PoolParams>();
  EXPECT_NE(p.block, 0) << text;
  EXPECT_EQ(p.epilogue_add, add) << text;
  EXPECT_EQ(p.epilogue_relu, relu) << text;
  EXPECT_EQ(pools[0]->inputs.size(), add == PoolEpilogueAdd::None ? 1u : 2u) << text;
  EXPECT_TRUE(test::steps_of(tape, PrimKind::Fused).empty()) << text;
  test::expect_compiled_equals_eager(fn, inputs, "pool_epilogue", text);
}

TEST(PoolEpilogue, AConvolutionsBiasAndReluJoinItsBlockedPooling) {
  if (!cpu::dnnl_enabled()) GTEST_SKIP() << "built without oneDNN (SMELT_DNNL=OFF): no blocked layout";
  for (int64_t channels : {32, 64}) {
    SCOPED_TRACE(std::to_string(channels) + " channels");
    const Array w = test::random_array({channels, 8, 3, 3}, float32, -0.4, 0.4, 20);
    std::vector<float> b = test::random_array({channels}, float32, -1, 1, 21).to_vector<float>();
    b[1] = -0.0f;
    b[2] = 0.0f;
    const Array bias = reshape(Array(b, {channels}), {1, channels, 1, 1});
    std::vector<float> x = test::random_array({2, 8, 10, 10}, float32, -2, 2, 22).to_vector<float>();
    x[5] = std::numeric_limits<float>::quiet_NaN();  // NaN, +inf and -inf reach the pooling
    x[230] = std::numeric_limits<float>::infinity();
    x[231] = -std::numeric_limits<float>::infinity();
    const std::vector<Array> in{Array(x, {2, 8, 10, 10})};
    const Array w2 = test::random_array({16, channels, 3, 3}, float32, -0.2, 0.2, 23);
    ConvOptions same;
    same.padding_lo = same.padding_hi = {1, 1};
    // Between two convolutions (the blocked layout runs from one to the next), as in a CNN.
    auto between = [&](auto mid) {
      return [=](const std::vector<Array>& v) { return std::vector<Array>{conv(mid(conv(v[0], w, same)), w2, same)}; };
    };
    // pool_first puts the pooling before the bias and the ReLU; this pass takes them in.
    check(between([=](const Array& y) { return max_pool(relu(y + bias), two_by_two()); }), in,
          PoolEpilogueAdd::AddAfter, true);
    check(between([=](const Array& y) { return max_pool(relu(bias + y), two_by_two()); }), in,
          PoolEpilogueAdd::AddBefore, true);
    check(between([=](const Array& y) { return max_pool(relu(y), two_by_two()); }), in, PoolEpilogueAdd::None, true);
    // An average pooling's own add (no pool_first there), with and without a ReLU after it.
    check(between([=](const Array& y) { return avg_pool(y, two_by_two()) + bias; }), in, PoolEpilogueAdd::AddAfter,
          false);
    check(between([=](const Array& y) { return relu(avg_pool(y, two_by_two()) + bias); }), in,
          PoolEpilogueAdd::AddAfter, true);
  }
}

// The pooling kernel with an epilogue, run directly on a blocked array ([N, C/b, H, W, b], b = 8,
// three blocks: the channel table by block and lane) on each instruction set the CPU has, against
// the eager pooling, add and ReLU; the channel values one per channel, one per lane or one per
// block (the shapes the pass accepts), max pooling (the row kernels) and average pooling (the
// general loop), the add in either operand order.
TEST(PoolEpilogue, TheKernelsEpilogueGivesTheSeparateStepsBits) {
  const int64_t blocks = 3, b = 8, c = blocks * b;
  std::vector<float> xv = test::special_floats({2, c, 6, 6}, 30).to_vector<float>();
  // A window of channel 3 whose maximum is -0.0: with channel 3's -0.0 added it stays -0.0, and
  // the ReLU must make it +0.0.
  const float window[4] = {-0.0f, -1.0f, -2.0f, -3.0f};
  for (int q = 0; q < 4; ++q) xv[static_cast<size_t>((3 * 6 + q / 2) * 6 + q % 2)] = window[q];
  const Array rows(xv, Shape{2, c, 6, 6});
  const Array blocked =
      reshape(copy(transpose(reshape(rows, {2, blocks, b, 6, 6}), {0, 1, 3, 4, 2})), {2, blocks, 6, 6, b});
  eval({blocked});
  std::vector<float> chan = test::random_array({c}, float32, -1, 1, 31).to_vector<float>();
  chan[3] = -0.0f;
  struct Source {
    Shape blocked_shape;          // the channel values as the pass gives them
    std::vector<float> values;    // in that shape
    std::vector<float> per_channel;  // the value of each of the C channels
  };
  auto source = [&](Shape shape, int64_t count, auto channel_entry) {
    Source s{std::move(shape), std::vector<float>(chan.begin(), chan.begin() + count), {}};
    for (int64_t k = 0; k < blocks; ++k)
      for (int64_t l = 0; l < b; ++l) s.per_channel.push_back(chan[static_cast<size_t>(channel_entry(k, l))]);
    return s;
  };
  const std::vector<Source> sources = {
      source({1, blocks, 1, 1, b}, c, [&](int64_t k, int64_t l) { return k * b + l; }),
      source({1, 1, 1, 1, b}, b, [](int64_t, int64_t l) { return l; }),
      source({1, blocks, 1, 1, 1}, blocks, [](int64_t k, int64_t) { return k; }),
  };
  for (bool max : {true, false})
    for (size_t si = 0; si < sources.size(); ++si)
      for (PoolEpilogueAdd add : {PoolEpilogueAdd::AddAfter, PoolEpilogueAdd::AddBefore, PoolEpilogueAdd::None})
        for (bool relu_after : {true, false}) {
          if (add == PoolEpilogueAdd::None && !relu_after) continue;
          const Source& s = sources[si];
          const Array pooled = max ? max_pool(rows, two_by_two()) : avg_pool(rows, two_by_two());
          const Array per_channel = Array(s.per_channel, {1, c, 1, 1});
          Array want = add == PoolEpilogueAdd::AddAfter    ? pooled + per_channel
                       : add == PoolEpilogueAdd::AddBefore ? per_channel + pooled
                                                           : pooled;
          if (relu_after) want = relu(want);
          PoolParams p{max ? PoolKind::Max : PoolKind::Avg, {2, 2}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, false};
          p.block = b;
          p.epilogue_add = add;
          p.epilogue_relu = relu_after;
          const Array values(s.values, s.blocked_shape);
          std::vector<Array> inputs{blocked};
          if (add != PoolEpilogueAdd::None) inputs.push_back(values);
          const Shape out{2, blocks, 3, 3, b};
          for (cpu::CpuIsa isa : {cpu::CpuIsa::Baseline, cpu::CpuIsa::Avx2, cpu::CpuIsa::Avx512}) {
            if (isa > cpu::cpu_isa_supported()) continue;
            SCOPED_TRACE(std::string(max ? "max" : "avg") + ", source " + std::to_string(si) + ", add " +
                         std::to_string(static_cast<int>(add)) + (relu_after ? ", relu, " : ", ") +
                         cpu::cpu_isa_name(isa));
            std::vector<Array> got{make_array(out, float32, Device::cpu(), Primitive{}, {})};
            cpu::eval_pool_on_isa(p, inputs, got, isa);
            detail::set_evaluated(got[0].node());
            const Array back = reshape(transpose(got[0], {0, 1, 4, 2, 3}), {2, c, 3, 3});
            EXPECT_TRUE(test::bit_equal(back, want));
          }
        }
}

}  // namespace
}  // namespace smelt
