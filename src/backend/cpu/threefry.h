// Threefry-2x32 with 20 rounds (Random123; the rotations and key schedule JAX uses).
#pragma once

#include <cstdint>

namespace smelt::cpu {

struct ThreefryPair {
  uint32_t x0, x1;
};

/// Encrypts the counter pair (c0, c1) under the key (k0, k1).
inline ThreefryPair threefry2x32(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1) {
  const uint32_t k2 = k0 ^ k1 ^ 0x1BD11BDAu;
  uint32_t x0 = c0 + k0, x1 = c1 + k1;
  // Rotations alternate between these two sets of four, with a key injection after each set.
  auto rounds = [&](int r0, int r1, int r2, int r3) {
    const int rot[4] = {r0, r1, r2, r3};
    for (int r : rot) {
      x0 += x1;
      x1 = (x1 << r) | (x1 >> (32 - r));
      x1 ^= x0;
    }
  };
  rounds(13, 15, 26, 6);
  x0 += k1;
  x1 += k2 + 1u;
  rounds(17, 29, 16, 24);
  x0 += k2;
  x1 += k0 + 2u;
  rounds(13, 15, 26, 6);
  x0 += k0;
  x1 += k1 + 3u;
  rounds(17, 29, 16, 24);
  x0 += k1;
  x1 += k2 + 4u;
  rounds(13, 15, 26, 6);
  x0 += k2;
  x1 += k0 + 5u;
  return {x0, x1};
}

}  // namespace smelt::cpu
