// The max pooling row kernels of the channel-blocked layout, built for the baseline, x86-64-v3 and x86-64-v4.
#pragma once

#include <cstdint>

namespace smelt::cpu {

enum class CpuIsa : int;  // elementwise_math.h

/// Indices [first, last).
struct Range {
  int64_t first, last;
};

/// One output row of max pooling in the blocked layout: kB channels (known at compile time, so
/// the lanes stay in vector registers) at `xp` and `yr`, `pix` floats apart from one position to
/// the next (the block b: a channels-last activation, b = C, runs in chunks of kB). pool_blocked's
/// order and comparison, so its bits. Built for the baseline and, through target attributes, for
/// x86-64-v3 and -v4 (comparisons, selects and maxima are exact in every instruction set).
struct BlockedMaxRow {
  const float* xp;
  float* yr;
  const Range* cols;
  Range kd, kh;
  int64_t d0, h0, H, W, OW, stride_w, pad_w, dil_d, dil_h, dil_w, pix;
  /// The pooling's epilogue on each output before it is stored: + chan[lane] (in the Add's
  /// operand order) with `chan` set, then relu with `relu` (PoolParams::epilogue_add, _relu).
  const float* chan;
  bool add_before, relu;
};

using BlockedMaxRowFn = void (*)(const BlockedMaxRow&);

/// The row kernel for chunks of `chunk` channels (4, 8, 16 or 32) on the instruction set `isa`
/// (the best the CPU has at or below it), or null for another chunk.
BlockedMaxRowFn blocked_max_row_for(int64_t chunk, CpuIsa isa);

/// The channels a row kernel takes at once from a block of b: the largest of 32, 16, 8 and 4
/// that divides b (a channels-last b = C of 64 or 96 runs in chunks of 32), else 0.
int64_t max_row_chunk(int64_t b);

}  // namespace smelt::cpu
