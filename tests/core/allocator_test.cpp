// Tests for the caching allocators (statistics, reuse, limit, cache cap and eviction, flush and
// retry, cache clearing) and buffer donation. The caching policy is device-independent; a fake
// device with a fixed amount of memory tests what a real system rarely does (refusing memory).
#include <atomic>
#include <cstdlib>
#include <optional>
#include <thread>

#include "src/core/allocator.h"
#include "src/core/node.h"
#include "test_utils.h"

namespace smelt {
namespace {

// Each test starts from an empty cache and leaves no limit and the default cache cap behind. It
// runs on the CPU's allocator: with a GPU present the default device would be the GPU.
class AllocatorTest : public ::testing::Test {
 protected:
  DefaultDeviceScope on_cpu{Device::cpu()};
  size_t cache_cap = 0;
  void SetUp() override {
    set_memory_limit(0);
    clear_memory_cache();
    cache_cap = memory_info().cache_limit_bytes;
  }
  void TearDown() override {
    set_memory_limit(0);
    set_cache_limit(cache_cap);
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
  const size_t flushes = cpu_allocator().stats().num_flushes;
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
  EXPECT_EQ(cpu_allocator().stats().num_flushes, flushes + 1);
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

// ---- the cache cap ----------------------------------------------------------------------------

// Issue #12: allocating and freeing 64 MiB ... 1 GiB one at a time left 6.4 GiB cached. Scaled
// down: a cap of 8 MiB and arrays of 1 ... 16 MiB.
TEST_F(AllocatorTest, CachedBytesStayUnderTheCap) {
  const size_t cap = size_t{8} << 20;
  set_cache_limit(cap);
  EXPECT_EQ(memory_info().cache_limit_bytes, cap);
  const size_t active = memory_info().active_bytes;
  const MemoryStats s0 = cpu_allocator().stats();
  for (int64_t mib = 1; mib <= 16; ++mib) {
    {
      Array a = full({mib << 18}, Array(1.5f));  // mib MiB of float32
      a.eval();
      EXPECT_EQ(a.to_vector<float>()[static_cast<size_t>(mib)], 1.5f);
    }
    const MemoryInfo m = memory_info();
    EXPECT_LE(m.cached_bytes, cap) << mib << " MiB";
    EXPECT_EQ(m.active_bytes, active) << mib << " MiB";
    // Blocks past the cap are never cached; smaller ones are (the newest freed is kept).
    if (mib <= 8) {
      EXPECT_GE(m.cached_bytes, static_cast<size_t>(mib) << 20) << mib << " MiB";
    }
  }
  EXPECT_GT(cpu_allocator().stats().num_evictions, s0.num_evictions);
}

// The cap evicts the blocks freed longest ago, and the survivors still serve requests.
TEST_F(AllocatorTest, CapEvictsTheLeastRecentlyFreedBlocks) {
  auto& alloc = cpu_allocator();
  set_cache_limit(size_t{3} << 20);
  const size_t mib = size_t{1} << 20, a_size = mib, b_size = mib + mib / 4, c_size = mib + mib / 2;  // three classes
  BufferPtr a = alloc.allocate(a_size), b = alloc.allocate(b_size), c = alloc.allocate(c_size);
  void* bp = b->ptr;
  a.reset();  // cached: a
  b.reset();  // cached: a, b (2.25 MiB)
  const MemoryStats s0 = alloc.stats();
  c.reset();  // 3.75 MiB would pass the cap: a goes
  const MemoryStats s1 = alloc.stats();
  EXPECT_EQ(s1.cached_bytes, b_size + c_size);
  EXPECT_EQ(s1.num_evictions, s0.num_evictions + 1);
  BufferPtr b2 = alloc.allocate(b_size);  // still cached
  EXPECT_EQ(b2->ptr, bp);
  EXPECT_EQ(alloc.stats().num_cache_hits, s1.num_cache_hits + 1);
  BufferPtr a2 = alloc.allocate(a_size);  // evicted: fresh memory
  EXPECT_EQ(alloc.stats().num_cache_hits, s1.num_cache_hits + 1);
  EXPECT_EQ(alloc.stats().cached_bytes, c_size);
}

TEST_F(AllocatorTest, LoweringTheCapFreesNowAndZeroCachesNothing) {
  Array a = zeros({1 << 18}, float32), b = zeros({1 << 19}, float32);  // 1 and 2 MiB
  eval({a, b});
  a = Array();  // freed first: the least recently freed
  b = Array();
  EXPECT_EQ(memory_info().cached_bytes, size_t{3} << 20);
  const size_t previous = set_cache_limit(size_t{2} << 20);
  EXPECT_EQ(previous, cache_cap);
  EXPECT_EQ(memory_info().cached_bytes, size_t{2} << 20);  // the older 1 MiB block went
  EXPECT_EQ(set_cache_limit(0), size_t{2} << 20);
  EXPECT_EQ(memory_info().cached_bytes, 0u);
  {
    Array c = zeros({1 << 10}, float32);
    c.eval();
  }
  EXPECT_EQ(memory_info().cached_bytes, 0u);
}

TEST(CpuAllocatorCap, DefaultAndEnvironment) {
  const size_t d = CpuAllocator::default_cache_limit();
  EXPECT_GT(d, 0u);
  EXPECT_LE(d, size_t{1} << 30);
  {
    ::setenv("SMELT_CPU_CACHE_LIMIT", "24M", 1);
    CpuAllocator a;
    EXPECT_EQ(a.stats().cache_limit, size_t{24} << 20);
    ::setenv("SMELT_CPU_CACHE_LIMIT", "lots", 1);  // unparsable: the default, not zero
    CpuAllocator b;
    EXPECT_EQ(b.stats().cache_limit, d);
    ::unsetenv("SMELT_CPU_CACHE_LIMIT");
  }
  CpuAllocator c;
  EXPECT_EQ(c.stats().cache_limit, d);
  EXPECT_EQ(c.stats().limit, 0u);
}

// ---- the policy on a fake device ------------------------------------------------------------

/// A device with `capacity` bytes of memory that refuses what does not fit, as a GPU does.
class FakeDevice final : public CachingAllocator {
 public:
  explicit FakeDevice(size_t capacity, size_t cache_limit = size_t{1} << 40)
      : CachingAllocator(Device::cpu(), "fake", cache_limit, 0), capacity_(capacity) {}
  ~FakeDevice() override { clear_cache(); }

  std::atomic<size_t> in_use{0};  // bytes the system has handed out
  std::atomic<int> refusals{0};
  bool fail_hard = false;  // system_alloc throws, as a device error would

 protected:
  size_t block_size(size_t bytes) const override { return CpuAllocator::size_class(bytes); }
  size_t max_request() const override { return size_t{1} << 40; }
  void* system_alloc(size_t bytes) override {
    if (fail_hard) throw DeviceError("allocate: fake device error");
    size_t cur = in_use.load();
    do {
      if (cur + bytes > capacity_) {
        refusals++;
        return nullptr;
      }
    } while (!in_use.compare_exchange_weak(cur, cur + bytes));
    return std::malloc(bytes);
  }
  void system_free(const std::vector<Block>& blocks) override {
    for (const Block& b : blocks) {
      in_use -= b.bytes;
      std::free(b.ptr);
    }
  }

 private:
  size_t capacity_;
};

// The system refuses while freed blocks sit in the cache: the cache goes back and the retry
// succeeds.
TEST(CachingAllocator, SystemRefusalFlushesTheCacheAndRetries) {
  const size_t mib = size_t{1} << 20;
  FakeDevice dev(10 * mib);
  dev.allocate(6 * mib).reset();  // cached
  EXPECT_EQ(dev.stats().cached_bytes, 6 * mib);
  BufferPtr b = dev.allocate(5 * mib);  // another class: 6 + 5 > 10 until the cache goes
  ASSERT_TRUE(b);
  EXPECT_EQ(dev.refusals.load(), 1);
  const MemoryStats s = dev.stats();
  EXPECT_EQ(s.num_flushes, 1u);
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.active_bytes, 5 * mib);
  EXPECT_EQ(dev.in_use.load(), 5 * mib);
}

// A block taken from the cache leaves its bookkeeping (a list node, a map node) for the next
// block released into it, whatever that block's size: after many such rounds with sizes that
// change, each request still gets the most recently freed block of its own size, and the cap
// still evicts the least recently freed.
TEST(CachingAllocator, RecycledBookkeepingKeepsSizesAndRecency) {
  const size_t mib = size_t{1} << 20;
  FakeDevice dev(size_t{1} << 30);
  const size_t sizes[] = {1 * mib, 2 * mib, 3 * mib};
  for (int round = 0; round < 50; ++round) {
    std::vector<BufferPtr> live;
    for (int i = 0; i < 3 + round % 3; ++i) live.push_back(dev.allocate(sizes[(i + round) % 3]));
    for (size_t i = live.size(); i-- > 0;) live[i].reset();  // freed in reverse: the first one last
  }
  const MemoryStats s = dev.stats();
  EXPECT_EQ(s.active_bytes, 0u);
  EXPECT_EQ(dev.in_use.load(), s.cached_bytes);  // every cached byte is a block the system handed out
  // Three blocks of known sizes, freed in a known order on top of what is cached.
  BufferPtr a = dev.allocate(sizes[0]), b = dev.allocate(sizes[1]), c = dev.allocate(sizes[2]);
  void *ap = a->ptr, *bp = b->ptr, *cp = c->ptr;
  b.reset();
  c.reset();
  a.reset();  // most recently freed
  EXPECT_EQ(dev.allocate(sizes[0])->ptr, ap);  // the newest block of each size comes back first
  EXPECT_EQ(dev.allocate(sizes[2])->ptr, cp);
  EXPECT_EQ(dev.allocate(sizes[1])->ptr, bp);
  // Each allocate above freed its block again at once, in the order a, c, b: b is the newest, and
  // a cap of 2 MiB keeps it alone (everything older goes, oldest first).
  dev.set_cache_limit(2 * mib);
  EXPECT_EQ(dev.stats().cached_bytes, 2 * mib);
  EXPECT_EQ(dev.allocate(sizes[1])->ptr, bp);
  EXPECT_EQ(dev.in_use.load(), 2 * mib);
}

// Refused even with an empty cache: OutOfMemory naming the bytes, and nothing counted.
TEST(CachingAllocator, RefusalAfterTheFlushRaisesOutOfMemoryNamingTheBytes) {
  const size_t mib = size_t{1} << 20;
  FakeDevice dev(10 * mib);
  BufferPtr a = dev.allocate(4 * mib);
  dev.allocate(2 * mib).reset();  // cached
  EXPECT_THROW_MSG(dev.allocate(7 * mib), OutOfMemory,
                   "allocate: fake has no memory for 7340032 bytes (a block of 7340032), even after freeing 2097152 "
                   "cached bytes; 4194304 bytes are active in smelt");
  const MemoryStats s = dev.stats();
  EXPECT_EQ(s.active_bytes, 4 * mib);
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(dev.in_use.load(), 4 * mib);
  EXPECT_NO_THROW(dev.allocate(6 * mib));  // what fits still does
}

TEST(CachingAllocator, LimitPastWhatTheCacheCanFreeRaisesWithoutFlushing) {
  const size_t mib = size_t{1} << 20;
  FakeDevice dev(100 * mib);
  dev.set_limit(8 * mib);
  BufferPtr a = dev.allocate(4 * mib);
  dev.allocate(2 * mib).reset();
  EXPECT_THROW_MSG(dev.allocate(5 * mib), OutOfMemory,
                   "allocate: 5242880 bytes would exceed the fake memory limit of 8388608 bytes (4194304 active)");
  EXPECT_EQ(dev.stats().cached_bytes, 2 * mib);  // flushing could not have helped: kept
  EXPECT_EQ(dev.stats().num_flushes, 0u);
  BufferPtr b = dev.allocate(3 * mib);  // fits once the cache goes
  EXPECT_EQ(dev.stats().num_flushes, 1u);
  EXPECT_EQ(dev.stats().cached_bytes, 0u);
  EXPECT_EQ(dev.stats().limit, 8 * mib);
}

TEST(CachingAllocator, DeviceErrorLeavesTheAccountingUnchanged) {
  FakeDevice dev(size_t{1} << 30);
  dev.fail_hard = true;
  EXPECT_THROW_MSG(dev.allocate(1000), DeviceError, "allocate: fake device error");
  EXPECT_EQ(dev.stats().active_bytes, 0u);
  EXPECT_EQ(dev.stats().peak_bytes, 1024u);  // it was counted while the request was in flight
}

// Many threads allocating and freeing under a small cap: the cap holds, and every byte the
// system handed out is accounted for as active or cached.
TEST(CachingAllocator, ConcurrentUseKeepsTheCapAndTheBooks) {
  const size_t cap = size_t{256} << 10;
  FakeDevice dev(size_t{1} << 30, cap);
  std::vector<std::thread> threads;
  std::atomic<bool> over_cap{false};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::vector<BufferPtr> held;
      for (int i = 0; i < 3000; ++i) {
        held.push_back(dev.allocate(static_cast<size_t>(1024 * (1 + (i * 7 + t) % 97))));
        if (held.size() > 5) held.erase(held.begin() + (i % 5));
        if (dev.stats().cached_bytes > cap) over_cap = true;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_FALSE(over_cap.load());
  const MemoryStats s = dev.stats();
  EXPECT_EQ(s.active_bytes, 0u);
  EXPECT_LE(s.cached_bytes, cap);
  EXPECT_EQ(dev.in_use.load(), s.cached_bytes);
  EXPECT_EQ(s.num_allocs, 4u * 3000u);
  EXPECT_GT(s.num_cache_hits, 0u);
  EXPECT_GT(s.num_evictions, 0u);
  dev.clear_cache();
  EXPECT_EQ(dev.in_use.load(), 0u);
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
