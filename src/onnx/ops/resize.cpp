// ONNX Resize (and the older Upsample): separable per-axis taps (nearest, linear, cubic, antialias).
#include <algorithm>
#include <cmath>

#include "src/onnx/ops/op_helpers.h"

namespace smelt::onnx {

namespace {

struct ResizeAttrs {
  std::string mode = "nearest";
  std::string transform = "half_pixel";
  std::string nearest_mode = "round_prefer_floor";
  double cubic_a = -0.75;
  bool antialias = false;
  bool exclude_outside = false;
  double extrapolation = 0.0;
};

/// The source coordinate of output position x along one axis (ONNX's coordinate transforms).
double source_coordinate(const OpContext& c, const ResizeAttrs& a, double x, double scale, int64_t in, int64_t out,
                         double roi_start, double roi_end) {
  const std::string& t = a.transform;
  // ONNX measures the resized length as scale * in (a real number), not the rounded size.
  const double width = scale * static_cast<double>(in);
  if (t == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (t == "half_pixel_symmetric") {
    double adjustment = static_cast<double>(out) / width;
    double center = static_cast<double>(in) / 2;
    double offset = center * (1 - adjustment);
    return offset + (x + 0.5) / scale - 0.5;
  }
  if (t == "pytorch_half_pixel") return width > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (t == "align_corners") return width == 1 ? 0.0 : x * static_cast<double>(in - 1) / (width - 1);
  if (t == "asymmetric") return x / scale;
  if (t == "tf_crop_and_resize")
    return width > 1 ? roi_start * static_cast<double>(in - 1) +
                           x * (roi_end - roi_start) * static_cast<double>(in - 1) / (width - 1)
                   : 0.5 * (roi_start + roi_end) * static_cast<double>(in - 1);
  c.fail("unknown coordinate_transformation_mode \"" + t + "\"");
}

/// Interpolation weights for a fractional position `ratio` in (0, 1] right of the base index.
std::vector<double> coefficients(const OpContext& c, const ResizeAttrs& a, double ratio, double scale) {
  if (a.mode == "nearest") {
    if (ratio == 1.0) return {0, 1};
    const std::string& m = a.nearest_mode;
    if (m == "round_prefer_floor") return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
    if (m == "round_prefer_ceil") return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
    if (m == "floor") return {1, 0};
    if (m == "ceil") return {0, 1};
    c.fail("unknown nearest_mode \"" + m + "\"");
  }
  if (a.mode == "linear") {
    if (!a.antialias || scale >= 1) return {1 - ratio, ratio};
    int start = static_cast<int>(std::floor(-1 / scale) + 1);
    int footprint = 2 - 2 * start;
    std::vector<double> w;
    double total = 0;
    for (int i = start; i < start + footprint; ++i) {
      double v = std::clamp(1 - std::fabs((i - ratio) * scale), 0.0, 1.0);
      w.push_back(v);
      total += v;
    }
    for (auto& v : w) v /= total;
    return w;
  }
  if (a.mode == "cubic") {
    const double A = a.cubic_a;
    auto kernel = [&](double x) {
      x = std::fabs(x);
      if (x < 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
      if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
      return 0.0;
    };
    if (!a.antialias || scale >= 1) return {kernel(ratio + 1), kernel(ratio), kernel(1 - ratio), kernel(2 - ratio)};
    int start = static_cast<int>(std::floor(-2 / scale) + 1);
    int end = 2 - start;
    std::vector<double> w;
    double total = 0;
    for (int i = start; i < end; ++i) {
      double v = kernel(scale * (i - ratio));
      w.push_back(v);
      total += v;
    }
    for (auto& v : w) v /= total;
    return w;
  }
  c.fail("mode must be nearest, linear or cubic, got \"" + a.mode + "\"");
}

/// An output length computed from a scale, checked before it becomes a size: a NaN, an infinite
/// or a negative value, or one beyond what an array can hold, fails naming the axis and the value.
int64_t output_length(const OpContext& c, double v, int axis, const std::string& from) {
  if (!(v >= 0 && v <= 0x1p62))
    throw InvalidArgument(c.node().label() + ": " + from + " gives output length " + std::to_string(v) +
                          " on axis " + std::to_string(axis));
  return static_cast<int64_t>(v);
}

/// Resizes one axis: y[..., j, ...] = sum_k w[j,k] x[..., idx[j,k], ...]; out-of-range source
/// positions (tf_crop_and_resize) are flagged in `outside`.
Array resize_axis(const OpContext& c, const ResizeAttrs& a, const Array& x, int axis, int64_t out, double scale,
                  double roi_start, double roi_end, std::vector<uint8_t>& outside) {
  int64_t in = x.shape()[axis];
  std::vector<std::vector<int64_t>> idx;
  std::vector<std::vector<double>> wts;
  size_t taps = 0;
  outside.assign(static_cast<size_t>(out), 0);
  for (int64_t j = 0; j < out; ++j) {
    double xs = source_coordinate(c, a, static_cast<double>(j), scale, in, out, roi_start, roi_end);
    if (!std::isfinite(xs))
      c.fail("output " + std::to_string(j) + " on axis " + std::to_string(axis) + " has the source coordinate " +
             std::to_string(xs) + " (scale " + std::to_string(scale) + ", roi " + std::to_string(roi_start) + " to " +
             std::to_string(roi_end) + ")");
    if (a.transform == "tf_crop_and_resize" && (xs < 0 || xs > static_cast<double>(in - 1))) outside[static_cast<size_t>(j)] = 1;
    double base = std::ceil(xs) - 1;  // the pixel left of xs, so that the ratio is in (0, 1]
    double ratio = xs - base;
    auto w = coefficients(c, a, ratio, scale);
    int64_t n = static_cast<int64_t>(w.size());
    std::vector<int64_t> ids;
    for (int64_t k = 0; k < n; ++k) {
      // In double, clamped before it becomes an index: a roi far outside the input puts xs
      // beyond int64 (exact below 2^53, and beyond that outside the input either way).
      const double i = base - static_cast<double>(n / 2) + 1 + static_cast<double>(k);
      if (a.exclude_outside && (i < 0 || i >= static_cast<double>(in))) w[static_cast<size_t>(k)] = 0;
      ids.push_back(i < 0 ? 0 : i >= static_cast<double>(in) ? in - 1 : static_cast<int64_t>(i));
    }
    if (a.exclude_outside) {
      double total = 0;
      for (auto v : w) total += v;
      if (total != 0)
        for (auto& v : w) v /= total;
    }
    taps = std::max(taps, w.size());
    idx.push_back(ids);
    wts.push_back(w);
  }
  Dtype ct = x.dtype() == float64 ? float64 : float32;
  Shape wshape(static_cast<size_t>(x.ndim()), 1);
  wshape[static_cast<size_t>(axis)] = out;
  Array acc;
  for (size_t k = 0; k < taps; ++k) {
    std::vector<int64_t> ik(static_cast<size_t>(out));
    std::vector<double> wk(static_cast<size_t>(out));
    bool all_zero = true, one_hot = true;
    for (int64_t j = 0; j < out; ++j) {
      ik[static_cast<size_t>(j)] = idx[static_cast<size_t>(j)][k];
      wk[static_cast<size_t>(j)] = wts[static_cast<size_t>(j)][k];
      all_zero = all_zero && wk[static_cast<size_t>(j)] == 0;
      one_hot = one_hot && (wk[static_cast<size_t>(j)] == 0 || wk[static_cast<size_t>(j)] == 1);
    }
    if (all_zero) continue;
    Array gathered = take(x, int64_array(ik), axis);
    Array term = multiply(astype(gathered, ct), astype(reshape(Array(wk, Shape{out}), wshape), ct));
    if (one_hot && a.mode == "nearest") term = where(reshape(Array(wk, Shape{out}) != 0.0, wshape), astype(gathered, ct), zeros({}, ct));
    acc = acc.valid() ? add(acc, term) : term;
  }
  if (!acc.valid()) acc = zeros([&] { Shape s = x.shape(); s[static_cast<size_t>(axis)] = out; return s; }(), ct);
  return acc;
}

Array resize_impl(const OpContext& c, const ResizeAttrs& a, const Array& x, const std::vector<double>& scales,
                  const Shape& out_shape, const std::vector<double>& roi) {
  Dtype ct = x.dtype() == float64 ? float64 : float32;
  Array y = astype(x, ct);
  int r = x.ndim();
  Array outside_any;
  // Nothing to sample from (the scale is then infinite and every source index -1; found by the
  // fuzzer under UBSan).
  for (int axis = 0; axis < r; ++axis)
    if (x.shape()[axis] == 0 && out_shape[axis] > 0)
      c.fail("axis " + std::to_string(axis) + " of input " + shape_str(x.shape()) +
             " is empty and cannot be resized to " + std::to_string(out_shape[axis]) + " elements");
  for (int axis = 0; axis < r; ++axis) {
    int64_t in = x.shape()[axis], out = out_shape[axis];
    double scale = scales[static_cast<size_t>(axis)];
    double rs = roi.empty() ? 0 : roi[static_cast<size_t>(axis)], re = roi.empty() ? 1 : roi[static_cast<size_t>(axis + r)];
    if (in == out && scale == 1.0 && a.transform != "tf_crop_and_resize") continue;
    std::vector<uint8_t> outside;
    y = resize_axis(c, a, y, axis, out, scale, rs, re, outside);
    if (std::find(outside.begin(), outside.end(), 1) != outside.end()) {
      Shape s(static_cast<size_t>(r), 1);
      s[static_cast<size_t>(axis)] = out;
      Array mask = reshape(Array(outside.data(), Shape{out}, bool_), s);
      outside_any = outside_any.valid() ? logical_or(outside_any, mask) : mask;
    }
  }
  if (outside_any.valid()) y = where(outside_any, full({}, Array(a.extrapolation), ct), y);
  if (is_integral(x.dtype())) y = round(y);
  return astype(y, x.dtype());
}

ResizeAttrs attrs_of(const OpContext& c) {
  ResizeAttrs a;
  a.mode = c.attr_string("mode", "nearest");
  a.transform = c.attr_string("coordinate_transformation_mode", "half_pixel");
  a.nearest_mode = c.attr_string("nearest_mode", "round_prefer_floor");
  a.cubic_a = c.attr_float("cubic_coeff_a", -0.75f);
  a.antialias = c.attr_int("antialias", 0) != 0;
  a.exclude_outside = c.attr_int("exclude_outside", 0) != 0;
  a.extrapolation = c.attr_float("extrapolation_value", 0.0f);
  return a;
}

std::vector<Value> op_resize(OpContext& c) {
  const Array& x = c.tensor(0);
  int r = x.ndim();
  ResizeAttrs a = attrs_of(c);
  std::vector<int64_t> axes_attr = c.attr_ints("axes");
  std::vector<int> axes;
  for (auto ax : axes_attr) axes.push_back(onnx_axis(c, ax, r));
  if (axes.empty())
    for (int i = 0; i < r; ++i) axes.push_back(i);
  size_t k = axes.size();
  std::vector<double> roi_in;
  if (c.has(1) && c.tensor(1).size() > 0) roi_in = c.host_tensor(1).to_vector<double>();
  std::vector<double> roi;  // full rank: starts then ends
  if (!roi_in.empty()) {
    if (roi_in.size() != 2 * k) c.fail("roi needs " + std::to_string(2 * k) + " values, got " + std::to_string(roi_in.size()));
    roi.assign(static_cast<size_t>(2 * r), 0.0);
    for (int i = 0; i < r; ++i) roi[static_cast<size_t>(i + r)] = 1.0;
    for (size_t i = 0; i < k; ++i) {
      roi[static_cast<size_t>(axes[i])] = roi_in[i];
      roi[static_cast<size_t>(axes[i] + r)] = roi_in[i + k];
    }
  }
  std::vector<double> scales(static_cast<size_t>(r), 1.0);
  Shape out = x.shape();
  bool has_scales = c.has(2) && c.tensor(2).size() > 0, has_sizes = c.has(3) && c.tensor(3).size() > 0;
  if (has_scales == has_sizes) c.fail("exactly one of scales and sizes must be given");
  if (has_scales) {
    auto s = c.host_tensor(2).to_vector<double>();
    if (s.size() != k) c.fail("scales needs " + std::to_string(k) + " values, got " + std::to_string(s.size()));
    for (size_t i = 0; i < k; ++i) {
      int ax = axes[i];
      if (!(s[i] > 0) || !std::isfinite(s[i]))
        throw InvalidArgument(c.node().label() + ": scales must be positive and finite, got " + std::to_string(s[i]) +
                              " for axis " + std::to_string(ax));
      scales[static_cast<size_t>(ax)] = s[i];
      double span = roi.empty() || a.transform != "tf_crop_and_resize"
                        ? 1.0
                        : roi[static_cast<size_t>(ax + r)] - roi[static_cast<size_t>(ax)];
      out[static_cast<size_t>(ax)] = output_length(c, std::floor(static_cast<double>(x.shape()[ax]) * span * s[i]), ax,
                                                   "scale " + std::to_string(s[i]));
    }
  } else {
    auto sz = c.ints(3);
    if (sz.size() != k) c.fail("sizes needs " + std::to_string(k) + " values, got " + std::to_string(sz.size()));
    std::string policy = c.attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (size_t i = 0; i < k; ++i) {
        int ax = axes[i];
        out[static_cast<size_t>(ax)] = size_arg(c, sz[i], "sizes entry for axis " + std::to_string(ax));
        scales[static_cast<size_t>(ax)] = static_cast<double>(sz[i]) / static_cast<double>(x.shape()[ax]);
      }
    } else if (policy == "not_larger" || policy == "not_smaller") {
      double s = policy == "not_larger" ? 1e300 : 0;
      for (size_t i = 0; i < k; ++i) {
        size_arg(c, sz[i], "sizes entry for axis " + std::to_string(axes[i]));
        double ratio = static_cast<double>(sz[i]) / static_cast<double>(x.shape()[axes[i]]);
        s = policy == "not_larger" ? std::min(s, ratio) : std::max(s, ratio);
      }
      for (size_t i = 0; i < k; ++i) {
        int ax = axes[i];
        scales[static_cast<size_t>(ax)] = s;
        out[static_cast<size_t>(ax)] = output_length(c, std::nearbyint(s * static_cast<double>(x.shape()[ax])), ax,
                                                     "scale " + std::to_string(s));
      }
    } else {
      c.fail("keep_aspect_ratio_policy must be stretch, not_larger or not_smaller, got \"" + policy + "\"");
    }
  }
  array_bytes(out, x.dtype() == float64 ? float64 : float32, c.node().label());
  return {tv(resize_impl(c, a, x, scales, out, roi))};
}

std::vector<Value> op_upsample(OpContext& c) {
  const Array& x = c.tensor(0);
  std::vector<double> scales;
  if (c.opset() >= 9) scales = c.host_tensor(1).to_vector<double>();
  else for (float f : c.attr_floats("scales")) scales.push_back(f);
  if (static_cast<int>(scales.size()) != x.ndim()) c.fail("scales needs one value per axis");
  ResizeAttrs a;
  a.mode = c.attr_string("mode", "nearest");
  if (a.mode == "bilinear") a.mode = "linear";
  a.transform = "asymmetric";
  a.nearest_mode = "floor";
  Shape out = x.shape();
  for (int i = 0; i < x.ndim(); ++i) {
    double s = scales[static_cast<size_t>(i)];
    if (!(s > 0) || !std::isfinite(s))
      throw InvalidArgument(c.node().label() + ": scales must be positive and finite, got " + std::to_string(s) +
                            " for axis " + std::to_string(i));
    out[static_cast<size_t>(i)] = output_length(c, std::floor(static_cast<double>(x.shape()[i]) * s), i,
                                                "scale " + std::to_string(s));
  }
  array_bytes(out, x.dtype() == float64 ? float64 : float32, c.node().label());
  return {tv(resize_impl(c, a, x, scales, out, {}))};
}

}  // namespace

void register_resize_ops(OpRegistry& r) {
  r.add("", "Resize", 11, op_resize);
  r.add("", "Upsample", 7, op_upsample);
}

}  // namespace smelt::onnx
