// More ONNX operators: integer/quantized matmul and conv, Det, windows, DFT, NonMaxSuppression,
// CenterCropPad, TensorScatter, SwiGLU, MaxUnpool, training optimizers and two ai.onnx.ml ops.
#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "src/onnx/ops/op_helpers.h"

namespace smelt::onnx {

namespace {

constexpr double kPi = 3.14159265358979323846;

Dtype compute_type(Dtype dt) { return dt == float64 ? float64 : float32; }

// ---------------------------------------------------------------------------------------------
// Integer and quantized linear algebra
// ---------------------------------------------------------------------------------------------

/// A zero point as int32, shaped to broadcast: scalar, or per row (A, axis -2) / per column.
Array zero_point(OpContext& c, size_t i, int rank, bool per_row) {
  if (!c.has(i)) return Array(int32_t{0});
  Array z = astype(c.tensor(i), int32);
  if (z.size() == 1) return reshape(z, {});
  if (per_row) {
    Shape s(static_cast<size_t>(rank), 1);
    s[static_cast<size_t>(rank - 2)] = z.size();
    return reshape(z, s);
  }
  return z;
}

std::vector<Value> op_matmul_integer(OpContext& c) {
  const Array& a = c.tensor(0);
  const Array& b = c.tensor(1);
  Array ai = subtract(astype(a, int32), zero_point(c, 2, std::max(a.ndim(), 2), true));
  Array bi = subtract(astype(b, int32), zero_point(c, 3, b.ndim(), false));
  return {tv(astype(matmul(ai, bi), int32))};
}

Array weight_zero_point(OpContext& c, size_t i, int rank) {
  if (!c.has(i)) return Array(int32_t{0});
  Array z = astype(c.tensor(i), int32);
  if (z.size() == 1) return reshape(z, {});
  if (rank < 1) c.fail("a per-channel weight zero point needs a weight of rank >= 1, got " + c.input(i).describe());
  Shape s(static_cast<size_t>(rank), 1);
  s[0] = z.size();
  return reshape(z, s);
}

ConvOptions conv_options(OpContext& c, const Array& x, const Array& w) {
  // Ranks and attribute lengths are checked before they size or index anything (found by the
  // fuzzer: a 1-d X made the spatial rank -1, which sized a vector).
  if (x.ndim() < 3 || w.ndim() != x.ndim())
    c.fail("X and W must have the same rank, at least 3, got " + type_text(c.input(0)) + " and " + type_text(c.input(1)));
  size_t n = static_cast<size_t>(x.ndim() - 2);
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape", Shape(w.shape().begin() + 2, w.shape().end()));
  ConvOptions o;
  o.strides = c.attr_ints("strides", std::vector<int64_t>(n, 1));
  o.dilations = c.attr_ints("dilations", std::vector<int64_t>(n, 1));
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (kernel.size() != n || o.strides.size() != n || o.dilations.size() != n || pads.size() != 2 * n)
    c.fail("kernel_shape, strides and dilations need " + std::to_string(n) + " values and pads " +
           std::to_string(2 * n) + ", got " + std::to_string(kernel.size()) + ", " + std::to_string(o.strides.size()) +
           ", " + std::to_string(o.dilations.size()) + " and " + std::to_string(pads.size()));
  for (size_t i = 0; i < n; ++i)
    if (o.strides[i] < 1 || o.dilations[i] < 1)
      c.fail("strides and dilations must be >= 1, got " + std::to_string(o.strides[i]) + " and " +
             std::to_string(o.dilations[i]) + " at axis " + std::to_string(i));
  o.padding_lo.assign(pads.begin(), pads.begin() + static_cast<long>(n));
  o.padding_hi.assign(pads.begin() + static_cast<long>(n), pads.end());
  o.groups = c.attr_int("group", 1);
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      int64_t in = x.shape()[i + 2], out = (in + o.strides[i] - 1) / o.strides[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * o.strides[i] + (kernel[i] - 1) * o.dilations[i] + 1 - in);
      o.padding_lo[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      o.padding_hi[i] = total - o.padding_lo[i];
    }
  } else if (auto_pad == "VALID") {
    std::fill(o.padding_lo.begin(), o.padding_lo.end(), 0);
    std::fill(o.padding_hi.begin(), o.padding_hi.end(), 0);
  }
  return o;
}

std::vector<Value> op_conv_integer(OpContext& c) {
  const Array& x = c.tensor(0);
  const Array& w = c.tensor(1);
  // Ranks checked first: the zero point is shaped by W's rank (found by the fuzzer: a 0-d W was
  // indexed at its first axis).
  ConvOptions o = conv_options(c, x, w);
  Array xi = subtract(astype(x, int32), c.has(2) ? reshape(astype(c.tensor(2), int32), {}) : Array(int32_t{0}));
  Array wi = subtract(astype(w, int32), weight_zero_point(c, 3, w.ndim()));
  return {tv(astype(conv(xi, wi, o), int32))};
}

/// A scale as float64, broadcast like its zero point.
Array scale_of(OpContext& c, size_t i, int rank, int axis_from_end, bool conv_weight) {
  Array s = astype(c.tensor(i), float64);
  if (s.size() == 1) return reshape(s, {});
  Shape shape(static_cast<size_t>(rank), 1);
  if (conv_weight) shape[1] = s.size();
  else shape[static_cast<size_t>(rank + axis_from_end)] = s.size();
  return reshape(s, shape);
}

Value requantize(OpContext& c, const Array& acc, const Array& multiplier, size_t yzp) {
  Array y = round(multiply(astype(acc, float64), multiplier));
  ElemType out = c.has(yzp) ? c.elem_type(yzp) : ElemType::UInt8;
  if (c.has(yzp)) y = add(y, astype(reshape(c.tensor(yzp), c.tensor(yzp).size() == 1 ? Shape{} : c.tensor(yzp).shape()), float64));
  double lo = out == ElemType::Int8 ? -128 : 0, hi = out == ElemType::Int8 ? 127 : 255;
  y = clip(y, Array(lo), Array(hi));
  return tv(astype(y, *storage_dtype(out)));
}

std::vector<Value> op_qlinear_matmul(OpContext& c) {
  const Array& a = c.tensor(0);
  const Array& b = c.tensor(3);
  int ra = std::max(a.ndim(), 2), rb = std::max(b.ndim(), 2);
  Array ai = subtract(astype(a, int32), c.has(2) ? (c.tensor(2).size() == 1 ? reshape(astype(c.tensor(2), int32), {})
                                                                          : reshape(astype(c.tensor(2), int32), {-1, 1}))
                                                 : Array(int32_t{0}));
  Array bi = subtract(astype(b, int32), c.has(5) ? (c.tensor(5).size() == 1 ? reshape(astype(c.tensor(5), int32), {})
                                                                          : astype(c.tensor(5), int32))
                                                 : Array(int32_t{0}));
  Array acc = matmul(ai, bi);
  Array sa = astype(c.tensor(1), float64), sb = astype(c.tensor(4), float64), sy = astype(c.tensor(6), float64);
  sa = sa.size() == 1 ? reshape(sa, {}) : reshape(sa, {-1, 1});
  sb = sb.size() == 1 ? reshape(sb, {}) : sb;
  (void)ra;
  (void)rb;
  Array mult = divide(multiply(sa, sb), reshape(sy, {}));
  return {requantize(c, acc, mult, 7)};
}

std::vector<Value> op_qlinear_conv(OpContext& c) {
  const Array& x = c.tensor(0);
  const Array& w = c.tensor(3);
  ConvOptions o = conv_options(c, x, w);  // ranks checked before W's rank shapes the zero point
  Array xi = subtract(astype(x, int32), reshape(astype(c.tensor(2), int32), {}));
  Array wi = subtract(astype(w, int32), weight_zero_point(c, 5, w.ndim()));
  Array acc = conv(xi, wi, o);
  if (c.has(8)) {
    Shape s(static_cast<size_t>(acc.ndim()), 1);
    s[1] = c.tensor(8).size();
    acc = add(acc, reshape(astype(c.tensor(8), int32), s));
  }
  Array sx = reshape(astype(c.tensor(1), float64), {});
  Array sw = scale_of(c, 4, acc.ndim(), 0, true);
  Array mult = divide(multiply(sx, sw), reshape(astype(c.tensor(6), float64), {}));
  return {requantize(c, acc, mult, 7)};
}

// ---------------------------------------------------------------------------------------------
// Det, windows, DFT
// ---------------------------------------------------------------------------------------------

std::vector<Value> op_det(OpContext& c) {
  const Array& x = c.tensor(0);
  if (x.ndim() < 2 || x.shape()[x.ndim() - 1] != x.shape()[x.ndim() - 2])
    c.fail("input must be [..., M, M], got " + c.input(0).describe());
  int64_t m = x.shape().back();
  if (x.device().type != Device::Type::Cpu)
    c.note_host_compute("no GPU kernel; the matrices read to the host (" + std::to_string(x.nbytes()) + " bytes)");
  auto v = c.host_tensor(0).to_vector<double>();
  int64_t batch = m == 0 ? 0 : static_cast<int64_t>(v.size()) / (m * m);
  std::vector<double> out;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<double> a(v.begin() + b * m * m, v.begin() + (b + 1) * m * m);
    double det = 1;
    for (int64_t k = 0; k < m; ++k) {  // LU with partial pivoting
      int64_t p = k;
      for (int64_t i = k + 1; i < m; ++i)
        if (std::fabs(a[static_cast<size_t>(i * m + k)]) > std::fabs(a[static_cast<size_t>(p * m + k)])) p = i;
      if (a[static_cast<size_t>(p * m + k)] == 0) {
        det = 0;
        break;
      }
      if (p != k) {
        for (int64_t j = 0; j < m; ++j) std::swap(a[static_cast<size_t>(p * m + j)], a[static_cast<size_t>(k * m + j)]);
        det = -det;
      }
      double piv = a[static_cast<size_t>(k * m + k)];
      det *= piv;
      for (int64_t i = k + 1; i < m; ++i) {
        double f = a[static_cast<size_t>(i * m + k)] / piv;
        for (int64_t j = k; j < m; ++j) a[static_cast<size_t>(i * m + j)] -= f * a[static_cast<size_t>(k * m + j)];
      }
    }
    out.push_back(det);
  }
  Shape s(x.shape().begin(), x.shape().end() - 2);
  return {tv(astype(Array(out, s), x.dtype()))};
}

