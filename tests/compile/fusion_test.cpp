// The fuse pass as users see it: which steps become generated kernels, with what inside, on
// which layouts and shapes, checked on the dumped tapes and against eager results bit for bit.
#include "compile_helpers.h"
#include "smelt/memory.h"
#include "src/compile/fuse.h"

namespace smelt {
namespace {

using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

// exp(x) * y + 1: the chain most tests share, so that one kernel serves them.
std::vector<Array> exp_mul_add(const std::vector<Array>& in) { return {exp(in[0]) * in[1] + 1.0f}; }

Array rand(const Shape& shape, uint32_t seed, Dtype dtype = float32) {
  return test::random_array(shape, dtype, -2.0, 2.0, seed);
}

/// Calls `compiled` and `fn` on `inputs` and expects every output bit-identical.
template <class C>
void expect_same(C& compiled, const Fn& fn, const std::vector<Array>& inputs, const std::string& what = "") {
  auto got = compiled(inputs);
  auto want = fn(inputs);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(test::bit_equal(got[i], want[i])) << what << " output " << i;
}

TEST(Fusion, ChainBecomesOneKernel) {
  test::Dumps dumps;
  auto f = compile_flat(exp_mul_add, dumps.options());
  expect_same(f, exp_mul_add, {rand({33, 17}, 1), rand({33, 17}, 2)});
  const std::string tape = dumps.final_tape();
  auto fused = test::Dumps::lines(tape, "Fused");
  ASSERT_EQ(fused.size(), 1u) << tape;
  EXPECT_NE(fused[0].find("Fused(add(multiply(exp(in0), in1), 1))(%0, %1)"), std::string::npos) << fused[0];
  // Nothing else is left: the scalar is a literal, its broadcast is gone.
  EXPECT_EQ(test::Dumps::count(tape, "constant"), 0) << tape;
  EXPECT_EQ(test::Dumps::count(tape, "Broadcast"), 0) << tape;
}

TEST(Fusion, SingleOperationsAreNotWrapped) {
  test::Dumps dumps;
  Fn fn = [](const std::vector<Array>& in) { return std::vector<Array>{exp(in[0]), in[1] + 1.0f}; };
  auto f = compile_flat(fn, dumps.options());
  expect_same(f, fn, {rand({8}, 3), rand({8}, 4)});
  const std::string tape = dumps.final_tape();
  EXPECT_EQ(test::Dumps::count(tape, "Fused"), 0) << tape;
  EXPECT_EQ(test::Dumps::count(tape, "Unary(Exp)"), 1) << tape;
  EXPECT_EQ(test::Dumps::count(tape, "Binary(Add)"), 1) << tape;
}

TEST(Fusion, ReductionJoinsItsPrologueAndAReshapeEndsTheGroup) {
  test::Dumps dumps;
  Fn fn = [](const std::vector<Array>& in) { return std::vector<Array>{sqrt(sum(exp(in[0]) * 2.0f, {-1})) + 1.0f}; };
  auto f = compile_flat(fn, dumps.options());
  expect_same(f, fn, {rand({6, 40}, 5)});
  const std::string tape = dumps.final_tape();
  ASSERT_EQ(test::Dumps::count(tape, "Fused"), 2) << tape;
  ASSERT_EQ(test::Dumps::count(tape, "Reduce"), 0) << tape;
  // In tape order: the reduction with its prologue (a row kernel), the reshape that drops the
  // reduced axis (not fusable), the chain after it.
  const size_t first = tape.find("Fused(sum_row(multiply(exp(in0), 2)))");
  const size_t reshape = tape.find("Reshape(");
  const size_t second = tape.find("Fused(add(sqrt(in0), 1))");
  ASSERT_NE(first, std::string::npos) << tape;
  ASSERT_NE(second, std::string::npos) << tape;
  EXPECT_LT(first, reshape);
  EXPECT_LT(reshape, second);
}

// A reduction over a leading axis (a column reduction) does not join: the chains before and
// after it are kernels of their own.
TEST(Fusion, ColumnReductionSplitsTwoGroups) {
  test::Dumps dumps;
  Fn fn = [](const std::vector<Array>& in) { return std::vector<Array>{sqrt(sum(exp(in[0]) * 2.0f, {0})) + 1.0f}; };
  auto f = compile_flat(fn, dumps.options());
  expect_same(f, fn, {rand({6, 40}, 5)});
  const std::string tape = dumps.final_tape();
  ASSERT_EQ(test::Dumps::count(tape, "Fused"), 2) << tape;
  ASSERT_EQ(test::Dumps::count(tape, "Reduce"), 1) << tape;
  const size_t first = tape.find("Fused(multiply(exp(in0), 2))");
  const size_t reduce = tape.find("Reduce(sum");
  const size_t second = tape.find("Fused(add(sqrt(in0), 1))");
  ASSERT_NE(first, std::string::npos) << tape;
  ASSERT_NE(second, std::string::npos) << tape;
  EXPECT_LT(first, reduce);
  EXPECT_LT(reduce, second);
}

// A value that a non-fusable step also reads is stored: it does not join the chain after it.
TEST(Fusion, IntermediateReadOutsideTheChainStaysStored) {
  test::Dumps dumps;
  Fn fn = [](const std::vector<Array>& in) {
    Array y = exp(in[0]);
    return std::vector<Array>{sum(y), sin(y) * 2.0f};
  };
  auto f = compile_flat(fn, dumps.options());
  expect_same(f, fn, {rand({5, 9}, 6)});
  const std::string tape = dumps.final_tape();
  ASSERT_EQ(test::Dumps::count(tape, "Unary(Exp)"), 1) << tape;
  auto fused = test::Dumps::lines(tape, "Fused");
  ASSERT_EQ(fused.size(), 1u) << tape;
  EXPECT_NE(fused[0].find("Fused(multiply(sin(in0), 2))"), std::string::npos) << fused[0];
}

// Values of a chain that the function also returns become extra outputs of the one kernel.
TEST(Fusion, MultiOutputKernel) {
  test::Dumps dumps;
  Fn fn = [](const std::vector<Array>& in) {
    Array a = in[0] * in[1];
    Array b = a + 1.0f;
    return std::vector<Array>{a, b, exp(b)};
  };
  auto f = compile_flat(fn, dumps.options());
  expect_same(f, fn, {rand({4, 25}, 7), rand({4, 25}, 8)});
  auto fused = test::Dumps::lines(dumps.final_tape(), "Fused");
  ASSERT_EQ(fused.size(), 1u) << dumps.final_tape();
  const std::string results = fused[0].substr(0, fused[0].find(" = "));
  EXPECT_EQ(std::count(results.begin(), results.end(), '%'), 3) << fused[0];
  EXPECT_NE(fused[0].find("Fused(multiply(in0, in1); add(multiply(in0, in1), 1); exp(add(multiply(in0, in1), 1)))"),
            std::string::npos)
      << fused[0];
}

// A chain longer than kMaxFusedInstructions is cut into kernels of at most that many
// operations; equal pieces share one generated kernel.
TEST(Fusion, LongChainSplitsAtTheInstructionLimit) {
  const int ops = 2 * compiler::kMaxFusedInstructions + 40;
  Fn fn = [ops](const std::vector<Array>& in) {
    Array x = in[0];
    for (int i = 0; i < ops / 2; ++i) x = x * 0.5f + 0.25f;
    return std::vector<Array>{x};
  };
  test::EventLog log;
  auto tape = test::optimized_tape(fn, {rand({64}, 9)});
  auto programs = test::fused_programs(tape);
  ASSERT_EQ(programs.size(), 3u) << compiler::dump_tape(tape);
  std::vector<int> sizes;
  for (auto* p : programs) sizes.push_back(test::compute_instrs(*p));
  EXPECT_EQ(sizes, (std::vector<int>{40, compiler::kMaxFusedInstructions, compiler::kMaxFusedInstructions}));
  EXPECT_EQ(tape.steps.size(), 3u) << compiler::dump_tape(tape);
  EXPECT_LE(log.count("compile.kernel.build"), 2);  // the two full pieces are the same program
  auto f = compile_flat(fn);
  expect_same(f, fn, {rand({64}, 10)});
}

// A sum of many inputs needs more arguments than kMaxFusedArguments: it is cut into kernels
// that each stay within the limit, and every addition is still fused.
TEST(Fusion, WideSumSplitsAtTheArgumentLimit) {
  const int n = 40;
  Fn fn = [](const std::vector<Array>& in) {
    Array acc = in[0];
    for (size_t i = 1; i < in.size(); ++i) acc = acc + in[i];
    return std::vector<Array>{acc};
  };
  std::vector<Array> inputs;
  for (int i = 0; i < n; ++i) inputs.push_back(rand({3, 7}, 100 + i));
  auto tape = test::optimized_tape(fn, inputs);
  auto fused = test::steps_of(tape, PrimKind::Fused);
  ASSERT_EQ(fused.size(), 2u) << compiler::dump_tape(tape);
  int adds = 0;
  for (auto* s : fused) {
    EXPECT_LE(static_cast<int>(s->inputs.size() + s->outputs.size()), compiler::kMaxFusedArguments);
    adds += test::compute_instrs(s->prim.get<FusedParams>().kernel->program);
  }
  EXPECT_EQ(adds, n - 1);
  EXPECT_EQ(tape.steps.size(), 2u) << compiler::dump_tape(tape);
  auto f = compile_flat(fn);
  expect_same(f, fn, inputs);
}

// Every intermediate of a chain returned: more outputs than one kernel may have.
TEST(Fusion, ManyOutputsSplitAtTheArgumentLimit) {
  const int n = 30;
  Fn fn = [](const std::vector<Array>& in) {
    std::vector<Array> out{exp(in[0])};
    for (int i = 1; i < n; ++i) out.push_back(out.back() * 1.5f);
    return out;
  };
  auto tape = test::optimized_tape(fn, {rand({10}, 11)});
  auto fused = test::steps_of(tape, PrimKind::Fused);
  ASSERT_GE(fused.size(), 2u) << compiler::dump_tape(tape);
  size_t outputs = 0;
  for (auto* s : fused) {
    EXPECT_LE(static_cast<int>(s->inputs.size() + s->outputs.size()), compiler::kMaxFusedArguments);
    outputs += s->outputs.size();
  }
  EXPECT_EQ(outputs, static_cast<size_t>(n));
  auto f = compile_flat(fn);
  expect_same(f, fn, {rand({10}, 12)});
}

// Broadcast operands are read in place through zero strides: no Broadcast step, no copy.
// (An operand computed at a smaller shape is computed there, not once per output element.)
TEST(Fusion, BroadcastOperandsAreReadInPlace) {
  test::Dumps dumps;
  auto f = compile_flat(exp_mul_add, dumps.options());
  expect_same(f, exp_mul_add, {rand({4, 5, 3}, 13), rand({5, 1}, 14)});
  const std::string tape = dumps.final_tape();
  auto fused = test::Dumps::lines(tape, "Fused");
  ASSERT_EQ(fused.size(), 1u) << tape;
  EXPECT_NE(fused[0].find(")(%0, %1) : float32[4,5,3]"), std::string::npos) << fused[0];
  EXPECT_EQ(test::Dumps::count(tape, "Broadcast"), 0) << tape;
}

// Kernels have no shapes in them: one generated kernel serves every shape, rank and
// broadcast pattern of its dtypes.
TEST(Fusion, OneKernelServesEveryShape) {
  test::EventLog log;
  Fn fn = [](const std::vector<Array>& in) { return std::vector<Array>{exp(in[0]) * in[1] + 3.0f}; };
  auto f = compile_flat(fn);
  const std::vector<std::pair<Shape, Shape>> shapes = {{{7}, {7}},   {{3, 5}, {3, 5}}, {{2, 3, 4}, {2, 3, 4}},
                                                       {{}, {}},     {{0, 3}, {0, 3}}, {{5, 4}, {1, 4}},
                                                       {{3, 4}, {}}, {{6}, {1}}};
  uint32_t seed = 20;
  for (auto& [sx, sy] : shapes) expect_same(f, fn, {rand(sx, seed++), rand(sy, seed++)}, shape_to_string(sx));
  EXPECT_EQ(f.stats().traces, shapes.size());
  EXPECT_EQ(log.count("compile.kernel.build"), 1);
}

// Transposed, reversed (negative strides), strided and broadcast views go through the
// kernel's strided path; results match eager ones and the entry is shared (same shapes).
TEST(Fusion, NonContiguousInputs) {
  auto f = compile_flat(exp_mul_add);
  Array base = rand({7, 5}, 30);
  Array big = rand({10, 14}, 31);
  Array y = rand({5, 7}, 32);
  std::vector<std::pair<std::string, Array>> layouts = {
      {"contiguous", rand({5, 7}, 33)},
      {"transposed", transpose(base)},
      {"reversed", flip(rand({5, 7}, 34), {0, 1})},
      {"strided", slice(big, {1, 0}, {10, 14}, {2, 2})},
      {"negative strides", slice(big, {9, 13}, {-11, -15}, {-2, -2})},
      {"broadcast", broadcast_to(rand({1, 7}, 35), {5, 7})},
  };
  for (auto& [name, x] : layouts) {
    x.eval();
    EXPECT_EQ(x.is_contiguous(), name == "contiguous") << name;
    expect_same(f, exp_mul_add, {x, y}, name);
    expect_same(f, exp_mul_add, {y, x}, name + " (second operand)");
  }
  EXPECT_EQ(f.stats().traces, 1u);
}

// Short rows: a per-channel operand over the channel-blocked layout ([N, C/8, H, W, 8] with a
// [C/8, 1, 1, 8] operand: rows of 8 after collapsing) goes through the strided path's loop over
// whole rows, from chunk starts in the middle of a row and of an axis (every thread count from 1
// to 7 cuts the elements differently), including carries over several axes; the bits are eager's.
TEST(Fusion, ShortRowsOfABroadcastOperandLoopOverRows) {
  Fn fn = [](const std::vector<Array>& in) { return std::vector<Array>{maximum(in[0] + in[1], 0.0f) * in[2]}; };
  auto f = compile_flat(fn);
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 5, 7, 9, 8}, {5, 1, 1, 8}}, {{2, 3, 1, 33, 8}, {3, 1, 1, 8}}, {{4, 6, 3}, {6, 1}}, {{5, 2, 3, 3}, {2, 3, 1}}};
  const int threads = cpu_threads();
  uint32_t seed = 90;
  for (auto& [sx, sb] : shapes) {
    std::vector<Array> in = {rand(sx, seed++), rand(sb, seed++), rand(sx, seed++)};
    // More than one grain of work, so that the elements split over the threads.
    Shape big = sx;
    big[0] *= 600;
    std::vector<Array> large = {rand(big, seed++), in[1], rand(big, seed++)};
    for (int t = 1; t <= 7; ++t) {
      set_cpu_threads(t);
      expect_same(f, fn, in, shape_to_string(sx) + " threads " + std::to_string(t));
      expect_same(f, fn, large, shape_to_string(big) + " threads " + std::to_string(t));
    }
  }
  set_cpu_threads(threads);
}

