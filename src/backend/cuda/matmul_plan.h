// How a batched matmul maps onto cuBLASLt calls without copies: transpose flags and strided batches.
//
// Pure functions of shapes and strides (no CUDA calls), so they are tested without a GPU.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "smelt/array.h"

namespace smelt::cuda {

/// How cuBLASLt reads a rows x cols matrix stored with element strides (rs, cs): as it is
/// (row-major, `ld` = rs) or as the transpose of a row-major matrix (`trans`, `ld` = cs). `ok` is
/// false for any other layout (both strides past 1): such an operand needs a copy.
struct GemmOperand {
  bool ok = false;
  bool trans = false;
  int64_t ld = 0;
};
GemmOperand gemm_operand(int64_t rs, int64_t cs, int64_t rows, int64_t cols);

/// The batch of a product as strided-batched calls: each call multiplies `count` matrices that
/// lie `stride` elements apart in a, b and the output (0: an operand broadcast along the batch,
/// read in place), and `offsets` lists the calls by the element offsets of their first matrices.
/// One batch axis (after merging the axes every operand lets merge) is the strided batch, the
/// longest; the others are a loop of calls, so that broadcasting along any axes costs no copy.
struct BatchPlan {
  int64_t count = 1;
  std::array<int64_t, 3> stride{0, 0, 0};
  std::vector<std::array<int64_t, 3>> offsets{{0, 0, 0}};
};

/// `batch` is the broadcast batch shape; `a`, `b`, `out` the batch strides (elements) of the
/// operands (the output's are row-major).
BatchPlan plan_batches(const Shape& batch, const Strides& a, const Strides& b, const Strides& out);

/// The largest power of two up to 256 that divides every value (0 counts as aligned to 256):
/// what cuBLASLt may assume of its pointers and batch strides (in bytes).
uint32_t common_alignment(const std::vector<uint64_t>& values);

}  // namespace smelt::cuda
