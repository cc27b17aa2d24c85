// CPU kernels that move data without arithmetic: views, copies, constants and ranges.
#include <cstring>

#include "smelt/errors.h"
#include "src/backend/cpu/kernel_utils.h"
#include "src/backend/cpu/kernels.h"
#include "src/core/dispatch.h"

namespace smelt::cpu {

/// Copies `in` (any strides) into `out`'s row-major buffer.
void copy_strided(const Array& in, Array& out) {
  const auto& n = in.node();
  Strides out_strides = row_major_strides(n.shape);
  dispatch_by_size(n.dtype, [&]<class T>() {
    const T* src = in_ptr<T>(in);
    T* dst = out_ptr<T>(out);
    parallel_strided<2>(n.shape, {&n.strides, &out_strides},
                        [&](const std::array<int64_t, 2>& off, int64_t len, const std::array<int64_t, 2>& st) {
                          const T* s = src + off[0];
                          T* d = dst + off[1];
                          if (st[0] == 1) {
                            std::memcpy(d, s, static_cast<size_t>(len) * sizeof(T));
                          } else {
                            for (int64_t i = 0; i < len; ++i) d[i] = s[i * st[0]];
                          }
                        });
  });
}

void eval_Copy(const NoParams&, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  alloc_contiguous(outputs[0]);
  copy_strided(inputs[0], outputs[0]);
}

namespace {

/// Strides that view `old_shape`/`old_strides` as `new_shape` without moving data, when such
/// strides exist (NumPy's attempt_nocopy_reshape): groups of old and new axes with equal
/// products map onto each other when each old group is itself one strided run.
bool reshape_view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& new_shape,
                          Strides& out) {
  Shape od;
  Strides ost;
  for (size_t i = 0; i < old_shape.size(); ++i) {
    if (old_shape[i] == 0) return false;  // empty arrays go through the contiguous path
    if (old_shape[i] != 1) {
      od.push_back(old_shape[i]);
      ost.push_back(old_strides[i]);
    }
  }
  const size_t on = od.size(), nn = new_shape.size();
  out.assign(nn, 1);
  size_t oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < nn && oi < on) {
    int64_t np = new_shape[ni], op = od[oi];
    while (np != op) {
      if (np < op) np *= new_shape[nj++];
      else op *= od[oj++];
    }
    for (size_t ok = oi; ok + 1 < oj; ++ok)
      if (ost[ok] != od[ok + 1] * ost[ok + 1]) return false;
    out[nj - 1] = ost[oj - 1];
    for (size_t nk = nj - 1; nk > ni; --nk) out[nk - 1] = out[nk] * new_shape[nk];
    ni = nj++;
    oi = oj++;
  }
  return true;  // trailing new axes have size 1; any stride serves
}

}  // namespace

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
