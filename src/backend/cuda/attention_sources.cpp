// The flash-attention forward kernels' CUDA sources: tiles of q, k and v in shared memory, an
// online softmax in float32; tensor cores (mma.sync) for float16 and bfloat16, float32 FMAs for
// float32.
#include "src/backend/cuda/attention_sources.h"

#include "src/backend/cuda/kernels.h"

namespace smelt::cuda {

bool flash_attention_supports(Dtype dtype, int64_t head_dim, int64_t v_head_dim) {
  const bool type_ok = dtype == float32 || dtype == float16 || dtype == bfloat16;
  return type_ok && head_dim == v_head_dim && (head_dim == 64 || head_dim == 128);
}

int flash_attention_rows_per_warp(int head_dim) { return head_dim == 64 ? 8 : 4; }

std::string attention_kernel_key(const FlashAttentionConfig& c) {
  return std::string(flash_attention_uses_tensor_cores(c) ? "flash_attention_mma|" : "flash_attention|") +
         std::string(dtype_name(c.dtype)) + "|d" + std::to_string(c.head_dim) + "|mask" +
         std::to_string(static_cast<int>(c.mask)) + (c.causal ? "|causal" : "") + (c.softcap ? "|softcap" : "");
}

namespace {

// What both kernels share: the argument struct and the score of (row, key) after the scale,
// softcap, mask and causal mask (-inf for a masked key or outside the arrays).
constexpr const char* kCommon = R"CUDA(
struct AttnArgs {
  u64 q, k, v, mask, out;
  i64 batch, q_heads, kv_heads, s, t;
  i64 qst[3], kst[3], vst[3];
  i64 mst[4];
  i64 causal_offset;
  i64 ost[3];
  double scale, softcap;
};
// `mrow`: the mask's element offset of (b, h, row), key 0 (attn_mask_row), so that a score's
// mask read is one multiply-add from it.
__device__ inline i64 attn_mask_row(const AttnArgs& a, i64 b, i64 h, i64 row) {
  return b * a.mst[0] + h * a.mst[1] + row * a.mst[2];
}
__device__ inline float attn_score(const AttnArgs& a, float dot, float scale, i64 mrow, i64 row, i64 key) {
  const float neg_inf = -f_inf();
  float x = dot * scale;
#if SOFTCAP
  x = (float)a.softcap * tanhf(x / (float)a.softcap);
#endif
  const bool valid = key < a.t && row < a.s;
#if MASK == 1
  if (valid) x += ((const float*)a.mask)[mrow + key * a.mst[3]];
#elif MASK == 2
  if (valid && !((const u8*)a.mask)[mrow + key * a.mst[3]]) x = neg_inf;
#endif
#if CAUSAL
  if (key > row + a.causal_offset) x = neg_inf;
#endif
  if (!valid) x = neg_inf;
  return x;
}
// The block's query rows m0 .. m0 + rows - 1 of head h of batch b (key/value head hk: GQA).
struct AttnTile {
  i64 m0, h, b, hk;
};
__device__ inline AttnTile attn_tile(const AttnArgs& a, i64 rows) {
  const i64 tiles_m = (a.s + rows - 1) / rows;
  i64 blk = bid();
  AttnTile t;
  t.m0 = (blk % tiles_m) * rows;
  blk /= tiles_m;
  t.h = blk % a.q_heads;
  t.b = blk / a.q_heads;
  t.hk = t.h / (a.q_heads / a.kv_heads);
  return t;
}
// The keys a block of `rows` query rows from m0 reads: with CAUSAL, those past its last row
// (plus the offset) are masked for every row of the block.
__device__ inline i64 attn_key_end(const AttnArgs& a, i64 m0, i64 rows) {
  i64 t_end = a.t;
#if CAUSAL
  const i64 last = m0 + rows - 1 + a.causal_offset + 1;
  t_end = last < t_end ? last : t_end;
  if (t_end < 0) t_end = 0;
#endif
  return t_end;
}
)CUDA";

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
  const AttnTile at = attn_tile(a, BM);
  const i64 h = at.h, b = at.b, hk = at.hk;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const i64 m0 = at.m0;
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
  const i64 t_end = attn_key_end(a, m0, BM);
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
      const float x = attn_score(a, sc[r], scale, attn_mask_row(a, b, h, row), row, key);
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
    T* op = (T*)a.out + b * a.ost[0] + h * a.ost[1] + row * a.ost[2];
    for (int u = 0; u < DL; ++u) op[lane + 32 * u] = down<T>(acc[r][u] * inv);
  }
}
)CUDA";

