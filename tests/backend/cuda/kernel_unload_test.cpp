// Loaded GPU kernels are unloaded once nothing references them (issue #12, item 5): a new static
// float per call keeps the loaded modules bounded by the in-memory LRU, a captured graph keeps
// its kernels loaded while it lives, and a damaged cached cubin is rejected and rebuilt.
// Skips without a GPU (the lead runs it on the H200).
#include <sys/types.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "smelt/compile.h"
#include "smelt/telemetry.h"
#include "tests/backend/cuda/cuda_test_utils.h"

#if SMELT_HAS_CUDA
#include "src/backend/cuda/compiler.h"
#include "src/backend/cuda/graph.h"
#endif

namespace smelt {
namespace {

using namespace smelt::test;
namespace fs = std::filesystem;

#if SMELT_HAS_CUDA
/// Sets the LRU's capacity for the test and restores it after.
struct ScopedCapacity {
  explicit ScopedCapacity(size_t n) : old(cuda::set_kernel_cache_capacity(n)) {}
  ~ScopedCapacity() { cuda::set_kernel_cache_capacity(old); }
  size_t old;
};

/// Waits for the GPU, then unloads what nothing references: afterwards loaded_kernel_modules
/// counts exactly the modules in the LRU or held.
size_t settle() {
  synchronize(gpu());
  cuda::unload_retired_kernels(0);
  EXPECT_EQ(cuda::pending_kernel_unloads(0), 0u);
  return cuda::loaded_kernel_modules(0);
}

struct ScopedCacheDir {
  fs::path dir = fs::temp_directory_path() / ("smelt_cuda_unload_test_" + std::to_string(::getpid()));
  ScopedCacheDir() {
    fs::remove_all(dir);
    ::setenv("SMELT_CACHE_DIR", dir.c_str(), 1);
  }
  ~ScopedCacheDir() {
    ::unsetenv("SMELT_CACHE_DIR");
    fs::remove_all(dir);
  }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(dir / "cuda", ec))
      if (e.path().extension() == ".kernel") out.push_back(e.path());
    return out;
  }
};

CompileOptions raise_on_fallback() {
  CompileOptions o;
  o.fallback = CompileFallback::Raise;
  return o;
}
#endif

// Each value of `k` is a literal in the fused kernel's source: a new kernel per call. With an
// LRU of 16 modules, no more than 16 stay loaded beyond those held elsewhere, whatever the calls.
// (120 NVRTC builds, 7.5 times the LRU: about 0.2-0.4 s each, so this test takes half a minute.)
TEST(CudaKernelUnload, ANewStaticValuePerCallKeepsLoadedModulesBounded) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  DefaultDeviceScope scope(gpu());
  ScopedCacheDir cache;  // 120 new cubins: not in the user's cache
  ScopedCapacity capacity(16);
  const size_t base = settle();  // the LRU's 16 at most, and whatever other tests still hold
  int fused_builds = 0, unloads = 0;
  telemetry::Subscription builds("compile.kernel.build", [&](const telemetry::Event& e) {
    if (e.field("device") == "cuda:0" && e.field("program").rfind("fused|", 0) == 0) ++fused_builds;
  });
  telemetry::Subscription unloaded("compile.kernel.unload", [&](const telemetry::Event& e) {
    if (e.field("device") == "cuda:0") ++unloads;
  });
  CompileOptions options = raise_on_fallback();
  options.cache_capacity = 4;
  auto eager = [](const Array& x, float k) { return exp(x) * k + k; };
  auto f = compile(eager, options, "unload_new_constant");
  const Array x = on_gpu(special_array({4096}, float32, -3, 3, 31));
  const int calls = 120;
  for (int i = 0; i < calls; ++i) {
    const float k = 1.5f + static_cast<float>(i) / 1024.0f;
    Array got = f(x, k);
    if (i % 50 == 0) {
      EXPECT_TRUE(same_as_cpu(got, on_cpu(eager(x, k)))) << k;  // bit for bit
    }
    got.eval();
    got = Array();
    EXPECT_LE(settle(), base + 16) << "call " << i;
  }
  EXPECT_GE(fused_builds, calls);                 // one kernel per constant...
  EXPECT_GE(unloads, fused_builds - 16);          // ...and all but the LRU's unloaded again
  EXPECT_LE(cuda::loaded_kernel_modules(0), base + 16);
#endif
}

