// What compile makes of a matmul and the element-wise chain after it (bias, activation, residual,
// output cast) on the CPU: the matmul writes its result once and the whole chain is one fused
// kernel that reads it once; a transpose feeding the matmul stays a view (a GEMM transpose flag).
// Compiled results equal eager ones bit for bit, NaN and infinities included. The GPU runs the
// same cases in tests/backend/cuda/matmul_epilogue_test.cpp.
#include "tests/compile/matmul_epilogue_cases.h"

namespace smelt {
namespace {

TEST(MatmulFusion, EpilogueChainIsOneKernelAfterTheMatmul) { test::matmul_epilogue::check_epilogues(Device::cpu()); }

// The pre-activation also returned (as a training step keeps it for the backward pass): still
// one kernel, with two outputs, after the matmul.
TEST(MatmulFusion, PreActivationAlsoReturnedIsASecondKernelOutput) {
  using test::matmul_epilogue::rand;
  test::Dumps dumps;
  test::matmul_epilogue::Fn fn = [](const std::vector<Array>& in) {
    Array h = matmul(in[0], in[1]) + in[2];
    return std::vector<Array>{gelu(h, true), h};
  };
  auto f = compile_flat(fn, dumps.options());
  const std::vector<Array> in{rand({16, 32}, 40), rand({32, 24}, 41), rand({24}, 42)};
  auto got = f(in);
  auto want = fn(in);
  for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(test::bit_equal(got[i], want[i])) << i;
  const std::string tape = dumps.final_tape();
  EXPECT_EQ(test::Dumps::count(tape, "Matmul"), 1) << tape;
  EXPECT_EQ(test::Dumps::count(tape, "Fused"), 1) << tape;
  EXPECT_EQ(test::Dumps::count(tape, "Binary"), 0) << tape;
}

// Two layers: each matmul gets its own epilogue kernel; the second matmul reads the first
// kernel's output.
TEST(MatmulFusion, TwoLayersAreTwoMatmulsAndTwoKernels) {
  using test::matmul_epilogue::rand;
  test::Dumps dumps;
  test::matmul_epilogue::Fn fn = [](const std::vector<Array>& in) {
    Array h = relu(matmul(in[0], in[1]) + in[2]);
    return std::vector<Array>{gelu(matmul(h, in[3]) + in[4]) + in[0]};
  };
  auto f = compile_flat(fn, dumps.options());
  const std::vector<Array> in{rand({16, 32}, 43), rand({32, 24}, 44), rand({24}, 45), rand({24, 32}, 46),
                              rand({32}, 47)};
  EXPECT_TRUE(test::bit_equal(f(in)[0], fn(in)[0]));
  const std::string tape = dumps.final_tape();
  EXPECT_EQ(test::Dumps::count(tape, "Matmul"), 2) << tape;
  EXPECT_EQ(test::Dumps::count(tape, "Fused"), 2) << tape;
  EXPECT_EQ(test::Dumps::count(tape, "Binary") + test::Dumps::count(tape, "Unary"), 0) << tape;
}

}  // namespace
}  // namespace smelt
