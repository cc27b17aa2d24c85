// Tests of the eval scheduler (src/core/eval.cpp) on graphs past its small visited list.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "smelt/smelt.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

// x[k] = 0.5 * (x[k-1] + x[k-2]): every node is read twice, so a walk that lost track of what it
// visited (the list turns into a hash table past 32 nodes, which doubles as it fills) would run
// nodes twice or skip them.
TEST(Eval, SharedNodesPastTheSmallVisitedListRunOnceAndRight) {
  const std::vector<float> a0{1.0f, -2.0f, 3.5f, 0.25f}, a1{-1.0f, 4.0f, 0.5f, 2.0f};
  for (int count : {8, 31, 32, 33, 200, 2000}) {
    std::vector<Array> xs{Array(a0, Shape{4}), Array(a1, Shape{4})};
    std::vector<std::vector<double>> ref{{a0.begin(), a0.end()}, {a1.begin(), a1.end()}};
    for (int k = 2; k < count; ++k) {
      xs.push_back((xs[k - 1] + xs[k - 2]) * 0.5f);
      std::vector<double> r(4);
      // The sum of two floats of like magnitude is exact in double, so rounding it to float is
      // the float addition; * 0.5 is exact: the reference is exact, the comparison bit for bit.
      for (int i = 0; i < 4; ++i)
        r[i] = static_cast<float>(static_cast<float>(ref[k - 1][i] + ref[k - 2][i]) * 0.5f);
      ref.push_back(r);
    }
    // Evaluate the last and a middle value together: the second root is reached by the walk.
    eval({xs.back(), xs[count / 2]});
    for (int k : {count - 1, count / 2}) {
      std::vector<float> got = xs[k].to_vector<float>();
      for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], static_cast<float>(ref[k][i])) << "count " << count << " x" << k;
    }
  }
}

// A thread-local object made before the thread's first eval is destroyed after eval's kept lists
// (reverse order of construction): an eval in its destructor must not use the destroyed lists.
struct EvalsWhenDestroyed {
  Array pending;
  float* result = nullptr;
  ~EvalsWhenDestroyed() {
    if (pending.valid() && result) *result = pending.item<float>();
  }
};

TEST(Eval, AnEvalAfterTheThreadsKeptListsAreGoneStillWorks) {
  float result = 0.0f;
  std::thread t([&] {
    thread_local EvalsWhenDestroyed late;  // constructed first, destroyed last
    Array x(std::vector<float>{1.5f}, Shape{1});
    eval({x + 1.0f});  // the first eval on this thread makes its kept lists
    late.pending = sum(x * 2.0f);
    late.result = &result;
  });
  t.join();
  EXPECT_EQ(result, 3.0f);
}

}  // namespace
}  // namespace smelt::test
