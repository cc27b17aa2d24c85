// The Stream API without a GPU: CPU streams, per-thread current streams, scope nesting, the
// errors for streams of missing GPUs or of the wrong device, and the caching allocator's free
// list per stream (on a fake device whose stream is the thread's current CPU stream).
#include <cstdlib>
#include <thread>

#include "smelt/stream.h"
#include "src/core/allocator.h"
#include "src/core/stream_state.h"
#include "test_utils.h"

namespace smelt {
namespace {

const Device kCpu = Device::cpu();

TEST(Stream, CpuStreamsAreDistinctAndNotDefault) {
  Stream a = Stream::create(kCpu), b = Stream::create(kCpu);
  EXPECT_EQ(a.device(), kCpu);
  EXPECT_FALSE(a.is_default());
  EXPECT_NE(a.id(), b.id());
  EXPECT_FALSE(a == b);
  Stream a2 = a;
  EXPECT_TRUE(a2 == a);  // copies name the same stream
  EXPECT_TRUE(default_stream(kCpu).is_default());
  EXPECT_EQ(default_stream(kCpu).id(), 0u);
  EXPECT_EQ(default_stream(kCpu).str(), "cpu/default");
  EXPECT_EQ(a.str(), "cpu/stream " + std::to_string(a.id()));
}

TEST(Stream, ScopesNestAndRestore) {
  Stream a = Stream::create(kCpu), b = Stream::create(kCpu);
  EXPECT_TRUE(current_stream(kCpu).is_default());
  {
    StreamScope sa(a);
    EXPECT_EQ(current_stream(kCpu), a);
    {
      StreamScope sb(b);
      EXPECT_EQ(current_stream(kCpu), b);
      {
        StreamScope sa2(kCpu, a);
        EXPECT_EQ(current_stream(kCpu), a);
      }
      EXPECT_EQ(current_stream(kCpu), b);
    }
    EXPECT_EQ(current_stream(kCpu), a);
  }
  EXPECT_TRUE(current_stream(kCpu).is_default());
}

TEST(Stream, CurrentStreamIsPerThread) {
  Stream a = Stream::create(kCpu), b = Stream::create(kCpu);
  StreamScope sa(a);
  Stream seen_inside = a, seen_default = a;
  std::thread t([&] {
    seen_default = current_stream(kCpu);  // the creating thread's scope does not reach here
    StreamScope sb(b);
    seen_inside = current_stream(kCpu);
  });
  t.join();
  EXPECT_TRUE(seen_default.is_default());
  EXPECT_EQ(seen_inside, b);
  EXPECT_EQ(current_stream(kCpu), a);  // the other thread's scope did not touch this one
}

TEST(Stream, CpuWorkInAScopeIsUnchanged) {
  // A CPU stream means "the calling thread": results and synchronize are as without one.
  Array x = Array(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Array want = sum(exp(x) * x, {1});
  want.eval();
  Stream s = Stream::create(kCpu);
  Array got;
  {
    StreamScope scope(s);
    got = sum(exp(x) * x, {1});
    got.eval();
    synchronize(s);
  }
  synchronize(default_stream(kCpu));
  EXPECT_TRUE(test::bit_equal(got, want));
}

TEST(Stream, StreamOfAnotherDeviceIsRejected) {
  Stream s = Stream::create(kCpu);
  EXPECT_THROW_MSG(StreamScope scope(Device::cuda(0), s), DeviceError,
                   "StreamScope: " + s.str() + " belongs to cpu and cannot be the current stream of cuda:0");
  // The failed scope left nothing behind.
  EXPECT_TRUE(current_stream(kCpu).is_default());
}

TEST(Stream, MissingGpuIsADeviceError) {
  const Device missing = Device::cuda(cuda_device_count());  // one past the last GPU
  const std::string where = missing.str() + " is not available";
  EXPECT_THROW_MSG(Stream::create(missing), DeviceError, "Stream::create: " + where);
  EXPECT_THROW_MSG(default_stream(missing), DeviceError, "default_stream: " + where);
  EXPECT_THROW_MSG(current_stream(missing), DeviceError, "current_stream: " + where);
}

// ---- free lists per stream --------------------------------------------------------------------

/// Host memory with the CUDA allocator's stream rule: the stream of a request or a free is the
/// calling thread's current stream (here of the CPU, which StreamScope sets without a GPU).
class StreamedFake final : public CachingAllocator {
 public:
  StreamedFake() : CachingAllocator(Device::cpu(), "fake", size_t{1} << 40, 0) {}
  ~StreamedFake() override { clear_cache(); }
  int system_allocs = 0;

 protected:
  size_t block_size(size_t bytes) const override { return CpuAllocator::size_class(bytes); }
  size_t max_request() const override { return size_t{1} << 40; }
  void* system_alloc(size_t bytes) override {
    system_allocs++;
    return std::malloc(bytes);
  }
  void system_free(const std::vector<Block>& blocks) override {
    for (const Block& b : blocks) std::free(b.ptr);
  }
  uint64_t stream_tag() const override { return detail::current_stream_id(Device::cpu()); }
};

TEST(StreamAllocator, FreedBlockIsReusedOnItsOwnStreamOnly) {
  const size_t mib = size_t{1} << 20;
  StreamedFake dev;
  Stream a = Stream::create(kCpu), b = Stream::create(kCpu);
  void* on_a = nullptr;
  {
    StreamScope scope(a);
    BufferPtr x = dev.allocate(mib);
    on_a = x->ptr;
  }  // freed on a
  EXPECT_EQ(dev.stats().cached_bytes, mib);
  void* on_b = nullptr;
  {
    StreamScope scope(b);
    BufferPtr y = dev.allocate(mib);  // a's block is not handed to b
    on_b = y->ptr;
    EXPECT_NE(on_b, on_a);
    EXPECT_EQ(dev.stats().num_cache_hits, 0u);
    EXPECT_EQ(dev.system_allocs, 2);
  }  // freed on b
  EXPECT_EQ(dev.stats().cached_bytes, 2 * mib);
  {
    BufferPtr z = dev.allocate(mib);  // the default stream has no block of its own either
    EXPECT_NE(z->ptr, on_a);
    EXPECT_NE(z->ptr, on_b);
    EXPECT_EQ(dev.system_allocs, 3);
    StreamScope scope(a);
    BufferPtr w = dev.allocate(mib);  // a gets its own block back at once
    EXPECT_EQ(w->ptr, on_a);
    EXPECT_EQ(dev.stats().num_cache_hits, 1u);
  }  // w freed on a, then z on the default stream (the scope ends first)
  {
    StreamScope scope(b);
    BufferPtr y = dev.allocate(mib);
    EXPECT_EQ(y->ptr, on_b);
  }
  EXPECT_EQ(dev.stats().num_cache_hits, 2u);
  EXPECT_EQ(dev.system_allocs, 3);
  // Eviction finds blocks of every stream's list: the cache empties and stays consistent.
  dev.set_cache_limit(0);
  EXPECT_EQ(dev.stats().cached_bytes, 0u);
  EXPECT_EQ(dev.stats().num_evictions, 3u);
  {
    StreamScope scope(a);
    dev.allocate(mib).reset();
  }
  EXPECT_EQ(dev.system_allocs, 4);
}

}  // namespace
}  // namespace smelt
