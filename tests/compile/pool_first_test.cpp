// The pool_first pass: a max pooling moves before the ReLU and finite constant adds that feed it;
// compiled == eager bit for bit on NaN, infinities and signed zeros, and it stays where moving it
// would change a bit.
#include <cmath>
#include <limits>

#include "compile_helpers.h"

namespace smelt {
namespace {

using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

PoolOptions pooling(int64_t k = 2, int64_t stride = 2, int64_t pad = 0) {
  PoolOptions p;
  p.kernel = {k, k};
  p.strides = {stride, stride};
  if (pad != 0) p.padding_lo = p.padding_hi = {pad, pad};
  return p;
}

/// Whether the optimized tape's (only) max pooling reads something other than a Relu or an Add:
/// the pass moved it before them.
bool pool_moved(const compiler::Tape& tape) {
  const auto pools = test::steps_of(tape, PrimKind::Pool);
  EXPECT_EQ(pools.size(), 1u);
  if (pools.empty()) return false;
  for (const auto& s : tape.steps)
    for (int o : s.outputs)
      if (o == pools[0]->inputs[0])
        return !(s.prim.kind == PrimKind::Unary || s.prim.kind == PrimKind::Binary || s.prim.kind == PrimKind::Fused);
  return true;  // a function input
}

/// Compiled (with and without the pass) against eager, bit for bit; returns whether the pass moved
/// the pooling.
bool check(const Fn& fn, const std::vector<Array>& inputs) {
  const compiler::Tape tape = test::optimized_tape(fn, inputs);
  const bool moved = pool_moved(tape);
  test::expect_compiled_equals_eager(fn, inputs, "pool_first", compiler::dump_tape(tape));
  return moved;
}

Array specials(const Shape& shape, uint32_t seed) { return test::special_floats(shape, seed); }

TEST(PoolFirst, ReluOfABiasAddPoolsFirstBitForBit) {
  // NaN (payloads), infinities, signed zeros, subnormals and random values in the windows; the
  // bias has -0.0 and +0.0 among its channels.
  std::vector<float> b = test::random_array({8}, float32, -2, 2, 3).to_vector<float>();
  b[1] = -0.0f;
  b[2] = 0.0f;
  const Array bias = reshape(Array(b, {8}), {1, 8, 1, 1});
  const Fn fn = [&](const std::vector<Array>& in) { return std::vector<Array>{max_pool(relu(in[0] + bias), pooling())}; };
  EXPECT_TRUE(check(fn, {specials({2, 8, 6, 6}, 1)}));
  // The bias on the left, a 3 x 3 window with stride 2 (overlapping windows), and a ReLU alone.
  const Fn left = [&](const std::vector<Array>& in) {
    return std::vector<Array>{max_pool(relu(bias + in[0]), pooling(3, 2))};
  };
  EXPECT_TRUE(check(left, {specials({2, 8, 9, 9}, 2)}));
  const Fn relu_only = [&](const std::vector<Array>& in) { return std::vector<Array>{max_pool(relu(in[0]), pooling())}; };
  EXPECT_TRUE(check(relu_only, {specials({1, 8, 4, 4}, 3)}));
  // Padding shorter than the window (a ResNet stem's 3 x 3, stride 2, padding 1): every window
  // holds an input position, on odd and even sizes (the last window reaching into the padding).
  for (int64_t hw : {7, 8}) {
    const Fn stem = [&](const std::vector<Array>& in) {
      return std::vector<Array>{max_pool(relu(in[0] + bias), pooling(3, 2, 1))};
    };
    EXPECT_TRUE(check(stem, {specials({2, 8, hw, hw}, 11)})) << hw;
  }
}

TEST(PoolFirst, AConvolutionsBiasAndReluRunOnThePooledValues) {
  const Array w = test::random_array({16, 4, 3, 3}, float32, -0.5, 0.5, 4);
  const Array b = test::random_array({16}, float32, -1, 1, 5);
  std::vector<float> x = test::random_array({2, 4, 12, 12}, float32, -2, 2, 6).to_vector<float>();
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[300] = std::numeric_limits<float>::infinity();
  x[301] = -std::numeric_limits<float>::infinity();
  const Array xs(x, {2, 4, 12, 12});
  // The bias as a captured broadcast (reshaped to [C, 1, 1]) and as a constant of the output's
  // shape (a broadcast frozen at trace time: the constant's own path).
  const Fn bias = [&](const std::vector<Array>& in) {
    return std::vector<Array>{max_pool(relu(conv2d(in[0], w, {1, 1}, {1, 1}) + reshape(b, {16, 1, 1})), pooling())};
  };
  EXPECT_TRUE(check(bias, {xs}));
  const Array full = broadcast_to(reshape(b, {1, 16, 1, 1}), {2, 16, 12, 12});
  const Fn frozen = [&](const std::vector<Array>& in) {
    return std::vector<Array>{max_pool(relu(conv2d(in[0], w, {1, 1}, {1, 1}) + full), pooling())};
  };
  EXPECT_TRUE(check(frozen, {xs}));
}

// Where moving the pooling would change the result, it stays (each case fails when its rule in
// the pass is dropped).
TEST(PoolFirst, StaysWhereTheBitsWouldChange) {
  // An infinite bias: -inf + inf is NaN in the eager order, but the window's max is finite.
  std::vector<float> x(2 * 2 * 4 * 4, 1.0f);
  x[0] = -std::numeric_limits<float>::infinity();
  std::vector<float> b{std::numeric_limits<float>::infinity(), 0.5f};
  const Array xs(x, {2, 2, 4, 4}), inf_bias = reshape(Array(b, {2}), {1, 2, 1, 1});
  const Fn inf = [&](const std::vector<Array>& in) { return std::vector<Array>{max_pool(relu(in[0] + inf_bias), pooling())}; };
  EXPECT_FALSE(check(inf, {xs}));
  // Padding: a window of padding only is -inf eagerly, relu(-inf + b) = 0 after a move.
  const Array bias = reshape(Array(std::vector<float>{0.25f, -0.5f}, {2}), {1, 2, 1, 1});
  const Fn padded = [&](const std::vector<Array>& in) {
    return std::vector<Array>{max_pool(relu(in[0] + bias), pooling(1, 2, 1))};
  };
  EXPECT_FALSE(check(padded, {test::random_array({1, 2, 4, 4}, float32, -2, 2, 7)}));
  // A dilated padded window may hold padding only (taps at -1 and +1 of a 1-wide input).
  const Fn dilated = [&](const std::vector<Array>& in) {
    PoolOptions p = pooling(2, 1, 1);
    p.dilations = {2, 2};
    return std::vector<Array>{max_pool(relu(in[0] + bias), p)};
  };
  EXPECT_FALSE(check(dilated, {test::random_array({1, 2, 1, 1}, float32, -2, 2, 12)}));
  // The ReLU's output read elsewhere too, and an add of a value that is not a constant.
  const Fn shared = [&](const std::vector<Array>& in) {
    Array y = relu(in[0] + bias);
    return std::vector<Array>{max_pool(y, pooling()), y};
  };
  EXPECT_FALSE(check(shared, {test::random_array({1, 2, 4, 4}, float32, -2, 2, 8)}));
  const Fn variable = [&](const std::vector<Array>& in) {
    return std::vector<Array>{max_pool(relu(in[0] + in[1]), pooling())};
  };
  EXPECT_FALSE(check(variable, {test::random_array({1, 2, 4, 4}, float32, -2, 2, 9),
                                test::random_array({1, 2, 1, 1}, float32, -2, 2, 10)}));
}

}  // namespace
}  // namespace smelt
