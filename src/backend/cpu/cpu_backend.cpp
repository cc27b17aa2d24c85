// The CPU backend: routes each primitive to its kernel (the registry's X-macro lists them all).
#include "src/backend/backend.h"
#include "src/backend/cpu/kernels.h"
#include "smelt/errors.h"

#if SMELT_HAS_CUDA
#include "src/backend/cuda/cuda.h"
#endif

namespace smelt {

namespace {

class CpuBackend final : public Backend {
 public:
  void eval(const Primitive& prim, const std::vector<Array>& inputs, std::vector<Array>& outputs) override {
    switch (prim.kind) {
      case PrimKind::None:
        SMELT_ASSERT(false, "eval: a leaf has no kernel");
#define X(name, params, n, ...)                                     \
  case PrimKind::name:                                           \
    cpu::eval_##name(prim.get<params>(), inputs, outputs);       \
    return;
        SMELT_PRIMITIVES(X)
#undef X
    }
  }
  Array nonzero(const Array& a) override { return cpu::nonzero(a); }
};

}  // namespace

Backend& backend_for(Device device) {
  static CpuBackend cpu;
  if (device.type == Device::Type::Cpu) return cpu;
#if SMELT_HAS_CUDA
  return cuda::backend(device);
#endif
  throw UnsupportedError("eval: no backend for device " + device.str() + " in this build");
}

}  // namespace smelt
