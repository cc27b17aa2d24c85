// The load-time attention rewrite (MatMul -> scale -> mask -> Softmax -> MatMul, GQA repeats) and
// ONNX Attention through scaled_dot_product_attention: fused equals unfused; near-misses stay.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "model_builder.h"
#include "smelt/onnx.h"
#include "smelt/smelt.h"
#include "src/onnx/fusions.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

using onnx::ElemType;
using onnx::Model;
using onnx::Value;

// Fused and unfused both accumulate in float32 on inputs in [-1, 1] with head_dim 8 and 6 keys;
// each is within 4(D² + 2T + 8)·2⁻²⁴ ≈ 2e-5 of the exact value (the bound of
// tests/ops/attention_test.cpp), so they differ by at most twice that.
constexpr double kAtol = 4e-5;

enum class Scale { None, Mul, MulLeft, Div, Vector };
// WhereMaskedLowest: float32's lowest value as the fill (Hugging Face's torch.finfo(dtype).min);
// WhereMaskedFinite: a fill that does not mask exactly (-1e4), which stays unfused.
enum class MaskForm { None, Add, WhereKeep, WhereMasked, WhereMaskedLowest, WhereMaskedFinite };

struct Spec {
  Scale scale = Scale::Mul;
  MaskForm mask = MaskForm::Add;
  int64_t softmax_axis = -1;
  bool gqa = false;              // k, v [B, 1, T, D] repeated to 2 heads by Unsqueeze/Expand/Reshape
  bool tile = false;             // k, v [B, 1, T, D] repeated to 2 heads by Tile
  bool k_from_bshd = false;      // k given as [B, T, H, D] and transposed by [0, 2, 3, 1]
  bool scores_are_output = false;
};

constexpr int64_t B = 2, H = 2, S = 5, T = 6, D = 8;

Model attention_model(const Spec& s) {
  GraphBuilder b;
  std::string q = b.input("q", ElemType::Float, 4);
  std::string k = b.input("k", ElemType::Float, 4), v = b.input("v", ElemType::Float, 4);
  std::string kt;
  if (s.gqa) {
    auto rep = [&](const std::string& x) {
      std::string u = b.node("Unsqueeze", {x, b.int64s("axes_" + x, {2})});
      std::string e = b.node("Expand", {u, b.int64s("expand_" + x, {B, 1, H, T, D})});
      return b.node("Reshape", {e, b.int64s("reshape_" + x, {B, H, T, D})});
    };
    k = rep(k);
    v = rep(v);
  }
  if (s.tile) {
    // Tile's head order (h reads key head h % kv_heads) is not the op's grouping (h / group):
    // the Tile stays, the rest is fused.
    k = b.node("Tile", {k, b.int64s("tile_k", {1, H, 1, 1})});
    v = b.node("Tile", {v, b.int64s("tile_v", {1, H, 1, 1})});
  }
  if (s.k_from_bshd) kt = b.node("Transpose", {k}, {attr_ints("perm", {0, 2, 3, 1})});
  else kt = b.node("Transpose", {k}, {attr_ints("perm", {0, 1, 3, 2})});
  std::string x = b.node("MatMul", {q, kt});
  switch (s.scale) {
    case Scale::None: break;
    case Scale::Mul: x = b.node("Mul", {x, b.float_scalar("scale", 0.35f)}); break;
    case Scale::MulLeft: x = b.node("Mul", {b.float_scalar("scale", 0.35f), x}); break;
    case Scale::Div: x = b.node("Div", {x, b.float_scalar("root_d", std::sqrt(8.0f))}); break;
    case Scale::Vector:
      x = b.node("Mul", {x, b.constant("scale", Array(std::vector<float>(T, 0.35f), Shape{T}))});
      break;
  }
  if (s.scores_are_output) b.output(x);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  switch (s.mask) {
    case MaskForm::None: break;
    case MaskForm::Add: x = b.node("Add", {x, b.input("mask", ElemType::Float, 2)}); break;
    case MaskForm::WhereKeep: x = b.node("Where", {b.input("keep", ElemType::Bool, 4), x, b.float_scalar("ninf", neg_inf)}); break;
    case MaskForm::WhereMasked: x = b.node("Where", {b.input("keep", ElemType::Bool, 4), b.float_scalar("ninf", neg_inf), x}); break;
    case MaskForm::WhereMaskedLowest:
      x = b.node("Where", {b.input("keep", ElemType::Bool, 4), b.float_scalar("lowest", std::numeric_limits<float>::lowest()), x});
      break;
    case MaskForm::WhereMaskedFinite:
      x = b.node("Where", {b.input("keep", ElemType::Bool, 4), b.float_scalar("fill", -1e4f), x});
      break;
  }
  std::string p = b.node("Softmax", {x}, {attr_int("axis", s.softmax_axis)});
  b.output(b.node("MatMul", {p, v}));
  return make_model(b.graph(), 18);
}

