// docs/arrays.md, "Comparing arrays" and "Random numbers": isclose, allclose, array_equal, split.
// snippet-begin
#include <smelt/smelt.h>
#include <cmath>
#include <iostream>

int main() {
  using namespace smelt;
  auto [k1, k2] = random::split(random::key(0));  // two independent keys
  Array x = random::normal(k1, {3, 4});
  Array y = x + 1e-7f * random::normal(k2, {3, 4});

  std::cout << std::boolalpha;
  std::cout << allclose(x, y) << "\n";                   // |x - y| <= atol + rtol * |y| everywhere
  std::cout << array_equal(x, y) << "\n";                // same shape and values
  std::cout << isclose(Array({1.0f, NAN, INFINITY}), Array({1.001f, NAN, INFINITY}),
                       /*rtol=*/1e-2, /*atol=*/0.0, /*equal_nan=*/true) << "\n";
  std::cout << array_equal(Array({1, 2}), Array({1.0, 2.0})) << "\n";  // values, after promotion
  try {
    allclose(x, zeros({4, 3}));
  } catch (const ShapeError& e) {
    std::cout << e.what() << "\n";
  }
}
// snippet-end
