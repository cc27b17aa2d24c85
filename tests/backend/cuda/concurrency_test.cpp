// GPU work from several host threads at once: compiled functions, shared lazy graphs and matmuls, bit for bit.
#include <atomic>
#include <thread>
#include <vector>

#include "smelt/compile.h"
#include "tests/backend/cuda/cuda_test_utils.h"
#include "thread_test_utils.h"

namespace smelt {
namespace {

using namespace smelt::test;

// One compiled function on the GPU from 8 threads: every result equals the single-threaded one.
TEST(CudaConcurrency, CompiledFunctionFromManyThreads) {
  SMELT_REQUIRE_GPU();
  auto f = compile([](const Array& x) { return gelu_chain(x); });
  std::vector<Array> inputs, want;
  for (int i = 0; i < 4; ++i) {
    inputs.push_back(on_gpu(random_array({i % 2 ? 1000 : 1 << 16}, float32, -5.0, 5.0, 30 + i)));
    inputs.back().eval();
    want.push_back(on_cpu(f(inputs.back())));
    want.back().eval();
  }
  std::atomic<int> mismatches{0};
  on_threads(8, [&](int t) {
    for (int c = 0; c < 200; ++c) {
      const int i = (t + c) % 4;
      Array y = on_cpu(f(inputs[i]));
      y.eval();
      if (!bit_equal(y, want[i])) mismatches++;
    }
  });
  EXPECT_EQ(mismatches.load(), 0);
}

// Threads sharing one unevaluated GPU graph (and reading it back) see one thread's bits.
TEST(CudaConcurrency, SharedLazyGraphOnTheGpu) {
  SMELT_REQUIRE_GPU();
  Array a = on_gpu(random_array({128, 128}, float32, -1.0, 1.0, 40));
  Array b = on_gpu(random_array({128, 128}, float32, -1.0, 1.0, 41));
  Array want = on_cpu(sum(exp(matmul(a, b)), {1}));
  want.eval();
  for (int round = 0; round < 20; ++round) {
    Array shared = sum(exp(matmul(a, b)), {1});
    std::vector<Array> got(4);
    on_threads(4, [&](int t) {
      got[t] = on_cpu(shared);
      got[t].eval();
    });
    for (int t = 0; t < 4; ++t) ASSERT_TRUE(bit_equal(got[t], want)) << "round " << round << " thread " << t;
  }
}

}  // namespace
}  // namespace smelt
