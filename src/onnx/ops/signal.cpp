// ONNX signal operators computed on the host: MelWeightMatrix (opset 17).
#include <cmath>

#include "src/onnx/ops/op_helpers.h"

namespace smelt::onnx {

namespace {

/// NumPy's float floor_divide (npy_divmod), which is not always floor(a / b): the reference's
/// bin edges are computed with it and land on integers, where the two can differ.
double numpy_floor_divide(double a, double b) {
  if (b == 0) return a / b;
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0) return std::copysign(0.0, a / b);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

std::vector<Value> op_mel_weight_matrix(OpContext& c) {
  for (size_t i = 0; i < 3; ++i) c.require_types(i, {ElemType::Int32, ElemType::Int64});
  for (size_t i = 3; i < 5; ++i) c.require_types(i, {ElemType::Float, ElemType::Double, ElemType::Float16, ElemType::BFloat16});
  const int64_t num_mel_bins = c.scalar_int(0), dft_length = c.scalar_int(1), sample_rate = c.scalar_int(2);
  const double lower_hz = c.scalar(3), upper_hz = c.scalar(4);
  if (num_mel_bins < 0) c.fail("num_mel_bins must be non-negative, got " + std::to_string(num_mel_bins));
  if (dft_length < 1) c.fail("dft_length must be positive, got " + std::to_string(dft_length));
  if (sample_rate < 1) c.fail("sample_rate must be positive, got " + std::to_string(sample_rate));
  if (!(lower_hz >= 0) || !(upper_hz >= lower_hz))
    c.fail("the edges must satisfy 0 <= lower_edge_hertz <= upper_edge_hertz, got " + std::to_string(lower_hz) +
           " and " + std::to_string(upper_hz));
  const int64_t out_code = c.attr_int("output_datatype", 1);
  const auto out_type = static_cast<ElemType>(out_code);
  auto out_dtype = storage_dtype(out_type);
  if (!out_dtype || is_storage_type(out_type) || out_type == ElemType::Bool)
    c.fail("output_datatype " + std::to_string(out_code) + " (" + elem_type_name(out_type) +
           ") is not a numeric type MelWeightMatrix can produce");

  // The edges in mel are computed in the edges' own precision (float32 for float inputs, as the
  // reference does with NumPy scalars); the bins from there on in float64.
  const bool wide = c.elem_type(3) == ElemType::Double && c.elem_type(4) == ElemType::Double;
  auto round = [&](double v) { return wide ? v : static_cast<double>(static_cast<float>(v)); };
  auto to_mel = [&](double hz) { return round(2595 * round(std::log10(round(1 + round(hz / 700))))); };
  const double low_mel = to_mel(lower_hz), high_mel = to_mel(upper_hz);
  const double mel_step = round(round(high_mel - low_mel) / static_cast<double>(num_mel_bins + 2));
  const int64_t n_spec = dft_length / 2 + 1;
  if (num_mel_bins > (int64_t{1} << 32) / n_spec)
    c.fail("the output [" + std::to_string(n_spec) + ", " + std::to_string(num_mel_bins) + "] is too large");
  auto too_high = [&] {
    c.fail("upper_edge_hertz " + std::to_string(upper_hz) + " is above what " + std::to_string(n_spec) +
           " spectrogram bins of dft_length " + std::to_string(dft_length) + " at sample_rate " +
           std::to_string(sample_rate) + " cover");
  };
  // Band i spans bins[i] .. bins[i + 2]; the edges never decrease, as the mel scale rises.
  std::vector<int64_t> bins(static_cast<size_t>(num_mel_bins + 2));
  for (size_t i = 0; i < bins.size(); ++i) {
    double mel = static_cast<double>(i) * mel_step + low_mel;
    double hz = 700 * (std::pow(10.0, mel / 2595) - 1);
    double bin = numpy_floor_divide((static_cast<double>(dft_length) + 1) * hz, static_cast<double>(sample_rate));
    if (!(bin <= static_cast<double>(n_spec))) too_high();  // also NaN from an infinite edge
    bins[i] = static_cast<int64_t>(bin);
  }
  if (num_mel_bins > 0 && bins[bins.size() - 2] >= n_spec) too_high();
  std::vector<double> out(static_cast<size_t>(n_spec * num_mel_bins), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double& { return out[static_cast<size_t>(j * num_mel_bins + i)]; };
  for (int64_t i = 0; i < num_mel_bins; ++i) {
    const int64_t lo = bins[static_cast<size_t>(i)], center = bins[static_cast<size_t>(i + 1)],
                  hi = bins[static_cast<size_t>(i + 2)];
    // The triangle of band i: rising from lo to center, falling from center to hi.
    if (center == lo) {
      at(center, i) = 1;
    } else {
      for (int64_t j = lo; j <= center; ++j)
        at(j, i) = static_cast<double>(j - lo) / static_cast<double>(center - lo);
    }
    if (hi > center)
      for (int64_t j = center; j < hi; ++j)
        at(j, i) = static_cast<double>(hi - j) / static_cast<double>(hi - center);
  }
  return {tv(astype(Array(out, Shape{n_spec, num_mel_bins}), *out_dtype))};
}

}  // namespace

void register_signal_ops(OpRegistry& r) { r.add("", "MelWeightMatrix", 17, op_mel_weight_matrix); }

}  // namespace smelt::onnx
