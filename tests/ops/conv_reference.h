// Naive references for the convolution and pooling tests: direct nested loops, in double or in
// wrapping uint64 arithmetic (exact modulo 2^64 for the integer dtypes).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "test_utils.h"

namespace smelt::test {

/// Spatial option `v` for spatial rank k as three entries (missing leading axes get `fill`).
inline std::vector<int64_t> spatial3(const std::vector<int64_t>& v, size_t k, int64_t def, int64_t fill) {
  std::vector<int64_t> out(3, fill);
  for (size_t i = 0; i < k; ++i) out[3 - k + i] = v.empty() ? def : v[i];
  return out;
}

/// Spatial dims of `shape` (after [N, C]) as three entries, leading ones filled with 1.
inline std::vector<int64_t> dims3(const Shape& shape) {
  size_t k = shape.size() - 2;
  std::vector<int64_t> out(3, 1);
  for (size_t i = 0; i < k; ++i) out[3 - k + i] = shape[i + 2];
  return out;
}

/// Conv: out[n, o, y] = sum over c in o's group and kernel offsets of x[n, c, y*s - lo + k*d] * w[o, c, k].
template <class V>
std::vector<V> ref_conv(const std::vector<V>& x, const Shape& xs, const std::vector<V>& w, const Shape& ws,
                        const ConvOptions& o, Shape* out_shape) {
  const size_t k = xs.size() - 2;
  auto in = dims3(xs), kk = dims3(ws);
  auto s = spatial3(o.strides, k, 1, 1), lo = spatial3(o.padding_lo, k, 0, 0);
  auto hi = spatial3(o.padding_hi, k, 0, 0), d = spatial3(o.dilations, k, 1, 1);
  const int64_t N = xs[0], C = xs[1], O = ws[0], G = o.groups, Cg = C / G, Og = O / G;
  std::vector<int64_t> out(3);
  for (int i = 0; i < 3; ++i) out[i] = (in[i] + lo[i] + hi[i] - d[i] * (kk[i] - 1) - 1) / s[i] + 1;
  *out_shape = {N, O};
  for (size_t i = 0; i < k; ++i) out_shape->push_back(out[3 - k + i]);
  std::vector<V> y(static_cast<size_t>(N * O * out[0] * out[1] * out[2]), V(0));
  size_t idx = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < O; ++oc)
      for (int64_t a = 0; a < out[0]; ++a)
        for (int64_t b = 0; b < out[1]; ++b)
          for (int64_t c3 = 0; c3 < out[2]; ++c3, ++idx) {
            V acc = 0;
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t i = 0; i < kk[0]; ++i)
                for (int64_t j = 0; j < kk[1]; ++j)
                  for (int64_t l = 0; l < kk[2]; ++l) {
                    int64_t p0 = a * s[0] - lo[0] + i * d[0];
                    int64_t p1 = b * s[1] - lo[1] + j * d[1];
                    int64_t p2 = c3 * s[2] - lo[2] + l * d[2];
                    if (p0 < 0 || p0 >= in[0] || p1 < 0 || p1 >= in[1] || p2 < 0 || p2 >= in[2]) continue;
                    int64_t ci = (oc / Og) * Cg + c;
                    V xv = x[static_cast<size_t>((((n * C + ci) * in[0] + p0) * in[1] + p1) * in[2] + p2)];
                    V wv = w[static_cast<size_t>((((oc * Cg + c) * kk[0] + i) * kk[1] + j) * kk[2] + l)];
                    acc += xv * wv;
                  }
            y[idx] = acc;
          }
  return y;
}

