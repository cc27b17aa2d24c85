
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
// the warp's result; higher lanes compute values nobody reads); with W = threads / 32 > 1 warps,
// warp 0 then combines the W warp results at distances W / 2, ..., 1. Every thread of the row
// gets the result. A block of more threads than `threads` (a fused row kernel's wider block)
// calls it from every thread, the first `threads` holding the row's accumulators: the other
// warps' results are not read. `sh` holds at least 33 accumulators.
template <class R> __device__ typename R::Acc row_tree(typename R::Acc a, int threads, typename R::Acc* sh) {
  #pragma unroll
  for (int off = 16; off > 0; off >>= 1) a = R::step(a, shfl_dn(a, off));
  if (threads == 32) return shfl_0(a);
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = threads >> 5;
  __syncthreads();  // an earlier tree may still read sh
  if (lane == 0 && w < nw) sh[w] = a;
  __syncthreads();
  if (w == 0) {
    a = sh[lane < nw ? lane : 0];
    for (int off = nw >> 1; off > 0; off >>= 1) a = R::step(a, shfl_dn(a, off));
    if (lane == 0) sh[nw] = a;
  }
  __syncthreads();
  return sh[nw];
}
// row_tree's order with one barrier, for a block of exactly `threads` threads: every warp
// combines the warp results itself, the same values in the same order as warp 0 does in
// row_tree, so the same bits. `sh` (threads / 32 accumulators) must belong to this tree alone:
// no barrier guards its reuse.
template <class R> __device__ typename R::Acc row_tree_once(typename R::Acc a, int threads, typename R::Acc* sh) {
  #pragma unroll
  for (int off = 16; off > 0; off >>= 1) a = R::step(a, shfl_dn(a, off));
  if (threads == 32) return shfl_0(a);
  const int lane = threadIdx.x & 31, nw = threads >> 5;
  if (lane == 0) sh[threadIdx.x >> 5] = a;
  __syncthreads();
  a = sh[lane < nw ? lane : 0];
  for (int off = nw >> 1; off > 0; off >>= 1) a = R::step(a, shfl_dn(a, off));
  return shfl_0(a);
}
// The vectors of [lo, hi) that thread `lane` of `threads` combines, in order: `vec` consecutive
// elements from lo + vec * lane, then every threads * vec, each vector's elements in order.
// ROW_VECS_FOR walks them `per` at a time: vector u (0 to per - 1) of a step starts at
// ROW_VECS_AT(b0, u, threads, vec). A kernel may load a step's vectors first, then combines them
// in order, stopping at the first that starts at or past hi (a partial last vector's elements
// stop at hi).
#define ROW_VECS_FOR(b0, lo, hi, lane, threads, vec, per) \
  for (i64 b0 = (lo) + (i64)(lane) * (vec); b0 < (hi); b0 += (i64)(per) * (i64)(threads) * (vec))
