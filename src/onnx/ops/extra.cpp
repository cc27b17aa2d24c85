// ONNX losses, quantization, BitCast, Einsum, Unique, LpPool, ReverseSequence and RotaryEmbedding.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "src/onnx/ops/op_helpers.h"

namespace smelt::onnx {

namespace {

using E = ElemType;

// ---------------------------------------------------------------------------------------------
// Losses
// ---------------------------------------------------------------------------------------------

/// NLL on log-probabilities [N, C, d...] and targets [N, d...].
Array nll(OpContext& c, const Array& logp, const Array& target, const std::optional<Array>& weight) {
  if (logp.ndim() < 2 || target.ndim() != logp.ndim() - 1)
    c.fail("input must be [N, C, ...] and target [N, ...], got " + shape_str(logp.shape()) + " and " + shape_str(target.shape()));
  Dtype dt = logp.dtype();
  Array t = astype(target, int64);
  std::optional<Array> ignored;
  if (c.has_attr("ignore_index")) ignored = equal(t, Array(static_cast<int64_t>(c.attr_int("ignore_index", 0))));
  Array safe = ignored ? where(*ignored, Array(int64_t{0}), t) : t;
  Array picked = squeeze(take_along_axis(logp, expand_dims(safe, 1), 1), Axes{1});
  Array w = weight ? take(*weight, safe, 0) : ones(safe.shape(), dt);
  if (ignored) w = where(*ignored, zeros({}, dt), w);
  Array loss = negative(multiply(picked, w));
  std::string reduction = c.attr_string("reduction", "mean");
  if (reduction == "none") return keep_dtype(loss, dt);
  if (reduction == "sum") return keep_dtype(sum(loss), dt);
  if (reduction == "mean") return keep_dtype(divide(sum(loss), sum(w)), dt);
  c.fail("reduction must be none, sum or mean, got \"" + reduction + "\"");
}

std::vector<Value> op_nll_loss(OpContext& c) {
  std::optional<Array> w;
  if (c.has(2)) w = c.tensor(2);
  return {tv(nll(c, c.tensor(0), c.tensor(1), w))};
}

std::vector<Value> op_softmax_ce_loss(OpContext& c) {
  const Array& scores = c.tensor(0);
  Dtype dt = scores.dtype();
  Array logp = keep_dtype(log_softmax(astype(scores, dt == float64 ? float64 : float32), {1}), dt);
  std::optional<Array> w;
  if (c.has(2)) w = c.tensor(2);
  std::vector<Value> out{tv(nll(c, logp, c.tensor(1), w))};
  if (c.wants_output(1)) out.push_back(tv(logp));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Quantization
// ---------------------------------------------------------------------------------------------

/// A scale or zero point broadcast against x: per tensor, per axis, or per block along axis.
Array broadcast_param(OpContext& c, const Array& p, const Array& x, int64_t axis_attr, int64_t block) {
  if (p.size() == 1 && p.ndim() <= 1) return reshape(p, {});
  int axis = onnx_axis(c, axis_attr, x.ndim());
  if (block > 0) {
    // The spec's shape: ceil(x_dim / block_size) along the axis, x's dims elsewhere. Checked
    // before repeating, and a block past the axis' length repeats only that far (the slice keeps
    // no more): a block_size of 2^62 must not size a repeat of 2^63 elements.
    const int64_t xd = x.shape()[static_cast<size_t>(axis)];
    bool ok = p.ndim() == x.ndim();
    for (int i = 0; ok && i < x.ndim(); ++i)
      ok = p.shape()[static_cast<size_t>(i)] ==
           (i == axis ? xd / block + (xd % block != 0 ? 1 : 0) : x.shape()[static_cast<size_t>(i)]);
    if (!ok)
      c.fail("a blocked scale or zero point for input " + shape_str(x.shape()) + ", axis " + std::to_string(axis) +
             " and block_size " + std::to_string(block) + " must have x's shape with ceil(" + std::to_string(xd) +
             " / block_size) along the axis, got " + shape_str(p.shape()));
    Array r = repeat(p, std::min(block, std::max<int64_t>(xd, 1)), axis);
    return slice(r, Axes{axis}, {0}, {xd}, {1});
  }
  if (p.ndim() != 1 || p.shape()[0] != x.shape()[axis])
    c.fail("per-axis scale must be 1-d with " + std::to_string(x.shape()[axis]) + " values, got " + shape_str(p.shape()));
  Shape s(static_cast<size_t>(x.ndim()), 1);
  s[static_cast<size_t>(axis)] = p.shape()[0];
  return reshape(p, s);
}

/// Integer range of an element type, as doubles.
std::pair<double, double> int_range(ElemType t) {
  switch (t) {
    case E::Int8: return {-128, 127};
    case E::UInt8: return {0, 255};
    case E::Int16: return {-32768, 32767};
    case E::UInt16: return {0, 65535};
    case E::Int32: return {-2147483648.0, 2147483647.0};
    case E::UInt32: return {0, 4294967295.0};
    case E::Int4: return {-8, 7};
    case E::UInt4: return {0, 15};
    case E::Int2: return {-2, 1};
    case E::UInt2: return {0, 3};
    default: return {0, 0};
  }
}

std::vector<Value> op_quantize_linear(OpContext& c) {
  const Array& x = c.tensor(0);
  int64_t axis = c.attr_int("axis", 1), block = c.attr_int("block_size", 0);
  Dtype ct = x.dtype() == float64 ? float64 : float32;
  Array scale = astype(broadcast_param(c, c.tensor(1), x, axis, block), ct);
  ElemType out_type = E::UInt8;
  if (c.has(2)) out_type = c.elem_type(2);
  else if (c.attr_int("output_dtype", 0) != 0) out_type = elem_type_attr(c, "output_dtype", 0);
  Array scaled = divide(astype(x, ct), scale);
  auto [lo, hi] = int_range(out_type);
  if (lo == hi) {
    // Float8 and float4 targets: no zero point shift, a saturating cast.
    if (c.has(2)) {
      Value zp = cast_value(c.input(2), E::Float, true, &c);
      scaled = add(scaled, astype(broadcast_param(c, zp.array(), x, axis, block), ct));
    }
    return {cast_value(tv(scaled), out_type, c.attr_int("saturate", 1) != 0, &c)};
  }
  Array y = round(scaled);
  if (c.has(2)) y = add(y, astype(broadcast_param(c, c.tensor(2), x, axis, block), ct));
  y = clip(y, full({}, Array(lo), ct), full({}, Array(hi), ct));
  Dtype storage = *storage_dtype(out_type);
  Array q = astype(y, storage);
  return {is_storage_type(out_type) ? Value::tensor(q, out_type) : tv(q)};
}

std::vector<Value> op_dequantize_linear(OpContext& c) {
  const Value& xv = c.input(0);
  int64_t axis = c.attr_int("axis", 1), block = c.attr_int("block_size", 0);
  const Array& scale_in = c.tensor(1);
  Dtype out_dt = scale_in.dtype();
  if (c.attr_int("output_dtype", 0) != 0) out_dt = *storage_dtype(elem_type_attr(c, "output_dtype", 0));
  Dtype ct = out_dt == float64 ? float64 : float32;
  Array x = is_storage_type(xv.elem_type()) && xv.elem_type() != E::Int4 && xv.elem_type() != E::UInt4 &&
                    xv.elem_type() != E::Int2 && xv.elem_type() != E::UInt2
                ? cast_value(xv, E::Float, true, &c).array()
                : xv.array();
  Array xf = astype(x, ct);
  if (c.has(2)) {
    const Value& zp = c.input(2);
    Array z = is_storage_type(zp.elem_type()) ? cast_value(zp, E::Float, true, &c).array() : zp.array();
    xf = subtract(xf, astype(broadcast_param(c, z, x, axis, block), ct));
  }
  Array y = multiply(xf, astype(broadcast_param(c, scale_in, x, axis, block), ct));
  return {tv(astype(y, out_dt))};
}

std::vector<Value> op_dynamic_quantize_linear(OpContext& c) {
  const Array& x = c.tensor(0);
  Array xf = astype(x, float32);
  Array zero = zeros({}, float32);
  Array lo = minimum(min(xf), zero), hi = maximum(max(xf), zero);
  Array scale = divide(subtract(hi, lo), full({}, Array(255.0), float32));
  Array zp = clip(round(subtract(zero, divide(lo, scale))), zero, full({}, Array(255.0), float32));
  Array y = clip(add(round(divide(xf, scale)), zp), zero, full({}, Array(255.0), float32));
  return {tv(astype(y, uint8)), tv(scale), tv(astype(zp, uint8))};
}

// ---------------------------------------------------------------------------------------------
// BitCast, Unique, LpPool, ReverseSequence
// ---------------------------------------------------------------------------------------------

std::vector<Value> op_bitcast(OpContext& c) {
  const Array& x = c.tensor(0);
  auto to = elem_type_attr(c, "to", 0);
  auto dt = storage_dtype(to);
  if (!dt || is_storage_type(to)) c.fail("cannot bit-cast to " + elem_type_name(to));
  if (size_of(*dt) != size_of(x.dtype()))
    c.fail("cannot bit-cast " + std::string(dtype_name(x.dtype())) + " to " + elem_type_name(to) + ": sizes differ");
  // The bits are reinterpreted on the host (a GPU tensor is read back and the result sent back to
  // its device): BitCast moves a few values in practice, and this keeps one code path.
  Array contiguous = (x.device().type == Device::Type::Cpu) ? copy(x) : to_device(x, Device::cpu());
  contiguous.eval();
  Array cast(contiguous.data(), x.shape(), *dt);
  return {tv((x.device().type == Device::Type::Cpu) ? cast : to_device(cast, x.device()))};
}

std::vector<Value> op_unique(OpContext& c) {
  const Array& x = c.tensor(0);
  std::optional<int> axis;
  if (c.has_attr("axis")) axis = onnx_axis(c, c.attr_int("axis", 0), x.ndim());
  bool sorted = c.attr_int("sorted", 1) != 0;
  UniqueResult r = unique(x, axis, sorted);
  return {tv(r.values), tv(r.indices), tv(reshape(r.inverse, {-1})), tv(r.counts)};
}

std::vector<Value> op_lp_pool(OpContext& c) {
  const Array& x = c.tensor(0);
  if (x.ndim() < 3) c.fail("input must have rank >= 3, got " + c.input(0).describe());
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
  size_t n = kernel.size();
  if (n != static_cast<size_t>(x.ndim() - 2)) c.fail("kernel_shape needs one entry per spatial axis");
  double p = static_cast<double>(c.attr_int("p", 2));
  PoolOptions o;
  o.kernel = kernel;
  o.strides = c.attr_ints("strides", std::vector<int64_t>(n, 1));
  o.dilations = c.attr_ints("dilations", std::vector<int64_t>(n, 1));
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  // Every attribute is read per spatial axis (found by the fuzzer under ASan: a short pads was
  // copied past its end); the SAME padding below divides by the strides.
  if (o.strides.size() != n || o.dilations.size() != n || pads.size() != 2 * n)
    c.fail("strides " + shape_str(o.strides) + ", dilations " + shape_str(o.dilations) + " and pads " +
           shape_str(pads) + " must have " + std::to_string(n) + ", " + std::to_string(n) + " and " +
           std::to_string(2 * n) + " values for kernel_shape " + shape_str(kernel));
  for (size_t i = 0; i < n; ++i) {
    size_arg(c, kernel[i], "kernel_shape[" + std::to_string(i) + "]", true);
    size_arg(c, o.strides[i], "strides[" + std::to_string(i) + "]", true);
    size_arg(c, o.dilations[i], "dilations[" + std::to_string(i) + "]", true);
  }
  o.padding_lo.assign(pads.begin(), pads.begin() + static_cast<long>(n));
  o.padding_hi.assign(pads.begin() + static_cast<long>(n), pads.end());
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      int64_t in = x.shape()[i + 2], s = o.strides[i];
      int64_t out = in / s + (in % s != 0);  // ceil(in / s) without overflowing in + s - 1
      int64_t span = add_size(c, mul_size(c, out - 1, s), add_size(c, mul_size(c, kernel[i] - 1, o.dilations[i]), 1));
      int64_t total = std::max<int64_t>(0, span - in);
      o.padding_lo[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      o.padding_hi[i] = total - o.padding_lo[i];
    }
  } else if (auto_pad == "VALID") {
    std::fill(o.padding_lo.begin(), o.padding_lo.end(), 0);
    std::fill(o.padding_hi.begin(), o.padding_hi.end(), 0);
  }
  o.ceil_mode = c.attr_int("ceil_mode", 0) != 0;
  o.count_include_pad = true;  // zero padding: the window sum is the mean times the window size
  Dtype ct = x.dtype() == float64 ? float64 : float32;
  Array powed = power(abs(astype(x, ct)), full({}, Array(p), ct));
  double window = 1;
  for (auto k : kernel) window *= static_cast<double>(k);
  Array s = multiply(avg_pool(powed, o), full({}, Array(window), ct));
  return {tv(astype(power(s, full({}, Array(1.0 / p), ct)), x.dtype()))};
}

std::vector<Value> op_reverse_sequence(OpContext& c) {
  const Array& x = c.tensor(0);
  int batch_axis = onnx_axis(c, c.attr_int("batch_axis", 1), x.ndim(), "batch_axis");
  int time_axis = onnx_axis(c, c.attr_int("time_axis", 0), x.ndim(), "time_axis");
  auto lens = c.ints(1);
  int64_t batch = x.shape()[batch_axis], time = x.shape()[time_axis];
  if (static_cast<int64_t>(lens.size()) != batch) c.fail("sequence_lens must have one entry per batch element");
  Shape ishape(static_cast<size_t>(x.ndim()), 1);
  ishape[batch_axis] = batch;
  ishape[time_axis] = time;
  std::vector<int64_t> idx(static_cast<size_t>(batch * time));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < time; ++t) {
      int64_t len = std::clamp<int64_t>(lens[static_cast<size_t>(b)], 0, time);
      int64_t src = t < len ? len - 1 - t : t;
      size_t at = batch_axis < time_axis ? static_cast<size_t>(b * time + t) : static_cast<size_t>(t * batch + b);
      idx[at] = src;
    }
  Shape full_shape = x.shape();
  Array indices = broadcast_to(reshape(int64_array(idx), ishape), full_shape);
  return {tv(take_along_axis(x, indices, time_axis))};
}

// ---------------------------------------------------------------------------------------------
// Einsum
// ---------------------------------------------------------------------------------------------

/// Takes the diagonal of a repeated letter: axes p < q of equal size become one axis at p.
Array diagonal(const Array& a, int p, int q) {
  int64_t n = a.shape()[p];
  Array m = moveaxis(moveaxis(a, q, a.ndim() - 1), p, a.ndim() - 2);  // [..., n, n]
  Shape s = m.shape();
  Shape flat(s.begin(), s.end() - 2);
  flat.push_back(n * n);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < n; ++i) idx.push_back(i * (n + 1));
  Array d = take(reshape(m, flat), int64_array(idx), static_cast<int>(flat.size()) - 1);  // [..., n]
  return moveaxis(d, d.ndim() - 1, p);
}

