// docs/transforms.md, "vmap": per-example gradients as one batched graph.
#include <smelt/smelt.h>
#include <smelt/transforms.h>
using namespace smelt;

int main() {
  Array w = random::normal(random::key(0), {4});
  Array xs = random::normal(random::key(1), {5, 4});
  // snippet-begin
  auto loss = [](const Array& w, const Array& x) { return sum(tanh(w * x) * x); };
  // One gradient per example, as one batched graph: xs is [batch, 4], the result [batch, 4].
  Array per_example = vmap(grad(loss), {not_mapped, 0})(w, xs);
  // snippet-end
  per_example.eval();
}