// A graph's kernel nodes name functions of loaded modules: the graph keeps them loaded even when
// the LRU keeps nothing, relaunches without rebuilding any, and lets them go when it goes.
TEST(CudaKernelUnload, ACapturedGraphKeepsItsKernelsLoaded) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  DefaultDeviceScope scope(gpu());
  const bool graphs_were = cuda::graphs_enabled();
  cuda::set_graphs_enabled(true);
  // Two kernels of this test's own: a scan, then a fused chain with literals no other test uses.
  auto fn = [](const Array& x) { return exp(cumsum(x, 1) * 0.0078125f) + 0.3125f; };
  const Array x = on_gpu(special_array({64, 256}, float32, -1, 1, 41));
  const Array want = on_cpu(fn(x));  // the eager GPU result
  size_t held = 0;
  {
    auto f = compile(fn, raise_on_fallback(), "unload_graph");
    const auto c0 = cuda::graph_counters();
    EXPECT_TRUE(same_as_cpu(f(x), want));  // warm-up: plain replay, kernels built
    EXPECT_TRUE(same_as_cpu(f(x), want));  // captured and launched
    ASSERT_EQ(cuda::graph_counters().captures, c0.captures + 1) << "the graph was not captured";
    ScopedCapacity nothing(0);  // the LRU keeps nothing: only holders keep modules loaded
    held = settle();
    EXPECT_GE(held, 2u);  // the graph's scan and fused modules
    int builds = 0;
    telemetry::Subscription sub("compile.kernel.build", [&](const telemetry::Event& e) {
      if (e.field("device") == "cuda:0") ++builds;
    });
    const auto c1 = cuda::graph_counters();
    EXPECT_TRUE(same_as_cpu(f(x), want));  // the graph relaunched: its kernels still loaded
    EXPECT_EQ(cuda::graph_counters().launches, c1.launches + 1);
    EXPECT_EQ(builds, 0);
    EXPECT_EQ(settle(), held);
  }
  // The compiled function and its graph are gone: their modules go at the LRU's next shrink
  // (any get_kernel; here setting the capacity).
  {
    ScopedCapacity nothing(0);
    EXPECT_LE(settle(), held - 2);
  }
  cuda::set_graphs_enabled(graphs_were);
#endif
}

// A cached cubin damaged on disk (a flipped byte, then a truncation) is rejected with a reason,
// rebuilt by NVRTC and stored again; the next load reads the rebuilt entry from disk.
TEST(CudaKernelUnload, ADamagedCachedCubinIsRejectedAndRebuilt) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  DefaultDeviceScope scope(gpu());
  ScopedCacheDir cache;
  ScopedCapacity nothing(0);  // every run finds nothing in memory: it reads the disk
  struct Counts {
    int built = 0, from_disk = 0;
    std::vector<std::string> rejects;
  } n;
  telemetry::Subscription builds("compile.kernel.build", [&](const telemetry::Event& e) {
    if (e.field("device") != "cuda:0") return;
    (e.field("cached_on_disk") == "true" ? n.from_disk : n.built)++;
  });
  telemetry::Subscription rejects("compile.kernel.cache.reject", [&](const telemetry::Event& e) {
    if (e.field("device") == "cuda:0") n.rejects.push_back(e.field("reason"));
  });
  // A kernel no other test of this binary uses: bitwise xor of uint16 broadcast against a row.
  const Array a = on_gpu(random_array({7, 5}, uint16, 0, 60000, 51));
  const Array b = on_gpu(random_array({5}, uint16, 0, 60000, 52));
  const Array want = bitwise_xor(on_cpu(a), on_cpu(b));
  auto run = [&] {
    n = Counts{};
    EXPECT_TRUE(same_as_cpu(bitwise_xor(a, b), want));
    cuda::set_kernel_cache_capacity(0);  // the LRU lets go of what the run used
    settle();
  };
  run();
  EXPECT_GE(n.built, 1);
  const auto first = cache.entries();
  ASSERT_FALSE(first.empty());

  for (const fs::path& p : first) {  // a flipped byte in the cubin: the checksum no longer matches
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  run();
  EXPECT_EQ(n.from_disk, 0);
  EXPECT_GE(n.built, 1);
  ASSERT_GE(n.rejects.size(), 1u);
  EXPECT_EQ(n.rejects[0], "checksum mismatch");
  EXPECT_EQ(cache.entries().size(), first.size());  // stored again

  for (const fs::path& p : cache.entries()) fs::resize_file(p, 40);  // cut short, header kept
  run();
  EXPECT_EQ(n.from_disk, 0);
  ASSERT_GE(n.rejects.size(), 1u);
  EXPECT_EQ(n.rejects[0].rfind("truncated: 40 bytes", 0), 0u) << n.rejects[0];

  run();  // the rebuilt entries are whole: loaded from disk, nothing rejected
  EXPECT_GE(n.from_disk, 1);
  EXPECT_EQ(n.built, 0);
  EXPECT_TRUE(n.rejects.empty());
#endif
}

}  // namespace
}  // namespace smelt