std::vector<Value> op_einsum(OpContext& c) {
  std::string eq = c.attr_string("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  auto arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    auto comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != c.num_inputs())
    c.fail("equation \"" + eq + "\" has " + std::to_string(terms.size()) + " operands for " + std::to_string(c.num_inputs()) + " inputs");
  // Ellipses become upper-case letters (the equation itself uses lower case), right-aligned.
  int ell_rank = 0;
  for (size_t i = 0; i < terms.size(); ++i)
    if (terms[i].find("...") != std::string::npos)
      ell_rank = std::max<int>(ell_rank, c.tensor(i).ndim() - static_cast<int>(terms[i].size() - 3));
  std::string ell;
  for (int i = 0; i < ell_rank; ++i) ell += static_cast<char>('A' + i);
  std::vector<Array> ops;
  for (size_t i = 0; i < terms.size(); ++i) {
    Array a = c.tensor(i);
    std::string& t = terms[i];
    auto pos = t.find("...");
    if (pos != std::string::npos) {
      int r = a.ndim() - static_cast<int>(t.size() - 3);
      t = t.substr(0, pos) + ell.substr(ell.size() - static_cast<size_t>(r)) + t.substr(pos + 3);
    }
    if (static_cast<int>(t.size()) != a.ndim())
      c.fail("operand " + std::to_string(i) + " term \"" + t + "\" does not match " + c.input(i).describe());
    // Repeated letters take diagonals.
    for (bool again = true; again;) {
      again = false;
      for (size_t p = 0; p < t.size() && !again; ++p) {
        auto q = t.find(t[p], p + 1);
        if (q != std::string::npos) {
          a = diagonal(a, static_cast<int>(p), static_cast<int>(q));
          t.erase(q, 1);
          again = true;
        }
      }
    }
    ops.push_back(a);
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
    auto pos = out.find("...");
    if (pos != std::string::npos) out = out.substr(0, pos) + ell + out.substr(pos + 3);
  } else {
    // Implicit output: the ellipsis letters, then letters seen once, alphabetically.
    std::map<char, int> count;
    for (const auto& t : terms)
      for (char ch : t) ++count[ch];
    out = ell;
    for (auto [ch, n] : count)
      if (n == 1 && !(ch >= 'A' && ch <= 'Z')) out += ch;
  }
  // All letters: output first, then the summed ones.
  std::string all = out;
  for (const auto& t : terms)
    for (char ch : t)
      if (all.find(ch) == std::string::npos) all += ch;
  Array acc;
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string& t = terms[i];
    // Permute to the order of `all` and add size-1 axes for letters the operand lacks.
    Axes perm;
    Shape shape;
    for (char ch : all) {
      auto p = t.find(ch);
      if (p != std::string::npos) perm.push_back(static_cast<int>(p));
    }
    Array a = transpose(ops[i], perm);
    size_t k = 0;
    for (char ch : all) {
      if (t.find(ch) != std::string::npos) shape.push_back(a.shape()[k++]);
      else shape.push_back(1);
    }
    a = reshape(a, shape);
    acc = acc.valid() ? multiply(acc, a) : a;
  }
  Axes summed;
  for (size_t i = out.size(); i < all.size(); ++i) summed.push_back(static_cast<int>(i));
  Dtype dt = c.tensor(0).dtype();
  Array y = summed.empty() ? acc : sum(acc, summed);
  return {tv(keep_dtype(y, dt))};
}

