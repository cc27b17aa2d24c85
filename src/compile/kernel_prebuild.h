// Builds a compiled program's GPU kernels side by side before its first call launches them.
#pragma once

#include "src/compile/tape.h"

namespace smelt::compiler {

/// Queues the kernel of every fused and flash-attention GPU step of `tape` on the prebuild
/// threads and returns at once (cuda::prebuild_fused, cuda::prebuild_attention): NVRTC builds each in 20-60 ms, so a first call that built them
/// one after another as it reached them waited for their sum. The first call's launches wait
/// for the kernels being built (never built twice); a kernel already loaded costs a lookup.
/// Off with SMELT_CUDA_PREBUILD=0 (read per call) or without the CUDA backend.
void prebuild_kernels(const Tape& tape);

}  // namespace smelt::compiler
