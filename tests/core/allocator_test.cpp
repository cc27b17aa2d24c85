// Tests for the caching CPU allocator (statistics, reuse, limit, cache clearing) and buffer donation.
#include <thread>

#include "src/core/allocator.h"
#include "src/core/node.h"
#include "test_utils.h"

namespace smelt {
namespace {

// Each test starts from an empty cache and leaves no limit behind.
class AllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_memory_limit(0);
    clear_memory_cache();
  }
  void TearDown() override {
    set_memory_limit(0);
    clear_memory_cache();
  }
};

TEST(SizeClass, RoundsUpWithBoundedWaste) {
  EXPECT_EQ(CpuAllocator::size_class(0), 64u);
  EXPECT_EQ(CpuAllocator::size_class(1), 64u);
  EXPECT_EQ(CpuAllocator::size_class(64), 64u);
  EXPECT_EQ(CpuAllocator::size_class(65), 128u);
  EXPECT_EQ(CpuAllocator::size_class(4096), 4096u);
  EXPECT_EQ(CpuAllocator::size_class(4097), 5120u);  // 8192 in steps of 1024
  EXPECT_EQ(CpuAllocator::size_class(1000000), 1048576u);
  for (size_t bytes = 1; bytes < (size_t{1} << 34); bytes = bytes * 3 / 2 + 7) {
    size_t c = CpuAllocator::size_class(bytes);
    ASSERT_GE(c, bytes);
    ASSERT_EQ(c % 64, 0u) << bytes;  // aligned_alloc needs a multiple of the alignment
    if (bytes > 512) {
      ASSERT_LE(c, bytes + bytes / 4) << bytes;
    }
    ASSERT_EQ(CpuAllocator::size_class(c), c) << bytes;  // classes are fixed points
  }
}

TEST_F(AllocatorTest, ActivePeakAndCachedAccounting) {
  MemoryInfo before = memory_info();
  EXPECT_EQ(before.cached_bytes, 0u);
  reset_peak_memory();
  EXPECT_EQ(memory_info().peak_bytes, before.active_bytes);
  const size_t bytes = 1 << 20;  // an exact size class
  {
    Array a = zeros({static_cast<int64_t>(bytes / 4)}, float32);
    a.eval();
    MemoryInfo during = memory_info();
    EXPECT_EQ(during.active_bytes, before.active_bytes + bytes);
    EXPECT_GE(during.peak_bytes, during.active_bytes);
    Array b = ones({static_cast<int64_t>(bytes / 8)}, float64);
    b.eval();
    EXPECT_EQ(memory_info().active_bytes, before.active_bytes + 2 * bytes);
    EXPECT_EQ(memory_info().peak_bytes, before.active_bytes + 2 * bytes);
  }
  MemoryInfo after = memory_info();
  EXPECT_EQ(after.active_bytes, before.active_bytes);
  EXPECT_EQ(after.cached_bytes, 2 * bytes);  // both blocks wait for reuse
  EXPECT_EQ(after.peak_bytes, before.active_bytes + 2 * bytes);
  reset_peak_memory();
  EXPECT_EQ(memory_info().peak_bytes, after.active_bytes);
  clear_memory_cache();
  EXPECT_EQ(memory_info().cached_bytes, 0u);
  EXPECT_EQ(memory_info().active_bytes, before.active_bytes);
}

TEST_F(AllocatorTest, ViewsShareTheBufferAndCountOnce) {
  MemoryInfo before = memory_info();
  Array a = zeros({256, 256}, float32);
  a.eval();
  Array t = transpose(a), r = reshape(a, {-1}), s = slice(a, {0, 0}, {128, 256});
  eval({t, r, s});
  EXPECT_EQ(memory_info().active_bytes, before.active_bytes + 256 * 256 * 4);
  EXPECT_EQ(t.node().buffer, a.node().buffer);
  EXPECT_EQ(r.node().buffer, a.node().buffer);
  EXPECT_EQ(s.node().buffer, a.node().buffer);
  a = Array();
  EXPECT_EQ(memory_info().active_bytes, before.active_bytes + 256 * 256 * 4);  // the views keep it
  t = r = s = Array();
  EXPECT_EQ(memory_info().active_bytes, before.active_bytes);
}

