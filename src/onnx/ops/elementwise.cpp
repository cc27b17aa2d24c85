// ONNX element-wise operators (math, comparisons, logic, bitwise, activations) over smelt ops.
#include <cmath>
#include <limits>

#include "src/onnx/ops/op_helpers.h"

namespace smelt::onnx {

namespace {

using E = ElemType;

// ONNX's type sets (the element types an operator's T stands for).
const std::initializer_list<E> kFloats = {E::Float, E::Double, E::Float16, E::BFloat16};
const std::initializer_list<E> kNumeric = {E::Float, E::Double, E::Float16, E::BFloat16, E::Int8, E::Int16,
                                           E::Int32, E::Int64, E::UInt8, E::UInt16, E::UInt32, E::UInt64};
const std::initializer_list<E> kSignedNumeric = {E::Float, E::Double, E::Float16, E::BFloat16,
                                                 E::Int8, E::Int16, E::Int32, E::Int64};
const std::initializer_list<E> kIntegers = {E::Int8, E::Int16, E::Int32, E::Int64,
                                            E::UInt8, E::UInt16, E::UInt32, E::UInt64};
const std::initializer_list<E> kUnsigned = {E::UInt8, E::UInt16, E::UInt32, E::UInt64};

/// An ONNX float unary op: T in the float types, same type out.
template <Array (*F)(const Array&)>
std::vector<Value> float_unary(OpContext& c) {
  c.require_types(0, kFloats);
  const Array& x = c.tensor(0);
  return {tv(keep_dtype(F(x), x.dtype()))};
}

/// A unary op on numbers that keeps the type (Abs, Neg, Sign, ...).
template <Array (*F)(const Array&)>
std::vector<Value> numeric_unary(OpContext& c) {
  c.require_types(0, kNumeric);
  const Array& x = c.tensor(0);
  return {tv(keep_dtype(F(x), x.dtype()))};
}

/// A binary op with one shared type T for both inputs and the output.
template <Array (*F)(const Array&, const Array&)>
std::vector<Value> same_type_binary(OpContext& c) {
  c.require_types(0, kNumeric);
  c.require_same_type(0, 1);
  const Array& a = c.tensor(0);
  return {tv(keep_dtype(F(a, c.tensor(1)), a.dtype()))};
}

/// Equal on string tensors (opset 19), with broadcasting, on the host.
std::vector<Value> string_equal(OpContext& c) {
  const auto& a = c.input(0).string_tensor();
  const auto& b = c.input(1).string_tensor();
  Shape out = broadcast_shapes(a.shape, b.shape);
  // Broadcast through index arrays: positions of each operand, broadcast like the values.
  auto positions = [](const Shape& s) {
    int64_t n = element_count(s, "Equal");
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
    return Array(v, s);
  };
  auto ia = broadcast_to(positions(a.shape), out).to_vector<int64_t>();
  auto ib = broadcast_to(positions(b.shape), out).to_vector<int64_t>();
  std::vector<uint8_t> eq(ia.size());
  for (size_t i = 0; i < ia.size(); ++i)
    eq[i] = a.data[static_cast<size_t>(ia[i])] == b.data[static_cast<size_t>(ib[i])];
  return {tv(Array(eq.data(), out, bool_))};
}

/// A comparison: shared T in, bool out.
template <Array (*F)(const Array&, const Array&)>
std::vector<Value> comparison(OpContext& c) {
  c.require_same_type(0, 1);
  if (F == static_cast<Array (*)(const Array&, const Array&)>(equal) && c.input(0).is_strings()) return string_equal(c);
  return {tv(F(c.tensor(0), c.tensor(1)))};
}

template <Array (*F)(const Array&, const Array&)>
std::vector<Value> logical_binary(OpContext& c) {
  c.require_types(0, {E::Bool});
  c.require_types(1, {E::Bool});
  return {tv(F(c.tensor(0), c.tensor(1)))};
}

template <Array (*F)(const Array&, const Array&)>
std::vector<Value> bitwise_binary(OpContext& c) {
  c.require_types(0, kIntegers);
  c.require_same_type(0, 1);
  return {tv(F(c.tensor(0), c.tensor(1)))};
}

/// Integer division truncating toward zero (C semantics), as ONNX Div defines for integers.
Array trunc_divide(const Array& a, const Array& b) {
  Array q = floor_divide(a, b);
  if (is_unsigned_integral(a.dtype())) return q;
  Array r = fmod(a, b);
  Array zero = zeros({}, a.dtype());
  Array adjust = logical_and(not_equal(r, zero), not_equal(less(a, zero), less(b, zero)));
  return where(adjust, add(q, ones({}, a.dtype())), q);
}

std::vector<Value> op_div(OpContext& c) {
  c.require_types(0, kNumeric);
  c.require_same_type(0, 1);
  const Array& a = c.tensor(0);
  const Array& b = c.tensor(1);
  if (is_integral(a.dtype())) return {tv(trunc_divide(a, b))};
  return {tv(keep_dtype(divide(a, b), a.dtype()))};
}

std::vector<Value> op_mod(OpContext& c) {
  c.require_types(0, kNumeric);
  c.require_same_type(0, 1);
  const Array& a = c.tensor(0);
  const Array& b = c.tensor(1);
  bool use_fmod = c.attr_int("fmod", 0) != 0;
  if (is_floating(a.dtype()) && !use_fmod) c.fail("fmod must be 1 for floating-point inputs");
  return {tv(keep_dtype(use_fmod ? fmod(a, b) : remainder(a, b), a.dtype()))};
}

std::vector<Value> op_pow(OpContext& c) {
  c.require_types(0, kNumeric);
  c.require_types(1, kNumeric);
  const Array& a = c.tensor(0);
  const Array& b = c.tensor(1);
  if (is_integral(a.dtype()) && is_floating(b.dtype())) {
    // int ** float: compute in double, then back to the base's type.
    return {tv(astype(power(astype(a, float64), astype(b, float64)), a.dtype()))};
  }
  if (is_floating(a.dtype()) && a.dtype() != b.dtype()) {
    Dtype wide = a.dtype() == float64 || b.dtype() == float64 ? float64 : float32;
    return {tv(astype(power(astype(a, wide), astype(b, wide)), a.dtype()))};
  }
  if (is_integral(a.dtype()) && a.dtype() != b.dtype()) return {tv(power(a, astype(b, a.dtype())))};
  return {tv(keep_dtype(power(a, b), a.dtype()))};
}

/// Variadic Max / Min / Sum / Mean with broadcasting.
template <Array (*F)(const Array&, const Array&)>
std::vector<Value> variadic(OpContext& c) {
  if (c.num_inputs() == 0) c.fail("needs at least one input");
  c.require_types(0, kNumeric);
  Array acc = c.tensor(0);
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    c.require_same_type(0, i);
    acc = F(acc, c.tensor(i));
  }
  return {tv(keep_dtype(acc, c.tensor(0).dtype()))};
}

std::vector<Value> op_mean(OpContext& c) {
  c.require_types(0, kFloats);
  Array acc = c.tensor(0);
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    c.require_same_type(0, i);
    acc = add(acc, c.tensor(i));
  }
  Dtype dt = c.tensor(0).dtype();
  return {tv(keep_dtype(divide(acc, full({}, Array(static_cast<double>(c.num_inputs())), dt)), dt))};
}

