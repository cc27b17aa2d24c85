// The SUITE.md workloads shared by the benchmark programs (../shared/bench/SUITE.md): one
// definition, so CPU, compile and GPU figures always time the same computation.
#pragma once

#include "smelt/smelt.h"

namespace smelt::bench {

/// W1: GELU, tanh form, with x³ as x*x*x (NumPy's peer counts the same ops).
inline Array gelu_tanh(const Array& x) {
  Array inner = multiply(add(x, multiply(multiply(multiply(x, x), x), 0.044715f)), 0.79788456f);
  return multiply(multiply(x, 0.5f), add(tanh(inner), 1.0f));
}

/// W3: the 16-op chain.
inline Array w3_chain(const Array& x, const Array& y) {
  Array t = add(multiply(x, 1.5f), y);
  t = exp(negative(multiply(t, t)));
  t = subtract(multiply(t, y), 0.25f);
  t = add(sin(t), cos(x));
  t = add(abs(t), 1.0f);
  t = multiply(log(t), 0.5f);
  t = sqrt(add(t, 1.0f));
  t = maximum(t, y);
  return divide(t, add(multiply(x, x), 1.0f));
}

/// W8: 32 element-wise ops, 8 times tanh(1.01x + 0.5) - 0.1.
inline Array w8_chain(const Array& x) {
  Array t = x;
  for (int i = 0; i < 8; ++i) t = subtract(tanh(add(multiply(t, 1.01f), 0.5f)), 0.1f);
  return t;
}

}  // namespace smelt::bench
