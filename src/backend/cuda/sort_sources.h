// CUDA sources of Sort/ArgSort/TopK, Scan and RandomBits: pure generators (no GPU needed) and the
// host mirrors of their argument structs.
//
// Every generator returns the CUDA C++ that follows the device preamble (device_preamble.cpp), with
// its entry point `extern "C" __global__ void k(Args)`. They are pure functions of their
// arguments, so tests compile every variant with NVRTC on machines without a GPU
// (tests/backend/cuda/sort_source_test.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "smelt/dtype.h"
#include "src/backend/cuda/kernels.h"
#include "src/primitives/primitive.h"

namespace smelt::cuda {

// ---- Sort, ArgSort, TopK (sort.cpp) ------------------------------------------------------------

/// Rows up to this long sort in one block's shared memory (bitonic over (key, index) pairs);
/// longer rows take the radix sort.
inline constexpr int64_t kBlockSortMax = 4096;
/// Elements per tile of the radix passes (256 threads x 16 rounds).
inline constexpr int64_t kRadixTile = 4096;
inline constexpr unsigned kRadixThreads = 256;
/// Elements per block of the int64 exclusive scan (256 threads x 8).
inline constexpr int64_t kScanI64Chunk = 2048;

/// Which outputs a sort kernel writes: Sort the values, ArgSort the indices, TopK both.
enum class SortOutputs { Values, Indices, Both };

/// Mirrors the device struct BsArgs. L: the axes other than the sorted one (st[0] input strides,
/// st[1] output strides); `R` rows of `P` (a power of two >= n) slots per block; `row_fast`:
/// loads and stores step across rows first.
struct BlockSortArgs {
  uint64_t in = 0, out_val = 0, out_idx = 0;
  int64_t rows = 0, n = 0, m = 0, P = 1, R = 1, s_axis = 0, s_out = 0, row_fast = 0;
  Layout L;
};

/// Mirrors the device struct RxArgs, shared by every radix kernel.
struct RadixArgs {
  uint64_t in = 0, keys_in = 0, vals_in = 0, keys_out = 0, vals_out = 0, hist = 0, out_val = 0, out_idx = 0;
  int64_t N = 0, n = 0, m = 0, rows = 0, tiles = 0, shift = 0, s_axis = 0, s_out = 0;
  Layout L;
};

/// Mirrors the device struct XsArgs of the int64 exclusive scan.
struct ScanI64Args {
  uint64_t data = 0, sums = 0;
  int64_t n = 0;
};

/// `skey(bits)`: the order-preserving unsigned key of an element of `dtype` read as its bits
/// (typedefs BT, KT): ascending keys are the CPU's ascending order (NaN after everything, all NaNs
/// equal, -0 equal to +0); `descending` inverts every key bit.
std::string sort_key_source(Dtype dtype, bool descending);
/// One block sorts R rows of up to kBlockSortMax elements in shared memory; writes the first m
/// of each row.
std::string block_sort_source(Dtype dtype, bool descending, SortOutputs outputs);
/// Radix: keys and element numbers (row * n + j) of every element, from the strided input.
std::string radix_init_source(Dtype dtype, bool descending, bool wide_payload);
/// Radix: per-tile digit counts (digit-major: hist[digit * tiles + tile]). `row_pass`: the digit
/// is taken from the row number (payload / n) instead of the key.
std::string radix_hist_source(int key_bytes, bool row_pass, bool wide_payload);
/// Radix: stable scatter of each tile by digit to the scanned offsets.
std::string radix_scatter_source(int key_bytes, bool row_pass, bool wide_payload);
/// Radix: the first m sorted positions of each row to the outputs (values gathered by index).
std::string radix_finish_source(Dtype dtype, SortOutputs outputs, bool wide_payload);
/// In-place exclusive scan of int64 in blocks of kScanI64Chunk; block totals to `sums`.
std::string scan_i64_block_source();
/// data[i] += sums[i / kScanI64Chunk].
std::string scan_i64_add_source();

// ---- Scan (scan.cpp) ---------------------------------------------------------------------------

/// Lines at least this many (or lines at most kScanSequentialLen long) scan one thread per line,
/// sequentially as the CPU does; fewer, longer lines scan in chunks of kScanChunk.
inline constexpr int64_t kScanSequentialLines = 4096;
inline constexpr int64_t kScanSequentialLen = 256;
inline constexpr int64_t kScanChunk = 4096;
inline constexpr unsigned kScanThreads = 256;

/// Mirrors the device struct ScArgs. `in`/`out` point at the first element of the walk (the last
/// one for reverse scans, with negated strides); L: the other axes (st[0] in, st[1] out).
struct ScanArgs {
  uint64_t in = 0, out = 0, partial = 0;
  int64_t lines = 0, len = 0, s_in = 0, s_out = 0, chunks = 1;
  Layout L;
};

/// Lines per block of the tiled sequential scan.
inline constexpr int64_t kScanTileLines = 128;

/// One thread per line walks it in order (the CPU's operation order: bit-exact).
std::string scan_sequential_source(ScanOp op, Dtype in, bool exclusive);
/// The same walk for lines whose axis is innermost in memory: kScanTileLines lines per block
/// staged through shared memory in tiles of 32 elements, so loads and stores coalesce.
std::string scan_tiled_source(ScanOp op, Dtype in, bool exclusive);
/// Chunked scan, phase 1: the total of each chunk of kScanChunk elements (`partial`).
/// Phase 3 (`apply`): each chunk scanned from its prefix; `exclusive` only matters there.
std::string scan_chunk_source(ScanOp op, Dtype in, bool apply, bool exclusive);
/// Chunked scan, phase 2: one thread per line turns its chunk totals into exclusive prefixes.
std::string scan_chunk_prefix_source(ScanOp op, Dtype in);

// ---- RandomBits (random.cpp) -------------------------------------------------------------------

/// Mirrors the device struct RbArgs: one block of `s` counters under the key at `key` (two
/// uint32 `key_stride` elements apart).
struct RandomBitsArgs {
  uint64_t key = 0, out = 0;
  int64_t key_stride = 1, s = 0;
};

/// Threefry-2x32 (20 rounds) of counter pairs (j, j + ceil(s/2)), JAX's layout (threefry.h).
std::string random_bits_source();

}  // namespace smelt::cuda