std::vector<Value> op_not(OpContext& c) {
  c.require_types(0, {E::Bool});
  return {tv(logical_not(c.tensor(0)))};
}

std::vector<Value> op_bitwise_not(OpContext& c) {
  c.require_types(0, kIntegers);
  return {tv(bitwise_not(c.tensor(0)))};
}

std::vector<Value> op_bitshift(OpContext& c) {
  c.require_types(0, kUnsigned);
  c.require_same_type(0, 1);
  std::string dir = c.attr_string("direction", "");
  if (dir == "LEFT") return {tv(left_shift(c.tensor(0), c.tensor(1)))};
  if (dir == "RIGHT") return {tv(right_shift(c.tensor(0), c.tensor(1)))};
  c.fail("direction must be \"LEFT\" or \"RIGHT\", got \"" + dir + "\"");
}

std::vector<Value> op_isnan(OpContext& c) {
  c.require_types(0, kFloats);
  return {tv(isnan(c.tensor(0)))};
}

std::vector<Value> op_isinf(OpContext& c) {
  c.require_types(0, kFloats);
  const Array& x = c.tensor(0);
  bool pos = c.attr_int("detect_positive", 1) != 0;
  bool neg = c.attr_int("detect_negative", 1) != 0;
  Array inf = isinf(x);
  Array zero = zeros({}, x.dtype());
  if (pos && neg) return {tv(inf)};
  if (pos) return {tv(logical_and(inf, greater(x, zero)))};
  if (neg) return {tv(logical_and(inf, less(x, zero)))};
  return {tv(zeros(x.shape(), bool_))};
}

