// A fused kernel ready to run: its program, the device it targets, and the loaded code.
#pragma once

#include <memory>
#include <string>

#include "smelt/device.h"
#include "src/codegen/cpp_emitter.h"
#include "src/codegen/fused_program.h"

namespace smelt::codegen {

struct FusedKernel {
  FusedProgram program;
  Device device;
  std::string hash;         // the build cache key (source, version, compiler)
  CpuKernelFn cpu = nullptr;
  std::shared_ptr<const void> library;  // keeps `cpu`'s code loaded while this kernel lives
};

/// A row program's facts for the shape rules (FusedProgram::reduced_axes > 0): its index space is
/// the inputs' broadcast shape, whose trailing reduced axes are rows; per-row outputs have those
/// axes set to 1.
bool is_row_kernel(const FusedParams& p);
int row_kernel_reduced_axes(const FusedParams& p);
bool row_kernel_output_per_row(const FusedParams& p, size_t output);

/// Whether `device` has kernels for row programs (fused reductions, FusedProgram::reduced_axes).
bool supports_row_programs(Device device);

/// Generates and builds (or loads from the caches) the kernel of `program` for `device`.
/// Throws UnsupportedError when it cannot be built.
std::shared_ptr<const FusedKernel> make_fused_kernel(FusedProgram program, Device device);

/// make_fused_kernel without waiting: null unless this process has the CPU kernel loaded already
/// (tiered execution loads or builds it in the background). GPU kernels never need to wait
/// here (NVRTC builds them at their first launch), so for CUDA this is make_fused_kernel.
std::shared_ptr<const FusedKernel> find_fused_kernel(const FusedProgram& program, Device device);

}  // namespace smelt::codegen
