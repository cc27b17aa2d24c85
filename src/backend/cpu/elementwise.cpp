// CPU kernels for element-wise primitives: Unary, Binary, Select and Cast.
#include "src/backend/cpu/kernel_utils.h"
#include "src/backend/cpu/kernels.h"
#include "src/core/dispatch.h"

namespace smelt::cpu {

namespace {

/// out[i] = f(in[i]) over any strides of `in`, parallel for large sizes.
template <class In, class Out, class F>
void unary_loop(const Array& in, Array& out, F f) {
  const auto& n = in.node();
  const In* src = in_ptr<In>(in);
  Out* dst = out_ptr<Out>(out);
  if (is_row_contiguous(n.shape, n.strides)) {
    parallel_for(n.size(), kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dst[i] = f(src[i]);
    });
    return;
  }
  Strides os = row_major_strides(n.shape);
  parallel_strided<2>(n.shape, {&n.strides, &os},
                      [&](const std::array<int64_t, 2>& off, int64_t len, const std::array<int64_t, 2>& st) {
                        const In* s = src + off[0];
                        Out* d = dst + off[1];
                        for (int64_t i = 0; i < len; ++i) d[i] = f(s[i * st[0]]);
                      });
}

}  // namespace

void eval_Cast(const CastParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& in = inputs[0];
  Array& out = outputs[0];
  if (!try_donate(out, in)) alloc_contiguous(out);
  dispatch_all(in.dtype(), [&]<class From>() {
    dispatch_all(p.to, [&]<class To>() { unary_loop<From, To>(in, out, [](From v) { return convert<To, From>(v); }); });
  });
}

}  // namespace smelt::cpu