std::vector<Value> inputs_for(const Spec& s) {
  const int64_t kv_heads = s.gqa || s.tile ? 1 : H;
  std::vector<Value> in{Value::tensor(random_array({B, H, S, D}, float32, -1, 1, 1)),
                        Value::tensor(s.k_from_bshd ? random_array({B, T, kv_heads, D}, float32, -1, 1, 2)
                                                    : random_array({B, kv_heads, T, D}, float32, -1, 1, 2)),
                        Value::tensor(random_array({B, kv_heads, T, D}, float32, -1, 1, 3))};
  if (s.mask == MaskForm::Add) in.push_back(Value::tensor(random_array({S, T}, float32, -2, 0, 4)));
  if (s.mask != MaskForm::None && s.mask != MaskForm::Add) {
    // Every query keeps key 0 (WhereKeep) or has key 0 unmasked (WhereMasked): no fully masked row.
    Array r = random_array({B, 1, S, T}, float32, -1, 1, 5);
    Array col = reshape(arange(0, static_cast<double>(T), 1, int64), {1, 1, 1, T});
    Array keep = logical_or(greater(r, Array(0.0f)), equal(col, Array(int64_t{0})));
    in.push_back(Value::tensor(s.mask == MaskForm::WhereKeep ? keep : logical_not(keep)));
  }
  return in;
}

Model with_fusions(const Model& m, onnx::FusionCounts& counts) {
  Model f = m;
  counts = onnx::apply_fusions(f);
  return f;
}

void expect_fused_same(const Spec& s) {
  Model plain = attention_model(s);
  onnx::FusionCounts counts;
  Model fused = with_fusions(plain, counts);
  EXPECT_EQ(counts.attention, 1);
  ASSERT_EQ(fused.graph->nodes.size(), s.tile ? 3u : 1u);
  const auto& n = fused.graph->nodes.back();
  EXPECT_EQ(n.domain, onnx::kSmeltDomain);
  EXPECT_EQ(n.op_type, "ScaledDotProductAttention");
  // Named after the nodes it replaced, in graph order.
  EXPECT_EQ(n.name.rfind("attention(", 0), 0u) << n.name;
  EXPECT_NE(n.name.find(",MatMul_0,"), std::string::npos) << n.name;
  EXPECT_NE(n.name.find(",Softmax_0,MatMul_1)"), std::string::npos) << n.name;
  auto in = inputs_for(s);
  auto want = onnx::run(plain, in), got = onnx::run(fused, in);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].array().shape(), want[0].array().shape());
  EXPECT_TRUE(all_close(got[0].array(), as_doubles(want[0].array()), 0.0, kAtol));
}

TEST(AttentionFusion, ScaleAndMaskFormsMatchUnfused) {
  expect_fused_same({});
  expect_fused_same({.scale = Scale::MulLeft, .mask = MaskForm::None});
  expect_fused_same({.scale = Scale::Div, .mask = MaskForm::WhereKeep});
  expect_fused_same({.scale = Scale::None, .mask = MaskForm::WhereMasked, .softmax_axis = 3});
  expect_fused_same({.scale = Scale::Mul, .mask = MaskForm::WhereMaskedLowest});
}

TEST(AttentionFusion, GroupedQueryRepeatsAndBshdKeys) {
  expect_fused_same({.gqa = true});
  expect_fused_same({.mask = MaskForm::None, .k_from_bshd = true});
  expect_fused_same({.scale = Scale::Div, .tile = true});
  // The GQA repeats are gone from the graph: k and v enter the op with their single head.
  Model plain = attention_model({.gqa = true});
  onnx::FusionCounts counts;
  Model fused = with_fusions(plain, counts);
  ASSERT_EQ(fused.graph->nodes.size(), 1u);
  EXPECT_EQ(fused.graph->nodes[0].inputs[1], "k");
  EXPECT_EQ(fused.graph->nodes[0].inputs[2], "v");
  EXPECT_EQ(fused.graph->nodes[0].inputs.size(), 8u);
}

TEST(AttentionFusion, NearMissesStayUnfused) {
  for (const Spec& s : {Spec{.softmax_axis = 2}, Spec{.scale = Scale::Vector}, Spec{.scores_are_output = true},
                        Spec{.mask = MaskForm::WhereMaskedFinite}}) {
    Model plain = attention_model(s);
    onnx::FusionCounts counts;
    Model fused = with_fusions(plain, counts);
    EXPECT_EQ(counts.attention, 0);
    EXPECT_EQ(fused.graph->nodes.size(), plain.graph->nodes.size());
  }
  // Softmax without an axis before opset 13 normalizes over the flattened trailing axes.
  GraphBuilder b;
  std::string q = b.input("q", ElemType::Float, 4), k = b.input("k", ElemType::Float, 4);
  std::string x = b.node("MatMul", {q, b.node("Transpose", {k}, {attr_ints("perm", {0, 1, 3, 2})})});
  b.output(b.node("MatMul", {b.node("Softmax", {x}), b.input("v", ElemType::Float, 4)}));
  Model old = make_model(b.graph(), 12);
  onnx::FusionCounts counts;
  with_fusions(old, counts);
  EXPECT_EQ(counts.attention, 0);
}

