// The CUDA Attention primitive: the flash-attention kernels (attention_sources.cpp: tensor cores
// for float16 and bfloat16, FMAs for float32) with head_dim 64 or 128, the composed path (matmul,
// softmax, matmul) otherwise.
#include "src/backend/cuda/attention.h"

#include "src/backend/cuda/attention_sources.h"
#include "src/backend/cuda/kernels.h"
#include "src/ops/attention.h"

namespace smelt::cuda {

namespace {

/// The composed path, evaluated here; the output takes over its buffer.
void eval_composed(const AttentionParams& p, const std::vector<Array>& inputs, Array& out) {
  Array r = detail::attention_composed(inputs[0], inputs[1], inputs[2], inputs.size() > 3 ? inputs[3] : Array(), p);
  r.eval();
  auto& o = out.node();
  const auto& n = r.node();
  o.buffer = n.buffer;
  o.strides = n.strides;
  o.offset = n.offset;
}

/// True when the kernel can read the array in place: unit stride along head_dim.
bool unit_last_stride(const Array& a) { return a.shape().back() <= 1 || a.node().strides.back() == 1; }

}  // namespace

void eval_attention(const AttentionParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array &q = inputs[0], &k = inputs[1], &v = inputs[2];
  Array& out = outputs[0];
  const int64_t d = q.shape()[3];
  const bool empty = q.size() == 0 || k.shape()[2] == 0;
  if (empty || !flash_attention_supports(q.dtype(), d, v.shape()[3]) || !unit_last_stride(q) || !unit_last_stride(k) ||
      !unit_last_stride(v)) {
    eval_composed(p, inputs, out);
    return;
  }
  // The output is laid out as [B, S, Hq, D] (its [B, Hq, S, D] view has strides S·Hq·D, D,
  // Hq·D, 1): the transpose back to [B, S, Hq·D] that follows attention in a transformer block
  // is then a free view instead of a copy kernel.
  alloc_output(out);
  {
    auto& n = out.node();
    const int64_t hq = q.shape()[1], sq = q.shape()[2];
    n.strides = {sq * hq * d, d, hq * d, 1};
  }
  DeviceState& s = state_of(out);
  FlashAttentionConfig c{q.dtype(), static_cast<int>(d), p.mask, p.causal != CausalMask::None, p.softcap > 0};
  AttnArgs a{};
  a.q = dptr(q);
  a.k = dptr(k);
  a.v = dptr(v);
  a.out = dptr(out);
  a.batch = q.shape()[0];
  a.q_heads = q.shape()[1];
  a.kv_heads = k.shape()[1];
  a.s = q.shape()[2];
  a.t = k.shape()[2];
  for (int i = 0; i < 3; ++i) {
    a.qst[i] = q.node().strides[i];
    a.kst[i] = k.node().strides[i];
    a.vst[i] = v.node().strides[i];
  }
  if (p.mask != AttentionMaskKind::None) {
    const Array& m = inputs[3];
    a.mask = dptr(m);
    for (int i = 0; i < 4; ++i) a.mst[i] = m.shape()[i] == 1 ? 0 : m.node().strides[i];
  }
  a.causal_offset = p.causal == CausalMask::LowerRight ? a.t - a.s : 0;
  for (int i = 0; i < 3; ++i) a.ost[i] = out.node().strides[i];
  a.scale = detail::attention_scale(p, d);
  a.softcap = p.softcap;
  const std::string what = "scaled_dot_product_attention";
  const Kernel fn = get_kernel(s.index, attention_kernel_key(c), [&] { return attention_source(c); }, what);
  const uint64_t blocks = blocks_for(a.s, flash_attention_block_rows(c)) * static_cast<uint64_t>(a.batch * a.q_heads);
  launch(s, fn, blocks, 128, &a, what, flash_attention_shared_bytes(c));
}

void prebuild_attention(const AttentionParams& p, const Shape& q, Dtype dtype, const Shape& v, int device) {
  if (q.size() != 4 || v.size() != 4 || !flash_attention_supports(dtype, q[3], v[3])) return;
  FlashAttentionConfig c{dtype, static_cast<int>(q[3]), p.mask, p.causal != CausalMask::None, p.softcap > 0};
  prebuild_kernel([c, device] {
    get_kernel(device, attention_kernel_key(c), [&] { return attention_source(c); }, "prebuild of scaled_dot_product_attention");
  });
}

}  // namespace smelt::cuda
