// ONNX neural-network operators: MatMul, Gemm, softmax family, convolution, pooling, normalization.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "smelt/random.h"
#include "src/core/node.h"
#include "src/onnx/ops/op_helpers.h"
#include "src/onnx/random_key.h"

namespace smelt::onnx {

namespace {

using E = ElemType;

Array scalar_like(double v, const Array& like) { return full({}, Array(v), like.dtype()); }
/// The float type a normalization computes in: float64 stays, everything else uses float32.
Dtype compute_type(Dtype dt) { return dt == float64 ? float64 : float32; }

std::vector<Value> op_matmul(OpContext& c) {
  c.require_same_type(0, 1);
  const Array& a = c.tensor(0);
  const Array& b = c.tensor(1);
  if (a.ndim() == 0 || b.ndim() == 0) c.fail("inputs must have rank >= 1, got " + c.input(0).describe() + " and " + c.input(1).describe());
  constexpr int64_t kShortRows = 16;  // matrices of fewer rows are bound by reading the weight
  if (a.ndim() > 2 && b.ndim() == 2 && a.shape().back() == b.shape()[0] && a.shape()[a.ndim() - 2] < kShortRows) {
    // A batch of short matrices times one weight matrix (a decode step's projections of
    // [batch, 1, d] activations): one product of all of A's rows, its leading axes folded into M,
    // as ONNX Runtime and PyTorch compute it. As a batched product each matrix of the batch was
    // its own GEMM, each reading the whole weight, which bounds products of few rows: GPT-2's
    // decode step at batch 8 read every weight 8 times (1.9 ms against ONNX Runtime's 1.0; 0.75
    // folded). Longer matrices stay batched: their GEMMs are bound by the multiply-adds, and ViT's
    // 8 x 197 rows ran 5% slower as one product of 1,576 (its tiles). (smelt's matmul itself does
    // not fold: its bits must not depend on whether B is broadcast.)
    Shape out = a.shape();
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < out.size(); ++i) rows *= out[i];
    out.back() = b.shape()[1];
    Array flat = reshape(a, {rows, a.shape().back()});
    return {tv(keep_dtype(reshape(matmul(flat, b), out), a.dtype()))};
  }
  return {tv(keep_dtype(matmul(a, b), a.dtype()))};
}

std::vector<Value> op_gemm(OpContext& c) {
  c.require_same_type(0, 1);
  Array a = c.tensor(0), b = c.tensor(1);
  if (a.ndim() != 2 || b.ndim() != 2) c.fail("A and B must be 2-d, got " + c.input(0).describe() + " and " + c.input(1).describe());
  if (c.attr_int("transA", 0)) a = transpose(a);
  if (c.attr_int("transB", 0)) b = transpose(b);
  Dtype dt = a.dtype();
  float alpha = c.attr_float("alpha", 1.0f), beta = c.attr_float("beta", 1.0f);
  Array y = matmul(a, b);
  if (alpha != 1.0f) y = multiply(y, scalar_like(alpha, y));
  if (c.has(2) && beta != 0.0f) {
    Array bias = c.tensor(2);
    if (beta != 1.0f) bias = multiply(bias, scalar_like(beta, bias));
    y = add(y, bias);
  }
  return {tv(keep_dtype(y, dt))};
}

/// Softmax-like ops: opset < 13 flattens to 2-d at `axis` (default 1); 13+ works on one axis.
template <int Kind>  // 0 softmax, 1 log_softmax, 2 hardmax
std::vector<Value> softmax_family(OpContext& c) {
  const Array& x = c.tensor(0);
  c.require_types(0, {E::Float, E::Double, E::Float16, E::BFloat16});
  auto apply = [&](const Array& in, int axis) -> Array {
    if (Kind == 0) return keep_dtype(softmax(in, {axis}), in.dtype());
    if (Kind == 1) return keep_dtype(log_softmax(in, {axis}), in.dtype());
    Array idx = argmax(in, axis, true);
    Array pos = reshape(arange(0, static_cast<double>(in.shape()[axis]), 1, int64), [&] {
      Shape s(static_cast<size_t>(in.ndim()), 1);
      s[static_cast<size_t>(axis)] = in.shape()[axis];
      return s;
    }());
    return astype(equal(idx, pos), in.dtype());
  };
  if (x.ndim() == 0) return {tv(reshape(apply(reshape(x, {1}), 0), {}))};
  if (c.opset() >= 13) {
    int axis = onnx_axis(c, c.attr_int("axis", -1), x.ndim());
    return {tv(apply(x, axis))};
  }
  int axis = onnx_axis(c, c.attr_int("axis", 1), x.ndim());
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < x.ndim(); ++i) {
    int64_t& part = i < axis ? outer : inner;
    part = mul_size(c, part, x.shape()[i]);
  }
  return {tv(reshape(apply(reshape(x, {outer, inner}), 1), x.shape()))};
}

