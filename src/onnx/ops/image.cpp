// ONNX spatial sampling: GridSample, AffineGrid and Col2Im (taps computed on the host, gathers on smelt).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "src/onnx/ops/op_helpers.h"

namespace smelt::onnx {

namespace {

double unnormalize(double coord, int64_t size, bool align_corners) {
  return align_corners ? (coord + 1) / 2 * static_cast<double>(size - 1)
                       : ((coord + 1) * static_cast<double>(size) - 1) / 2;
}

/// Reflects a coordinate into [low, high] (given doubled, as PyTorch does).
double reflect(double x, double twice_low, double twice_high) {
  if (twice_low == twice_high) return 0;
  double lo = twice_low / 2, span = (twice_high - twice_low) / 2;
  x = std::fabs(x - lo);
  double extra = std::fmod(x, span);
  int flips = static_cast<int>(std::floor(x / span));
  return flips % 2 == 0 ? extra + lo : span - extra + lo;
}

double pad_coordinate(double x, int64_t size, const std::string& padding, bool align_corners) {
  if (padding == "border") return std::clamp(x, 0.0, static_cast<double>(size - 1));
  if (padding == "reflection") {
    x = align_corners ? reflect(x, 0, 2.0 * static_cast<double>(size - 1)) : reflect(x, -1, 2.0 * static_cast<double>(size) - 1);
    return std::clamp(x, 0.0, static_cast<double>(size - 1));
  }
  return x;
}

double cubic(double x, double a = -0.75) {
  x = std::fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

std::vector<Value> op_grid_sample(OpContext& c) {
  const Array& x = c.tensor(0);
  const Array& grid = c.tensor(1);
  int r = x.ndim() - 2;
  if (r < 1 || grid.ndim() != r + 2 || grid.shape().back() != r || grid.shape()[0] != x.shape()[0])
    c.fail("X must be [N, C, spatial...] and grid [N, out..., " + std::to_string(std::max(r, 1)) + "], got " +
           c.input(0).describe() + " and " + c.input(1).describe());
  std::string mode = c.attr_string("mode", "linear");
  if (mode == "bilinear") mode = "linear";
  if (mode == "bicubic") mode = "cubic";
  if (mode != "linear" && mode != "nearest" && mode != "cubic") c.fail("mode must be linear, nearest or cubic, got \"" + mode + "\"");
  std::string padding = c.attr_string("padding_mode", "zeros");
  bool align = c.attr_int("align_corners", 0) != 0;
  int64_t n = x.shape()[0], ch = x.shape()[1];
  std::vector<int64_t> size(x.shape().begin() + 2, x.shape().end());
  int64_t plane = std::accumulate(size.begin(), size.end(), int64_t{1}, std::multiplies<>());
  int64_t q = 1;
  for (int i = 1; i <= r; ++i) q *= grid.shape()[i];
  if (grid.device().type != Device::Type::Cpu)
    c.note_host_compute("no GPU kernel for the sampling positions; grid read to the host (" +
                        std::to_string(grid.nbytes()) + " bytes)");
  auto g = c.host_tensor(1).to_vector<double>();
  const int per_axis = mode == "linear" ? 2 : mode == "cubic" ? 4 : 1;
  int taps = 1;
  for (int i = 0; i < r; ++i) taps *= per_axis;
  // idx/w: [taps][n * q], the flat source index (plane sized = zero) and the weight.
  std::vector<std::vector<int64_t>> idx(static_cast<size_t>(taps), std::vector<int64_t>(static_cast<size_t>(n * q), plane));
  std::vector<std::vector<double>> w(static_cast<size_t>(taps), std::vector<double>(static_cast<size_t>(n * q), 0.0));
  std::vector<double> coord(static_cast<size_t>(r));
  std::vector<int64_t> base(static_cast<size_t>(r));
  std::vector<std::vector<double>> axis_w(static_cast<size_t>(r), std::vector<double>(static_cast<size_t>(per_axis)));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < q; ++p) {
      size_t at = static_cast<size_t>(b * q + p);
      for (int i = 0; i < r; ++i) {
        // grid's last axis is (x, y, z): x indexes the last spatial axis.
        int axis = r - 1 - i;
        double v = unnormalize(g[at * static_cast<size_t>(r) + static_cast<size_t>(i)], size[static_cast<size_t>(axis)], align);
        if (mode != "cubic") v = pad_coordinate(v, size[static_cast<size_t>(axis)], padding, align);
        coord[static_cast<size_t>(axis)] = v;
      }
      for (int a = 0; a < r; ++a) {
        double v = coord[static_cast<size_t>(a)];
        if (mode == "nearest") {
          base[static_cast<size_t>(a)] = static_cast<int64_t>(std::nearbyint(v));
          axis_w[static_cast<size_t>(a)][0] = 1;
        } else if (mode == "linear") {
          double f = std::floor(v);
          base[static_cast<size_t>(a)] = static_cast<int64_t>(f);
          axis_w[static_cast<size_t>(a)][0] = 1 - (v - f);
          axis_w[static_cast<size_t>(a)][1] = v - f;
        } else {
          double f = std::floor(v), t = v - f;
          base[static_cast<size_t>(a)] = static_cast<int64_t>(f) - 1;
          for (int k = 0; k < 4; ++k) axis_w[static_cast<size_t>(a)][static_cast<size_t>(k)] = cubic(t + 1 - k);
        }
      }
      for (int t = 0; t < taps; ++t) {
        int rem = t;
        double weight = 1;
        int64_t flat = 0;
        bool inside = true;
        for (int a = r - 1; a >= 0; --a) {
          int k = rem % per_axis;
          rem /= per_axis;
          int64_t s = size[static_cast<size_t>(a)];
          int64_t i = base[static_cast<size_t>(a)] + k;
          if (mode == "cubic" && padding != "zeros")
            i = static_cast<int64_t>(pad_coordinate(static_cast<double>(i), s, padding, align));
          if (i < 0 || i >= s) inside = false;
          weight *= axis_w[static_cast<size_t>(a)][static_cast<size_t>(k)];
          int64_t stride = 1;
          for (int j = a + 1; j < r; ++j) stride *= size[static_cast<size_t>(j)];
          flat += i * stride;
        }
        if (inside) {
          idx[static_cast<size_t>(t)][at] = flat;
          w[static_cast<size_t>(t)][at] = weight;
        }
      }
    }
  Dtype ct = x.dtype() == float64 ? float64 : float32;
  // One zero column at index `plane` stands in for samples outside the input.
  Array xf = concatenate({reshape(astype(x, ct), {n, ch, plane}), zeros({n, ch, 1}, ct)}, 2);
  Array acc;
  for (int t = 0; t < taps; ++t) {
    Array it = broadcast_to(reshape(int64_array(idx[static_cast<size_t>(t)]), {n, 1, q}), {n, ch, q});
    Array wt = astype(reshape(Array(w[static_cast<size_t>(t)], Shape{n, 1, q}), {n, 1, q}), ct);
    Array term = multiply(take_along_axis(xf, it, 2), wt);
    acc = acc.valid() ? add(acc, term) : term;
  }
  Shape out{n, ch};
  for (int i = 1; i <= r; ++i) out.push_back(grid.shape()[i]);
  return {tv(astype(reshape(acc, out), x.dtype()))};
}

std::vector<Value> op_affine_grid(OpContext& c) {
  const Array& theta = c.tensor(0);
  auto size = c.ints(1);
  bool align = c.attr_int("align_corners", 0) != 0;
  int r = static_cast<int>(size.size()) - 2;
  if (r != 2 && r != 3) c.fail("size must have 4 or 5 entries, got " + std::to_string(size.size()));
  if (theta.ndim() != 3 || theta.shape()[1] != r || theta.shape()[2] != r + 1)
    c.fail("theta must be [N, " + std::to_string(r) + ", " + std::to_string(r + 1) + "], got " + c.input(0).describe());
  auto lin = [&](int64_t n) {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      v[static_cast<size_t>(i)] = align ? (n == 1 ? 0.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1))
                                        : (2.0 * static_cast<double>(i) + 1) / static_cast<double>(n) - 1;
    return v;
  };
  std::vector<int64_t> sp(size.begin() + 2, size.end());
  int64_t count = std::accumulate(sp.begin(), sp.end(), int64_t{1}, std::multiplies<>());
  std::vector<double> base;  // rows (x, y[, z], 1), x varying fastest
  std::vector<std::vector<double>> axes;
  for (int a = 0; a < r; ++a) axes.push_back(lin(sp[static_cast<size_t>(a)]));
  for (int64_t p = 0; p < count; ++p) {
    std::vector<int64_t> at(static_cast<size_t>(r));
    int64_t rem = p;
    for (int a = r - 1; a >= 0; --a) {
      at[static_cast<size_t>(a)] = rem % sp[static_cast<size_t>(a)];
      rem /= sp[static_cast<size_t>(a)];
    }
    for (int a = r - 1; a >= 0; --a) base.push_back(axes[static_cast<size_t>(a)][static_cast<size_t>(at[static_cast<size_t>(a)])]);
    base.push_back(1.0);
  }
  Dtype ct = theta.dtype() == float64 ? float64 : float32;
  Array b = astype(Array(base, Shape{count, r + 1}), ct);
  Array out = matmul(b, transpose(astype(theta, ct), {0, 2, 1}));  // [N, count, r]
  Shape shape{size[0]};
  shape.insert(shape.end(), sp.begin(), sp.end());
  shape.push_back(r);
  return {tv(astype(reshape(out, shape), theta.dtype()))};
}

std::vector<Value> op_col2im(OpContext& c) {
  const Array& x = c.tensor(0);
  auto image = c.ints(1), block = c.ints(2);
  size_t r = image.size();
  if (block.size() != r || x.ndim() != 3) c.fail("input must be [N, C*prod(block), L] with matching image and block shapes");
  std::vector<int64_t> dil = c.attr_ints("dilations", std::vector<int64_t>(r, 1));
  std::vector<int64_t> strides = c.attr_ints("strides", std::vector<int64_t>(r, 1));
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * r, 0));
  if (dil.size() != r || strides.size() != r || pads.size() != 2 * r)
    c.fail("dilations, strides and pads must match the " + std::to_string(r) + " image axes");
  // Every value comes from the model: sizes are checked before they divide or multiply.
  int64_t kprod = 1;
  for (size_t i = 0; i < r; ++i) {
    size_arg(c, image[i], "image_shape entry " + std::to_string(i), true);
    size_arg(c, block[i], "block_shape entry " + std::to_string(i), true);
    size_arg(c, dil[i], "dilations entry " + std::to_string(i), true);
    size_arg(c, strides[i], "strides entry " + std::to_string(i), true);
    size_arg(c, pads[i], "pads entry " + std::to_string(i));
    size_arg(c, pads[i + r], "pads entry " + std::to_string(i + r));
    kprod = mul_size(c, kprod, block[i]);
  }
  if (x.shape()[1] % kprod != 0)
    c.fail("input channels " + std::to_string(x.shape()[1]) + " are not a multiple of the block size " +
           std::to_string(kprod));
  int64_t n = x.shape()[0], ch = x.shape()[1] / kprod, l = x.shape()[2];
  std::vector<int64_t> blocks(r);
  int64_t lcount = 1;
  for (size_t i = 0; i < r; ++i) {
    int64_t span = add_size(c, add_size(c, image[i], pads[i]), pads[i + r]);
    int64_t eff = add_size(c, mul_size(c, dil[i], block[i] - 1), 1);
    blocks[i] = span < eff ? 0 : (span - eff) / strides[i] + 1;
    lcount = mul_size(c, lcount, blocks[i]);
  }
  if (lcount != l) c.fail("L = " + std::to_string(l) + " does not match the " + std::to_string(lcount) + " blocks the shapes give");
  int64_t plane = element_count(Shape(image.begin(), image.end()), c.node().label());
  array_bytes({n, ch, plane}, x.dtype(), c.node().label());
  std::vector<int64_t> dest(static_cast<size_t>(mul_size(c, kprod, l)));
  for (int64_t k = 0; k < kprod; ++k)
    for (int64_t b = 0; b < l; ++b) {
      int64_t krem = k, brem = b, flat = 0;
      bool inside = true;
      std::vector<int64_t> ko(r), bo(r);
      for (size_t i = r; i-- > 0;) {
        ko[i] = krem % block[i];
        krem /= block[i];
        bo[i] = brem % blocks[i];
        brem /= blocks[i];
      }
      for (size_t i = 0; i < r; ++i) {
        int64_t pos = bo[i] * strides[i] - pads[i] + ko[i] * dil[i];
        if (pos < 0 || pos >= image[i]) inside = false;
        flat = flat * image[i] + pos;
      }
      dest[static_cast<size_t>(k * l + b)] = inside ? flat : plane;  // `plane`: a discarded slot
    }
  Array values = reshape(x, {n, ch, kprod * l});
  Array idx = broadcast_to(reshape(int64_array(dest), {1, 1, kprod * l}), {n, ch, kprod * l});
  Array out = scatter(zeros({n, ch, plane + 1}, x.dtype()), idx, values, 2, ScatterReduce::Add);
  Shape shape{n, ch};
  shape.insert(shape.end(), image.begin(), image.end());
  return {tv(reshape(slice(out, Axes{2}, {0}, {plane}, {1}), shape))};
}


