// The matmul epilogue cases of tests/compile/matmul_epilogue_cases.h on the GPU: cuBLASLt writes
// the product once, the bias/activation/residual/cast chain is one fused CUDA kernel, and compiled
// equals eager bit for bit on the device.
#include "tests/compile/matmul_epilogue_cases.h"

namespace smelt {
namespace {

TEST(CudaMatmulEpilogue, ChainIsOneKernelAfterTheMatmul) {
  // (cuda_test_utils.h and compile_helpers.h both define all_dtypes: the check is spelled out.)
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU on this machine";
  test::matmul_epilogue::check_epilogues(Device::cuda(0));
}

}  // namespace
}  // namespace smelt