struct Spatial {
  std::vector<int64_t> kernel, strides, dilations, lo, hi;
};

/// Kernel, strides, dilations and padding of a conv or pool node (auto_pad resolved).
Spatial spatial_of(OpContext& c, const Shape& in, const std::vector<int64_t>& kernel) {
  size_t n = kernel.size();
  if (in.size() < 3 || n != in.size() - 2)
    c.fail("kernel_shape " + shape_str(kernel) + " must have one value per spatial axis of the input " + shape_str(in));
  Spatial s;
  s.kernel = kernel;
  s.strides = c.attr_ints("strides", std::vector<int64_t>(n, 1));
  s.dilations = c.attr_ints("dilations", std::vector<int64_t>(n, 1));
  if (s.strides.size() != n || s.dilations.size() != n)
    c.fail("strides and dilations need one entry per spatial axis (" + std::to_string(n) + ")");
  // Checked here too: SAME padding below divides by the strides and multiplies by the dilations.
  for (size_t i = 0; i < n; ++i)
    if (s.strides[i] < 1 || s.dilations[i] < 1 || kernel[i] < 1)
      c.fail("kernel_shape, strides and dilations must be positive, got " + shape_str(kernel) + ", " +
             shape_str(s.strides) + " and " + shape_str(s.dilations));
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (pads.size() != 2 * n) c.fail("pads needs " + std::to_string(2 * n) + " entries, got " + std::to_string(pads.size()));
  s.lo.assign(pads.begin(), pads.begin() + static_cast<long>(n));
  s.hi.assign(pads.begin() + static_cast<long>(n), pads.end());
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "VALID") {
    std::fill(s.lo.begin(), s.lo.end(), 0);
    std::fill(s.hi.begin(), s.hi.end(), 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      int64_t size = in[i + 2];
      int64_t out = size / s.strides[i] + (size % s.strides[i] != 0 ? 1 : 0);
      int64_t total = std::max<int64_t>(
          0, checked_sub(add_size(c, add_size(c, mul_size(c, std::max<int64_t>(out - 1, 0), s.strides[i]),
                                              mul_size(c, kernel[i] - 1, s.dilations[i])),
                                  1),
                         size, c.node().label()));
      int64_t small = total / 2;
      s.lo[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      s.hi[i] = total - s.lo[i];
    }
  } else if (auto_pad != "NOTSET") {
    c.fail("auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got \"" + auto_pad + "\"");
  }
  return s;
}

Array add_channel_bias(const Array& y, const Array& bias) {
  Shape s(static_cast<size_t>(y.ndim()), 1);
  s[1] = bias.size();
  return add(y, reshape(bias, s));
}

std::vector<Value> op_conv(OpContext& c) {
  const Array& x = c.tensor(0);
  const Array& w = c.tensor(1);
  c.require_same_type(0, 1);
  if (x.ndim() < 3 || w.ndim() != x.ndim())
    c.fail("X and W must have the same rank >= 3, got " + c.input(0).describe() + " and " + c.input(1).describe());
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape", Shape(w.shape().begin() + 2, w.shape().end()));
  Spatial s = spatial_of(c, x.shape(), kernel);
  ConvOptions o{s.strides, s.lo, s.hi, s.dilations, c.attr_int("group", 1)};
  Array y = conv(x, w, o);
  if (c.has(2)) y = add_channel_bias(y, c.tensor(2));
  return {tv(keep_dtype(y, x.dtype()))};
}

