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
  auto g = grid.to_vector<double>();
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
  int64_t kprod = std::accumulate(block.begin(), block.end(), int64_t{1}, std::multiplies<>());
  int64_t n = x.shape()[0], ch = x.shape()[1] / kprod, l = x.shape()[2];
  std::vector<int64_t> blocks(r);
  int64_t lcount = 1;
  for (size_t i = 0; i < r; ++i) {
    blocks[i] = (image[i] + pads[i] + pads[i + r] - dil[i] * (block[i] - 1) - 1) / strides[i] + 1;
    lcount *= blocks[i];
  }
  if (lcount != l) c.fail("L = " + std::to_string(l) + " does not match the " + std::to_string(lcount) + " blocks the shapes give");
  int64_t plane = std::accumulate(image.begin(), image.end(), int64_t{1}, std::multiplies<>());
  std::vector<int64_t> dest(static_cast<size_t>(kprod * l));
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

}  // namespace

void register_image_ops(OpRegistry& r) {
  r.add("", "GridSample", 16, op_grid_sample);
  r.add("", "AffineGrid", 20, op_affine_grid);
  r.add("", "Col2Im", 18, op_col2im);
}

}  // namespace smelt::onnx
