// CUDA kernel for RandomBits: Threefry-2x32 over element counters, bit-identical to the CPU's.
//
// A port of src/backend/cpu/threefry.h and random.cpp: a block of s counters pairs element j with
// element j + ceil(s/2) (an odd count pads the last pair with a zero counter); one thread per
// pair. Outputs longer than 2^32 - 1 use blocks of that many under the subkeys
// split(key, blocks + 1), which the same kernel draws first into a small device buffer.
#include <string>

#include "src/backend/cuda/allocator.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/kernels.h"
#include "src/backend/cuda/sort_sources.h"

namespace smelt::cuda {

std::string random_bits_source() {
  return R"(struct RbArgs { u64 key, out; i64 key_stride, s; };
__device__ inline u32 rotl32(u32 x, int r) { return (x << r) | (x >> (32 - r)); }
#define TF_ROUND(r) x0 += x1; x1 = rotl32(x1, r); x1 ^= x0;
#define TF_A TF_ROUND(13) TF_ROUND(15) TF_ROUND(26) TF_ROUND(6)
#define TF_B TF_ROUND(17) TF_ROUND(29) TF_ROUND(16) TF_ROUND(24)
__device__ inline void threefry2x32(u32 k0, u32 k1, u32 c0, u32 c1, u32& y0, u32& y1) {
  const u32 k2 = k0 ^ k1 ^ 0x1BD11BDAu;
  u32 x0 = c0 + k0, x1 = c1 + k1;
  TF_A x0 += k1; x1 += k2 + 1u;
  TF_B x0 += k2; x1 += k0 + 2u;
  TF_A x0 += k0; x1 += k1 + 3u;
  TF_B x0 += k1; x1 += k2 + 4u;
  TF_A x0 += k2; x1 += k0 + 5u;
  y0 = x0;
  y1 = x1;
}
extern "C" __global__ void k(RbArgs a) {
  const i64 j = gid();
  const i64 h = (a.s + 1) / 2;
  if (j >= h) return;
  const u32* kp = (const u32*)a.key;
  const u32 k0 = kp[0], k1 = kp[a.key_stride];
  u32* y = (u32*)a.out;
  u32 y0, y1;
  if (j + h < a.s) {
    threefry2x32(k0, k1, (u32)j, (u32)(j + h), y0, y1);
    y[j] = y0;
    y[j + h] = y1;
  } else {
    threefry2x32(k0, k1, (u32)j, 0u, y0, y1);
    y[j] = y0;
  }
}
)";
}

namespace {

void fill_block(DeviceState& s, const Kernel& fn, uint64_t key, int64_t key_stride, int64_t count, uint64_t out) {
  if (count <= 0) return;
  RandomBitsArgs a{key, out, key_stride, count};
  launch(s, fn, blocks_for((count + 1) / 2, 256), 256, &a, "RandomBits");
}

}  // namespace

void eval_random_bits(const std::vector<Array>& inputs, Array& out) {
  const Array& key = inputs[0];
  alloc_output(out);
  const int64_t n = out.size();
  if (n == 0) return;
  DeviceState& s = state_of(out);
  const Kernel fn = get_kernel(s.index, "random_bits", [] { return random_bits_source(); }, "RandomBits");
  const uint64_t kp = dptr(key);
  const int64_t ks = key.node().strides[0];
  // JAX draws at most 2^32 - 1 counters per key (as the CPU kernel does).
  constexpr int64_t kBlock = 0xFFFFFFFFll;
  const int64_t blocks = n / kBlock, rem = n % kBlock;
  if (blocks == 0) {
    fill_block(s, fn, kp, ks, n, dptr(out));
    return;
  }
  const int64_t nsub = 2 * (blocks + 1);
  BufferPtr sub = allocator(out.device()).allocate(static_cast<size_t>(nsub) * 4);
  const uint64_t sp = reinterpret_cast<uint64_t>(sub->ptr);
  fill_block(s, fn, kp, ks, nsub, sp);
  for (int64_t b = 0; b <= blocks; ++b)
    fill_block(s, fn, sp + static_cast<uint64_t>(2 * b) * 4, 1, b < blocks ? kBlock : rem,
               dptr(out) + static_cast<uint64_t>(b * kBlock) * 4);
}

}  // namespace smelt::cuda