std::vector<Value> op_conv_transpose(OpContext& c) {
  const Array& x = c.tensor(0);
  const Array& w = c.tensor(1);
  c.require_same_type(0, 1);
  if (x.ndim() < 3 || w.ndim() != x.ndim())
    c.fail("X and W must have the same rank >= 3, got " + c.input(0).describe() + " and " + c.input(1).describe());
  size_t n = static_cast<size_t>(x.ndim() - 2);
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape", Shape(w.shape().begin() + 2, w.shape().end()));
  std::vector<int64_t> strides = c.attr_ints("strides", std::vector<int64_t>(n, 1));
  std::vector<int64_t> dil = c.attr_ints("dilations", std::vector<int64_t>(n, 1));
  std::vector<int64_t> out_pad = c.attr_ints("output_padding", std::vector<int64_t>(n, 0));
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  std::vector<int64_t> output_shape = c.attr_ints("output_shape");
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (strides.size() != n || dil.size() != n || out_pad.size() != n || pads.size() != 2 * n)
    c.fail("strides, dilations, output_padding and pads must match the " + std::to_string(n) + " spatial axes");
  if (output_shape.size() > n) output_shape.erase(output_shape.begin(), output_shape.end() - static_cast<long>(n));
  // Both are read per spatial axis below (found by the fuzzer under ASan: a short kernel_shape
  // or output_shape was read past its end).
  if (kernel.size() != n)
    c.fail("kernel_shape " + shape_str(kernel) + " must have one value per spatial axis (" + std::to_string(n) + ")");
  if (!output_shape.empty() && output_shape.size() != n)
    c.fail("output_shape " + shape_str(output_shape) + " must have one value per spatial axis (" + std::to_string(n) + ")");
  // The spec's sizes are positive (found by the fuzzer under UBSan: kernel_shape INT64_MIN
  // overflowed kernel - 1 in the SAME padding below).
  for (size_t i = 0; i < n; ++i) {
    size_arg(c, kernel[i], "kernel_shape[" + std::to_string(i) + "]", true);
    size_arg(c, strides[i], "strides[" + std::to_string(i) + "]", true);
    size_arg(c, dil[i], "dilations[" + std::to_string(i) + "]", true);
    size_arg(c, out_pad[i], "output_padding[" + std::to_string(i) + "]");
  }
  if (!output_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      int64_t in = x.shape()[i + 2];
      // Attributes from the model: every step is checked (ShapeError naming the node on overflow).
      int64_t target = output_shape.empty() ? mul_size(c, in, strides[i]) : output_shape[i];
      int64_t total = checked_sub(add_size(c, add_size(c, mul_size(c, strides[i], in - 1), out_pad[i]),
                                           add_size(c, mul_size(c, kernel[i] - 1, dil[i]), 1)),
                                  target, c.node().label());
      if (total < 0) {  // the output is larger: pad it at the end through output_padding
        out_pad[i] -= total;
        total = 0;
      }
      if (auto_pad == "SAME_UPPER") {
        pads[i] = total / 2;
        pads[i + n] = total - total / 2;
      } else {
        pads[i] = total - total / 2;
        pads[i + n] = total / 2;
      }
    }
  } else if (auto_pad == "VALID") {
    std::fill(pads.begin(), pads.end(), 0);
  }
  ConvTransposeOptions o;
  o.strides = strides;
  o.dilations = dil;
  o.padding_lo.assign(pads.begin(), pads.begin() + static_cast<long>(n));
  o.padding_hi.assign(pads.begin() + static_cast<long>(n), pads.end());
  o.output_padding = out_pad;
  o.groups = c.attr_int("group", 1);
  Array y = conv_transpose(x, w, o);
  if (c.has(2)) y = add_channel_bias(y, c.tensor(2));
  return {tv(keep_dtype(y, x.dtype()))};
}

/// The kernel offsets along one axis whose strided slice reads the input for some output,
/// ascending ({0} when none does). The others read only padding, which never holds a maximum;
/// walking them cost one step per offset of the kernel (2^31 with SAME padding; found by the
/// fuzzer). Output o reads the offsets t with 0 <= o*stride - lo + t*dil < in, which move left as
/// o grows; their union has at most out * ceil(in / dil) offsets.
/// Only the outputs whose window touches the input are visited (o*stride - lo <= in - 1 and
/// o*stride - lo + (kernel-1)*dil >= 0): a huge pad alone no longer costs one step per output
/// (2^31 steps, found by the fuzzer). `tick` runs every 2^16 steps (the run's deadline check).
std::vector<int64_t> offsets_reading_input(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t dil,
                                           int64_t lo, const std::function<void()>& tick) {
  // The smallest t in [0, kernel] with p0 + t*dil >= bound; bound - p0 <= in + lo fits in int64.
  auto at_least = [&](int64_t p0, int64_t bound) -> int64_t {
    if (p0 >= bound) return 0;
    const int64_t need = bound - p0;
    return std::min(kernel, need / dil + (need % dil != 0 ? 1 : 0));
  };
  // The caller checked (kernel-1)*dil + 1 and in + lo for overflow; every term here is smaller.
  const int64_t reach = (kernel - 1) * dil;
  const int64_t first_need = lo - reach;  // o*stride >= lo - reach
  const int64_t o_first = first_need <= 0 ? 0 : first_need / stride + (first_need % stride != 0 ? 1 : 0);
  const int64_t o_last = std::min(out - 1, (in - 1 + lo) / stride);
  std::vector<int64_t> offsets;
  int64_t steps = 0;
  for (int64_t o = o_last; o >= o_first; --o) {
    if ((++steps & 0xffff) == 0) tick();
    const int64_t p0 = o * stride - lo;
    int64_t t = std::max(at_least(p0, 0), offsets.empty() ? int64_t{0} : offsets.back() + 1);
    for (const int64_t last = at_least(p0, in); t < last; ++t) offsets.push_back(t);
  }
  if (offsets.empty()) offsets.push_back(0);
  return offsets;
}

