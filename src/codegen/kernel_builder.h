// Building fused CPU kernels: the system C++ compiler, an in-memory cache and a disk cache.
#pragma once

#include <memory>
#include <string>

#include "src/codegen/cpp_emitter.h"
#include "src/codegen/disk_cache.h"

namespace smelt::codegen {

/// A loaded kernel. `library` keeps its code loaded: the shared library is unloaded (dlclose)
/// when the last BuiltKernel/FusedKernel holding it is gone, so `fn` is valid while it lives.
struct BuiltKernel {
  CpuKernelFn fn = nullptr;
  std::string hash;  // of the source, smelt's version and the compiler: the cache key
  std::shared_ptr<const void> library;
};

/// Returns the kernel for `program`, from memory, else from the disk cache, else by compiling
/// it (emitting `compile.kernel.build`). Throws UnsupportedError when no compiler works.
BuiltKernel get_cpu_kernel(const FusedProgram& program);

/// How many generated CPU kernel libraries this process has loaded now.
size_t loaded_cpu_kernels();

}  // namespace smelt::codegen
