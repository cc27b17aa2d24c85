// docs/compile.md, "compile_mut": a hand-written Adam step over a tree state, traced once.
#include <smelt/compile.h>
#include <smelt/smelt.h>

// snippet-begin
using namespace smelt;

struct Adam { Array p, m, v, step; };
SMELT_TREE(Adam, p, m, v, step)
// snippet-end

int main() {
  Array p0 = random::normal(random::key(0), {16});
  std::vector<Array> grads;
  for (int i = 0; i < 3; ++i) grads.push_back(random::normal(random::key(i + 1), {16}));
  // snippet-begin
  auto step = smelt::compile_mut([](Adam& s, const Array& g) {
    s.step = s.step + 1.0f;
    s.m = s.m * 0.9f + g * 0.1f;
    s.v = s.v * 0.999f + g * g * 0.001f;
    s.p = s.p - 1e-3f * (s.m / (1.0f - power(Array(0.9f), s.step))) /
                    (sqrt(s.v / (1.0f - power(Array(0.999f), s.step))) + 1e-8f);
    return sum(s.p);
  });
  Adam state{p0, zeros_like(p0), zeros_like(p0), Array(0.0f)};
  for (auto& g : grads) step(state, g);   // traced once; state holds the new arrays after each call
  // snippet-end
}