std::vector<Value> op_where(OpContext& c) {
  c.require_types(0, {E::Bool});
  c.require_same_type(1, 2);
  return {tv(where(c.tensor(0), c.tensor(1), c.tensor(2)))};
}

std::vector<Value> op_clip_6(OpContext& c) {
  c.require_types(0, kFloats);
  const Array& x = c.tensor(0);
  float lo = c.attr_float("min", -std::numeric_limits<float>::max());
  float hi = c.attr_float("max", std::numeric_limits<float>::max());
  return {tv(keep_dtype(clip(x, full({}, Array(lo), x.dtype()), full({}, Array(hi), x.dtype())), x.dtype()))};
}

std::vector<Value> op_clip_11(OpContext& c) {
  c.require_types(0, kNumeric);
  const Array& x = c.tensor(0);
  std::optional<Array> lo, hi;
  if (c.has(1)) {
    c.require_same_type(0, 1);
    lo = c.tensor(1);
  }
  if (c.has(2)) {
    c.require_same_type(0, 2);
    hi = c.tensor(2);
  }
  if (!lo && !hi) return {tv(x)};
  // ONNX applies min then max: with min > max every element becomes max.
  Array y = x;
  if (lo) y = maximum(y, *lo);
  if (hi) y = minimum(y, *hi);
  return {tv(keep_dtype(y, x.dtype()))};
}

Array scalar_like(double v, const Array& like) { return full({}, Array(v), like.dtype()); }

std::vector<Value> op_leaky_relu(OpContext& c) {
  c.require_types(0, kFloats);
  const Array& x = c.tensor(0);
  Array alpha = scalar_like(c.attr_float("alpha", 0.01f), x);
  return {tv(where(less(x, scalar_like(0, x)), multiply(x, alpha), x))};
}

std::vector<Value> op_prelu(OpContext& c) {
  c.require_types(0, kNumeric);
  c.require_same_type(0, 1);
  const Array& x = c.tensor(0);
  return {tv(keep_dtype(where(less(x, scalar_like(0, x)), multiply(x, c.tensor(1)), x), x.dtype()))};
}

std::vector<Value> op_elu(OpContext& c) {
  c.require_types(0, kFloats);
  const Array& x = c.tensor(0);
  Array alpha = scalar_like(c.attr_float("alpha", 1.0f), x);
  return {tv(where(less(x, scalar_like(0, x)), multiply(alpha, expm1(x)), x))};
}

std::vector<Value> op_selu(OpContext& c) {
  c.require_types(0, kFloats);
  const Array& x = c.tensor(0);
  Array alpha = scalar_like(c.attr_float("alpha", 1.67326319217681884765625f), x);
  Array gamma = scalar_like(c.attr_float("gamma", 1.05070102214813232421875f), x);
  Array neg = subtract(multiply(alpha, exp(x)), alpha);
  return {tv(multiply(gamma, where(greater(x, scalar_like(0, x)), x, neg)))};
}

std::vector<Value> op_celu(OpContext& c) {
  c.require_types(0, kFloats);
  const Array& x = c.tensor(0);
  Array alpha = scalar_like(c.attr_float("alpha", 1.0f), x);
  Array zero = scalar_like(0, x);
  Array neg = multiply(alpha, expm1(divide(x, alpha)));
  return {tv(add(maximum(x, zero), minimum(zero, neg)))};
}