/// Max pooling that also returns the flat index of each maximum (MaxPool's Indices output):
/// one strided slice of the padded input per kernel offset, keeping the first maximum.
std::vector<Value> max_pool_with_indices(OpContext& c, const Array& x, const PoolOptions& o) {
  int r = x.ndim();
  size_t n = static_cast<size_t>(r - 2);
  Shape out_sp;
  std::vector<std::pair<int64_t, int64_t>> width(static_cast<size_t>(r), {0, 0});
  for (size_t i = 0; i < n; ++i) {
    int64_t in = x.shape()[i + 2];
    // Attributes from the model: every size step is checked (ShapeError naming the node).
    if (o.kernel[i] < 1 || o.strides[i] < 1 || o.dilations[i] < 1 || o.padding_lo[i] < 0 || o.padding_hi[i] < 0)
      c.fail("kernel_shape, strides and dilations must be positive and pads non-negative");
    int64_t span = add_size(c, mul_size(c, o.kernel[i] - 1, o.dilations[i]), 1);
    int64_t num = checked_sub(add_size(c, add_size(c, in, o.padding_lo[i]), o.padding_hi[i]), span, c.node().label());
    if (num < 0) c.fail("the pooling window (" + std::to_string(span) + ") is larger than the padded input");
    int64_t out = (o.ceil_mode ? num / o.strides[i] + (num % o.strides[i] != 0 ? 1 : 0) : num / o.strides[i]) + 1;
    if (o.ceil_mode && mul_size(c, out - 1, o.strides[i]) >= in + o.padding_lo[i]) --out;
    out_sp.push_back(out);
    (void)add_size(c, mul_size(c, out - 1, o.strides[i]), span);  // the reach of the last window fits
  }
  // The output and its indices are checked against the run's memory budget before any work.
  int64_t count = mul_size(c, x.shape()[0], x.shape()[1]);
  for (int64_t d : out_sp) count = mul_size(c, count, d);
  c.check_room(mul_size(c, count, static_cast<int64_t>(size_of(x.dtype()) + sizeof(int64_t))), "the output and its indices");
  if (count == 0) {
    // Nothing to compute; the index arrays below are sized by the output's spatial axes, which
    // an empty batch does not bound (a 2^31 pad on a [0, 1, 5, 5] input: 16 GB of indices for
    // an empty result, found by fuzzing).
    Shape out_shape{x.shape()[0], x.shape()[1]};
    out_shape.insert(out_shape.end(), out_sp.begin(), out_sp.end());
    return {tv(zeros(out_shape, x.dtype())), tv(zeros(out_shape, int64))};
  }
  // Only the offsets that read the input are walked, and the input is padded only as far as
  // they read: positions o*stride + t*dil - lo for o in [0, out) and t in [first, last].
  std::vector<std::vector<int64_t>> offsets(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t in = x.shape()[i + 2], lo = o.padding_lo[i];
    offsets[i] = offsets_reading_input(in, out_sp[i], o.kernel[i], o.strides[i], o.dilations[i], lo,
                                       [&] { c.check_stop(); });
    const int64_t left = offsets[i].front() * o.dilations[i] - lo;
    const int64_t right = (out_sp[i] - 1) * o.strides[i] + offsets[i].back() * o.dilations[i] - lo;
    width[i + 2] = {std::max<int64_t>(0, -left), std::max<int64_t>(0, right - (in - 1))};
  }
  Dtype dt = x.dtype();
  Array lowest = is_floating(dt) ? full({}, Array(-std::numeric_limits<double>::infinity()), dt)
                                 : full({}, Array(is_unsigned_integral(dt) ? 0.0 : -std::pow(2.0, size_of(dt) * 8 - 1)), dt);
  Array padded = pad(x, width, PadMode::Constant, lowest);
  bool column_major = c.attr_int("storage_order", 0) != 0;
  // Strides of the flat index over the unpadded input (row- or column-major spatial order).
  std::vector<int64_t> sp_stride(n, 1);
  int64_t plane = 1;
  for (size_t i = 0; i < n; ++i) plane = mul_size(c, plane, x.shape()[i + 2]);
  if (column_major) {
    for (size_t i = 1; i < n; ++i) sp_stride[i] = sp_stride[i - 1] * x.shape()[i + 1];
  } else {
    for (size_t i = n - 1; i-- > 0;) sp_stride[i] = sp_stride[i + 1] * x.shape()[i + 3];
  }
  Shape nc{x.shape()[0], x.shape()[1]};
  Array base = reshape(multiply(arange(0, static_cast<double>(nc[0] * nc[1]), 1, int64), Array(plane)),
                       [&] { Shape s = nc; s.resize(static_cast<size_t>(r), 1); return s; }());
  Array best, best_idx;
  std::vector<size_t> at(n, 0);
  std::vector<int64_t> k(n, 0);
  for (;;) {
    for (size_t i = 0; i < n; ++i) k[i] = offsets[i][at[i]];
    std::vector<int64_t> start(static_cast<size_t>(r), 0), stop(padded.shape().begin(), padded.shape().end()),
        step(static_cast<size_t>(r), 1);
    Array idx = base;
    for (size_t i = 0; i < n; ++i) {
      start[i + 2] = k[i] * o.dilations[i] - o.padding_lo[i] + width[i + 2].first;
      stop[i + 2] = start[i + 2] + (out_sp[i] - 1) * o.strides[i] + 1;
      step[i + 2] = o.strides[i];
      Shape s(static_cast<size_t>(r), 1);
      s[i + 2] = out_sp[i];
      Array coord = add(multiply(arange(0, static_cast<double>(out_sp[i]), 1, int64), Array(o.strides[i])),
                        Array(k[i] * o.dilations[i] - o.padding_lo[i]));
      idx = add(idx, reshape(multiply(coord, Array(sp_stride[i])), s));
    }
    Array v = slice(padded, start, stop, step);
    if (!best.valid()) {
      best = v;
      best_idx = broadcast_to(idx, v.shape());
    } else {
      Array better = greater(v, best);
      best = where(better, v, best);
      best_idx = where(better, idx, best_idx);
    }
    size_t d = n;
    while (d > 0 && ++at[d - 1] == offsets[d - 1].size()) at[--d] = 0;
    if (d == 0) break;
  }
  return {tv(best), tv(best_idx)};
}