template <int Kind>  // 0 Hann, 1 Hamming, 2 Blackman
std::vector<Value> window_op(OpContext& c) {
  int64_t n = size_arg(c, c.scalar_int(0), "size");
  const Dtype out_dt = *storage_dtype(elem_type_attr(c, "output_datatype", 1));
  array_bytes({n}, float64, c.node().label());
  bool periodic = c.attr_int("periodic", 1) != 0;
  double denom = periodic ? static_cast<double>(n) : static_cast<double>(n - 1);
  std::vector<double> w(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double t = 2 * kPi * static_cast<double>(i) / denom;
    if (Kind == 0) w[static_cast<size_t>(i)] = 0.5 - 0.5 * std::cos(t);
    else if (Kind == 1) w[static_cast<size_t>(i)] = 25.0 / 46.0 - (21.0 / 46.0) * std::cos(t);
    else w[static_cast<size_t>(i)] = 0.42 - 0.5 * std::cos(t) + 0.08 * std::cos(2 * t);
  }
  return {tv(astype(Array(w, Shape{n}), out_dt))};
}

std::vector<Value> op_dft(OpContext& c) {
  const Array& x = c.tensor(0);
  int r = x.ndim();
  if (r < 2 || (x.shape().back() != 1 && x.shape().back() != 2))
    c.fail("input must end in a dimension of 1 (real) or 2 (complex), got " + c.input(0).describe());
  int64_t axis_in = c.opset() >= 20 ? (c.has(2) ? c.scalar_int(2) : -2) : c.attr_int("axis", 1);
  int axis = onnx_axis(c, axis_in, r - 1);  // counts the signal axes only
  if (axis_in < 0) axis = onnx_axis(c, axis_in, r);
  const bool inverse = c.attr_int("inverse", 0) != 0;
  bool onesided = c.attr_int("onesided", 0) != 0;
  Dtype ct = compute_type(x.dtype());
  Array xr = squeeze(slice(x, Axes{r - 1}, {0}, {1}, {1}), Axes{r - 1});
  Array xi = x.shape().back() == 2 ? squeeze(slice(x, Axes{r - 1}, {1}, {2}, {1}), Axes{r - 1}) : zeros(xr.shape(), x.dtype());
  xr = moveaxis(astype(xr, float64), axis, r - 2);
  xi = moveaxis(astype(xi, float64), axis, r - 2);
  int64_t n_in = xr.shape().back();
  bool has_length = c.has(1) && c.tensor(1).size() > 0;
  int64_t n = has_length ? size_arg(c, c.scalar_int(1), "dft_length", true) : n_in;
  if (n == 0) c.fail("the signal axis is empty; a DFT needs at least one sample");
  const bool real_out = inverse && onesided;
  if (real_out) {
    // An inverse one-sided transform rebuilds the full spectrum by Hermitian symmetry,
    // X[k] = conj(X[n - k]), and returns the real signal.
    n = has_length ? n : mul_size(c, 2, n_in - 1);
    if (n <= 0) c.fail("an inverse one-sided DFT of " + std::to_string(n_in) + " bins needs a dft_length");
    int64_t keep = std::min(n_in, n);
    std::vector<int64_t> mirror;
    for (int64_t k = keep; k < n; ++k) mirror.push_back(n - k);
    Array head_r = slice(xr, Axes{r - 2}, {0}, {keep}, {1}), head_i = slice(xi, Axes{r - 2}, {0}, {keep}, {1});
    if (!mirror.empty()) {
      xr = concatenate({head_r, take(xr, int64_array(mirror), r - 2)}, r - 2);
      xi = concatenate({head_i, negative(take(xi, int64_array(mirror), r - 2))}, r - 2);
    } else {
      xr = head_r;
      xi = head_i;
    }
    n_in = n;
    onesided = false;
  }
  if (n_in != n) {  // zero-pad or truncate to dft_length
    if (n_in > n) {
      xr = slice(xr, Axes{r - 2}, {0}, {n}, {1});
      xi = slice(xi, Axes{r - 2}, {0}, {n}, {1});
    } else {
      std::vector<std::pair<int64_t, int64_t>> w(static_cast<size_t>(r - 1), {0, 0});
      w.back() = {0, n - n_in};
      xr = pad(xr, w);
      xi = pad(xi, w);
    }
  }
  int64_t n_out = onesided ? n / 2 + 1 : n;
  // The transform is a product with an [n, n_out] matrix built on the host: its size is checked
  // (and bounds j * k below) before anything is allocated.
  array_bytes({n, n_out}, float64, c.node().label());
  std::vector<double> cs(static_cast<size_t>(mul_size(c, n, n_out))), sn(cs.size());
  double sign = inverse ? 1 : -1;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t k = 0; k < n_out; ++k) {
      double t = 2 * kPi * static_cast<double>((j * k) % n) / static_cast<double>(n);
      cs[static_cast<size_t>(j * n_out + k)] = std::cos(t);
      sn[static_cast<size_t>(j * n_out + k)] = sign * std::sin(t);
    }
  Array C(cs, Shape{n, n_out}), S(sn, Shape{n, n_out});
  Array yr = subtract(matmul(xr, C), matmul(xi, S));
  Array yi = add(matmul(xr, S), matmul(xi, C));
  if (inverse) {
    Array inv_n = Array(1.0 / static_cast<double>(n));
    yr = multiply(yr, inv_n);
    yi = multiply(yi, inv_n);
  }
  yr = moveaxis(yr, r - 2, axis);
  yi = moveaxis(yi, r - 2, axis);
  if (real_out) return {tv(astype(expand_dims(yr, r - 1), ct == float64 ? float64 : x.dtype()))};
  return {tv(astype(stack({yr, yi}, r - 1), ct == float64 ? float64 : x.dtype()))};
}

