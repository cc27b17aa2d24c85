// Kernel sources and argument structs of the CUDA Conv, ConvTranspose and Pool kernels.
//
// The sources are pure functions of the dtype and mode (no GPU needed), so that
// tests/backend/cuda/conv_source_test.cpp compiles every variant with NVRTC on machines without
// a GPU. Each argument struct is mirrored by a device struct in its source (the same field types
// in the same order: identical layouts on both sides).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "smelt/dtype.h"
#include "src/primitives/primitive.h"

namespace smelt::cuda {

/// The geometry of a convolution or pooling, spatial axes padded to three in front (a missing
/// axis has size 1, kernel 1, stride 1, dilation 1, no padding), as the CPU's Geom. Strides are
/// in elements for the axes N, C, D, H, W (any sign; 0 for broadcast or missing axes).
struct ConvKernelArgs {
  uint64_t x = 0, w = 0, y = 0;
  int64_t total = 0;                     // number of outputs (row-major [N, Cout, D, H, W])
  int64_t cout = 0, cg = 0, og = 0;      // output channels; input and output channels per group
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
  int64_t xs[5] = {}, ws[5] = {};
};

/// Pooling: `pad` is padding_lo, `pad_hi` padding_hi; x strides as above.
struct PoolKernelArgs {
  uint64_t x = 0, y = 0;
  int64_t total = 0, channels = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, pad_hi[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
  int64_t xs[5] = {};
};

/// The 2-D max pool's arguments: every count and element offset fits 32 bits (max_pool2d_args).
struct MaxPool2dArgs {
  uint64_t x = 0, y = 0;
  uint32_t total = 0, channels = 0, out_h = 0, out_w = 0, in_h = 0, in_w = 0;
  uint32_t k_h = 0, k_w = 0, stride_h = 0, stride_w = 0, pad_h = 0, pad_w = 0;
  uint32_t xs_n = 0, xs_c = 0, xs_h = 0, xs_w = 0;
};

/// `a` (for input shape `x`) as a 2-D max pool of a float16, bfloat16 or float32 input, when it is
/// one: no depth axis, no dilation, non-negative strides, and 32 bits hold every count,
/// coordinate and offset (addresses left 0).
std::optional<MaxPool2dArgs> max_pool2d_args(const PoolKernelArgs& a, const Shape& x, Dtype dtype);

/// A copy of a 5-d window: dst (row-major, dshape) at index i reads src at i + off per axis
/// (src strides `sst`, shape `sshape`), zero outside src. Pads inputs and crops outputs around
/// cuDNN and makes strided operands contiguous.
struct WindowCopyArgs {
  uint64_t src = 0, dst = 0;
  int64_t total = 0;
  int64_t dshape[5] = {}, sshape[5] = {}, sst[5] = {}, off[5] = {};
};

/// The arguments of the direct kernel (device addresses left 0) for input x, weight w and output
/// `out` of any strides: Conv (weight [O, C/groups, K...]) or ConvTranspose ([C, O/groups, K...]).
ConvKernelArgs conv_kernel_args(const Shape& x, const Strides& x_strides, const Shape& w, const Strides& w_strides,
                                const Shape& out, const std::vector<int64_t>& strides,
                                const std::vector<int64_t>& padding_lo, const std::vector<int64_t>& dilations,
                                int64_t groups);
/// The arguments of the pooling kernel (addresses left 0).
PoolKernelArgs pool_kernel_args(const Shape& x, const Strides& x_strides, const Shape& out, const PoolParams& p);
/// The arguments of the window copy (addresses left 0): dst (row-major `dst`) reads src at the
/// same N and C and at spatial index + spatial_off.
WindowCopyArgs window_copy_args(const Shape& src, const Strides& src_strides, const Shape& dst,
                                const std::vector<int64_t>& spatial_off);

/// Direct convolution (transpose = false) or transposed convolution (a gather: each output sums
/// the inputs that reach it), one thread per output, 64-bit indexing, summing in the CPU's
/// order (channel, then kernel offsets d, h, w): integers wrap exactly (u32/u64 arithmetic),
/// float16/bfloat16 accumulate in float32 and round once, float32 in float32, float64 in
/// float64. Any dtype but bool.
std::string conv_direct_source(Dtype dtype, bool transpose);

/// Max or average pooling, one thread per output, in the CPU's order (bit-exact with it): max
/// compares in float for halves (NaN wins and stays), average sums in double (integers in
/// wrapping 64-bit) and divides once by the window count (with or without the padding).
std::string pool_source(Dtype dtype, PoolKind kind, bool count_include_pad);
/// The 2-D max pool of float16, bfloat16 and float32 in 32-bit indexing (no depth axis, no
/// dilation): the same bits as pool_source's, NaN windows computed again exactly. With
/// `channels_last` the outputs are numbered channels-last ([N, OH, OW, C] row-major: the output
/// of PoolParams::block = C), so that a warp reads and writes consecutive channels.
std::string max_pool2d_source(Dtype dtype, bool channels_last = false);

/// WindowCopyArgs's kernel for elements of `itemsize` bytes (1, 2, 4 or 8).
std::string window_copy_source(size_t itemsize);

/// A batched matrix transpose, dst[b][c][r] = src[b][r][c] for row-major [batches, rows, cols]
/// (NCHW <-> NHWC as [N, C, H*W] <-> [N, H*W, C]; an OIHW filter to OHWI as [O, C, KH*KW]).
struct ChannelsTransposeArgs {
  uint64_t src = 0, dst = 0;
  int64_t batches = 0, rows = 0, cols = 0, tiles_r = 0, tiles_c = 0;
};
/// ChannelsTransposeArgs's kernel for elements of `itemsize` bytes (1, 2, 4 or 8): blocks of 256
/// threads move 32 x 32 tiles through shared memory, so that reads and writes are both coalesced;
/// one block per tile (batches * tiles_r * tiles_c blocks).
std::string channels_transpose_source(size_t itemsize);

/// How a ConvTranspose runs as cuDNN's backward data (cuDNN pads symmetrically): the padding per
/// spatial axis, the shape of cuDNN's result, and the spatial offset at which the output reads
/// it (zero outside it); in_place when the result is the output itself. Pure: tested on the CPU.
struct TransposeLayout {
  std::vector<int64_t> pad, offset;
  Shape result;
  bool in_place = true;
};
TransposeLayout cudnn_transpose_layout(const Shape& x, const Shape& w, const Shape& out, const ConvTransposeParams& p);

/// How many convolutions (Conv and ConvTranspose) each path has run in this process: tests
/// check that both the cuDNN and the direct path were exercised.
struct ConvPathCounts {
  int64_t cudnn = 0, direct = 0;
};
ConvPathCounts conv_path_counts();

}  // namespace smelt::cuda
