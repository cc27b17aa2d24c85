// NonMaxSuppression's selection order: by score (higher first), equal scores by box index, NaN
// scores last; max_output_boxes_per_class stops the greedy pass; eager and compiled agree.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "onnx/onnx_test_helpers.h"

namespace smelt {
namespace {

using namespace smelt::test;

/// The box indices NonMaxSuppression selects (one batch, one class), eagerly and compiled.
std::vector<int64_t> selected(const std::vector<float>& boxes, const std::vector<float>& scores, int64_t max_out,
                              float iou, const std::optional<float>& score_threshold) {
  const int64_t n = static_cast<int64_t>(scores.size());
  pb::GraphProto g;
  g.set_name("g");
  *g.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {1, n, 4}, boxes, "boxes");
  *g.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {1, 1, n}, scores, "scores");
  *g.add_initializer() = raw_tensor<int64_t>(pb::TensorProto::INT64, {1}, {max_out}, "max_out");
  *g.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {1}, {iou}, "iou");
  std::vector<std::string> in = {"boxes", "scores", "max_out", "iou"};
  if (score_threshold) {
    *g.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {1}, {*score_threshold}, "thr");
    in.push_back("thr");
  }
  *g.add_node() = make_node("NonMaxSuppression", in, {"y"}, "nms");
  *g.add_output() = tensor_info("y", pb::TensorProto::INT64, {});
  onnx::Model m = load_proto(make_model(g));
  const auto eager = onnx::run(m, {})[0].array().to_vector<int64_t>();
  const auto compiled = onnx::compile(m)({})[0].array().to_vector<int64_t>();
  EXPECT_EQ(eager, compiled);
  std::vector<int64_t> boxes_out;
  for (size_t i = 0; i + 2 < eager.size(); i += 3) {
    EXPECT_EQ(eager[i], 0);
    EXPECT_EQ(eager[i + 1], 0);
    boxes_out.push_back(eager[i + 2]);
  }
  return boxes_out;
}

TEST(OnnxNonMaxSuppression, OrderIsScoreThenIndexWithNaNLast) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Seven disjoint unit boxes (y1, x1, y2, x2), 10 apart.
  std::vector<float> boxes;
  for (int i = 0; i < 7; ++i) boxes.insert(boxes.end(), {0.0f, 10.0f * i, 1.0f, 10.0f * i + 1.0f});
  const std::vector<float> scores = {0.5f, 0.9f, 0.5f, nan, 0.9f, 0.1f, 0.7f};
  EXPECT_EQ(selected(boxes, scores, 10, 0.5f, std::nullopt), (std::vector<int64_t>{1, 4, 6, 0, 2, 5, 3}));
  EXPECT_EQ(selected(boxes, scores, 3, 0.5f, std::nullopt), (std::vector<int64_t>{1, 4, 6}));
  EXPECT_EQ(selected(boxes, scores, 0, 0.5f, std::nullopt), (std::vector<int64_t>{}));
  // A score threshold drops NaN and the scores at or below it.
  EXPECT_EQ(selected(boxes, scores, 10, 0.5f, 0.5f), (std::vector<int64_t>{1, 4, 6}));
  // Box 4 moved onto box 1 (IoU 0.9 > 0.5): suppressed by the box of equal score and lower index.
  std::vector<float> overlapping = boxes;
  overlapping[16] = 0.0f, overlapping[17] = 10.1f, overlapping[18] = 1.0f, overlapping[19] = 11.0f;
  EXPECT_EQ(selected(overlapping, scores, 10, 0.5f, std::nullopt), (std::vector<int64_t>{1, 6, 0, 2, 5, 3}));
}

}  // namespace
}  // namespace smelt
