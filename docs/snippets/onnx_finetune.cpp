// docs/onnx.md, "Fine-tuning": gradients of a loss through onnx::run with replaced initializers.
// snippet-requires: onnx
#include <smelt/onnx.h>
#include <smelt/smelt.h>
#include <smelt/transforms.h>
using namespace smelt;

int main() {
  Array ids = random::randint(random::key(0), 0, 1000, {1, 8}, int64);
  Array targets = random::randint(random::key(1), 0, 1000, {1, 8, 1}, int64);
  // snippet-begin
  onnx::Model model = onnx::load("models/tiny_transformer.onnx");
  auto params = onnx::parameters(model);                      // {"embed": ..., "layer0.qkv": ...}
  auto loss = [&](const std::map<std::string, Array>& p) {
    auto out = onnx::run_named(model, {{"input_ids", onnx::Value::tensor(ids)}}, {.initializers = p});
    Array logp = log_softmax(out.at("logits").array(), {-1});
    return -mean(take_along_axis(logp, targets, -1));        // next-token cross-entropy
  };
  for (int step = 0; step < 10; ++step) {
    auto [l, g] = value_and_grad(loss)(params);
    for (auto& [name, p] : params) p = p - g.at(name) * 0.5f;  // plain SGD
  }
  // snippet-end
}