TEST(AttentionFusion, InputsTheOpDoesNotTakeRunAsWritten) {
  // q [H, S, D] broadcast against 4-d keys: rewritten at load (ranks are unknown there), then run
  // as the subgraph's math.
  GraphBuilder b;
  std::string q = b.input("q", ElemType::Float, 3), k = b.input("k", ElemType::Float, 4);
  std::string x = b.node("MatMul", {q, b.node("Transpose", {k}, {attr_ints("perm", {0, 1, 3, 2})})});
  x = b.node("Mul", {x, b.float_scalar("scale", 0.5f)});
  b.output(b.node("MatMul", {b.node("Softmax", {x}, {attr_int("axis", -1)}), b.input("v", ElemType::Float, 4)}));
  Model plain = make_model(b.graph(), 18);
  onnx::FusionCounts counts;
  Model fused = with_fusions(plain, counts);
  EXPECT_EQ(counts.attention, 1);
  std::vector<Value> in{Value::tensor(random_array({H, S, D}, float32, -1, 1, 1)),
                        Value::tensor(random_array({B, H, T, D}, float32, -1, 1, 2)),
                        Value::tensor(random_array({B, H, T, D}, float32, -1, 1, 3))};
  auto want = onnx::run(plain, in), got = onnx::run(fused, in);
  EXPECT_TRUE(all_close(got[0].array(), as_doubles(want[0].array()), 0.0, kAtol));

  // q of rank 5: the scores [3, B, H, S, T] have rank 5, and Softmax axis 3 normalizes over S,
  // not over the keys; the fused node keeps that axis.
  GraphBuilder b5;
  std::string q5 = b5.input("q", ElemType::Float, 5), k5 = b5.input("k", ElemType::Float, 4);
  std::string x5 = b5.node("MatMul", {q5, b5.node("Transpose", {k5}, {attr_ints("perm", {0, 1, 3, 2})})});
  b5.output(b5.node("MatMul", {b5.node("Softmax", {x5}, {attr_int("axis", 3)}), b5.input("v", ElemType::Float, 4)}));
  Model plain5 = make_model(b5.graph(), 18);
  Model fused5 = with_fusions(plain5, counts);
  EXPECT_EQ(counts.attention, 1);
  std::vector<Value> in5{Value::tensor(random_array({3, B, H, S, D}, float32, -1, 1, 4)),
                         Value::tensor(random_array({B, H, T, D}, float32, -1, 1, 5)),
                         Value::tensor(random_array({B, H, T, D}, float32, -1, 1, 6))};
  auto want5 = onnx::run(plain5, in5), got5 = onnx::run(fused5, in5);
  EXPECT_TRUE(all_close(got5[0].array(), as_doubles(want5[0].array()), 0.0, kAtol));
}

TEST(AttentionFusion, LoadReportsTheRewriteAndFuseFalseKeepsTheGraph) {
  // The tiny transformer (scripts/make_models.py) has one attention per layer with k transposed
  // straight from [B, S, H, D].
  const std::string path =
      (std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "models" / "tiny_transformer.onnx").string();
  Model fused = onnx::load(path);
  Model plain = onnx::load(path, {.fuse = false});
  int rewritten = 0;
  for (const auto& n : fused.graph->nodes) rewritten += n.op_type == "ScaledDotProductAttention";
  EXPECT_EQ(rewritten, 2);
  for (const auto& n : plain.graph->nodes) EXPECT_NE(n.op_type, "ScaledDotProductAttention");
  std::vector<Value> in{Value::tensor(Array(std::vector<int64_t>{1, 5, 9, 200, 7, 3, 999, 0}, Shape{2, 4}))};
  auto want = onnx::run(plain, in), got = onnx::run(fused, in);
  // Logits of a 2-layer model with d_model 128 in float32: the attention outputs differ by the
  // bound above scaled to head_dim 32 (4(32² + 8 + 8)·2⁻²⁴ ≈ 2.5e-4 relative to |v| <= ~3), carried
  // through two layers; 1e-3 relative plus 1e-3 absolute covers that with margin.
  EXPECT_TRUE(all_close(got[0].array(), as_doubles(want[0].array()), 1e-3, 1e-3));
}

}  // namespace
}  // namespace smelt::test
