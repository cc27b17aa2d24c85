// Random ops over counter-based Threefry keys: key, split, bits, and the distributions built on them.
#include <cmath>
#include <limits>

#include "smelt/random.h"
#include "src/ops/op_utils.h"

namespace smelt::random {

namespace {

void check_key(const Array& key, const char* op) {
  check_valid(key, op);
  if (key.dtype() != uint32 || key.shape() != Shape{2})
    throw InvalidArgument(std::string(op) +
                          ": the key must be uint32[2] (from random::key, or one row of random::split), got " +
                          describe(key));
}

void check_shape(const Shape& shape, const char* op) {
  for (auto d : shape)
    if (d < 0) throw InvalidArgument(std::string(op) + ": negative dimension in shape " + shape_to_string(shape));
}

void check_float(Dtype dtype, const char* op, const char* what) {
  if (!is_floating(dtype))
    throw DtypeError(std::string(op) + ": " + what + " must be a floating dtype, got " + dtype_name(dtype));
}

// True when `from` broadcasts to exactly `to` (a parameter's shape against a sample shape).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 0; i < from.size(); ++i) {
    int64_t f = from[from.size() - 1 - i], t = to[to.size() - 1 - i];
    if (f != t && f != 1) return false;
  }
  return true;
}

// The RandomBits node: element i is a function of the key and i only (JAX's threefry layout).
Array random_bits(const Array& key, const Shape& shape) {
  return make_array(shape, uint32, key.device(), make_prim(PrimKind::RandomBits, NoParams{}), {key});
}

Array scalar(double v, Dtype dtype, Device device) { return full_value({}, Scalar::of_float(v), dtype, device); }
Array scalar_u(uint64_t v, Dtype dtype, Device device) { return full_value({}, Scalar::of_uint(v), dtype, device); }

// The largest value of `dtype` below `v` (v already representable in dtype), as a double.
double below(double v, Dtype dtype) {
  switch (dtype) {
    case Dtype::Float64: return std::nextafter(v, -INFINITY);
    case Dtype::Float32: return std::nextafter(static_cast<float>(v), -INFINITY);
    case Dtype::Float16:
    case Dtype::BFloat16: {
      // Both 16-bit formats are sign-magnitude: stepping the bits steps the value.
      uint16_t b = dtype == Dtype::Float16 ? float_to_half(static_cast<float>(v)) : float_to_bfloat16(static_cast<float>(v));
      if ((b & 0x7FFF) == 0) b = 0x8001;  // below ±0: the smallest negative subnormal
      else if (b & 0x8000) b = static_cast<uint16_t>(b + 1);
      else b = static_cast<uint16_t>(b - 1);
      return dtype == Dtype::Float16 ? half_to_float(b) : static_cast<float>(bfloat16_t::from_bits(b));
    }
    default: return v;
  }
}

// `v` rounded to `dtype`, as a double.
double round_to(double v, Dtype dtype) {
  switch (dtype) {
    case Dtype::Float64: return v;
    case Dtype::Float32: return static_cast<float>(v);
    case Dtype::Float16: return static_cast<float>(float16_t(v));
    case Dtype::BFloat16: return static_cast<float>(bfloat16_t(v));
    default: return v;
  }
}

// Uniform in [low, high) of a float dtype, as JAX draws it: the top mantissa bits of the random
// words as a float in [0, 1), scaled in the dtype, kept >= low; then clamped below high, which JAX
// does not do. float16/bfloat16 are drawn in float32 and rounded; rounding is monotone, so the
// float32 clamps to values representable in the target keep the rounded result in range.
Array uniform_unchecked(const Array& key, const Shape& shape, double low, double high, Dtype dtype) {
  Device dev = key.device();
  Dtype c = dtype == Dtype::Float64 ? float64 : float32;
  Array u;
  if (c == float64) {
    // JAX's 64-bit words: the first n 32-bit draws are the high halves, the next n the low ones;
    // the float takes 52 bits: hi << 20 | lo >> 12, each part exact in float64.
    int64_t n = shape_size(shape);
    Array words = random_bits(key, {2, n});
    Array hi = astype(reshape(slice(words, {0, 0}, {1, n}), shape), float64);
    Array lo = astype(right_shift(reshape(slice(words, {1, 0}, {2, n}), shape), scalar_u(12, uint32, dev)), float64);
    u = (hi * scalar(0x1p20, float64, dev) + lo) * scalar(0x1p-52, float64, dev);
  } else {
    // The top 23 bits as the mantissa of a float in [1, 2), minus 1: exactly m * 2^-23.
    Array m = right_shift(random_bits(key, shape), scalar_u(9, uint32, dev));
    u = astype(m, float32) * scalar(0x1p-23, float32, dev);
  }
  double lo_c = round_to(low, dtype), hi_c = round_to(high, dtype);
  if (!std::isfinite(lo_c) || !std::isfinite(hi_c) || !std::isfinite(round_to(hi_c - lo_c, c)))
    throw InvalidArgument(std::string("uniform: the range [") + std::to_string(low) + ", " + std::to_string(high) +
                          ") overflows " + dtype_name(dtype));
  Array x = u * scalar(round_to(hi_c - lo_c, c), c, dev) + scalar(lo_c, c, dev);
  x = minimum(x, scalar(below(hi_c, dtype), c, dev));
  x = maximum(scalar(lo_c, c, dev), x);
  return astype(x, dtype);
}