// ---------------------------------------------------------------------------------------------
// NonMaxSuppression, CenterCropPad, TensorScatter, SwiGLU, MaxUnpool
// ---------------------------------------------------------------------------------------------

std::vector<Value> op_nms(OpContext& c) {
  const Array& boxes_a = c.tensor(0);
  const Array& scores_a = c.tensor(1);
  // Scores are indexed by the boxes' B and N below (found by the fuzzer under ASan: scores of
  // another batch or box count were read past their end).
  if (boxes_a.ndim() != 3 || boxes_a.shape()[2] != 4 || scores_a.ndim() != 3 ||
      scores_a.shape()[0] != boxes_a.shape()[0] || scores_a.shape()[2] != boxes_a.shape()[1])
    c.fail("boxes must be [B, N, 4] and scores [B, C, N], got " + c.input(0).describe() + " and " + c.input(1).describe());
  int64_t max_out = c.has(2) && c.tensor(2).size() > 0 ? c.scalar_int(2) : 0;
  double iou_thr = c.has(3) && c.tensor(3).size() > 0 ? c.scalar(3) : 0.0;
  bool has_score_thr = c.has(4) && c.tensor(4).size() > 0;
  double score_thr = has_score_thr ? c.scalar(4) : 0.0;
  bool center = c.attr_int("center_point_box", 0) != 0;
  int64_t batches = boxes_a.shape()[0], n = boxes_a.shape()[1], classes = scores_a.shape()[1];
  // No GPU kernel: on device inputs the boxes and scores come to the host once (converted to
  // double there, not on the device) and the indices go back to the boxes' device.
  const Device where = boxes_a.device();
  if (where.type != Device::Type::Cpu)
    c.note_host_compute("no GPU kernel; boxes and scores read to the host (" +
                        std::to_string(boxes_a.nbytes() + scores_a.nbytes()) + " bytes)");
  auto boxes = c.host_tensor(0).to_vector<double>();
  auto scores = c.host_tensor(1).to_vector<double>();
  auto corners = [&](int64_t b, int64_t i) {
    const double* p = &boxes[static_cast<size_t>((b * n + i) * 4)];
    if (center) return std::array<double, 4>{p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2, p[0] + p[2] / 2};
    return std::array<double, 4>{std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3])};
  };
  std::vector<int64_t> out;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t k = 0; k < classes; ++k) {
      // Candidates in score order (higher first, ties by index, NaN last) taken from a heap as the
      // greedy pass needs them: it stops at max_output_boxes_per_class kept boxes, usually long
      // before a full sort's end (W11: up to 20,000 boxes, a stable sort was ~15% of a GPU call).
      const double* sc = &scores[static_cast<size_t>((b * classes + k) * n)];
      std::vector<int64_t> heap;
      for (int64_t i = 0; i < n; ++i)
        if (!has_score_thr || sc[i] > score_thr) heap.push_back(i);
      auto after = [sc](int64_t i, int64_t j) {  // i comes after j: the heap's "less"
        const bool ni = std::isnan(sc[i]), nj = std::isnan(sc[j]);
        if (ni || nj) return ni != nj ? ni : i > j;
        if (sc[i] != sc[j]) return sc[i] < sc[j];
        return i > j;
      };
      std::make_heap(heap.begin(), heap.end(), after);
      std::vector<int64_t> kept;
      while (!heap.empty() && static_cast<int64_t>(kept.size()) < max_out) {
        std::pop_heap(heap.begin(), heap.end(), after);
        const int64_t i = heap.back();
        heap.pop_back();
        auto bi = corners(b, i);
        bool keep = true;
        for (int64_t j : kept) {
          auto bj = corners(b, j);
          double ih = std::max(0.0, std::min(bi[2], bj[2]) - std::max(bi[0], bj[0]));
          double iw = std::max(0.0, std::min(bi[3], bj[3]) - std::max(bi[1], bj[1]));
          double inter = ih * iw;
          double uni = (bi[2] - bi[0]) * (bi[3] - bi[1]) + (bj[2] - bj[0]) * (bj[3] - bj[1]) - inter;
          if (uni > 0 && inter / uni > iou_thr) {
            keep = false;
            break;
          }
        }
        if (keep) kept.push_back(i);
      }
      for (int64_t i : kept) out.insert(out.end(), {b, k, i});
    }
  Array selected = reshape(int64_array(out), {static_cast<int64_t>(out.size() / 3), 3});
  if (where.type != Device::Type::Cpu) return {detail::with_host_copy(tv(to_device(selected, where)), selected)};
  return {tv(selected)};
}

