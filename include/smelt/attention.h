// scaled_dot_product_attention: softmax(q·kᵀ·scale + mask)·v as one op, with causal masks and grouped-query attention.
#pragma once

#include <cstdint>
#include <optional>

#include "smelt/array.h"

namespace smelt {

/// Which keys a query may see when attention is causal (PyTorch's CausalVariant names).
/// With S queries and T keys, query i sees key j when:
enum class CausalMask : uint8_t {
  None,        // every key (only the mask, if any, restricts)
  UpperLeft,   // j <= i: the first query sees the first key (PyTorch's is_causal, ONNX without a cache)
  LowerRight,  // j <= i + (T - S): the last query sees every key (a KV cache: queries are the newest positions)
};

struct AttentionOptions {
  /// Optional mask broadcastable to [batch, q_heads, S, T]: boolean (true = attend) or floating
  /// point (added to the scaled scores; -inf masks). Combined with `causal` when both are given.
  Array mask;
  CausalMask causal = CausalMask::None;
  /// Multiplies q·kᵀ; default 1/sqrt(head_dim) (of the arrays the op runs on, so a shapeless
  /// replay follows a new head_dim).
  std::optional<double> scale;
  /// Expected number of key/value heads (0: k's). q's heads must be a multiple of it; each group
  /// of q_heads / num_kv_heads consecutive query heads reads one key/value head, without copies.
  int64_t num_kv_heads = 0;
  /// > 0: scores become softcap * tanh(scores / softcap) before the mask (Gemma 2).
  double softcap = 0.0;
};

/// Attention over q [batch, q_heads, S, head_dim], k [batch, kv_heads, T, head_dim] and
/// v [batch, kv_heads, T, v_dim], giving [batch, q_heads, S, v_dim] in q's dtype:
/// softmax(softcap(q·kᵀ·scale) + mask)·v, with scores, softmax and the weighted sum accumulated
/// in float32 (float64 for float64 inputs). q, k and v share one floating dtype. A query row whose
/// keys are all masked gives zeros (as ONNX Attention does), not NaN. Other layouts: [batch, S,
/// heads, head_dim] becomes this one with swapaxes(x, 1, 2), a view; a missing batch or heads
/// axis with expand_dims. One primitive: compile traces, caches and replays it; the GPU runs a
/// flash-attention kernel for head_dim 64 and 128 (f16, bf16, f32), every other case the
/// composed path (matmul, scale, mask, softmax, matmul); grad, vjp and jvp go through the composed
/// path. docs/attention.md.
Array scaled_dot_product_attention(const Array& q, const Array& k, const Array& v, const AttentionOptions& options = {});

}  // namespace smelt
