// A compiled program's fused GPU kernels build side by side on the prebuild threads before its
// first call reaches them (src/compile/kernel_prebuild.h): each is built once (the first call
// waits for a kernel being built rather than building it again), the prebuilds predict the
// layouts the call launches, and the results are those of a compile without prebuilds.
// Skips without a GPU (the lead runs it on the H200).
#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "smelt/compile.h"
#include "smelt/telemetry.h"
#include "src/backend/cuda/compiler.h"
#include "tests/backend/cuda/cuda_test_utils.h"
#include "tests/env_test_utils.h"

namespace smelt {
namespace {

using namespace smelt::test;

/// The kernel layouts ("rows", "regs4", "c|v", ...) of the fused kernels built while alive, by
/// count: the program names' hash dropped, so that two programs of one structure compare.
struct BuiltLayouts {
  std::mutex mutex;
  std::map<std::string, int> count;
  std::vector<std::string> names;
  telemetry::Subscription sub{"compile.kernel.build", [this](const telemetry::Event& e) {
                                for (const auto& [key, v] : e.fields)
                                  if (key == "program" && v.rfind("fused|", 0) == 0) {
                                    std::lock_guard lock(mutex);  // prebuild threads report too
                                    names.push_back(v);
                                    count[v.substr(v.find('|', 6) + 1)]++;
                                  }
                              }};
};

/// A GPT-2-style residual block tail: LayerNorm of x + r (a row kernel), GELU, a scale by the
/// static `k` (a literal) and the residual (element-wise kernels with a
/// broadcast bias).
std::vector<Array> block(const std::vector<Array>& in, float k) {
  Array h = add(in[0], in[1]);
  Array y = layer_norm(h, in[2], in[3], 1e-5);
  Array g = multiply(gelu(add(y, in[3]), true), Array(k));
  return {add(g, h), sum(multiply(g, g), {-1})};
}

std::vector<Array> inputs(Dtype dt) {
  return {on_gpu(random_array({96, 768}, dt, -2.0, 2.0, 1)), on_gpu(random_array({96, 768}, dt, -2.0, 2.0, 2)),
          on_gpu(random_array({768}, dt, 0.5, 1.5, 3)), on_gpu(random_array({768}, dt, -0.5, 0.5, 4))};
}

/// Empties the loaded-kernel LRU (the GPU's in-memory kernel cache), so that the next call builds
/// or loads every kernel it needs and reports each one.
void drop_loaded_kernels() { cuda::set_kernel_cache_capacity(cuda::set_kernel_cache_capacity(0)); }

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += "\n  " + n;
  return s;
}

TEST(CudaKernelPrebuild, EveryKernelOfTheFirstCallIsBuiltOnceWithTheLayoutItLaunches) {
  SMELT_REQUIRE_GPU();
  CompileOptions o;
  o.fallback = CompileFallback::Raise;
  for (Dtype dt : {bfloat16, float32}) {
    const std::vector<Array> in = inputs(dt);
    // Without prebuilds: each kernel is built where it launches (an empty disk cache, nothing
    // loaded). How the block fuses depends on the dtype (float32 may take it in one row kernel).
    std::map<std::string, int> launched;
    std::vector<std::string> launched_names;
    {
      ColdKernelCache cold("smelt-prebuild-off");
      ScopedEnv tiered("SMELT_TIERED", "0");  // after the cold cache, which unsets it
      ScopedEnv off("SMELT_CUDA_PREBUILD", "0");
      drop_loaded_kernels();
      BuiltLayouts built;
      auto f = compile([](const std::vector<Array>& x) { return block(x, 1.5f); }, o, "prebuild_off");
      std::vector<Array> out = f(in);
      eval(out);
      synchronize(gpu());
      launched = built.count;
      launched_names = built.names;
    }
    ASSERT_GE(launched.size(), 1u) << dtype_name(dt) << ": at least a row kernel";
    // With them: the same kernels again from an empty disk cache and nothing loaded, so the
    // prebuilds build every one, each once, with the layout the call launches (a wrong guess
    // would build a second layout at the launch).
    ColdKernelCache cold("smelt-prebuild-on");
    ScopedEnv tiered("SMELT_TIERED", "0");
    ScopedEnv on("SMELT_CUDA_PREBUILD", "1");
    drop_loaded_kernels();
    BuiltLayouts built;
    auto f = compile([](const std::vector<Array>& x) { return block(x, 1.5f); }, o, "prebuild_on");
    std::vector<Array> got = f(in);
    eval(got);
    synchronize(gpu());
    wait_for_kernel_builds();
    std::vector<std::string> names = built.names;
    std::sort(names.begin(), names.end());
    EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end()) << dtype_name(dt) << ": a kernel built twice" << joined(names);
    EXPECT_EQ(built.count, launched) << dtype_name(dt) << ": the prebuilds' layouts are those the call launches; without prebuilds:"
                                     << joined(launched_names) << "\nwith them:" << joined(names);
    // Compiled results equal eager ones bit for bit, prebuilt kernels or not.
    const std::vector<Array> eager = block(in, 1.5f);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(bit_equal(on_cpu(got[i]), on_cpu(eager[i]))) << dtype_name(dt) << " output " << i;
  }
}

}  // namespace
}  // namespace smelt
