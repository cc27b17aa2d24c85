// Fused reductions on the GPU (the lead runs these on the H200; they skip without a GPU):
// compiled equals uncompiled bit for bit (the fused row kernel follows the eager Reduce's
// order), and the GPU agrees with the CPU within the bound below.
#include <algorithm>

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
      // W6: only the normalized sum leaves; its float32 x + r is kept in registers between passes.
      {"layer_norm_of_sum",
       [](const std::vector<Array>& in) { return std::vector<Array>{layer_norm(add(in[0], in[2]), in[1], in[1], 1e-5)}; }},
      {"var", [](const std::vector<Array>& in) { return std::vector<Array>{var(in[0], {-1}, true)}; }},
      {"logsumexp", [](const std::vector<Array>& in) { return std::vector<Array>{logsumexp(in[0], {-1}, true)}; }},
      {"sum", [](const std::vector<Array>& in) { return std::vector<Array>{sum(in[0] * in[0], {-1}, true)}; }},
  };
  return f;
}

// Rows of a warp (<= 2048), of a block, and few long rows split into chunks; lengths 1, odd and
// not multiples of any vector width. Rows whose vectors fit in a thread's registers
// (gpu_row_register_vectors: up to {9, 4096} and {16, 4096}, as W4/W6, bfloat16 warp rows of
// 2048, and with 512 threads {4, 20000} and {3, 32768}, as W5) run the register kernels; longer
// ones keep their re-read inputs in the shared-memory row cache (warp rows up to
// kGpuWarpRowCacheMaxBytes a block, float32 softmax rows of 2048; block rows up to the device's
// opt-in limit: both LayerNorm summands of {3, 32768}) or read global memory in every pass past
// it ({6, 2048} float32 warp rows of the two-input LayerNorm, {2, 60000} and {3, 200000} float32
// block rows); {2, 100000} bfloat16 is cached and split into chunks (256 threads a row). Rows of
// 16384 or more that are not split ({4, 20000}, {3, 32768}, {2, 60000}) take blocks of 512
// threads, all of which reduce.
const std::vector<Shape>& shapes() {
  static const std::vector<Shape> s = {{5, 1},     {33, 100},  {7, 1531},   {6, 2048},   {9, 4096},  {4, 3001},
                                       {4, 20000}, {3, 32768}, {2, 60000}, {2, 100000}, {3, 200000}, {16, 4096}};
  return s;
}

/// Finite random rows with NaN, +inf and -inf in rows 1, 2 and 3 only (elsewhere every result
/// is finite, so the bits compared are those of real values).
Array rows_with_specials(const Shape& s, Dtype dt, uint32_t seed) {
  const int64_t rows = s[0], n = s[1];
  auto v = random_values(static_cast<size_t>(rows * n), -3.0, 3.0, seed);
  if (rows > 1) v[static_cast<size_t>(n)] = std::numeric_limits<double>::quiet_NaN();
  if (rows > 2) v[static_cast<size_t>(2 * n + n / 2)] = std::numeric_limits<double>::infinity();
  if (rows > 3) v[static_cast<size_t>(4 * n - 1)] = -std::numeric_limits<double>::infinity();
  return astype(Array(v, s), dt);
}

/// Compiled `fn` on `in` equals `fn` run eagerly, bit for bit, every output on the GPU.
void expect_compiled_equals_eager(const std::string& name, const Fn& fn, const std::vector<Array>& in,
                                  const std::string& what) {
  auto got = compile_flat(fn)(in);
  auto want = fn(in);
  ASSERT_EQ(got.size(), want.size()) << name << " " << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].device(), gpu()) << name;
    EXPECT_TRUE(bit_equal(on_cpu(got[i]), on_cpu(want[i]))) << name << " " << what << " output " << i;
  }
}

TEST(CudaFusedReduce, CompiledEqualsEagerBitForBit) {
  SMELT_REQUIRE_GPU();
  for (const auto& [name, fn] : fns())
    for (Dtype dt : {float32, bfloat16, float16})
      for (const Shape& s : shapes()) {
        std::vector<Array> in{on_gpu(rows_with_specials(s, dt, 1)),
                              on_gpu(astype(Array(random_values(s.back(), 0.5, 1.5, 2), Shape{s.back()}), dt)),
                              on_gpu(rows_with_specials(s, dt, 3))};
        expect_compiled_equals_eager(name, fn, in, dtype_name(dt) + shape_to_string(s));
      }
}

