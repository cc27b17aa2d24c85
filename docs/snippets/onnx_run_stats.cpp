// docs/onnx.md, "What a run reads back": counting a run's copies between the GPU and the host.
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
  onnx::RunStats stats;
  onnx::RunOptions o;
  o.device = Device::cuda(0);
  o.stats = &stats;
  onnx::run(model, inputs, o);
  // stats.device_to_host_copies / _bytes, host_to_device_copies / _bytes, and
  // stats.host_computed: {"NonMaxSuppression 'nms': no GPU kernel; boxes and scores read to the host (N bytes)"}
  // snippet-end
  std::cout << stats.host_to_device_copies << " copies to the GPU\n";
}
