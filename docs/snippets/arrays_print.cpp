// docs/arrays.md, "Printing": arrays print like NumPy's repr, dtypes by name.
// snippet-begin
#include <smelt/smelt.h>
#include <iostream>

int main() {
  using namespace smelt;
  Array a = reshape(arange(6, float32), {2, 3}) / 4.0f;
  std::cout << a << "\n";                                   // one row per line, aligned
  std::cout << a.dtype() << " " << a.shape(0) << "\n";      // Dtype prints its name
  std::cout << to_string(a / 3.0f, {.precision = 3}) << "\n";
  std::cout << arange(2000) << "\n";                        // summarized past 1000 elements
  std::cout << Array({bfloat16_t(0.1f), bfloat16_t(-2.5f)}) << "\n";
  std::cout << (arange(4) > 1) << "\n";
}
// snippet-end