TEST_F(AllocatorTest, FreedBlockIsReused) {
  auto& alloc = cpu_allocator();
  MemoryStats s0 = alloc.stats();
  BufferPtr b = alloc.allocate(3000);
  EXPECT_EQ(b->bytes, CpuAllocator::size_class(3000));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->ptr) % 64, 0u);
  void* p = b->ptr;
  b.reset();
  EXPECT_EQ(alloc.stats().cached_bytes, s0.cached_bytes + CpuAllocator::size_class(3000));
  BufferPtr c = alloc.allocate(2900);  // same class
  EXPECT_EQ(c->ptr, p);
  MemoryStats s1 = alloc.stats();
  EXPECT_EQ(s1.num_allocs, s0.num_allocs + 2);
  EXPECT_EQ(s1.num_cache_hits, s0.num_cache_hits + 1);
  EXPECT_EQ(s1.cached_bytes, s0.cached_bytes);
  BufferPtr d = alloc.allocate(100000);  // another class: fresh memory
  EXPECT_NE(d->ptr, p);

  // Through arrays: a freed array's memory backs the next array of the same size.
  Array x = full({1000}, Array(2.5f));
  x.eval();
  const void* xp = x.data();
  x = Array();
  Array y = full({1000}, Array(7.0f));
  y.eval();
  EXPECT_EQ(y.data(), xp);
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(1000, 7.0f));
}

TEST_F(AllocatorTest, ZeroSizedArraysAllocateNothingHarmful) {
  Array e = zeros({0, 5}, float32);
  e.eval();
  EXPECT_EQ(e.size(), 0);
  EXPECT_TRUE(e.to_vector<float>().empty());
}

TEST_F(AllocatorTest, LimitRaisesOutOfMemoryNamingTheSizes) {
  const size_t active = memory_info().active_bytes;
  set_memory_limit(active + (1 << 20));
  Array small = zeros({1 << 16}, float32);  // 256 KiB fits
  small.eval();
  Array big = zeros({1 << 20}, float32);  // 4 MiB does not
  EXPECT_THROW_MSG(big.eval(), OutOfMemory,
                   "allocate: 4194304 bytes would exceed the CPU memory limit of " +
                       std::to_string(active + (1 << 20)) + " bytes (" + std::to_string(active + (1 << 18)) +
                       " active)");
  EXPECT_FALSE(big.is_evaluated());
  EXPECT_EQ(memory_info().active_bytes, active + (1 << 18));  // the failure leaked nothing
  // Raising the limit lets the same graph evaluate.
  set_memory_limit(active + (16 << 20));  // room for big and the copy to_vector makes
  big.eval();
  EXPECT_EQ(big.to_vector<float>()[12345], 0.0f);
  // The limit through Array construction from host data.
  set_memory_limit(memory_info().active_bytes + 4096);
  std::vector<double> host(10000, 1.0);
  EXPECT_THROW_MSG((Array(host, {10000})), OutOfMemory, "allocate: 80000 bytes would exceed the CPU memory limit");
  set_memory_limit(0);
  EXPECT_EQ(Array(host, {10000}).size(), 10000);
}

TEST_F(AllocatorTest, LimitFlushesTheCacheBeforeRefusing) {
  const size_t active = memory_info().active_bytes;
  {
    Array a = zeros({1 << 18}, float32);  // 1 MiB, cached when dropped
    a.eval();
  }
  EXPECT_EQ(memory_info().cached_bytes, size_t{1} << 20);
  // Active + cached + the new block would pass the limit; the cache is given back instead.
  set_memory_limit(active + (3 << 19));
  Array b = zeros({3 << 16}, float32);  // 768 KiB, a different class
  b.eval();
  EXPECT_EQ(memory_info().cached_bytes, 0u);
  EXPECT_EQ(memory_info().active_bytes, active + (3 << 18));
  // A freed block is cached while active + cached stays under the limit...
  set_memory_limit(active + (3 << 18));
  b = Array();
  EXPECT_EQ(memory_info().cached_bytes, 3u << 18);
  Array c = zeros({1 << 10}, float32);
  c.eval();  // needs 4 KiB: the 768 KiB cached block goes
  EXPECT_EQ(memory_info().cached_bytes, 0u);
  // ...and freed at once when it would not (here the limit was lowered below the live total).
  set_memory_limit(memory_info().active_bytes - 1);
  c = Array();
  EXPECT_EQ(memory_info().cached_bytes, 0u);
}

