// The matmul_prepack pass: constant float32 CPU matmul operands stored transposed become row-major
// constants at compile time; compiled == eager bit for bit, and other operands are left alone.
#include "compile_helpers.h"
#include "src/backend/cpu/dnnl.h"

namespace smelt {
namespace {

using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

/// Constants of the tape whose last two axes are stored transposed (row stride 1).
int transposed_constants(const compiler::Tape& tape) {
  int n = 0;
  for (const auto& [id, a] : tape.constants) {
    const auto& node = a.node();
    const int nd = a.ndim();
    n += nd >= 2 && node.shape[nd - 2] > 1 && node.shape[nd - 1] > 1 && node.strides[nd - 2] == 1;
  }
  return n;
}

TEST(MatmulPrepack, TransposedConstantsBecomeRowMajorWithTheSameBits) {
  // A tied embedding: logits = x @ E^T, E captured; E^T also feeds a second product, and E
  // itself (row-major) a third.
  const Array e = test::random_array({300, 48}, float32, -1, 1, 1);
  Fn fn = [=](const std::vector<Array>& in) {
    Array et = swapaxes(e, 0, 1);
    Array logits = matmul(in[0], et);
    return std::vector<Array>{logits, matmul(in[0] * 2.0f, et) + 1.0f, matmul(logits, e)};
  };
  const std::vector<Array> inputs{test::random_array({2, 70, 48}, float32, -1, 1, 3)};
  const compiler::Tape tape = test::optimized_tape(fn, inputs);
  EXPECT_EQ(transposed_constants(tape), cpu::dnnl_enabled() ? 0 : 1);
  test::Dumps dumps;
  auto f = compile_flat(fn, dumps.options());
  const auto want = fn(inputs);
  for (int call = 0; call < 2; ++call) {
    const auto got = f(inputs);
    ASSERT_EQ(got.size(), 3u);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(test::bit_equal(got[i], want[i])) << i;
  }
  if (cpu::dnnl_enabled()) {
    EXPECT_NE(dumps.of("matmul_prepack"), dumps.of("dce"));
  }
}

TEST(MatmulPrepack, LeavesInputsOtherDtypesAndRowMajorConstantsAlone) {
  const Array w = test::random_array({16, 8}, float32, -1, 1, 4);
  const Array wd = swapaxes(test::random_array({8, 16}, float64, -1, 1, 5), 0, 1);
  Fn fn = [=](const std::vector<Array>& in) {
    return std::vector<Array>{matmul(in[0], w), matmul(astype(in[0], float64), wd), matmul(in[0], swapaxes(in[1], 0, 1))};
  };
  const std::vector<Array> inputs{test::random_array({5, 16}, float32, -1, 1, 6),
                                  test::random_array({8, 16}, float32, -1, 1, 7)};
  test::Dumps dumps;
  auto f = compile_flat(fn, dumps.options());
  const auto got = f(inputs);
  const auto want = fn(inputs);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(test::bit_equal(got[i], want[i])) << i;
  EXPECT_EQ(dumps.of("matmul_prepack"), dumps.of("dce"));  // nothing to do: the tape is unchanged
}

}  // namespace
}  // namespace smelt
