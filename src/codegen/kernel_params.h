// A kernel's identity: the typed parameters its source is generated from, compared and hashed whole.
//
// Each kernel family describes a kernel by one params struct: its source is a function of the
// struct alone, and the caches key kernels by the struct itself (defaulted equality compares every
// field), so no parameter can change the source without changing the key. The on-disk key is the
// source's hash plus the compiler and version salt (disk_cache.h), so it follows from the params
// too. Families: fused CPU kernels (kernel_builder.cpp, keyed by the FusedProgram), fused CUDA
// kernels (CudaFusedKernelParams, cuda_emitter.h), the CUDA element-wise kernels
// (cuda::EwKernelParams) and the CUDA Reduce rows/columns kernels (cuda::ReduceKernelParams);
// cuda::get_kernel(device, params, what) is the cache for CUDA ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "src/codegen/fused_program.h"

namespace smelt::codegen {

/// A shared, immutable value compared by its content (the same object compares at once): lets a
/// params struct hold a large part (a fused program) by reference and keep a defaulted ==.
template <class T>
struct SharedValue {
  std::shared_ptr<const T> value;
  bool operator==(const SharedValue& o) const { return value == o.value || (value && o.value && *value == *o.value); }
  const T& operator*() const { return *value; }
};

inline size_t hash_mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)); }

/// A hash of every field of the program (equal programs hash equal: it follows ==).
size_t hash_program(const FusedProgram& p);

/// The hash functor of params structs with a hash() member.
struct ParamsHash {
  template <class P>
  size_t operator()(const P& p) const {
    return p.hash();
  }
};

/// The hash functor of fused programs (kernel_builder.cpp's cache key).
struct ProgramHash {
  size_t operator()(const FusedProgram& p) const { return hash_program(p); }
};

}  // namespace smelt::codegen
