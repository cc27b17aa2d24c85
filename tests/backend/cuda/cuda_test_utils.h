// Helpers of the CUDA tests: skipping without a GPU, inputs with special values, and comparing a
// GPU result with the CPU's bit for bit or within an ulp bound.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "op_cases.h"
#include "smelt/smelt.h"
#include "test_utils.h"

namespace smelt::test {

/// Skips the test on machines without a GPU (CI): the CUDA tests run for real on the device.
#define SMELT_REQUIRE_GPU() \
  if (!::smelt::cuda_available()) GTEST_SKIP() << "no CUDA GPU on this machine"

/// Compiles synchronously (SMELT_TIERED=0, unless the caller set it) before any test runs, without
/// kernel prebuilds (SMELT_CUDA_PREBUILD=0, likewise): a GPU
/// test of compiled code must run the fused kernels, not the unfused tier that tiered execution
/// serves while the kernels build in the background (the same bits, so such a test would pass
/// without ever launching a fused kernel).
class SynchronousCompileEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* tiered = std::getenv("SMELT_TIERED");
    if (!tiered || !*tiered) ::setenv("SMELT_TIERED", "0", 1);
    // Kernels build where they launch, so that tests counting builds or loaded modules see only
    // the kernels they launch; kernel_prebuild_test turns prebuilds on.
    const char* prebuild = std::getenv("SMELT_CUDA_PREBUILD");
    if (!prebuild || !*prebuild) ::setenv("SMELT_CUDA_PREBUILD", "0", 1);
  }
};

inline ::testing::Environment* const synchronous_compile_environment =
    ::testing::AddGlobalTestEnvironment(new SynchronousCompileEnvironment);

inline Device gpu() { return Device::cuda(0); }
inline Array on_gpu(const Array& a) { return to_device(a, gpu()); }
inline Array on_cpu(const Array& a) { return to_device(a, Device::cpu()); }

inline const std::vector<Dtype>& all_dtypes() {
  static const std::vector<Dtype> d = {bool_,  int8,    int16,    int32,   int64,   uint8,  uint16,
                                       uint32, uint64,  float16,  bfloat16, float32, float64};
  return d;
}

/// Random values of `dtype` in [lo, hi); floats get NaN, ±inf, ±0 sprinkled in (every 7th
/// element from position 3) so that special values go through every kernel.
inline Array special_array(const Shape& shape, Dtype dtype, double lo = -3.0, double hi = 3.0, uint32_t seed = 1) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  auto v = random_values(static_cast<size_t>(n), lo, hi, seed);
  if (is_floating(dtype)) {
    const double specials[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                               -std::numeric_limits<double>::infinity(), 0.0, -0.0, 1.0, -1.0};
    for (size_t i = 3, j = 0; i < v.size(); i += 7, ++j) v[i] = specials[j % 7];
  } else {
    for (auto& x : v) x = std::floor(x);
  }
  Array a(v, shape);
  Array r = astype(a, dtype);
  r.eval();
  return r;
}

/// The GPU result equals the CPU's: same shape and dtype; integers and bool bit for bit; floats
/// within `ulps` (0: bit for bit; NaN matches any NaN, since NaN payloads differ between the CPU
/// and the GPU and NumPy does not define them).
inline ::testing::AssertionResult same_as_cpu(const Array& gpu_result, const Array& cpu_result, int64_t ulps = 0) {
  if (gpu_result.device() != gpu())
    return ::testing::AssertionFailure() << "the result lives on " << gpu_result.device().str() << ", not the GPU";
  if (gpu_result.shape() != cpu_result.shape())
    return ::testing::AssertionFailure() << "shape " << shape_to_string(gpu_result.shape()) << " != CPU's "
                                         << shape_to_string(cpu_result.shape());
  if (gpu_result.dtype() != cpu_result.dtype())
    return ::testing::AssertionFailure() << "dtype " << dtype_name(gpu_result.dtype()) << " != CPU's "
                                         << dtype_name(cpu_result.dtype());
  const auto g = raw_bytes(on_cpu(gpu_result)), c = raw_bytes(cpu_result);
  const Dtype dt = cpu_result.dtype();
  const size_t isz = size_of(dt);
  for (size_t i = 0; i * isz < c.size(); ++i) {
    if (same_within_ulps(g.data() + i * isz, c.data() + i * isz, dt, ulps)) continue;
    return ::testing::AssertionFailure() << "element " << i << " differs by more than " << ulps << " ulps: GPU "
                                         << as_doubles(on_cpu(gpu_result))[i] << ", CPU " << as_doubles(cpu_result)[i];
  }
  return ::testing::AssertionSuccess();
}


/// |got - ref| <= rel * bound + rel * 1e-4 per element, where `bound` is the same convolution of
/// |x| and |w| in float64 (the sum of |w|*|x| over the window); NaN must match NaN and an
/// infinity the same infinity. `got` may live on either device; shapes and dtypes must match.
inline ::testing::AssertionResult within_window_bound(const Array& got, const Array& ref, const Array& bound,
                                                      double rel) {
  if (got.shape() != ref.shape())
    return ::testing::AssertionFailure() << "shape " << shape_to_string(got.shape()) << " != reference's "
                                         << shape_to_string(ref.shape());
  if (got.dtype() != ref.dtype()) return ::testing::AssertionFailure() << "dtype differs";
  const auto g = as_doubles(on_cpu(got)), r = as_doubles(ref), b = as_doubles(bound);
  for (size_t i = 0; i < r.size(); ++i) {
    if (std::isnan(r[i]) || std::isnan(g[i])) {
      if (std::isnan(r[i]) != std::isnan(g[i]))
        return ::testing::AssertionFailure() << "element " << i << ": got " << g[i] << ", reference " << r[i];
      continue;
    }
    if (std::isinf(r[i]) || std::isinf(g[i])) {
      if (g[i] != r[i])
        return ::testing::AssertionFailure() << "element " << i << ": got " << g[i] << ", reference " << r[i];
      continue;
    }
    if (std::fabs(g[i] - r[i]) > rel * b[i] + rel * 1e-4)
      return ::testing::AssertionFailure() << "element " << i << ": got " << g[i] << ", reference " << r[i]
                                           << ", allowed " << rel * b[i];
  }
  return ::testing::AssertionSuccess();
}

}  // namespace smelt::test