template <bool Max>
std::vector<Value> pool(OpContext& c) {
  const Array& x = c.tensor(0);
  if (x.ndim() < 3) c.fail("input must have rank >= 3, got " + c.input(0).describe());
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
  if (kernel.size() != static_cast<size_t>(x.ndim() - 2)) c.fail("kernel_shape needs one entry per spatial axis");
  Spatial s = spatial_of(c, x.shape(), kernel);
  PoolOptions o;
  o.kernel = kernel;
  o.strides = s.strides;
  o.padding_lo = s.lo;
  o.padding_hi = s.hi;
  o.dilations = s.dilations;
  o.ceil_mode = c.attr_int("ceil_mode", 0) != 0;
  o.count_include_pad = c.attr_int("count_include_pad", 0) != 0;
  if (Max && c.wants_output(1)) return max_pool_with_indices(c, x, o);
  return {tv(Max ? max_pool(x, o) : avg_pool(x, o))};
}

template <bool Max>
std::vector<Value> global_pool(OpContext& c) {
  const Array& x = c.tensor(0);
  if (x.ndim() < 3) c.fail("input must have rank >= 3, got " + c.input(0).describe());
  Axes axes;
  for (int i = 2; i < x.ndim(); ++i) axes.push_back(i);
  return {tv(keep_dtype(Max ? max(x, axes, true) : mean(x, axes, true), x.dtype()))};
}

Array channel_param(const Array& p, int rank) {
  Shape s(static_cast<size_t>(rank), 1);
  s[1] = p.size();
  return reshape(p, s);
}

