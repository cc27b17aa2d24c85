// CPU kernel for RandomBits: Threefry-2x32 over element counters, laid out as JAX lays them out.
#include <vector>

#include "src/backend/cpu/kernel_utils.h"
#include "src/backend/cpu/kernels.h"
#include "src/backend/cpu/threefry.h"

namespace smelt::cpu {

namespace {

// JAX's threefry_2x32(key, iota(s)) on one block of s counters (s < 2^32): the counters are split
// in halves, element j < h pairs with element h + j (an odd count pads the last pair with a zero
// counter), and the pair's two outputs land at j and h + j. Each pair depends only on the key
// and its counters, so any split over threads gives the same bits.
void fill_block(uint32_t k0, uint32_t k1, int64_t s, uint32_t* out) {
  const int64_t h = (s + 1) / 2;
  const int64_t full = s / 2;  // pairs whose second counter is a real element
  parallel_for(full, kGrain / 2, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      auto r = threefry2x32(k0, k1, static_cast<uint32_t>(j), static_cast<uint32_t>(j + h));
      out[j] = r.x0;
      out[j + h] = r.x1;
    }
  });
  if (full < h) out[full] = threefry2x32(k0, k1, static_cast<uint32_t>(full), 0u).x0;
}

}  // namespace

void eval_RandomBits(const NoParams&, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& key = inputs[0];
  Array& out = outputs[0];
  alloc_contiguous(out);
  const uint32_t* kp = in_ptr<uint32_t>(key);
  const uint32_t k0 = kp[0], k1 = kp[key.node().strides[0]];
  uint32_t* dst = out_ptr<uint32_t>(out);
  const int64_t n = out.node().size();
  // JAX draws at most 2^32 - 1 counters per key; longer outputs use blocks of that many under
  // the subkeys split(key, blocks + 1), the last subkey taking the remainder.
  constexpr int64_t kBlock = 0xFFFFFFFFll;
  const int64_t blocks = n / kBlock, rem = n % kBlock;
  if (blocks == 0) {
    fill_block(k0, k1, n, dst);
    return;
  }
  std::vector<uint32_t> subkeys(static_cast<size_t>(2 * (blocks + 1)));
  fill_block(k0, k1, static_cast<int64_t>(subkeys.size()), subkeys.data());
  for (int64_t b = 0; b <= blocks; ++b)
    fill_block(subkeys[2 * b], subkeys[2 * b + 1], b < blocks ? kBlock : rem, dst + b * kBlock);
}

}  // namespace smelt::cpu
