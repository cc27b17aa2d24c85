// The CUDA kernel of the Fused primitive: a generated program (codegen/cuda_emitter) built by
// NVRTC per layout, run over the inputs' broadcast strides in the output's index space.
#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "smelt/errors.h"
#include "src/backend/cpu/kernel_utils.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/kernels.h"
#include "src/codegen/cuda_emitter.h"
#include "src/codegen/fused_kernel.h"
#include "src/codegen/gpu_row_order.h"
#include "src/codegen/row_plan.h"

namespace smelt::cuda {

namespace {

/// Mirrors the device struct FusedArgs of cuda_emitter.
struct FusedArgs {
  uint64_t p[codegen::kCudaFusedMaxArgs] = {};
  int64_t n = 0, nd = 0;
  int64_t shape[kMaxDims] = {};
  int64_t st[codegen::kCudaFusedMaxArgs][kMaxDims] = {};
};

/// Mirrors the device struct RowArgs of emit_cuda_row_kernel.
struct RowArgs {
  uint64_t p[codegen::kCudaFusedMaxArgs] = {};
  int64_t rows = 0, n = 0, groups = 1, chunk = 0, threads = 256, knd = 0, rnd = 0, cache = 0, cbytes = 0;
  int64_t kshape[kMaxDims] = {};
  int64_t kst[codegen::kCudaFusedMaxArgs][kMaxDims] = {};
  int64_t rshape[kMaxDims] = {};
  int64_t rst[codegen::kCudaFusedMaxArgs][kMaxDims] = {};
};

/// Collapses `shape`'s axes where every input's strides allow; throws past kMaxDims axes.
int64_t collapse(const Shape& shape, const std::vector<Strides>& st, int64_t* out_shape, int64_t (*out_st)[kMaxDims],
                 const std::function<std::string()>& describe) {
  int64_t cnd = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = cnd > 0;
    for (size_t i = 0; i < st.size() && merge; ++i) merge = out_st[i][cnd - 1] == st[i][d] * shape[d];
    if (merge) {
      out_shape[cnd - 1] *= shape[d];
      for (size_t i = 0; i < st.size(); ++i) out_st[i][cnd - 1] = st[i][d];
      continue;
    }
    if (cnd == kMaxDims)
      throw UnsupportedError(describe() + ": more than " + std::to_string(kMaxDims) + " non-mergeable axes in shape " +
                             shape_to_string(shape));
    out_shape[cnd] = shape[d];
    for (size_t i = 0; i < st.size(); ++i) out_st[i][cnd] = st[i][d];
    ++cnd;
  }
  if (cnd == 0) {
    out_shape[0] = 1;
    cnd = 1;
  }
  return cnd;
}

/// What launching a row program needs from its plan, found once per program (planning the
/// passes on every launch would cost more than the launch) and kept for at most 4096 programs:
/// the bytes per row element of the inputs its kernel caches (gpu_row_cached_inputs, each
/// input's row later rounded up to 16 bytes) and whether its rows may go in registers.
struct RowProgramInfo {
  std::vector<int64_t> cached_sizes;
  codegen::GpuRowRegisters registers;
  std::vector<int> element_inputs;  // the inputs some pass reads per element
};

std::shared_ptr<const RowProgramInfo> row_program_info(const codegen::FusedKernel& k) {
  static std::mutex mutex;
  static auto* infos = new std::unordered_map<codegen::FusedProgram, std::shared_ptr<const RowProgramInfo>, codegen::ProgramHash>();
  std::lock_guard lock(mutex);
  auto it = infos->find(k.program);
  if (it == infos->end()) {
    auto info = std::make_shared<RowProgramInfo>();
    for (int in : codegen::gpu_row_cached_inputs(k.program))
      info->cached_sizes.push_back(static_cast<int64_t>(size_of(k.program.input_dtypes[in])));
    info->registers = codegen::gpu_row_registers(k.program);
    std::vector<char> read(k.program.input_dtypes.size(), 0);
    for (const codegen::RowLoop& loop : codegen::plan_row_program(k.program, false).loops)
      for (int i : loop.compute)
        if (k.program.instrs[i].kind == codegen::InstrKind::Input && !k.program.instrs[i].per_row) read[k.program.instrs[i].index] = 1;
    for (size_t in = 0; in < read.size(); ++in)
      if (read[in]) info->element_inputs.push_back(static_cast<int>(in));
    // Bounded: a program with a new constant per call (a static float) adds an entry each time.
    if (infos->size() >= 4096) infos->clear();
    it = infos->emplace(k.program, std::move(info)).first;
  }
  return it->second;
}

/// The kernel's program as a params field, sharing the FusedKernel (no copy per launch).
codegen::SharedValue<codegen::FusedProgram> program_of(const std::shared_ptr<const codegen::FusedKernel>& k) {
  return {std::shared_ptr<const codegen::FusedProgram>(k, &k->program)};
}

/// A row program's kernel layout: "rows" (the cached-row kernel) when its rows do not go in
/// registers (vectors == 0), else the pipelined kernel's for clean rows or the register kernel's
/// (codegen::register_row_layout), exact when rows of n fill the threads' vectors.
std::string row_kernel_layout(int vectors, bool clean, const codegen::GpuRowOrder& order, int vec, int64_t n) {
  if (vectors == 0) return "rows";
  const bool exact = n == codegen::gpu_row_register_exact_n(order.threads, vec, vectors);
  return codegen::register_row_layout(clean, vectors, static_cast<int>(order.threads), exact);
}

/// An element-wise input's flat layout letter over the output's `shape` ('c' the output's shape
/// and row-major, 's' one value, 'r'/'q'/'m' a contiguous suffix/prefix/middle block broadcast
/// along the other axes, codegen::cuda_flat_layout, with its repeat in `inner` and a middle
/// block's size in `count`), or 0: the strided layout. `st` holds the input's strides broadcast
/// to the output's axes.
char flat_layout_letter(const Shape& shape, const Shape& in, const Strides& st, bool row_major, int64_t& inner,
                        int64_t& count) {
  if (in == shape && row_major) return 'c';
  if (shape_size(in) == 1) return 's';
  return codegen::cuda_flat_layout(shape, st, inner, &count);
}

/// Whether a flat layout letter reads its input through a repeat (`inner` in args.st[i][0]).
bool repeats(char letter) { return letter == 'r' || letter == 'q' || letter == 'm'; }

/// Whether a thread's vector lies in one repeat of every 'r', 'q' and 'm' input (inner a multiple
/// of the program's vector width on `layout`).
bool repeats_hold_vectors(const codegen::FusedProgram& program, const std::string& layout, const std::vector<int64_t>& inner) {
  const int width = codegen::cuda_vector_width(program, layout);
  for (size_t i = 0; i < layout.size(); ++i)
    if (repeats(layout[i]) && inner[i] % width != 0) return false;
  return true;
}

/// A row program: one warp or block per row (codegen/gpu_row_order.h).
void eval_fused_rows(const std::shared_ptr<const codegen::FusedKernel>& kernel, const std::vector<Array>& inputs,
                     std::vector<Array>& outputs, const std::function<std::string()>& describe) {
  const std::string what = "Fused";  // launch errors; builds and layout errors describe the program
  const codegen::FusedKernel& k = *kernel;
  Shape full;
  for (const auto& in : inputs) full = broadcast_shapes(full, in.shape());
  const int nd = static_cast<int>(full.size()), nred = k.program.reduced_axes;
  for (auto& out : outputs) alloc_output(out);
  const size_t nin = inputs.size();
  const Shape kept(full.begin(), full.end() - nred), red(full.end() - nred, full.end());
  RowArgs args;
  args.rows = shape_size(kept);
  args.n = shape_size(red);
  if (args.rows == 0) return;
  std::vector<Strides> kst(nin, Strides(kept.size(), 0)), rst(nin, Strides(red.size(), 0));
  for (size_t i = 0; i < nin; ++i) {
    const auto& node = inputs[i].node();
    const int off = nd - static_cast<int>(node.shape.size());
    for (int d = 0; d < static_cast<int>(node.shape.size()); ++d) {
      const int64_t st = node.shape[d] == 1 ? 0 : node.strides[d];
      const int fd = off + d;
      if (fd < nd - nred) kst[i][fd] = st;
      else rst[i][fd - (nd - nred)] = st;
    }
    args.p[i] = dptr(inputs[i]);
  }
  for (size_t o = 0; o < outputs.size(); ++o) args.p[nin + o] = dptr(outputs[o]);
  args.knd = collapse(kept, kst, args.kshape, args.kst, describe);
  args.rnd = collapse(red, rst, args.rshape, args.rst, describe);
  const codegen::GpuRowOrder order = codegen::gpu_row_order(args.rows, args.n);
  args.groups = order.groups;
  args.chunk = order.chunk;
  args.threads = order.threads;
  DeviceState& s = state_of(outputs[0]);
  const std::shared_ptr<const RowProgramInfo> info_held = row_program_info(k);
  const RowProgramInfo& info = *info_held;
  // Rows that fit in registers: blocks of 256 threads (512 for long rows). Clean rows
  // (consecutive, 16-byte aligned, whole vectors) take the pipelined kernel: persistent blocks,
  // as many as fit on the GPU at once, each taking several rows with the next one's copy in
  // flight while it computes one.
  if (const int vectors = codegen::gpu_row_register_vectors(info.registers, order, args.n); vectors > 0) {
    const int block = codegen::gpu_row_register_block(order);
    const uint64_t needed = order.threads == 32 ? blocks_for(args.rows, 256 / 32) : static_cast<uint64_t>(args.rows);
    bool clean = args.rnd == 1 && args.n % info.registers.vec == 0;
    for (int in : info.element_inputs) {
      const int64_t size = static_cast<int64_t>(size_of(inputs[in].dtype()));
      clean = clean && args.rst[in][0] == 1 && args.p[in] % 16 == 0;
      for (int64_t d = 0; d < args.knd && clean; ++d) clean = (args.kst[in][d] * size) % 16 == 0;
    }
    for (size_t o = 0; o < outputs.size(); ++o) clean = clean && args.p[nin + o] % 16 == 0;
    const Kernel fn = get_kernel(s.index, codegen::CudaFusedKernelParams{program_of(kernel), row_kernel_layout(vectors, clean, order, info.registers.vec, args.n), false}, describe);
    if (!clean) {
      launch(s, fn, needed, static_cast<unsigned>(block), &args, what, 0);
      return;
    }
    const uint64_t stage = codegen::gpu_row_register_stage_bytes(info.registers, vectors, block);
    const int blocks = blocks_per_sm(fn, static_cast<unsigned>(block), stage);
    prefer_shared_memory(s, fn, blocks, stage);
    const uint64_t resident = static_cast<uint64_t>(s.sm_count) * static_cast<uint64_t>(blocks);
    launch(s, fn, codegen::gpu_row_persistent_grid(needed, resident), static_cast<unsigned>(block), &args, what, stage);
    return;
  }
  // Inputs that several passes read are copied once per row into dynamic shared memory when
  // the block's rows fit (one slot per row: 8 warp rows or 1 block row): warp rows within
  // kGpuWarpRowCacheMaxBytes, a block row within what the device allows a block (less 1 KiB
  // for the kernel's own static shared memory, 72 bytes).
  const int64_t rows_per_block = order.threads == 32 ? 256 / 32 : 1;
  for (int64_t size : info.cached_sizes) args.cbytes += (args.n * size + 15) / 16 * 16;
  uint64_t shared = 0;
  if (args.cbytes > 0) {
    const int64_t bytes = args.cbytes * rows_per_block;
    const int64_t device_limit = static_cast<int64_t>(s.smem_per_block_optin) - 1024;
    const int64_t limit = order.threads == 32 ? std::min(codegen::kGpuWarpRowCacheMaxBytes, device_limit) : device_limit;
    if (bytes <= limit) {
      args.cache = 1;
      shared = static_cast<uint64_t>(bytes);
    }
  }
  // A block row with a large cache leaves room for one or two blocks an SM: more threads copy
  // its row and run its epilogue (the first 256 still reduce, in the same order).
  unsigned block = 256;
  if (order.threads != 32 && shared > 48 * 1024) block = shared > 112 * 1024 ? 1024 : 512;
  if (order.threads == 512) block = std::max(block, 512u);  // every thread reduces
  // (Capping the registers so that 6 or 8 blocks of 256 fit an SM was measured on the H200 and
  // made W4 and W6 slower: 158 -> 200-205 us, 308 -> 356-409 us. The row kernels are bound by
  // the latency of each row's copy, tree and epilogue, not by occupancy. Two rows in flight a
  // block in the pipelined kernel, a double stage, was measured too: W4 87.7 -> 89.3 us, W6
  // 160.0 -> 166.9 us, no gain, so one row stays in flight.)
  const Kernel fn = get_kernel(s.index, codegen::CudaFusedKernelParams{program_of(kernel), "rows", false}, describe);
  const uint64_t grid = order.threads == 32 ? blocks_for(args.rows, rows_per_block) : static_cast<uint64_t>(args.rows);
  launch(s, fn, grid, block, &args, what, shared);
}

/// An element-wise program over the output's index: the flat layouts (vectorized when aligned)
/// or, unless `flat_only`, the strided one. Returns false, having done nothing, when `flat_only`
/// and an input needs the strided layout.
bool run_elementwise_program(const std::shared_ptr<const codegen::FusedKernel>& kernel, const std::vector<Array>& inputs,
                             std::vector<Array>& outputs, const std::function<std::string()>& describe, bool flat_only) {
  const codegen::FusedKernel& k = *kernel;
  const Shape& shape = outputs[0].shape();
  const int nd = static_cast<int>(shape.size());
  const size_t nin = inputs.size();
  FusedArgs args;
  // Layout: flat when every input is the output's shape and contiguous, a single value, or a
  // contiguous suffix, prefix or middle block of the output's axes broadcast along the others
  // ('r', 'q', 'm': codegen::cuda_flat_layout; 'm' is a per-channel value over [N, C, H, W],
  // which the strided layout indexed with a 64-bit division per axis and element: ResNet-50's
  // batch-norm and ReLU kernels ran at 0.1 of the copy rate); else strided.
  std::string layout;
  bool flat = true;
  std::vector<Strides> strides(nin, Strides(nd, 0));
  std::vector<int64_t> inner(nin, 0), count(nin, 0);
  for (size_t i = 0; i < nin; ++i) {  // every input's strides: the strided path needs them all
    const auto& n = inputs[i].node();
    const int off = nd - static_cast<int>(n.shape.size());
    for (int d = 0; d < static_cast<int>(n.shape.size()); ++d) strides[i][off + d] = n.shape[d] == 1 ? 0 : n.strides[d];
    if (char l = flat_layout_letter(shape, n.shape, strides[i], is_row_contiguous(n.shape, n.strides), inner[i], count[i]))
      layout += l;
    else flat = false;
  }
  if (!flat && flat_only) return false;
  if (!flat) layout = "strided";
  for (size_t i = 0; i < nin && flat; ++i) {
    if (repeats(layout[i])) args.st[i][0] = inner[i];
    if (layout[i] == 'm') args.st[i][1] = count[i];
  }
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
  args.n = outputs[0].size();
  for (size_t i = 0; i < nin; ++i) args.p[i] = dptr(inputs[i]);
  for (size_t o = 0; o < outputs.size(); ++o) args.p[nin + o] = dptr(outputs[o]);
  if (args.n == 0) return true;
  DeviceState& s = state_of(outputs[0]);
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
  // 256-byte aligned; a view's offset may not be). A thread's vector must lie in one repeat of
  // every 'r' and 'q' input (inner a multiple of the width).
  bool vectorized = flat && repeats_hold_vectors(k.program, layout, inner);
  const int width = flat ? codegen::cuda_vector_width(k.program, layout) : 1;
  for (size_t i = 0; i < nin && vectorized; ++i)
    if (layout[i] == 'c' || layout[i] == 'r') vectorized = args.p[i] % 16 == 0;
  for (size_t o = 0; o < outputs.size() && vectorized; ++o) vectorized = args.p[nin + o] % 16 == 0;
  const Kernel fn = get_kernel(s.index, codegen::CudaFusedKernelParams{program_of(kernel), layout, vectorized}, describe);
  const unsigned block = occupancy_block_size(fn);
  const int64_t per_thread = vectorized ? width : (flat ? 4 : 1);
  launch(s, fn, blocks_for(args.n, static_cast<int64_t>(block) * per_thread), block, &args, "Fused");
  return true;
}

}  // namespace