// Two norms of one 16-bit x with one weight: each row kernel converts x and the weight itself
// (the fuse pass recomputes a cast of an input in every kernel that reads it), bit for bit as
// eager, on warp rows, register rows (W4's width) and long cached rows.
TEST(CudaFusedReduce, NormsSharingTheirInputCastsCompiledEqualsEagerBitForBit) {
  SMELT_REQUIRE_GPU();
  const Fn two_norms = [](const std::vector<Array>& in) {
    return std::vector<Array>{rms_norm(in[0], in[1], 1e-6), layer_norm(in[0], in[1], in[1], 1e-5)};
  };
  for (Dtype dt : {bfloat16, float16})
    for (const Shape& s : std::vector<Shape>{{33, 100}, {16, 4096}, {3, 32768}}) {
      std::vector<Array> in{on_gpu(rows_with_specials(s, dt, 5)),
                            on_gpu(astype(Array(random_values(s.back(), 0.5, 1.5, 6), Shape{s.back()}), dt))};
      expect_compiled_equals_eager("two_norms", two_norms, in, dtype_name(dt) + shape_to_string(s));
    }
}

// Special values everywhere (every 7th element: NaN, ±inf, ±0, ±1).
// The pipelined row kernel keeps a small epilogue input's words across a block's rows when its
// rows are all one row (a norm's weight), and loads them again for each row otherwise. Rows
// enough for every block to take several (1200 rows of 4096), kept axes that do not merge, an
// epilogue input of full rows, and a weight that differs along one kept axis only.
TEST(CudaFusedReduce, EpilogueInputsKeptAcrossRowsCompiledEqualsEagerBitForBit) {
  SMELT_REQUIRE_GPU();
  const Fn weighted = [](const std::vector<Array>& in) { return std::vector<Array>{rms_norm(in[0], in[1], 1e-6)}; };
  const Fn scaled = [](const std::vector<Array>& in) {
    Array ms = mean(multiply(in[0], in[0]), {-1}, true);
    return std::vector<Array>{multiply(multiply(in[0], rsqrt(add(ms, 1e-6f))), in[1])};
  };
  for (Dtype dt : {bfloat16, float16}) {
    const Shape s{2, 600, 4096};
    const Array x = on_gpu(astype(Array(random_values(2 * 600 * 4096, -3.0, 3.0, 11), s), dt));
    const Array w = on_gpu(astype(Array(random_values(4096, 0.5, 1.5, 12), Shape{4096}), dt));
    const Array w_per_batch = on_gpu(astype(Array(random_values(2 * 4096, 0.5, 1.5, 13), Shape{2, 1, 4096}), dt));
    const Array z = on_gpu(astype(Array(random_values(2 * 600 * 4096, -2.0, 2.0, 14), s), dt));
    expect_compiled_equals_eager("rms_norm", weighted, {x, w}, std::string(dtype_name(dt)) + " one weight");
    expect_compiled_equals_eager("scaled", scaled, {x, w}, std::string(dtype_name(dt)) + " one weight");
    expect_compiled_equals_eager("scaled", scaled, {x, w_per_batch}, std::string(dtype_name(dt)) + " a weight per batch");
    expect_compiled_equals_eager("scaled", scaled, {x, z}, std::string(dtype_name(dt)) + " full rows");
    // A strided view of x: its kept axes do not merge (the weight's kept strides stay zero).
    const Array xs = slice(on_gpu(astype(Array(random_values(2 * 601 * 4096, -3.0, 3.0, 15), Shape{2, 601, 4096}), dt)), {0, 1, 0},
                           {2, 601, 4096});
    expect_compiled_equals_eager("rms_norm", weighted, {xs, w}, std::string(dtype_name(dt)) + " sliced rows");
  }
}
TEST(CudaFusedReduce, SpecialValuesCompiledEqualsEagerBitForBit) {
  SMELT_REQUIRE_GPU();
  for (const auto& [name, fn] : fns())
    for (Dtype dt : {float32, bfloat16})
      for (const Shape& s : std::vector<Shape>{{33, 100}, {9, 4096}, {3, 32768}}) {
        std::vector<Array> in{on_gpu(special_array(s, dt, -3.0, 3.0, 1)),
                              on_gpu(astype(Array(random_values(s.back(), 0.5, 1.5, 2), Shape{s.back()}), dt)),
                              on_gpu(special_array(s, dt, -3.0, 3.0, 3))};
        expect_compiled_equals_eager(name, fn, in, dtype_name(dt) + shape_to_string(s));
      }
}