std::vector<Value> op_batch_norm(OpContext& c) {
  const Array& x = c.tensor(0);
  if (x.ndim() < 2) c.fail("input must have rank >= 2, got " + c.input(0).describe());
  Dtype ct = compute_type(x.dtype());
  int r = x.ndim();
  if (c.attr_int("training_mode", 0) != 0) {
    // Normalizes with the batch statistics and returns the updated running statistics.
    Axes axes{0};
    for (int i = 2; i < r; ++i) axes.push_back(i);
    Array xf = astype(x, ct);
    Array bm = mean(xf, axes, true);
    Array d = subtract(xf, bm);
    Array bv = mean(multiply(d, d), axes, true);
    Array eps = full({}, Array(static_cast<double>(c.attr_float("epsilon", 1e-5f))), ct);
    Array y = add(multiply(divide(d, sqrt(add(bv, eps))), channel_param(astype(c.tensor(1), ct), r)),
                  channel_param(astype(c.tensor(2), ct), r));
    Array mom = full({}, Array(static_cast<double>(c.attr_float("momentum", 0.9f))), ct);
    Array one_minus = subtract(full({}, Array(1.0), ct), mom);
    Array run_mean = add(multiply(astype(c.tensor(3), ct), mom), multiply(reshape(bm, {-1}), one_minus));
    Array run_var = add(multiply(astype(c.tensor(4), ct), mom), multiply(reshape(bv, {-1}), one_minus));
    return {tv(astype(y, x.dtype())), tv(astype(run_mean, c.tensor(3).dtype())), tv(astype(run_var, c.tensor(4).dtype()))};
  }
  Array scale = channel_param(astype(c.tensor(1), ct), r), bias = channel_param(astype(c.tensor(2), ct), r);
  Array m = channel_param(astype(c.tensor(3), ct), r), v = channel_param(astype(c.tensor(4), ct), r);
  Array eps = full({}, Array(static_cast<double>(c.attr_float("epsilon", 1e-5f))), ct);
  Array y = add(multiply(divide(subtract(astype(x, ct), m), sqrt(add(v, eps))), scale), bias);
  return {tv(astype(y, x.dtype()))};
}

std::vector<Value> op_instance_norm(OpContext& c) {
  const Array& x = c.tensor(0);
  if (x.ndim() < 3) c.fail("input must have rank >= 3, got " + c.input(0).describe());
  Dtype ct = compute_type(x.dtype());
  Axes axes;
  for (int i = 2; i < x.ndim(); ++i) axes.push_back(i);
  Array xf = astype(x, ct);
  Array m = mean(xf, axes, true);
  Array d = subtract(xf, m);
  Array v = mean(multiply(d, d), axes, true);
  Array eps = full({}, Array(static_cast<double>(c.attr_float("epsilon", 1e-5f))), ct);
  Array y = add(multiply(divide(d, sqrt(add(v, eps))), channel_param(astype(c.tensor(1), ct), x.ndim())),
                channel_param(astype(c.tensor(2), ct), x.ndim()));
  return {tv(astype(y, x.dtype()))};
}

std::vector<Value> op_layer_norm(OpContext& c) {
  const Array& x = c.tensor(0);
  int axis = onnx_axis(c, c.attr_int("axis", -1), x.ndim());
  Dtype ct = c.attr_int("stash_type", 1) == 1 ? compute_type(x.dtype()) : x.dtype();
  Axes axes;
  for (int i = axis; i < x.ndim(); ++i) axes.push_back(i);
  Array xf = astype(x, ct);
  Array m = mean(xf, axes, true);
  Array d = subtract(xf, m);
  Array v = mean(multiply(d, d), axes, true);
  Array eps = full({}, Array(static_cast<double>(c.attr_float("epsilon", 1e-5f))), ct);
  Array inv = divide(full({}, Array(1.0), ct), sqrt(add(v, eps)));
  Array y = multiply(multiply(d, inv), astype(c.tensor(1), ct));
  if (c.has(2)) y = add(y, astype(c.tensor(2), ct));
  std::vector<Value> out{tv(astype(y, x.dtype()))};
  if (c.wants_output(1)) out.push_back(tv(astype(m, ct)));
  if (c.wants_output(2)) {
    if (out.size() < 2) out.emplace_back();
    out.push_back(tv(inv));
  }
  return out;
}

