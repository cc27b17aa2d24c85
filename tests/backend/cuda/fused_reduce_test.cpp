// Fused reductions on the GPU (the lead runs these on the H200; they skip without a GPU):
// compiled equals uncompiled bit for bit (the fused row kernel follows the eager Reduce's
// order), and the GPU agrees with the CPU within the bound below.
#include "cuda_test_utils.h"
#include "smelt/compile.h"

namespace smelt::test {
namespace {

using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

const std::vector<std::pair<std::string, Fn>>& fns() {
  static const std::vector<std::pair<std::string, Fn>> f = {
      {"softmax", [](const std::vector<Array>& in) { return std::vector<Array>{softmax(in[0], {-1})}; }},
      {"log_softmax", [](const std::vector<Array>& in) { return std::vector<Array>{log_softmax(in[0], {-1})}; }},
      {"rms_norm", [](const std::vector<Array>& in) { return std::vector<Array>{rms_norm(in[0], in[1], 1e-6)}; }},
      {"layer_norm_residual",
       [](const std::vector<Array>& in) {
         Array h = add(in[0], in[2]);
         return std::vector<Array>{layer_norm(h, in[1], in[1], 1e-5), h};
       }},
      {"var", [](const std::vector<Array>& in) { return std::vector<Array>{var(in[0], {-1}, true)}; }},
      {"logsumexp", [](const std::vector<Array>& in) { return std::vector<Array>{logsumexp(in[0], {-1}, true)}; }},
      {"sum", [](const std::vector<Array>& in) { return std::vector<Array>{sum(in[0] * in[0], {-1}, true)}; }},
  };
  return f;
}

// Rows of a warp (<= 2048), of a block, and few long rows split into chunks.
const std::vector<Shape>& shapes() {
  static const std::vector<Shape> s = {{33, 100}, {9, 4096}, {3, 200000}};
  return s;
}

TEST(CudaFusedReduce, CompiledEqualsEagerBitForBit) {
  SMELT_REQUIRE_GPU();
  for (const auto& [name, fn] : fns())
    for (Dtype dt : {float32, bfloat16, float16})
      for (const Shape& s : shapes()) {
        std::vector<Array> in{on_gpu(special_array(s, dt, -3.0, 3.0, 1)),
                              on_gpu(astype(Array(random_values(s.back(), 0.5, 1.5, 2), Shape{s.back()}), dt)),
                              on_gpu(special_array(s, dt, -3.0, 3.0, 3))};
        auto compiled = compile_flat(fn);
        auto got = compiled(in);
        auto want = fn(in);
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_EQ(got[i].device(), gpu()) << name;
          EXPECT_TRUE(bit_equal(on_cpu(got[i]), on_cpu(want[i]))) << name << " " << dtype_name(dt) << shape_to_string(s) << " output " << i;
        }
      }
}

// GPU against CPU: the orders differ (the GPU's tree over threads, the CPU's pairwise blocks),
// each with error at most about log2(n) + 2 roundings of the row's magnitude in float32 (the
// compute dtype); the transcendentals differ by a few float32 ulps (docs/cuda.md). Rows of
// finite values in [-3, 3) keep every result O(1), so 2^-16 relative (rounding error growth
// for n <= 200000, plus the 16-bit output rounding for float32 results compared at 1e-4)
// covers float32; 16-bit results are compared to one unit of their last place.
TEST(CudaFusedReduce, GpuAgreesWithCpu) {
  SMELT_REQUIRE_GPU();
  for (const auto& [name, fn] : fns())
    for (Dtype dt : {float32, bfloat16})
      for (const Shape& s : shapes()) {
        std::vector<Array> cpu_in{random_array(s, dt, -3.0, 3.0, 4), astype(Array(random_values(s.back(), 0.5, 1.5, 5), Shape{s.back()}), dt),
                                  random_array(s, dt, -3.0, 3.0, 6)};
        std::vector<Array> gpu_in;
        for (auto& a : cpu_in) gpu_in.push_back(on_gpu(a));
        auto on_device = compile_flat(fn)(gpu_in);
        auto reference = fn(cpu_in);
        const double tol = dt == float32 ? 1e-4 : 1.0 / 128;
        for (size_t i = 0; i < on_device.size(); ++i)
          EXPECT_TRUE(all_close(on_cpu(on_device[i]), as_doubles(reference[i]), tol, tol))
              << name << " " << dtype_name(dt) << shape_to_string(s) << " output " << i;
      }
}

TEST(CudaFusedReduce, EagerReductionsOverAnyAxisMatchTheCpu) {
  SMELT_REQUIRE_GPU();
  for (Dtype dt : {float32, bfloat16, float16})
    for (int axis : {0, 1}) {
      Array x = random_array({2048, 1024}, dt, -1.0, 1.0, 7);
      Array g = sum(on_gpu(x), {axis});
      Array c = sum(x, {axis});
      EXPECT_TRUE(all_close(on_cpu(g), as_doubles(c), dt == float32 ? 1e-4 : 1e-2, dt == float32 ? 1e-3 : 1e-1))
          << dtype_name(dt) << " axis " << axis;
    }
}

}  // namespace
}  // namespace smelt::test