// Rows read through strides (a transposed input: the row cache's element-by-element copy and
// the passes' element-by-element reads) and rows whose start is not 16-byte aligned (a slice
// one element in: no vector moves from global memory). The read paths are those of every
// program; four of fns() cover their prologues and epilogues (one and two passes, a weight, a
// second input and a second output) at half the NVRTC builds (each case is a program of its own:
// the eight took most of this binary's 9 minutes on an empty kernel cache).
TEST(CudaFusedReduce, StridedAndUnalignedRowsCompiledEqualsEagerBitForBit) {
  SMELT_REQUIRE_GPU();
  const std::vector<std::string> picked = {"softmax", "rms_norm", "layer_norm_residual", "var"};
  for (Dtype dt : {float32, bfloat16})
    for (const Shape& s : std::vector<Shape>{{100, 33}, {1531, 7}, {4096, 3}, {32768, 2}}) {
      const Array x = on_gpu(rows_with_specials(s, dt, 8));
      const Shape t{s[1], s[0]};
      const std::vector<std::pair<std::string, Array>> views = {
          {"transposed", transpose(x)},
          {"sliced", slice(on_gpu(rows_with_specials(t, dt, 9)), {0, 1}, {t[0], t[1]})}};
      for (const auto& [view, a] : views)
        for (const auto& [name, fn] : fns()) {
          if (std::find(picked.begin(), picked.end(), name) == picked.end()) continue;
          const Array w = on_gpu(astype(Array(random_values(a.shape()[1], 0.5, 1.5, 2), Shape{a.shape()[1]}), dt));
          expect_compiled_equals_eager(name, fn, {a, w, a}, view + " " + dtype_name(dt) + shape_to_string(s));
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
      for (const Shape& s : std::vector<Shape>{{33, 100}, {9, 4096}, {3, 32768}, {3, 200000}}) {
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

// Rows (axis 1: four vectors in flight), columns (axis 0: 16 bytes of neighbouring columns a
// thread when the inner length allows, else one; split into groups for few outputs). Sums of m
// values in [-1, 1) err by at most about log2(m) + 2 roundings of m in the accumulator
// (float32); 16-bit results round once more at 2^-8 relative. max is exact in any order.
TEST(CudaFusedReduce, EagerReductionsOverAnyAxisMatchTheCpu) {
  SMELT_REQUIRE_GPU();
  for (Dtype dt : {float32, bfloat16, float16})
    for (const Shape& s : std::vector<Shape>{{2048, 1024}, {2048, 1001}, {100000, 16}, {64, 3}})
      for (int axis : {0, 1}) {
        Array x = random_array(s, dt, -1.0, 1.0, 7);
        Array g = sum(on_gpu(x), {axis});
        Array c = sum(x, {axis});
        EXPECT_TRUE(all_close(on_cpu(g), as_doubles(c), dt == float32 ? 1e-4 : 1e-2, dt == float32 ? 1e-3 : 1e-1))
            << dtype_name(dt) << shape_to_string(s) << " axis " << axis;
        EXPECT_TRUE(bit_equal(on_cpu(max(on_gpu(x), {axis})), max(x, {axis})))
            << "max " << dtype_name(dt) << shape_to_string(s) << " axis " << axis;
      }
  // Columns behind kept outer axes: [outer, m, inner] with m reduced.
  for (Dtype dt : {float32, bfloat16}) {
    Array x = random_array({3, 5000, 24}, dt, -1.0, 1.0, 8);
    EXPECT_TRUE(all_close(on_cpu(sum(on_gpu(x), {1})), as_doubles(sum(x, {1})), dt == float32 ? 1e-4 : 1e-2,
                          dt == float32 ? 1e-3 : 1e-1))
        << dtype_name(dt);
    EXPECT_TRUE(bit_equal(on_cpu(min(on_gpu(x), {1})), min(x, {1}))) << dtype_name(dt);
  }
}

}  // namespace
}  // namespace smelt::test
