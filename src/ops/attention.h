// The composed attention path (matmul, scale, mask, softmax, matmul) shared by the kernels and the autodiff rules.
#pragma once

#include "smelt/array.h"
#include "src/primitives/primitive.h"

namespace smelt::detail {

/// The float type attention accumulates in: float64 for float64 inputs, else float32.
Dtype attention_compute_dtype(Dtype dtype);

/// The Attention primitive's value built from ordinary ops, on the inputs' device: q [B, Hq, S, D],
/// k [B, Hkv, T, D], v [B, Hkv, T, Dv], mask [B, Hq, S, T] (empty unless p.mask says) -> [B, Hq, S, Dv]
/// in q's dtype. Groups of query heads read their key/value head through a reshape of q (no
/// repeat of k or v). Fully masked query rows give zeros.
Array attention_composed(const Array& q, const Array& k, const Array& v, const Array& mask, const AttentionParams& p);

/// The scale the primitive applies: p.scale, else 1/sqrt(head_dim).
double attention_scale(const AttentionParams& p, int64_t head_dim);

}  // namespace smelt::detail
