// Shape rules: infer_output_shapes agrees with the shapes the ops give, and names bad inputs.
#include "smelt/random.h"
#include "src/core/node.h"
#include "src/primitives/shape_rules.h"
#include "test_utils.h"

namespace smelt {
namespace {

std::vector<Shape> input_shapes(const Array& a) {
  std::vector<Shape> s;
  for (auto& in : a.node().inputs) s.push_back(in.shape());
  return s;
}

/// The rule applied to the node's own inputs reproduces the node's shape.
void expect_rule_matches(const Array& a, const std::string& what) {
  const auto& n = a.node();
  ASSERT_NE(n.prim.kind, PrimKind::None) << what << ": the op made no node";
  std::vector<Shape> want;
  if (n.group) want = n.group->shapes;
  else want = {n.shape};
  EXPECT_EQ(infer_output_shapes(n.prim, input_shapes(a), want), want) << what << ": " << n.prim.str();
}

TEST(ShapeRules, AgreeWithTheOps) {
  Array x = test::random_array({2, 3, 4}, float32);
  Array y = test::random_array({3, 4}, float32);
  Array idx = Array(std::vector<int64_t>{0, 2, 1, 1}, {2, 2});
  expect_rule_matches(exp(x), "exp");
  expect_rule_matches(add(x, x), "add");
  expect_rule_matches(where(x > y, x, x), "where");
  expect_rule_matches(astype(x, int32), "astype");
  expect_rule_matches(copy(x), "copy");
  expect_rule_matches(transpose(x, {2, 0, 1}), "transpose");
  expect_rule_matches(reshape(x, {6, 4}), "reshape");
  expect_rule_matches(broadcast_to(y, {5, 3, 4}), "broadcast_to");
  expect_rule_matches(slice(x, {0, 1, 3}, {2, 3, 0}, {1, 1, -2}), "slice");
  expect_rule_matches(slice_update(x, zeros({1, 2, 4}), {1, 0, 0}, {2, 2, 4}), "slice_update");
  expect_rule_matches(concatenate({x, x, x}, 1), "concatenate");
  expect_rule_matches(pad(x, {{1, 0}, {2, 3}, {0, 1}}), "pad");
  expect_rule_matches(sum(x, {0, 2}, true), "sum");
  expect_rule_matches(mean(x, {1}, true), "mean");
  expect_rule_matches(argmax(x, 1, true), "argmax");
  expect_rule_matches(cumsum(x, 2), "cumsum");
  expect_rule_matches(matmul(x, transpose(y)), "matmul");
  expect_rule_matches(take(x, idx, 1), "take");
  expect_rule_matches(take_along_axis(y, Array(std::vector<int64_t>{0, 1, 2, 0, 1, 2}, {3, 2}), 1), "take_along_axis");
  expect_rule_matches(gather_nd(x, idx), "gather_nd");
  expect_rule_matches(scatter(y, Array(std::vector<int64_t>{0, 1, 2}, {3, 1}), Array(1.0f), 1), "scatter");
  expect_rule_matches(sort(x, 2), "sort");
  expect_rule_matches(argsort(x, 0), "argsort");
  expect_rule_matches(topk(x, 3, 2).first, "topk");
  expect_rule_matches(random::bits(random::key(1), {3, 5}), "random bits");
  Array img = test::random_array({2, 3, 9, 7}, float32);
  expect_rule_matches(conv(img, test::random_array({6, 1, 3, 2}, float32), {{2, 1}, {1, 0}, {1, 2}, {1, 2}, 3}), "conv");
  expect_rule_matches(conv_transpose(img, test::random_array({3, 2, 3, 3}, float32), {{2, 2}, {1, 1}, {0, 1}, {1, 1}, {1, 0}, 1}),
                      "conv_transpose");
  PoolOptions p;
  p.kernel = {2, 3};
  p.strides = {2, 2};
  p.ceil_mode = true;
  expect_rule_matches(max_pool(img, p), "max_pool ceil");
  p.ceil_mode = false;
  p.padding_lo = {1, 1};
  expect_rule_matches(avg_pool(img, p), "avg_pool");
}

TEST(ShapeRules, FollowNewInputShapes) {
  Primitive mm = make_prim(PrimKind::Matmul, MatmulParams{});
  EXPECT_EQ(infer_output_shapes(mm, {{5, 1, 2, 3}, {4, 3, 7}}, {}), (std::vector<Shape>{{5, 4, 2, 7}}));
  Primitive red = make_prim(PrimKind::Reduce, ReduceParams{ReduceOp::Mean, {0, 2}});
  EXPECT_EQ(infer_output_shapes(red, {{6, 5, 4}}, {}), (std::vector<Shape>{{1, 5, 1}}));
  Primitive pool = make_prim(PrimKind::Pool, PoolParams{PoolKind::Max, {2}, {2}, {0}, {0}, {1}, false, true});
  EXPECT_EQ(infer_output_shapes(pool, {{1, 2, 5}}, {}), (std::vector<Shape>{{1, 2, 3}}));
  Primitive bin = make_prim(PrimKind::Binary, BinaryParams{BinaryOp::Add});
  EXPECT_EQ(infer_output_shapes(bin, {{3, 1}, {4}}, {}), (std::vector<Shape>{{3, 4}}));
  // Primitives that fix their shape return it.
  Primitive full = make_prim(PrimKind::Full, FullParams{Scalar::of_float(1.0)});
  EXPECT_EQ(infer_output_shapes(full, {}, {{2, 2}}), (std::vector<Shape>{{2, 2}}));
}

TEST(ShapeRules, OutputSizeHelpers) {
  EXPECT_EQ(conv_output_size(9, 3, 2, 1, 1, 1), 5);
  EXPECT_EQ(conv_output_size(9, 3, 1, 0, 0, 5), 0);  // dilated kernel longer than the input
  EXPECT_EQ(pool_output_size(5, 2, 2, 0, 0, 1, false), 2);
  EXPECT_EQ(pool_output_size(5, 2, 2, 0, 0, 1, true), 3);
  EXPECT_EQ(pool_output_size(4, 2, 2, 1, 0, 1, true), 3);  // the last window starts in the input
  EXPECT_EQ(pool_output_size(3, 2, 2, 1, 1, 1, true), 2);  // a window starting in the right padding is dropped
  EXPECT_EQ(conv_transpose_output_size(4, 3, 2, 1, 1, 1, 1), 8);
}

TEST(ShapeRules, WhichPrimitivesFixTheirShape) {
  for (PrimKind k : {PrimKind::Full, PrimKind::Arange, PrimKind::Reshape, PrimKind::Broadcast, PrimKind::Slice,
                     PrimKind::RandomBits})
    EXPECT_TRUE(prim_fixes_shape(k)) << prim_name(k);
  for (PrimKind k : {PrimKind::Unary, PrimKind::Binary, PrimKind::Reduce, PrimKind::Matmul, PrimKind::Conv,
                     PrimKind::Pool, PrimKind::TopK, PrimKind::Fused, PrimKind::Concatenate, PrimKind::Pad})
    EXPECT_FALSE(prim_fixes_shape(k)) << prim_name(k);
}

TEST(ShapeRules, InputsThatDoNotFitRaiseNamingThePrimitive) {
  auto infer = [](Primitive p, std::vector<Shape> in, std::vector<Shape> fixed = {}) {
    return infer_output_shapes(p, in, fixed);
  };
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::Matmul, MatmulParams{}), {{2, 3}, {4, 5}}), ShapeError,
                   "Matmul(): input shapes [2,3], [4,5] do not fit: the inner dimensions differ (3 != 4)");
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::Matmul, MatmulParams{}), {{3}, {3, 5}}), ShapeError,
                   "Matmul(): input shapes [3], [3,5] do not fit: both operands need rank 2 or more");
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::Matmul, MatmulParams{}), {{2, 1, 3}, {4, 3, 5}}), ShapeError,
                   "Matmul(): shapes [2] and [4] cannot be broadcast together");
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::Binary, BinaryParams{BinaryOp::Add}), {{3, 4}, {5}}), ShapeError,
                   "Binary(Add): shapes [3,4] and [5] cannot be broadcast together");
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::Concatenate, AxisParams{0}), {{2, 3}, {2, 4}}), ShapeError,
                   "Concatenate(axis=0): input shapes [2,3], [2,4] do not fit: axis 1 differs (only axis 0 may)");
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::TopK, TopKParams{5, 1, true}), {{2, 3}}), ShapeError,
                   "do not fit: k = 5 exceeds the size 3 of axis 1");
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::Reshape, ShapeParams{{4, 2}}), {{3, 3}}), ShapeError,
                   "Reshape([4,2]): input shapes [3,3] do not fit: the element counts differ (9 vs 8)");
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::Broadcast, ShapeParams{{4, 2}}), {{3}}), ShapeError,
                   "Broadcast([4,2]): shapes [3] and [4,2] cannot be broadcast together");
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::Reduce, ReduceParams{ReduceOp::Sum, {2}}), {{3, 3}}), ShapeError,
                   "do not fit: axis 2 is out of range for rank 2");
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::ArgReduce, ArgReduceParams{ArgReduceOp::ArgMax, 0, false}), {{0, 3}}),
                   ShapeError, "do not fit: the reduced axis is empty");
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::Slice, SliceParams{{2}, {1}}), {{3}}, {{2}}), ShapeError,
                   "do not fit: axis 0 is too short for the slice");
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::GatherND, GatherNDParams{0}), {{2, 3}, {4, 3}}), ShapeError,
                   "do not fit: the index depth 3 does not fit");
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::GatherElements, AxisParams{0}), {{2, 3}, {2, 4}}), ShapeError,
                   "do not fit: axis 1 of the indices differs from the array's");
  ConvParams cp{{1}, {0}, {0}, {1}, 1};
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::Conv, cp), {{1, 2, 2}, {3, 2, 5}}), ShapeError,
                   "do not fit: output size 0 < 1 on spatial axis 0");
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::Conv, cp), {{1, 4, 9}, {3, 2, 5}}), ShapeError,
                   "do not fit: the weight expects 2 input channels, the input has 4");
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::Conv, cp), {{1, 2, 3, 9}, {3, 2, 5}}), ShapeError,
                   "do not fit: the input needs rank 3 ([N, C] and 1 spatial axes)");
  PadParams pp{{3}, {0}, PadMode::Reflect, Scalar::of_int(0)};
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::Pad, pp), {{3}}), ShapeError,
                   "do not fit: reflect padding needs axis 0 longer than the padding");
  EXPECT_THROW_MSG(infer(make_prim(PrimKind::Transpose, PermParams{{1, 0}}), {{2, 3, 4}}), ShapeError,
                   "do not fit: the permutation has another rank");
}

}  // namespace
}  // namespace smelt