std::vector<Value> op_rms_norm(OpContext& c) {
  const Array& x = c.tensor(0);
  int axis = onnx_axis(c, c.attr_int("axis", -1), x.ndim());
  Dtype ct = c.attr_int("stash_type", 1) == 1 ? compute_type(x.dtype()) : x.dtype();
  Axes axes;
  for (int i = axis; i < x.ndim(); ++i) axes.push_back(i);
  Array xf = astype(x, ct);
  Array eps = full({}, Array(static_cast<double>(c.attr_float("epsilon", 1e-5f))), ct);
  Array rms = sqrt(add(mean(multiply(xf, xf), axes, true), eps));
  Array y = multiply(divide(xf, rms), astype(c.tensor(1), ct));
  return {tv(astype(y, x.dtype()))};
}

std::vector<Value> op_group_norm(OpContext& c) {
  const Array& x = c.tensor(0);
  if (x.ndim() < 3) c.fail("input must have rank >= 3, got " + c.input(0).describe());
  int64_t groups = c.attr_int("num_groups", 0);
  int64_t n = x.shape()[0], ch = x.shape()[1];
  if (groups <= 0 || ch % groups) c.fail("num_groups " + std::to_string(groups) + " does not divide " + std::to_string(ch) + " channels");
  Dtype ct = compute_type(x.dtype());
  Array xf = reshape(astype(x, ct), {n, groups, -1});
  Array m = mean(xf, {2}, true);
  Array d = subtract(xf, m);
  Array v = mean(multiply(d, d), {2}, true);
  Array eps = full({}, Array(static_cast<double>(c.attr_float("epsilon", 1e-5f))), ct);
  Array norm = reshape(divide(d, sqrt(add(v, eps))), x.shape());
  Array scale = astype(c.tensor(1), ct), bias = astype(c.tensor(2), ct);
  if (scale.size() == groups && groups != ch) {  // opset 18: one value per group
    scale = repeat(scale, ch / groups, 0);
    bias = repeat(bias, ch / groups, 0);
  }
  Array y = add(multiply(norm, channel_param(scale, x.ndim())), channel_param(bias, x.ndim()));
  return {tv(astype(y, x.dtype()))};
}

std::vector<Value> op_lp_norm(OpContext& c) {
  const Array& x = c.tensor(0);
  int axis = onnx_axis(c, c.attr_int("axis", -1), x.ndim());
  int64_t p = c.attr_int("p", 2);
  Array norm;
  if (p == 1) norm = sum(abs(x), {axis}, true);
  else if (p == 2) norm = sqrt(sum(multiply(x, x), {axis}, true));
  else c.fail("p must be 1 or 2, got " + std::to_string(p));
  // A zero norm gives zeros, as ONNX's reference does, not 0/0.
  Array zero = zeros({}, norm.dtype());
  Array safe = where(equal(norm, zero), ones({}, norm.dtype()), norm);
  return {tv(keep_dtype(where(equal(norm, zero), zero, divide(x, safe)), x.dtype()))};
}

std::vector<Value> op_mvn(OpContext& c) {
  const Array& x = c.tensor(0);
  std::vector<int64_t> axes_in = c.attr_ints("axes", {0, 2, 3});
  Axes axes;
  for (auto a : axes_in) axes.push_back(onnx_axis(c, a, x.ndim()));
  Dtype ct = compute_type(x.dtype());
  Array xf = astype(x, ct);
  Array m = mean(xf, axes, true);
  Array d = subtract(xf, m);
  Array sd = sqrt(mean(multiply(d, d), axes, true));
  return {tv(astype(divide(d, add(sd, full({}, Array(1e-9), ct))), x.dtype()))};
}

/// Whether `a` is a placeholder of a compile trace (not merely seen by a transform).
bool traced_by_compile(const Array& a) { return a.valid() && a.node().tracer; }

