// CUDA source of the flash-attention forward kernel (pure: no GPU), compiled for sm_90 by
// tests/backend/cuda/attention_source_test.cpp on machines without a GPU.
#pragma once

#include <cstdint>
#include <string>

#include "smelt/dtype.h"
#include "src/primitives/primitive.h"

namespace smelt::cuda {

/// What one flash-attention kernel is specialised for; its cache key and its source both come
/// from these fields (attention_kernel_key, attention_source).
struct FlashAttentionConfig {
  Dtype dtype;                 // q, k, v and the output: float32, float16 or bfloat16
  int head_dim;                // 64 or 128 (v's head_dim equals it)
  AttentionMaskKind mask;      // the mask input: none, float32 added, or bool (true = attend)
  bool causal;                 // keys past row + causal_offset are masked
  bool softcap;                // scores = softcap * tanh(scores / softcap)
  bool operator==(const FlashAttentionConfig&) const = default;
};

/// True for the dtypes and head sizes the kernel handles (the rest takes the composed path).
bool flash_attention_supports(Dtype dtype, int64_t head_dim, int64_t v_head_dim);

/// Query rows one warp owns (four warps a block): 8 for head_dim 64, 4 for 128, so that the
/// block's tiles fit the 48 KiB of static shared memory.
int flash_attention_rows_per_warp(int head_dim);

/// float16 and bfloat16 run on tensor cores (mma.sync, float32 accumulation, the softmax
/// weights rounded to the input dtype before they multiply v); float32 on float32 FMAs.
bool flash_attention_uses_tensor_cores(const FlashAttentionConfig& c);

/// Query rows one block (128 threads) owns: 64 on tensor cores, else 4 warps of
/// flash_attention_rows_per_warp.
int64_t flash_attention_block_rows(const FlashAttentionConfig& c);

/// Dynamic shared memory a block needs (the tensor-core kernel's q, k and transposed v tiles:
/// 27 KiB for head_dim 64, 52 KiB for 128); 0 for the float32 kernel (static tiles).
uint64_t flash_attention_shared_bytes(const FlashAttentionConfig& c);

std::string attention_kernel_key(const FlashAttentionConfig& c);
std::string attention_source(const FlashAttentionConfig& c);

/// Mirrors the device struct AttnArgs (every field 8 bytes: identical layout on both sides).
struct AttnArgs {
  uint64_t q, k, v, mask, out;
  int64_t batch, q_heads, kv_heads, s, t;
  int64_t qst[3], kst[3], vst[3];  // strides (elements) of batch, head and sequence; head_dim is 1
  int64_t mst[4];                  // the mask's strides over [B, Hq, S, T] (0 where broadcast)
  int64_t causal_offset;           // 0 (upper left) or T - S (lower right)
  int64_t ost[3];                  // the output's strides of batch, head and sequence (head_dim 1)
  double scale, softcap;
};

}  // namespace smelt::cuda
