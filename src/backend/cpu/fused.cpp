// The CPU kernel of the Fused primitive: runs a generated kernel over broadcast strides in parallel.
#include <algorithm>
#include <memory>

#include "smelt/errors.h"
#include "src/backend/cpu/kernel_utils.h"
#include "src/backend/cpu/kernels.h"
#include "src/backend/cpu/reduce_order.h"
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

/// n values of T on the stack when n <= N (a few arguments and axes: every call of a small row
/// kernel), else on the heap. A row kernel's call took ten heap allocations for its strides and
/// pointers alone (about a tenth of a small compiled RMSNorm's host time).
template <class T, size_t N>
class Scratch {
 public:
  explicit Scratch(size_t n, T fill = T()) : heap_(n > N ? std::make_unique<T[]>(n) : nullptr), data_(heap_ ? heap_.get() : inline_) {
    std::fill_n(data_, n, fill);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* data() { return data_; }
  T& operator[](size_t i) { return data_[i]; }

 private:
  T inline_[N];
  std::unique_ptr<T[]> heap_;
  T* data_;
};

/// Instructions a unary op costs in element_grain's count: the float transcendentals of
/// vector_math.h are polynomials of some fifty vector operations (GELU's erf about sixty), the
/// rest one or a few.
int64_t unary_cost(UnaryOp op) {
  switch (op) {
    case UnaryOp::Exp:
    case UnaryOp::Exp2:
    case UnaryOp::Expm1:
    case UnaryOp::Log:
    case UnaryOp::Log2:
    case UnaryOp::Log10:
    case UnaryOp::Log1p:
    case UnaryOp::Sin:
    case UnaryOp::Cos:
    case UnaryOp::Tan:
    case UnaryOp::Asin:
    case UnaryOp::Acos:
    case UnaryOp::Atan:
    case UnaryOp::Sinh:
    case UnaryOp::Cosh:
    case UnaryOp::Tanh:
    case UnaryOp::Asinh:
    case UnaryOp::Acosh:
    case UnaryOp::Atanh:
    case UnaryOp::Erf:
    case UnaryOp::ErfInv:
    case UnaryOp::Sigmoid: return 16;
    case UnaryOp::Abs:
    case UnaryOp::Negative:
    case UnaryOp::Sign:
    case UnaryOp::Square:
    case UnaryOp::Reciprocal:
    case UnaryOp::Sqrt:
    case UnaryOp::Rsqrt:
    case UnaryOp::Relu:
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
    case UnaryOp::Round:
    case UnaryOp::IsNan:
    case UnaryOp::IsInf:
    case UnaryOp::IsFinite:
    case UnaryOp::LogicalNot:
    case UnaryOp::BitwiseNot: return 1;
  }
  return 1;
}

/// Elements a chunk of a fused kernel takes at least: bigger programs do more work per element,
/// so they are split sooner. A transcendental counts as the vector operations it takes: the bias
/// and GELU of a small transformer's 32 x 512 hidden layer (16K elements, 11 us on one thread)
/// had counted as nine instructions and stayed on one thread.
int64_t element_grain(const codegen::FusedProgram& program) {
  int64_t cost = 0;
  for (const codegen::Instr& i : program.instrs) cost += i.kind == codegen::InstrKind::Unary ? unary_cost(i.unary) : 1;
  return std::max<int64_t>(kGrain / std::max<int64_t>(1, cost / 4), 1024);
}

/// Merges axes [0, nd) of a shape whose first `nin` arguments have strides strides[a * nd + d]:
/// size-1 axes dropped (one is kept when all are), neighbours whose strides chain in every input
/// joined. Writes the merged shape and strides (out_strides[a * nd + d]; the outputs may be the
/// inputs: each merged axis is written at or before the axis it reads) and returns their count.
int merge_axes(const int64_t* shape, const int64_t* strides, int nd, size_t nin, int64_t* out_shape,
               int64_t* out_strides) {
  int m = 0;
  for (int d = 0; d < nd; ++d) {
    if (shape[d] == 1 && nd > 1) continue;
    bool merge = m > 0;
    for (size_t a = 0; a < nin && merge; ++a) merge = out_strides[a * nd + m - 1] == strides[a * nd + d] * shape[d];
    if (merge) {
      out_shape[m - 1] *= shape[d];
      for (size_t a = 0; a < nin; ++a) out_strides[a * nd + m - 1] = strides[a * nd + d];
    } else {
      out_shape[m] = shape[d];
      for (size_t a = 0; a < nin; ++a) out_strides[a * nd + m] = strides[a * nd + d];
      ++m;
    }
  }
  if (m == 0) {
    out_shape[0] = 1;
    for (size_t a = 0; a < nin; ++a) out_strides[a * nd] = 0;
    m = 1;
  }
  return m;
}

/// A row program: the index space is the inputs' broadcast shape; its trailing reduced axes are
/// rows, run in parallel (each row by one thread, in the order of reduce_order.h).
void run_rows(const codegen::FusedKernel& k, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  Shape full;
  for (const auto& in : inputs) full = broadcast_shapes(full, in.shape());
  const int nd = static_cast<int>(full.size()), nred = k.program.reduced_axes;
  SMELT_ASSERT(nred <= nd, "Fused: a row program's reduced axes exceed the rank of " + shape_to_string(full));
  for (auto& out : outputs) alloc_contiguous(out);
  const size_t nin = inputs.size(), nargs = nin + outputs.size();
  // The kept axes (ks) and the row's axes (rs), each at least one axis long.
  const int knd = std::max(1, nd - nred), rnd = std::max(1, nred);
  Scratch<int64_t, 16> ks(static_cast<size_t>(knd), 1), rs(static_cast<size_t>(rnd), 1);
  int64_t rows = 1, n = 1;
  for (int d = 0; d < nd - nred; ++d) rows *= ks[static_cast<size_t>(d)] = full[static_cast<size_t>(d)];
  for (int d = 0; d < nred; ++d) n *= rs[static_cast<size_t>(d)] = full[static_cast<size_t>(nd - nred + d)];
  if (rows == 0) return;
  // Element strides per argument: inputs broadcast (stride 0 on size-1 axes); outputs are
  // contiguous and addressed by the kernel itself (r * n + j, or r).
  Scratch<int64_t, 128> kst(nargs * static_cast<size_t>(knd), 0), rst(nargs * static_cast<size_t>(rnd), 0);
  for (size_t a = 0; a < nin; ++a) {
    const auto& node = inputs[a].node();
    const int off = nd - static_cast<int>(node.shape.size());
    for (int d = 0; d < static_cast<int>(node.shape.size()); ++d) {
      const int64_t st = node.shape[d] == 1 ? 0 : node.strides[d];
      const int fd = off + d;
      if (fd < nd - nred) kst[a * knd + fd] = st;
      else rst[a * rnd + (fd - (nd - nred))] = st;
    }
  }
  // The kept axes merged the same way as the row's (below), so that a kernel finds a row with one
  // product (reduce_order.h's row_offset) instead of a division per axis: [1, 128] rows of BERT's
  // LayerNorm are one axis. Argument a's kept strides are then read at a * mknd + d.
  const int mknd = merge_axes(ks.data(), kst.data(), knd, nin, ks.data(), kst.data());
  if (mknd < knd)
    for (size_t a = 1; a < nargs; ++a)
      for (int d = 0; d < mknd; ++d) kst[a * mknd + d] = kst[a * knd + d];
  // Merge the row's axes where every input allows it, so the common case is one unit-stride run:
  // mshape[0, mnd) and, per input, its strides red_strides[a * rnd + d] (outputs' stay 0).
  Scratch<int64_t, 16> mshape(static_cast<size_t>(rnd), 0);
  Scratch<int64_t, 128> red_strides(nargs * static_cast<size_t>(rnd), 0);
  const int mnd = merge_axes(rs.data(), rst.data(), rnd, nin, mshape.data(), red_strides.data());
  SMELT_ASSERT(mnd <= kKernelAxes, "Fused: too many row axes in " + shape_to_string(full));
  // The kernel reads argument a's row strides at a * mnd + d: pack them to that stride.
  if (mnd < rnd)
    for (size_t a = 1; a < nargs; ++a)
      for (int d = 0; d < mnd; ++d) red_strides[a * mnd + d] = red_strides[a * rnd + d];
  Scratch<char*, 32> ptrs(nargs, nullptr);
  for (size_t a = 0; a < nin; ++a) ptrs[a] = arg_ptr(inputs[a]);
  for (size_t o = 0; o < outputs.size(); ++o) ptrs[nin + o] = arg_ptr(outputs[o]);
  reduce_order::RowArgs args{ptrs.data(), rows, n, mknd, mnd, ks.data(), kst.data(), mshape.data(), red_strides.data()};
  // The loader returns every kernel's entry as CpuKernelFn; a row program's has this signature.
  auto fn = reinterpret_cast<codegen::CpuRowKernelFn>(reinterpret_cast<void (*)()>(k.cpu));
  // Rows of a bigger program cost more (a LayerNorm walks its row five times): split them sooner,
  // as element-wise programs are (below). BERT-small's 128 x 256 LayerNorms ran on one thread.
  // A row's bits do not depend on the split (reduce_order.h).
  parallel_for(rows, std::max<int64_t>(1, element_grain(k.program) / std::max<int64_t>(1, n)),
               [&](int64_t b, int64_t e) { fn(b, e, &args); });
}

}  // namespace

