// Tests for the worker pool: parallel_for coverage, fixed chunking, exceptions, nesting, thread counts.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "src/core/thread_pool.h"
#include "test_utils.h"

namespace smelt {
namespace {

// Restores the thread count a test changed.
class ThreadPoolTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = num_threads(); }
  void TearDown() override { set_num_threads(saved_); }
  int saved_ = 1;
};

std::vector<std::pair<int64_t, int64_t>> chunks_of(int64_t n, int64_t grain) {
  std::mutex m;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  parallel_for(n, grain, [&](int64_t b, int64_t e) {
    std::lock_guard lock(m);
    chunks.emplace_back(b, e);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

TEST_F(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 4, 7}) {
    set_num_threads(threads);
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, int64_t{7}, int64_t{64}, int64_t{100},
                      int64_t{1000}, int64_t{4097}, int64_t{12345}}) {
      for (int64_t grain : {int64_t{-5}, int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, int64_t{64}, int64_t{1000},
                            int64_t{1} << 40}) {
        SCOPED_TRACE(::testing::Message() << "threads " << threads << " n " << n << " grain " << grain);
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> calls{0};
        parallel_for(n, grain, [&](int64_t b, int64_t e) {
          calls++;
          ASSERT_LE(0, b);
          ASSERT_LT(b, e);
          ASSERT_LE(e, n);
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i;
        if (n == 0) {
          EXPECT_EQ(calls.load(), 0);
        }
        EXPECT_LE(calls.load(), threads);
      }
    }
  }
}

TEST_F(ThreadPoolTest, ChunksAreContiguousAndFixedByNAndThreads) {
  set_num_threads(4);
  auto first = chunks_of(100000, 100);
  ASSERT_EQ(first.size(), 4u);
  EXPECT_EQ(first.front().first, 0);
  EXPECT_EQ(first.back().second, 100000);
  for (size_t i = 1; i < first.size(); ++i) EXPECT_EQ(first[i - 1].second, first[i].first);
  for (int rep = 0; rep < 20; ++rep) EXPECT_EQ(chunks_of(100000, 100), first);
  // Below the grain per thread, fewer chunks (or one, on the caller).
  EXPECT_EQ(chunks_of(250, 100).size(), 3u);
  EXPECT_EQ(chunks_of(100, 100).size(), 1u);
}

TEST_F(ThreadPoolTest, RunsOnSeveralThreads) {
  set_num_threads(4);
  std::mutex m;
  std::set<std::thread::id> ids;
  parallel_for(4, 1, [&](int64_t, int64_t) {
    {
      std::lock_guard lock(m);
      ids.insert(std::this_thread::get_id());
    }
    // Hold the chunk until a second thread shows up, so the caller cannot take every chunk
    // (bounded, so a starved machine fails the check instead of hanging).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
      {
        std::lock_guard lock(m);
        if (ids.size() > 1) break;
      }
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  EXPECT_GT(ids.size(), 1u);
  EXPECT_TRUE(ids.count(std::this_thread::get_id()));  // the caller takes part
}

TEST_F(ThreadPoolTest, ExceptionsPropagateFromWorkersAndCaller) {
  set_num_threads(4);
  for (int64_t bad_chunk = 0; bad_chunk < 4; ++bad_chunk) {
    SCOPED_TRACE(bad_chunk);
    std::atomic<int> done{0};
    EXPECT_THROW_MSG(parallel_for(400, 1,
                                  [&](int64_t b, int64_t) {
                                    if (b / 100 == bad_chunk) throw InvalidArgument("chunk failed");
                                    done++;
                                  }),
                     InvalidArgument, "chunk failed");
    EXPECT_EQ(done.load(), 3);  // the other chunks still ran to completion
    // The pool stays usable, and still parallel (a failed chunk must not leave the calling
    // thread marked as inside a parallel region).
    EXPECT_EQ(chunks_of(400, 1).size(), 4u);
  }
  // Several chunks failing: one of the exceptions comes out.
  EXPECT_THROW(parallel_for(400, 1, [](int64_t, int64_t) { throw std::runtime_error("all"); }), std::runtime_error);
  EXPECT_EQ(chunks_of(400, 1).size(), 4u);
}

// Tiny work (an element-wise op on a few elements: at most one grain) runs on the calling thread in
// one call, without waking the pool: the per-node cost of small models (docs/onnx.md, "Overhead").
TEST_F(ThreadPoolTest, WorkOfOneGrainRunsOnTheCallingThread) {
  set_num_threads(4);
  for (int64_t n : {1, 16, 999, 1000}) {
    std::vector<std::thread::id> ids;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    parallel_for(n, 1000, [&](int64_t b, int64_t e) {  // one chunk: no other thread can append
      ids.push_back(std::this_thread::get_id());
      ranges.emplace_back(b, e);
    });
    ASSERT_EQ(ids.size(), 1u) << n;
    EXPECT_EQ(ids[0], std::this_thread::get_id()) << n;
    EXPECT_EQ(ranges[0], std::make_pair(int64_t{0}, n));
  }
  EXPECT_EQ(chunks_of(1001, 1000).size(), 2u);  // past one grain: two chunks
}

TEST_F(ThreadPoolTest, NestedParallelForRunsInline) {
  set_num_threads(4);
  const int64_t outer = 8, inner = 1000;
  std::vector<std::atomic<int>> hits(outer * inner);
  std::atomic<int> inner_calls{0};
  parallel_for(outer, 1, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o)
      parallel_for(inner, 1, [&](int64_t ib, int64_t ie) {
        inner_calls++;
        for (int64_t i = ib; i < ie; ++i) hits[static_cast<size_t>(o * inner + i)]++;
      });
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  EXPECT_EQ(inner_calls.load(), outer);  // one inline call per outer index
  // After the nested run the caller is parallel again.
  EXPECT_EQ(chunks_of(400, 1).size(), 4u);
  // An exception from a nested loop reaches the top.
  EXPECT_THROW_MSG(parallel_for(8, 1,
                                [](int64_t, int64_t) {
                                  parallel_for(8, 1, [](int64_t b, int64_t) {
                                    if (b == 0) throw ShapeError("inner");
                                  });
                                }),
                   ShapeError, "inner");
  EXPECT_EQ(chunks_of(400, 1).size(), 4u);
}

TEST_F(ThreadPoolTest, ConcurrentCallersAreSerializedCorrectly) {
  set_num_threads(3);
  std::vector<std::thread> callers;
  std::atomic<int64_t> total{0};
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep) {
        std::atomic<int64_t> sum{0};
        parallel_for(3000, 10, [&](int64_t b, int64_t e) {
          int64_t s = 0;
          for (int64_t i = b; i < e; ++i) s += i;
          sum += s;
        });
        total += sum.load() == 3000 * 2999 / 2 ? 1 : 0;
      }
    });
  for (auto& c : callers) c.join();
  EXPECT_EQ(total.load(), 200);
}

