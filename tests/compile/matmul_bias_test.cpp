// The matmul_bias pass: a per-column bias added to a float32 CPU Matmul's result is added by the
// Matmul itself, tile by tile, with the bits of the separate add (NaN payloads in the Add's
// operand order included); it stays an Add where an element-wise step reads it or where it is not
// a per-column vector.
#include <cmath>
#include <limits>

#include "compile_helpers.h"

namespace smelt {
namespace {

using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

/// The optimized tape's Matmul biases (None for a Matmul without one); compiled, with and without
/// the pass, equals eager bit for bit.
std::vector<MatmulBias> check(const Fn& fn, const std::vector<Array>& inputs) {
  const compiler::Tape tape = test::optimized_tape(fn, inputs, {.fuse = false});
  std::vector<MatmulBias> biases;
  for (const auto* s : test::steps_of(tape, PrimKind::Matmul)) biases.push_back(s->prim.get<MatmulParams>().bias);
  test::expect_compiled_equals_eager(fn, inputs, "matmul_bias", compiler::dump_tape(tape));
  return biases;
}

Array specials(const Shape& shape, uint32_t seed) { return test::special_floats(shape, seed); }

// A projection's bias before a reshape (the query, key and value projections of attention), on
// either side of the Add, with NaN payloads, infinities and signed zeros in the product and the
// bias: x86 keeps the first operand's NaN, so the order matters. Shapes where the product is cut
// into several tiles of rows and columns (gemm_tiles) and a batched product.
TEST(MatmulBias, AProjectionsBiasIsAddedByTheMatmulBitForBit) {
  for (const Shape& xs : std::vector<Shape>{{5, 7}, {2, 130, 64}, {300, 96}}) {
    SCOPED_TRACE(shape_to_string(xs));
    const int64_t n = xs.size() == 2 && xs[0] == 300 ? 520 : 40;
    Array x = specials(xs, 1);
    Array w = test::random_array({xs.back(), n}, float32, -1, 1, 2);
    Array b = specials({n}, 3);
    Shape split(xs.begin(), xs.end() - 1);
    split.push_back(n / 8);
    split.push_back(8);
    const Fn after = [&](const std::vector<Array>& in) { return std::vector<Array>{reshape(matmul(in[0], w) + b, split)}; };
    const Fn before = [&](const std::vector<Array>& in) { return std::vector<Array>{reshape(b + matmul(in[0], w), split)}; };
    EXPECT_EQ(check(after, {x}), std::vector<MatmulBias>{MatmulBias::After});
    EXPECT_EQ(check(before, {x}), std::vector<MatmulBias>{MatmulBias::Before});
  }
}

// A bias broadcast outside the function (captured as a constant of the product's shape whose
// values vary along the last axis only) is recognized as the [N] vector it repeats.
TEST(MatmulBias, ACapturedBroadcastBiasIsItsVector) {
  Array x = test::random_array({6, 16}, float32, -1, 1, 4), w = test::random_array({16, 24}, float32, -1, 1, 5);
  Array wide = broadcast_to(specials({24}, 6), {6, 24});
  wide.eval();
  const Fn fn = [&](const std::vector<Array>& in) { return std::vector<Array>{reshape(matmul(in[0], w) + wide, {6, 3, 8})}; };
  EXPECT_EQ(check(fn, {x}), std::vector<MatmulBias>{MatmulBias::After});
}

// Left alone: an element-wise reader (the fuse pass puts the add into its kernel), a full-tensor
// operand (a residual), a per-row operand, a product returned itself, a float64 product.
TEST(MatmulBias, OtherAddsStay) {
  Array x = test::random_array({6, 16}, float32, -1, 1, 7), w = test::random_array({16, 24}, float32, -1, 1, 8);
  Array b = test::random_array({24}, float32, -1, 1, 9), r = test::random_array({6, 24}, float32, -1, 1, 10);
  Array rows = test::random_array({6, 1}, float32, -1, 1, 11);
  const std::vector<MatmulBias> none{MatmulBias::None};
  EXPECT_EQ(check([&](const std::vector<Array>& in) { return std::vector<Array>{relu(matmul(in[0], w) + b)}; }, {x}), none);
  EXPECT_EQ(check([&](const std::vector<Array>& in) { return std::vector<Array>{reshape(matmul(in[0], w) + r, {6, 3, 8})}; },
                  {x}),
            none);
  EXPECT_EQ(
      check([&](const std::vector<Array>& in) { return std::vector<Array>{reshape(matmul(in[0], w) + rows, {6, 3, 8})}; },
            {x}),
      none);
  EXPECT_EQ(check([&](const std::vector<Array>& in) {
                  Array p = matmul(in[0], w);
                  return std::vector<Array>{p, reshape(p + b, {6, 3, 8})};
                },
                {x}),
            none);
  // One column, and a last column tile one wide (300 x 257 in tiles of 128 x 256): runs of one
  // element, where the Add kernel takes the other operand's NaN.
  Array w1 = test::random_array({16, 1}, float32, -1, 1, 12), b1 = specials({1}, 13);
  EXPECT_EQ(check([&](const std::vector<Array>& in) { return std::vector<Array>{reshape(matmul(in[0], w1) + b1, {6})}; },
                  {specials({6, 16}, 14)}),
            none);
  Array w257 = test::random_array({128, 257}, float32, -1, 1, 15);
  std::vector<float> b257v = specials({257}, 16).to_vector<float>();
  const uint32_t payload = 0x7fc0beefu;  // a NaN of its own in the one-wide column
  std::memcpy(&b257v[256], &payload, sizeof payload);
  Array b257(b257v, {257});
  EXPECT_EQ(check([&](const std::vector<Array>& in) {
                  return std::vector<Array>{reshape(matmul(in[0], w257) + b257, {300 * 257})};
                },
                {specials({300, 128}, 17)}),
            none);
  Array xd = astype(x, float64), wd = astype(w, float64), bd = astype(b, float64);
  EXPECT_EQ(check([&](const std::vector<Array>& in) { return std::vector<Array>{reshape(matmul(in[0], wd) + bd, {6, 3, 8})}; },
                  {xd}),
            none);
}

}  // namespace
}  // namespace smelt
