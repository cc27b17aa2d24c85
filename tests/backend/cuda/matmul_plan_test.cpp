// The cuBLASLt plan of batched matmuls (no GPU needed): transpose flags, strided batches with
// stride 0 for broadcast axes, loops over the axes one stride cannot describe.
#include <gtest/gtest.h>

#include "src/backend/cuda/matmul_plan.h"

namespace smelt::cuda {
namespace {

using Offsets = std::vector<std::array<int64_t, 3>>;

TEST(MatmulPlan, RowMajorAndTransposedOperands) {
  // [3,4] row-major: ld 4; its transpose view [4,3] (strides 1, 4): transposed, ld 4.
  GemmOperand r = gemm_operand(4, 1, 3, 4);
  EXPECT_TRUE(r.ok && !r.trans);
  EXPECT_EQ(r.ld, 4);
  GemmOperand t = gemm_operand(1, 4, 4, 3);
  EXPECT_TRUE(t.ok && t.trans);
  EXPECT_EQ(t.ld, 4);
  // Rows of a wider buffer (a slice of columns): ld is the row stride.
  GemmOperand w = gemm_operand(10, 1, 3, 4);
  EXPECT_TRUE(w.ok && !w.trans);
  EXPECT_EQ(w.ld, 10);
  // One row broadcast (stride 0) is still one row; a vector [1,K] has the smallest ld.
  GemmOperand one = gemm_operand(0, 1, 1, 5);
  EXPECT_TRUE(one.ok && !one.trans);
  EXPECT_EQ(one.ld, 5);
  // Neither layout: both strides past 1 (every other column), a broadcast over rows, flipped rows.
  EXPECT_FALSE(gemm_operand(8, 2, 3, 4).ok);
  EXPECT_FALSE(gemm_operand(0, 1, 3, 4).ok);
  EXPECT_FALSE(gemm_operand(-4, 1, 3, 4).ok);
  // Overlapping rows are not a matrix BLAS may read as one.
  EXPECT_FALSE(gemm_operand(2, 1, 3, 4).ok);
}

TEST(MatmulPlan, ContiguousBatchesMergeIntoOneCall) {
  // a [2,3,M=5,K=7] contiguous, b [2,3,7,4] contiguous, out [2,3,5,4].
  BatchPlan p = plan_batches({2, 3}, {105, 35}, {84, 28}, {60, 20});
  EXPECT_EQ(p.count, 6);
  EXPECT_EQ(p.stride, (std::array<int64_t, 3>{35, 28, 20}));
  EXPECT_EQ(p.offsets, (Offsets{{0, 0, 0}}));
}

TEST(MatmulPlan, OneMatrixBroadcastOverTheBatch) {
  // [B,M,K] @ [K,N]: b has stride 0 along the batch.
  BatchPlan p = plan_batches({4}, {35}, {0}, {20});
  EXPECT_EQ(p.count, 4);
  EXPECT_EQ(p.stride, (std::array<int64_t, 3>{35, 0, 20}));
  EXPECT_EQ(p.offsets.size(), 1u);
}

TEST(MatmulPlan, BroadcastAlongOneOfTwoAxesLoopsOverTheShorter) {
  // a [B=2,H=3,5,7] @ b [1,H=3,7,4]: no single stride describes b over (B,H); H (longer) is the
  // strided batch, B a loop of 2 calls.
  BatchPlan p = plan_batches({2, 3}, {105, 35}, {0, 28}, {60, 20});
  EXPECT_EQ(p.count, 3);
  EXPECT_EQ(p.stride, (std::array<int64_t, 3>{35, 28, 20}));
  EXPECT_EQ(p.offsets, (Offsets{{0, 0, 0}, {105, 0, 60}}));
  // B longer than H: B is the batch (b stride 0), H the loop.
  BatchPlan q = plan_batches({8, 2}, {70, 35}, {0, 28}, {40, 20});
  EXPECT_EQ(q.count, 8);
  EXPECT_EQ(q.stride, (std::array<int64_t, 3>{70, 0, 40}));
  EXPECT_EQ(q.offsets, (Offsets{{0, 0, 0}, {35, 28, 20}}));
}

TEST(MatmulPlan, GroupedQueryAttention) {
  // q [B=2,Hkv=4,G=3,S=5,D=8] @ k^T [2,4,1,8,5]: B and Hkv merge for every operand (8 matrices
  // apart by one stride), G is broadcast in k: the merged axis is the batch, G a loop of 3.
  BatchPlan p = plan_batches({2, 4, 3}, {480, 120, 40}, {160, 40, 0}, {300, 75, 25});
  EXPECT_EQ(p.count, 8);
  EXPECT_EQ(p.stride, (std::array<int64_t, 3>{120, 40, 75}));
  EXPECT_EQ(p.offsets, (Offsets{{0, 0, 0}, {40, 0, 25}, {80, 0, 50}}));
}

TEST(MatmulPlan, SizeOneAxesAndNoBatch) {
  BatchPlan p = plan_batches({1, 1}, {0, 0}, {7, 3}, {20, 20});
  EXPECT_EQ(p.count, 1);
  EXPECT_EQ(p.offsets, (Offsets{{0, 0, 0}}));
  BatchPlan q = plan_batches({}, {}, {}, {});
  EXPECT_EQ(q.count, 1);
  EXPECT_EQ(q.offsets.size(), 1u);
}

TEST(MatmulPlan, FlippedBatchAxesLoop) {
  // a flipped along its batch axis (negative stride): cuBLASLt takes no negative batch stride.
  BatchPlan p = plan_batches({3}, {-35}, {28}, {20});
  EXPECT_EQ(p.count, 1);
  EXPECT_EQ(p.offsets, (Offsets{{0, 0, 0}, {-35, 28, 20}, {-70, 56, 40}}));
}

TEST(MatmulPlan, CommonAlignment) {
  EXPECT_EQ(common_alignment({}), 256u);
  EXPECT_EQ(common_alignment({0, 512}), 256u);
  EXPECT_EQ(common_alignment({1024, 1028}), 4u);
  EXPECT_EQ(common_alignment({256, 2}), 2u);
  EXPECT_EQ(common_alignment({3}), 1u);
}

}  // namespace
}  // namespace smelt::cuda
