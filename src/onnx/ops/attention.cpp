// ONNX Attention (opset 23/24): scaled dot-product attention with masks, causal, GQA, KV cache, softcap.
#include <algorithm>
#include <cmath>
#include <limits>

#include "smelt/attention.h"
#include "src/onnx/fusions.h"
#include "src/ops/op_utils.h"

#include "src/onnx/ops/op_helpers.h"

namespace smelt::onnx {

namespace {

/// [B, S, H*D] -> [B, H, S, D].
Array split_heads(const Array& x, int64_t heads) {
  int64_t b = x.shape()[0], s = x.shape()[1], hidden = x.shape()[2];
  return transpose(reshape(x, {b, s, heads, hidden / heads}), {0, 2, 1, 3});
}

/// The mask input (3) as the op takes it: bool or float, a mask shorter than the keys padded with
/// -inf (bool: false) as the spec says.
Array attention_mask(const Array& mask, int64_t total) {
  Array m = mask;
  const int64_t last = m.shape().empty() ? 1 : m.shape().back();
  if (last < total && m.ndim() > 0) {
    std::vector<std::pair<int64_t, int64_t>> width(static_cast<size_t>(m.ndim()), {0, 0});
    width.back() = {0, total - last};
    const bool b = m.dtype() == bool_;
    m = pad(m, width, PadMode::Constant,
            b ? Array(false) : full({}, Array(-std::numeric_limits<double>::infinity()), m.dtype()));
  }
  return m;
}

/// Attention through smelt::scaled_dot_product_attention where the spec's semantics are the op's:
/// q, k and v of one dtype, no per-batch key lengths (nonpad_kv_seqlen), no qk_matmul_output,
/// and a causal mask whose diagonal is the op's upper-left (no past) or lower-right (a past cache
/// and as many new keys as queries). q, k, v are [B, H, S, D] here; false leaves `y` unset.
bool fused_attention(OpContext& c, const Array& q, const Array& k, const Array& v, int64_t total, Array& y) {
  if (c.has(6) || c.wants_output(3) || k.dtype() != q.dtype() || v.dtype() != q.dtype()) return false;
  AttentionOptions o;
  if (c.attr_int("is_causal", 0) != 0) {
    const int64_t past = c.has(4) ? c.tensor(4).shape()[2] : 0;
    if (past == 0) o.causal = CausalMask::UpperLeft;
    else if (total - past == q.shape()[2]) o.causal = CausalMask::LowerRight;
    else return false;
  }
  if (c.has_attr("scale")) o.scale = c.attr_float("scale", 1.0f);
  o.softcap = std::max(0.0, static_cast<double>(c.attr_float("softcap", 0.0f)));
  if (c.has(3)) o.mask = attention_mask(c.tensor(3), total);
  y = scaled_dot_product_attention(q, k, v, o);
  return true;
}

std::vector<Value> op_attention(OpContext& c) {
  Array q = c.tensor(0), k = c.tensor(1), v = c.tensor(2);
  const Dtype out_dt = q.dtype();
  const bool three_d = q.ndim() == 3;
  if (three_d) {
    int64_t qh = c.attr_int("q_num_heads", 0), kvh = c.attr_int("kv_num_heads", 0);
    if (qh <= 0 || kvh <= 0) c.fail("3-d inputs need q_num_heads and kv_num_heads");
    if (k.ndim() != 3 || v.ndim() != 3)
      c.fail("Q, K and V must all be 3-d or 4-d, got " + c.input(0).describe() + ", " + c.input(1).describe() + ", " +
             c.input(2).describe());
    q = split_heads(q, qh);
    k = split_heads(k, kvh);
    v = split_heads(v, kvh);
  } else if (q.ndim() != 4 || k.ndim() != 4 || v.ndim() != 4) {
    c.fail("Q, K and V must all be 3-d or 4-d, got " + c.input(0).describe() + ", " + c.input(1).describe() + ", " +
           c.input(2).describe());
  }
  if (c.has(4)) k = concatenate({c.tensor(4), k}, 2);
  if (c.has(5)) v = concatenate({c.tensor(5), v}, 2);
  Array present_k = k, present_v = v;
  const int64_t batch = q.shape()[0], q_heads = q.shape()[1], q_seq = q.shape()[2], head = q.shape()[3];
  const int64_t kv_heads = k.shape()[1], total = k.shape()[2];
  // Found by the fuzzer: K with 0 heads divided by zero here.
  if (kv_heads < 1) c.fail("K must have at least one head, got " + type_text(c.input(1)));
  if (q_heads % kv_heads) c.fail(std::to_string(q_heads) + " query heads are not a multiple of " + std::to_string(kv_heads) + " key heads");
  if (Array y; fused_attention(c, q, k, v, total, y)) {
    if (three_d) y = reshape(transpose(y, {0, 2, 1, 3}), {batch, q_seq, -1});
    return {tv(y), c.wants_output(1) ? tv(present_k) : Value(), c.wants_output(2) ? tv(present_v) : Value()};
  }
  if (q_heads != kv_heads) {
    k = repeat(k, q_heads / kv_heads, 1);
    v = repeat(v, q_heads / kv_heads, 1);
  }
  Dtype ct = out_dt == float64 ? float64 : float32;
  double scale = c.has_attr("scale") ? c.attr_float("scale", 1.0f) : 1.0 / std::sqrt(static_cast<double>(head));
  Array qk = multiply(matmul(astype(q, ct), swapaxes(astype(k, ct), 2, 3)), full({}, Array(scale), ct));
  const double neg_inf = -std::numeric_limits<double>::infinity();
  Array bias;
  if (c.has(3)) {
    Array m = c.tensor(3);
    if (m.dtype() == bool_) m = where(m, zeros({}, ct), full({}, Array(neg_inf), ct));
    else m = astype(m, ct);
    int64_t last = m.shape().empty() ? 1 : m.shape().back();
    if (last < total && m.ndim() > 0) {  // a shorter mask is padded with -inf
      std::vector<std::pair<int64_t, int64_t>> width(static_cast<size_t>(m.ndim()), {0, 0});
      width.back() = {0, total - last};
      m = pad(m, width, PadMode::Constant, full({}, Array(neg_inf), ct));
    }
    bias = m;
  }
  if (c.attr_int("is_causal", 0) != 0) {
    // Bottom-right aligned: query i sees key j when j <= i + offset, where offset counts the
    // valid keys before this query block (the past length, else nonpad length - q_seq, else 0).
    Array i_idx = reshape(arange(0, static_cast<double>(q_seq), 1, int64), {1, 1, q_seq, 1});
    Array j_idx = reshape(arange(0, static_cast<double>(total), 1, int64), {1, 1, 1, total});
    Array offset = Array(int64_t{0});
    if (c.has(4)) offset = Array(c.tensor(4).shape()[2]);
    else if (c.has(6)) offset = reshape(subtract(astype(c.tensor(6), int64), Array(q_seq)), {batch, 1, 1, 1});
    Array allowed = less_equal(j_idx, add(i_idx, offset));
    Array cb = where(allowed, zeros({}, ct), full({}, Array(neg_inf), ct));
    bias = bias.valid() ? add(bias, cb) : cb;
  }
  if (c.has(6)) {  // nonpad_kv_seqlen: keys at or past each batch's length are masked
    Array lens = reshape(astype(c.tensor(6), int64), {batch, 1, 1, 1});
    Array pos = reshape(arange(0, static_cast<double>(total), 1, int64), {1, 1, 1, total});
    Array nb = where(less(pos, lens), zeros({}, ct), full({}, Array(neg_inf), ct));
    bias = bias.valid() ? add(bias, nb) : nb;
  }
  // Softcap comes before the mask, so masked positions stay at -inf.
  double softcap = c.attr_float("softcap", 0.0f);
  if (softcap > 0) {
    Array cap = full({}, Array(softcap), ct);
    qk = multiply(cap, tanh(divide(qk, cap)));
  }
  Array qk_capped = qk;
  if (bias.valid()) qk = add(qk, bias);
  Array qk_masked = qk;
  Array probs = softmax(qk, {-1});
  // A fully masked row has no valid key: it attends to nothing (zeros, not NaN).
  probs = where(isnan(probs), zeros({}, ct), probs);
  Array y = matmul(probs, astype(v, ct));  // [B, H, S, Dv]
  if (three_d) y = reshape(transpose(y, {0, 2, 1, 3}), {batch, q_seq, -1});
  std::vector<Value> out{tv(astype(y, out_dt))};
  if (c.wants_output(1)) out.push_back(tv(present_k));
  else out.emplace_back();
  if (c.wants_output(2)) out.push_back(tv(present_v));
  else out.emplace_back();
  if (c.wants_output(3)) {
    int64_t mode = c.attr_int("qk_matmul_output_mode", 0);
    Array pick = mode == 0 || mode == 1 ? qk_capped : mode == 2 ? qk_masked : probs;
    out.push_back(tv(astype(pick, out_dt)));
  }
  return out;
}


/// LinearAttention (opset 27): a recurrent state S [B, Hkv, dk, dv] updated per step by the
/// update rule (linear: S += k v^T; gated: S = exp(decay) S + k v^T; delta: S += k (beta (v - S^T k))^T;
/// gated_delta: both), read as scale * q^T S with each key/value head shared by a group of
/// query heads.
std::vector<Value> op_linear_attention(OpContext& c) {
  const Array& q_in = c.tensor(0);
  const Array& k_in = c.tensor(1);
  const Array& v_in = c.tensor(2);
  if (q_in.ndim() != 3 || k_in.ndim() != 3 || v_in.ndim() != 3)
    c.fail("query, key and value must be [B, T, hidden], got " + c.input(0).describe() + ", " + c.input(1).describe() +
           ", " + c.input(2).describe());
  int64_t hq = c.attr_int("q_num_heads", 0), hkv = c.attr_int("kv_num_heads", 0);
  if (hq <= 0 || hkv <= 0 || hq % hkv) c.fail("q_num_heads must be a positive multiple of kv_num_heads");
  std::string rule = c.attr_string("update_rule", "gated_delta");
  bool gated = rule == "gated" || rule == "gated_delta", delta = rule == "delta" || rule == "gated_delta";
  if (!gated && !delta && rule != "linear") c.fail("update_rule must be linear, gated, delta or gated_delta, got \"" + rule + "\"");
  if (gated && !c.has(4)) c.fail("update_rule " + rule + " needs the decay input");
  if (delta && !c.has(5)) c.fail("update_rule " + rule + " needs the beta input");
  const Dtype out_dt = q_in.dtype();
  const Dtype ct = out_dt == float64 ? float64 : float32;
  int64_t b = q_in.shape()[0], steps = q_in.shape()[1];
  auto heads = [&](const Array& x, int64_t h) {  // [B, T, h*d] -> [B, h, T, d]
    return transpose(reshape(astype(x, ct), {b, steps, h, -1}), {0, 2, 1, 3});
  };
  Array q = heads(q_in, hq), k = heads(k_in, hkv), v = heads(v_in, hkv);
  int64_t dk = k.shape()[3], dv = v.shape()[3];
  Array decay = gated ? heads(c.tensor(4), hkv) : Array();
  Array beta = delta ? transpose(reshape(astype(c.tensor(5), ct), {b, steps, -1, 1}), {0, 2, 1, 3}) : Array();
  Array state = c.has(3) ? astype(c.tensor(3), ct) : zeros({b, hkv, dk, dv}, ct);
  double scale = c.has_attr("scale") ? c.attr_float("scale", 1.0f) : 1.0 / std::sqrt(static_cast<double>(dk));
  Array scale_a = full({}, Array(scale), ct);
  auto at = [](const Array& x, int64_t t) { return squeeze(slice(x, Axes{2}, {t}, {t + 1}, {1}), Axes{2}); };
  std::vector<Array> outs;
  for (int64_t t = 0; t < steps; ++t) {
    Array kt = at(k, t), vt = at(v, t);  // [B, Hkv, d]
    if (gated) state = multiply(state, expand_dims(exp(at(decay, t)), -1));
    Array write = vt;
    if (delta) {
      Array retrieved = squeeze(matmul(expand_dims(kt, 2), state), Axes{2});  // k^T S: [B, Hkv, dv]
      write = multiply(at(beta, t), subtract(vt, retrieved));
    }
    state = add(state, matmul(expand_dims(kt, -1), expand_dims(write, 2)));
    Array read = hq == hkv ? state : repeat(state, hq / hkv, 1);
    Array out = squeeze(matmul(expand_dims(at(q, t), 2), read), Axes{2});  // [B, Hq, dv]
    outs.push_back(multiply(scale_a, out));
    eval({state});
  }
  Array y = reshape(stack(outs, 1), {b, steps, hq * dv});  // [B, T, Hq, dv] flattened
  return {tv(astype(y, out_dt)), tv(astype(state, out_dt))};
}

/// FlexAttention (ai.onnx.preview): softmax(score_mod(Q K^T * scale)) then prob_mod, times V;
/// the modifiers are subgraphs from scores [B, H, L, S] to scores.
std::vector<Value> op_flex_attention(OpContext& c) {
  const Array& q = c.tensor(0);
  Array k = c.tensor(1), v = c.tensor(2);
  if (q.ndim() != 4 || k.ndim() != 4 || v.ndim() != 4)
    c.fail("Q, K and V must be 4-d, got " + c.input(0).describe() + ", " + c.input(1).describe() + ", " + c.input(2).describe());
  int64_t hq = q.shape()[1], hkv = k.shape()[1];
  if (hkv == 0 || hq % hkv)  // zero key heads: found by the fuzzer under UBSan (division by zero)
    c.fail(std::to_string(hq) + " query heads are not a multiple of " + std::to_string(hkv) + " key heads");
  if (hq != hkv) {
    k = repeat(k, hq / hkv, 1);
    v = repeat(v, hq / hkv, 1);
  }
  Dtype ct = q.dtype() == float64 ? float64 : float32;
  double scale = c.has_attr("scale") ? c.attr_float("scale", 1.0f) : 1.0 / std::sqrt(static_cast<double>(q.shape()[3]));
  Array scores = multiply(matmul(astype(q, ct), swapaxes(astype(k, ct), 2, 3)), full({}, Array(scale), ct));
  auto apply = [&](const char* attr, Array x) {
    if (!c.has_attr(attr)) return x;
    auto out = c.run_graph(c.attr_graph(attr), {tv(x)});
    if (out.empty() || !out[0].is_tensor()) c.fail(std::string(attr) + " must return one tensor");
    return astype(out[0].array(), ct);
  };
  scores = apply("score_mod", astype(scores, q.dtype()));
  Array probs = apply("prob_mod", astype(softmax(scores, {-1}), q.dtype()));
  return {tv(astype(matmul(probs, astype(v, ct)), q.dtype()))};
}
/// One key/value input of ai.smelt::ScaledDotProductAttention: `x` itself, or, when the rewrite
/// took a GQA repeat Reshape(Expand(Unsqueeze(x, [2]), expand_shape), reshape_shape) away, `x`
/// with `group` set when that chain repeats each head `group` times in place (then nothing is
/// copied), else the chain's result computed as ONNX defines it.
Array unrepeated(OpContext& c, size_t i, size_t shapes, int64_t& group) {
  Array x = c.tensor(i);
  group = 1;
  if (!c.has(shapes)) return x;
  Array u = expand_dims(x, 2);
  std::vector<int64_t> es = c.ints(shapes), rs = c.ints(shapes + 1);
  Shape expanded;
  try {
    expanded = broadcast_shapes(u.shape(), Shape(es.begin(), es.end()));
  } catch (const ShapeError&) {
    c.fail("the Expand of the key/value repeat cannot broadcast " + shape_to_string(u.shape()) + " to " +
           shape_to_string(Shape(es.begin(), es.end())));
  }
  // ONNX Reshape (allowzero = 0): 0 copies the input's size, -1 takes what is left.
  Shape target(rs.begin(), rs.end());
  int64_t known = 1, infer = -1, total = 1;
  for (int64_t d : expanded) total *= d;
  for (size_t j = 0; j < target.size(); ++j) {
    if (target[j] == 0 && j < expanded.size()) target[j] = expanded[j];
    if (target[j] == -1) infer = static_cast<int64_t>(j);
    else known *= target[j];
  }
  if (infer >= 0 && known > 0) target[static_cast<size_t>(infer)] = total / known;
  if (x.ndim() == 4 && expanded.size() == 5 && expanded[0] == x.shape()[0] && expanded[1] == x.shape()[1] &&
      expanded[3] == x.shape()[2] && expanded[4] == x.shape()[3] &&
      target == Shape{x.shape()[0], x.shape()[1] * expanded[2], x.shape()[2], x.shape()[3]}) {
    group = expanded[2];
    return x;
  }
  return reshape(broadcast_to(u, expanded), target);
}

/// ai.smelt::ScaledDotProductAttention, made by the load-time rewrite of exporters' attention
/// (fusions.cpp): softmax(MatMul(q, kᵀ) * scale masked) · v. Inputs: q, k (kᵀ = Transpose(k,
/// k_perm), or k is kᵀ without k_perm), v, mask (mask_kind 1: added, 2: bool true = attend, 3: bool
/// true = masked), then optionally the GQA repeat's shapes of k and of v. Attributes: scale (a
/// float64 scalar tensor), softmax_axis (as written: -1 or 3), mask_kind, k_perm. Inputs the op does not take (other ranks, dtypes, broadcasts) run the
/// rewritten subgraph's math as written.
std::vector<Value> op_sdpa(OpContext& c) {
  Array q = c.tensor(0);
  int64_t gk = 1, gv = 1;
  Array kx = unrepeated(c, 1, 4, gk), v = unrepeated(c, 2, 6, gv);
  if (gk != gv) {  // only one side was a repeat of heads: give both their repeated form
    if (gk > 1) kx = repeat(kx, gk, 1);
    if (gv > 1) v = repeat(v, gv, 1);
    gk = gv = 1;
  }
  const std::vector<int64_t> perm = c.attr_ints("k_perm", {});
  auto k_transposed = [&](const Array& x) { return perm.empty() ? x : transpose(x, Axes(perm.begin(), perm.end())); };
  const int64_t kind = c.attr_int("mask_kind", 0);
  const double scale = c.has_attr("scale") ? c.attr_tensor("scale").array().item<double>() : 1.0;
  Array mask;
  if (kind != 0) {
    mask = c.tensor(3);
    if (kind == 3) mask = logical_not(mask);
  }
  Array kt = k_transposed(kx);
  if (kt.ndim() == 4) {
    // The op's contract (rank 4, one float dtype, a mask that broadcasts) is checked by the op
    // itself; its ShapeError/DtypeError sends the other cases to the subgraph's math below.
    try {
      return {tv(scaled_dot_product_attention(q, swapaxes(kt, 2, 3), v, {.mask = mask, .scale = scale}))};
    } catch (const ShapeError&) {
    } catch (const DtypeError&) {
    }
  }
  // As the subgraph was written (keys and values repeated where the op took groups).
  if (gk > 1) {
    kt = k_transposed(repeat(kx, gk, 1));
    v = repeat(v, gv, 1);
  }
  Array s = matmul(q, kt);
  s = multiply(s, full({}, Array(scale), s.dtype()));
  if (kind == 1) s = add(s, mask);
  else if (kind != 0) s = where(mask, s, full({}, Array(-std::numeric_limits<double>::infinity()), s.dtype()));
  return {tv(matmul(softmax(s, {static_cast<int>(c.attr_int("softmax_axis", -1))}), v))};
}

}  // namespace

void register_attention_ops(OpRegistry& r) {
  r.add(kSmeltDomain, "ScaledDotProductAttention", 1, op_sdpa);
  r.add("", "Attention", 23, op_attention);
  r.add("", "LinearAttention", 27, op_linear_attention);
  r.add("ai.onnx.preview", "FlexAttention", 1, op_flex_attention);
}

}  // namespace smelt::onnx