std::vector<Value> op_center_crop_pad(OpContext& c) {
  Array x = c.tensor(0);
  auto shape = c.ints(1);
  std::vector<int64_t> axes = c.attr_ints("axes");
  if (axes.empty())
    for (int i = 0; i < x.ndim(); ++i) axes.push_back(i);
  if (axes.size() != shape.size()) c.fail("shape has " + std::to_string(shape.size()) + " values for " + std::to_string(axes.size()) + " axes");
  for (size_t i = 0; i < axes.size(); ++i) {
    int a = onnx_axis(c, axes[i], x.ndim());
    int64_t d = x.shape()[a], t = size_arg(c, shape[i], "shape[" + std::to_string(i) + "]");  // d - t must not overflow
    if (t < d) {
      int64_t start = (d - t) / 2;
      x = slice(x, Axes{a}, {start}, {start + t}, {1});
    } else if (t > d) {
      std::vector<std::pair<int64_t, int64_t>> w(static_cast<size_t>(x.ndim()), {0, 0});
      w[static_cast<size_t>(a)] = {(t - d) / 2, t - d - (t - d) / 2};
      x = pad(x, w);
    }
  }
  return {tv(x)};
}

std::vector<Value> op_tensor_scatter(OpContext& c) {
  const Array& past = c.tensor(0);
  const Array& update = c.tensor(1);
  int axis = onnx_axis(c, c.attr_int("axis", -2), past.ndim());
  if (axis == 0) c.fail("axis must not be the batch axis");
  bool circular = c.attr_string("mode", "linear") == "circular";
  // The spec: update has past's shape except along axis, and one write index per batch entry
  // (found by the fuzzer under ASan: an update of lower rank was indexed at past's axis).
  bool same = update.ndim() == past.ndim();
  for (int i = 0; same && i < past.ndim(); ++i) same = i == axis || update.shape()[i] == past.shape()[i];
  if (!same)
    c.fail("update must have past's shape except along axis " + std::to_string(axis) + ", got " +
           c.input(0).describe() + " and " + c.input(1).describe());
  int64_t batch = past.shape()[0], max_len = past.shape()[axis], len = update.shape()[axis];
  std::vector<int64_t> starts = c.has(2) ? c.ints(2) : std::vector<int64_t>(static_cast<size_t>(batch), 0);
  if (static_cast<int64_t>(starts.size()) != batch)
    c.fail("write_indices has " + std::to_string(starts.size()) + " values for a batch of " + std::to_string(batch));
  if (circular && max_len == 0 && len > 0) c.fail("a circular write of " + std::to_string(len) + " into an empty axis");
  for (auto& s : starts) {  // s + len > max_len, without overflowing for a huge s
    if (!circular && (s < 0 || s > max_len - len))
      c.fail("write index " + std::to_string(s) + " + " + std::to_string(len) + " exceeds " + std::to_string(max_len));
    // Circular: the start taken modulo the axis first, so start + position cannot overflow int64.
    if (circular && max_len > 0) s = (s % max_len + max_len) % max_len;
  }
  // Index array of update's shape: start[b] + position along axis (mod max_len when circular).
  Shape bshape(static_cast<size_t>(update.ndim()), 1);
  bshape[0] = batch;
  Shape pshape(static_cast<size_t>(update.ndim()), 1);
  pshape[static_cast<size_t>(axis)] = len;
  Array idx = add(reshape(int64_array(starts), bshape), reshape(arange(0, static_cast<double>(len), 1, int64), pshape));
  if (circular) idx = remainder(idx, Array(max_len));
  return {tv(scatter(past, broadcast_to(idx, update.shape()), update, axis))};
}

