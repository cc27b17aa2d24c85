// checkpoint: gradients equal the non-checkpointed ones bit for bit, and the backward graph holds
// a recomputation instead of the values made inside the call.
#include <gtest/gtest.h>

#include <unordered_set>
#include <vector>

#include "smelt/compile.h"
#include "smelt/transforms.h"
#include "src/core/node.h"
#include "test_utils.h"

namespace smelt {
namespace {

using test::bit_equal;
using test::random_array;

/// Every unevaluated node a value's graph reaches (a worklist walk).
std::unordered_set<const detail::Node*> graph_of(const std::vector<Array>& roots) {
  std::unordered_set<const detail::Node*> seen;
  std::vector<Array> work(roots.begin(), roots.end());
  while (!work.empty()) {
    Array a = work.back();
    work.pop_back();
    if (!seen.insert(&a.node()).second) continue;
    for (const auto& in : a.node().inputs) work.push_back(in);
  }
  return seen;
}

size_t count_kind(const std::unordered_set<const detail::Node*>& nodes, PrimKind kind) {
  size_t n = 0;
  for (const auto* p : nodes) n += p->prim.kind == kind;
  return n;
}

struct Block {
  Array w1, w2;
};

}  // namespace
}  // namespace smelt

SMELT_TREE(smelt::Block, w1, w2)

