// The README's example: a lazy computation, printed, then the same function compiled.
#include <smelt/compile.h>
#include <smelt/smelt.h>
#include <iostream>

int main() {
  using namespace smelt;
  auto [k1, k2] = random::split(random::key(0));               // two independent keys
  Array x = random::normal(k1, {4, 8});                        // float32 [4, 8]
  Array w = random::normal(k2, {8, 3});
  Array y = softmax(matmul(x, w), {-1});                       // nothing has run yet
  std::cout << to_string(y, {.precision = 4}) << "\n";         // evaluates and prints

  auto layer = compile([](const Array& x, const Array& w) { return gelu(matmul(x, w), true); });
  Array z = layer(x, w);                    // traced and fused once, replayed on later calls
  std::cout << std::boolalpha << array_equal(z, gelu(matmul(x, w), true)) << "\n";  // true: eager's values
}
