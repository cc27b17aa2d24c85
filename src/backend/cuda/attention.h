// The CUDA kernel of the Attention primitive: flash attention where it applies, the composed path elsewhere.
#pragma once

#include <vector>

#include "smelt/array.h"
#include "src/primitives/primitive.h"

namespace smelt::cuda {

void eval_attention(const AttentionParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs);

/// Builds, on a prebuild thread, the flash-attention kernel eval_attention launches for queries
/// of shape `q` ([B, H, S, D]) and `dtype` and values of shape `v` on GPU `device` (nothing when
/// it takes the composed path). See prebuild_fused.
void prebuild_attention(const AttentionParams& p, const Shape& q, Dtype dtype, const Shape& v, int device);

}  // namespace smelt::cuda
