// Fused kernels: building them for a device, and their identity as primitive parameters.
#include "src/codegen/fused_kernel.h"

#include "smelt/errors.h"
#include "src/codegen/kernel_builder.h"

namespace smelt::codegen {

std::shared_ptr<const FusedKernel> make_fused_kernel(FusedProgram program, Device device) {
  if (device.type != Device::Type::Cpu)
    throw UnsupportedError("fuse: no fused-kernel code generator for " + device.str() + " yet");
  auto k = std::make_shared<FusedKernel>();
  BuiltKernel built = get_cpu_kernel(program);
  k->program = std::move(program);
  k->device = device;
  k->hash = built.hash;
  k->cpu = built.fn;
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