#define ROW_VECS_AT(b0, u, threads, vec) ((b0) + (i64)(u) * (i64)(threads) * (vec))
template <class T> __device__ inline u64 to_bits(T v) {
  if constexpr (tr<T>::is_half) return v.b;
  else if constexpr (same_t<T, float>::v) return __float_as_uint(v);
  else if constexpr (same_t<T, double>::v) return (u64)__double_as_longlong(v);
  else if constexpr (same_t<T, bool>::v) return v ? 1u : 0u;
  else return (u64)(typename tr<T>::unsig)v;
}
template <class T> __device__ inline T from_bits(u64 b) {
  if constexpr (tr<T>::is_half) return T{(u16)b};
  else if constexpr (same_t<T, float>::v) return __uint_as_float((u32)b);
  else if constexpr (same_t<T, double>::v) return __longlong_as_double((long long)b);
  else if constexpr (same_t<T, bool>::v) return (b & 0xffu) != 0;
  else return (T)(typename tr<T>::unsig)b;
}
template <class T> __device__ inline T unpack(const u32* w, int j) {
  if constexpr (sizeof(T) == 8) return from_bits<T>((u64)w[2 * j] | ((u64)w[2 * j + 1] << 32));
  else if constexpr (sizeof(T) == 4) return from_bits<T>(w[j]);
  else if constexpr (sizeof(T) == 2) return from_bits<T>((w[j >> 1] >> ((j & 1) * 16)) & 0xffffu);
  else return from_bits<T>((w[j >> 2] >> ((j & 3) * 8)) & 0xffu);
}
template <class T> __device__ inline void pack(u32* w, int j, T v) {
  const u64 b = to_bits(v);
  if constexpr (sizeof(T) == 8) { w[2 * j] = (u32)b; w[2 * j + 1] = (u32)(b >> 32); }
  else if constexpr (sizeof(T) == 4) w[j] = (u32)b;
  else if constexpr (sizeof(T) == 2) w[j >> 1] |= (u32)b << ((j & 1) * 16);
  else w[j >> 2] |= (u32)(b & 0xffu) << ((j & 3) * 8);
}
template <class T, int V> __device__ inline void vload(u32* w, const T* p) {
  constexpr int B = V * (int)sizeof(T);
  if constexpr (B >= 16) {
    #pragma unroll
    for (int q = 0; q < B / 16; ++q) {
      const uint4 v = ((const uint4*)p)[q];
      w[4 * q] = v.x; w[4 * q + 1] = v.y; w[4 * q + 2] = v.z; w[4 * q + 3] = v.w;
    }
  } else if constexpr (B == 8) { const uint2 v = *(const uint2*)p; w[0] = v.x; w[1] = v.y; }
  else if constexpr (B == 4) w[0] = *(const u32*)p;
  else if constexpr (B == 2) w[0] = *(const u16*)p;
  else w[0] = *(const u8*)p;
}
template <class T, int V> __device__ inline void vstore(T* p, const u32* w) {
  constexpr int B = V * (int)sizeof(T);
  if constexpr (B >= 16) {
    #pragma unroll
    for (int q = 0; q < B / 16; ++q) ((uint4*)p)[q] = make_uint4(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]);
  } else if constexpr (B == 8) *(uint2*)p = make_uint2(w[0], w[1]);
  else if constexpr (B == 4) *(u32*)p = w[0];
  else if constexpr (B == 2) *(u16*)p = (u16)w[0];
  else *(u8*)p = (u8)w[0];
}
__device__ inline u32 opaque32(u32 x) { u32 r; asm volatile("mov.b32 %0, %1;" : "=r"(r) : "r"(x)); return r; }
__device__ inline u64 opaque64(u64 x) { u64 r; asm volatile("mov.b64 %0, %1;" : "=l"(r) : "l"(x)); return r; }
struct RowArgs { u64 p[16]; i64 rows, n, groups, chunk, threads, knd, rnd, cache, cbytes; i64 kshape[MAXD]; i64 kst[16][MAXD]; i64 rshape[MAXD]; i64 rst[16][MAXD]; };
__device__ inline i64 roff(const RowArgs& a, int k, i64 j) {
  if (a.rnd == 1) return j * a.rst[k][0];
  i64 o = 0;
  for (int d = (int)a.rnd - 1; d >= 0; --d) { o += (j % a.rshape[d]) * a.rst[k][d]; j /= a.rshape[d]; }
  return o;
}
extern "C" __global__ void __launch_bounds__(1024, 1) k(RowArgs a) {
  __shared__ u64 shraw[33];
  extern __shared__ __align__(16) unsigned char rowc[];
  const int T = (int)a.threads, lane = threadIdx.x % T;
  const bool reducer = T == 32 || (int)threadIdx.x < T;
  const int el = T == 32 ? lane : (int)threadIdx.x, ET = T == 32 ? 32 : (int)blockDim.x;
  const i64 r = T == 32 ? bid() * (blockDim.x / 32) + threadIdx.x / 32 : bid();
  if (r >= a.rows) return;
  const i64 n = a.n;
  const float* x0;
  { i64 o = 0, q = r;
    if (a.knd == 1) o = q * a.kst[0][0];
    else for (int d = (int)a.knd - 1; d >= 0; --d) { o += (q % a.kshape[d]) * a.kst[0][d]; q /= a.kshape[d]; }
    x0 = (const float*)a.p[0] + o; }
  const bool f0 = a.rnd == 1 && a.rst[0][0] == 1 && ((u64)x0 & 15) == 0;
  unsigned char* slot = rowc + (T == 32 ? (i64)(threadIdx.x / 32) : (i64)0) * a.cbytes;
  float* c0 = (float*)slot;
  slot += (n * (i64)sizeof(float) + 15) / 16 * 16;
  if (a.cache) {
    if (f0) {
      const i64 nb = n * (i64)sizeof(float) / 16;
      const uint4* s = (const uint4*)x0;
#if __CUDA_ARCH__ >= 800
      const u32 d = (u32)__cvta_generic_to_shared(c0);
      for (i64 q = el; q < nb; q += ET)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(d + (u32)(q * 16)), "l"(s + q) : "memory");
#else
      for (i64 q = el; q < nb; q += ET) ((uint4*)c0)[q] = s[q];
#endif
      for (i64 j = nb * 16 / (i64)sizeof(float) + el; j < n; j += ET) c0[j] = x0[j];
    } else {
      for (i64 j = el; j < n; j += ET) c0[j] = x0[roff(a, 0, j)];
    }
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;" ::: "memory");
#endif
    if (T == 32) __syncwarp(); else __syncthreads();
  }
  const float* q0 = a.cache ? (const float*)c0 : x0;
  const bool cv0 = a.cache || f0;
  float* y0 = (float*)a.p[1];
  typedef smelt::scalar::Red<smelt::ReduceOp::Max, float> R1;
  R1::Acc t1 = R1::init();
  {
    const bool whole = cv0;
    for (i64 g = 0; g < a.groups; ++g) {
      const i64 lo = g * a.chunk, hi = min(n, lo + a.chunk);
      R1::Acc acc = R1::init();
      if (reducer) ROW_VECS_FOR(b0, lo, hi, lane, T, 4, 1) {
        u32 w0[1][4];
        #pragma unroll
        for (int u = 0; u < 1; ++u)
          if (whole && ROW_VECS_AT(b0, u, T, 4) + 4 <= hi) {
            vload<float, 4>(w0[u], q0 + ROW_VECS_AT(b0, u, T, 4));
          }
        #pragma unroll
        for (int u = 0; u < 1; ++u) {
          const i64 b = ROW_VECS_AT(b0, u, T, 4);
          if (b >= hi) break;
          if (whole && b + 4 <= hi) {
            #pragma unroll
            for (int e = 0; e < 4; ++e) {
              const float v0 = unpack<float>(w0[u], e);
              acc = R1::step(acc, R1::load(v0));
            }
          } else {
            for (i64 j = b, je = min(b + 4, hi); j < je; ++j) {
              const float v0 = (cv0 ? q0[j] : x0[roff(a, 0, j)]);
              acc = R1::step(acc, R1::load(v0));
            }
          }
        }
      }
      acc = row_tree<R1>(acc, T, (R1::Acc*)shraw);
      t1 = g == 0 ? acc : R1::step(t1, acc);
    }
  }
  const float v1 = R1::finish(t1);
  typedef smelt::scalar::Red<smelt::ReduceOp::Sum, float> R4;
  R4::Acc t4 = R4::init();
  {
    const bool whole = cv0;
    for (i64 g = 0; g < a.groups; ++g) {
      const i64 lo = g * a.chunk, hi = min(n, lo + a.chunk);
      R4::Acc acc = R4::init();
      if (reducer) ROW_VECS_FOR(b0, lo, hi, lane, T, 4, 1) {
        u32 w0[1][4];
        #pragma unroll
        for (int u = 0; u < 1; ++u)
          if (whole && ROW_VECS_AT(b0, u, T, 4) + 4 <= hi) {
            vload<float, 4>(w0[u], q0 + ROW_VECS_AT(b0, u, T, 4));
          }
        #pragma unroll
        for (int u = 0; u < 1; ++u) {
          const i64 b = ROW_VECS_AT(b0, u, T, 4);
          if (b >= hi) break;
          if (whole && b + 4 <= hi) {
            #pragma unroll
            for (int e = 0; e < 4; ++e) {
              const float v0 = unpack<float>(w0[u], e);
              const float v2 = smelt::scalar::subtract<float>(v0, v1);
              const float v3 = smelt::scalar::exp<float>(v2);
              acc = R4::step(acc, R4::load(v3));
            }
          } else {
            for (i64 j = b, je = min(b + 4, hi); j < je; ++j) {
              const float v0 = (cv0 ? q0[j] : x0[roff(a, 0, j)]);
              const float v2 = smelt::scalar::subtract<float>(v0, v1);
              const float v3 = smelt::scalar::exp<float>(v2);
              acc = R4::step(acc, R4::load(v3));
            }
          }
        }
      }
      acc = row_tree<R4>(acc, T, (R4::Acc*)shraw);
      t4 = g == 0 ? acc : R4::step(t4, acc);
    }
  }
  const float v4 = R4::finish(t4);
  {
    const bool whole = cv0 && ((u64)(y0 + r * n) & 15) == 0;
    for (i64 b = (i64)el * 4; b < n; b += (i64)ET * 4) {
      if (whole && b + 4 <= n) {
        u32 w0[4];
        vload<float, 4>(w0, q0 + b);
        u32 o0[4] = {};
        #pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float v0 = unpack<float>(w0, e);
          const float v2 = smelt::scalar::subtract<float>(v0, v1);
          const float v3 = smelt::scalar::exp<float>(v2);
          const float v5 = smelt::scalar::divide<float>(v3, v4);
          pack(o0, e, v5);
        }
        vstore<float, 4>(y0 + r * n + b, o0);
      } else {
        for (i64 j = b, je = min(b + 4, n); j < je; ++j) {
          const float v0 = (cv0 ? q0[j] : x0[roff(a, 0, j)]);
          const float v2 = smelt::scalar::subtract<float>(v0, v1);
          const float v3 = smelt::scalar::exp<float>(v2);
          const float v5 = smelt::scalar::divide<float>(v3, v4);
          y0[r * n + j] = v5;
        }
      }
    }
  }
}
