// Hashes of the fused-kernel IR for the kernel caches keyed by it (kernel_params.h).
#include "src/codegen/kernel_params.h"

namespace smelt::codegen {

size_t hash_program(const FusedProgram& p) {
  size_t h = std::hash<size_t>()(p.input_dtypes.size());
  for (Dtype d : p.input_dtypes) h = hash_mix(h, static_cast<size_t>(d));
  for (const Instr& in : p.instrs) {
    h = hash_mix(h, static_cast<size_t>(in.kind));
    h = hash_mix(h, static_cast<size_t>(in.dtype));
    for (int o : in.operands) h = hash_mix(h, static_cast<size_t>(o));
    h = hash_mix(h, static_cast<size_t>(in.index));
    h = hash_mix(h, static_cast<size_t>(in.unary));
    h = hash_mix(h, static_cast<size_t>(in.binary));
    h = hash_mix(h, in.value.hash());
    h = hash_mix(h, static_cast<size_t>(in.reduce));
    h = hash_mix(h, static_cast<size_t>(in.ddof));
    h = hash_mix(h, static_cast<size_t>(in.per_row));
  }
  for (int o : p.outputs) h = hash_mix(h, static_cast<size_t>(o));
  return hash_mix(h, static_cast<size_t>(p.reduced_axes));
}

}  // namespace smelt::codegen