/// DeformConv (2-d): each kernel tap samples the input bilinearly at its grid position plus a
/// learned offset (zero outside), times an optional mask; the columns then meet the weights in a
/// grouped matmul.
std::vector<Value> op_deform_conv(OpContext& c) {
  const Array& x = c.tensor(0);
  const Array& w = c.tensor(1);
  const Array& off = c.tensor(2);
  if (x.ndim() != 4 || w.ndim() != 4 || off.ndim() != 4)
    c.fail("only 2-d DeformConv is supported: X, W and offset must be 4-d, got " + c.input(0).describe());
  int64_t n = x.shape()[0], ch = x.shape()[1], ih = x.shape()[2], iw = x.shape()[3];
  int64_t oc = w.shape()[0], kh = w.shape()[2], kw = w.shape()[3];
  int64_t group = c.attr_int("group", 1), ogroups = c.attr_int("offset_group", 1);
  auto dil = c.attr_ints("dilations", {1, 1}), strides = c.attr_ints("strides", {1, 1}), pads = c.attr_ints("pads", {0, 0, 0, 0});
  // Every attribute and shape is checked before any index is formed (found by the fuzzer under
  // ASan: short attribute lists and a mismatched offset batch were read past their end).
  if (dil.size() != 2 || strides.size() != 2 || pads.size() != 4)
    c.fail("dilations and strides need 2 values and pads 4, got " + std::to_string(dil.size()) + ", " +
           std::to_string(strides.size()) + " and " + std::to_string(pads.size()));
  for (int i = 0; i < 2; ++i)
    if (dil[static_cast<size_t>(i)] < 1 || strides[static_cast<size_t>(i)] < 1 || dil[static_cast<size_t>(i)] > ih + iw + kh + kw ||
        strides[static_cast<size_t>(i)] > ih + iw + 1)
      c.fail("dilations and strides must be positive and at most the input's size");
  for (auto p : pads)
    if (p < 0 || p > ih + iw + kh + kw) c.fail("pads must be non-negative and at most the input's size, got " + std::to_string(p));
  if (group < 1 || ogroups < 1 || ch % group != 0 || ch % ogroups != 0 || oc % group != 0 || w.shape()[1] * group != ch)
    c.fail("group " + std::to_string(group) + " and offset_group " + std::to_string(ogroups) + " must divide the " +
           std::to_string(ch) + " input channels, and W " + c.input(1).describe() + " must have channels / group inputs");
  int64_t oh = (ih + pads[0] + pads[2] - (dil[0] * (kh - 1) + 1)) / strides[0] + 1;
  int64_t ow = (iw + pads[1] + pads[3] - (dil[1] * (kw - 1) + 1)) / strides[1] + 1;
  if (oh < 1 || ow < 1) c.fail("the kernel does not fit the padded input (output " + std::to_string(oh) + "x" + std::to_string(ow) + ")");
  int64_t k = mul_size(c, kh, kw), l = mul_size(c, oh, ow), plane = mul_size(c, ih, iw);
  if (off.shape()[0] != n || off.shape()[1] != mul_size(c, ogroups * 2, k) || off.shape()[2] != oh || off.shape()[3] != ow)
    c.fail("offset must be [" + std::to_string(n) + ", " + std::to_string(ogroups * 2 * k) + ", " + std::to_string(oh) + ", " +
           std::to_string(ow) + "], got " + c.input(2).describe());
  if (c.has(4) && c.tensor(4).shape() != Shape{n, ogroups * k, oh, ow})
    c.fail("mask must be [" + std::to_string(n) + ", " + std::to_string(ogroups * k) + ", " + std::to_string(oh) + ", " +
           std::to_string(ow) + "], got " + c.input(4).describe());
  (void)mul_size(c, mul_size(c, mul_size(c, n, ogroups), k), l);  // the corner tables' size
  auto offv = off.to_vector<double>();
  std::vector<double> maskv;
  if (c.has(4)) maskv = c.tensor(4).to_vector<double>();
  // Four corners per (n, offset group, tap, output position): flat index (plane = outside) and weight.
  size_t total = static_cast<size_t>(n * ogroups * k * l);
  std::vector<std::vector<int64_t>> idx(4, std::vector<int64_t>(total, plane));
  std::vector<std::vector<double>> wt(4, std::vector<double>(total, 0.0));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t g = 0; g < ogroups; ++g)
      for (int64_t t = 0; t < k; ++t)
        for (int64_t p = 0; p < l; ++p) {
          size_t at = static_cast<size_t>(((b * ogroups + g) * k + t) * l + p);
          int64_t py = p / ow, px = p % ow, ty = t / kw, tx = t % kw;
          size_t obase = static_cast<size_t>(((b * ogroups * 2 * k) + g * 2 * k + 2 * t) * l + p);
          double y = static_cast<double>(py * strides[0] - pads[0] + ty * dil[0]) + offv[obase];
          double xx = static_cast<double>(px * strides[1] - pads[1] + tx * dil[1]) + offv[obase + static_cast<size_t>(l)];
          double m = maskv.empty() ? 1.0 : maskv[static_cast<size_t>(((b * ogroups + g) * k + t) * l + p)];
          if (y <= -1 || y >= static_cast<double>(ih) || xx <= -1 || xx >= static_cast<double>(iw)) continue;
          double y0 = std::floor(y), x0 = std::floor(xx);
          double fy = y - y0, fx = xx - x0;
          const double cw[4] = {(1 - fy) * (1 - fx), (1 - fy) * fx, fy * (1 - fx), fy * fx};
          for (int q = 0; q < 4; ++q) {
            int64_t yy = static_cast<int64_t>(y0) + q / 2, xq = static_cast<int64_t>(x0) + q % 2;
            if (yy < 0 || yy >= ih || xq < 0 || xq >= iw) continue;
            idx[static_cast<size_t>(q)][at] = yy * iw + xq;
            wt[static_cast<size_t>(q)][at] = cw[q] * m;
          }
        }
  Dtype ct = x.dtype() == float64 ? float64 : float32;
  Array xf = concatenate({reshape(astype(x, ct), {n, ch, plane}), zeros({n, ch, 1}, ct)}, 2);
  int64_t cg = ch / ogroups;
  std::vector<Array> cols;
  for (int64_t g = 0; g < ogroups; ++g) {
    Array xg = slice(xf, Axes{1}, {g * cg}, {(g + 1) * cg}, {1});
    Array acc;
    for (int q = 0; q < 4; ++q) {
      std::vector<int64_t> iq;
      std::vector<double> wq;
      for (int64_t b = 0; b < n; ++b) {
        size_t from = static_cast<size_t>((b * ogroups + g) * k * l);
        iq.insert(iq.end(), idx[static_cast<size_t>(q)].begin() + static_cast<long>(from),
                  idx[static_cast<size_t>(q)].begin() + static_cast<long>(from + static_cast<size_t>(k * l)));
        wq.insert(wq.end(), wt[static_cast<size_t>(q)].begin() + static_cast<long>(from),
                  wt[static_cast<size_t>(q)].begin() + static_cast<long>(from + static_cast<size_t>(k * l)));
      }
      Array gathered = take_along_axis(xg, broadcast_to(reshape(int64_array(iq), {n, 1, k * l}), {n, cg, k * l}), 2);
      Array term = multiply(gathered, astype(Array(wq, Shape{n, 1, k * l}), ct));
      acc = acc.valid() ? add(acc, term) : term;
    }
    cols.push_back(acc);  // [N, Cg, K*L]
  }
  Array col = reshape(concatenate(cols, 1), {n, group, (ch / group) * k, l});
  Array wm = reshape(astype(w, ct), {1, group, oc / group, (ch / group) * k});
  Array y = reshape(matmul(wm, col), {n, oc, oh, ow});
  if (c.has(3)) y = add(y, reshape(astype(c.tensor(3), ct), {1, oc, 1, 1}));
  return {tv(astype(y, x.dtype()))};
}