std::vector<Value> op_hard_sigmoid(OpContext& c) {
  c.require_types(0, kFloats);
  const Array& x = c.tensor(0);
  Array y = add(multiply(x, scalar_like(c.attr_float("alpha", 0.2f), x)), scalar_like(c.attr_float("beta", 0.5f), x));
  return {tv(clip(y, scalar_like(0, x), scalar_like(1, x)))};
}

std::vector<Value> op_hard_swish(OpContext& c) {
  c.require_types(0, kFloats);
  const Array& x = c.tensor(0);
  Array y = add(multiply(x, scalar_like(1.0 / 6.0, x)), scalar_like(0.5, x));
  return {tv(multiply(x, clip(y, scalar_like(0, x), scalar_like(1, x))))};
}

std::vector<Value> op_softplus(OpContext& c) {
  c.require_types(0, kFloats);
  const Array& x = c.tensor(0);
  // log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)) without overflow.
  Array y = add(maximum(x, scalar_like(0, x)), log1p(exp(negative(abs(x)))));
  return {tv(keep_dtype(y, x.dtype()))};
}

std::vector<Value> op_softsign(OpContext& c) {
  c.require_types(0, kFloats);
  const Array& x = c.tensor(0);
  return {tv(divide(x, add(abs(x), scalar_like(1, x))))};
}

std::vector<Value> op_thresholded_relu(OpContext& c) {
  c.require_types(0, kFloats);
  const Array& x = c.tensor(0);
  Array alpha = scalar_like(c.attr_float("alpha", 1.0f), x);
  return {tv(where(greater(x, alpha), x, scalar_like(0, x)))};
}

std::vector<Value> op_mish(OpContext& c) {
  c.require_types(0, kFloats);
  const Array& x = c.tensor(0);
  Array sp = add(maximum(x, scalar_like(0, x)), log1p(exp(negative(abs(x)))));
  return {tv(keep_dtype(multiply(x, tanh(sp)), x.dtype()))};
}

std::vector<Value> op_gelu(OpContext& c) {
  c.require_types(0, kFloats);
  const Array& x = c.tensor(0);
  std::string approx = c.attr_string("approximate", "none");
  if (approx != "none" && approx != "tanh") c.fail("approximate must be \"none\" or \"tanh\", got \"" + approx + "\"");
  return {tv(keep_dtype(gelu(x, approx == "tanh"), x.dtype()))};
}

std::vector<Value> op_swish(OpContext& c) {
  c.require_types(0, kFloats);
  const Array& x = c.tensor(0);
  Array alpha = scalar_like(c.attr_float("alpha", 1.0f), x);
  return {tv(keep_dtype(multiply(x, sigmoid(multiply(alpha, x))), x.dtype()))};
}

std::vector<Value> op_shrink(OpContext& c) {
  c.require_types(0, kNumeric);
  const Array& x = c.tensor(0);
  Array lambd = scalar_like(c.attr_float("lambd", 0.5f), x);
  Array bias = scalar_like(c.attr_float("bias", 0.0f), x);
  Array y = where(less(x, negative(lambd)), add(x, bias),
                  where(greater(x, lambd), subtract(x, bias), scalar_like(0, x)));
  return {tv(keep_dtype(y, x.dtype()))};
}

std::vector<Value> op_relu(OpContext& c) {
  c.require_types(0, kSignedNumeric);
  const Array& x = c.tensor(0);
  // smelt's relu: max(x, 0) with NaN kept and +0 for -0 (ONNX's max(0, x) names no zero's sign;
  // maximum(x, 0) kept -0). A relu never gives -0, so the pool_first pass may pool before it.
  return {tv(keep_dtype(relu(x), x.dtype()))};
}

std::vector<Value> op_sign(OpContext& c) {
  c.require_types(0, kNumeric);
  const Array& x = c.tensor(0);
  return {tv(keep_dtype(sign(x), x.dtype()))};
}

std::vector<Value> op_reciprocal(OpContext& c) {
  c.require_types(0, kFloats);
  const Array& x = c.tensor(0);
  return {tv(keep_dtype(divide(scalar_like(1, x), x), x.dtype()))};
}

