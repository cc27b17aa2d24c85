// The CUDA backend: routes each primitive to its kernel, views, and host<->device transfers.
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "smelt/errors.h"
#include "smelt/ops.h"
#include "src/backend/backend.h"
#include "src/backend/cpu/kernels.h"
#include "src/backend/cuda/allocator.h"
#include "src/backend/cuda/attention.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/kernels.h"
#include "src/core/allocator.h"
#include "src/core/transfer_counts.h"

namespace smelt::cuda {

namespace {

class CudaBackend final : public Backend {
 public:
  void eval(const Primitive& prim, const std::vector<Array>& inputs, std::vector<Array>& outputs) override {
    eval_node(prim, inputs, outputs);
    // Inputs are still held here: with several streams they are not freed before this wait.
    finish_node(outputs[0].device(), "eval");
  }

 private:
  void eval_node(const Primitive& prim, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
    Array& out = outputs[0];
    switch (prim.kind) {
      case PrimKind::None: SMELT_ASSERT(false, "eval: a leaf has no kernel"); return;
      case PrimKind::Full: eval_full(prim.get<FullParams>(), out); return;
      case PrimKind::Arange: eval_arange(prim.get<ArangeParams>(), out); return;
      case PrimKind::Unary: eval_unary(prim.get<UnaryParams>(), inputs, out); return;
      case PrimKind::Binary: eval_binary(prim.get<BinaryParams>(), inputs, out); return;
      case PrimKind::Select: eval_select(inputs, out); return;
      case PrimKind::Cast: eval_cast(prim.get<CastParams>(), inputs, out); return;
      case PrimKind::Copy: eval_copy(inputs, out); return;
      case PrimKind::Reshape: eval_reshape(prim.get<ShapeParams>(), inputs, out); return;
      // Views only compute strides: the CPU's code is device-independent metadata.
      case PrimKind::Transpose: cpu::eval_Transpose(prim.get<PermParams>(), inputs, outputs); return;
      case PrimKind::Broadcast: cpu::eval_Broadcast(prim.get<ShapeParams>(), inputs, outputs); return;
      case PrimKind::Slice: cpu::eval_Slice(prim.get<SliceParams>(), inputs, outputs); return;
      case PrimKind::Reduce: eval_reduce(prim.get<ReduceParams>(), inputs, out); return;
      case PrimKind::ArgReduce: eval_argreduce(prim.get<ArgReduceParams>(), inputs, out); return;
      case PrimKind::Matmul:
        // The bias is a CPU compile pass's (matmul_bias); GPU tapes never carry one.
        SMELT_ASSERT(prim.get<MatmulParams>().bias == MatmulBias::None, "Matmul: a bias reached the GPU");
        eval_matmul(inputs, out);
        return;
      case PrimKind::Conv: eval_conv(prim.get<ConvParams>(), inputs, out); return;
      case PrimKind::ConvTranspose: eval_conv_transpose(prim.get<ConvTransposeParams>(), inputs, out); return;
      case PrimKind::Pool: eval_pool(prim.get<PoolParams>(), inputs, out); return;
      case PrimKind::SliceUpdate: eval_slice_update(prim.get<SliceParams>(), inputs, out); return;
      case PrimKind::Concatenate: eval_concatenate(prim.get<AxisParams>(), inputs, out); return;
      case PrimKind::Pad: eval_pad(prim.get<PadParams>(), inputs, out); return;
      case PrimKind::Gather: eval_gather(prim.get<AxisParams>(), inputs, out); return;
      case PrimKind::GatherElements: eval_gather_elements(prim.get<AxisParams>(), inputs, out); return;
      case PrimKind::GatherND: eval_gather_nd(prim.get<GatherNDParams>(), inputs, out); return;
      case PrimKind::Scatter: eval_scatter(prim.get<ScatterParams>(), inputs, out); return;
      case PrimKind::ScatterND: eval_scatter_nd(prim.get<ScatterParams>(), inputs, out); return;
      case PrimKind::Scan: eval_scan(prim.get<ScanParams>(), inputs, out); return;
      case PrimKind::Sort: eval_sort(prim.get<SortParams>(), inputs, out); return;
      case PrimKind::ArgSort: eval_argsort(prim.get<SortParams>(), inputs, out); return;
      case PrimKind::TopK: eval_topk(prim.get<TopKParams>(), inputs, outputs); return;
      case PrimKind::RandomBits: eval_random_bits(inputs, out); return;
      case PrimKind::Attention: eval_attention(prim.get<AttentionParams>(), inputs, outputs); return;
      case PrimKind::Fused: eval_fused(prim.get<FusedParams>(), inputs, outputs); return;
    }
  }

