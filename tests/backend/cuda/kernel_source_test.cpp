// Kernel sources compile with NVRTC for sm_90 on any machine with the toolkit, GPU or not (CI):
// a typo in a generated kernel fails here instead of on the first GPU run.
#include <gtest/gtest.h>

#include <string>

#if SMELT_HAS_CUDA
#include "src/backend/cuda/compiler.h"
#include "smelt/errors.h"
#endif

#include "test_utils.h"

namespace smelt::test {
namespace {

#if SMELT_HAS_CUDA
/// Compiles `body` after the device preamble for sm_90; skips when NVRTC cannot be opened.
void expect_compiles(const std::string& body) {
  try {
    std::string cubin = cuda::nvrtc_compile(90, std::string(cuda::device_preamble()) + body, true, "test");
    EXPECT_FALSE(cubin.empty());
  } catch (const DeviceError& e) {
    if (std::string(e.what()).find("NVRTC could not compile") != std::string::npos) FAIL() << e.what();
    GTEST_SKIP() << "NVRTC is not usable here: " << e.what();
  }
}
#endif

TEST(CudaKernelSource, PreambleAndAKernelCompileForSm90) {
#if SMELT_HAS_CUDA
  expect_compiles("extern \"C\" __global__ void k(float* o, const float* a, long long n) {\n"
                  "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
                  "  if (i < n) o[i] = a[i] * 2.0f;\n}\n");
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaKernelSource, ASyntaxErrorIsReportedWithNvrtcsLog) {
#if SMELT_HAS_CUDA
  try {
    cuda::nvrtc_compile(90, std::string(cuda::device_preamble()) + "extern \"C\" __global__ void k() { oops; }\n",
                        true, "my_op");
    FAIL() << "expected a DeviceError";
  } catch (const DeviceError& e) {
    const std::string m = e.what();
    if (m.find("NVRTC could not compile") == std::string::npos) GTEST_SKIP() << "NVRTC is not usable here: " << m;
    EXPECT_NE(m.find("my_op: NVRTC could not compile the kernel"), std::string::npos) << m;
    EXPECT_NE(m.find("oops"), std::string::npos) << m;
  }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

}  // namespace
}  // namespace smelt::test
