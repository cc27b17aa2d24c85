// What compile makes of a matmul and the element-wise chain after it (bias, activation, residual,
// output cast) on the CPU: the matmul writes its result once and the whole chain is one fused
// kernel that reads it once; a transpose feeding the matmul stays a view (a GEMM transpose flag).
// Compiled results equal eager ones bit for bit, NaN and infinities included. The GPU runs the
// same cases in tests/backend/cuda/matmul_epilogue_test.cpp.
#include "tests/compile/matmul_epilogue_cases.h"

namespace smelt {
namespace {

TEST(MatmulFusion, EpilogueChainIsOneKernelAfterTheMatmul) { test::matmul_epilogue::check_epilogues(Device::cpu()); }

}  // namespace
}  // namespace smelt
