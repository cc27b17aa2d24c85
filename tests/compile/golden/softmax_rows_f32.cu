
template <class A> __device__ inline A shfl_dn(A v, int off) {
  if constexpr (same_t<A, bool>::v) return __shfl_down_sync(0xffffffffu, (int)v, off) != 0;
  else return __shfl_down_sync(0xffffffffu, v, off);
}
template <class A> __device__ inline A shfl_0(A v) {
  if constexpr (same_t<A, bool>::v) return __shfl_sync(0xffffffffu, (int)v, 0) != 0;
  else return __shfl_sync(0xffffffffu, v, 0);
}
// The tree over a row's threads (all of them call it; `threads` is the same in the whole
// block): in each warp lanes combine pairwise at distances 16, 8, 4, 2, 1 (lane 0 ends with
// the warp's result; higher lanes compute values nobody reads); with 256 threads, warp 0 then
// combines the 8 warp results at distances 4, 2, 1. Every thread of the row gets the result.
// `sh` holds at least 9 accumulators.
template <class R> __device__ typename R::Acc row_tree(typename R::Acc a, int threads, typename R::Acc* sh) {
  #pragma unroll
  for (int off = 16; off > 0; off >>= 1) a = R::step(a, shfl_dn(a, off));
  if (threads == 32) return shfl_0(a);
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // an earlier tree may still read sh
  if (lane == 0) sh[w] = a;
  __syncthreads();
  if (w == 0) {
    a = sh[lane < 8 ? lane : 0];
    #pragma unroll
    for (int off = 4; off > 0; off >>= 1) a = R::step(a, shfl_dn(a, off));
    if (lane == 0) sh[8] = a;
  }
  __syncthreads();
  return sh[8];
}
// The elements j of [lo, hi) that thread `lane` of `threads` combines, in order: `vec`
// consecutive ones from lo + vec * lane, then every threads * vec.
#define ROW_FOR(j, lo, hi, lane, threads, vec) \
  for (i64 j##_b = (lo) + (i64)(lane) * (vec); j##_b < (hi); j##_b += (i64)(threads) * (vec)) \
    for (i64 j = j##_b, j##_e = min(j##_b + (i64)(vec), (i64)(hi)); j < j##_e; ++j)
__device__ inline u32 opaque32(u32 x) { u32 r; asm volatile("mov.b32 %0, %1;" : "=r"(r) : "r"(x)); return r; }
__device__ inline u64 opaque64(u64 x) { u64 r; asm volatile("mov.b64 %0, %1;" : "=l"(r) : "l"(x)); return r; }
struct RowArgs { u64 p[16]; i64 rows, n, groups, chunk, threads, knd, rnd; i64 kshape[MAXD]; i64 kst[16][MAXD]; i64 rshape[MAXD]; i64 rst[16][MAXD]; };
__device__ inline i64 roff(const RowArgs& a, int k, i64 j) {
  if (a.rnd == 1) return j * a.rst[k][0];
  i64 o = 0;
  for (int d = (int)a.rnd - 1; d >= 0; --d) { o += (j % a.rshape[d]) * a.rst[k][d]; j /= a.rshape[d]; }
  return o;
}
extern "C" __global__ void k(RowArgs a) {
  __shared__ u64 shraw[9];
  const int T = (int)a.threads, lane = threadIdx.x % T;
  const i64 r = T == 32 ? bid() * (blockDim.x / 32) + threadIdx.x / 32 : bid();
  if (r >= a.rows) return;
  const i64 n = a.n;
  const float* x0;
  { i64 o = 0, q = r;
    for (int d = (int)a.knd - 1; d >= 0; --d) { o += (q % a.kshape[d]) * a.kst[0][d]; q /= a.kshape[d]; }
    x0 = (const float*)a.p[0] + o; }
  float* y0 = (float*)a.p[1];
  typedef Red<2, float> R1;
  R1::Acc t1 = R1::init();
  for (i64 g = 0; g < a.groups; ++g) {
    const i64 lo = g * a.chunk, hi = min(n, lo + a.chunk);
    R1::Acc acc = R1::init();
    ROW_FOR(j, lo, hi, lane, T, 4) {
      const float v0 = x0[roff(a, 0, j)];
      acc = R1::step(acc, R1::load(v0));
    }
    acc = row_tree<R1>(acc, T, (R1::Acc*)shraw);
    t1 = g == 0 ? acc : R1::step(t1, acc);
  }
  const float v1 = R1::finish(t1);
  typedef Red<0, float> R4;
  R4::Acc t4 = R4::init();
  for (i64 g = 0; g < a.groups; ++g) {
    const i64 lo = g * a.chunk, hi = min(n, lo + a.chunk);
    R4::Acc acc = R4::init();
    ROW_FOR(j, lo, hi, lane, T, 4) {
      const float v0 = x0[roff(a, 0, j)];
      const float v2 = op_subtract<float>(v0, v1);
      const float v3 = op_exp<float>(v2);
      acc = R4::step(acc, R4::load(v3));
    }
    acc = row_tree<R4>(acc, T, (R4::Acc*)shraw);
    t4 = g == 0 ? acc : R4::step(t4, acc);
  }
  const float v4 = R4::finish(t4);
  for (i64 j = lane; j < n; j += T) {
    const float v0 = x0[roff(a, 0, j)];
    const float v2 = op_subtract<float>(v0, v1);
    const float v3 = op_exp<float>(v2);
    const float v5 = op_divide<float>(v3, v4);
    y0[r * n + j] = v5;
  }
}