// ---------------------------------------------------------------------------------------------
// RotaryEmbedding (opset 23)
// ---------------------------------------------------------------------------------------------

std::vector<Value> op_rotary_embedding(OpContext& c) {
  Array x = c.tensor(0);
  const Shape in_shape = x.shape();
  bool interleaved = c.attr_int("interleaved", 0) != 0;
  int64_t heads = c.attr_int("num_heads", 0);
  int64_t rot_dim = c.attr_int("rotary_embedding_dim", 0);
  bool three_d = x.ndim() == 3;
  if (three_d) {
    if (heads <= 0) c.fail("num_heads is required for 3-d input");
    int64_t b = in_shape[0], s = in_shape[1];
    x = transpose(reshape(x, {b, s, heads, in_shape[2] / heads}), {0, 2, 1, 3});
  } else if (x.ndim() != 4) {  // 4-d input is [B, H, S, D] already
    c.fail("input must be 3-d or 4-d, got " + c.input(0).describe());
  }
  // x: [B, H, S, D]
  int64_t d = x.shape()[3];
  if (rot_dim == 0) rot_dim = d;
  Array cos_c = c.tensor(1), sin_c = c.tensor(2);
  if (c.has(3)) {
    Array pos = c.tensor(3);  // [B, S]
    cos_c = take(cos_c, pos, 0);  // [B, S, rot/2]
    sin_c = take(sin_c, pos, 0);
  }
  // Broadcast [B, S, rot/2] over heads: [B, 1, S, rot/2].
  cos_c = expand_dims(cos_c, 1);
  sin_c = expand_dims(sin_c, 1);
  Array rot = slice(x, Axes{3}, {0}, {rot_dim}, {1});
  Array rest = slice(x, Axes{3}, {rot_dim}, {d}, {1});
  int64_t half = rot_dim / 2;
  Array x1, x2;
  if (interleaved) {
    x1 = slice(rot, Axes{3}, {0}, {rot_dim}, {2});
    x2 = slice(rot, Axes{3}, {1}, {rot_dim}, {2});
  } else {
    x1 = slice(rot, Axes{3}, {0}, {half}, {1});
    x2 = slice(rot, Axes{3}, {half}, {rot_dim}, {1});
  }
  Array r1 = subtract(multiply(x1, cos_c), multiply(x2, sin_c));
  Array r2 = add(multiply(x1, sin_c), multiply(x2, cos_c));
  Array rotated = interleaved ? reshape(stack({r1, r2}, 4), {x.shape()[0], x.shape()[1], x.shape()[2], rot_dim})
                              : concatenate({r1, r2}, 3);
  Array y = rot_dim < d ? concatenate({rotated, rest}, 3) : rotated;
  y = keep_dtype(y, c.tensor(0).dtype());
  if (three_d) return {tv(reshape(transpose(y, {0, 2, 1, 3}), in_shape))};
  return {tv(y)};
}

}  // namespace

void register_extra_ops(OpRegistry& r) {
  r.add("", "NegativeLogLikelihoodLoss", 12, op_nll_loss);
  r.add("", "SoftmaxCrossEntropyLoss", 12, op_softmax_ce_loss);
  r.add("", "QuantizeLinear", 10, op_quantize_linear);
  r.add("", "DequantizeLinear", 10, op_dequantize_linear);
  r.add("", "DynamicQuantizeLinear", 11, op_dynamic_quantize_linear);
  r.add("", "BitCast", 26, op_bitcast);
  r.add("", "Unique", 11, op_unique);
  r.add("", "LpPool", 2, op_lp_pool);
  r.add("", "ReverseSequence", 10, op_reverse_sequence);
  r.add("", "Einsum", 12, op_einsum);
  r.add("", "RotaryEmbedding", 23, op_rotary_embedding);
}

}  // namespace smelt::onnx