// The tensor-core kernel for float16 and bfloat16 (FlashAttention-2's layout of the work on
// mma.sync.m16n8k16, float32 accumulators):
//  - a block of 4 warps owns BM = 64 consecutive query rows of one (batch, head), 16 a warp; each
//    warp keeps its q fragments in registers;
//  - k and v come in tiles of BN = 64 keys, row-major in shared memory (rows padded by 16 bytes:
//    ldmatrix's eight row addresses hit 32 different banks), two buffers: the next tile's copy
//    (cp.async, when every row is 16-byte aligned; plain loads otherwise) overlaps this tile's
//    arithmetic. k's fragments come through ldmatrix, v's through ldmatrix.trans (the B operand
//    of P v wants v's columns: transposing the tile in shared memory cost a store per element);
//  - S = q k^T for the warp's 16 rows x 64 keys in registers (the accumulator layout of the PTX
//    ISA: thread (g = lane / 4, c = lane % 4) holds rows g and g + 8, keys 2c, 2c + 1 of each
//    8-key tile); a tile with every key valid for every row of the block (inside the arrays, no
//    mask, no softcap, wholly below the causal diagonal) takes dot * scale alone, the others go
//    through attn_score (scale, softcap, mask, causal mask), with the same roundings (so the
//    causal flag and a boolean mask that says the same give the same bits, and a tile skipped
//    as wholly masked adds exactly nothing). Scores are then held in base 2
//    (times log2 e) so that each weight is one exp2; the row maximum and sum over the 4 threads of
//    a row by shuffles; the running output rescaled in registers;
//  - P is rounded to the input dtype and used as the A operand of O += P v straight from the
//    registers (the accumulator layout of two 8-key tiles is the A layout of one 16-key step).
// Each thread sums its own part of a row's denominator; the 4 parts are added at the end.
// A row whose keys are all masked keeps max = -inf and sum = 0 and writes zeros.
constexpr const char* kMmaBody = R"CUDA(
#define BM 64
#define BN 64
#define LDQ (D + 8)
#define TILE (BN * LDQ)

