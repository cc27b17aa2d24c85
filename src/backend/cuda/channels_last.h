// Which CUDA convolutions and poolings run channels-last: rules shared by the kernels and the compile passes.
//
// cuDNN's tensor-core convolutions for float16 and bfloat16 work on NHWC data and an OHWI
// filter; given NCHW it transposes the input, the filter and the output around every call
// (nchwToNhwc kernels: ~0.6 ms of ResNet-50's 2.6 ms at batch 32 on the H200). The CUDA Conv
// therefore runs every convolution these rules pick in NHWC, eagerly too (transposing with its
// own kernel where the operands are NCHW), and the compile passes conv_prepack and conv_layout
// hand it OHWI weights and NHWC activations (ConvParams::packed_weight, src_block = dst_block =
// C) so that the transposes go away. Eager and compiled calls run the same cuDNN problem: the
// same bits. The rules are pure functions of shapes, dtypes and parameters (no GPU needed), so
// the passes and the kernels cannot disagree.
#pragma once

#include "smelt/dtype.h"
#include "smelt/array.h"
#include "src/primitives/primitive.h"

namespace smelt::cuda {

/// True when a CUDA Conv with input `x` [N, C, H, W], weight `w` [O, C, KH, KW] (logical
/// shapes) runs channels-last: float16 or bfloat16, 2-D, one group, symmetric padding (cuDNN's
/// own), no fused adds (CPU only), O a multiple of 8 and C one too (the tensor-core kernels'
/// vector width) or below 8 (an image's channels: cuDNN has NHWC first-layer kernels for them,
/// and transposed a 3-channel NCHW input to run one).
inline bool conv_runs_channels_last(Dtype dt, const Shape& x, const Shape& w, const ConvParams& p) {
  if (dt != Dtype::Float16 && dt != Dtype::BFloat16) return false;
  if (x.size() != 4 || w.size() != 4 || p.groups != 1 || !p.adds.empty()) return false;
  if (p.padding_lo != p.padding_hi) return false;
  return x[1] > 0 && w[0] > 0 && (x[1] % 8 == 0 || x[1] < 8) && w[0] % 8 == 0;
}

/// True when a CUDA Pool over `x` [N, C, H, W] can read and write channels-last data
/// (PoolParams::block = C): a 2-D max pool of float16, bfloat16 or float32 without dilation whose
/// sizes fit the 32-bit kernel with room (max_pool2d_args takes values below 2^30: here below 2^29
/// elements and windows, strides and padding below 2^20, so that no sum of them reaches 2^30).
inline bool pool_runs_channels_last(Dtype dt, const Shape& x, const PoolParams& p) {
  if (dt != Dtype::Float16 && dt != Dtype::BFloat16 && dt != Dtype::Float32) return false;
  if (p.kind != PoolKind::Max || x.size() != 4 || p.kernel.size() != 2) return false;
  for (int64_t d : p.dilations)
    if (d != 1) return false;
  int64_t elements = 1;
  for (int64_t d : x) {
    if (d <= 0 || d >= (int64_t{1} << 29)) return false;
    elements *= d;
    if (elements >= (int64_t{1} << 29)) return false;
  }
  for (size_t i = 0; i < 2; ++i)
    if (p.kernel[i] >= (int64_t{1} << 20) || p.strides[i] >= (int64_t{1} << 20) ||
        p.padding_lo[i] >= (int64_t{1} << 20) || p.padding_hi[i] >= (int64_t{1} << 20))
      return false;
  return true;
}

}  // namespace smelt::cuda
