// docs/transforms.md: value_and_grad inside a compiled step fits w in w * x = y.
// snippet-begin
#include <smelt/compile.h>
#include <smelt/transforms.h>
using namespace smelt;
// snippet-end
#include <smelt/smelt.h>

int main() {
  // snippet-begin
  auto step = smelt::compile_mut([](Array& w, const std::pair<Array, Array>& xy) {
    auto loss = [&](const Array& w) { Array r = w * xy.first - xy.second; return sum(r * r); };
    auto [l, g] = smelt::value_and_grad(loss)(w);
    w = w - g * 0.1f;
    return l;
  });
  Array w = zeros({1});
  for (int i = 0; i < 50; ++i) step(w, {Array({1.0f}), Array({2.0f})});  // w -> 2, traced once
  // snippet-end
}
