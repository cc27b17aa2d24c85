// docs/onnx.md, "Bounded runs": a run with a timeout, a cancel token and a memory budget.
// snippet-requires: onnx
#include <smelt/onnx.h>
#include <smelt/smelt.h>
using namespace smelt;

int main() {
  onnx::Model model = onnx::load("models/tiny_transformer.onnx");
  std::vector<onnx::Value> inputs = {onnx::Value::tensor(random::randint(random::key(0), 0, 1000, {1, 8}, int64))};
  // snippet-begin
  onnx::RunOptions o;
  o.timeout = std::chrono::seconds(5);           // or o.deadline = a steady_clock time point
  o.cancel = std::make_shared<onnx::CancelToken>();  // o.cancel->cancel() from any thread
  o.memory_budget_bytes = int64_t{1} << 30;      // tensors the run may hold at once
  o.max_call_depth = 64;                         // nested subgraphs and function calls (the default)
  auto out = onnx::run(model, inputs, o);        // or compiled(inputs, o)
  // snippet-end
}
