// smelt::nn attention: the composed softmax(q kᵀ/√d) v and multi-head self-attention.
#include <cmath>
#include <limits>
#include <string>

#include "smelt/attention.h"
#include "smelt/nn.h"
#include "smelt/random.h"

namespace smelt::nn {

namespace {
std::string desc(const Array& a) { return std::string(dtype_name(a.dtype())) + shape_to_string(a.shape()); }
}  // namespace

// [batch, heads, time, d] goes to the attention op (one primitive: a flash kernel on the GPU, its
// composed path elsewhere; grad through its rules). Other ranks are composed here from
// matmul/scale/mask/softmax/matmul, whose rules give the backward pass.
Array attention(const Array& q, const Array& k, const Array& v, const std::optional<Array>& mask) {
  if (q.ndim() < 2 || k.ndim() != q.ndim() || v.ndim() != q.ndim() || q.shape(-1) != k.shape(-1) ||
      k.shape(-2) != v.shape(-2))
    throw ShapeError("nn::attention: q " + desc(q) + ", k " + desc(k) + " and v " + desc(v) +
                     " must be [..., Tq, d], [..., Tk, d] and [..., Tk, dv]");
  if (mask && mask->dtype() != bool_)
    throw DtypeError("nn::attention: the mask must be bool (true = attend), got " + desc(*mask));
  if (q.ndim() == 4 && q.shape(0) == k.shape(0) && q.shape(1) == k.shape(1)) {
    AttentionOptions o;
    if (mask) o.mask = *mask;
    return scaled_dot_product_attention(q, k, v, o);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.shape(-1)));
  Array scores = matmul(q, swapaxes(k, -1, -2)) * scale;
  if (mask) {
    if (mask->dtype() != bool_) throw DtypeError("nn::attention: the mask must be bool (true = attend), got " + desc(*mask));
    scores = where(*mask, scores, weak_scalar(-std::numeric_limits<double>::infinity(), scores.dtype()));
  }
  return matmul(softmax(scores, {-1}), v);
}

MultiHeadAttention::MultiHeadAttention(int64_t dim, int64_t heads, bool causal_, bool bias, std::optional<Array> key,
                                       Dtype dtype)
    : num_heads(heads), causal(causal_) {
  if (heads <= 0 || dim <= 0 || dim % heads != 0)
    throw InvalidArgument("nn::MultiHeadAttention: dim " + std::to_string(dim) + " must be a positive multiple of num_heads " +
                          std::to_string(heads));
  Array ks = random::split(key ? *key : random::next_key(), 2);
  in_proj = Linear(dim, 3 * dim, bias, reshape(slice(ks, {0, 0}, {1, 2}), {2}), dtype);
  out_proj = Linear(dim, dim, bias, reshape(slice(ks, {1, 0}, {2, 2}), {2}), dtype);
}

Array MultiHeadAttention::operator()(const Array& x, const std::optional<Array>& mask) const {
  const int64_t dim = out_proj.weight.shape(0);
  if (x.ndim() != 3 || x.shape(2) != dim)
    throw ShapeError("nn::MultiHeadAttention: the input " + desc(x) + " must be [batch, time, " + std::to_string(dim) + "]");
  const int64_t b = x.shape(0), t = x.shape(1), hd = dim / num_heads;
  std::vector<Array> qkv = split(in_proj(x), 3, -1);  // each [B, T, D]
  auto heads = [&](const Array& a) { return transpose(reshape(a, {b, t, num_heads, hd}), {0, 2, 1, 3}); };
  std::optional<Array> m = mask;
  if (causal) {
    Array i = arange(t, int32);
    Array lower = greater_equal(reshape(i, {t, 1}), reshape(i, {1, t}));  // query i sees keys <= i
    m = m ? logical_and(*m, lower) : lower;
  }
  Array o = attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), m);  // [B, H, T, hd]
  return out_proj(reshape(transpose(o, {0, 2, 1, 3}), {b, t, dim}));
}

}  // namespace smelt::nn