std::vector<Value> op_swiglu(OpContext& c) {
  const Array& a = c.tensor(0);
  c.require_same_type(0, 1);
  Array alpha = full({}, Array(static_cast<double>(c.attr_float("alpha", 1.0f))), a.dtype());
  return {tv(keep_dtype(multiply(multiply(a, sigmoid(multiply(alpha, a))), c.tensor(1)), a.dtype()))};
}

std::vector<Value> op_max_unpool(OpContext& c) {
  const Array& x = c.tensor(0);
  const Array& idx = c.tensor(1);
  if (x.ndim() < 3) c.fail("input must have rank >= 3, got " + c.input(0).describe());
  size_t n = static_cast<size_t>(x.ndim() - 2);
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
  std::vector<int64_t> strides = c.attr_ints("strides", std::vector<int64_t>(n, 1));
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  // Every attribute is read per spatial axis and sizes the output (found by the fuzzer under
  // ASan/UBSan: short strides or pads were read past their end, and huge values overflowed).
  if (kernel.size() != n || strides.size() != n || pads.size() != 2 * n)
    c.fail("kernel_shape " + shape_str(kernel) + ", strides " + shape_str(strides) + " and pads " + shape_str(pads) +
           " must have " + std::to_string(n) + ", " + std::to_string(n) + " and " + std::to_string(2 * n) +
           " values for input " + c.input(0).describe());
  if (idx.shape() != x.shape()) c.fail("indices must have the input's shape, got " + c.input(0).describe() + " and " + c.input(1).describe());
  for (size_t i = 0; i < n; ++i) {
    size_arg(c, kernel[i], "kernel_shape[" + std::to_string(i) + "]", true);
    size_arg(c, strides[i], "strides[" + std::to_string(i) + "]", true);
    size_arg(c, pads[i], "pads[" + std::to_string(i) + "]");
    size_arg(c, pads[i + n], "pads[" + std::to_string(i + n) + "]");
  }
  // Indices address the default unpooled shape; a larger output_shape pads at the end.
  Shape out{x.shape()[0], x.shape()[1]};
  for (size_t i = 0; i < n; ++i) {
    int64_t d = add_size(c, mul_size(c, x.shape()[i + 2] - 1, strides[i]), kernel[i]);
    d = checked_sub(d, add_size(c, pads[i], pads[i + n]), c.node().label());
    if (d < 0)
      c.fail("pads " + shape_str(pads) + " remove more than the unpooled axis " + std::to_string(i + 2) + " holds");
    out.push_back(d);
  }
  int64_t total = element_count(out, c.node().label());
  Array y = reshape(scatter(zeros({total}, x.dtype()), reshape(astype(idx, int64), {-1}), reshape(x, {-1}), 0), out);
  if (c.has(2)) {
    auto want = c.ints(2);
    if (want.size() != out.size()) c.fail("output_shape must have rank " + std::to_string(out.size()));
    std::vector<std::pair<int64_t, int64_t>> w;
    for (size_t i = 0; i < out.size(); ++i) {
      if (want[i] < out[i]) c.fail("output_shape " + shape_str(want) + " is smaller than " + shape_str(out));
      w.emplace_back(0, want[i] - out[i]);
    }
    y = pad(y, w);
  }
  return {tv(y)};
}

