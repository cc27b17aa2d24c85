// The CPU kernel of the Fused primitive: runs a generated kernel over broadcast strides in parallel.
#include "smelt/errors.h"
#include "src/backend/cpu/kernel_utils.h"
#include "src/backend/cpu/kernels.h"
#include "src/codegen/fused_kernel.h"

namespace smelt::cpu {

namespace {

// Generated kernels walk at most this many axes (their index arrays have a fixed size).
constexpr int kKernelAxes = 16;

char* arg_ptr(const Array& a) { return static_cast<char*>(a.node().data_ptr()); }

// Layouts that keep more than kKernelAxes axes after collapsing (a high-rank transpose): the
// leading axes are walked here and the kernel runs once per position over the trailing ones.
void run_outer_axes(const codegen::FusedKernel& k, const Shape& shape, const std::vector<Strides>& strides,
                    const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const size_t nin = inputs.size(), nargs = nin + outputs.size();
  const int nd = static_cast<int>(shape.size()), outer = nd - kKernelAxes;
  Shape inner_shape(shape.begin() + outer, shape.end());
  std::vector<int64_t> inner_strides(nargs * kKernelAxes);
  std::vector<int64_t> itemsize(nargs);
  std::vector<char*> base(nargs);
  for (size_t a = 0; a < nargs; ++a) {
    const Array& arr = a < nin ? inputs[a] : outputs[a - nin];
    itemsize[a] = static_cast<int64_t>(arr.itemsize());
    base[a] = arg_ptr(arr);
    for (int d = 0; d < kKernelAxes; ++d) inner_strides[a * kKernelAxes + d] = strides[a][outer + d];
  }
  int64_t outer_count = 1;
  for (int d = 0; d < outer; ++d) outer_count *= shape[d];
  const int64_t inner_count = shape_size(inner_shape);
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(inner_count, 1));
  parallel_for(outer_count, grain, [&](int64_t b, int64_t e) {
    std::vector<char*> args(nargs);
    for (int64_t pos = b; pos < e; ++pos) {
      int64_t rem = pos;
      for (size_t a = 0; a < nargs; ++a) args[a] = base[a];
      for (int d = outer - 1; d >= 0; --d) {
        const int64_t i = rem % shape[d];
        rem /= shape[d];
        for (size_t a = 0; a < nargs; ++a) args[a] += i * strides[a][d] * itemsize[a];
      }
      k.cpu(0, inner_count, kKernelAxes, inner_shape.data(), args.data(), inner_strides.data(), 0);
    }
  });
}

}  // namespace

void eval_Fused(const FusedParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const codegen::FusedKernel& k = *p.kernel;
  SMELT_ASSERT(k.cpu != nullptr, "Fused: the kernel was not built for the CPU");
  const Shape& shape = outputs[0].shape();
  const int nd = static_cast<int>(shape.size());
  const size_t nin = inputs.size(), nargs = nin + outputs.size();

  // Outputs: reuse an unreferenced input of the same shape and itemsize (read and written at the
  // same index), else fresh memory.
  std::vector<char> donated(nin, 0);
  for (auto& out : outputs) {
    bool done = false;
    for (size_t i = 0; i < nin && !done; ++i) {
      if (donated[i] || inputs[i].shape() != shape) continue;
      if (try_donate(out, inputs[i])) donated[i] = done = true;
    }
    if (!done) alloc_contiguous(out);
  }

  // Per-argument strides in the output's index space (broadcast axes get 0), then collapse.
  std::vector<Strides> strides(nargs, Strides(nd, 0));
  for (size_t a = 0; a < nin; ++a) {
    const auto& n = inputs[a].node();
    int off = nd - static_cast<int>(n.shape.size());
    for (int d = 0; d < static_cast<int>(n.shape.size()); ++d)
      strides[a][off + d] = n.shape[d] == 1 ? 0 : n.strides[d];
  }
  for (size_t o = 0; o < outputs.size(); ++o) strides[nin + o] = row_major_strides(shape);
  Shape cshape;
  std::vector<Strides> cstrides(nargs);
  for (int d = 0; d < nd; ++d) {
    if (shape[d] == 1) continue;
    bool merge = !cshape.empty();
    for (size_t a = 0; a < nargs && merge; ++a) merge = cstrides[a].back() == strides[a][d] * shape[d];
    if (merge) {
      cshape.back() *= shape[d];
      for (size_t a = 0; a < nargs; ++a) cstrides[a].back() = strides[a][d];
    } else {
      cshape.push_back(shape[d]);
      for (size_t a = 0; a < nargs; ++a) cstrides[a].push_back(strides[a][d]);
    }
  }
  if (cshape.empty()) {
    cshape.push_back(1);
    for (auto& s : cstrides) s.push_back(1);
  }
  const int cnd = static_cast<int>(cshape.size());
  if (cnd > kKernelAxes) {
    run_outer_axes(k, cshape, cstrides, inputs, outputs);
    return;
  }
  bool contiguous = cnd == 1;
  for (size_t a = 0; a < nargs && contiguous; ++a) contiguous = cstrides[a][0] == 1;
  std::vector<int64_t> flat(nargs * cnd);
  for (size_t a = 0; a < nargs; ++a)
    for (int d = 0; d < cnd; ++d) flat[a * cnd + d] = cstrides[a][d];
  std::vector<char*> args(nargs);
  for (size_t a = 0; a < nin; ++a) args[a] = arg_ptr(inputs[a]);
  for (size_t o = 0; o < outputs.size(); ++o) args[nin + o] = arg_ptr(outputs[o]);

  int64_t total = shape_size(shape);
  // Bigger programs do more work per element: split them sooner.
  int64_t grain = std::max<int64_t>(kGrain / std::max<int64_t>(1, static_cast<int64_t>(k.program.instrs.size()) / 4), 1024);
  parallel_for(total, grain, [&](int64_t b, int64_t e) {
    k.cpu(b, e, cnd, cshape.data(), args.data(), flat.data(), contiguous ? 1 : 0);
  });
}

}  // namespace smelt::cpu
