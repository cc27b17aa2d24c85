// CUDA kernels are keyed by the typed params their source is generated from: each field changes
// the key, equal params give equal keys and sources (no GPU needed).
#include <gtest/gtest.h>

#include <memory>

#include "codegen/fused_program_cases.h"

#if SMELT_HAS_CUDA
#include "src/backend/cuda/elementwise_sources.h"
#include "src/backend/cuda/reduce_sources.h"
#include "src/codegen/cuda_emitter.h"
#endif

namespace smelt::test {
namespace {

#if SMELT_HAS_CUDA
codegen::SharedValue<codegen::FusedProgram> shared(codegen::FusedProgram p) {
  return {std::make_shared<const codegen::FusedProgram>(std::move(p))};
}

/// An element-wise program: exp(in0) * in1 (float32).
codegen::FusedProgram ew_program() {
  using codegen::Instr;
  using codegen::InstrKind;
  codegen::FusedProgram p;
  p.input_dtypes = {float32, float32};
  Instr e{InstrKind::Unary, float32, {0}};
  e.unary = UnaryOp::Exp;
  Instr m{InstrKind::Binary, float32, {2, 1}};
  m.binary = BinaryOp::Multiply;
  p.instrs = {Instr{InstrKind::Input, float32, {}, 0}, Instr{InstrKind::Input, float32, {}, 1}, e, m};
  p.outputs = {3};
  return p;
}
#endif

TEST(CudaKernelParams, FusedKernelsDifferInEveryField) {
#if SMELT_HAS_CUDA
  const codegen::CudaFusedKernelParams base{shared(ew_program()), "cc", true};
  codegen::FusedProgram other = ew_program();
  other.instrs[2].unary = UnaryOp::Exp2;
  const std::vector<codegen::CudaFusedKernelParams> variants = {
      {shared(other), "cc", true}, {shared(ew_program()), "cs", true}, {shared(ew_program()), "cc", false}};
  for (const auto& v : variants) {
    SCOPED_TRACE(v.name());
    EXPECT_FALSE(v == base);
    EXPECT_NE(v.hash(), base.hash());
    EXPECT_NE(v.name(), base.name());
    EXPECT_NE(v.source(), base.source());
  }
  // Every field of a row program's IR changes the key too (its reductions included, which the
  // element-wise form of its source does not show).
  const codegen::CudaFusedKernelParams rows{shared(softmax_row_program()), "rows", false};
  for (const auto& [field, p] : program_field_variants(softmax_row_program())) {
    SCOPED_TRACE(field);
    const codegen::CudaFusedKernelParams v{shared(p), "rows", false};
    EXPECT_FALSE(v == rows);
    EXPECT_NE(v.hash(), rows.hash());
  }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaKernelParams, EqualFusedParamsGiveEqualKeysAndSources) {
#if SMELT_HAS_CUDA
  // Two separately built programs with the same content: the same kernel.
  const codegen::CudaFusedKernelParams a{shared(softmax_row_program()), "rows", false};
  const codegen::CudaFusedKernelParams b{shared(softmax_row_program()), "rows", false};
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(a.name(), b.name());
  EXPECT_EQ(a.source(), b.source());
  // A row program's reduction and divisor are in its source, so in its key.
  codegen::FusedProgram ddof = softmax_row_program();
  ddof.instrs[4].ddof = 1;
  const codegen::CudaFusedKernelParams c{shared(ddof), "rows", false};
  EXPECT_FALSE(c == a);
  EXPECT_NE(c.source(), a.source());
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaKernelParams, ElementwiseKernelsDifferInEveryField) {
#if SMELT_HAS_CUDA
  const cuda::EwKernelParams base{"binary_add", "smelt::scalar::add<float>(v0, v1)", {"float", "float"}, "float", "cc"};
  const std::vector<cuda::EwKernelParams> variants = {
      {"binary_sub", base.expr, base.in_types, base.out_type, base.mode},
      {base.label, "smelt::scalar::subtract<float>(v0, v1)", base.in_types, base.out_type, base.mode},
      {base.label, base.expr, {"float", "double"}, base.out_type, base.mode},
      {base.label, base.expr, base.in_types, "double", base.mode},
      {base.label, base.expr, base.in_types, base.out_type, "cs"},
      {base.label, base.expr, base.in_types, base.out_type, "strided"},
      {base.label, base.expr, base.in_types, base.out_type, "rows"}};
  for (const auto& v : variants) {
    SCOPED_TRACE(v.name() + " " + v.expr);
    EXPECT_FALSE(v == base);
    EXPECT_NE(v.hash(), base.hash());
    // The label only names the kernel; every other field is in the source.
    if (v.label == base.label) {
      EXPECT_NE(v.source(), base.source());
    }
  }
  const cuda::EwKernelParams copy{"binary_add", "smelt::scalar::add<float>(v0, v1)", {"float", "float"}, "float", "cc"};
  EXPECT_TRUE(copy == base);
  EXPECT_EQ(copy.hash(), base.hash());
  EXPECT_EQ(copy.name(), base.name());
  EXPECT_EQ(copy.source(), base.source());
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaKernelParams, ReduceKernelsDifferInEveryField) {
#if SMELT_HAS_CUDA
  using Plan = cuda::ReduceKernelParams::Plan;
  const cuda::ReduceKernelParams base{Plan::Columns, ReduceOp::Sum, float32, float32, true, 4};
  const std::vector<cuda::ReduceKernelParams> variants = {
      {Plan::Rows, ReduceOp::Sum, float32, float32, true, 4},
      {Plan::Columns, ReduceOp::Max, float32, float32, true, 4},
      {Plan::Columns, ReduceOp::Sum, bfloat16, float32, true, 4},
      {Plan::Columns, ReduceOp::Sum, float32, float64, true, 4},
      {Plan::Columns, ReduceOp::Sum, float32, float32, false, 4},
      {Plan::Columns, ReduceOp::Sum, float32, float32, true, 1}};
  for (const auto& v : variants) {
    SCOPED_TRACE(v.name());
    EXPECT_FALSE(v == base);
    EXPECT_NE(v.hash(), base.hash());
    EXPECT_NE(v.name(), base.name());
    // The key may tell apart more than the source does (a split kernel writes accumulators, so
    // its source does not depend on the output dtype), never less.
    if (v.out == base.out) {
      EXPECT_NE(v.source(), base.source());
    }
  }
  const cuda::ReduceKernelParams copy{Plan::Columns, ReduceOp::Sum, float32, float32, true, 4};
  EXPECT_TRUE(copy == base);
  EXPECT_EQ(copy.hash(), base.hash());
  EXPECT_EQ(copy.name(), "reduce_cols|sum|float32|float32|split|v4");
  EXPECT_EQ(copy.source(), base.source());
  // The warp replay of a row's block: its warps are in the key, the name and the source.
  const cuda::ReduceKernelParams w8{Plan::RowsWarp, ReduceOp::Sum, bfloat16, bfloat16, false, 1, 8};
  const cuda::ReduceKernelParams w16{Plan::RowsWarp, ReduceOp::Sum, bfloat16, bfloat16, false, 1, 16};
  EXPECT_FALSE(w8 == w16);
  EXPECT_NE(w8.hash(), w16.hash());
  EXPECT_EQ(w8.name(), "reduce_rows|sum|bfloat16|bfloat16|warp8");
  EXPECT_NE(w8.source(), w16.source());
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

}  // namespace
}  // namespace smelt::test
