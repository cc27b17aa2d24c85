// Fused kernels: building them for a device, and their identity as primitive parameters.
#include "src/codegen/fused_kernel.h"

#include <cstdio>
#include <functional>
#include <string>

#include "smelt/errors.h"
#include "src/codegen/cuda_emitter.h"
#include "src/codegen/kernel_builder.h"
#include "src/codegen/kernel_params.h"

namespace smelt::codegen {

bool is_row_kernel(const FusedParams& p) { return p.kernel && p.kernel->program.is_row_program(); }
int row_kernel_reduced_axes(const FusedParams& p) { return p.kernel ? p.kernel->program.reduced_axes : 0; }
bool row_kernel_output_per_row(const FusedParams& p, size_t o) {
  return p.kernel && p.kernel->program.instrs[p.kernel->program.outputs[o]].per_row;
}

bool supports_row_programs(Device device) {
  return device.type == Device::Type::Cpu || device.type == Device::Type::Cuda;
}

std::shared_ptr<const FusedKernel> make_fused_kernel(FusedProgram program, Device device) {
#if SMELT_HAS_CUDA
  if (device.type == Device::Type::Cuda) {
    // The GPU kernel is built by NVRTC on first use (src/backend/cuda/fused.cpp), per layout.
    const size_t nargs = program.input_dtypes.size() + program.outputs.size();
    if (nargs > static_cast<size_t>(kCudaFusedMaxArgs))
      throw UnsupportedError("fuse: a fused CUDA kernel takes at most " + std::to_string(kCudaFusedMaxArgs) +
                             " inputs and outputs; this group has " + std::to_string(nargs));
    auto k = std::make_shared<FusedKernel>();
    char hex[17];
    // The program's content, every field (a row program's reductions included): the kernels
    // themselves are built and keyed per layout by CudaFusedKernelParams.
    std::snprintf(hex, sizeof hex, "%016zx", hash_program(program));
    k->program = std::move(program);
    k->device = device;
    k->hash = std::string("cuda-") + hex;
    return k;
  }
#endif
  if (device.type != Device::Type::Cpu)
    throw UnsupportedError("fuse: no fused-kernel code generator for " + device.str() + " yet");
  auto k = std::make_shared<FusedKernel>();
  BuiltKernel built = get_cpu_kernel(program);
  k->program = std::move(program);
  k->device = device;
  k->hash = built.hash;
  k->cpu = built.fn;
  k->library = std::move(built.library);
  return k;
}

std::shared_ptr<const FusedKernel> find_fused_kernel(const FusedProgram& program, Device device) {
  if (device.type != Device::Type::Cpu) return make_fused_kernel(program, device);
  std::optional<BuiltKernel> built = find_cpu_kernel(program);
  if (!built) return nullptr;
  auto k = std::make_shared<FusedKernel>();
  k->program = program;
  k->device = device;
  k->hash = built->hash;
  k->cpu = built->fn;
  k->library = std::move(built->library);
  return k;
}

}  // namespace smelt::codegen

namespace smelt {

bool FusedParams::operator==(const FusedParams& o) const {
  if (kernel == o.kernel) return true;
  return kernel && o.kernel && kernel->hash == o.kernel->hash && kernel->program == o.kernel->program;
}

size_t FusedParams::hash() const { return kernel ? std::hash<std::string>()(kernel->hash) : 0; }

std::string FusedParams::str() const { return kernel ? codegen::describe_program(kernel->program) : "?"; }

}  // namespace smelt