std::vector<Value> op_identity(OpContext& c) { return {c.input(0)}; }

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  r.add("", "Add", 7, same_type_binary<add>);
  r.add("", "Sub", 7, same_type_binary<subtract>);
  r.add("", "Mul", 7, same_type_binary<multiply>);
  r.add("", "Div", 7, op_div);
  r.add("", "Mod", 10, op_mod);
  r.add("", "Pow", 7, op_pow);
  r.add("", "Max", 6, variadic<maximum>);
  r.add("", "Min", 6, variadic<minimum>);
  r.add("", "Sum", 6, variadic<add>);
  r.add("", "Mean", 6, op_mean);

  r.add("", "Abs", 6, numeric_unary<abs>);
  r.add("", "Neg", 6, numeric_unary<negative>);
  r.add("", "Sign", 9, op_sign);
  r.add("", "Reciprocal", 6, op_reciprocal);
  r.add("", "Sqrt", 6, float_unary<sqrt>);
  r.add("", "Exp", 6, float_unary<exp>);
  r.add("", "Log", 6, float_unary<log>);
  r.add("", "Sin", 7, float_unary<sin>);
  r.add("", "Cos", 7, float_unary<cos>);
  r.add("", "Tan", 7, float_unary<tan>);
  r.add("", "Asin", 7, float_unary<arcsin>);
  r.add("", "Acos", 7, float_unary<arccos>);
  r.add("", "Atan", 7, float_unary<arctan>);
  r.add("", "Sinh", 9, float_unary<sinh>);
  r.add("", "Cosh", 9, float_unary<cosh>);
  r.add("", "Tanh", 6, float_unary<tanh>);
  r.add("", "Asinh", 9, float_unary<arcsinh>);
  r.add("", "Acosh", 9, float_unary<arccosh>);
  r.add("", "Atanh", 9, float_unary<arctanh>);
  r.add("", "Erf", 9, float_unary<erf>);
  r.add("", "Floor", 6, float_unary<floor>);
  r.add("", "Ceil", 6, float_unary<ceil>);
  r.add("", "Round", 11, float_unary<round>);
  r.add("", "Sigmoid", 6, float_unary<sigmoid>);
  r.add("", "Relu", 6, op_relu);
  r.add("", "IsNaN", 9, op_isnan);
  r.add("", "IsInf", 10, op_isinf);

  r.add("", "Equal", 7, comparison<equal>);
  r.add("", "Less", 7, comparison<less>);
  r.add("", "LessOrEqual", 12, comparison<less_equal>);
  r.add("", "Greater", 7, comparison<greater>);
  r.add("", "GreaterOrEqual", 12, comparison<greater_equal>);
  r.add("", "And", 7, logical_binary<logical_and>);
  r.add("", "Or", 7, logical_binary<logical_or>);
  r.add("", "Xor", 7, logical_binary<logical_xor>);
  r.add("", "Not", 1, op_not);
  r.add("", "BitwiseAnd", 18, bitwise_binary<bitwise_and>);
  r.add("", "BitwiseOr", 18, bitwise_binary<bitwise_or>);
  r.add("", "BitwiseXor", 18, bitwise_binary<bitwise_xor>);
  r.add("", "BitwiseNot", 18, op_bitwise_not);
  r.add("", "BitShift", 11, op_bitshift);
  r.add("", "Where", 9, op_where);
  r.add("", "Clip", 6, op_clip_6);
  r.add("", "Clip", 11, op_clip_11);

  r.add("", "LeakyRelu", 6, op_leaky_relu);
  r.add("", "PRelu", 7, op_prelu);
  r.add("", "Elu", 6, op_elu);
  r.add("", "Selu", 6, op_selu);
  r.add("", "Celu", 12, op_celu);
  r.add("", "HardSigmoid", 6, op_hard_sigmoid);
  r.add("", "HardSwish", 14, op_hard_swish);
  r.add("", "Softplus", 1, op_softplus);
  r.add("", "Softsign", 1, op_softsign);
  r.add("", "ThresholdedRelu", 10, op_thresholded_relu);
  r.add("", "Mish", 18, op_mish);
  r.add("", "Gelu", 20, op_gelu);
  r.add("", "Swish", 24, op_swish);
  r.add("", "Shrink", 9, op_shrink);
  r.add("", "Identity", 1, op_identity);
}

}  // namespace smelt::onnx
