// W11 of bench/SUITE.md as an ONNX model built in C++: score threshold -> NonZero -> gather -> NMS ->
// TopK, shared by the CPU benchmark (bench_onnx_compile), the GPU one (bench_w11_gpu) and the GPU tests.
#pragma once

#include <cstdint>
#include <vector>

#include "smelt/onnx.h"
#include "smelt/random.h"
#include "smelt/smelt.h"
#include "tests/onnx/model_builder.h"

namespace smelt::bench {

using onnx::ElemType;
using onnx::Value;

/// The W11 model: 20 nodes around 2 breaks (NonZero, NonMaxSuppression).
inline const onnx::Model& w11_model() {
  static const onnx::Model m = [] {
    test::GraphBuilder b;
    auto boxes = b.input("boxes", ElemType::Float, 2);   // [N,4] as x1,y1,x2,y2
    auto scores = b.input("scores", ElemType::Float, 1);  // [N]
    // Scores are calibrated (a sigmoid of logits) before the threshold, as detectors do.
    auto prob = b.node("Sigmoid", {scores});
    auto mask = b.node("Greater", {prob, b.float_scalar("thr", 0.5f)});
    auto nz = b.node("NonZero", {mask});
    auto idx = b.node("Squeeze", {nz, b.int64s("ax0", {0})});
    auto kb = b.node("Gather", {boxes, idx}, {test::attr_int("axis", 0)});
    auto ks = b.node("Gather", {prob, idx}, {test::attr_int("axis", 0)});
    // Boxes clipped to the image and scaled to [0,1].
    auto clipped = b.node("Clip", {kb, b.float_scalar("lo", 0.0f), b.float_scalar("hi", 1024.0f)});
    auto unit = b.node("Mul", {clipped, b.float_scalar("inv", 1.0f / 1024.0f)});
    auto B = b.node("Unsqueeze", {unit, b.int64s("ax0b", {0})});
    auto S = b.node("Unsqueeze", {ks, b.int64s("ax01", {0, 1})});
    auto sel = b.node("NonMaxSuppression", {B, S, b.int64s("max_out", {300}), b.constant("iou", Array(0.5f)),
                                            b.constant("score_thr", Array(0.0f))});
    auto col = b.node("Gather", {sel, b.int64_scalar("two", 2)}, {test::attr_int("axis", 1)});
    auto s2 = b.node("Gather", {ks, col}, {test::attr_int("axis", 0)});
    auto k = b.node("Min", {b.node("Shape", {s2}), b.int64s("hundred", {100})});
    auto top = b.node_n("TopK", {s2, k}, 2);
    auto picked = b.node("Gather", {col, top[1]}, {test::attr_int("axis", 0)});
    auto out_boxes = b.node("Gather", {unit, picked}, {test::attr_int("axis", 0)});
    b.output(top[0]);
    b.output(out_boxes);
    return test::make_model(b.graph());
  }();
  return m;
}

/// N boxes (x1,y1 uniform in [0,1000), width and height in [4,64)) and N scores (standard
/// normal logits), drawn from keys of `seed`, evaluated on the default device.
inline std::vector<Value> w11_inputs(int64_t n, uint64_t seed) {
  Array xy = random::uniform(random::key(3 * seed), {n, 2}, 0.0, 1000.0);
  Array wh = random::uniform(random::key(3 * seed + 1), {n, 2}, 4.0, 64.0);
  Array boxes = concatenate({xy, add(xy, wh)}, 1);
  Array scores = random::normal(random::key(3 * seed + 2), {n});
  boxes.eval();
  scores.eval();
  return {Value::tensor(boxes), Value::tensor(scores)};
}

}  // namespace smelt::bench
