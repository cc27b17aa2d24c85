// The README's example: a lazy computation, printed, then the same function compiled.
#include <smelt/compile.h>
#include <smelt/smelt.h>

#include <iostream>

int main() {
  using namespace smelt;
  Array keys = random::split(random::key(0), 2);
  Array x = random::normal(take(keys, Array(0), 0), {4, 8});  // float32 [4, 8]
  Array w = random::normal(take(keys, Array(1), 0), {8, 3});
  Array y = softmax(matmul(x, w), {-1});                       // nothing has run yet
  std::cout << y << "\n";                                      // evaluates and prints

  auto layer = compile([](const Array& x, const Array& w) { return gelu(matmul(x, w), true); });
  std::cout << layer(x, w) << "\n";  // traced and fused once, replayed on later calls
  return 0;
}