void eval_Fused(const FusedParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const codegen::FusedKernel& k = *p.kernel;
  SMELT_ASSERT(k.cpu != nullptr, "Fused: the kernel was not built for the CPU");
  if (k.program.is_row_program()) return run_rows(k, inputs, outputs);
  const Shape& shape = outputs[0].shape();
  const int nd = static_cast<int>(shape.size());
  const size_t nin = inputs.size(), nargs = nin + outputs.size();

  // Outputs: reuse an unreferenced input of the same shape and itemsize (read and written at the
  // same index), else fresh memory.
  Scratch<char, 32> donated(nin, 0);
  for (auto& out : outputs) {
    bool done = false;
    for (size_t i = 0; i < nin && !done; ++i) {
      if (donated[i] || inputs[i].shape() != shape) continue;
      if (try_donate(out, inputs[i])) donated[i] = done = true;
    }
    if (!done) alloc_contiguous(out);
  }

  // Per-argument strides in the output's index space (broadcast axes get 0), strides[a * nd + d],
  // then collapsed into cshape[0, cnd) and cstrides[a * nd + c]. On the stack for the common
  // case: like run_rows, a small model's call runs hundreds of these.
  const size_t snd = static_cast<size_t>(std::max(nd, 1));
  Scratch<int64_t, 192> strides(nargs * snd, 0), cstrides(nargs * snd, 0);
  Scratch<int64_t, 16> cshape(snd, 0);
  for (size_t a = 0; a < nin; ++a) {
    const auto& n = inputs[a].node();
    const int off = nd - static_cast<int>(n.shape.size());
    for (int d = 0; d < static_cast<int>(n.shape.size()); ++d)
      strides[a * snd + static_cast<size_t>(off + d)] = n.shape[d] == 1 ? 0 : n.strides[d];
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    int64_t st = 1;
    for (int d = nd - 1; d >= 0; --d) {
      strides[(nin + o) * snd + static_cast<size_t>(d)] = st;
      st *= shape[d];
    }
  }
  int cnd = 0;
  for (int d = 0; d < nd; ++d) {
    if (shape[d] == 1) continue;
    bool merge = cnd > 0;
    for (size_t a = 0; a < nargs && merge; ++a)
      merge = cstrides[a * snd + static_cast<size_t>(cnd - 1)] == strides[a * snd + static_cast<size_t>(d)] * shape[d];
    if (merge) {
      cshape[static_cast<size_t>(cnd - 1)] *= shape[d];
      for (size_t a = 0; a < nargs; ++a) cstrides[a * snd + static_cast<size_t>(cnd - 1)] = strides[a * snd + static_cast<size_t>(d)];
    } else {
      cshape[static_cast<size_t>(cnd)] = shape[d];
      for (size_t a = 0; a < nargs; ++a) cstrides[a * snd + static_cast<size_t>(cnd)] = strides[a * snd + static_cast<size_t>(d)];
      ++cnd;
    }
  }
  if (cnd == 0) {
    cshape[0] = 1;
    for (size_t a = 0; a < nargs; ++a) cstrides[a * snd] = 1;
    cnd = 1;
  }
  if (cnd > kKernelAxes) {
    Shape outer_shape(cshape.data(), cshape.data() + cnd);
    std::vector<Strides> outer_strides(nargs);
    for (size_t a = 0; a < nargs; ++a) outer_strides[a].assign(cstrides.data() + a * snd, cstrides.data() + a * snd + cnd);
    run_outer_axes(k, outer_shape, outer_strides, inputs, outputs);
    return;
  }
  bool contiguous = cnd == 1;
  for (size_t a = 0; a < nargs && contiguous; ++a) contiguous = cstrides[a * snd] == 1;
  // The kernel reads argument a's strides at a * cnd + d: packed to that stride in place (as
  // run_rows does; cnd <= snd, so no entry is overwritten before it is read).
  if (static_cast<size_t>(cnd) < snd)
    for (size_t a = 1; a < nargs; ++a)
      for (int d = 0; d < cnd; ++d)
        cstrides[a * static_cast<size_t>(cnd) + static_cast<size_t>(d)] = cstrides[a * snd + static_cast<size_t>(d)];
  Scratch<char*, 32> args(nargs, nullptr);
  for (size_t a = 0; a < nin; ++a) args[a] = arg_ptr(inputs[a]);
  for (size_t o = 0; o < outputs.size(); ++o) args[nin + o] = arg_ptr(outputs[o]);

  int64_t total = shape_size(shape);
  parallel_for(total, element_grain(k.program), [&](int64_t b, int64_t e) {
    k.cpu(b, e, cnd, cshape.data(), args.data(), cstrides.data(), contiguous ? 1 : 0);
  });
}

}  // namespace smelt::cpu