__device__ inline u32 pack2(float lo, float hi) {
  u32 r;
#if IS_BF16
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
  return r;
}
__device__ inline void mma16816(float* c, const u32* a, const u32* b) {
#if IS_BF16
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
__device__ inline u32 smem_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }
__device__ inline void ldsm_x4(u32* r, const u16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}
__device__ inline void ldsm_x4_trans(u32* r, const u16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}
// 16 bytes from global to shared memory without registers; zeros when !in (nothing is read).
__device__ inline void cp_async16(u16* dst, const u16* src, bool in) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(smem_addr(dst)), "l"(src), "r"(in ? 16 : 0) : "memory");
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ inline void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
// Eight elements of row `row` from column c (zeros when !in): one 16-byte load when aligned.
__device__ inline uint4 load8(const u16* base, i64 row, i64 row_stride, int c, bool in) {
  if (!in) return make_uint4(0u, 0u, 0u, 0u);
  const u16* src = base + row * row_stride + c;
  if (((u64)src & 15) == 0) return *(const uint4*)src;
  u32 w[4];
  for (int i = 0; i < 4; ++i) w[i] = (u32)src[2 * i] | ((u32)src[2 * i + 1] << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

extern "C" __global__ void __launch_bounds__(128) k(AttnArgs a) {
  extern __shared__ __align__(16) u16 smem[];
  u16* qs = smem;               // [BM][LDQ]
  u16* kv = qs + BM * LDQ;      // two buffers of [BN][LDQ] k then [BN][LDQ] v
  const AttnTile at = attn_tile(a, BM);
  const i64 h = at.h, b = at.b, hk = at.hk;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c4 = lane & 3;
  const i64 m0 = at.m0;
  const u16* qp = (const u16*)a.q + b * a.qst[0] + h * a.qst[1];
  const u16* kp = (const u16*)a.k + b * a.kst[0] + hk * a.kst[1];
  const u16* vp = (const u16*)a.v + b * a.vst[0] + hk * a.vst[1];
  // cp.async moves aligned 16-byte pieces: every row of k and v must start on 16 bytes.
  const bool async_ok = (((u64)kp | (u64)vp) & 15) == 0 && (a.kst[2] & 7) == 0 && (a.vst[2] & 7) == 0;
  const i64 t_end = attn_key_end(a, m0, BM);
  auto load_tile = [&](i64 n0, u16* buf) {
    for (int idx = tid; idx < BN * (D / 8); idx += 128) {
      const int r = idx / (D / 8), c = (idx % (D / 8)) * 8;
      const bool in = n0 + r < a.t;
      if (async_ok) {
        const i64 row = in ? n0 + r : 0;  // (not read when !in; row 0 exists: the loop runs only when t > 0)
        cp_async16(buf + r * LDQ + c, kp + row * a.kst[2] + c, in);
        cp_async16(buf + TILE + r * LDQ + c, vp + row * a.vst[2] + c, in);
      } else {
        *(uint4*)(buf + r * LDQ + c) = load8(kp, n0 + r, a.kst[2], c, in);
        *(uint4*)(buf + TILE + r * LDQ + c) = load8(vp, n0 + r, a.vst[2], c, in);
      }
    }
    cp_async_commit();
  };
  if (t_end > 0) load_tile(0, kv);
  for (int idx = tid; idx < BM * (D / 8); idx += 128) {
    const int r = idx / (D / 8), c = (idx % (D / 8)) * 8;
    *(uint4*)(qs + r * LDQ + c) = load8(qp, m0 + r, a.qst[2], c, m0 + r < a.s);
  }
  __syncthreads();
  u32 qf[D / 16][4];
  #pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const u16* qa = qs + (warp * 16 + g) * LDQ + kk * 16 + 2 * c4;
    qf[kk][0] = *(const u32*)qa;
    qf[kk][1] = *(const u32*)(qa + 8 * LDQ);
    qf[kk][2] = *(const u32*)(qa + 8);
    qf[kk][3] = *(const u32*)(qa + 8 * LDQ + 8);
  }
  const float neg_inf = -f_inf();
  const float log2e = 1.4426950408889634f;
  const float scale = (float)a.scale;
  float o[D / 8][4];
  #pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m_r[2] = {neg_inf, neg_inf}, l_r[2] = {0.f, 0.f};
  const i64 row0 = m0 + warp * 16 + g;  // this thread's rows: row0 and row0 + 8
  const i64 mrow[2] = {attn_mask_row(a, b, h, row0), attn_mask_row(a, b, h, row0 + 8)};
  // ldmatrix: lane supplies row (lane & 7) of matrix (lane >> 3).
  const int lr = lane & 7, lm = lane >> 3;
  int it = 0;
  for (i64 n0 = 0; n0 < t_end; n0 += BN, ++it) {
    u16* ks = kv + (it & 1) * 2 * TILE;
    const u16* vs = ks + TILE;
    if (n0 + BN < t_end) {
      load_tile(n0 + BN, kv + ((it + 1) & 1) * 2 * TILE);  // the buffer every warp left last iteration
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // this tile is in shared memory for every thread
    float sc[BN / 8][4];
    #pragma unroll
    for (int j = 0; j < BN / 8; ++j) sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.f;
    #pragma unroll
    for (int kp2 = 0; kp2 < D / 32; ++kp2) {
      #pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        u32 bf[4];  // keys j*8.., d from kp2*32 in four 8-column matrices: two k16 steps
        ldsm_x4(bf, ks + (j * 8 + lr) * LDQ + kp2 * 32 + lm * 8);
        mma16816(sc[j], qf[2 * kp2], bf);
        mma16816(sc[j], qf[2 * kp2 + 1], bf + 2);
      }
    }
    const bool plain = MASK == 0 && !SOFTCAP && n0 + BN <= a.t && m0 + BM <= a.s &&
                       (!CAUSAL || n0 + BN - 1 <= m0 + a.causal_offset);
    float mx[2] = {neg_inf, neg_inf};
    if (plain) {
      #pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        #pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float x = sc[j][e] * scale * log2e;  // attn_score's rounding: (dot * scale) * log2e
          sc[j][e] = x;
          mx[e >> 1] = fmaxf(mx[e >> 1], x);
        }
      }
    } else {
      #pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        #pragma unroll
        for (int e = 0; e < 4; ++e) {
          const i64 row = row0 + 8 * (e >> 1), key = n0 + j * 8 + 2 * c4 + (e & 1);
          const float x = attn_score(a, sc[j][e], scale, mrow[e >> 1], row, key) * log2e;
          sc[j][e] = x;
          mx[e >> 1] = fmaxf(mx[e >> 1], x);
        }
      }
    }
    float shift[2];
    #pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(0xffffffffu, mx[rr], 1));
      mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(0xffffffffu, mx[rr], 2));
      const float m_new = fmaxf(m_r[rr], mx[rr]);
      shift[rr] = m_new == neg_inf ? 0.f : m_new;  // a row masked so far keeps zeros
      const float alpha = exp2f(m_r[rr] - shift[rr]);
      m_r[rr] = m_new;
      l_r[rr] *= alpha;
      #pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        o[n][2 * rr] *= alpha;
        o[n][2 * rr + 1] *= alpha;
      }
    }
    #pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      #pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = exp2f(sc[j][e] - shift[e >> 1]);
        sc[j][e] = p;
        l_r[e >> 1] += p;
      }
    }
    #pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const u32 pa[4] = {pack2(sc[2 * kk][0], sc[2 * kk][1]), pack2(sc[2 * kk][2], sc[2 * kk][3]),
                         pack2(sc[2 * kk + 1][0], sc[2 * kk + 1][1]), pack2(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
      #pragma unroll
      for (int np = 0; np < D / 16; ++np) {
        u32 bf[4];  // keys kk*16 + (0..7 | 8..15), d columns np*16 + (0..7 | 8..15), transposed
        ldsm_x4_trans(bf, vs + (kk * 16 + (lm & 1) * 8 + lr) * LDQ + np * 16 + (lm >> 1) * 8);
        mma16816(o[2 * np], pa, bf);
        mma16816(o[2 * np + 1], pa, bf + 2);
      }
    }
    __syncthreads();  // every warp is done with this buffer before the next iteration refills it
  }
  #pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float l = l_r[rr];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const i64 row = row0 + 8 * rr;
    if (row >= a.s) continue;
    u16* op = (u16*)a.out + b * a.ost[0] + h * a.ost[1] + row * a.ost[2];
    #pragma unroll
    for (int n = 0; n < D / 8; ++n) *(u32*)(op + n * 8 + 2 * c4) = pack2(o[n][2 * rr] * inv, o[n][2 * rr + 1] * inv);
  }
}
)CUDA";

}  // namespace