/// RoiAlign: bilinear samples on a regular grid in each output bin of each region, averaged
/// (avg) or maxed (max: ONNX takes the largest weighted corner, as ONNX Runtime does).
std::vector<Value> op_roi_align(OpContext& c) {
  const Array& x = c.tensor(0);
  const Array& rois_a = c.tensor(1);
  if (x.ndim() != 4 || rois_a.ndim() != 2 || rois_a.shape()[1] != 4)
    c.fail("X must be [N, C, H, W] and rois [R, 4], got " + c.input(0).describe() + " and " + c.input(1).describe());
  if (x.device().type != Device::Type::Cpu)
    c.note_host_compute("no GPU kernel; X and rois read to the host (" + std::to_string(x.nbytes() + rois_a.nbytes()) +
                        " bytes)");
  auto rois = c.host_tensor(1).to_vector<double>();
  auto batch_idx = c.ints(2);
  std::string mode = c.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") c.fail("mode must be avg or max, got \"" + mode + "\"");
  // Opset 16 added the attribute; before it the coordinates had no half-pixel shift.
  bool half_pixel = c.attr_string("coordinate_transformation_mode", c.opset() >= 16 ? "half_pixel" : "output_half_pixel") == "half_pixel";
  int64_t out_h = c.attr_int("output_height", 1), out_w = c.attr_int("output_width", 1);
  int64_t ratio = c.attr_int("sampling_ratio", 0);
  double scale = c.attr_float("spatial_scale", 1.0f);
  int64_t n = x.shape()[0], ch = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  auto xv = c.host_tensor(0).to_vector<double>();
  int64_t r_count = rois_a.shape()[0];
  // Checked before the output is sized (found by the fuzzer: output_height * output_width of
  // 2^35 asked for 480 GB; fewer batch indices than rois were read past their end).
  if (!std::isfinite(scale)) c.fail("spatial_scale must be finite, got " + std::to_string(scale));
  if (out_h < 1 || out_w < 1 || ratio < 0)
    c.fail("output_height and output_width must be >= 1 and sampling_ratio >= 0, got " + std::to_string(out_h) +
           ", " + std::to_string(out_w) + ", " + std::to_string(ratio));
  constexpr int64_t kMaxOut = int64_t{1} << 28;
  const int64_t planes = mul_size(c, r_count, ch);
  if (out_h > kMaxOut / out_w || (planes > 0 && out_h * out_w > kMaxOut / planes))
    c.fail("the output [" + std::to_string(r_count) + ", " + std::to_string(ch) + ", " + std::to_string(out_h) + ", " +
           std::to_string(out_w) + "] would hold more than 2^28 values");
  size_arg(c, out_h, "output_height", true);
  size_arg(c, out_w, "output_width", true);
  size_arg(c, ratio, "sampling_ratio");
  array_bytes({r_count, ch, out_h, out_w}, float64, c.node().label());  // the host buffer below
  std::vector<double> out(static_cast<size_t>(element_count({r_count, ch, out_h, out_w}, c.node().label())), 0.0);
  if (static_cast<int64_t>(batch_idx.size()) != r_count)
    c.fail(std::to_string(batch_idx.size()) + " batch indices for " + std::to_string(r_count) + " rois");
  // Bilinear sampling reads the image's corners (found by the fuzzer under UBSan: an empty H or W
  // indexed an empty buffer).
  if (r_count > 0 && ch > 0 && (h == 0 || w == 0)) c.fail("X must have non-empty H and W, got " + c.input(0).describe());
  for (int64_t r = 0; r < r_count; ++r) {
    int64_t b = batch_idx[static_cast<size_t>(r)];
    if (b < 0 || b >= n) c.fail("batch index " + std::to_string(b) + " is out of range for " + std::to_string(n) + " images");
    double off = half_pixel ? 0.5 : 0.0;
    const double* roi = &rois[static_cast<size_t>(r * 4)];
    // Finite rois and scale keep every sample position finite (found by the fuzzer under UBSan: a
    // NaN position passed the range test below and became INT64_MIN).
    if (!std::isfinite(roi[0] * scale) || !std::isfinite(roi[1] * scale) || !std::isfinite(roi[2] * scale) ||
        !std::isfinite(roi[3] * scale))
      c.fail("roi " + std::to_string(r) + " (" + std::to_string(roi[0]) + ", " + std::to_string(roi[1]) + ", " +
             std::to_string(roi[2]) + ", " + std::to_string(roi[3]) + ") at spatial_scale " + std::to_string(scale) +
             " is not finite");
    double x0 = roi[0] * scale - off, y0 = roi[1] * scale - off, x1 = roi[2] * scale - off, y1 = roi[3] * scale - off;
    double rw = x1 - x0, rh = y1 - y0;
    if (!half_pixel) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    double bh = rh / static_cast<double>(out_h), bw = rw / static_cast<double>(out_w);
    // The adaptive grid is ceil(roi size / bins) samples per bin: a roi near 2^63 (finite, see
    // above) would not convert to int64; past 2^32 per axis no model means it.
    auto grid = [&](double extent, int64_t bins, const char* what) -> int64_t {
      if (ratio > 0) return ratio;
      double g = std::ceil(extent / static_cast<double>(bins));
      if (!(std::fabs(g) <= static_cast<double>(int64_t{1} << 32)))
        c.fail("roi " + std::to_string(r) + " (" + std::to_string(roi[0]) + ", " + std::to_string(roi[1]) + ", " +
               std::to_string(roi[2]) + ", " + std::to_string(roi[3]) + ") at spatial_scale " + std::to_string(scale) +
               " needs " + std::to_string(g) + " samples per bin along " + what + ", more than 2^32");
      return static_cast<int64_t>(g);
    };
    int64_t gh = grid(rh, out_h, "the height"), gw = grid(rw, out_w, "the width");
    double count = static_cast<double>(std::max<int64_t>(mul_size(c, gh, gw), 1));
    for (int64_t ph = 0; ph < out_h; ++ph)
      for (int64_t pw = 0; pw < out_w; ++pw) {
        struct Tap {
          int64_t pos[4];
          double wt[4];
        };
        // The taps of one bin, computed once for every channel: at most 2^16 at a time, so a
        // huge sampling grid costs time (which the run's deadline stops), never memory.
        std::vector<Tap> taps;
        std::vector<double> acc(static_cast<size_t>(ch), 0.0);
        bool first = true;
        auto flush = [&] {
          for (int64_t k = 0; k < ch; ++k) {
            const double* plane = &xv[static_cast<size_t>((b * ch + k) * h * w)];
            double& a = acc[static_cast<size_t>(k)];
            bool f = first;
            for (const auto& t : taps) {
              if (mode == "avg") {
                for (int q = 0; q < 4; ++q) a += t.wt[q] * plane[t.pos[q]];
              } else {
                double v = std::max(std::max(t.wt[0] * plane[t.pos[0]], t.wt[1] * plane[t.pos[1]]),
                                    std::max(t.wt[2] * plane[t.pos[2]], t.wt[3] * plane[t.pos[3]]));
                a = f ? v : std::max(a, v);
                f = false;
              }
            }
          }
          if (!taps.empty()) first = false;
          taps.clear();
        };
        for (int64_t iy = 0; iy < gh; ++iy)
          for (int64_t ix = 0; ix < gw; ++ix) {
            // A huge roi or sampling_ratio makes this loop long: the run's deadline can stop it.
            if ((ix & 1023) == 0) c.check_stop();
            double yy = y0 + static_cast<double>(ph) * bh + (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
            double xx = x0 + static_cast<double>(pw) * bw + (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
            Tap t{{0, 0, 0, 0}, {0, 0, 0, 0}};
            if (yy >= -1.0 && yy <= static_cast<double>(h) && xx >= -1.0 && xx <= static_cast<double>(w)) {
              yy = std::max(yy, 0.0);
              xx = std::max(xx, 0.0);
              int64_t yl = static_cast<int64_t>(yy), xl = static_cast<int64_t>(xx), yh2, xh2;
              if (yl >= h - 1) { yh2 = yl = h - 1; yy = static_cast<double>(yl); } else { yh2 = yl + 1; }
              if (xl >= w - 1) { xh2 = xl = w - 1; xx = static_cast<double>(xl); } else { xh2 = xl + 1; }
              double ly = yy - static_cast<double>(yl), lx = xx - static_cast<double>(xl), hy = 1 - ly, hx = 1 - lx;
              t = Tap{{yl * w + xl, yl * w + xh2, yh2 * w + xl, yh2 * w + xh2}, {hy * hx, hy * lx, ly * hx, ly * lx}};
            }
            taps.push_back(t);
            if (taps.size() == (size_t{1} << 16)) flush();
          }
        flush();
        for (int64_t k = 0; k < ch; ++k) {
          double a = acc[static_cast<size_t>(k)];
          out[static_cast<size_t>(((r * ch + k) * out_h + ph) * out_w + pw)] = mode == "avg" ? a / count : a;
        }
      }
  }
  return {tv(astype(Array(out, Shape{r_count, ch, out_h, out_w}), x.dtype()))};
}
}  // namespace

void register_image_ops(OpRegistry& r) {
  r.add("", "GridSample", 16, op_grid_sample);
  r.add("", "AffineGrid", 20, op_affine_grid);
  r.add("", "Col2Im", 18, op_col2im);
  r.add("", "DeformConv", 19, op_deform_conv);
  r.add("", "RoiAlign", 10, op_roi_align);
}

}  // namespace smelt::onnx