void prebuild_fused(const std::shared_ptr<const codegen::FusedKernel>& kernel, const std::vector<Shape>& input_shapes) {
  const codegen::FusedKernel& k = *kernel;
  if (k.device.type != Device::Type::Cuda) return;
  Shape full;
  for (const Shape& in : input_shapes) full = broadcast_shapes(full, in);
  std::string layout;
  bool vectorized = false;
  if (k.program.is_row_program()) {
    const int nred = k.program.reduced_axes;
    const int64_t rows = shape_size(Shape(full.begin(), full.end() - nred)), n = shape_size(Shape(full.end() - nred, full.end()));
    if (rows == 0 || n == 0) return;
    const std::shared_ptr<const RowProgramInfo> info = row_program_info(k);
    const codegen::GpuRowOrder order = codegen::gpu_row_order(rows, n);
    const int vectors = codegen::gpu_row_register_vectors(info->registers, order, n);
    // Fresh buffers are 256-byte aligned: rows are clean (eval_fused_rows) when whole vectors
    // tile them and every row of each input read per element starts 16-byte aligned.
    bool clean = vectors > 0 && n % info->registers.vec == 0;
    for (int in : info->element_inputs) clean = clean && (n * static_cast<int64_t>(size_of(k.program.input_dtypes[in]))) % 16 == 0;
    layout = row_kernel_layout(vectors, clean, order, info->registers.vec, n);
  } else {
    // The layout run_elementwise_program finds for inputs in fresh (row-major, aligned) buffers.
    const int nd = static_cast<int>(full.size());
    bool flat = true;
    std::vector<int64_t> inner(input_shapes.size(), 0), count(input_shapes.size(), 0);
    for (size_t i = 0; i < input_shapes.size(); ++i) {
      const Shape& in = input_shapes[i];
      Strides st(nd, 0);
      int64_t stride = 1;
      for (int d = static_cast<int>(in.size()) - 1; d >= 0; --d) {
        st[nd - static_cast<int>(in.size()) + d] = in[d] == 1 ? 0 : stride;
        stride *= in[d];
      }
      if (char l = flat_layout_letter(full, in, st, true, inner[i], count[i])) layout += l;
      else flat = false;
    }
    vectorized = flat && repeats_hold_vectors(k.program, layout, inner);
    if (!flat) layout = "strided";
  }
  const int device = k.device.index;
  prebuild_kernel([kernel, layout, vectorized, device] {
    get_kernel(device, codegen::CudaFusedKernelParams{program_of(kernel), layout, vectorized}, "prebuild of a fused kernel");
  });
}

void eval_fused(const FusedParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const codegen::FusedKernel& k = *p.kernel;
  // Error messages name the program; describing it costs more than a launch, so only on demand.
  auto describe = [&] { return "Fused(" + codegen::describe_program(k.program) + ")"; };
  if (k.device.type != Device::Type::Cuda) throw UnsupportedError(describe() + ": the kernel was made for " + k.device.str());
  if (k.program.is_row_program()) return eval_fused_rows(p.kernel, inputs, outputs, describe);
  run_elementwise_program(p.kernel, inputs, outputs, describe, false);
}

bool run_flat_instruction(codegen::FusedProgram program, const std::vector<Array>& inputs, Array& out,
                          const std::string& what) {
  auto kernel = std::make_shared<codegen::FusedKernel>();
  kernel->program = std::move(program);
  kernel->device = out.device();
  std::vector<Array> outputs{out};
  return run_elementwise_program(kernel, inputs, outputs, [&] { return what; }, true);
}

}  // namespace smelt::cuda