// More axes than the generated kernels walk (16) after collapsing: a transposed rank-18 array.
TEST(Fusion, HighRankTransposedInput) {
  Shape shape(18, 2);
  Axes perm;
  for (int i = 17; i >= 0; --i) perm.push_back(i);
  Array x = transpose(rand(shape, 40), perm);
  x.eval();
  auto f = compile_flat(exp_mul_add);
  expect_same(f, exp_mul_add, {x, rand(shape, 41)});
  expect_same(f, exp_mul_add, {rand(shape, 42), x});
}

// A value used twice inside the chain is computed once in the kernel.
TEST(Fusion, SharedValueInsideTheKernelIsComputedOnce) {
  Fn fn = [](const std::vector<Array>& in) {
    Array y = exp(in[0]);
    return std::vector<Array>{y * y + sin(y)};
  };
  auto tape = test::optimized_tape(fn, {rand({16}, 50)});
  auto programs = test::fused_programs(tape);
  ASSERT_EQ(programs.size(), 1u);
  int exps = 0;
  for (auto& in : programs[0]->instrs) exps += in.kind == codegen::InstrKind::Unary && in.unary == UnaryOp::Exp;
  EXPECT_EQ(exps, 1);
  EXPECT_EQ(test::compute_instrs(*programs[0]), 4);
  auto f = compile_flat(fn);
  expect_same(f, fn, {test::special_array(float32, 300, 51)});
}