// ---------------------------------------------------------------------------------------------
// ai.onnx.ml (the training optimizers are in training.cpp)
// ---------------------------------------------------------------------------------------------

std::vector<Value> op_binarizer(OpContext& c) {
  const Array& x = c.tensor(0);
  Array thr = full({}, Array(static_cast<double>(c.attr_float("threshold", 0))), x.dtype());
  return {tv(astype(greater(x, thr), x.dtype()))};
}

std::vector<Value> op_array_feature_extractor(OpContext& c) {
  const Array& x = c.tensor(0);
  return {tv(take(x, astype(reshape(c.tensor(1), {-1}), int64), x.ndim() - 1))};
}


// ---------------------------------------------------------------------------------------------
// CausalConvWithState (opset 27), STFT, LabelEncoder
// ---------------------------------------------------------------------------------------------

std::vector<Value> op_causal_conv_with_state(OpContext& c) {
  const Array& x = c.tensor(0);  // [N, C, L]
  const Array& w = c.tensor(1);  // [C, 1, K]: one filter per channel
  if (x.ndim() != 3 || w.ndim() != 3)
    c.fail("input must be [N, C, L] and weight [C, 1, K], got " + c.input(0).describe() + " and " + c.input(1).describe());
  int64_t n = x.shape()[0], ch = x.shape()[1], k = w.shape()[2];
  Array past = c.has(3) ? c.tensor(3) : zeros({n, ch, k - 1}, x.dtype());
  Array padded = concatenate({past, x}, 2);
  ConvOptions o;
  o.groups = ch;
  Array y = conv(padded, w, o);
  if (c.has(2)) y = add(y, reshape(c.tensor(2), {1, ch, 1}));
  std::string act = c.attr_string("activation", "none");
  if (act == "silu" || act == "swish") {
    Array yf = astype(y, compute_type(x.dtype()));
    y = multiply(yf, sigmoid(yf));
  } else if (act != "none") {
    c.fail("activation must be none, silu or swish, got \"" + act + "\"");
  }
  int64_t total = padded.shape()[2];
  Array present = slice(padded, Axes{2}, {total - (k - 1)}, {total}, {1});
  return {tv(astype(y, x.dtype())), tv(present)};
}

