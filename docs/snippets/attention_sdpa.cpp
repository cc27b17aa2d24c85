// docs/attention.md: scaled_dot_product_attention with a causal mask and with a padding mask.
// snippet-begin
#include <smelt/smelt.h>
using namespace smelt;
// snippet-end

#include <iostream>

int main() {
  Array kq = random::key(0), kk = random::key(1);
  Array q = random::normal(kq, {2, 4, 8, 16});
  Array k = random::normal(kk, {2, 4, 8, 16});
  Array v = k;
  Array padding_mask = Array({true, true, true, true, true, true, false, false}, {1, 1, 1, 8});
  // snippet-begin
  Array y = scaled_dot_product_attention(q, k, v, {.causal = CausalMask::LowerRight});
  Array z = scaled_dot_product_attention(q, k, v, {.mask = padding_mask, .scale = 0.125});
  // snippet-end
  std::cout << y.shape().size() << " " << z.shape().size() << "\n";
}
