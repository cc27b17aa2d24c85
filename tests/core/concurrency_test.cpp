// Concurrent evaluation: shared lazy graphs, compiled functions and parallel_for called from many threads.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "smelt/compile.h"
#include "smelt/errors.h"
#include "smelt/memory.h"
#include "src/core/thread_pool.h"
#include "test_utils.h"
#include "thread_test_utils.h"

namespace smelt::test {
namespace {

// A graph with a multi-output primitive (topk) and a long chain, shared by every thread.
Array shared_graph(const Array& x) {
  auto [values, indices] = topk(x, 8);
  Array y = values;
  for (int i = 0; i < 40; ++i) y = sin(y) * Array(1.25f) + Array(0.5f);
  return y + astype(indices, float32);
}

// Threads that evaluate one unevaluated graph each run none of it twice and all see the same
// bits as a graph evaluated alone. Repeated: a race shows up as different bits or a crash.
TEST(Concurrency, ThreadsEvaluatingOneSharedLazyGraph) {
  Array x = random_array({16, 64}, float32, -3.0, 3.0, 1);
  Array want = shared_graph(x);
  want.eval();
  for (int round = 0; round < 50; ++round) {
    Array shared = shared_graph(x);  // unevaluated, handed to every thread
    std::vector<Array> got(4);
    on_threads(4, [&](int t) {
      // Two threads evaluate the root itself, two evaluate consumers of it.
      got[t] = t < 2 ? shared : shared * Array(1.0f);
      got[t].eval();
    });
    for (int t = 0; t < 4; ++t) ASSERT_TRUE(bit_equal(got[t], want)) << "round " << round << " thread " << t;
  }
}

// Siblings of one multi-output node, each evaluated by a different thread: the primitive runs
// once and both see their own output.
TEST(Concurrency, ThreadsEvaluatingSiblingsOfOneNode) {
  Array x = random_array({32, 128}, float32, -3.0, 3.0, 2);
  auto [want_v, want_i] = topk(x, 5);
  want_v.eval();
  want_i.eval();
  for (int round = 0; round < 100; ++round) {
    auto [v, i] = topk(exp(x), 5);  // the exp keeps the topk unevaluated until the threads run
    Array lv = log(v);
    on_threads(2, [&](int t) {
      if (t == 0)
        lv.eval();
      else
        i.eval();
    });
    ASSERT_TRUE(bit_equal(i, want_i)) << "round " << round;
    ASSERT_TRUE(bit_equal(lv, log(exp(want_v)))) << "round " << round;
  }
}

// A kernel that fails releases its node: every thread waiting for it meets the error in its
// own call, and a later eval (after the cause is gone) runs it.
TEST(Concurrency, FailedNodeReachesEveryThreadAndCanRunAgain) {
  Array x = random_array({1024}, float32, -3.0, 3.0, 3);
  x.eval();
  Array big = broadcast_to(exp(x), {256, 1024});  // 1 MiB once materialized
  Array shared = big * Array(2.0f);
  set_memory_limit(64 * 1024);
  std::vector<std::string> errors(3);
  on_threads(3, [&](int t) {
    try {
      shared.eval();
    } catch (const OutOfMemory& e) {
      errors[t] = e.what();
    }
  });
  set_memory_limit(0);
  for (int t = 0; t < 3; ++t)
    EXPECT_NE(errors[t].find("would exceed the CPU memory limit"), std::string::npos) << "thread " << t << ": " << errors[t];
  EXPECT_FALSE(shared.is_evaluated());
  Array want = broadcast_to(exp(x), {256, 1024}) * Array(2.0f);
  EXPECT_TRUE(bit_equal(shared, want));
}

// One compiled function called from 16 threads, 2,000 calls each, on inputs of two shapes
// (so that first calls of a new signature race too): every result equals the single-threaded
// call bit for bit.
TEST(Concurrency, CompiledFunctionFromManyThreads) {
  constexpr int kThreads = 16, kCalls = 2000, kInputs = 6;
  auto f = compile([](const Array& x) { return gelu_chain(x); });
  auto g = compile([](const Array& x) { return gelu_chain(x); });  // the single-threaded reference
  std::vector<Array> inputs, want;
  for (int i = 0; i < kInputs; ++i) {
    inputs.push_back(random_array({i % 2 ? 33 : 256}, float32, -5.0, 5.0, 10 + i));
    inputs.back().eval();
  }
  for (auto& in : inputs) {
    want.push_back(g(in));
    want.back().eval();
    ASSERT_TRUE(bit_equal(want.back(), gelu_chain(in)));  // compiled equals uncompiled
  }
  std::atomic<int> mismatches{0};
  on_threads(kThreads, [&](int t) {
    for (int c = 0; c < kCalls; ++c) {
      const int i = (t + c) % kInputs;
      Array y = f(inputs[i]);
      y.eval();
      if (std::memcmp(y.data(), want[i].data(), y.nbytes()) != 0) mismatches++;
    }
  });
  EXPECT_EQ(mismatches.load(), 0);
  auto st = f.stats();
  EXPECT_EQ(st.traces, 2u);  // one per shape, however many threads missed at once
  EXPECT_EQ(st.hits + st.misses, static_cast<uint64_t>(kThreads) * kCalls);
}

// A compiled function given one unevaluated lazy input by every thread: the threads share that
// node, which one of them computes.
TEST(Concurrency, CompiledFunctionOnSharedLazyInput) {
  auto f = compile([](const Array& x) { return gelu_chain(x) * Array(3.0f); });
  Array base = random_array({512}, float32, -3.0, 3.0, 4);
  Array want = gelu_chain(sin(base) + Array(1.0f)) * Array(3.0f);
  want.eval();
  for (int round = 0; round < 30; ++round) {
    Array lazy = sin(base) + Array(1.0f);
    std::vector<Array> got(8);
    on_threads(8, [&](int t) {
      got[t] = f(lazy);
      got[t].eval();
    });
    for (int t = 0; t < 8; ++t) ASSERT_TRUE(bit_equal(got[t], want)) << "round " << round << " thread " << t;
  }
}

// A captured constant that is still lazy when the first trace freezes it, with threads tracing
// the function for different shapes at once.
TEST(Concurrency, CapturedLazyConstantTracedByThreadsAtOnce) {
  Array base = random_array({64}, float32, -1.0, 1.0, 5);
  Array captured = exp(base) + Array(1.0f);  // unevaluated
  auto f = compile([captured](const Array& x) { return x * sum(captured) + Array(2.0f); });
  std::vector<Array> got(6);
  on_threads(6, [&](int t) {
    got[t] = f(random_array({t + 1}, float32, -1.0, 1.0, 20 + t));
    got[t].eval();
  });
  for (int t = 0; t < 6; ++t) {
    Array x = random_array({t + 1}, float32, -1.0, 1.0, 20 + t);
    EXPECT_TRUE(bit_equal(got[t], x * sum(exp(base) + Array(1.0f)) + Array(2.0f))) << "thread " << t;
  }
}

// Two callers of parallel_for at once both finish, even when a chunk of one waits for the
// other's whole parallel_for to end (a pool that made the second caller wait for the first's
// job would deadlock here; the wait has a bound so that the test fails instead of hanging).
TEST(Concurrency, ParallelForCallersNeverWaitForEachOther) {
  const int saved = cpu_threads();
  set_cpu_threads(4);
  std::mutex m;
  std::condition_variable cv;
  bool second_done = false;
  std::atomic<bool> timed_out{false};
  std::atomic<int64_t> first_sum{0}, second_sum{0};
  std::thread first([&] {
    parallel_for(4, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) first_sum += i;
      if (b != 0) return;
      std::unique_lock lock(m);
      if (!cv.wait_for(lock, std::chrono::seconds(30), [&] { return second_done; })) timed_out = true;
    });
  });
  std::thread second([&] {
    // Started once the first job holds the pool: give it the time to take it.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    parallel_for(1000, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) second_sum += i;
    });
    std::lock_guard lock(m);
    second_done = true;
    cv.notify_all();
  });
  first.join();
  second.join();
  set_cpu_threads(saved);
  EXPECT_FALSE(timed_out.load());
  EXPECT_EQ(first_sum.load(), 0 + 1 + 2 + 3);
  EXPECT_EQ(second_sum.load(), 999 * 1000 / 2);
}

