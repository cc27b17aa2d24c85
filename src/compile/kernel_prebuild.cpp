// Prebuilds a compiled tape's fused GPU kernels on background threads (see kernel_prebuild.h).
#include "src/compile/kernel_prebuild.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "src/codegen/fused_kernel.h"
#if SMELT_HAS_CUDA
#include "src/backend/cuda/attention.h"
#include "src/backend/cuda/kernels.h"
#endif

namespace smelt::compiler {

void prebuild_kernels([[maybe_unused]] const Tape& tape) {
#if SMELT_HAS_CUDA
  const char* env = std::getenv("SMELT_CUDA_PREBUILD");
  if (env && std::string(env) == "0") return;
  for (const Step& s : tape.steps) {
    if (s.device.type != Device::Type::Cuda) continue;
    if (s.prim.kind == PrimKind::Attention) {
      const ValueInfo& q = tape.values[s.inputs[0]];
      cuda::prebuild_attention(s.prim.get<AttentionParams>(), q.shape, q.dtype, tape.values[s.inputs[2]].shape, s.device.index);
      continue;
    }
    if (s.prim.kind != PrimKind::Fused) continue;
    std::vector<Shape> shapes;
    for (int v : s.inputs) shapes.push_back(tape.values[v].shape);
    cuda::prebuild_fused(s.prim.get<FusedParams>().kernel, shapes);
  }
#endif
}

}  // namespace smelt::compiler