/// ConvTranspose as a scatter: x[n, c, p] * w[c, o, k] adds into out[n, g*Og + o, p*s - lo + k*d].
template <class V>
std::vector<V> ref_conv_transpose(const std::vector<V>& x, const Shape& xs, const std::vector<V>& w, const Shape& ws,
                                  const ConvTransposeOptions& o, Shape* out_shape) {
  const size_t k = xs.size() - 2;
  auto in = dims3(xs), kk = dims3(ws);
  auto s = spatial3(o.strides, k, 1, 1), lo = spatial3(o.padding_lo, k, 0, 0);
  auto hi = spatial3(o.padding_hi, k, 0, 0), d = spatial3(o.dilations, k, 1, 1);
  auto op = spatial3(o.output_padding, k, 0, 0);
  const int64_t N = xs[0], C = xs[1], G = o.groups, Cg = C / G, Og = ws[1], O = Og * G;
  std::vector<int64_t> out(3);
  for (int i = 0; i < 3; ++i) out[i] = (in[i] - 1) * s[i] - lo[i] - hi[i] + d[i] * (kk[i] - 1) + op[i] + 1;
  *out_shape = {N, O};
  for (size_t i = 0; i < k; ++i) out_shape->push_back(out[3 - k + i]);
  std::vector<V> y(static_cast<size_t>(N * O * out[0] * out[1] * out[2]), V(0));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t a = 0; a < in[0]; ++a)
        for (int64_t b = 0; b < in[1]; ++b)
          for (int64_t e = 0; e < in[2]; ++e) {
            V xv = x[static_cast<size_t>((((n * C + c) * in[0] + a) * in[1] + b) * in[2] + e)];
            for (int64_t oc = 0; oc < Og; ++oc)
              for (int64_t i = 0; i < kk[0]; ++i)
                for (int64_t j = 0; j < kk[1]; ++j)
                  for (int64_t l = 0; l < kk[2]; ++l) {
                    int64_t p0 = a * s[0] - lo[0] + i * d[0];
                    int64_t p1 = b * s[1] - lo[1] + j * d[1];
                    int64_t p2 = e * s[2] - lo[2] + l * d[2];
                    if (p0 < 0 || p0 >= out[0] || p1 < 0 || p1 >= out[1] || p2 < 0 || p2 >= out[2]) continue;
                    int64_t og = (c / Cg) * Og + oc;
                    V wv = w[static_cast<size_t>((((c * Og + oc) * kk[0] + i) * kk[1] + j) * kk[2] + l)];
                    y[static_cast<size_t>((((n * O + og) * out[0] + p0) * out[1] + p1) * out[2] + p2)] += xv * wv;
                  }
          }
  return y;
}

/// Max or average pooling in double: NaN propagates through max, an empty window gives -inf
/// (max) or NaN (average); `trunc` rounds averages toward zero (integer dtypes).
inline std::vector<double> ref_pool(const std::vector<double>& x, const Shape& xs, const PoolOptions& o, bool is_max,
                                    bool trunc, Shape* out_shape) {
  const size_t k = xs.size() - 2;
  auto in = dims3(xs);
  auto kk = spatial3(o.kernel, k, 1, 1), s = spatial3(o.strides, k, 1, 1);
  auto lo = spatial3(o.padding_lo, k, 0, 0), hi = spatial3(o.padding_hi, k, 0, 0);
  auto d = spatial3(o.dilations, k, 1, 1);
  std::vector<int64_t> out(3);
  for (int i = 0; i < 3; ++i) {
    double span = static_cast<double>(in[i] + lo[i] + hi[i] - d[i] * (kk[i] - 1) - 1);
    out[i] = static_cast<int64_t>(o.ceil_mode ? std::ceil(span / s[i]) : std::floor(span / s[i])) + 1;
    if (o.ceil_mode && (out[i] - 1) * s[i] >= in[i] + lo[i]) --out[i];
  }
  *out_shape = {xs[0], xs[1]};
  for (size_t i = 0; i < k; ++i) out_shape->push_back(out[3 - k + i]);
  const int64_t planes = xs[0] * xs[1];
  std::vector<double> y;
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t a = 0; a < out[0]; ++a)
      for (int64_t b = 0; b < out[1]; ++b)
        for (int64_t c = 0; c < out[2]; ++c) {
          double m = -std::numeric_limits<double>::infinity(), sum = 0;
          bool nan = false;
          int64_t valid = 0, padded = 0;
          for (int64_t i = 0; i < kk[0]; ++i)
            for (int64_t j = 0; j < kk[1]; ++j)
              for (int64_t l = 0; l < kk[2]; ++l) {
                int64_t p[3] = {a * s[0] - lo[0] + i * d[0], b * s[1] - lo[1] + j * d[1], c * s[2] - lo[2] + l * d[2]};
                bool inside = true, in_pad = true;
                for (int t = 0; t < 3; ++t) {
                  inside = inside && p[t] >= 0 && p[t] < in[t];
                  in_pad = in_pad && p[t] >= -lo[t] && p[t] < in[t] + hi[t];
                }
                padded += in_pad;
                if (!inside) continue;
                double v = x[static_cast<size_t>(((pl * in[0] + p[0]) * in[1] + p[1]) * in[2] + p[2])];
                ++valid;
                sum += v;
                if (std::isnan(v))
                  nan = true;
                else
                  m = std::max(m, v);
              }
          if (is_max) {
            y.push_back(nan ? std::nan("") : m);
          } else {
            double avg = sum / static_cast<double>(o.count_include_pad ? padded : valid);
            y.push_back(trunc ? (valid == 0 ? 0.0 : std::trunc(avg)) : avg);
          }
        }
  return y;
}

