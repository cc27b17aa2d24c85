// docs/onnx.md: loading the bundled tiny transformer and running it by name and by position.
// snippet-requires: onnx
// snippet-begin
#include <smelt/onnx.h>
#include <smelt/smelt.h>
#include <iostream>

int main() {
  using namespace smelt;
  onnx::Model model = onnx::load("models/tiny_transformer.onnx");  // OnnxError if unreadable
  Array ids = random::randint(random::key(0), 0, 1000, {1, 8}, int64);
  auto out = onnx::run_named(model, {{"input_ids", onnx::Value::tensor(ids)}});
  const Array& logits = out.at("logits").array();            // float32 [1, 8, 1000], evaluated
  std::cout << argmax(logits, -1) << "\n";
  std::vector<onnx::Value> outs = onnx::run(model, {onnx::Value::tensor(ids)});  // by position
  std::cout << outs[1].describe() << "\n";                  // tensor(float)[1,8,128]
}
// snippet-end