std::vector<Value> op_stft(OpContext& c) {
  const Array& sig = c.tensor(0);  // [B, L, 1 or 2]
  if (sig.ndim() != 3) c.fail("signal must be [batch, length, 1 or 2], got " + c.input(0).describe());
  int64_t step = c.scalar_int(1);
  std::optional<Array> window;
  if (c.has(2)) window = c.tensor(2);
  int64_t frame = c.has(3) ? c.scalar_int(3) : window ? window->size() : 0;
  if (frame <= 0 || step <= 0)
    c.fail("frame_length and frame_step must be positive, got " + std::to_string(frame) + " and " + std::to_string(step));
  bool onesided = c.attr_int("onesided", 1) != 0;
  int64_t len = sig.shape()[1];
  if (frame > len)
    c.fail("frame_length " + std::to_string(frame) + " is longer than the signal (" + std::to_string(len) + " samples)");
  array_bytes({frame, onesided ? frame / 2 + 1 : frame}, float64, c.node().label());
  array_bytes({(len - frame) / step + 1, frame}, int64, c.node().label());
  int64_t frames = (len - frame) / step + 1;
  std::vector<int64_t> idx;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t t = 0; t < frame; ++t) idx.push_back(f * step + t);
  Array re = astype(squeeze(slice(sig, Axes{2}, {0}, {1}, {1}), Axes{2}), float64);
  Array im = sig.shape()[2] == 2 ? astype(squeeze(slice(sig, Axes{2}, {1}, {2}, {1}), Axes{2}), float64) : zeros(re.shape(), float64);
  auto framed = [&](const Array& a) {
    Array f = reshape(take(a, int64_array(idx), 1), {sig.shape()[0], frames, frame});
    return window ? multiply(f, astype(*window, float64)) : f;
  };
  Array xr = framed(re), xi = framed(im);
  int64_t bins = onesided ? frame / 2 + 1 : frame;
  std::vector<double> cs(static_cast<size_t>(frame * bins)), sn(cs.size());
  for (int64_t j = 0; j < frame; ++j)
    for (int64_t kk = 0; kk < bins; ++kk) {
      double t = 2 * kPi * static_cast<double>((j * kk) % frame) / static_cast<double>(frame);
      cs[static_cast<size_t>(j * bins + kk)] = std::cos(t);
      sn[static_cast<size_t>(j * bins + kk)] = -std::sin(t);
    }
  Array C(cs, Shape{frame, bins}), S(sn, Shape{frame, bins});
  Array yr = subtract(matmul(xr, C), matmul(xi, S));
  Array yi = add(matmul(xr, S), matmul(xi, C));
  return {tv(astype(stack({yr, yi}, 3), sig.dtype()))};
}

/// LabelEncoder keys or values from the typed list attributes or the tensor attribute.
struct LabelList {
  bool strings = false;
  std::vector<std::string> s;
  std::vector<double> d;
  ElemType type = ElemType::Undefined;
};

