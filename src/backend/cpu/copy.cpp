// CPU kernels that move data without arithmetic: views, copies, constants and ranges.
#include "smelt/errors.h"
#include "src/backend/cpu/kernel_utils.h"
#include "src/backend/cpu/kernels.h"
#include "src/core/dispatch.h"

namespace smelt::cpu {

/// Copies `in` (any strides) into `out`'s row-major buffer.
void copy_strided(const Array& in, Array& out) {
  const auto& n = in.node();
  dispatch_by_size(n.dtype, [&]<class T>() { copy_to_row_major(in_ptr<T>(in), n.shape, n.strides, out_ptr<T>(out)); });
}

void eval_Copy(const NoParams&, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  alloc_contiguous(outputs[0]);
  copy_strided(inputs[0], outputs[0]);
}

void eval_Reshape(const ShapeParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const auto& in = inputs[0].node();
  Array& out = outputs[0];
  if (is_row_contiguous(in.shape, in.strides)) {
    set_view(out, inputs[0], row_major_strides(p.shape), in.offset);
    return;
  }
  Strides view;
  if (reshape_view_strides(in.shape, in.strides, p.shape, view)) {
    set_view(out, inputs[0], std::move(view), in.offset);
    return;
  }
  alloc_contiguous(out);
  copy_strided(inputs[0], out);
}

void eval_Transpose(const PermParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const auto& in = inputs[0].node();
  Strides s(p.perm.size());
  for (size_t i = 0; i < p.perm.size(); ++i) s[i] = in.strides[p.perm[i]];
  set_view(outputs[0], inputs[0], std::move(s), in.offset);
}

void eval_Broadcast(const ShapeParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const auto& in = inputs[0].node();
  size_t nd = p.shape.size(), ind = in.shape.size();
  Strides s(nd, 0);
  for (size_t i = 0; i < ind; ++i) {
    size_t o = nd - ind + i;
    s[o] = in.shape[i] == 1 && p.shape[o] != 1 ? 0 : in.strides[i];
  }
  set_view(outputs[0], inputs[0], std::move(s), in.offset);
}

void eval_Slice(const SliceParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const auto& in = inputs[0].node();
  Strides s(in.strides.size());
  int64_t off = in.offset;
  for (size_t i = 0; i < s.size(); ++i) {
    s[i] = in.strides[i] * p.step[i];
    if (outputs[0].node().shape[i] > 0) off += p.start[i] * in.strides[i];
  }
  set_view(outputs[0], inputs[0], std::move(s), off);
}

void eval_Full(const FullParams& p, const std::vector<Array>&, std::vector<Array>& outputs) {
  Array& out = outputs[0];
  alloc_contiguous(out);
  dispatch_all(out.dtype(), [&]<class T>() {
    T v;
    p.value.cast(out.dtype()).store(&v);
    T* d = out_ptr<T>(out);
    parallel_for(out.size(), kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) d[i] = v;
    });
  });
}

void eval_Arange(const ArangeParams& p, const std::vector<Array>&, std::vector<Array>& outputs) {
  Array& out = outputs[0];
  alloc_contiguous(out);
  dispatch_all(out.dtype(), [&]<class T>() {
    T* d = out_ptr<T>(out);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // Exact integer steps when start and step are integers (NumPy computes in the int type).
      int64_t start = static_cast<int64_t>(p.start), step = static_cast<int64_t>(p.step);
      bool exact = static_cast<double>(start) == p.start && static_cast<double>(step) == p.step;
      for (int64_t i = 0; i < out.size(); ++i)
        d[i] = exact ? static_cast<T>(start + i * step)
                     : convert<T, double>(p.start + static_cast<double>(i) * p.step);
    } else {
      for (int64_t i = 0; i < out.size(); ++i)
        d[i] = convert<T, double>(p.start + static_cast<double>(i) * p.step);
    }
  });
}

}  // namespace smelt::cpu