bool flash_attention_uses_tensor_cores(const FlashAttentionConfig& c) {
  return c.dtype == float16 || c.dtype == bfloat16;
}

int64_t flash_attention_block_rows(const FlashAttentionConfig& c) {
  return flash_attention_uses_tensor_cores(c) ? 64 : 4 * flash_attention_rows_per_warp(c.head_dim);
}

uint64_t flash_attention_shared_bytes(const FlashAttentionConfig& c) {
  if (!flash_attention_uses_tensor_cores(c)) return 0;  // static shared memory
  const uint64_t d = static_cast<uint64_t>(c.head_dim);
  return 2 * (64 + 2 * 2 * 64) * (d + 8);  // q, then two buffers of k and v
}

std::string attention_source(const FlashAttentionConfig& c) {
  const std::string defs = "#define D " + std::to_string(c.head_dim) + "\n#define MASK " +
                           std::to_string(static_cast<int>(c.mask)) + "\n#define CAUSAL " + (c.causal ? "1" : "0") +
                           "\n#define SOFTCAP " + (c.softcap ? "1" : "0") + "\n";
  if (flash_attention_uses_tensor_cores(c))
    return defs + "#define IS_BF16 " + (c.dtype == bfloat16 ? "1" : "0") + "\n" + kCommon + kMmaBody;
  return "typedef " + std::string(device_type(c.dtype)) + " T;\n#define ROWS " +
         std::to_string(flash_attention_rows_per_warp(c.head_dim)) + "\n" + defs + kCommon + kBody;
}

}  // namespace smelt::cuda
