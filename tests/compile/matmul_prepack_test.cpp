// The matmul_prepack pass: constant float32 CPU matmul operands stored transposed become row-major
// constants at compile time; the matmul_pack pass packs a constant B in oneDNN's layout; compiled
// == eager bit for bit at any thread count, and other operands are left alone.
#include "compile_helpers.h"
#include "smelt/memory.h"
#include "src/backend/cpu/dnnl.h"
#include "src/backend/cpu/gemm.h"

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

/// Matmul steps of the final tape whose B is packed (the printer's "packed b").
int packed_products(const test::Dumps& dumps) {
  int n = 0;
  for (const std::string& line : test::Dumps::lines(dumps.final_tape(), "Matmul")) n += line.find("packed b") != std::string::npos;
  return n;
}

/// Compiles `fn` at 2 threads (its dumps into `dumps`) and runs it at 2, 1 and 3: each result
/// bit-equal to eager's.
void expect_eager_bits_at_thread_counts(const Fn& fn, const std::vector<Array>& inputs, test::Dumps& dumps) {
  const int saved = cpu_threads();
  set_cpu_threads(2);
  auto f = compile_flat(fn, dumps.options());
  const auto want = fn(inputs);
  eval(want);
  for (int threads : {2, 1, 3}) {
    set_cpu_threads(threads);
    const auto got = f(inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(test::bit_equal(got[i], want[i])) << i << ", " << threads << " threads";
  }
  set_cpu_threads(saved);
}

// A Linear layer's weight [N, K] used transposed (with its bias first, as ONNX exports write it),
// a row-major [K, N] weight under a batch of 3, the same weight read by two products of one shape
// (packed once) and by one of another shape (packed for it): every B packed at 2 threads, the
// results bit-equal to eager at 1, 2 and 3 threads (3 threads may plan another layout and reorder
// from the packed one).
TEST(MatmulPack, ConstantWeightsArePackedWithTheSameBitsAtAnyThreadCount) {
  if (!cpu::dnnl_product_taken(64, 96, 80)) GTEST_SKIP() << "no oneDNN brgemm product on this CPU or build";
  const Array linear = test::random_array({96, 80}, float32, -1, 1, 11);
  const Array bias = test::random_array({96}, float32, -1, 1, 12);
  const Array w = test::random_array({80, 48}, float32, -1, 1, 13);
  Fn fn = [=](const std::vector<Array>& in) {
    Array h = bias + matmul(in[0], swapaxes(linear, 0, 1));
    return std::vector<Array>{h, matmul(in[1], w), matmul(in[1] * 2.0f, w), matmul(in[0], w)};
  };
  const std::vector<Array> inputs{test::random_array({64, 80}, float32, -1, 1, 14),
                                  test::random_array({3, 40, 80}, float32, -1, 1, 15)};
  test::Dumps dumps;
  expect_eager_bits_at_thread_counts(fn, inputs, dumps);
  EXPECT_EQ(packed_products(dumps), 4) << dumps.final_tape();
  // Two views of w broadcast to the batch (one per product) share one packed copy, so one constant
  // fewer; the product of w with 64 rows has its own; the Linear weight is packed from its
  // transposed view (no row-major copy: matmul_prepack, after the packing, finds nothing to do).
  EXPECT_EQ(test::Dumps::count(dumps.of("matmul_pack"), "constant"), test::Dumps::count(dumps.of("matmul_bias"), "constant") - 1)
      << dumps.of("matmul_bias") << dumps.of("matmul_pack");
  EXPECT_EQ(dumps.of("matmul_prepack"), dumps.of("matmul_pack"));
}

// A shapeless function keeps its plain weights (a layout is planned for one M); products below
// 16 rows (a decode step's) and float64 products are not packed.
TEST(MatmulPack, LeavesShapelessTapesFewRowsAndOtherDtypesAlone) {
  const Array w = test::random_array({80, 48}, float32, -1, 1, 21);
  const Array wd = test::random_array({80, 48}, float64, -1, 1, 22);
  Fn fn = [=](const std::vector<Array>& in) { return std::vector<Array>{matmul(in[0], w), matmul(astype(in[0], float64), wd)}; };
  for (const bool shapeless : {false, true}) {
    for (const int64_t rows : {int64_t{4}, int64_t{64}}) {
      SCOPED_TRACE(std::to_string(rows) + " rows" + (shapeless ? ", shapeless" : ""));
      const std::vector<Array> inputs{test::random_array({rows, 80}, float32, -1, 1, 23)};
      test::Dumps dumps;
      CompileOptions o;
      o.shapeless = shapeless;
      auto f = compile_flat(fn, dumps.options(o));
      const auto got = f(inputs);
      const auto want = fn(inputs);
      for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(test::bit_equal(got[i], want[i])) << i;
      const bool packs = !shapeless && rows == 64 && cpu::dnnl_product_taken(64, 48, 80);
      EXPECT_EQ(packed_products(dumps), packs ? 1 : 0) << dumps.final_tape();
    }
  }
}

/// Matmul steps of the final tape whose B is in column panels (the printer's "in panels of").
int panel_products(const test::Dumps& dumps) {
  int n = 0;
  for (const std::string& line : test::Dumps::lines(dumps.final_tape(), "Matmul")) n += line.find("in panels of") != std::string::npos;
  return n;
}

// Products of few rows (a decode step's vector-matrix products) read a constant B in the column
// panels of their tiles: a row-major weight, a Linear weight used transposed with its bias first,
// a width the tiles do not divide (the last panel narrower), a batch of two sharing the weight.
// Compiled (panels) == eager (strided B) bit for bit at 1, 2 and 3 threads.
TEST(MatmulPack, FewRowProductsReadTheirWeightInColumnPanelsWithTheSameBits) {
  EXPECT_TRUE(cpu::gemm_b_panels(1, 3072, 768));
  EXPECT_FALSE(cpu::gemm_b_panels(16, 3072, 768));    // enough rows for the usual tiles
  EXPECT_FALSE(cpu::gemm_b_panels(1, 50257, 768));    // a tied embedding: too large to copy
  EXPECT_FALSE(cpu::gemm_b_panels(4, 48, 80));        // one tile: nothing to cut
  const Array w = test::random_array({768, 1000}, float32, -1, 1, 31);
  const Array linear = test::random_array({1200, 256}, float32, -1, 1, 32);
  const Array bias = test::random_array({1200}, float32, -1, 1, 33);
  Fn fn = [=](const std::vector<Array>& in) {
    return std::vector<Array>{matmul(in[0], w), bias + matmul(in[1], swapaxes(linear, 0, 1)), matmul(in[2], w)};
  };
  const std::vector<Array> inputs{test::random_array({1, 768}, float32, -1, 1, 34),
                                  test::random_array({3, 256}, float32, -1, 1, 35),
                                  test::random_array({2, 1, 768}, float32, -1, 1, 36)};
  for (const auto& [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1000, 768}, {3, 1200, 256}})
    ASSERT_TRUE(cpu::gemm_b_panels(m, n, k)) << m << " x " << n << " x " << k;
  test::Dumps dumps;
  expect_eager_bits_at_thread_counts(fn, inputs, dumps);
  EXPECT_EQ(panel_products(dumps), cpu::dnnl_enabled() ? 3 : 0) << dumps.final_tape();
}

}  // namespace
}  // namespace smelt
