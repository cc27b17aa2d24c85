// When loaded GPU kernels may go (src/backend/cuda/kernel_lifetime.h): the LRU keeps the most
// recently used modules and never lets go of one held elsewhere; a deferred release waits for
// every fence. Pure host logic: runs on every machine.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "src/backend/cuda/kernel_lifetime.h"

namespace smelt::cuda {
namespace {

struct Module {
  int id;
};

std::shared_ptr<Module> module(int id) { return std::make_shared<Module>(Module{id}); }

std::vector<int> ids(const std::vector<std::shared_ptr<Module>>& v) {
  std::vector<int> out;
  for (const auto& m : v) out.push_back(m->id);
  return out;
}

TEST(KeepLru, KeepsTheMostRecentlyUsedUpToTheCapacity) {
  KeepLru<Module> lru(3);
  std::vector<std::shared_ptr<Module>> dropped;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(lru.use(module(i)).empty());
  EXPECT_EQ(lru.size(), 3u);
  // The fourth lets the least recently used go: module 0.
  dropped = lru.use(module(3));
  EXPECT_EQ(ids(dropped), std::vector<int>{0});
  EXPECT_EQ(lru.size(), 3u);
}

TEST(KeepLru, UseMakesAnItemTheMostRecent) {
  KeepLru<Module> lru(2);
  auto a = module(0), b = module(1);
  lru.use(a);
  lru.use(b);
  EXPECT_TRUE(lru.use(a).empty());  // a hit never lets anything go
  const Module* b_ptr = b.get();
  a.reset();
  b.reset();  // now only the LRU holds them
  auto dropped = lru.use(module(2));
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].get(), b_ptr);  // b was the least recently used
  EXPECT_EQ(dropped[0]->id, 1);
}

TEST(KeepLru, NeverLetsGoOfAnItemHeldElsewhere) {
  KeepLru<Module> lru(1);
  auto held = module(0);  // a launch in progress, or a captured graph
  lru.use(held);
  // The newcomer is held by the caller and the old one by `held`: both stay, past the capacity.
  auto second = module(1);
  EXPECT_TRUE(lru.use(second).empty());
  EXPECT_EQ(lru.size(), 2u);
  second.reset();
  // Once released by its holder, the next use lets it go (the least recently used unheld one).
  auto dropped = lru.use(module(2));
  EXPECT_EQ(ids(dropped), std::vector<int>{1});
  EXPECT_TRUE(lru.contains(held.get()));
  held.reset();
  dropped = lru.shrink();
  EXPECT_EQ(ids(dropped), std::vector<int>{0});
  EXPECT_EQ(lru.size(), 1u);
}

TEST(KeepLru, TheItemJustUsedStaysAtCapacityZero) {
  KeepLru<Module> lru(0);
  auto a = module(0);
  EXPECT_TRUE(lru.use(a).empty());  // held by the caller
  EXPECT_EQ(lru.size(), 1u);
  a.reset();
  EXPECT_EQ(ids(lru.shrink()), std::vector<int>{0});
  EXPECT_EQ(lru.size(), 0u);
}

TEST(KeepLru, LoweringTheCapacityLetsGoAtOnce) {
  KeepLru<Module> lru(10);
  for (int i = 0; i < 10; ++i) lru.use(module(i));
  auto dropped = lru.set_capacity(4);
  EXPECT_EQ(ids(dropped), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(lru.size(), 4u);
  EXPECT_EQ(lru.capacity(), 4u);
}

// A loop of new kernels (a new static float per call) through an LRU of 8: never more than 8 kept.
TEST(KeepLru, ANewItemPerCallStaysBounded) {
  KeepLru<Module> lru(8);
  size_t dropped = 0;
  for (int i = 0; i < 500; ++i) {
    auto k = module(i);        // the kernel a call builds, held while it launches
    dropped += lru.use(k).size();
    EXPECT_LE(lru.size(), 8u);
  }
  EXPECT_EQ(dropped, 492u);
}

struct Pending {
  std::string name;
  std::vector<int> fences;
};

TEST(DeferredReleases, ReleasesOnlyOnceEveryFenceHasPassed) {
  DeferredReleases<Pending> q;
  q.push({"a", {1, 2}});
  q.push({"b", {3}});
  q.push({"c", {}});  // launched nowhere outside a capture: ready at once
  std::vector<int> passed = {1};
  auto ready = [&](const Pending& p) {
    for (int f : p.fences)
      if (std::find(passed.begin(), passed.end(), f) == passed.end()) return false;
    return true;
  };
  auto out = q.take_ready(ready);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, "c");
  EXPECT_EQ(q.size(), 2u);
  passed.push_back(3);
  out = q.take_ready(ready);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, "b");
  EXPECT_EQ(q.count_if([](const Pending& p) { return p.name == "a"; }), 1u);
  passed.push_back(2);
  out = q.take_ready(ready);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, "a");
  EXPECT_EQ(q.size(), 0u);
}

}  // namespace
}  // namespace smelt::cuda