std::vector<Value> op_dropout(OpContext& c) {
  const Array& x = c.tensor(0);
  // Opset 12 made the ratio and the training mode inputs; before, Dropout is the identity at
  // inference (the `ratio` attribute only matters when training, which those opsets leave to
  // the framework).
  bool training = c.opset() >= 12 && c.has(2) && c.host_tensor(2).item<bool>();
  double ratio = c.opset() >= 12 && c.has(1) ? c.scalar(1) : 0.5;
  if (training && !(ratio >= 0.0 && ratio <= 1.0)) c.fail("ratio must be in [0, 1], got " + std::to_string(ratio));
  if (!training || ratio == 0.0) {
    std::vector<Value> out{tv(x)};
    if (c.wants_output(1)) out.push_back(tv(ones(x.shape(), bool_)));
    return out;
  }
  // Training: keep each element with probability 1 - ratio and scale the kept ones by
  // 1 / (1 - ratio). The uniform draw comes from the node's seed, the run's key or the thread's
  // key sequence (random_key.h), so a run is deterministic given its key.
  Array key = detail::draw_key(c);
  if (traced_by_compile(x) && !traced_by_compile(key) && !c.has_attr("seed"))
    throw UnknownValueError(c.node().label() + ": Dropout in training mode draws new values on every run; a trace "
                            "would freeze them (pass RunOptions::key as a traced input, or run it eagerly)");
  Array keep = greater_equal(random::uniform(key, x.shape(), 0.0, 1.0, float32), full({}, Array(ratio), float32));
  Dtype ct = compute_type(x.dtype());
  Array scaled = multiply(astype(x, ct), full({}, Array(1.0 / (1.0 - ratio)), ct));
  Array y = astype(where(keep, scaled, zeros({}, ct)), x.dtype());
  std::vector<Value> out{tv(y)};
  if (c.wants_output(1)) out.push_back(tv(keep));
  return out;
}

std::vector<Value> op_lrn(OpContext& c) {
  const Array& x = c.tensor(0);
  if (x.ndim() < 3) c.fail("input must have rank >= 3, got " + c.input(0).describe());
  int64_t size = c.attr_int("size", 0);
  if (size <= 0) c.fail("size must be positive");
  double alpha = c.attr_float("alpha", 1e-4f), beta = c.attr_float("beta", 0.75f), bias = c.attr_float("bias", 1.0f);
  Dtype ct = compute_type(x.dtype());
  Array xf = astype(x, ct);
  Array sq = multiply(xf, xf);
  // The window [c - lo, c + hi] only meets channels within ch - 1 of c: terms past that are zero
  // (x² padded with +0), so a window wider than that sums the same, in the same order, from the
  // clipped one — and a size of 2^32 neither loops 2^32 times nor pads 2^31 channels (found by the
  // fuzzer: it hung).
  const int64_t ch = x.shape()[1];
  const int64_t lo = std::min((size - 1) / 2, std::max<int64_t>(ch - 1, 0));
  const int64_t hi = std::min(size - 1 - (size - 1) / 2, std::max<int64_t>(ch - 1, 0));
  std::vector<std::pair<int64_t, int64_t>> width(static_cast<size_t>(x.ndim()), {0, 0});
  width[1] = {lo, hi};
  Array padded = pad(sq, width);
  Array acc = zeros(x.shape(), ct);
  for (int64_t k = 0; k < lo + hi + 1; ++k) acc = add(acc, slice(padded, Axes{1}, {k}, {k + ch}, {1}));
  Array denom = power(add(full({}, Array(bias), ct), multiply(full({}, Array(alpha / static_cast<double>(size)), ct), acc)),
                      full({}, Array(beta), ct));
  return {tv(astype(divide(xf, denom), x.dtype()))};
}

}  // namespace

void register_nn_ops(OpRegistry& r) {
  r.add("", "MatMul", 1, op_matmul);
  r.add("", "Gemm", 7, op_gemm);
  r.add("", "Softmax", 1, softmax_family<0>);
  r.add("", "LogSoftmax", 1, softmax_family<1>);
  r.add("", "Hardmax", 1, softmax_family<2>);
  r.add("", "Conv", 1, op_conv);
  r.add("", "ConvTranspose", 1, op_conv_transpose);
  r.add("", "MaxPool", 1, pool<true>);
  r.add("", "AveragePool", 1, pool<false>);
  r.add("", "GlobalMaxPool", 1, global_pool<true>);
  r.add("", "GlobalAveragePool", 1, global_pool<false>);
  r.add("", "BatchNormalization", 9, op_batch_norm);
  r.add("", "InstanceNormalization", 6, op_instance_norm);
  r.add("", "LayerNormalization", 17, op_layer_norm);
  r.add("", "RMSNormalization", 23, op_rms_norm);
  r.add("", "GroupNormalization", 18, op_group_norm);
  r.add("", "LpNormalization", 1, op_lp_norm);
  r.add("", "MeanVarianceNormalization", 9, op_mvn);
  r.add("", "Dropout", 7, op_dropout);
  r.add("", "LRN", 1, op_lrn);
}

}  // namespace smelt::onnx
