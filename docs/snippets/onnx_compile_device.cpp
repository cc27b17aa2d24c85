// docs/onnx.md, "On a GPU": a compiled model on a chosen device.
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
  onnx::CompileModelOptions co;
  co.device = Device::cuda(0);                 // unset: default_device() when compile is called
  onnx::CompiledModel cm = onnx::compile(model, {}, co);
  auto out = cm(inputs);                       // host inputs are moved to cuda:0; outputs stay there
  // snippet-end
  if (out.at(0).array().device() != Device::cuda(0)) return 1;
}