TEST_F(AllocatorTest, AbsurdSizesFailCleanly) {
  auto& alloc = cpu_allocator();
  size_t active = alloc.stats().active_bytes;
  EXPECT_THROW_MSG(alloc.allocate(~size_t{0}), OutOfMemory, "allocate: ");
  EXPECT_THROW_MSG(alloc.allocate(size_t{1} << 62), OutOfMemory, "allocate: ");
  EXPECT_EQ(alloc.stats().active_bytes, active);
}

TEST_F(AllocatorTest, ThreadSafeAllocation) {
  std::vector<std::thread> threads;
  size_t active = memory_info().active_bytes;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 2000; ++i) {
        BufferPtr b = cpu_allocator().allocate(static_cast<size_t>(64 * (1 + (i + t) % 40)));
        static_cast<char*>(b->ptr)[0] = 1;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(memory_info().active_bytes, active);
}

// ---- donation -------------------------------------------------------------------------------

TEST_F(AllocatorTest, CastDonatesTheLastReference) {
  Array x = test::random_array({4096}, float32, -100, 100, 1);
  x.eval();
  auto expected = x.to_vector<double>();
  const void* xp = x.data();
  Array y = astype(x, int32);  // same itemsize: the buffer can be reused
  x = Array();                 // y's input is now the only handle
  reset_peak_memory();
  size_t active = memory_info().active_bytes;
  y.eval();
  EXPECT_EQ(y.node().buffer->ptr, xp);
  EXPECT_EQ(memory_info().peak_bytes, active);  // nothing new was allocated
  auto got = y.to_vector<int32_t>();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], static_cast<int32_t>(expected[i]));
}

TEST_F(AllocatorTest, NoDonationWhileTheInputIsReferenced) {
  Array x = test::random_array({4096}, float32, -100, 100, 2);
  x.eval();
  auto before = test::raw_bytes(x);
  const void* xp = x.data();
  Array y = astype(x, uint32);
  y.eval();
  EXPECT_NE(y.node().buffer->ptr, xp);
  EXPECT_EQ(test::raw_bytes(x), before);  // x is untouched
  // Nor when a view shares the buffer, nor for a different itemsize.
  Array v = reshape(x, {64, 64});
  v.eval();
  Array z = astype(x, int32);
  x = Array();
  z.eval();
  EXPECT_NE(z.node().buffer->ptr, xp);
  EXPECT_EQ(test::raw_bytes(reshape(v, {-1})), before);
  Array w = test::random_array({4096}, float32, -1, 1, 3);
  w.eval();
  const void* wp = w.data();
  Array h = astype(w, float16);
  w = Array();
  h.eval();
  EXPECT_NE(h.node().buffer->ptr, wp);
  // A non-contiguous input is not donated either.
  Array m = test::random_array({64, 64}, float32, -1, 1, 4);
  m.eval();
  const void* mp = m.data();
  Array mt = astype(transpose(m), int32);
  m = Array();
  mt.eval();
  EXPECT_NE(mt.node().buffer->ptr, mp);
}

TEST_F(AllocatorTest, DonationThroughAChain) {
  // Each cast in the chain hands its buffer to the next: one allocation for the whole chain.
  Array x = test::random_array({1 << 16}, int32, 0, 1000, 5);  // exact in every dtype of the chain
  x.eval();
  auto expected = x.to_vector<int64_t>();
  const void* xp = x.data();
  Array y = astype(astype(astype(x, uint32), float32), int32);
  x = Array();
  reset_peak_memory();
  size_t active = memory_info().active_bytes;
  y.eval();
  EXPECT_EQ(y.node().buffer->ptr, xp);
  EXPECT_EQ(memory_info().peak_bytes, active);
  EXPECT_EQ(y.to_vector<int64_t>(), expected);
}

}  // namespace
}  // namespace smelt
