// smelt::nn layers: Linear, Embedding, the norms, Conv1d/Conv2d, Dropout, MLP and activations.
#include <cmath>
#include <string>

#include "smelt/nn.h"
#include "smelt/random.h"

namespace smelt::nn {

namespace {

std::string desc(const Array& a) { return std::string(dtype_name(a.dtype())) + shape_to_string(a.shape()); }

void check_positive(int64_t v, const char* op, const char* what) {
  if (v <= 0) throw InvalidArgument(std::string(op) + ": " + what + " must be positive, got " + std::to_string(v));
}

void check_float_dtype(Dtype dtype, const char* op) {
  if (!is_floating(dtype))
    throw DtypeError(std::string(op) + ": parameters must have a floating-point dtype, got " + dtype_name(dtype));
}

/// `n` keys from the given key or from the thread's sequence.
Array keys_for(const std::optional<Array>& key, int n) { return random::split(key ? *key : random::next_key(), n); }

Array row(const Array& keys, int64_t i) { return reshape(slice(keys, {i, 0}, {i + 1, 2}), {2}); }

/// U(-bound, bound): PyTorch's default for Linear and Conv (kaiming_uniform with a = √5 gives
/// the same bound 1/√fan_in for the weight as for the bias).
Array uniform_init(const Array& key, const Shape& shape, double bound, Dtype dtype) {
  return random::uniform(key, shape, -bound, bound, dtype);
}

}  // namespace

// ---- Linear -----------------------------------------------------------------------------------

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, std::optional<Array> key, Dtype dtype) {
  check_positive(in_features, "nn::Linear", "in_features");
  check_positive(out_features, "nn::Linear", "out_features");
  check_float_dtype(dtype, "nn::Linear");
  Array ks = keys_for(key, 2);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = uniform_init(row(ks, 0), {out_features, in_features}, bound, dtype);
  if (with_bias) bias = uniform_init(row(ks, 1), {out_features}, bound, dtype);
}

Array Linear::operator()(const Array& x) const {
  if (x.ndim() == 0 || x.shape(-1) != weight.shape(1))
    throw ShapeError("nn::Linear: the input " + desc(x) + " must end in " + std::to_string(weight.shape(1)) +
                     " features (weight " + desc(weight) + ")");
  Array y = matmul(x, transpose(weight));
  return bias ? y + *bias : y;
}

// ---- Embedding --------------------------------------------------------------------------------

Embedding::Embedding(int64_t num_embeddings, int64_t dim, std::optional<Array> key, Dtype dtype) {
  check_positive(num_embeddings, "nn::Embedding", "num_embeddings");
  check_positive(dim, "nn::Embedding", "dim");
  check_float_dtype(dtype, "nn::Embedding");
  weight = random::normal(key ? *key : random::next_key(), {num_embeddings, dim}, 0.0, 1.0, dtype);
}

Array Embedding::operator()(const Array& indices) const {
  if (!is_integral(indices.dtype()))
    throw DtypeError("nn::Embedding: indices must have an integer dtype, got " + desc(indices));
  return take(weight, indices, 0);
}

// ---- Norms ------------------------------------------------------------------------------------

LayerNorm::LayerNorm(int64_t dim, double eps_, bool affine, Dtype dtype) : eps(eps_) {
  check_positive(dim, "nn::LayerNorm", "dim");
  check_float_dtype(dtype, "nn::LayerNorm");
  if (affine) {
    weight = ones({dim}, dtype);
    bias = zeros({dim}, dtype);
  }
}

Array LayerNorm::operator()(const Array& x) const { return layer_norm(x, weight, bias, eps); }

RMSNorm::RMSNorm(int64_t dim, double eps_, bool affine, Dtype dtype) : eps(eps_) {
  check_positive(dim, "nn::RMSNorm", "dim");
  check_float_dtype(dtype, "nn::RMSNorm");
  if (affine) weight = ones({dim}, dtype);
}

Array RMSNorm::operator()(const Array& x) const { return rms_norm(x, weight, eps); }

// ---- Convolutions -----------------------------------------------------------------------------

