// CUDA runtime: availability, transfers, allocator statistics and limit, errors, kernel caches.
#include <cstdlib>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "smelt/memory.h"
#include "smelt/telemetry.h"
#include "src/backend/cuda/runtime.h"
#include "tests/backend/cuda/cuda_test_utils.h"

namespace smelt {
namespace {

using namespace smelt::test;

// These run on every machine: without a GPU the CUDA paths fail cleanly, naming the device.
TEST(CudaRuntime, WithoutGpuTransfersFailWithAMessage) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is present";
  EXPECT_EQ(cuda_device_count(), 0);
  EXPECT_EQ(default_device(), Device::cpu());
  Array x = Array({1.0f, 2.0f});
  EXPECT_THROW_MSG(to_device(x, Device::cuda(0)), DeviceError, "to_device: cuda:0 is not available");
  EXPECT_THROW_MSG(set_default_device(Device::cuda(0)), DeviceError, "set_default_device: cuda:0 is not available");
  EXPECT_THROW_MSG(memory_info(Device::cuda(0)), Error, "cuda:0");
  // The CPU keeps working.
  EXPECT_EQ(to_device(x, Device::cpu()).to_vector<float>(), (std::vector<float>{1.0f, 2.0f}));
}

// The process default follows DESIGN.md's rule: the GPU when one is present, unless
// SMELT_DEFAULT_DEVICE=cpu (the test runners set it, so that CPU tests stay on the CPU).
TEST(CudaRuntime, ProcessDefaultFollowsTheRule) {
  const char* env = std::getenv("SMELT_DEFAULT_DEVICE");
  if (env && std::string(env) == "cpu") {
    EXPECT_EQ(default_device(), Device::cpu());
  } else {
    EXPECT_EQ(default_device(), cuda_available() ? Device::cuda(0) : Device::cpu());
  }
}

TEST(CudaRuntime, ProcessDefaultWithoutTheEnvironmentVariable) {
  // This binary again, with the variable unset, running the test above.
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const int rc = std::system(("env -u SMELT_DEFAULT_DEVICE '" + self +
                              "' --gtest_filter=CudaRuntime.ProcessDefaultFollowsTheRule >/dev/null 2>&1")
                                 .c_str());
  EXPECT_EQ(rc, 0);
}

TEST(CudaRuntime, DefaultDeviceScopesNestAndRestore) {
  const Device before = default_device();
  {
    DefaultDeviceScope cpu(Device::cpu());
    EXPECT_EQ(zeros({2}).device(), Device::cpu());
    if (cuda_available()) {
      DefaultDeviceScope g(gpu());
      EXPECT_EQ(zeros({2}).device(), gpu());
      EXPECT_EQ(arange(0.0, 4.0, 1.0).device(), gpu());
    }
    EXPECT_EQ(default_device(), Device::cpu());
  }
  EXPECT_EQ(default_device(), before);
  if (!cuda_available())
    EXPECT_THROW_MSG(DefaultDeviceScope(Device::cuda(0)), DeviceError, "DefaultDeviceScope: cuda:0 is not available");
}

TEST(CudaRuntime, DeviceCountAndBadIndex) {
  SMELT_REQUIRE_GPU();
  EXPECT_GE(cuda_device_count(), 1);
  Array x = Array({1, 2, 3});
  EXPECT_THROW_MSG(to_device(x, Device::cuda(99)), DeviceError, "to_device: cuda:99 is not available");
  EXPECT_THROW_MSG(to_device(Array(), gpu()), InvalidArgument, "to_device");
}

TEST(CudaRuntime, RoundTripEveryDtypeAndLayout) {
  SMELT_REQUIRE_GPU();
  for (Dtype dt : all_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    for (const Shape& shape : {Shape{}, Shape{0}, Shape{3, 0, 2}, Shape{1}, Shape{7}, Shape{33, 65}, Shape{2, 3, 4, 5}}) {
      Array a = special_array(shape, dt);
      Array g = on_gpu(a);
      EXPECT_EQ(g.device(), gpu());
      EXPECT_TRUE(bit_equal(on_cpu(g), a));
    }
    // Non-contiguous host sources and device views (transposed, negative steps, broadcast).
    Array a = special_array({6, 5}, dt);
    EXPECT_TRUE(bit_equal(on_cpu(on_gpu(transpose(a))), copy(transpose(a))));
    Array s = slice(a, {5, 4}, {-7, -6}, {-2, -1});
    EXPECT_TRUE(bit_equal(on_cpu(on_gpu(s)), copy(s)));
    Array g = on_gpu(a);
    EXPECT_TRUE(bit_equal(on_cpu(transpose(g)), copy(transpose(a))));
    EXPECT_TRUE(bit_equal(on_cpu(slice(g, {5, 4}, {-7, -6}, {-2, -1})), copy(s)));
    EXPECT_TRUE(bit_equal(on_cpu(broadcast_to(slice(g, {0, 0}, {1, 5}), {4, 5})),
                          copy(broadcast_to(slice(a, {0, 0}, {1, 5}), {4, 5}))));
  }
}

TEST(CudaRuntime, ReadsOfDeviceArrays) {
  SMELT_REQUIRE_GPU();
  Array g = on_gpu(Array({1.5f, -2.0f, 3.25f}));
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_EQ(g.to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_EQ(on_gpu(Array(7.0)).item<double>(), 7.0);
  EXPECT_EQ(g.to_string(), Array({1.5f, -2.0f, 3.25f}).to_string());
  EXPECT_EQ(transpose(on_gpu(Array({1, 2, 3, 4}, {2, 2}))).to_string(), "array([[1, 3],\n       [2, 4]], dtype=int32)");
  EXPECT_THROW_MSG(g.data(), UnsupportedError, "data: the array lives on cuda:0");
}

// device_state remembers the thread's last device and skips making its context current again;
// other code on the thread (a user's, a library's) may make another context current, or none,
// and the next op must still run in the device's own.
TEST(CudaRuntime, OpsRunAfterOtherCodeChangesTheCurrentContext) {
  SMELT_REQUIRE_GPU();
  Array a = random_array({1000}, float32, -3, 3, 11);
  Array g = on_gpu(a);
  EXPECT_TRUE(same_as_cpu(multiply(g, g), multiply(a, a)));
  const cuda::DriverApi& d = *cuda::driver();
  ASSERT_EQ(d.cuCtxSetCurrent(nullptr), CUDA_SUCCESS);  // no context current on this thread
  EXPECT_TRUE(same_as_cpu(max(multiply(g, g)), max(multiply(a, a))));  // a max: any order gives its bits
  CUcontext current = nullptr;
  ASSERT_EQ(d.cuCtxGetCurrent(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, cuda::device_state(0).ctx);
  // Another thread's first op makes the context current there too.
  Array b;
  std::thread t([&] { b = max(add(g, 1.0f)); b.eval(); });
  t.join();
  EXPECT_TRUE(same_as_cpu(b, max(add(a, 1.0f))));
}

TEST(CudaRuntime, MixingHostAndDeviceOperands) {
  SMELT_REQUIRE_GPU();
  Array a = random_array({64}, float32, -3, 3, 5), b = random_array({64}, float32, -3, 3, 6);
  Array r = add(on_gpu(a), b);  // the host operand moves to the GPU
  EXPECT_TRUE(same_as_cpu(r, add(a, b)));
  Array s = multiply(on_gpu(a), 0.5f);  // scalars too
  EXPECT_TRUE(same_as_cpu(s, multiply(a, 0.5f)));
}

TEST(CudaRuntime, AllocatorStatisticsAndCache) {
  SMELT_REQUIRE_GPU();
  clear_memory_cache(gpu());
  reset_peak_memory(gpu());
  const MemoryInfo before = memory_info(gpu());
  {
    Array g = on_gpu(zeros({1 << 20}, float32));
    g.eval();
    const MemoryInfo during = memory_info(gpu());
    EXPECT_GE(during.active_bytes, before.active_bytes + (size_t{4} << 20));
    EXPECT_GE(during.peak_bytes, during.active_bytes);
  }
  const MemoryInfo after = memory_info(gpu());
  EXPECT_EQ(after.active_bytes, before.active_bytes);
  EXPECT_GE(after.cached_bytes, size_t{4} << 20);
  clear_memory_cache(gpu());
  EXPECT_EQ(memory_info(gpu()).cached_bytes, 0u);
  // CPU statistics are separate.
  EXPECT_NO_THROW(memory_info(Device::cpu()));
}

TEST(CudaRuntime, MemoryLimitRaisesOutOfMemory) {
  SMELT_REQUIRE_GPU();
  clear_memory_cache(gpu());
  const size_t active = memory_info(gpu()).active_bytes;
  set_memory_limit(active + (size_t{1} << 20), gpu());
  Array big = on_gpu(zeros({1 << 22}, float32));
  EXPECT_THROW_MSG(big.eval(), OutOfMemory, "cuda:0 memory limit");
  set_memory_limit(0, gpu());
  Array ok = on_gpu(zeros({1 << 22}, float32));
  EXPECT_NO_THROW(ok.eval());
}

TEST(CudaRuntime, AFailedKernelLeavesTheDeviceUsable) {
  SMELT_REQUIRE_GPU();
  Array g = on_gpu(random_array({8}, float32));
  // An index out of range is found on the device and raised on the host.
  Array idx = on_gpu(Array(std::vector<int64_t>{0, 9}, Shape{2}));
  EXPECT_THROW(take(g, idx, 0).eval(), Error);
  // Sorting and nonzero run on the GPU, and the device keeps working after the failure.
  EXPECT_TRUE(same_as_cpu(sort(g), sort(on_cpu(g))));
  EXPECT_TRUE(same_as_cpu(nonzero(g), nonzero(on_cpu(g))));
  EXPECT_TRUE(same_as_cpu(add(g, g), add(on_cpu(g), on_cpu(g))));
}

// The GPU allocator runs the CPU's caching policy (tested without a GPU in
// tests/core/allocator_test.cpp); here, that the cap and the flush reach cuMemFree.
TEST(CudaRuntime, CacheCapBoundsCachedGpuMemory) {
  SMELT_REQUIRE_GPU();
  clear_memory_cache(gpu());
  const size_t before = set_cache_limit(size_t{8} << 20, gpu());
  EXPECT_GT(before, 0u);  // the default: half the device's memory
  EXPECT_EQ(memory_info(gpu()).cache_limit_bytes, size_t{8} << 20);
  const size_t active = memory_info(gpu()).active_bytes;
  for (int64_t mib = 1; mib <= 16; ++mib) {
    {
      Array g = on_gpu(full({mib << 18}, Array(2.0f)));
      EXPECT_EQ(g.to_vector<float>()[static_cast<size_t>(mib)], 2.0f);
    }
    EXPECT_LE(memory_info(gpu()).cached_bytes, size_t{8} << 20) << mib;
    EXPECT_EQ(memory_info(gpu()).active_bytes, active) << mib;
  }
  set_cache_limit(before, gpu());
  clear_memory_cache(gpu());
  EXPECT_EQ(memory_info(gpu()).cached_bytes, 0u);
}

TEST(CudaRuntime, KernelsAreCachedOnDisk) {
  SMELT_REQUIRE_GPU();
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("smelt_cuda_cache_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  ::setenv("SMELT_CACHE_DIR", dir.c_str(), 1);
  int builds = 0;
  telemetry::Subscription sub("compile.kernel.build", [&](const telemetry::Event& e) {
    if (e.field("device") == "cuda:0") ++builds;
  });
  // A kernel no other test of this binary uses: logical_xor of int16 broadcast against a column.
  Array a = on_gpu(random_array({5, 3}, int16)), b = on_gpu(random_array({5, 1}, int16));
  EXPECT_TRUE(same_as_cpu(logical_xor(a, b), logical_xor(on_cpu(a), on_cpu(b))));
  ::unsetenv("SMELT_CACHE_DIR");
  EXPECT_GE(builds, 1);
  // Checksummed entries (the cubin after a header, src/codegen/disk_cache.h), each with its source.
  int entries = 0, sources = 0;
  for (auto& e : fs::directory_iterator(dir / "cuda")) {
    entries += e.path().extension() == ".kernel";
    sources += e.path().extension() == ".cu";
  }
  EXPECT_GE(entries, 1);
  EXPECT_EQ(entries, sources);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace smelt
