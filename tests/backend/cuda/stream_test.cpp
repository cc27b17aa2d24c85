// GPU streams: threads on their own streams running one compiled function or eager graph bit for
// bit, arrays crossing streams, per-stream reuse of freed blocks, and synchronize(stream).
#include <atomic>
#include <thread>
#include <vector>

#include "smelt/compile.h"
#include "smelt/memory.h"
#include "smelt/stream.h"
#include "tests/backend/cuda/cuda_test_utils.h"
#include "thread_test_utils.h"

namespace smelt {
namespace {

using namespace smelt::test;

// A small model: matmuls (cuBLASLt, with its per-stream workspace), fused elementwise work and
// a reduction.
Array model(const Array& x, const Array& w1, const Array& w2) {
  Array h = matmul(x, w1);
  h = Array(0.5f) * h * (Array(1.0f) + tanh(Array(0.7978845608f) * (h + Array(0.044715f) * h * h * h)));
  return sum(matmul(h, w2), {1});
}

// Long-running work: a chain of large matmuls (tens of milliseconds on any GPU), so that a
// consumer on another stream that did not wait for it would read unfinished data.
Array long_chain(const Array& a, const Array& b) {
  Array x = a;
  for (int i = 0; i < 16; ++i) x = matmul(x, b) * Array(1.0f / 64.0f);
  return x;
}

TEST(CudaStream, CreateAndCurrent) {
  SMELT_REQUIRE_GPU();
  Stream s = Stream::create(gpu());
  EXPECT_EQ(s.device(), gpu());
  EXPECT_FALSE(s.is_default());
  EXPECT_NE(Stream::create(gpu()).id(), s.id());
  EXPECT_TRUE(current_stream(gpu()).is_default());
  {
    StreamScope scope(s);
    EXPECT_EQ(current_stream(gpu()), s);
    EXPECT_TRUE(current_stream(Device::cpu()).is_default());  // scopes are per device
  }
  EXPECT_TRUE(current_stream(gpu()).is_default());
}

// Four threads, each on its own stream, call one compiled function: every result equals the
// single-threaded default-stream result bit for bit.
TEST(CudaStream, FourStreamsShareOneCompiledFunction) {
  SMELT_REQUIRE_GPU();
  auto f = compile([](const Array& x, const Array& w1, const Array& w2) { return model(x, w1, w2); });
  Array w1 = on_gpu(random_array({256, 512}, float32, -0.1, 0.1, 1));
  Array w2 = on_gpu(random_array({512, 128}, float32, -0.1, 0.1, 2));
  std::vector<Array> inputs, want;
  for (int i = 0; i < 4; ++i) {
    inputs.push_back(on_gpu(random_array({64 + 32 * i, 256}, float32, -1.0, 1.0, 10 + i)));
    want.push_back(on_cpu(f(inputs.back(), w1, w2)));
    want.back().eval();
  }
  std::vector<Stream> streams;
  for (int t = 0; t < 4; ++t) streams.push_back(Stream::create(gpu()));
  std::atomic<int> mismatches{0};
  on_threads(4, [&](int t) {
    StreamScope scope(streams[t]);
    for (int c = 0; c < 50; ++c) {
      const int i = (t + c) % 4;
      Array y = on_cpu(f(inputs[i], w1, w2));
      y.eval();
      if (!bit_equal(y, want[i])) mismatches++;
    }
    synchronize(streams[t]);
  });
  EXPECT_EQ(mismatches.load(), 0);
}

// The same with eager graphs built by each thread from shared device arrays.
TEST(CudaStream, FourStreamsRunEagerGraphs) {
  SMELT_REQUIRE_GPU();
  Array w1 = on_gpu(random_array({128, 256}, float32, -0.1, 0.1, 3));
  Array w2 = on_gpu(random_array({256, 64}, float32, -0.1, 0.1, 4));
  Array x = on_gpu(random_array({96, 128}, float32, -1.0, 1.0, 5));
  Array want = on_cpu(model(x, w1, w2));
  want.eval();
  std::vector<Stream> streams;
  for (int t = 0; t < 4; ++t) streams.push_back(Stream::create(gpu()));
  std::atomic<int> mismatches{0};
  on_threads(4, [&](int t) {
    StreamScope scope(streams[t]);
    for (int c = 0; c < 30; ++c) {
      Array y = on_cpu(model(x, w1, w2));
      y.eval();
      if (!bit_equal(y, want)) mismatches++;
    }
  });
  EXPECT_EQ(mismatches.load(), 0);
}

// An array made on stream A (by long-running kernels) and consumed on stream B, in one thread
// and across threads: B sees the finished values.
TEST(CudaStream, ArrayMadeOnOneStreamIsReadyOnAnother) {
  SMELT_REQUIRE_GPU();
  Array a = on_gpu(random_array({2048, 2048}, float32, -1.0, 1.0, 6));
  Array b = on_gpu(random_array({2048, 2048}, float32, -1.0, 1.0, 7));
  Array want = on_cpu(long_chain(a, b) + Array(1.0f));  // default stream
  want.eval();
  Stream sa = Stream::create(gpu()), sb = Stream::create(gpu());
  for (int round = 0; round < 3; ++round) {
    Array produced;
    {
      StreamScope scope(sa);
      produced = long_chain(a, b);
      produced.eval();
    }
    Array got;
    {
      StreamScope scope(sb);
      got = on_cpu(produced + Array(1.0f));
      got.eval();
    }
    ASSERT_TRUE(bit_equal(got, want)) << "round " << round;
    // Across threads: the producer thread ends before the consumer starts its read.
    Array shared;
    std::thread producer([&] {
      StreamScope scope(sa);
      shared = long_chain(a, b);
      shared.eval();
    });
    producer.join();
    Array got2;
    std::thread consumer([&] {
      StreamScope scope(sb);
      got2 = on_cpu(shared + Array(1.0f));
      got2.eval();
    });
    consumer.join();
    ASSERT_TRUE(bit_equal(got2, want)) << "round " << round << " across threads";
  }
}

// A block freed on stream A is reused on A, not on B (B could run before A's last use of it).
TEST(CudaStream, FreedBlockIsReusedOnItsOwnStreamOnly) {
  SMELT_REQUIRE_GPU();
  DefaultDeviceScope on_device(gpu());  // full() makes its arrays on the GPU
  const Shape shape{(3 << 20) + 17};  // a size class no other test array in this process uses
  Stream sa = Stream::create(gpu()), sb = Stream::create(gpu());
  {
    StreamScope scope(sa);
    Array x = full(shape, Array(1.0f));
    x.eval();
  }  // x is freed while sa is current: it waits in sa's free list
  const size_t cached = memory_info(gpu()).cached_bytes;
  ASSERT_GT(cached, size_t{0});
  {
    StreamScope scope(sb);
    Array y = full(shape, Array(2.0f));
    y.eval();
    // Small blocks (the fill value) may join the cache meanwhile; taking A's block would shrink it.
    EXPECT_GE(memory_info(gpu()).cached_bytes, cached) << "stream B took stream A's block";
    EXPECT_TRUE(bit_equal(on_cpu(sum(y)), Array(2.0f * static_cast<float>(shape[0]))));
  }
  const size_t cached_both = memory_info(gpu()).cached_bytes;
  EXPECT_GT(cached_both, cached);  // B's block is cached too, in B's list
  {
    StreamScope scope(sa);
    Array z = full(shape, Array(3.0f));
    z.eval();
    EXPECT_LT(memory_info(gpu()).cached_bytes, cached_both) << "stream A did not reuse its own block";
  }
}

// synchronize(stream) waits for that stream's work; synchronize(device) for every stream's.
TEST(CudaStream, SynchronizeStreamAndDevice) {
  SMELT_REQUIRE_GPU();
  Array a = on_gpu(random_array({1024, 1024}, float32, -1.0, 1.0, 8));
  Array b = on_gpu(random_array({1024, 1024}, float32, -1.0, 1.0, 9));
  Array want = on_cpu(long_chain(a, b));
  want.eval();
  Stream s = Stream::create(gpu());
  Array y;
  {
    StreamScope scope(s);
    y = long_chain(a, b);
    y.eval();
    synchronize(s);
    synchronize(current_stream(gpu()));
  }
  synchronize(default_stream(gpu()));
  synchronize(gpu());
  EXPECT_TRUE(bit_equal(on_cpu(y), want));
}

}  // namespace
}  // namespace smelt
