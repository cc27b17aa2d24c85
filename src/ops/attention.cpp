// scaled_dot_product_attention: argument checks, the Attention primitive's builder and its composed path.
#include "src/ops/attention.h"

#include <cmath>
#include <limits>
#include <string>

#include "smelt/attention.h"
#include "smelt/compile.h"
#include "smelt/device.h"
#include "smelt/errors.h"
#include "smelt/ops.h"
#include "smelt/transforms.h"
#include "src/ops/op_utils.h"

namespace smelt {

namespace detail {

Dtype attention_compute_dtype(Dtype dtype) { return dtype == float64 ? float64 : float32; }

double attention_scale(const AttentionParams& p, int64_t head_dim) {
  return p.scale ? *p.scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

Array attention_composed(const Array& q, const Array& k, const Array& v, const Array& mask, const AttentionParams& p) {
  const Device dev = q.device();
  DefaultDeviceScope scope(dev);  // every constant below lives beside the inputs
  const int64_t b = q.shape()[0], hq = q.shape()[1], s = q.shape()[2], d = q.shape()[3];
  const int64_t hkv = k.shape()[1], t = k.shape()[2], dv = v.shape()[3];
  const Dtype ct = attention_compute_dtype(q.dtype());
  if (q.size() == 0 || t == 0 || dv == 0) return full_value({b, hq, s, dv}, Scalar::of_int(0), q.dtype(), dev);
  const int64_t group = hq / hkv;
  auto scalar = [&](double x) { return full_value({}, Scalar::of_float(x), ct, dev); };
  const double neg_inf = -std::numeric_limits<double>::infinity();
  // [B, Hkv, G*S, D] @ [B, Hkv, D, T]: each key head serves its group of query heads.
  Array qg = reshape(astype(q, ct), {b, hkv, group * s, d});
  Array scores = matmul(qg, swapaxes(astype(k, ct), 2, 3));
  scores = reshape(multiply(scores, scalar(attention_scale(p, d))), {b, hq, s, t});
  if (p.softcap > 0) scores = multiply(scalar(p.softcap), tanh(divide(scores, scalar(p.softcap))));
  switch (p.mask) {
    case AttentionMaskKind::None: break;
    case AttentionMaskKind::Additive: scores = add(scores, astype(mask, ct)); break;
    case AttentionMaskKind::Boolean: scores = where(mask, scores, scalar(neg_inf)); break;
  }
  if (p.causal != CausalMask::None) {
    const int64_t offset = p.causal == CausalMask::LowerRight ? t - s : 0;
    Array i = reshape(arange(0, static_cast<double>(s), 1, int64), {s, 1});
    Array j = reshape(arange(0, static_cast<double>(t), 1, int64), {1, t});
    Array allowed = less_equal(j, add(i, full_value({}, Scalar::of_int(offset), int64, dev)));
    scores = where(allowed, scores, scalar(neg_inf));
  }
  // A stable softmax whose fully masked rows (max = -inf) give zeros: the shift is 0 there, every
  // exp is 0 and the sum is replaced by 1. The shift carries no gradient (softmax does not depend on it).
  Array m = stop_gradient(max(scores, {-1}, true));
  m = where(equal(m, scalar(neg_inf)), scalar(0.0), m);
  Array e = exp(subtract(scores, m));
  Array l = sum(e, {-1}, true);
  Array probs = divide(e, where(equal(l, scalar(0.0)), scalar(1.0), l));
  Array out = matmul(reshape(probs, {b, hkv, group * s, t}), astype(v, ct));
  return astype(reshape(out, {b, hq, s, dv}), q.dtype());
}

}  // namespace detail

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

std::string qkv_text(const Array& q, const Array& k, const Array& v) {
  return "q " + describe(q) + ", k " + describe(k) + ", v " + describe(v);
}

/// True when `mask` is a boolean mask known while a function is traced (a constant, not a traced
/// value) that says exactly what the lower-right causal mask says for S queries and T >= S keys:
/// key j attends to query i when j <= i + T - S, the same for every batch and head. Exporters
/// write causal attention that way (GPT-2's slice of its lower-triangular `bias` buffer); as the
/// causal flag the kernels skip the masked half of the keys instead of reading the mask for every
/// score, with the same bits (masked keys add exactly nothing either way). Read once per trace.
bool constant_causal_mask(const Array& q, const Array& mask, int64_t s, int64_t t) {
  constexpr int64_t kMaxRead = int64_t{1} << 24;  // a larger mask is read for every score instead
  if (!mask.valid() || mask.dtype() != bool_ || !detail::is_tracer(q) || detail::is_tracer(mask)) return false;
  const int nd = mask.ndim();
  if (nd < 2 || nd > 4 || t < s || mask.shape()[nd - 2] != s || mask.shape()[nd - 1] != t || s * t > kMaxRead)
    return false;
  for (int d = 0; d < nd - 2; ++d)
    if (mask.shape()[d] != 1) return false;
  // Read on the host: a GPU mask is copied as it is (no cast kernel to build while tracing).
  const Array host = mask.device().type == Device::Type::Cpu ? mask : to_device(mask, Device::cpu());
  const std::vector<uint8_t> m = astype(host, uint8).to_vector<uint8_t>();
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < t; ++j)
      if ((m[static_cast<size_t>(i * t + j)] != 0) != (j <= i + t - s)) return false;
  return true;
}

}  // namespace

