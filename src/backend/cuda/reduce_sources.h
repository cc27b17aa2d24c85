// CUDA sources of the Reduce kernels' rows and columns plans (pure: no GPU), compiled for sm_90 by
// tests/backend/cuda/reduce_source_test.cpp on machines without a GPU.
#pragma once

#include <cstdint>
#include <string>

#include "smelt/dtype.h"
#include "src/primitives/primitive.h"

namespace smelt::cuda {

/// The kernel reducing rows (codegen/gpu_row_order.h's order) of `in` into `out`; with
/// `partial`, each (row, chunk) writes its accumulator for reduce_rows_combine_source.
std::string reduce_rows_source(ReduceOp op, Dtype in, Dtype out, bool partial);
/// The kernel combining a split row's chunk accumulators in order.
std::string reduce_rows_combine_source(ReduceOp op, Dtype in, Dtype out);
/// The same order as reduce_rows_source's for rows of 32 * `warps` threads (8 or 16) that are
/// not split, run by one warp a row (blocks of 256: 8 rows) which replays the block's threads
/// and tree: the same bits, without barriers and with more loads in flight.
std::string reduce_rows_warp_source(ReduceOp op, Dtype in, Dtype out, int warps);

/// The columns plan's kernel (input [outer, m, inner] row-major, m reduced; with `partial`,
/// groups of m's rows in separate blocks, whose accumulators the last block of each tile to finish
/// combines in order; each thread takes `vec` neighbouring columns, moved as one vector per row
/// when vec > 1: inner must be a multiple of vec and the input 16-byte aligned).
std::string reduce_columns_source(ReduceOp op, Dtype in, Dtype out, bool partial, int vec = 1);

/// One kernel of the rows or columns plan: source() is the generator above for `plan` called
/// with these fields; cuda::get_kernel keys it by the whole struct (codegen/kernel_params.h).
struct ReduceKernelParams {
  enum class Plan : uint8_t { Rows, RowsWarp, RowsCombine, Columns };
  Plan plan;
  ReduceOp op;
  Dtype in, out;
  bool partial = false;  // Rows and Columns: per-chunk accumulators, combined in order
  int vec = 1;           // Columns: neighbouring columns per thread
  int warps = 0;         // RowsWarp: the warps of the order's block a warp replays

  bool operator==(const ReduceKernelParams&) const = default;
  size_t hash() const;
  /// "reduce_rows|sum|float32|float32|split", ...: names it in telemetry and launch errors.
  std::string name() const;
  std::string source() const;
};

}  // namespace smelt::cuda
