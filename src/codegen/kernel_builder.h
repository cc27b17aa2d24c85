// Building fused CPU kernels: the system C++ compiler, an in-memory cache and a disk cache.
#pragma once

#include <string>

#include "src/codegen/cpp_emitter.h"

namespace smelt::codegen {

/// A loaded kernel and what it cost.
struct BuiltKernel {
  CpuKernelFn fn = nullptr;
  std::string hash;  // of the source, smelt's version and the compiler: the cache key
};

/// Returns the kernel for `program`, from memory, else from the disk cache, else by compiling
/// it (emitting `compile.kernel.build`). Throws UnsupportedError when no compiler works.
BuiltKernel get_cpu_kernel(const FusedProgram& program);

/// The disk cache folder: $SMELT_CACHE_DIR, else ~/.cache/smelt (created on first use).
std::string kernel_cache_dir();

}  // namespace smelt::codegen