Array scaled_dot_product_attention(const Array& q, const Array& k, const Array& v, const AttentionOptions& options) {
  check_valid(q, kOp);
  check_valid(k, kOp);
  check_valid(v, kOp);
  if (q.ndim() != 4 || k.ndim() != 4 || v.ndim() != 4)
    throw ShapeError(std::string(kOp) + ": q, k and v must be [batch, heads, seq, head_dim] (rank 4), got " +
                     qkv_text(q, k, v));
  if (!is_floating(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype())
    throw DtypeError(std::string(kOp) + ": q, k and v must share one floating-point dtype, got " + qkv_text(q, k, v));
  const int64_t b = q.shape()[0], hq = q.shape()[1], s = q.shape()[2], d = q.shape()[3];
  const int64_t hkv = k.shape()[1], t = k.shape()[2];
  if (k.shape()[0] != b || v.shape()[0] != b)
    throw ShapeError(std::string(kOp) + ": q, k and v must have one batch size, got " + qkv_text(q, k, v));
  if (k.shape()[3] != d)
    throw ShapeError(std::string(kOp) + ": q and k must have one head_dim, got " + qkv_text(q, k, v));
  if (v.shape()[1] != hkv || v.shape()[2] != t)
    throw ShapeError(std::string(kOp) + ": k and v must have the same heads and sequence length, got " +
                     qkv_text(q, k, v));
  if (options.num_kv_heads < 0 || (options.num_kv_heads > 0 && options.num_kv_heads != hkv))
    throw ShapeError(std::string(kOp) + ": num_kv_heads is " + std::to_string(options.num_kv_heads) + " but k has " +
                     std::to_string(hkv) + " heads (" + qkv_text(q, k, v) + ")");
  if (hkv == 0 ? hq != 0 : hq % hkv != 0)
    throw ShapeError(std::string(kOp) + ": the " + std::to_string(hq) + " query heads are not a multiple of the " +
                     std::to_string(hkv) + " key/value heads (" + qkv_text(q, k, v) + ")");
  if (options.scale && !std::isfinite(*options.scale))
    throw InvalidArgument(std::string(kOp) + ": scale must be finite, got " + std::to_string(*options.scale));
  if (!(options.softcap >= 0) || !std::isfinite(options.softcap))
    throw InvalidArgument(std::string(kOp) + ": softcap must be a finite number >= 0 (0: none), got " +
                          std::to_string(options.softcap));
  AttentionParams p{options.scale, options.softcap, options.causal, AttentionMaskKind::None};
  std::vector<Array> inputs{q, k, v};
  const Shape scores{b, hq, s, t};
  const bool causal_mask = options.causal == CausalMask::None && constant_causal_mask(q, options.mask, s, t);
  if (causal_mask) p.causal = CausalMask::LowerRight;
  if (options.mask.valid() && !causal_mask) {
    const Array& m = options.mask;
    if (m.dtype() != bool_ && !is_floating(m.dtype()))
      throw DtypeError(std::string(kOp) + ": the mask must be bool (true = attend) or floating point (added to the "
                       "scores), got " + describe(m));
    Shape joined;
    try {
      joined = broadcast_shapes(m.shape(), scores, kOp);
    } catch (const ShapeError&) {
      joined.clear();
    }
    if (joined != scores)
      throw ShapeError(std::string(kOp) + ": the mask " + describe(m) + " does not broadcast to the scores [batch, "
                       "q_heads, S, T] = " + shape_to_string(scores));
    p.mask = m.dtype() == bool_ ? AttentionMaskKind::Boolean : AttentionMaskKind::Additive;
    Array cast = p.mask == AttentionMaskKind::Boolean ? m : astype(m, detail::attention_compute_dtype(q.dtype()));
    inputs.push_back(broadcast_to(cast, scores));  // a view: stride 0 along the broadcast axes
  }
  const Device dev = common_device(inputs, kOp);
  for (auto& a : inputs) a = to_device(a, dev);
  return make_array({b, hq, s, v.shape()[3]}, q.dtype(), dev, make_prim(PrimKind::Attention, std::move(p)),
                    std::move(inputs));
}

}  // namespace smelt
