// docs/compile.md: the first example, a hand-written tanh GELU compiled into one fused kernel.
// snippet-begin
#include <smelt/compile.h>
// snippet-end
#include <smelt/smelt.h>

int main() {
  smelt::Array x = smelt::random::normal(smelt::random::key(0), {4, 8});
  // snippet-begin
  auto gelu = smelt::compile([](const smelt::Array& x) {
    return 0.5f * x * (1.0f + smelt::tanh(0.79788456f * (x + 0.044715f * x * x * x)));
  });
  smelt::Array y = gelu(x);  // traced once per (dtype, shape) of x, then replayed
  // snippet-end
  y.eval();
}
