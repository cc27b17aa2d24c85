// docs/transforms.md, "checkpoint": a layer whose activations are recomputed in the backward pass.
#include <smelt/smelt.h>
#include <smelt/transforms.h>
using namespace smelt;

struct Block { Array w; };
SMELT_TREE(Block, w)

int main() {
  Block p{random::normal(random::key(0), {4, 4})};
  Array x = random::normal(random::key(1), {2, 4});
  // snippet-begin
  auto layer = checkpoint([](const Block& p, const Array& x) { return tanh(matmul(x, p.w)) + x; });
  auto [l, g] = value_and_grad([&](const Block& p) { return sum(square(layer(p, layer(p, x)))); })(p);
  // snippet-end
}
