// Element-wise ops: unary and binary math, comparisons, where, clip, astype, and the operators.
//
// Dtype rules (NumPy's unless noted):
//  - Binary ops promote both operands with promote_types and broadcast them with Broadcast views,
//    so kernels see one dtype and one shape.
//  - divide and arctan2 on integer/bool operands compute in float32 (as MLX).
//  - Float math (sqrt, exp, log, trig, erf, sigmoid, reciprocal, ...) on integer/bool inputs
//    computes in float32.
//  - floor/ceil/round of integers and bool return the input; so do abs and relu of bool and of
//    unsigned integers.
//  - negative, sign and square of bool raise DtypeError (NumPy raises for negative and silently
//    computes sign and square in int8; refusing is clearer). subtract of bools raises as NumPy.
//  - floor_divide, remainder, fmod, power and the shifts of two bools compute in int8 (NumPy).
//  - add / multiply of bools are logical or / and (NumPy).
//  - Bitwise ops and shifts on floats raise DtypeError.
//  - Comparisons, logical ops and isnan/isinf/isfinite give bool.
#include <algorithm>
#include <limits>

#include "src/ops/op_utils.h"

namespace smelt {

namespace {

/// The shape all `arrays` broadcast to; ShapeError naming `op` and every operand otherwise.
Shape broadcast_all(const std::vector<Array>& arrays, const char* op) {
  Shape out;
  for (const auto& a : arrays) {
    const Shape& s = a.shape();
    size_t n = std::max(out.size(), s.size());
    Shape next(n);
    for (size_t i = 0; i < n; ++i) {
      int64_t da = i < n - out.size() ? 1 : out[i - (n - out.size())];
      int64_t db = i < n - s.size() ? 1 : s[i - (n - s.size())];
      if (da != db && da != 1 && db != 1) {
        std::string list;
        for (size_t k = 0; k < arrays.size(); ++k) list += (k ? ", " : "") + describe(arrays[k]);
        throw ShapeError(std::string(op) + ": shapes cannot be broadcast together (" + list + ")");
      }
      next[i] = da == 1 ? db : da;
    }
    out = std::move(next);
  }
  return out;
}

/// `a` converted to `dtype`, moved to `device` and broadcast to `shape` (views, no copies).
Array prepare(const Array& a, Dtype dtype, Device device, const Shape& shape) {
  return broadcast_to(to_device(astype(a, dtype), device), shape);
}

Array unary_node(UnaryOp op, const Array& a, Dtype out_dtype) {
  return make_array(a.shape(), out_dtype, a.device(), make_prim(PrimKind::Unary, UnaryParams{op}), {a});
}

/// Float math: integer and bool inputs compute in float32.
Array float_unary(UnaryOp op, const Array& a, const char* name) {
  check_valid(a, name);
  Array x = is_floating(a.dtype()) ? a : astype(a, float32);
  return unary_node(op, x, x.dtype());
}

/// Negation-like ops, which have no meaning for bool.
Array signed_unary(UnaryOp op, const Array& a, const char* name, const char* hint) {
  check_valid(a, name);
  if (a.dtype() == bool_)
    throw DtypeError(std::string(name) + ": not defined for bool inputs (" + describe(a) + ")" + hint);
  return unary_node(op, a, a.dtype());
}

Array bool_unary(UnaryOp op, const Array& a, const char* name) {
  check_valid(a, name);
  return unary_node(op, a, bool_);
}

std::string operands(const Array& a, const Array& b) { return describe(a) + " and " + describe(b); }

/// A Binary node after the op's dtype rule, promotion, device and broadcasting.
Array binary_op(BinaryOp op, const Array& a, const Array& b, const char* name) {
  check_valid(a, name);
  check_valid(b, name);
  Device device = common_device({a, b}, name);
  Shape shape = broadcast_all({a, b}, name);
  Dtype t = promote_types(a.dtype(), b.dtype());
  Dtype out = t;
  switch (op) {
    case BinaryOp::Add:
    case BinaryOp::Multiply:
    case BinaryOp::Maximum:
    case BinaryOp::Minimum:
      break;
    case BinaryOp::Subtract:
      if (t == bool_)
        throw DtypeError(std::string(name) + ": not defined for bool inputs (" + operands(a, b) +
                         "); use logical_xor or bitwise_xor");
      break;
    case BinaryOp::Divide:
    case BinaryOp::Atan2:
      // Integer and bool operands (int64 with uint64 included) compute in float32.
      if (!is_floating(a.dtype()) && !is_floating(b.dtype())) t = out = float32;
      break;
    case BinaryOp::FloorDivide:
    case BinaryOp::Remainder:
    case BinaryOp::Fmod:
    case BinaryOp::Power:
      if (t == bool_) t = out = int8;
      break;
    case BinaryOp::Equal:
    case BinaryOp::NotEqual:
    case BinaryOp::Less:
    case BinaryOp::LessEqual:
    case BinaryOp::Greater:
    case BinaryOp::GreaterEqual:
    case BinaryOp::LogicalAnd:
    case BinaryOp::LogicalOr:
    case BinaryOp::LogicalXor:
      out = bool_;
      break;
    case BinaryOp::BitwiseAnd:
    case BinaryOp::BitwiseOr:
    case BinaryOp::BitwiseXor:
      if (is_floating(t))
        throw DtypeError(std::string(name) + ": needs integer or bool inputs, got " + operands(a, b));
      break;
    case BinaryOp::LeftShift:
    case BinaryOp::RightShift:
      if (is_floating(t))
        throw DtypeError(std::string(name) + ": needs integer inputs, got " + operands(a, b));
      if (t == bool_) t = out = int8;
      break;
  }
  Array x = prepare(a, t, device, shape);
  Array y = prepare(b, t, device, shape);
  return make_array(std::move(shape), out, device, make_prim(PrimKind::Binary, BinaryParams{op}), {x, y});
}

/// A 0-d constant on the host; ops combine it with arrays of any device.
Array scalar_constant(const Scalar& value, Dtype dtype) { return full_value(Shape{}, value, dtype, Device::cpu()); }

}  // namespace

// ---- Unary ------------------------------------------------------------------------------------

Array abs(const Array& a) {
  check_valid(a, "abs");
  if (a.dtype() == bool_ || is_unsigned_integral(a.dtype())) return a;
  return unary_node(UnaryOp::Abs, a, a.dtype());
}
Array negative(const Array& a) { return signed_unary(UnaryOp::Negative, a, "negative", "; use logical_not"); }
Array sign(const Array& a) { return signed_unary(UnaryOp::Sign, a, "sign", ""); }
Array square(const Array& a) { return signed_unary(UnaryOp::Square, a, "square", "; use the array itself"); }
Array reciprocal(const Array& a) { return float_unary(UnaryOp::Reciprocal, a, "reciprocal"); }
Array sqrt(const Array& a) { return float_unary(UnaryOp::Sqrt, a, "sqrt"); }
Array rsqrt(const Array& a) { return float_unary(UnaryOp::Rsqrt, a, "rsqrt"); }
Array exp(const Array& a) { return float_unary(UnaryOp::Exp, a, "exp"); }
Array exp2(const Array& a) { return float_unary(UnaryOp::Exp2, a, "exp2"); }
Array expm1(const Array& a) { return float_unary(UnaryOp::Expm1, a, "expm1"); }
Array log(const Array& a) { return float_unary(UnaryOp::Log, a, "log"); }
Array log2(const Array& a) { return float_unary(UnaryOp::Log2, a, "log2"); }
Array log10(const Array& a) { return float_unary(UnaryOp::Log10, a, "log10"); }
Array log1p(const Array& a) { return float_unary(UnaryOp::Log1p, a, "log1p"); }
Array sin(const Array& a) { return float_unary(UnaryOp::Sin, a, "sin"); }
Array cos(const Array& a) { return float_unary(UnaryOp::Cos, a, "cos"); }
Array tan(const Array& a) { return float_unary(UnaryOp::Tan, a, "tan"); }
Array arcsin(const Array& a) { return float_unary(UnaryOp::Asin, a, "arcsin"); }
Array arccos(const Array& a) { return float_unary(UnaryOp::Acos, a, "arccos"); }
Array arctan(const Array& a) { return float_unary(UnaryOp::Atan, a, "arctan"); }
Array sinh(const Array& a) { return float_unary(UnaryOp::Sinh, a, "sinh"); }
Array cosh(const Array& a) { return float_unary(UnaryOp::Cosh, a, "cosh"); }
Array tanh(const Array& a) { return float_unary(UnaryOp::Tanh, a, "tanh"); }
Array arcsinh(const Array& a) { return float_unary(UnaryOp::Asinh, a, "arcsinh"); }
Array arccosh(const Array& a) { return float_unary(UnaryOp::Acosh, a, "arccosh"); }
Array arctanh(const Array& a) { return float_unary(UnaryOp::Atanh, a, "arctanh"); }
Array erf(const Array& a) { return float_unary(UnaryOp::Erf, a, "erf"); }
Array erfinv(const Array& a) { return float_unary(UnaryOp::ErfInv, a, "erfinv"); }
Array sigmoid(const Array& a) { return float_unary(UnaryOp::Sigmoid, a, "sigmoid"); }

Array relu(const Array& a) {
  check_valid(a, "relu");
  if (a.dtype() == bool_ || is_unsigned_integral(a.dtype())) return a;
  return unary_node(UnaryOp::Relu, a, a.dtype());
}

namespace {

/// floor/ceil/round: integers and bool are already integral.
Array rounding_unary(UnaryOp op, const Array& a, const char* name) {
  check_valid(a, name);
  if (!is_floating(a.dtype())) return a;
  return unary_node(op, a, a.dtype());
}

}  // namespace

Array floor(const Array& a) { return rounding_unary(UnaryOp::Floor, a, "floor"); }
Array ceil(const Array& a) { return rounding_unary(UnaryOp::Ceil, a, "ceil"); }
Array round(const Array& a) { return rounding_unary(UnaryOp::Round, a, "round"); }
Array isnan(const Array& a) { return bool_unary(UnaryOp::IsNan, a, "isnan"); }
Array isinf(const Array& a) { return bool_unary(UnaryOp::IsInf, a, "isinf"); }
Array isfinite(const Array& a) { return bool_unary(UnaryOp::IsFinite, a, "isfinite"); }
Array logical_not(const Array& a) { return bool_unary(UnaryOp::LogicalNot, a, "logical_not"); }

Array bitwise_not(const Array& a) {
  check_valid(a, "bitwise_not");
  if (is_floating(a.dtype()))
    throw DtypeError("bitwise_not: needs an integer or bool input, got " + describe(a));
  return unary_node(UnaryOp::BitwiseNot, a, a.dtype());
}

// ---- Binary -----------------------------------------------------------------------------------

Array add(const Array& a, const Array& b) { return binary_op(BinaryOp::Add, a, b, "add"); }
Array subtract(const Array& a, const Array& b) { return binary_op(BinaryOp::Subtract, a, b, "subtract"); }
Array multiply(const Array& a, const Array& b) { return binary_op(BinaryOp::Multiply, a, b, "multiply"); }
Array divide(const Array& a, const Array& b) { return binary_op(BinaryOp::Divide, a, b, "divide"); }
Array floor_divide(const Array& a, const Array& b) { return binary_op(BinaryOp::FloorDivide, a, b, "floor_divide"); }
Array remainder(const Array& a, const Array& b) { return binary_op(BinaryOp::Remainder, a, b, "remainder"); }
Array fmod(const Array& a, const Array& b) { return binary_op(BinaryOp::Fmod, a, b, "fmod"); }
Array power(const Array& a, const Array& b) { return binary_op(BinaryOp::Power, a, b, "power"); }
Array maximum(const Array& a, const Array& b) { return binary_op(BinaryOp::Maximum, a, b, "maximum"); }
Array minimum(const Array& a, const Array& b) { return binary_op(BinaryOp::Minimum, a, b, "minimum"); }
Array arctan2(const Array& a, const Array& b) { return binary_op(BinaryOp::Atan2, a, b, "arctan2"); }
Array equal(const Array& a, const Array& b) { return binary_op(BinaryOp::Equal, a, b, "equal"); }
Array not_equal(const Array& a, const Array& b) { return binary_op(BinaryOp::NotEqual, a, b, "not_equal"); }
Array less(const Array& a, const Array& b) { return binary_op(BinaryOp::Less, a, b, "less"); }
Array less_equal(const Array& a, const Array& b) { return binary_op(BinaryOp::LessEqual, a, b, "less_equal"); }
Array greater(const Array& a, const Array& b) { return binary_op(BinaryOp::Greater, a, b, "greater"); }
Array greater_equal(const Array& a, const Array& b) {
  return binary_op(BinaryOp::GreaterEqual, a, b, "greater_equal");
}
Array logical_and(const Array& a, const Array& b) { return binary_op(BinaryOp::LogicalAnd, a, b, "logical_and"); }
Array logical_or(const Array& a, const Array& b) { return binary_op(BinaryOp::LogicalOr, a, b, "logical_or"); }
Array logical_xor(const Array& a, const Array& b) { return binary_op(BinaryOp::LogicalXor, a, b, "logical_xor"); }
Array bitwise_and(const Array& a, const Array& b) { return binary_op(BinaryOp::BitwiseAnd, a, b, "bitwise_and"); }
Array bitwise_or(const Array& a, const Array& b) { return binary_op(BinaryOp::BitwiseOr, a, b, "bitwise_or"); }
Array bitwise_xor(const Array& a, const Array& b) { return binary_op(BinaryOp::BitwiseXor, a, b, "bitwise_xor"); }
Array left_shift(const Array& a, const Array& b) { return binary_op(BinaryOp::LeftShift, a, b, "left_shift"); }
Array right_shift(const Array& a, const Array& b) { return binary_op(BinaryOp::RightShift, a, b, "right_shift"); }

// ---- Selection and clamping -------------------------------------------------------------------

Array where(const Array& condition, const Array& x, const Array& y) {
  check_valid(condition, "where");
  check_valid(x, "where");
  check_valid(y, "where");
  Device device = common_device({condition, x, y}, "where");
  Shape shape = broadcast_all({condition, x, y}, "where");
  Dtype t = promote_types(x.dtype(), y.dtype());
  Array c = prepare(condition, bool_, device, shape);
  Array xs = prepare(x, t, device, shape);
  Array ys = prepare(y, t, device, shape);
  return make_array(std::move(shape), t, device, make_prim(PrimKind::Select, NoParams{}), {c, xs, ys});
}

Array clip(const Array& a, const std::optional<Array>& lo, const std::optional<Array>& hi) {
  check_valid(a, "clip");
  if (!lo && !hi) throw InvalidArgument("clip: at least one of lo and hi must be given (a is " + describe(a) + ")");
  std::vector<Array> all{a};
  if (lo) all.push_back(*lo);
  if (hi) all.push_back(*hi);
  for (const auto& x : all) check_valid(x, "clip");
  common_device(all, "clip");
  broadcast_all(all, "clip");
  Array r = a;
  if (lo) r = binary_op(BinaryOp::Maximum, r, *lo, "clip");
  if (hi) r = binary_op(BinaryOp::Minimum, r, *hi, "clip");
  return r;
}

// ---- Conversion -------------------------------------------------------------------------------

Array astype(const Array& a, Dtype dtype) {
  check_valid(a, "astype");
  if (a.dtype() == dtype) return a;
  return make_array(a.shape(), dtype, a.device(), make_prim(PrimKind::Cast, CastParams{dtype}), {a});
}

Array copy(const Array& a) {
  check_valid(a, "copy");
  return make_array(a.shape(), a.dtype(), a.device(), make_prim(PrimKind::Copy, NoParams{}), {a});
}

// ---- Weak scalars -----------------------------------------------------------------------------

Array weak_scalar(double value, Dtype like) {
  return scalar_constant(Scalar::of_float(value), is_floating(like) ? like : float32);
}

Array weak_scalar(int64_t value, Dtype like) {
  Dtype d = like;
  switch (kind_of(like)) {
    case DtypeKind::Float:
      break;
    case DtypeKind::Bool:
      // int32 as documented; int64 when the value needs it rather than wrapping it.
      d = value >= std::numeric_limits<int32_t>::min() && value <= std::numeric_limits<int32_t>::max() ? int32
                                                                                                        : int64;
      break;
    case DtypeKind::SignedInt:
    case DtypeKind::UnsignedInt: {
      // A value the array's dtype cannot hold is an error, as in NumPy 2 (no silent wrap).
      Scalar s = Scalar::of_int(value);
      if (s.cast(like).cast(int64).i != value || (is_unsigned_integral(like) && value < 0))
        throw InvalidArgument("weak_scalar: the integer " + std::to_string(value) + " is out of range for " +
                              dtype_name(like) +
                              ", the dtype of the array it combines with; convert the array (astype) or "
                              "pass an Array of a wider dtype");
      break;
    }
  }
  return scalar_constant(Scalar::of_int(value), d);
}

Array weak_scalar(bool value, Dtype like) { return scalar_constant(Scalar::of_bool(value), like); }

// ---- Operators --------------------------------------------------------------------------------

Array operator-(const Array& a) { return negative(a); }
Array operator!(const Array& a) { return logical_not(a); }
Array operator~(const Array& a) { return bitwise_not(a); }
Array operator+(const Array& a, const Array& b) { return add(a, b); }
Array operator-(const Array& a, const Array& b) { return subtract(a, b); }
Array operator*(const Array& a, const Array& b) { return multiply(a, b); }
Array operator/(const Array& a, const Array& b) { return divide(a, b); }
Array operator%(const Array& a, const Array& b) { return remainder(a, b); }
Array operator==(const Array& a, const Array& b) { return equal(a, b); }
Array operator!=(const Array& a, const Array& b) { return not_equal(a, b); }
Array operator<(const Array& a, const Array& b) { return less(a, b); }
Array operator<=(const Array& a, const Array& b) { return less_equal(a, b); }
Array operator>(const Array& a, const Array& b) { return greater(a, b); }
Array operator>=(const Array& a, const Array& b) { return greater_equal(a, b); }
Array operator&&(const Array& a, const Array& b) { return logical_and(a, b); }
Array operator||(const Array& a, const Array& b) { return logical_or(a, b); }
Array operator&(const Array& a, const Array& b) { return bitwise_and(a, b); }
Array operator|(const Array& a, const Array& b) { return bitwise_or(a, b); }
Array operator^(const Array& a, const Array& b) { return bitwise_xor(a, b); }
Array operator<<(const Array& a, const Array& b) { return left_shift(a, b); }
Array operator>>(const Array& a, const Array& b) { return right_shift(a, b); }

}  // namespace smelt