namespace smelt {
namespace {

Array block(const Block& p, const Array& x) { return tanh(matmul(exp(matmul(x, p.w1) * 0.5f), p.w2)) + x; }

TEST(Checkpoint, GradientsEqualTheUncheckpointedOnesBitForBit) {
  Block p{random_array({6, 8}, float32, -0.5, 0.5, 1), random_array({8, 6}, float32, -0.5, 0.5, 2)};
  Array x = random_array({4, 6}, float32, -1, 1, 3);
  auto loss = [](auto f) {
    return [f](const Block& p, const Array& x) { return sum(square(f(p, f(p, x)))); };
  };
  auto plain = loss([](const Block& p, const Array& x) { return block(p, x); });
  auto ckpt = loss(checkpoint([](const Block& p, const Array& x) { return block(p, x); }));
  auto [v0, g0] = value_and_grad(plain, argnums<0, 1>)(p, x);
  auto [v1, g1] = value_and_grad(ckpt, argnums<0, 1>)(p, x);
  EXPECT_TRUE(bit_equal(v1, v0));
  EXPECT_TRUE(bit_equal(std::get<0>(g1).w1, std::get<0>(g0).w1));
  EXPECT_TRUE(bit_equal(std::get<0>(g1).w2, std::get<0>(g0).w2));
  EXPECT_TRUE(bit_equal(std::get<1>(g1), std::get<1>(g0)));
}

TEST(Checkpoint, TheBackwardGraphRecomputesInsteadOfKeepingTheForwardValues) {
  Array x = random_array({5}, float64, -1, 1, 4);
  std::vector<Array> made;  // exp(x) as made by each run of f
  auto f = [&made](const Array& x) {
    made.push_back(exp(x));
    return made.back() * made.back();
  };
  // exp's vjp reads exp's output, so without checkpoint the gradient's graph holds the forward's
  // exp node; with it, the gradient holds the exp node of a second run of f instead.
  Array g_plain = grad([&](const Array& x) { return sum(f(x)); })(x);
  ASSERT_EQ(made.size(), 1u);
  auto plain = graph_of({g_plain});
  EXPECT_TRUE(plain.count(&made[0].node()));

  made.clear();
  auto cf = checkpoint([&](const Array& x) { return f(x); });
  Array g_ckpt = grad([&](const Array& x) { return sum(cf(x)); })(x);
  ASSERT_EQ(made.size(), 2u);  // the forward run and the recomputation
  auto ckpt = graph_of({g_ckpt});
  EXPECT_FALSE(ckpt.count(&made[0].node())) << "the forward's values are kept for the backward pass";
  EXPECT_TRUE(ckpt.count(&made[1].node()));
  EXPECT_EQ(count_kind(ckpt, PrimKind::Unary), count_kind(plain, PrimKind::Unary));
  EXPECT_GT(ckpt.size(), plain.size());  // the recomputed forward graph
  EXPECT_TRUE(bit_equal(g_ckpt, g_plain));
}

TEST(Checkpoint, SeveralOutputsArePulledBackInOneRecomputation) {
  Array x = random_array({3, 4}, float64, -1, 1, 5);
  int calls = 0;
  auto two = [&calls](const Array& x) {
    ++calls;
    return std::pair<Array, Array>{sin(x), cos(x) * x};
  };
  auto loss = [](auto f) {
    return [f](const Array& x) {
      auto [a, b] = f(x);
      return sum(a * 2.0) + sum(exp(b) * a);
    };
  };
  Array g0 = grad(loss(two))(x);
  calls = 0;
  Array g1 = grad(loss(checkpoint(two)))(x);
  EXPECT_EQ(calls, 2);  // the forward call and one recomputation for both outputs
  EXPECT_TRUE(bit_equal(g1, g0));
}

TEST(Checkpoint, ComposesWithJvpVmapHigherOrderAndCompile) {
  Array x = random_array({4}, float64, -1, 1, 6), t = random_array({4}, float64, -1, 1, 7);
  auto f = [](const Array& x) { return sin(x) * exp(x); };
  auto cf = checkpoint(f);
  ArrayFn flat = [&](const std::vector<Array>& in) { return std::vector<Array>{f(in[0])}; };
  ArrayFn cflat = [&](const std::vector<Array>& in) { return std::vector<Array>{cf(in[0])}; };
  EXPECT_TRUE(bit_equal(jvp(cflat, {x}, {t}).second[0], jvp(flat, {x}, {t}).second[0]));
  // Second derivatives: the recomputation is itself differentiated.
  auto d2 = [](auto g) { return grad([g](const Array& x) { return sum(grad([g](const Array& x) { return sum(g(x)); })(x)); }); };
  EXPECT_TRUE(bit_equal(d2(cf)(x), d2(f)(x)));
  // Per-example gradients through a checkpointed call, and the checkpoint inside vmap.
  Array xs = random_array({3, 4}, float64, -1, 1, 8);
  auto per_example = [](auto g) { return vmap(grad([g](const Array& x) { return sum(g(x)); })); };
  EXPECT_TRUE(bit_equal(per_example(cf)(xs), per_example(f)(xs)));
  Array g_vmap = grad([&](const Array& xs) { return sum(vmap(cf)(xs)); })(xs);
  EXPECT_TRUE(bit_equal(g_vmap, grad([&](const Array& xs) { return sum(vmap(f)(xs)); })(xs)));
  // Compiled gradients equal uncompiled ones.
  auto g = grad([&](const Array& x) { return sum(cf(x)); });
  EXPECT_TRUE(bit_equal(compile(g)(x), g(x)));
}

TEST(Checkpoint, AnEvaluatedOutputStillGetsItsGradient) {
  // Evaluating a value releases the graph above it; a checkpointed call's output keeps its call's
  // inputs, so the gradient still flows (through the recomputation).
  Array x = random_array({4}, float64, -1, 1, 9);
  auto f = [](const Array& x) { return sin(x) * x; };
  auto cf = checkpoint(f);
  Array g = grad([&](const Array& x) {
    Array y = cf(x);
    y.eval();
    return sum(y * y);
  })(x);
  EXPECT_TRUE(bit_equal(g, grad([&](const Array& x) { return sum(f(x) * f(x)); })(x)));
}

TEST(Checkpoint, TheCompiledBackwardRecomputesToo) {
  // Common-subexpression elimination would merge a recomputation made of the same primitives on
  // the same inputs back into the forward values; the checkpointed call recomputes from copies of
  // its traced inputs, so the compiled tape keeps a second exp (fusion off, to count the steps).
  Array x = random_array({5}, float32, -1, 1, 10);
  auto f = [](const Array& x) { return exp(x) * exp(x); };
  auto count_exp = [&](auto fn) {
    std::string last;
    CompileOptions o;
    o.disabled_passes = {"fuse"};
    o.dump = [&](const std::string&, const std::string& tape) { last = tape; };
    // value_and_grad: the forward value is an output too, so its exp stays live.
    auto g = compile(value_and_grad(fn), o);
    Array r = g(x).second;
    size_t n = 0;
    for (size_t at = last.find("Unary(Exp)"); at != std::string::npos; at = last.find("Unary(Exp)", at + 1)) ++n;
    return std::pair<size_t, Array>{n, r};
  };
  auto [plain_exps, g0] = count_exp([&](const Array& x) { return sum(f(x)); });
  auto cf = checkpoint(f);
  auto [ckpt_exps, g1] = count_exp([&](const Array& x) { return sum(cf(x)); });
  EXPECT_GT(ckpt_exps, plain_exps);
  EXPECT_TRUE(bit_equal(g1, g0));
  EXPECT_TRUE(bit_equal(g1, grad([&](const Array& x) { return sum(cf(x)); })(x)));
}

TEST(Checkpoint, Errors) {
  EXPECT_THROW_MSG(checkpoint([](const Array& x) { return x; })(Array()), InvalidArgument,
                   "checkpoint: input 0 is an empty array handle");
  EXPECT_THROW_MSG(checkpoint([](const Array&) { return Array(); })(zeros({2})), InvalidArgument,
                   "checkpoint: output 0 is an empty array handle");
}

}  // namespace
}  // namespace smelt
