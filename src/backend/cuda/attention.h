// The CUDA kernel of the Attention primitive: flash attention where it applies, the composed path elsewhere.
#pragma once

#include <vector>

#include "smelt/array.h"
#include "src/primitives/primitive.h"

namespace smelt::cuda {

void eval_attention(const AttentionParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs);

}  // namespace smelt::cuda
