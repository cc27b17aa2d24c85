// docs/onnx-compile.md: a model compiled around its breaks, with a static input given by value.
// snippet-requires: onnx
// snippet-begin
#include <smelt/onnx.h>
using namespace smelt;
// snippet-end
#include <smelt/smelt.h>

#include <iostream>

int main() {
  auto [k1, k2] = random::split(random::key(0));
  Array scores = random::normal(k1, {32}), threshold = Array(0.5f);
  Array more_scores = random::normal(k2, {32});
  // snippet-begin
  onnx::Model model = onnx::load("tests/onnx/fixtures/breaks_fixture.onnx");
  onnx::CompileModelOptions o;
  // A static input's value has the input's type: use_double is bool[] (0-d), so Array(true);
  // an input declared bool[1] takes Array({true}).
  o.static_inputs["use_double"] = onnx::Value::tensor(Array(true));
  // The other inputs in graph order: scores float32[length], threshold float32[].
  onnx::CompiledModel cm = onnx::compile(model, {onnx::Value::tensor(scores), onnx::Value::tensor(threshold)},
                                         o);  // traces now: the first call is warm
  std::vector<onnx::Value> out = cm({onnx::Value::tensor(more_scores), onnx::Value::tensor(threshold)});  // replayed
  // snippet-end
  // The same values as onnx::run (the compile contract: bit for bit).
  std::vector<onnx::Value> eager = onnx::run(
      model, {onnx::Value::tensor(more_scores), onnx::Value::tensor(threshold), onnx::Value::tensor(Array(true))});
  for (size_t i = 0; i < out.size(); ++i)
    if (!array_equal(out[i].array(), eager[i].array(), /*equal_nan=*/true)) {
      std::cout << "output " << i << " differs from onnx::run\n";
      return 1;
    }
  std::cout << "compiled outputs equal onnx::run's\n";
}
