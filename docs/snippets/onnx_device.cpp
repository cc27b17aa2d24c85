// docs/onnx.md, "On a GPU": running a model's tensor work on a chosen device.
// snippet-requires: onnx cuda
#include <smelt/onnx.h>
#include <smelt/smelt.h>

#include <iostream>
using namespace smelt;

int main() {
  if (!cuda_available()) {
    std::cout << "skipped: needs a CUDA GPU\n";
    return 77;
  }
  onnx::Model model = onnx::load("models/tiny_transformer.onnx");
  std::vector<onnx::Value> inputs = {onnx::Value::tensor(random::randint(random::key(0), 0, 1000, {1, 8}, int64))};
  // snippet-begin
  onnx::RunOptions o;
  o.device = Device::cuda(0);               // or parse_device("cuda:0", "my setting")
  auto out = onnx::run(model, inputs, o);   // outputs stay on cuda:0
  // snippet-end
}
