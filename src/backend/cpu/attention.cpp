// The CPU kernel of the Attention primitive: the composed path (matmul, scale, mask, softmax, matmul).
#include "src/backend/cpu/kernels.h"
#include "src/core/node.h"
#include "src/ops/attention.h"

namespace smelt::cpu {

void eval_Attention(const AttentionParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  // The CPU's reference is the composition of its own kernels (its matmul is blocked and its
  // reductions follow the fixed order), so the result is the one the ops give step by step.
  Array r = detail::attention_composed(inputs[0], inputs[1], inputs[2], inputs.size() > 3 ? inputs[3] : Array(), p);
  r.eval();
  auto& o = outputs[0].node();
  const auto& n = r.node();
  o.buffer = n.buffer;
  o.strides = n.strides;
  o.offset = n.offset;
}

}  // namespace smelt::cpu