Conv1d::Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride_, int64_t padding_,
               int64_t dilation_, int64_t groups_, bool with_bias, std::optional<Array> key, Dtype dtype)
    : stride(stride_), padding(padding_), dilation(dilation_), groups(groups_) {
  check_positive(in_channels, "nn::Conv1d", "in_channels");
  check_positive(out_channels, "nn::Conv1d", "out_channels");
  check_positive(kernel, "nn::Conv1d", "kernel");
  check_positive(groups, "nn::Conv1d", "groups");
  check_float_dtype(dtype, "nn::Conv1d");
  if (in_channels % groups != 0 || out_channels % groups != 0)
    throw InvalidArgument("nn::Conv1d: in_channels " + std::to_string(in_channels) + " and out_channels " +
                          std::to_string(out_channels) + " must be divisible by groups " + std::to_string(groups));
  Array ks = keys_for(key, 2);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_channels / groups * kernel));
  weight = uniform_init(row(ks, 0), {out_channels, in_channels / groups, kernel}, bound, dtype);
  if (with_bias) bias = uniform_init(row(ks, 1), {out_channels}, bound, dtype);
}

Array Conv1d::operator()(const Array& x) const {
  Array y = conv1d(x, weight, stride, padding, dilation, groups);
  return bias ? y + reshape(*bias, {1, -1, 1}) : y;
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, std::pair<int64_t, int64_t> kernel,
               std::pair<int64_t, int64_t> stride_, std::pair<int64_t, int64_t> padding_,
               std::pair<int64_t, int64_t> dilation_, int64_t groups_, bool with_bias, std::optional<Array> key,
               Dtype dtype)
    : stride(stride_), padding(padding_), dilation(dilation_), groups(groups_) {
  check_positive(in_channels, "nn::Conv2d", "in_channels");
  check_positive(out_channels, "nn::Conv2d", "out_channels");
  check_positive(kernel.first, "nn::Conv2d", "kernel height");
  check_positive(kernel.second, "nn::Conv2d", "kernel width");
  check_positive(groups, "nn::Conv2d", "groups");
  check_float_dtype(dtype, "nn::Conv2d");
  if (in_channels % groups != 0 || out_channels % groups != 0)
    throw InvalidArgument("nn::Conv2d: in_channels " + std::to_string(in_channels) + " and out_channels " +
                          std::to_string(out_channels) + " must be divisible by groups " + std::to_string(groups));
  Array ks = keys_for(key, 2);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_channels / groups * kernel.first * kernel.second));
  weight = uniform_init(row(ks, 0), {out_channels, in_channels / groups, kernel.first, kernel.second}, bound, dtype);
  if (with_bias) bias = uniform_init(row(ks, 1), {out_channels}, bound, dtype);
}

Array Conv2d::operator()(const Array& x) const {
  Array y = conv2d(x, weight, stride, padding, dilation, groups);
  return bias ? y + reshape(*bias, {1, -1, 1, 1}) : y;
}

// ---- Dropout ----------------------------------------------------------------------------------

Dropout::Dropout(double p_) : p(p_) {
  if (!(p >= 0.0 && p <= 1.0)) throw InvalidArgument("nn::Dropout: p must be in [0, 1], got " + std::to_string(p));
}

Array Dropout::operator()(const Array& x) const {
  if (!training || p == 0.0) return x;
  if (!is_floating(x.dtype())) throw DtypeError("nn::Dropout: the input must be floating point, got " + desc(x));
  if (p == 1.0) return zeros_like(x);
  // keep ~ Bernoulli(1 - p); kept values are scaled so that the expectation is unchanged.
  Array keep = random::bernoulli(random::next_key(), Array(1.0f - static_cast<float>(p)), x.shape());
  return where(keep, x * (1.0 / (1.0 - p)), zeros_like(x));
}

// ---- Activations and MLP ----------------------------------------------------------------------

Array activate(Activation a, const Array& x) {
  switch (a) {
    case Activation::Relu: return relu(x);
    case Activation::Gelu: return gelu(x, false);
    case Activation::GeluTanh: return gelu(x, true);
    case Activation::Silu: return silu(x);
    case Activation::Tanh: return tanh(x);
  }
  throw InvalidArgument("nn::activate: unknown activation " + std::to_string(static_cast<int>(a)));
}

MLP::MLP(int64_t in_features, int64_t hidden, int64_t out_features, Activation act, bool with_bias,
         std::optional<Array> key, Dtype dtype)
    : activation(act) {
  Array ks = keys_for(key, 2);
  fc1 = Linear(in_features, hidden, with_bias, row(ks, 0), dtype);
  fc2 = Linear(hidden, out_features, with_bias, row(ks, 1), dtype);
}

Array MLP::operator()(const Array& x) const { return fc2(activate(activation, fc1(x))); }

}  // namespace smelt::nn