// Many callers of parallel_for at once: each covers its range exactly once with the same chunks
// as a lone caller.
TEST(Concurrency, ManyParallelForCallersCoverTheirRanges) {
  const int saved = cpu_threads();
  set_cpu_threads(4);
  std::atomic<int> failures{0};
  on_threads(8, [&](int t) {
    for (int rep = 0; rep < 200; ++rep) {
      const int64_t n = 1000 + 37 * t + rep;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> chunks{0};
      parallel_for(n, 64, [&](int64_t b, int64_t e) {
        chunks++;
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits)
        if (h.load() != 1) failures++;
      if (chunks.load() != 4) failures++;  // n / 64 > 4: four chunks whoever runs them
    }
  });
  set_cpu_threads(saved);
  EXPECT_EQ(failures.load(), 0);
}

// Large kernels (parallel_for inside) from several threads at once give one thread's bits.
TEST(Concurrency, ParallelKernelsFromSeveralThreads) {
  Array a = random_array({256, 256}, float32, -1.0, 1.0, 6);
  Array b = random_array({256, 256}, float32, -1.0, 1.0, 7);
  Array want = sum(exp(matmul(a, b)) * Array(0.5f), {1});
  want.eval();
  std::vector<Array> got(4);
  on_threads(4, [&](int t) {
    for (int rep = 0; rep < 5; ++rep) {
      got[t] = sum(exp(matmul(a, b)) * Array(0.5f), {1});
      got[t].eval();
    }
  });
  for (int t = 0; t < 4; ++t) EXPECT_TRUE(bit_equal(got[t], want)) << "thread " << t;
}

}  // namespace
}  // namespace smelt::test