LabelList label_list(OpContext& c, const char* prefix) {
  LabelList out;
  std::string p(prefix);
  if (c.has_attr((p + "_strings").c_str())) {
    out.strings = true;
    out.s = c.attr_strings((p + "_strings").c_str());
    out.type = ElemType::String;
  } else if (c.has_attr((p + "_int64s").c_str())) {
    for (auto v : c.attr_ints((p + "_int64s").c_str())) out.d.push_back(static_cast<double>(v));
    out.type = ElemType::Int64;
  } else if (c.has_attr((p + "_floats").c_str())) {
    for (auto v : c.attr_floats((p + "_floats").c_str())) out.d.push_back(v);
    out.type = ElemType::Float;
  } else if (c.has_attr((p + "_tensor").c_str())) {
    const Value& t = c.attr_tensor((p + "_tensor").c_str());
    out.type = t.elem_type();
    if (t.is_strings()) {
      out.strings = true;
      out.s = t.string_tensor().data;
    } else {
      out.d = t.array().to_vector<double>();
    }
  }
  return out;
}

std::vector<Value> op_label_encoder(OpContext& c) {
  const Value& x = c.input(0);
  LabelList keys = label_list(c, "keys"), values = label_list(c, "values");
  if (keys.type == ElemType::Undefined || values.type == ElemType::Undefined) c.fail("keys and values are required");
  size_t n = keys.strings ? keys.s.size() : keys.d.size();
  if ((values.strings ? values.s.size() : values.d.size()) != n) c.fail("keys and values differ in length");
  // Defaults: default_tensor, else the typed default attribute, else ONNX's defaults.
  std::string def_s = "_Unused";
  double def_d = values.type == ElemType::Float ? -0.0 : -1.0;
  if (c.has_attr("default_tensor")) {
    const Value& d = c.attr_tensor("default_tensor");
    if (d.is_strings()) def_s = d.string_tensor().data.at(0);
    else def_d = d.array().to_vector<double>().at(0);
  } else if (values.strings) {
    def_s = c.attr_string("default_string", def_s);
  } else if (values.type == ElemType::Int64) {
    def_d = static_cast<double>(c.attr_int("default_int64", -1));
  } else {
    def_d = c.attr_float("default_float", -0.0f);
  }
  size_t count = x.is_strings() ? x.string_tensor().data.size() : static_cast<size_t>(x.array().size());
  std::vector<double> xd;
  if (!x.is_strings()) xd = x.array().to_vector<double>();
  std::vector<std::string> out_s;
  std::vector<double> out_d;
  for (size_t i = 0; i < count; ++i) {
    size_t hit = n;
    for (size_t k = 0; k < n && hit == n; ++k) {
      if (x.is_strings() ? (keys.strings && keys.s[k] == x.string_tensor().data[i])
                         : (!keys.strings && (keys.d[k] == xd[i] || (std::isnan(keys.d[k]) && std::isnan(xd[i])))))
        hit = k;
    }
    if (values.strings) out_s.push_back(hit < n ? values.s[hit] : def_s);
    else out_d.push_back(hit < n ? values.d[hit] : def_d);
  }
  if (values.strings) return {Value::strings(StringTensor{x.shape(), out_s})};
  return {tv(astype(Array(out_d, x.shape()), *storage_dtype(values.type)))};
}
}  // namespace

void register_more_ops(OpRegistry& r) {
  r.add("", "MatMulInteger", 10, op_matmul_integer);
  r.add("", "ConvInteger", 10, op_conv_integer);
  r.add("", "QLinearMatMul", 10, op_qlinear_matmul);
  r.add("", "QLinearConv", 10, op_qlinear_conv);
  r.add("", "Det", 11, op_det);
  r.add("", "HannWindow", 17, window_op<0>);
  r.add("", "HammingWindow", 17, window_op<1>);
  r.add("", "BlackmanWindow", 17, window_op<2>);
  r.add("", "DFT", 17, op_dft);
  r.add("", "NonMaxSuppression", 10, op_nms);
  r.add("", "CenterCropPad", 18, op_center_crop_pad);
  r.add("", "TensorScatter", 24, op_tensor_scatter);
  r.add("", "SwiGLU", 28, op_swiglu);
  r.add("", "MaxUnpool", 9, op_max_unpool);
  r.add("ai.onnx.ml", "Binarizer", 1, op_binarizer);
  r.add("ai.onnx.ml", "ArrayFeatureExtractor", 1, op_array_feature_extractor);
  r.add("ai.onnx.ml", "LabelEncoder", 2, op_label_encoder);
  r.add("", "CausalConvWithState", 27, op_causal_conv_with_state);
  r.add("", "STFT", 17, op_stft);
}

}  // namespace smelt::onnx
