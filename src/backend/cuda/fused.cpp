// The CUDA kernel of the Fused primitive: a generated program (codegen/cuda_emitter) built by
// NVRTC per layout, run over the inputs' broadcast strides in the output's index space.
#include <string>
#include <vector>

#include "smelt/errors.h"
#include "src/backend/cpu/kernel_utils.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/kernels.h"
#include "src/codegen/cuda_emitter.h"
#include "src/codegen/fused_kernel.h"

namespace smelt::cuda {

namespace {

/// Mirrors the device struct FusedArgs of cuda_emitter.
struct FusedArgs {
  uint64_t p[codegen::kCudaFusedMaxArgs] = {};
  int64_t n = 0, nd = 0;
  int64_t shape[kMaxDims] = {};
  int64_t st[codegen::kCudaFusedMaxArgs][kMaxDims] = {};
};

}  // namespace

void eval_fused(const FusedParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const codegen::FusedKernel& k = *p.kernel;
  // Error messages name the program; describing it costs more than a launch, so only on demand.
  auto describe = [&] { return "Fused(" + codegen::describe_program(k.program) + ")"; };
  if (k.device.type != Device::Type::Cuda) throw UnsupportedError(describe() + ": the kernel was made for " + k.device.str());
  const Shape& shape = outputs[0].shape();
  const int nd = static_cast<int>(shape.size());
  const size_t nin = inputs.size();
  // Outputs reuse an unreferenced input of the same shape and itemsize (same index read, then
  // written, by one thread), else fresh memory.
  std::vector<char> donated(nin, 0);
  for (auto& out : outputs) {
    bool done = false;
    for (size_t i = 0; i < nin && !done; ++i) {
      if (donated[i] || inputs[i].shape() != shape || !(inputs[i].device() == out.device())) continue;
      if (cpu::try_donate(out, inputs[i])) donated[i] = done = true;
    }
    if (!done) alloc_output(out);
  }
  FusedArgs args;
  args.n = outputs[0].size();
  for (size_t i = 0; i < nin; ++i) args.p[i] = dptr(inputs[i]);
  for (size_t o = 0; o < outputs.size(); ++o) args.p[nin + o] = dptr(outputs[o]);
  if (args.n == 0) return;
  DeviceState& s = state_of(outputs[0]);
  // Layout: flat when every input is the output's shape and contiguous, or a single value.
  std::string layout;
  bool flat = true;
  std::vector<Strides> strides(nin, Strides(nd, 0));
  for (size_t i = 0; i < nin; ++i) {  // every input's strides: the strided path needs them all
    const auto& n = inputs[i].node();
    const int off = nd - static_cast<int>(n.shape.size());
    for (int d = 0; d < static_cast<int>(n.shape.size()); ++d) strides[i][off + d] = n.shape[d] == 1 ? 0 : n.strides[d];
    if (n.shape == shape && is_row_contiguous(n.shape, n.strides)) layout += 'c';
    else if (n.size() == 1) layout += 's';
    else flat = false;
  }
  if (!flat) layout = "strided";
  if (layout == "strided") {
    // Collapse axes mergeable for every input (outputs are row-major).
    int64_t cnd = 0;
    for (int d = 0; d < nd; ++d) {
      if (shape[d] == 1) continue;
      bool merge = cnd > 0;
      for (size_t i = 0; i < nin && merge; ++i) merge = args.st[i][cnd - 1] == strides[i][d] * shape[d];
      if (merge) {
        args.shape[cnd - 1] *= shape[d];
        for (size_t i = 0; i < nin; ++i) args.st[i][cnd - 1] = strides[i][d];
        continue;
      }
      if (cnd == kMaxDims)
        throw UnsupportedError(describe() + ": more than " + std::to_string(kMaxDims) + " non-mergeable axes in shape " +
                               shape_to_string(shape));
      args.shape[cnd] = shape[d];
      for (size_t i = 0; i < nin; ++i) args.st[i][cnd] = strides[i][d];
      ++cnd;
    }
    args.nd = cnd;
  }
  // 16-byte vectors on the flat layout when every contiguous operand allows them (buffers are
  // 256-byte aligned; a view's offset may not be).
  bool vectorized = flat;
  for (size_t i = 0; i < nin && vectorized; ++i)
    if (layout[i] == 'c') vectorized = args.p[i] % 16 == 0;
  for (size_t o = 0; o < outputs.size() && vectorized; ++o) vectorized = args.p[nin + o] % 16 == 0;
  const std::string key = "fused|" + k.hash + "|" + layout + (vectorized ? "|v" : "");
  CUfunction fn = find_kernel(s.index, key);
  if (!fn)
    fn = get_kernel(s.index, key, [&] { return codegen::emit_cuda_kernel(k.program, layout, vectorized); }, describe());
  const unsigned block = occupancy_block_size(fn);
  const int64_t per_thread = vectorized ? codegen::cuda_vector_width(k.program, layout) : (flat ? 4 : 1);
  launch(s, fn, blocks_for(args.n, static_cast<int64_t>(block) * per_thread), block, &args, "Fused");
}

}  // namespace smelt::cuda