void check_bounds(double low, double high, const char* op) {
  if (!std::isfinite(low) || !std::isfinite(high))
    throw InvalidArgument(std::string(op) + ": low and high must be finite, got [" + std::to_string(low) + ", " +
                          std::to_string(high) + ")");
  if (!(low < high))
    throw InvalidArgument(std::string(op) + ": low must be below high, got [" + std::to_string(low) + ", " +
                          std::to_string(high) + ")");
}

}  // namespace

Array key(uint64_t seed) {
  // Made without array inputs: on the default device (device.h, rule 1), so every draw from a
  // fresh key runs there too.
  uint32_t words[2] = {static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(seed & 0xFFFFFFFFu)};
  return to_device(Array(words, {2}, uint32), default_device());
}

Array split(const Array& key, int num) {
  check_key(key, "split");
  if (num < 0) throw InvalidArgument("split: num must be non-negative, got " + std::to_string(num));
  // JAX's threefry_split: the bits of shape [num, 2] are the new keys.
  return random_bits(key, {num, 2});
}

std::pair<Array, Array> split(const Array& key) {
  // The rows of split(key, 2), so both spellings give the same keys (one draw, two views).
  Array both = random::split(key, 2);
  return {squeeze(slice(both, {0}, {1}), {0}), squeeze(slice(both, {1}, {2}), {0})};
}

Array bits(const Array& key, const Shape& shape) {
  check_key(key, "bits");
  check_shape(shape, "bits");
  return random_bits(key, shape);
}

Array uniform(const Array& key, const Shape& shape, double low, double high, Dtype dtype) {
  check_key(key, "uniform");
  check_shape(shape, "uniform");
  check_float(dtype, "uniform", "dtype");
  check_bounds(low, high, "uniform");
  return uniform_unchecked(key, shape, low, high, dtype);
}

Array normal(const Array& key, const Shape& shape, double mean, double stddev, Dtype dtype) {
  check_key(key, "normal");
  check_shape(shape, "normal");
  check_float(dtype, "normal", "dtype");
  if (!std::isfinite(mean) || !std::isfinite(stddev) || stddev < 0)
    throw InvalidArgument("normal: mean must be finite and stddev finite and non-negative, got mean " +
                          std::to_string(mean) + ", stddev " + std::to_string(stddev));
  // JAX: sqrt(2) * erfinv(u), u uniform in (-1, 1); halves compute in float32.
  Dtype c = dtype == Dtype::Float64 ? float64 : float32;
  Device dev = key.device();
  double lo = c == float64 ? std::nextafter(-1.0, 0.0) : static_cast<double>(std::nextafter(-1.0f, 0.0f));
  Array u = uniform_unchecked(key, shape, lo, 1.0, c);
  Array z = scalar(std::sqrt(2.0), c, dev) * erfinv(u);
  if (stddev != 1.0) z = z * scalar(stddev, c, dev);
  if (mean != 0.0) z = z + scalar(mean, c, dev);
  return astype(z, dtype);
}

Array bernoulli(const Array& key, const Array& p, const Shape& shape) {
  check_key(key, "bernoulli");
  check_valid(p, "bernoulli");
  check_shape(shape, "bernoulli");
  check_float(p.dtype(), "bernoulli", "p");
  if (!broadcasts_to(p.shape(), shape))
    throw ShapeError("bernoulli: p of " + describe(p) + " does not broadcast to the shape " + shape_to_string(shape));
  return less(uniform_unchecked(key, shape, 0.0, 1.0, p.dtype()), p);
}