 public:
  Array nonzero(const Array& a) override {
    Array r = eval_nonzero(a);
    finish_node(a.device(), "nonzero");
    return r;
  }
};

}  // namespace

void eval_reshape(const ShapeParams& p, const std::vector<Array>& inputs, Array& out) {
  const auto& in = inputs[0].node();
  auto& o = out.node();
  Strides view;
  if (is_row_contiguous(in.shape, in.strides)) {
    view = row_major_strides(p.shape);
  } else if (!reshape_view_strides(in.shape, in.strides, p.shape, view)) {
    alloc_output(out);
    copy_to_contiguous(inputs[0], out);
    return;
  }
  o.buffer = in.buffer;
  o.strides = std::move(view);
  o.offset = in.offset;
}

Backend& backend(Device device) {
  static CudaBackend* b = new CudaBackend();  // stateless; never destroyed
  device_state(device.index);                 // DeviceError for a GPU that does not exist
  return *b;
}

void synchronize(Device device) {
  // Every stream of the device, whichever thread queued on it.
  synchronize_all_streams(device_state(device.index), "synchronize");
}

void transfer(const Array& in, Array& out) {
  const Device src = in.device(), dst = out.device();
  auto& o = out.node();
  const size_t bytes = static_cast<size_t>(in.size()) * in.itemsize();
  if (src.type == Device::Type::Cpu && dst.type == Device::Type::Cuda) {
    alloc_output(out);
    if (bytes == 0) return;
    const auto& n = in.node();
    smelt::detail::count_host_to_device(bytes);
    if (in.size() == 1) {
      // A single value (scalar operands of every op): a fill, queued without a host wait.
      uint64_t bits = 0;
      std::memcpy(&bits, n.data_ptr(), n.itemsize());
      fill_bits(out, bits);
      finish_node(out.device(), "to_device");
      return;
    }
    Array host = in;
    if (!is_row_contiguous(n.shape, n.strides)) {
      host = copy(in);
      host.eval();
    }
    DeviceState& s = state_of(out);
    const DriverApi& d = *driver();
    check(d.cuMemcpyHtoDAsync(static_cast<CUdeviceptr>(dptr(out)), host.node().data_ptr(), bytes, current_stream(s)),
          "cuMemcpyHtoDAsync", "to_device");
    // The host buffer may be freed as soon as this returns.
    check(d.cuStreamSynchronize(current_stream(s)), "cuStreamSynchronize", "to_device");
    return;
  }
  if (src.type == Device::Type::Cuda && dst.type == Device::Type::Cpu) {
    Array dev = in;
    if (!is_row_contiguous(in.node().shape, in.node().strides)) {
      dev = make_array(in.shape(), in.dtype(), src, make_prim(PrimKind::Copy, NoParams{}), {in});
      dev.eval();
    }
    o.buffer = cpu_allocator().allocate(bytes);
    o.strides = row_major_strides(o.shape);
    o.offset = 0;
    if (bytes == 0) return;
    smelt::detail::count_device_to_host(bytes);
    DeviceState& s = state_of(dev);
    const DriverApi& d = *driver();
    check(d.cuMemcpyDtoHAsync(o.buffer->ptr, static_cast<CUdeviceptr>(dptr(dev)), bytes, current_stream(s)),
          "cuMemcpyDtoHAsync", "to_device");
    check(d.cuStreamSynchronize(current_stream(s)), "cuStreamSynchronize", "to_device");
    return;
  }
  // GPU to another GPU: through the host (correct; peer copies are a later optimization).
  Array host = to_device(in, Device::cpu());
  host.eval();
  transfer(host, out);
}

}  // namespace smelt::cuda
