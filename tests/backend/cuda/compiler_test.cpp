// Kernel launches: the configuration check (pure, on every machine) and, on a GPU, dynamic shared
// memory past the default 48 KiB (opted in by the launcher) and a launch over the device's limit
// refused with the kernel's name instead of the driver's CUDA_ERROR_INVALID_VALUE. The disk cache
// key of cubins (pure).
#include <gtest/gtest.h>

#include <string>

#if SMELT_HAS_CUDA
#include "src/backend/cuda/compiler.h"
#include "src/backend/cuda/kernels.h"
#endif

#include "tests/backend/cuda/cuda_test_utils.h"

namespace smelt::test {
namespace {

#if SMELT_HAS_CUDA
cuda::LaunchConfig config(uint64_t grid, uint64_t block, uint64_t shared) {
  cuda::LaunchConfig c;
  c.grid_x = grid;
  c.block = block;
  c.shared = shared;
  c.static_shared = 80;
  c.max_shared = 232448;  // sm_90's opt-in limit per block
  return c;
}
#endif

TEST(CudaLaunch, ConfigurationsWithinTheLimitsPass) {
#if SMELT_HAS_CUDA
  EXPECT_EQ(cuda::launch_config_problem(config(1, 1, 0)), "");
  EXPECT_EQ(cuda::launch_config_problem(config(0x7fffffff, 1024, 232448 - 80)), "");
  cuda::LaunchConfig c = config(0x7fffffff, 256, 0);
  c.grid_y = 65535;
  EXPECT_EQ(cuda::launch_config_problem(c), "");
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaLaunch, EachBrokenLimitIsNamed) {
#if SMELT_HAS_CUDA
  EXPECT_EQ(cuda::launch_config_problem(config(4, 2048, 0)), "a block of 2048 threads (1 to 1024)");
  EXPECT_EQ(cuda::launch_config_problem(config(4, 0, 0)), "a block of 0 threads (1 to 1024)");
  EXPECT_EQ(cuda::launch_config_problem(config(0, 256, 0)), "grid x of 0 blocks (1 to 2^31 - 1)");
  cuda::LaunchConfig c = config(0x7fffffff, 256, 0);
  c.grid_y = 65536;
  EXPECT_EQ(cuda::launch_config_problem(c), "grid y of 65536 (1 to 65535)");
  c.grid_y = 1;
  c.grid_z = 0;
  EXPECT_EQ(cuda::launch_config_problem(c), "grid z of 0 (1 to 65535)");
  EXPECT_EQ(cuda::launch_config_problem(config(4, 256, 232448 - 79)),
            "232449 bytes of shared memory per block (the device allows 232448)");
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaLaunch, TheErrorNamesTheKernelAndItsConfiguration) {
#if SMELT_HAS_CUDA
  EXPECT_THROW_MSG(cuda::check_launch_config(config(4, 256, 240000), "fused_rows|1234", "Fused(softmax)"), DeviceError,
                   "Fused(softmax): kernel fused_rows|1234 cannot be launched: 240080 bytes of shared memory per block "
                   "(the device allows 232448); grid 4 x 1 x 1, block 256, 240000 bytes of dynamic and 80 of static "
                   "shared memory");
  EXPECT_NO_THROW(cuda::check_launch_config(config(4, 256, 1024), "k", "Reduce(sum)"));
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

#if SMELT_HAS_CUDA
/// A kernel that fills `n` floats of dynamic shared memory with i % 7 and sums them in thread 0.
const char* kSharedSum =
    "struct SumArgs { u64 out; i64 n; };\n"
    "extern \"C\" __global__ void k(SumArgs a) {\n"
    "  extern __shared__ float buf[];\n"
    "  for (i64 i = threadIdx.x; i < a.n; i += blockDim.x) buf[i] = (float)(i % 7);\n"
    "  __syncthreads();\n"
    "  if (threadIdx.x != 0) return;\n"
    "  float s = 0.0f;\n"
    "  for (i64 i = 0; i < a.n; ++i) s += buf[i];\n"
    "  ((float*)a.out)[0] = s;\n}\n";
#endif

// Issue #12: a cubin's entry is keyed by everything that makes its bytes: the source, smelt's
// version, the architecture, the toolkit, NVRTC's version and options. Each one changes the hash,
// and the key stored in the entry (so an entry built otherwise is refused, disk_cache.h).
TEST(CubinCacheEntry, KeyCoversTheSourceArchitectureToolkitAndNvrtc) {
#if SMELT_HAS_CUDA
  const std::string src = "extern \"C\" __global__ void k() {}\n";
  const codegen::CacheEntry e = cuda::cubin_cache_entry(1, 90, src, "13.0");
  EXPECT_EQ(e.kind, "cuda");
  EXPECT_EQ(e.device, "cuda:1");
  EXPECT_EQ(e.source_ext, "cu");
  ASSERT_EQ(e.hash.size(), 16u);
  EXPECT_EQ(e.hash.find_first_not_of("0123456789abcdef"), std::string::npos);
  for (const char* part : {"source-fnv1a=", "\nsmelt=" SMELT_VERSION "\n", "\narch=sm_90\n", "\ncuda=",
                           "\nnvrtc-version=13.0\n", "--gpu-architecture=sm_90", "--fmad=false"})
    EXPECT_NE(e.key.find(part), std::string::npos) << part << " missing from\n" << e.key;
  EXPECT_EQ(e.key.find(src), std::string::npos);  // the source itself is beside the entry, not in the key
  // The same inputs give the same entry (a second process finds it)...
  const codegen::CacheEntry same = cuda::cubin_cache_entry(1, 90, src, "13.0");
  EXPECT_EQ(same.hash, e.hash);
  EXPECT_EQ(same.key, e.key);
  // ...and each input changes both the hash and the key.
  for (const codegen::CacheEntry& other :
       {cuda::cubin_cache_entry(1, 100, src, "13.0"), cuda::cubin_cache_entry(1, 90, src + " ", "13.0"),
        cuda::cubin_cache_entry(1, 90, src, "13.1")}) {
    EXPECT_NE(other.hash, e.hash);
    EXPECT_NE(other.key, e.key);
  }
  // The device only names it in events: one GPU model shares its cubins across devices.
  EXPECT_EQ(cuda::cubin_cache_entry(0, 90, src, "13.0").hash, e.hash);
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

// The kernel-source tests need NVRTC too: where the CUDA backend is built, NVRTC loads.
TEST(CubinCacheEntry, NvrtcVersionIsTheLoadedNvrtcs) {
#if SMELT_HAS_CUDA
  int major = 0, minor = 0;
  ASSERT_EQ(cuda::nvrtc().nvrtcVersion(&major, &minor), NVRTC_SUCCESS);
  EXPECT_EQ(cuda::nvrtc_version(), std::to_string(major) + "." + std::to_string(minor));
  EXPECT_EQ(&cuda::nvrtc_version(), &cuda::nvrtc_version());  // asked once
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

// 200,000 bytes of dynamic shared memory: past the 48 KiB a kernel gets without opting in.
TEST(CudaLaunch, DynamicSharedMemoryPastTheDefaultLimitIsOptedIn) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  cuda::DeviceState& s = cuda::device_state(0);
  if (s.smem_per_block_optin < 200100) GTEST_SKIP() << "the GPU allows " << s.smem_per_block_optin << " bytes a block";
  const cuda::Kernel fn = cuda::get_kernel(0, "test|shared_sum", [] { return std::string(kSharedSum); }, "shared sum");
  Array out = on_gpu(zeros({1}, float32));
  out.eval();
  struct SumArgs {
    uint64_t out;
    int64_t n;
  } args{cuda::dptr(out), 50000};
  cuda::launch(s, fn, 1, 256, &args, "shared sum", 50000 * 4);
  double want = 0;
  for (int64_t i = 0; i < 50000; ++i) want += static_cast<double>(i % 7);  // exact in float32 (< 2^24)
  EXPECT_EQ(on_cpu(out).to_vector<float>()[0], static_cast<float>(want));
  EXPECT_THROW_MSG(cuda::launch(s, fn, 1, 256, &args, "shared sum", static_cast<uint64_t>(s.smem_per_block_optin) + 16),
                   DeviceError, "shared sum: kernel test|shared_sum cannot be launched: ");
  EXPECT_THROW_MSG(cuda::launch(s, fn, 1, 2048, &args, "shared sum"), DeviceError,
                   "shared sum: kernel test|shared_sum cannot be launched: a block of 2048 threads (1 to 1024)");
#endif
}

}  // namespace
}  // namespace smelt::test