TEST(Fusion, SelectAndCastsJoinTheKernel) {
  test::Dumps dumps;
  Fn fn = [](const std::vector<Array>& in) {
    Array half = astype(astype(in[0], float16), float32);
    return std::vector<Array>{where(in[0] > 0.0f, half, in[1] * 2.0f)};
  };
  auto f = compile_flat(fn, dumps.options());
  expect_same(f, fn, {test::special_array(float32, 200, 52), test::special_array(float32, 200, 53)});
  auto fused = test::Dumps::lines(dumps.final_tape(), "Fused");
  ASSERT_EQ(fused.size(), 1u) << dumps.final_tape();
  EXPECT_NE(fused[0].find("where(greater(in0, 0), float32(float16(in0)), multiply(in1, 2))"), std::string::npos)
      << fused[0];
}

TEST(Fusion, IntegerAndBoolChains) {
  test::Dumps dumps;
  Fn fn = [](const std::vector<Array>& in) {
    Array bits = ((in[0] & 3) << 1) ^ in[1];
    Array mask = (bits > 2) && !(in[0] == in[1]);
    return std::vector<Array>{bits, mask};
  };
  auto f = compile_flat(fn, dumps.options());
  expect_same(f, fn, {test::special_array(int32, 300, 54), test::special_array(int32, 300, 55)});
  EXPECT_EQ(test::Dumps::count(dumps.final_tape(), "Fused"), 1) << dumps.final_tape();
  EXPECT_EQ(test::Dumps::count(dumps.final_tape(), "Binary"), 0) << dumps.final_tape();
}

