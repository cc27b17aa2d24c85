// Helpers shared by the concurrency tests: threads started together, and SUITE.md's W1 chain.
#pragma once

#include <atomic>
#include <thread>
#include <vector>

#include "smelt/array.h"
#include "smelt/ops.h"

namespace smelt::test {

/// Runs fn(t) on `threads` threads started together (so that the calls overlap as much as they
/// can), and joins them.
template <class F>
void on_threads(int threads, F fn) {
  std::atomic<int> ready{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready++;
      while (ready.load() < threads) std::this_thread::yield();
      fn(t);
    });
  for (auto& th : pool) th.join();
}

/// SUITE.md's W1, GELU in its tanh form.
inline Array gelu_chain(const Array& x) {
  Array inner = Array(0.7978845608f) * (x + Array(0.044715f) * x * x * x);
  return Array(0.5f) * x * (Array(1.0f) + tanh(inner));
}

}  // namespace smelt::test
