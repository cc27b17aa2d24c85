// The simplify passes (identities, scalar constants, CSE, dead steps), the pipeline, its dump
// hook and switches, and the tape verifier.
#include <cmath>

#include "compile_helpers.h"
#include "smelt/random.h"

namespace smelt {
namespace {

using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

Array rand(const Shape& shape, uint32_t seed, Dtype dtype = float32) {
  return test::random_array(shape, dtype, -2.0, 2.0, seed);
}

/// Compiles `fn` with fusion off (these tests look at the simplify passes), checks it against
/// eager bit for bit, and returns the dumps.
void run_unfused(test::Dumps& dumps, const Fn& fn, const std::vector<Array>& inputs, CompileOptions options = {}) {
  options.fuse = false;
  auto f = compile_flat(fn, dumps.options(options));
  auto got = f(inputs);
  auto want = fn(inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(test::bit_equal(got[i], want[i])) << "output " << i;
}

TEST(Passes, DumpHookSeesEveryPassInOrder) {
  test::Dumps dumps;
  auto f = compile_flat([](const std::vector<Array>& in) { return std::vector<Array>{exp(in[0]) * in[0]}; },
                        dumps.options());
  f({rand({4}, 1)});
  std::vector<std::string> names;
  for (auto& [name, text] : dumps.passes) names.push_back(name);
  const std::vector<std::string> expected = {"trace", "simplify", "merge_constants", "cse", "dce", "fuse"};
  // In this order (other passes may run in between).
  size_t at = 0;
  for (auto& n : names)
    if (at < expected.size() && n == expected[at]) ++at;
  EXPECT_EQ(at, expected.size()) << ::testing::PrintToString(names);
  for (auto& [name, text] : dumps.passes) EXPECT_NE(text.find("return %"), std::string::npos) << name;
  // A second call hits the cache: no passes run again.
  const size_t before = dumps.passes.size();
  f({rand({4}, 2)});
  EXPECT_EQ(dumps.passes.size(), before);
}

TEST(Passes, CseMergesRepeatedSubexpressions) {
  test::Dumps dumps;
  run_unfused(dumps, [](const std::vector<Array>& in) { return std::vector<Array>{exp(in[0]) + exp(in[0])}; },
              {rand({5}, 3)});
  EXPECT_EQ(test::Dumps::count(dumps.of("trace"), "Unary(Exp)"), 2);
  EXPECT_EQ(test::Dumps::count(dumps.of("cse"), "Unary(Exp)"), 1);
  // Both operands of the add are the one exp.
  auto add = test::Dumps::lines(dumps.of("cse"), "Binary(Add)");
  ASSERT_EQ(add.size(), 1u);
  const std::string args = add[0].substr(add[0].find("(%"));
  EXPECT_EQ(args.substr(1, args.find(',') - 1), args.substr(args.find(", ") + 2, args.find(')') - args.find(", ") - 2))
      << add[0];
}

// Equal steps over values that CSE merged are themselves merged, in one pass over the tape.
TEST(Passes, CseMergesWholeRepeatedChains) {
  test::Dumps dumps;
  Fn fn = [](const std::vector<Array>& in) {
    auto chain = [&] { return sin(exp(in[0]) * in[1] - in[1]); };
    return std::vector<Array>{chain() / chain()};
  };
  run_unfused(dumps, fn, {rand({7}, 4), rand({7}, 5)});
  for (const char* prim : {"Unary(Exp)", "Unary(Sin)", "Binary(Multiply)", "Binary(Subtract)"}) {
    EXPECT_EQ(test::Dumps::count(dumps.of("trace"), prim), 2) << prim;
    EXPECT_EQ(test::Dumps::count(dumps.of("cse"), prim), 1) << prim;
  }
}

TEST(Passes, CseKeepsStepsThatDiffer) {
  test::Dumps dumps;
  Fn fn = [](const std::vector<Array>& in) {
    return std::vector<Array>{sum(in[0], {0}), sum(in[0], {1}), max(in[0], {0}), exp(in[0]), exp(in[1]), log(in[0])};
  };
  run_unfused(dumps, fn, {rand({3, 4}, 6), rand({3, 4}, 7)});
  const std::string cse = dumps.of("cse");
  EXPECT_EQ(test::Dumps::count(cse, "Reduce"), 3) << cse;
  EXPECT_EQ(test::Dumps::count(cse, "Unary(Exp)"), 2) << cse;
  EXPECT_EQ(test::Dumps::count(cse, "Unary(Log)"), 1) << cse;
}

// Multi-output primitives are compared on every output.
TEST(Passes, CseMergesMultiOutputSteps) {
  test::Dumps dumps;
  Fn fn = [](const std::vector<Array>& in) {
    auto [v1, i1] = topk(in[0], 2);
    auto [v2, i2] = topk(in[0], 2);
    auto [v3, i3] = topk(in[0], 3);
    return std::vector<Array>{v1 + v2, astype(i1, float32) + astype(i2, float32), v3};
  };
  run_unfused(dumps, fn, {rand({4, 6}, 8)});
  EXPECT_EQ(test::Dumps::count(dumps.of("trace"), "TopK"), 3);
  EXPECT_EQ(test::Dumps::count(dumps.of("cse"), "TopK"), 2) << dumps.of("cse");
}

// Random draws are keyed: the same key gives the same values, so equal draws merge; draws
// from different keys never do.
TEST(Passes, CseMergesRandomDrawsOnlyForTheSameKey) {
  test::Dumps dumps;
  Fn fn = [](const std::vector<Array>& in) {
    Array keys = random::split(in[0], 2);
    Array k0 = reshape(slice(keys, {0}, {1}), {2});
    Array k1 = reshape(slice(keys, {1}, {2}), {2});
    Array same = random::bits(in[0], {8}) ^ random::bits(in[0], {8});
    return std::vector<Array>{same, random::bits(k0, {8}) ^ random::bits(k1, {8})};
  };
  run_unfused(dumps, fn, {random::key(42)});
  EXPECT_EQ(test::Dumps::count(dumps.of("trace"), "RandomBits"), 4 + 1) << dumps.of("trace");  // + split
  EXPECT_EQ(test::Dumps::count(dumps.of("cse"), "RandomBits"), 3 + 1) << dumps.of("cse");
}

// Scalars merge by dtype and exact bits: 2 and 2.0 of one dtype are one constant; float64 2,
// -0.0 and +0.0 are not; NaNs with the same bits are.
TEST(Passes, ScalarConstantsMergeByDtypeAndBits) {
  test::Dumps dumps;
  Fn fn = [](const std::vector<Array>& in) {
    const Array& x = in[0];
    const Array& d = in[1];
    return std::vector<Array>{x * 2 + x * 2.0f + x * 2.0, d * 2.0, x * -0.0f + x * 0.0f,
                              x * std::nanf("") + x * std::nanf("")};
  };
  run_unfused(dumps, fn, {rand({3}, 9), rand({3}, 10, float64)});
  EXPECT_EQ(test::Dumps::count(dumps.of("trace"), "constant"), 8) << dumps.of("trace");
  // float32 2, float64 2, -0, +0, NaN.
  EXPECT_EQ(test::Dumps::count(dumps.of("merge_constants"), "constant"), 5) << dumps.of("merge_constants");
}

// Captured arrays (not scalars) stay separate constants even with equal contents: comparing
// them would cost a pass over their data.
TEST(Passes, CapturedArraysAreNotMerged) {
  test::Dumps dumps;
  Array a = Array(std::vector<float>{1, 2, 3}, {3}), b = Array(std::vector<float>{1, 2, 3}, {3});
  run_unfused(dumps, [&](const std::vector<Array>& in) { return std::vector<Array>{in[0] * a + in[0] * b}; },
              {rand({3}, 11)});
  EXPECT_EQ(test::Dumps::count(dumps.of("merge_constants"), "constant"), 2);
}

// Work on captured values alone happens once, at trace time: the tape holds its result.
TEST(Passes, CapturedComputationsAreFoldedAtTraceTime) {
  test::Dumps dumps;
  Array c = rand({4}, 12);
  run_unfused(dumps, [&](const std::vector<Array>& in) { return std::vector<Array>{in[0] + exp(c) * sin(c)}; },
              {rand({4}, 13)});
  const std::string trace = dumps.of("trace");
  EXPECT_EQ(test::Dumps::count(trace, "constant"), 1) << trace;
  EXPECT_EQ(test::Dumps::count(trace, "Unary"), 0) << trace;
}

// Ops already return their input for identity views; what reaches the tape are chains of
// views that cancel out, which simplify folds and then removes. Explicit copies stay.
TEST(Passes, ViewChainsThatCancelOutAreRemovedCopiesKept) {
  test::Dumps dumps;
  Fn fn = [](const std::vector<Array>& in) {
    Array x = squeeze(expand_dims(in[0], 0), {0});     // Reshape, Reshape
    x = transpose(transpose(x, {1, 0}), {1, 0});       // Transpose, Transpose
    x = reshape(flatten(reshape(x, {2, 6})), {3, 4});  // Reshape x3
    return std::vector<Array>{copy(x) + 1.0f};
  };
  run_unfused(dumps, fn, {rand({3, 4}, 14)});
  const std::string trace = dumps.of("trace"), simplified = dumps.of("simplify");
  EXPECT_EQ(test::Dumps::count(trace, "Reshape"), 5) << trace;
  EXPECT_EQ(test::Dumps::count(trace, "Transpose"), 2) << trace;
  const std::string after = dumps.of("dce");
  for (const char* prim : {"Reshape", "Transpose"})
    EXPECT_EQ(test::Dumps::count(after, prim), 0) << prim << "\n" << after;
  EXPECT_EQ(test::Dumps::count(after, "Copy"), 1) << after;
  EXPECT_NE(simplified.find("Copy()(%0)"), std::string::npos) << simplified;  // reads the input itself
}

// Chains that do not cancel fold into one view of the original input.
TEST(Passes, ViewChainsFoldIntoOneView) {
  test::Dumps dumps;
  Fn fn = [](const std::vector<Array>& in) {
    Array r = reshape(reshape(in[0], {4, 3}), {2, 6});
    Array t = transpose(transpose(in[0], {1, 0}), {1, 0});
    Array t3 = transpose(transpose(in[1], {1, 2, 0}), {2, 0, 1});  // undone: identity
    Array t4 = transpose(transpose(in[1], {1, 2, 0}), {1, 2, 0});  // composed: {2, 0, 1}
    Array b = broadcast_to(broadcast_to(in[2], {3, 4}), {2, 3, 4});
    return std::vector<Array>{r * 2.0f, t * 3.0f, t3 * 4.0f, t4 * 5.0f, b * 6.0f};
  };
  run_unfused(dumps, fn, {rand({3, 4}, 15), rand({2, 3, 4}, 16), rand({4}, 17)});
  const std::string after = dumps.of("dce");
  EXPECT_EQ(test::Dumps::count(after, "Reshape"), 1) << after;
  auto transposes = test::Dumps::lines(after, "Transpose");
  ASSERT_EQ(transposes.size(), 1u) << after;
  EXPECT_NE(transposes[0].find("Transpose([2,0,1])(%1)"), std::string::npos) << transposes[0];
  auto broadcasts = test::Dumps::lines(after, "Broadcast([2,3,4])(%2)");
  EXPECT_EQ(broadcasts.size(), 1u) << after;
}

TEST(Passes, ViewsThatChangeSomethingStay) {
  test::Dumps dumps;
  Fn fn = [](const std::vector<Array>& in) {
    return std::vector<Array>{reshape(in[0], {4, 3}) + 1.0f, transpose(in[0]) * 2.0f,
                              slice(in[0], {0, 0}, {3, 4}, {1, 2}) - 1.0f};
  };
  run_unfused(dumps, fn, {rand({3, 4}, 15)});
  const std::string simplified = dumps.of("simplify");
  for (const char* prim : {"Reshape", "Transpose", "Slice"}) EXPECT_EQ(test::Dumps::count(simplified, prim), 1) << prim;
}

TEST(Passes, DeadStepsAndConstantsAreDropped) {
  test::Dumps dumps;
  Array unused = rand({5}, 16);
  Fn fn = [&](const std::vector<Array>& in) {
    Array dead = exp(in[0]) * unused;  // computed, never returned
    (void)dead;
    return std::vector<Array>{in[0] + 1.0f};
  };
  run_unfused(dumps, fn, {rand({5}, 17)});
  EXPECT_EQ(test::Dumps::count(dumps.of("trace"), "Unary(Exp)"), 0);  // never reached from an output
  // Dead code the passes themselves create: after CSE an unused duplicate remains dead.
  test::Dumps more;
  Fn dup = [](const std::vector<Array>& in) {
    Array a = exp(in[0]);
    Array b = exp(in[0]);
    return std::vector<Array>{a * b, sin(in[0])};
  };
  run_unfused(more, dup, {rand({5}, 18)});
  EXPECT_EQ(test::Dumps::count(more.of("dce"), "Unary(Exp)"), 1);
  EXPECT_EQ(test::Dumps::count(more.of("dce"), "Unary(Sin)"), 1);
}

TEST(Passes, DisabledPassesAreSkipped) {
  Fn fn = [](const std::vector<Array>& in) {
    return std::vector<Array>{exp(reshape(reshape(in[0], {2, 3}), {6})) + exp(in[0])};
  };
  {
    test::Dumps dumps;
    run_unfused(dumps, fn, {rand({6}, 19)}, {.disabled_passes = {"cse"}});
    EXPECT_EQ(dumps.of("cse"), "");
    EXPECT_EQ(test::Dumps::count(dumps.final_tape(), "Unary(Exp)"), 2) << dumps.final_tape();
  }
  {
    test::Dumps dumps;
    run_unfused(dumps, fn, {rand({6}, 20)}, {.disabled_passes = {"simplify"}});
    EXPECT_EQ(dumps.of("simplify"), "");
    // The reshapes stay, so the two exps read different values and do not merge.
    EXPECT_EQ(test::Dumps::count(dumps.final_tape(), "Reshape"), 2) << dumps.final_tape();
    EXPECT_EQ(test::Dumps::count(dumps.final_tape(), "Unary(Exp)"), 2) << dumps.final_tape();
  }
  {
    test::Dumps dumps;
    run_unfused(dumps, fn, {rand({6}, 21)});
    EXPECT_EQ(test::Dumps::count(dumps.final_tape(), "Unary(Exp)"), 1) << dumps.final_tape();
  }
}

TEST(Passes, VerifierNamesThePassThatBrokeTheTape) {
  auto base = [] {
    compiler::Tape t;
    t.device = Device::cpu();
    t.add_value({3}, float32);
    t.num_inputs = 1;
    return t;
  };
  {
    compiler::Tape t = base();
    int out = t.add_value({3}, float32);
    t.steps.push_back({make_prim(PrimKind::Unary, UnaryParams{UnaryOp::Exp}), {5}, {out}});
    t.outputs = {out};
    EXPECT_THROW_MSG(compiler::verify_tape(t, "bogus"), Error,
                     "the tape is invalid after pass 'bogus': Unary(Exp) reads %5 before it is defined");
  }
  {
    compiler::Tape t = base();
    t.steps.push_back({make_prim(PrimKind::Unary, UnaryParams{UnaryOp::Exp}), {0}, {0}});
    t.outputs = {0};
    EXPECT_THROW_MSG(compiler::verify_tape(t, "bogus"), Error, "redefines %0");
  }
  {
    compiler::Tape t = base();
    t.outputs = {1};
    EXPECT_THROW_MSG(compiler::verify_tape(t, "bogus"), Error, "output %1 is undefined");
  }
  {
    compiler::Tape t = base();
    int a = t.add_value({3}, float32), b = t.add_value({3}, float32);
    t.steps.push_back({make_prim(PrimKind::Unary, UnaryParams{UnaryOp::Exp}), {0}, {a, b}});
    t.outputs = {a};
    EXPECT_THROW_MSG(compiler::verify_tape(t, "bogus"), Error, "has 2 outputs");
  }
  {
    compiler::Tape t = base();
    int out = t.add_value({3}, float32);
    t.steps.push_back({make_prim(PrimKind::Unary, UnaryParams{UnaryOp::Exp}), {0}, {out}});
    t.outputs = {out};
    EXPECT_NO_THROW(compiler::verify_tape(t, "bogus"));
  }
}

// The verifier recomputes every step's output type from its inputs by the primitive's shape and
// dtype rules: a pass that rewires a step or records a wrong type is caught, naming the pass, the
// step, the primitive and both types.
TEST(Passes, VerifierRechecksShapesAndDtypes) {
  auto base = [] {
    compiler::Tape t;
    t.device = Device::cpu();
    t.add_value({3}, float32);
    t.add_value({2, 3}, float32);
    t.add_value({3}, int32);
    t.num_inputs = 3;
    return t;
  };
  auto step = [](compiler::Tape& t, Primitive prim, std::vector<int> in, Shape shape, Dtype dtype) {
    int out = t.add_value(std::move(shape), dtype);
    t.steps.push_back({std::move(prim), std::move(in), {out}, Device::cpu()});
    t.outputs = {out};
  };
  const Primitive exp = make_prim(PrimKind::Unary, UnaryParams{UnaryOp::Exp});
  {  // a shape that the inputs do not give
    compiler::Tape t = base();
    step(t, exp, {0}, {4}, float32);
    EXPECT_THROW_MSG(compiler::verify_tape(t, "fuse"), Error,
                     "internal error: the tape is invalid after pass 'fuse': step 0 (Unary(Exp)): output %3 is "
                     "recorded as float32[4] but its inputs give float32[3]");
  }
  {  // a comparison recorded with its operands' dtype instead of bool
    compiler::Tape t = base();
    step(t, make_prim(PrimKind::Binary, BinaryParams{BinaryOp::Less}), {0, 1}, {2, 3}, float32);
    EXPECT_THROW_MSG(compiler::verify_tape(t, "cse"), Error,
                     "after pass 'cse': step 0 (Binary(Less)): output %3 is recorded as float32[2,3] but its "
                     "inputs give bool[2,3]");
  }
  {  // an int32 sum accumulates in int64
    compiler::Tape t = base();
    step(t, make_prim(PrimKind::Reduce, ReduceParams{ReduceOp::Sum, {0}, 0}), {2}, {1}, int32);
    EXPECT_THROW_MSG(compiler::verify_tape(t, "simplify"), Error,
                     "after pass 'simplify': step 0 (Reduce(sum, axes=[0])): output %3 is recorded as int32[1] but its "
                     "inputs give int64[1]");
  }
  {  // a later step rewired to an input of another shape
    compiler::Tape t = base();
    step(t, exp, {0}, {3}, float32);
    step(t, make_prim(PrimKind::Binary, BinaryParams{BinaryOp::Add}), {3, 1}, {3}, float32);
    EXPECT_THROW_MSG(compiler::verify_tape(t, "dce"), Error,
                     "after pass 'dce': step 1 (Binary(Add)): output %4 is recorded as float32[3] but its inputs "
                     "give float32[2,3]");
  }
  {  // operands of two dtypes fit no rule
    compiler::Tape t = base();
    step(t, make_prim(PrimKind::Binary, BinaryParams{BinaryOp::Add}), {0, 2}, {3}, float32);
    EXPECT_THROW_MSG(compiler::verify_tape(t, "merge_constants"), Error,
                     "after pass 'merge_constants': step 0 (Binary(Add)): its inputs do not fit its shape and dtype "
                     "rules: Binary(Add): inputs 0 and 1 have different dtypes; input dtypes (float32, int32)");
  }
  {  // the same steps with the right types pass
    compiler::Tape t = base();
    step(t, exp, {0}, {3}, float32);
    step(t, make_prim(PrimKind::Binary, BinaryParams{BinaryOp::Less}), {3, 1}, {2, 3}, bool_);
    step(t, make_prim(PrimKind::Reduce, ReduceParams{ReduceOp::Sum, {0}, 0}), {2}, {1}, int64);
    EXPECT_NO_THROW(compiler::verify_tape(t, "fuse"));
  }
}

// Graph walks use worklists: a chain tens of thousands of steps deep traces, passes and
// replays without exhausting the stack.
TEST(Passes, DeepChainsDoNotOverflowTheStack) {
  const int depth = 20000;
  Fn fn = [](const std::vector<Array>& in) {
    Array x = in[0];
    for (int i = 0; i < depth; ++i) x = (i % 2) ? x * 0.999f : x + 0.001f;
    return std::vector<Array>{x};
  };
  test::Dumps dumps;
  auto f = compile_flat(fn, dumps.options({.fuse = false}));
  Array x = rand({4}, 22);
  Array got = f({x})[0];
  EXPECT_TRUE(test::bit_equal(got, fn({x})[0]));
  EXPECT_EQ(test::Dumps::count(dumps.final_tape(), "Binary"), depth);
  // Every scalar merged into two constants.
  EXPECT_EQ(test::Dumps::count(dumps.final_tape(), "constant"), 2);
}

}  // namespace
}  // namespace smelt
