// The flash-attention forward kernel's CUDA source: tiles of q, k and v in shared memory, an
// online softmax in float32, one warp per group of query rows.
#include "src/backend/cuda/attention_sources.h"

#include "src/backend/cuda/kernels.h"

namespace smelt::cuda {

bool flash_attention_supports(Dtype dtype, int64_t head_dim, int64_t v_head_dim) {
  const bool type_ok = dtype == float32 || dtype == float16 || dtype == bfloat16;
  return type_ok && head_dim == v_head_dim && (head_dim == 64 || head_dim == 128);
}

int flash_attention_rows_per_warp(int head_dim) { return head_dim == 64 ? 8 : 4; }

std::string attention_kernel_key(const FlashAttentionConfig& c) {
  return "flash_attention|" + std::string(dtype_name(c.dtype)) + "|d" + std::to_string(c.head_dim) + "|mask" +
         std::to_string(static_cast<int>(c.mask)) + (c.causal ? "|causal" : "") + (c.softcap ? "|softcap" : "");
}

namespace {

// The kernel body after the configuration's #defines. Layout of the work:
//  - a block of 4 warps owns BM = 4 * ROWS consecutive query rows of one (batch, head); its q
//    tile is read once into shared memory (float32);
//  - it walks the keys in tiles of BN = 32 (k and v tiles in shared memory, k's rows padded by
//    one float so lane j reading key j's column is free of bank conflicts);
//  - lane j of a warp scores key j against the warp's ROWS rows, the warp's shuffles give each
//    row's tile maximum and sum, and the running (max, sum, accumulator) are rescaled as in
//    FlashAttention; lane j holds output columns j, j + 32, ... of its warp's rows.
// A row whose keys are all masked keeps max = -inf and sum = 0 and writes zeros.
constexpr const char* kBody = R"CUDA(
struct AttnArgs {
  u64 q, k, v, mask, out;
  i64 batch, q_heads, kv_heads, s, t;
  i64 qst[3], kst[3], vst[3];
  i64 mst[4];
  i64 causal_offset;
  double scale, softcap;
};
#define BN 32
#define WARPS 4
#define BM (WARPS * ROWS)
#define DL (D / 32)

__device__ inline float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ inline float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

extern "C" __global__ void __launch_bounds__(128) k(AttnArgs a) {
  __shared__ float qs[BM][D];
  __shared__ float ks[BN][D + 1];
  __shared__ float vs[BN][D];
  const i64 tiles_m = (a.s + BM - 1) / BM;
  i64 blk = bid();
  const i64 mt = blk % tiles_m;
  blk /= tiles_m;
  const i64 h = blk % a.q_heads, b = blk / a.q_heads;
  const i64 hk = h / (a.q_heads / a.kv_heads);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const i64 m0 = mt * BM;
  const T* qp = (const T*)a.q + b * a.qst[0] + h * a.qst[1];
  const T* kp = (const T*)a.k + b * a.kst[0] + hk * a.kst[1];
  const T* vp = (const T*)a.v + b * a.vst[0] + hk * a.vst[1];
  for (int idx = tid; idx < BM * D; idx += blockDim.x) {
    const int r = idx / D, c = idx % D;
    const i64 row = m0 + r;
    qs[r][c] = row < a.s ? (float)up(qp[row * a.qst[2] + c]) : 0.f;
  }
  const float neg_inf = -f_inf();
  const float scale = (float)a.scale;
  float m_i[ROWS], l_i[ROWS], acc[ROWS][DL];
  for (int r = 0; r < ROWS; ++r) {
    m_i[r] = neg_inf;
    l_i[r] = 0.f;
    for (int u = 0; u < DL; ++u) acc[r][u] = 0.f;
  }
  i64 t_end = a.t;
#if CAUSAL
  {  // keys past the block's last row (plus the offset) are masked for every row of the block
    const i64 last = m0 + BM - 1 + a.causal_offset + 1;
    t_end = last < t_end ? last : t_end;
    if (t_end < 0) t_end = 0;
  }
#endif
  for (i64 n0 = 0; n0 < t_end; n0 += BN) {
    __syncthreads();  // the previous tile is no longer read (and, the first time, q is written)
    for (int idx = tid; idx < BN * D; idx += blockDim.x) {
      const int r = idx / D, c = idx % D;
      const i64 key = n0 + r;
      const bool in = key < a.t;
      ks[r][c] = in ? (float)up(kp[key * a.kst[2] + c]) : 0.f;
      vs[r][c] = in ? (float)up(vp[key * a.vst[2] + c]) : 0.f;
    }
    __syncthreads();
    const i64 key = n0 + lane;
    float sc[ROWS];
    for (int r = 0; r < ROWS; ++r) sc[r] = 0.f;
    for (int c = 0; c < D; ++c) {
      const float kv = ks[lane][c];
      for (int r = 0; r < ROWS; ++r) sc[r] = fmaf(qs[warp * ROWS + r][c], kv, sc[r]);
    }
    float p[ROWS];
    for (int r = 0; r < ROWS; ++r) {
      const i64 row = m0 + warp * ROWS + r;
      float x = sc[r] * scale;
#if SOFTCAP
      x = (float)a.softcap * tanhf(x / (float)a.softcap);
#endif
      const bool valid = key < a.t && row < a.s;
#if MASK == 1
      if (valid) x += ((const float*)a.mask)[b * a.mst[0] + h * a.mst[1] + row * a.mst[2] + key * a.mst[3]];
#elif MASK == 2
      if (valid && !((const u8*)a.mask)[b * a.mst[0] + h * a.mst[1] + row * a.mst[2] + key * a.mst[3]]) x = neg_inf;
#endif
#if CAUSAL
      if (key > row + a.causal_offset) x = neg_inf;
#endif
      if (!valid) x = neg_inf;
      const float m_new = fmaxf(m_i[r], warp_max(x));
      const float shift = m_new == neg_inf ? 0.f : m_new;  // a row masked so far keeps zeros
      p[r] = expf(x - shift);
      const float alpha = expf(m_i[r] - shift);
      l_i[r] = l_i[r] * alpha + warp_sum(p[r]);
      m_i[r] = m_new;
      for (int u = 0; u < DL; ++u) acc[r][u] *= alpha;
    }
    for (int j = 0; j < BN; ++j) {
      float vj[DL];
      for (int u = 0; u < DL; ++u) vj[u] = vs[j][lane + 32 * u];
      for (int r = 0; r < ROWS; ++r) {
        const float pj = __shfl_sync(0xffffffffu, p[r], j);
        for (int u = 0; u < DL; ++u) acc[r][u] = fmaf(pj, vj[u], acc[r][u]);
      }
    }
  }
  for (int r = 0; r < ROWS; ++r) {
    const i64 row = m0 + warp * ROWS + r;
    if (row >= a.s) continue;
    const float inv = l_i[r] > 0.f ? 1.f / l_i[r] : 0.f;
    T* op = (T*)a.out + ((b * a.q_heads + h) * a.s + row) * D;
    for (int u = 0; u < DL; ++u) op[lane + 32 * u] = down<T>(acc[r][u] * inv);
  }
}
)CUDA";

}  // namespace

std::string attention_source(const FlashAttentionConfig& c) {
  return "typedef " + std::string(device_type(c.dtype)) + " T;\n#define D " + std::to_string(c.head_dim) +
         "\n#define ROWS " + std::to_string(flash_attention_rows_per_warp(c.head_dim)) + "\n#define MASK " +
         std::to_string(static_cast<int>(c.mask)) + "\n#define CAUSAL " + (c.causal ? "1" : "0") +
         "\n#define SOFTCAP " + (c.softcap ? "1" : "0") + "\n" + kBody;
}

}  // namespace smelt::cuda