Array categorical(const Array& key, const Array& logits, int axis, std::optional<Shape> shape) {
  check_key(key, "categorical");
  check_valid(logits, "categorical");
  check_float(logits.dtype(), "categorical", "logits");
  const Shape& ls = logits.shape();
  int ax = normalize_axis(axis, logits.ndim(), "categorical", ls);
  Shape batch = ls;
  batch.erase(batch.begin() + ax);
  Shape out = shape ? *shape : batch;
  check_shape(out, "categorical");
  if (!broadcasts_to(batch, out))
    throw ShapeError("categorical: the logits' batch shape " + shape_to_string(batch) + " (logits " + describe(logits) +
                     " without axis " + std::to_string(axis) + ") does not broadcast to the shape " +
                     shape_to_string(out));
  // JAX: argmax(logits + gumbel) with the gumbel noise drawn over prefix + logits' shape.
  size_t prefix = out.size() - batch.size();
  Shape noise_shape(out.begin(), out.begin() + static_cast<int64_t>(prefix));
  Shape tail(out.begin() + static_cast<int64_t>(prefix), out.end());
  tail.insert(tail.begin() + ax, ls[ax]);
  noise_shape.insert(noise_shape.end(), tail.begin(), tail.end());
  Dtype c = logits.dtype() == Dtype::Float64 ? float64 : float32;
  double tiny = c == float64 ? std::numeric_limits<double>::min() : std::numeric_limits<float>::min();
  Array u = uniform_unchecked(key, noise_shape, tiny, 1.0, c);
  Array gumbel = -log(-log(u));
  Array scores = gumbel + astype(logits, c);
  return astype(argmax(scores, static_cast<int>(prefix) + ax), int32);
}

Array randint(const Array& key, int64_t low, int64_t high, const Shape& shape, Dtype dtype) {
  check_key(key, "randint");
  check_shape(shape, "randint");
  if (!is_integral(dtype)) throw DtypeError(std::string("randint: dtype must be an integer type, got ") + dtype_name(dtype));
  if (low >= high)
    throw InvalidArgument("randint: low must be below high, got [" + std::to_string(low) + ", " + std::to_string(high) + ")");
  // The bounds of the dtype (as int64; uint64's top exceeds any int64 high).
  int64_t min_v = 0, max_v = 0;
  bool unbounded_top = false;
  switch (dtype) {
    case Dtype::Int8: min_v = INT8_MIN, max_v = INT8_MAX; break;
    case Dtype::Int16: min_v = INT16_MIN, max_v = INT16_MAX; break;
    case Dtype::Int32: min_v = INT32_MIN, max_v = INT32_MAX; break;
    case Dtype::Int64: min_v = INT64_MIN, max_v = INT64_MAX; break;
    case Dtype::UInt8: max_v = UINT8_MAX; break;
    case Dtype::UInt16: max_v = UINT16_MAX; break;
    case Dtype::UInt32: max_v = UINT32_MAX; break;
    case Dtype::UInt64: unbounded_top = true; break;
    case Dtype::Bool:
    case Dtype::Float16:
    case Dtype::BFloat16:
    case Dtype::Float32:
    case Dtype::Float64: break;
  }
  if (low < min_v)
    throw InvalidArgument("randint: low " + std::to_string(low) + " is out of bounds for " + dtype_name(dtype));
  if (!unbounded_top && high - 1 > max_v)
    throw InvalidArgument("randint: high " + std::to_string(high) + " is out of bounds for " + dtype_name(dtype));
  // Two 32-bit words make a 64-bit draw; its remainder by the span has a bias below span / 2^64.
  Device dev = key.device();
  uint64_t span = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  int64_t n = shape_size(shape);
  Array words = random_bits(key, {2, n});
  Array hi = astype(reshape(slice(words, {0, 0}, {1, n}), shape), uint64);
  Array lo = astype(reshape(slice(words, {1, 0}, {2, n}), shape), uint64);
  Array v = bitwise_or(left_shift(hi, scalar_u(32, uint64, dev)), lo);
  Array offset = remainder(v, scalar_u(span, uint64, dev));
  // low + offset in uint64 wraps to the right bits; narrowing to the dtype keeps them.
  return astype(add(offset, scalar_u(static_cast<uint64_t>(low), uint64, dev)), dtype);
}

}  // namespace smelt::random
