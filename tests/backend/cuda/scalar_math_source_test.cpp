// The shared scalar math (scalar_math.h, reduce_math.h) compiles under NVRTC for sm_90 for every
// op and dtype the CUDA backend accepts (no GPU needed), and the device preamble is that text.
#include <gtest/gtest.h>

#include "backend/cuda/nvrtc_test_utils.h"

#include <sstream>
#include <string>
#include <vector>

#if SMELT_HAS_CUDA
#include "src/backend/cuda/compiler.h"
#include "src/backend/cuda/elementwise_sources.h"
#include "src/codegen/cuda_emitter.h"
#include "src/codegen/embedded_sources.h"
#include "src/codegen/gpu_row_order.h"
#endif

#include "test_utils.h"

namespace smelt::test {
namespace {

#if SMELT_HAS_CUDA
constexpr Dtype kAllDtypes[] = {bool_,  int8,   int16,    int32,    int64,   uint8,  uint16,
                                uint32, uint64, float16, bfloat16, float32, float64};

/// One kernel per dtype calling every unary and binary scalar function the backend accepts for
/// it (the calls CUDA's element-wise kernels make), so each template is instantiated.
std::string all_ops_kernel(Dtype dt, int* calls) {
  const std::string t = codegen::cuda_type_name(dt);
  std::string body = "extern \"C\" __global__ void k(" + t + "* x, bool* flags) {\n";
  int n = 0;
#define X(name)                                                                                             \
  if (cuda::unary_has_kernel(UnaryOp::name, dt)) {                                                          \
    const std::string call = std::string("smelt::scalar::") + scalar_fn_name(UnaryOp::name) + "<" + t +     \
                             ">(x[" + std::to_string(n) + "])";                                             \
    body += unary_op_returns_bool(UnaryOp::name) ? "  flags[" + std::to_string(n) + "] = " + call + ";\n"   \
                                                 : "  x[" + std::to_string(n) + "] = " + call + ";\n";      \
    ++n;                                                                                                    \
  }
  SMELT_UNARY_OPS(X)
#undef X
#define X(name)                                                                                             \
  if (cuda::binary_has_kernel(BinaryOp::name, dt)) {                                                        \
    const std::string call = std::string("smelt::scalar::") + scalar_fn_name(BinaryOp::name) + "<" + t +    \
                             ">(x[" + std::to_string(n) + "], x[" + std::to_string(n + 1) + "])";           \
    body += binary_op_returns_bool(BinaryOp::name) ? "  flags[" + std::to_string(n) + "] = " + call + ";\n" \
                                                   : "  x[" + std::to_string(n) + "] = " + call + ";\n";    \
    ++n;                                                                                                    \
  }
  SMELT_BINARY_OPS(X)
#undef X
  *calls = n;
  return body + "}\n";
}
#endif

TEST(CudaScalarMathSource, EveryAcceptedOpCompilesForEveryDtype) {
#if SMELT_HAS_CUDA
  int total = 0;
  for (Dtype dt : kAllDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    int calls = 0;
    expect_compiles(all_ops_kernel(dt, &calls), std::string("scalar math ") + dtype_name(dt));
    EXPECT_GT(calls, 0);
    total += calls;
  }
  // The float ops: 37 unary (all but bitwise_not) and 20 binary (all but the bitwise ones and
  // the shifts) functions, each compiled above for float16, bfloat16, float32 and float64.
  int float_ops = 0;
#define X(name) float_ops += cuda::unary_has_kernel(UnaryOp::name, float16) ? 1 : 0;
  SMELT_UNARY_OPS(X)
#undef X
#define X(name) float_ops += cuda::binary_has_kernel(BinaryOp::name, float16) ? 1 : 0;
  SMELT_BINARY_OPS(X)
#undef X
  EXPECT_EQ(float_ops, 57);
  EXPECT_GT(total, 13 * 20);
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaScalarMathSource, EveryReductionOperatorCompilesForEveryDtype) {
#if SMELT_HAS_CUDA
  for (Dtype dt : kAllDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    const std::string t = codegen::cuda_type_name(dt);
    std::string body = "extern \"C\" __global__ void k(const " + t + "* x, unsigned char* out) {\n";
    int i = 0;
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::All, ReduceOp::Any}) {
      const std::string r = "R" + std::to_string(i);
      body += "  typedef " + codegen::gpu_red_type(op, dt) + " " + r + ";\n  { " + r + "::Out o = " + r + "::finish(" +
              r + "::step(" + r + "::init(), " + r + "::load(x[" + std::to_string(i) + "]))); memcpy(out + " +
              std::to_string(8 * i) + ", &o, sizeof o); }\n";
      ++i;
    }
    expect_compiles(body + "}\n", std::string("reductions ") + dtype_name(dt));
  }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaScalarMathSource, ReductionsAreNamedByTheirEnumerator) {
#if SMELT_HAS_CUDA
  EXPECT_EQ(codegen::gpu_red_type(ReduceOp::Max, float32), "smelt::scalar::Red<smelt::ReduceOp::Max, float>");
  // Mean reduces as Sum (the kernel divides).
  EXPECT_EQ(codegen::gpu_red_type(ReduceOp::Mean, bfloat16), "smelt::scalar::Red<smelt::ReduceOp::Sum, bf16>");
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaScalarMathSource, ThePreambleIsTheCpuHeadersText) {
#if SMELT_HAS_CUDA
  const std::string preamble = cuda::device_preamble();
  const std::string shared = codegen::embedded_cuda_scalar_math();
  EXPECT_NE(preamble.find(shared), std::string::npos);
  // The headers the CPU kernels include, not a port: their functions and their reduction struct.
  for (const char* piece : {"// ---- scalar_math.h", "// ---- reduce_math.h", "inline T floor_divide(T a, T b)",
                            "struct Red {", "namespace smelt::scalar"})
    EXPECT_NE(shared.find(piece), std::string::npos) << piece;
  // NVRTC has no standard library: every #include that survives is the host's, inside an
  // `#ifndef __CUDACC_RTC__` block (or device_std.h's block for device code compiled as host
  // C++, SMELT_DEVICE_STD_FROM_HOST). And no reduction operator is numbered.
  std::istringstream lines(shared);
  std::vector<bool> host_only;  // per open #if: whether NVRTC skips its current branch
  int includes = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("#ifndef __CUDACC_RTC__", 0) == 0 || line.rfind("#ifdef SMELT_DEVICE_STD_FROM_HOST", 0) == 0)
      host_only.push_back(true);
    else if (line.rfind("#ifdef __CUDACC_RTC__", 0) == 0) host_only.push_back(false);
    else if (line.rfind("#if", 0) == 0) host_only.push_back(false);
    else if (line.rfind("#else", 0) == 0 && !host_only.empty()) host_only.back() = !host_only.back();
    else if (line.rfind("#endif", 0) == 0 && !host_only.empty()) host_only.pop_back();
    else if (line.rfind("#include", 0) == 0) {
      ++includes;
      bool skipped = false;
      for (bool h : host_only) skipped = skipped || h;
      EXPECT_TRUE(skipped) << line;
    }
  }
  EXPECT_GT(includes, 0);  // the headers' own, for the host
  EXPECT_EQ(preamble.find("template <int OP"), std::string::npos);
  EXPECT_EQ(preamble.find("op_add"), std::string::npos);
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

}  // namespace
}  // namespace smelt::test
