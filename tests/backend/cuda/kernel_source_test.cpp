// Kernel sources compile with NVRTC for sm_90 on any machine with the toolkit, GPU or not (CI):
// a typo in a generated kernel fails here instead of on the first GPU run.
#include <gtest/gtest.h>

#include "backend/cuda/nvrtc_test_utils.h"

#include <string>

#if SMELT_HAS_CUDA
#include "smelt/errors.h"
#include "src/backend/cuda/compiler.h"
#include "src/codegen/cuda_emitter.h"
#endif

#include "test_utils.h"

namespace smelt::test {
namespace {

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


TEST(CudaKernelSource, FusedKernelsCompileInEveryLayout) {
#if SMELT_HAS_CUDA
  for (Dtype narrow : {bfloat16, float16, uint8, bool_, float64, float32}) {
    const codegen::FusedProgram p = mixed_program(narrow);
    for (const std::string layout : {"cc", "cs", "sc", "cr", "rc", "cq", "qr", "cm", "mr", "strided"}) {
      for (bool vectorized : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(narrow)) + " " + layout + (vectorized ? " vectorized" : ""));
        expect_compiles(codegen::emit_cuda_kernel(p, layout, vectorized));
      }
    }
  }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaKernelSource, FloatUnaryOpsCompileForEveryFloatType) {
#if SMELT_HAS_CUDA
  using codegen::Instr;
  using codegen::InstrKind;
  for (Dtype dt : {float16, bfloat16, float32, float64}) {
    codegen::FusedProgram p;
    p.input_dtypes = {dt};
    p.instrs = {Instr{InstrKind::Input, dt, {}, 0}};
    for (UnaryOp op : {UnaryOp::Sigmoid, UnaryOp::Tanh, UnaryOp::Exp, UnaryOp::Log, UnaryOp::Erf}) {
      Instr u{InstrKind::Unary, dt, {static_cast<int>(p.instrs.size()) - 1}};
      u.unary = op;
      p.instrs.push_back(u);
    }
    p.outputs = {static_cast<int>(p.instrs.size()) - 1};
    SCOPED_TRACE(dtype_name(dt));
    expect_compiles(codegen::emit_cuda_kernel(p, "c", true));
  }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

// A program on a 16-bit float runs a NaN-optimistic pass first (f16q/bf16q: the hardware
// conversions alone) and the exact one when an output is NaN: every scalar function must
// instantiate for the fast types too. Float32 programs have no such pass.
TEST(CudaKernelSource, EveryFloatOpCompilesOnTheNanOptimisticPass) {
#if SMELT_HAS_CUDA
  using codegen::Instr;
  using codegen::InstrKind;
  for (Dtype dt : {float16, bfloat16, float32}) {
    codegen::FusedProgram p;
    p.input_dtypes = {dt, dt};
    p.instrs = {Instr{InstrKind::Input, dt, {}, 0}, Instr{InstrKind::Input, dt, {}, 1}};
    auto last = [&] { return static_cast<int>(p.instrs.size()) - 1; };
    for (UnaryOp op : {UnaryOp::Abs, UnaryOp::Negative, UnaryOp::Sign, UnaryOp::Square, UnaryOp::Reciprocal,
                       UnaryOp::Sqrt, UnaryOp::Rsqrt, UnaryOp::Exp, UnaryOp::Exp2, UnaryOp::Expm1, UnaryOp::Log,
                       UnaryOp::Log2, UnaryOp::Log10, UnaryOp::Log1p, UnaryOp::Sin, UnaryOp::Cos, UnaryOp::Tan,
                       UnaryOp::Asin, UnaryOp::Acos, UnaryOp::Atan, UnaryOp::Sinh, UnaryOp::Cosh, UnaryOp::Tanh,
                       UnaryOp::Asinh, UnaryOp::Acosh, UnaryOp::Atanh, UnaryOp::Erf, UnaryOp::ErfInv,
                       UnaryOp::Sigmoid, UnaryOp::Relu, UnaryOp::Floor, UnaryOp::Ceil, UnaryOp::Round}) {
      Instr u{InstrKind::Unary, dt, {last()}};
      u.unary = op;
      p.instrs.push_back(u);
    }
    for (BinaryOp op : {BinaryOp::Add, BinaryOp::Subtract, BinaryOp::Multiply, BinaryOp::Divide, BinaryOp::FloorDivide,
                        BinaryOp::Remainder, BinaryOp::Fmod, BinaryOp::Power, BinaryOp::Maximum, BinaryOp::Minimum,
                        BinaryOp::Atan2}) {
      Instr b{InstrKind::Binary, dt, {last(), 1}};
      b.binary = op;
      p.instrs.push_back(b);
    }
    const int value = last();
    Instr less{InstrKind::Binary, bool_, {value, 0}};
    less.binary = BinaryOp::Less;
    p.instrs.push_back(less);
    Instr nan{InstrKind::Unary, bool_, {value}};
    nan.unary = UnaryOp::IsNan;
    p.instrs.push_back(nan);
    p.instrs.push_back(Instr{InstrKind::Select, dt, {last() - 1, value, 0}});
    const int selected = last();
    p.instrs.push_back(Instr{InstrKind::Cast, int32, {selected}});
    const int as_int = last();
    p.instrs.push_back(Instr{InstrKind::Cast, dt == float16 ? bfloat16 : dt == bfloat16 ? float16 : float64, {selected}});
    p.outputs = {selected, as_int, last(), last() - 3};
    SCOPED_TRACE(dtype_name(dt));
    // One element a thread keeps the compile short (the other layouts emit the same passes
    // around the same body; FusedKernelsCompileInEveryLayout compiles them on 16-bit floats).
    const std::string src = codegen::emit_cuda_kernel(p, "strided", false);
    EXPECT_EQ(src.find("fin0") != std::string::npos, dt != float32);
    if (dt != float32) expect_compiles(src);
  }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaKernelSource, VectorWidthMovesSixteenBytesOfTheNarrowestOperand) {
#if SMELT_HAS_CUDA
  EXPECT_EQ(codegen::cuda_vector_width(mixed_program(bfloat16), "cc"), 8);
  EXPECT_EQ(codegen::cuda_vector_width(mixed_program(uint8), "cc"), 16);
  EXPECT_EQ(codegen::cuda_vector_width(mixed_program(float64), "cc"), 4);  // the float32 operand
  // A broadcast input is read once, not as vectors; the outputs still count.
  EXPECT_EQ(codegen::cuda_vector_width(mixed_program(float64), "sc"), 4);
  EXPECT_EQ(codegen::cuda_vector_width(mixed_program(float32), "strided"), 1);
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaKernelSource, FlatLayoutsOfRowAndColumnBroadcasts) {
#if SMELT_HAS_CUDA
  int64_t inner = 0;
  // A bias [3072] over [4096, 3072]: the suffix repeated over rows.
  EXPECT_EQ(codegen::cuda_flat_layout({4096, 3072}, {0, 1}, inner), 'r');
  EXPECT_EQ(inner, 3072);
  // A weight [8, 64] over [2, 4, 8, 64] (leading broadcast axes, a two-axis suffix).
  EXPECT_EQ(codegen::cuda_flat_layout({2, 4, 8, 64}, {0, 0, 64, 1}, inner), 'r');
  EXPECT_EQ(inner, 512);
  // A per-row value [4096, 1] over [4096, 3072]: the prefix repeated over columns.
  EXPECT_EQ(codegen::cuda_flat_layout({4096, 3072}, {1, 0}, inner), 'q');
  EXPECT_EQ(inner, 3072);
  // [2, 3, 1, 1] over [2, 3, 5, 7]; axes of one element anywhere do not matter.
  EXPECT_EQ(codegen::cuda_flat_layout({2, 3, 1, 5, 7}, {3, 1, 0, 0, 0}, inner), 'q');
  EXPECT_EQ(inner, 35);
  // A per-channel value [64, 1, 1] over [32, 64, 112, 112]: the middle block, broadcast on both
  // sides ('m', element (i / inner) % count), only when the caller takes the count.
  int64_t count = 0;
  EXPECT_EQ(codegen::cuda_flat_layout({32, 64, 112, 112}, {0, 1, 0, 0}, inner, &count), 'm');
  EXPECT_EQ(inner, 112 * 112);
  EXPECT_EQ(count, 64);
  EXPECT_EQ(codegen::cuda_flat_layout({32, 64, 112, 112}, {0, 1, 0, 0}, inner), 0);
  // A two-axis middle block [3, 4] over [2, 3, 4, 5], and unit axes around it.
  EXPECT_EQ(codegen::cuda_flat_layout({2, 1, 3, 4, 1, 5}, {0, 0, 4, 1, 0, 0}, inner, &count), 'm');
  EXPECT_EQ(inner, 5);
  EXPECT_EQ(count, 12);
  // Neither: a middle axis broadcast, a transpose, a column of a wider buffer, a middle block
  // with a gap, and a middle block whose leading axes are not broadcast.
  EXPECT_EQ(codegen::cuda_flat_layout({4, 5, 6}, {6, 0, 1}, inner, &count), 0);
  EXPECT_EQ(codegen::cuda_flat_layout({2, 3, 4, 5}, {0, 8, 1, 0}, inner, &count), 0);
  EXPECT_EQ(codegen::cuda_flat_layout({2, 3, 4, 5}, {1, 2, 0, 0}, inner, &count), 0);
  EXPECT_EQ(codegen::cuda_flat_layout({4, 5, 6}, {6, 0, 1}, inner), 0);
  EXPECT_EQ(codegen::cuda_flat_layout({4, 5}, {1, 4}, inner), 0);
  EXPECT_EQ(codegen::cuda_flat_layout({4, 5}, {2, 0}, inner), 0);
  EXPECT_EQ(codegen::cuda_flat_layout({4, 5}, {0, 2}, inner), 0);
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

}  // namespace
}  // namespace smelt::test
