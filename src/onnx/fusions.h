// Load-time pattern rewrites of exporter subgraphs (GELU, LayerNorm, Conv+BatchNormalization, attention) into fused ops,
// and Gemm weights stored transposed once.
#pragma once

#include "smelt/onnx.h"

namespace smelt::onnx {

class OpRegistry;

/// The domain of smelt's own fused operators ("ai.smelt"; imported at version 1 when used).
inline constexpr const char* kSmeltDomain = "ai.smelt";

/// How many of each pattern a pass rewrote.
struct FusionCounts {
  int gelu = 0;        // Div|Mul -> Erf -> Add 1 -> Mul x -> Mul 0.5  =>  ai.smelt::Gelu (and the tanh form)
  // ReduceMean, Sub, Pow|Mul, ReduceMean, Add eps, Sqrt, Div[, Mul g[, Add b]]  =>  ai.smelt::LayerNorm
  int layer_norm = 0;
  int conv_bn = 0;     // Conv (constant weights) -> BatchNormalization (constant)  =>  Conv with folded weights
  // MatMul(q, Transpose k) -> [scale] -> [mask] -> Softmax -> MatMul v, GQA repeats of k/v included
  //   =>  ai.smelt::ScaledDotProductAttention (rewrite in fusions.cpp, op in ops/attention.cpp)
  int attention = 0;
  // Gemm(A, B, transB=1) with a constant B only such Gemms read  =>  Gemm(A, Bᵀ stored row-major)
  int gemm_weights = 0;
  int total() const { return gelu + layer_norm + conv_bn + attention + gemm_weights; }
};

/// Rewrites the model's main graph and its subgraphs (If/Loop/Scan bodies) in place. Only
/// matches whose intermediate tensors nobody else reads (not graph outputs, not read by other
/// nodes or nested subgraphs) and whose constants and attributes are exactly what the pattern
/// needs are rewritten. Fused nodes are named after the nodes they replace:
/// "gelu(Div_3,Erf_4,Add_5,Mul_6,Mul_7)".
FusionCounts apply_fusions(Model& model);

/// Registers the ai.smelt operators the rewrites produce.
void register_fusion_ops(OpRegistry& r);

}  // namespace smelt::onnx