// ThreadCapScope: the calling thread's kernels keep to what the cap says at each call (0: no
// limit), other threads keep the pool's count, scopes nest, and the count comes back after.
std::atomic<int> g_cap{0};
int current_cap() { return g_cap.load(); }
int cap_of_two() { return 2; }

TEST_F(ThreadPoolTest, ThreadCapScopeLimitsTheCallingThreadAsTheCapChanges) {
  set_num_threads(4);
  {
    ThreadCapScope scope(&current_cap);
    g_cap = 1;
    EXPECT_EQ(num_threads(), 1);
    EXPECT_EQ(chunks_of(100, 1).size(), 1u);  // one chunk: the calling thread alone
    int other = 0;
    std::thread([&] { other = num_threads(); }).join();
    EXPECT_EQ(other, 4);
    g_cap = 3;  // asked again by each call
    EXPECT_EQ(num_threads(), 3);
    EXPECT_EQ(chunks_of(100, 1).size(), 3u);
    g_cap = 0;  // no limit
    EXPECT_EQ(num_threads(), 4);
    g_cap = 9;  // never more than the pool
    EXPECT_EQ(num_threads(), 4);
    {
      ThreadCapScope inner(&cap_of_two);
      EXPECT_EQ(num_threads(), 2);
    }
    EXPECT_EQ(num_threads(), 4);
  }
  EXPECT_EQ(num_threads(), 4);
  g_cap = 0;
}

TEST_F(ThreadPoolTest, SetNumThreads) {
  set_num_threads(3);
  EXPECT_EQ(num_threads(), 3);
  EXPECT_EQ(cpu_threads(), 3);
  EXPECT_EQ(chunks_of(3000, 1).size(), 3u);
  set_cpu_threads(1);
  EXPECT_EQ(num_threads(), 1);
  EXPECT_EQ(chunks_of(3000, 1).size(), 1u);
  set_num_threads(0);  // clamps to one thread
  EXPECT_EQ(num_threads(), 1);
  set_num_threads(-4);
  EXPECT_EQ(num_threads(), 1);
  set_num_threads(16);  // more threads than cores is allowed
  EXPECT_EQ(num_threads(), 16);
  EXPECT_EQ(chunks_of(3000, 1).size(), 16u);
}

TEST_F(ThreadPoolTest, KernelResultsDoNotDependOnThreadCount) {
  Array a = test::random_array({1 << 17}, float32, -3, 3, 5);
  std::vector<uint8_t> ref;
  for (int threads : {1, 2, 3, 8}) {
    set_num_threads(threads);
    auto bytes = test::raw_bytes(astype(transpose(reshape(a, {256, 512})), float16));
    if (ref.empty()) ref = bytes;
    EXPECT_EQ(bytes, ref) << threads << " threads";
  }
}

}  // namespace
}  // namespace smelt