TEST(Fusion, CanBeSwitchedOff) {
  for (CompileOptions options : {CompileOptions{.fuse = false}, CompileOptions{.disabled_passes = {"fuse"}}}) {
    test::Dumps dumps;
    auto f = compile_flat(exp_mul_add, dumps.options(options));
    expect_same(f, exp_mul_add, {rand({6}, 60), rand({6}, 61)});
    EXPECT_EQ(test::Dumps::count(dumps.final_tape(), "Fused"), 0) << dumps.final_tape();
    EXPECT_EQ(test::Dumps::count(dumps.final_tape(), "Unary(Exp)"), 1) << dumps.final_tape();
  }
}

// Large inputs are split over threads; the split never changes a bit.
TEST(Fusion, LargeInputsAreThreadCountIndependent) {
  auto f = compile_flat(exp_mul_add);
  std::vector<Array> in = {rand({1 << 20}, 70), rand({1 << 20}, 71)};
  Array parallel = f(in)[0];
  const int threads = cpu_threads();
  set_cpu_threads(1);
  Array serial = f(in)[0];
  set_cpu_threads(threads);
  EXPECT_TRUE(test::bit_equal(parallel, serial));
  EXPECT_TRUE(test::bit_equal(parallel, exp_mul_add(in)[0]));
  // A small transformer's bias and GELU (32 x 512): its erf counts as the vector operations it
  // takes, so the 16K elements are split too; 1 to 3 threads give eager's bits.
  Fn gelu = [](const std::vector<Array>& x) {
    Array h = x[0] + x[1];
    return std::vector<Array>{h * 0.5f * (erf(h * 0.70710678f) + 1.0f)};
  };
  auto g = compile_flat(gelu);
  const std::vector<Array> hidden = {rand({32, 512}, 72), rand({512}, 73)};
  const Array want = gelu(hidden)[0];
  for (int t : {1, 2, 3}) {
    set_cpu_threads(t);
    EXPECT_TRUE(test::bit_equal(g(hidden)[0], want)) << t << " threads";
  }
  set_cpu_threads(threads);
}