/// Elementwise |v|.
inline std::vector<double> abs_all(std::vector<double> v) {
  for (auto& x : v) x = std::fabs(x);
  return v;
}

/// |got - want| <= tol * (|want| + mag) elementwise: `mag` is the sum of |terms| behind each
/// element, so cancellation is judged against the size of what was added.
inline ::testing::AssertionResult close_to(Array got, const Shape& shape, const std::vector<double>& want,
                                           const std::vector<double>& mag, double tol) {
  if (got.shape() != shape)
    return ::testing::AssertionFailure() << "shape " << shape_to_string(got.shape())
                                         << " != " << shape_to_string(shape);
  auto g = as_doubles(got);
  if (g.size() != want.size()) return ::testing::AssertionFailure() << "size " << g.size() << " != " << want.size();
  int bad = 0;
  std::string msg;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok = std::isnan(want[i])   ? std::isnan(g[i])
              : std::isinf(want[i]) ? g[i] == want[i]
                                    : std::fabs(g[i] - want[i]) <= tol * (std::fabs(want[i]) + mag[i]);
    if (!ok && bad++ < 6)
      msg += "\n  [" + std::to_string(i) + "] got " + std::to_string(g[i]) + " want " + std::to_string(want[i]);
  }
  if (bad) return ::testing::AssertionFailure() << bad << " of " << g.size() << " differ:" << msg;
  return ::testing::AssertionSuccess();
}

/// Integer values of `a` as wrapping uint64 (sign-extended).
inline std::vector<uint64_t> as_wrapping(Array a) {
  std::vector<uint64_t> out;
  if (a.dtype() == Dtype::UInt64) return a.to_vector<uint64_t>();
  for (int64_t v : a.to_vector<int64_t>()) out.push_back(static_cast<uint64_t>(v));
  return out;
}

/// Exact comparison of an integer result with a wrapping uint64 reference narrowed to its dtype.
inline ::testing::AssertionResult equal_wrapped(Array got, const Shape& shape, const std::vector<uint64_t>& want) {
  if (got.shape() != shape)
    return ::testing::AssertionFailure() << "shape " << shape_to_string(got.shape())
                                         << " != " << shape_to_string(shape);
  auto g = as_wrapping(got);
  if (g.size() != want.size()) return ::testing::AssertionFailure() << "size " << g.size() << " != " << want.size();
  const size_t bits = size_of(got.dtype()) * 8;
  const bool is_signed = is_signed_integral(got.dtype());
  for (size_t i = 0; i < g.size(); ++i) {
    uint64_t w = want[i];
    if (bits < 64) {
      w &= (uint64_t{1} << bits) - 1;
      if (is_signed && (w >> (bits - 1)) != 0) w |= ~((uint64_t{1} << bits) - 1);  // sign-extend
    }
    if (g[i] != w) return ::testing::AssertionFailure() << "element " << i << ": got " << g[i] << " want " << w;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace smelt::test