// Element-wise epilogues of a matmul fuse; the matmul itself stays a library call.
TEST(Fusion, MatmulEpilogueFuses) {
  test::Dumps dumps;
  Fn fn = [](const std::vector<Array>& in) { return std::vector<Array>{relu(matmul(in[0], in[1]) + in[2])}; };
  auto f = compile_flat(fn, dumps.options());
  expect_same(f, fn, {rand({8, 16}, 80), rand({16, 12}, 81), rand({12}, 82)});
  const std::string tape = dumps.final_tape();
  EXPECT_EQ(test::Dumps::count(tape, "Matmul"), 1) << tape;
  auto fused = test::Dumps::lines(tape, "Fused");
  ASSERT_EQ(fused.size(), 1u) << tape;
  EXPECT_NE(fused[0].find("Fused(relu(add("), std::string::npos) << fused[0];
}

// One scalar feeding chains that end up in different kernels: each kernel gets it as a
// literal (broadcasts are copied into every group that reads them, never stored).
TEST(Fusion, ScalarSharedByTwoKernelsIsALiteralInBoth) {
  test::Dumps dumps;
  Fn fn = [](const std::vector<Array>& in) {
    Array u = exp(in[0]) * 2.0f;
    Array v = sum(u, {0}, true);  // over columns: stays a step between the two kernels
    return std::vector<Array>{(u - v) * 2.0f};
  };
  auto f = compile_flat(fn, dumps.options());
  expect_same(f, fn, {rand({4, 6}, 90)});
  const std::string tape = dumps.final_tape();
  EXPECT_EQ(test::Dumps::count(tape, "Fused"), 2) << tape;
  EXPECT_EQ(test::Dumps::count(tape, "constant"), 0) << tape;
  EXPECT_EQ(test::Dumps::count(tape, "Broadcast"), 0) << tape;
  EXPECT_NE(tape.find("Fused(multiply(exp(in0), 2))"), std::string::npos) << tape;
  EXPECT_NE(tape.find("Fused(multiply(subtract(in1, in0), 2))"), std::string::npos) << tape;
}

}  // namespace
}  // namespace smelt
