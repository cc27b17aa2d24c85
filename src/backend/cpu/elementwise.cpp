// CPU kernels for element-wise primitives: Unary, Binary, Select and Cast.
//
// The ops have already broadcast the inputs (Broadcast views, zero strides) and given the
// operands of a Binary one dtype, so each kernel sees equal shapes. Dispatch on the dtype and the
// operator happens once per call, outside the loops; each operator is instantiated only for the
// dtypes the ops can hand it, which keeps this file's compile time in check.
#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <utility>

#include "smelt/errors.h"
#include "src/backend/cpu/elementwise_math.h"
#include "src/backend/cpu/kernel_utils.h"
#include "src/backend/cpu/kernels.h"
#include "src/backend/cpu/scalar_math.h"
#include "src/core/dispatch.h"

namespace smelt::cpu {

namespace {

bool all_zero(const Strides& s) {
  for (auto v : s)
    if (v != 0) return false;
  return true;
}

/// How an operand is read on the fast path: row-contiguous (stride 1) or one value (stride 0).
/// Returns -1 when neither holds and the strided path must run.
int64_t flat_stride(const detail::Node& n) {
  if (is_row_contiguous(n.shape, n.strides)) return 1;
  if (all_zero(n.strides)) return 0;
  return -1;
}

// The loops are split in two. A typed *run* (one per operator and dtype) does one stretch of
// elements with given strides and is what the compiler vectorizes. An untyped *driver* (one in
// total) splits the work over threads and walks strided layouts, calling the run through a
// function pointer once per chunk or row. Instantiating the drivers per operator and dtype would
// multiply this file's compile time for no speed. (UnaryRun and BinaryRun: elementwise_math.h.)

template <class In, class Out, class F>
void unary_run(const void* sv, int64_t st, void* dv, int64_t n) {
  const In* s = static_cast<const In*>(sv);
  Out* d = static_cast<Out*>(dv);
  const F f{};
  if constexpr (scalar::half_v<In> || scalar::half_v<Out>) {
    // 16-bit floats convert element by element (no vector loop to gain): one generic loop.
    for (int64_t i = 0; i < n; ++i) d[i] = f(s[i * st]);
    return;
  }
  if (st == 1) {
    for (int64_t i = 0; i < n; ++i) d[i] = f(s[i]);
  } else if (st == 0) {
    const Out v = f(s[0]);
    for (int64_t i = 0; i < n; ++i) d[i] = v;
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = f(s[i * st]);
  }
}

template <class T, class Out, class F>
void binary_run(const void* xv, int64_t xs, const void* yv, int64_t ys, void* dv, int64_t n) {
  const T* x = static_cast<const T*>(xv);
  const T* y = static_cast<const T*>(yv);
  Out* d = static_cast<Out*>(dv);
  const F f{};
  if constexpr (scalar::half_v<T>) {
    for (int64_t i = 0; i < n; ++i) d[i] = f(x[i * xs], y[i * ys]);
    return;
  }
  if (xs == 1 && ys == 1) {
    for (int64_t i = 0; i < n; ++i) d[i] = f(x[i], y[i]);
  } else if (xs == 1 && ys == 0) {  // a broadcast scalar on the right
    const T v = *y;
    for (int64_t i = 0; i < n; ++i) d[i] = f(x[i], v);
  } else if (xs == 0 && ys == 1) {  // on the left
    const T u = *x;
    for (int64_t i = 0; i < n; ++i) d[i] = f(u, y[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = f(x[i * xs], y[i * ys]);
  }
}

const char* bytes_of(const Array& a) { return static_cast<const char*>(a.node().data_ptr()); }
char* bytes_of(Array& a) { return static_cast<char*>(a.node().data_ptr()); }

/// out = run(in) over any strides of `in`; `out` is row-major.
void unary_drive(const Array& in, Array& out, UnaryRun run) {
  const auto& n = in.node();
  const char* src = bytes_of(in);
  char* dst = bytes_of(out);
  const int64_t is = static_cast<int64_t>(n.itemsize()), os = static_cast<int64_t>(out.itemsize());
  const int64_t flat = flat_stride(n);
  if (flat >= 0) {  // contiguous, or one value broadcast
    parallel_for(n.size(), kGrain, [&](int64_t b, int64_t e) { run(src + b * flat * is, flat, dst + b * os, e - b); });
    return;
  }
  Strides out_strides = row_major_strides(n.shape);
  parallel_strided<2>(n.shape, {&n.strides, &out_strides},
                      [&](const std::array<int64_t, 2>& off, int64_t len, const std::array<int64_t, 2>& st) {
                        run(src + off[0] * is, st[0], dst + off[1] * os, len);
                      });
}

/// The length of the pattern a broadcast operand repeats: its elements are a row-major block of
/// trailing dimensions (the period's elements, contiguous) broadcast over the leading ones (a
/// per-channel vector of a channels-last activation: [.., C] over [N, H, W]); 0 when it is not so.
int64_t period_of(const detail::Node& n) {
  int64_t period = 1;
  int d = static_cast<int>(n.shape.size()) - 1;
  for (; d >= 0; --d) {
    if (n.shape[static_cast<size_t>(d)] == 1) continue;
    if (n.strides[static_cast<size_t>(d)] != period) break;
    period *= n.shape[static_cast<size_t>(d)];
  }
  for (; d >= 0; --d)
    if (n.shape[static_cast<size_t>(d)] != 1 && n.strides[static_cast<size_t>(d)] != 0) return 0;
  return period;
}

/// Elements a run of binary_drive's periodic path covers at most: the repeated operand is copied
/// that far once per call, so that each kernel call runs that long instead of one period.
constexpr int64_t kPeriodicRun = 256;

/// out = run(a, b) over any strides of equal-shaped `a` and `b`; `out` is row-major.
void binary_drive(const Array& a, const Array& b, Array& out, BinaryRun run) {
  const auto& na = a.node();
  const auto& nb = b.node();
  const char* x = bytes_of(a);
  const char* y = bytes_of(b);
  char* d = bytes_of(out);
  const int64_t is = static_cast<int64_t>(na.itemsize()), os = static_cast<int64_t>(out.itemsize());
  const int64_t xs = flat_stride(na), ys = flat_stride(nb);
  if (xs >= 0 && ys >= 0) {  // contiguous, or one operand a broadcast scalar
    parallel_for(out.size(), kGrain, [&](int64_t lo, int64_t hi) {
      run(x + lo * xs * is, xs, y + lo * ys * is, ys, d + lo * os, hi - lo);
    });
    return;
  }
  // One operand contiguous, the other a short repeated pattern (a per-channel scale of a
  // channels-last activation with 8 channels): strided runs would be one period long, a kernel
  // call per 8 elements (MobileNetV3's squeeze-excitation product of 32 x 32 x 8: 8.5 us); the
  // pattern is repeated into a buffer once and each call runs kPeriodicRun elements. The same
  // operation on the same elements: the same bits.
  if (xs == 1 || ys == 1) {
    const int64_t period = xs == 1 ? period_of(nb) : period_of(na);
    if (period > 1 && period <= kPeriodicRun / 4 && out.size() % period == 0) {
      const int64_t reps = kPeriodicRun / period;
      const char* pattern = xs == 1 ? y : x;
      alignas(64) char tiled[kPeriodicRun * sizeof(double)];  // the widest element of a binary op's operands
      SMELT_ASSERT(is <= static_cast<int64_t>(sizeof(double)), "binary: operand element too wide");
      for (int64_t r = 0; r < reps; ++r) std::memcpy(tiled + r * period * is, pattern, static_cast<size_t>(period * is));
      const int64_t periods = out.size() / period;
      parallel_for(periods, std::max<int64_t>(1, kGrain / period), [&](int64_t lo, int64_t hi) {
        for (int64_t p = lo; p < hi; p += reps) {
          const int64_t at = p * period, len = std::min(reps, hi - p) * period;
          if (xs == 1)
            run(x + at * is, 1, tiled, 1, d + at * os, len);
          else
            run(tiled, 1, y + at * is, 1, d + at * os, len);
        }
      });
      return;
    }
  }
  Strides out_strides = row_major_strides(na.shape);
  parallel_strided<3>(na.shape, {&na.strides, &nb.strides, &out_strides},
                      [&](const std::array<int64_t, 3>& off, int64_t len, const std::array<int64_t, 3>& st) {
                        run(x + off[0] * is, st[0], y + off[1] * is, st[1], d + off[2] * os, len);
                      });
}

template <class In, class Out, class F>
void unary_loop(const Array& in, Array& out, F) {
  unary_drive(in, out, &unary_run<In, Out, F>);
}

template <class T, class Out, class F>
void binary_loop(const Array& a, const Array& b, Array& out, F) {
  binary_drive(a, b, out, &binary_run<T, Out, F>);
}

// ---- Float math with per-ISA kernels ----------------------------------------------------------

/// The per-ISA kernel of a float unary op (elementwise_math.h), or -1 for an op without one.
int math_fn(UnaryOp op) {
  switch (op) {
    case UnaryOp::Sqrt: return static_cast<int>(MathFn::Sqrt);
    case UnaryOp::Rsqrt: return static_cast<int>(MathFn::Rsqrt);
    case UnaryOp::Exp: return static_cast<int>(MathFn::Exp);
    case UnaryOp::Exp2: return static_cast<int>(MathFn::Exp2);
    case UnaryOp::Expm1: return static_cast<int>(MathFn::Expm1);
    case UnaryOp::Log: return static_cast<int>(MathFn::Log);
    case UnaryOp::Log2: return static_cast<int>(MathFn::Log2);
    case UnaryOp::Log10: return static_cast<int>(MathFn::Log10);
    case UnaryOp::Log1p: return static_cast<int>(MathFn::Log1p);
    case UnaryOp::Sin: return static_cast<int>(MathFn::Sin);
    case UnaryOp::Cos: return static_cast<int>(MathFn::Cos);
    case UnaryOp::Tan: return static_cast<int>(MathFn::Tan);
    case UnaryOp::Asin: return static_cast<int>(MathFn::Asin);
    case UnaryOp::Acos: return static_cast<int>(MathFn::Acos);
    case UnaryOp::Atan: return static_cast<int>(MathFn::Atan);
    case UnaryOp::Sinh: return static_cast<int>(MathFn::Sinh);
    case UnaryOp::Cosh: return static_cast<int>(MathFn::Cosh);
    case UnaryOp::Tanh: return static_cast<int>(MathFn::Tanh);
    case UnaryOp::Erf: return static_cast<int>(MathFn::Erf);
    case UnaryOp::Sigmoid: return static_cast<int>(MathFn::Sigmoid);
    case UnaryOp::Abs:
    case UnaryOp::Negative:
    case UnaryOp::Sign:
    case UnaryOp::Square:
    case UnaryOp::Reciprocal:
    case UnaryOp::Asinh:
    case UnaryOp::Acosh:
    case UnaryOp::Atanh:
    case UnaryOp::ErfInv:
    case UnaryOp::Relu:
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
    case UnaryOp::Round:
    case UnaryOp::IsNan:
    case UnaryOp::IsInf:
    case UnaryOp::IsFinite:
    case UnaryOp::LogicalNot:
    case UnaryOp::BitwiseNot:
      return -1;
  }
  return -1;
}

/// A 16-bit float math run: widen a block to float32, run the float32 kernel, round back. The
/// same as the scalar function, which also computes in float32 and rounds once.
template <class T, int F>
void half_math_run(const void* sv, int64_t st, void* dv, int64_t n) {
  const T* s = static_cast<const T*>(sv);
  T* d = static_cast<T*>(dv);
  const UnaryRun run = math_kernels().unary[F];
  constexpr int64_t kBlock = 512;
  float in[kBlock], res[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = n - b < kBlock ? n - b : kBlock;
    for (int64_t j = 0; j < m; ++j) in[j] = scalar::up(s[(b + j) * st]);
    run(in, 1, res, m);
    for (int64_t j = 0; j < m; ++j) d[b + j] = scalar::down<T>(res[j]);
  }
}

template <class T, size_t... I>
constexpr std::array<UnaryRun, sizeof...(I)> half_math_runs(std::index_sequence<I...>) {
  return {&half_math_run<T, static_cast<int>(I)>...};
}

/// Runs `op` through the per-ISA float math kernels when it has one; returns whether it did.
template <class T>
bool unary_math(UnaryOp op, const Array& in, Array& out) {
  if constexpr (std::is_same_v<T, float> || scalar::half_v<T>) {
    const int f = math_fn(op);
    if (f < 0) return false;
    if constexpr (std::is_same_v<T, float>) {
      unary_drive(in, out, math_kernels().unary[f]);
    } else {
      static constexpr auto runs =
          half_math_runs<T>(std::make_index_sequence<static_cast<size_t>(MathFn::Count)>());
      unary_drive(in, out, runs[f]);
    }
    return true;
  }
  return false;
}

// ---- Unary ------------------------------------------------------------------------------------

[[noreturn]] void no_kernel(const std::string& what, Dtype dtype) {
  throw DtypeError(what + ": no CPU kernel for dtype " + dtype_name(dtype));
}

template <class T>
void unary_typed(UnaryOp op, const Array& in, Array& out) {
  constexpr bool kFloat = scalar::float_v<T>;
  constexpr bool kInt = scalar::int_v<T>;
  constexpr bool kBool = scalar::bool_v<T>;
  if (unary_math<T>(op, in, out)) return;
  if constexpr (std::is_same_v<T, float>) {
    if (op == UnaryOp::Relu) {
      unary_drive(in, out, math_kernels().relu);
      return;
    }
  }
  switch (op) {
#define SMELT_UNARY_CASE(name, fn, accepted, Out)                                 \
  case UnaryOp::name:                                                            \
    if constexpr (accepted) {                                                    \
      unary_loop<T, Out>(in, out, [](T v) -> Out { return scalar::fn<T>(v); }); \
      return;                                                                    \
    }                                                                            \
    break;
    SMELT_UNARY_CASE(Abs, abs, kFloat || kInt, T)
    SMELT_UNARY_CASE(Negative, negative, kFloat || kInt, T)
    SMELT_UNARY_CASE(Sign, sign, kFloat || kInt, T)
    SMELT_UNARY_CASE(Square, square, kFloat || kInt, T)
    SMELT_UNARY_CASE(Reciprocal, reciprocal, kFloat, T)
    SMELT_UNARY_CASE(Sqrt, sqrt, kFloat, T)
    SMELT_UNARY_CASE(Rsqrt, rsqrt, kFloat, T)
    SMELT_UNARY_CASE(Exp, exp, kFloat, T)
    SMELT_UNARY_CASE(Exp2, exp2, kFloat, T)
    SMELT_UNARY_CASE(Expm1, expm1, kFloat, T)
    SMELT_UNARY_CASE(Log, log, kFloat, T)
    SMELT_UNARY_CASE(Log2, log2, kFloat, T)
    SMELT_UNARY_CASE(Log10, log10, kFloat, T)
    SMELT_UNARY_CASE(Log1p, log1p, kFloat, T)
    SMELT_UNARY_CASE(Sin, sin, kFloat, T)
    SMELT_UNARY_CASE(Cos, cos, kFloat, T)
    SMELT_UNARY_CASE(Tan, tan, kFloat, T)
    SMELT_UNARY_CASE(Asin, asin, kFloat, T)
    SMELT_UNARY_CASE(Acos, acos, kFloat, T)
    SMELT_UNARY_CASE(Atan, atan, kFloat, T)
    SMELT_UNARY_CASE(Sinh, sinh, kFloat, T)
    SMELT_UNARY_CASE(Cosh, cosh, kFloat, T)
    SMELT_UNARY_CASE(Tanh, tanh, kFloat, T)
    SMELT_UNARY_CASE(Asinh, asinh, kFloat, T)
    SMELT_UNARY_CASE(Acosh, acosh, kFloat, T)
    SMELT_UNARY_CASE(Atanh, atanh, kFloat, T)
    SMELT_UNARY_CASE(Erf, erf, kFloat, T)
    SMELT_UNARY_CASE(ErfInv, erfinv, kFloat, T)
    SMELT_UNARY_CASE(Sigmoid, sigmoid, kFloat, T)
    SMELT_UNARY_CASE(Relu, relu, kFloat || kInt, T)
    SMELT_UNARY_CASE(Floor, floor, kFloat, T)
    SMELT_UNARY_CASE(Ceil, ceil, kFloat, T)
    SMELT_UNARY_CASE(Round, round, kFloat, T)
    SMELT_UNARY_CASE(IsNan, isnan, true, bool)
    SMELT_UNARY_CASE(IsInf, isinf, true, bool)
    SMELT_UNARY_CASE(IsFinite, isfinite, true, bool)
    SMELT_UNARY_CASE(LogicalNot, logical_not, true, bool)
    SMELT_UNARY_CASE(BitwiseNot, bitwise_not, kInt || kBool, T)
#undef SMELT_UNARY_CASE
  }
  no_kernel(std::string("Unary(") + unary_op_name(op) + ")", dtype_of<T>());
}

// ---- Binary -----------------------------------------------------------------------------------

/// The Add of every dtype as a named type, so that add_f32_run calls the same instantiation of
/// binary_run as the Binary Add kernel.
struct AddOp {
  template <class T>
  T operator()(T x, T y) const {
    return scalar::add<T>(x, y);
  }
};

/// The per-ISA float32 kernel of a binary op (elementwise_math.h), or -1 for an op without one.
int arith_fn(BinaryOp op) {
  constexpr std::pair<BinaryOp, ArithFn> kArith[] = {
      {BinaryOp::Add, ArithFn::Add},         {BinaryOp::Subtract, ArithFn::Subtract},
      {BinaryOp::Multiply, ArithFn::Multiply}, {BinaryOp::Divide, ArithFn::Divide},
      {BinaryOp::Maximum, ArithFn::Maximum},   {BinaryOp::Minimum, ArithFn::Minimum}};
  for (const auto& [b, f] : kArith)
    if (b == op) return static_cast<int>(f);
  return -1;
}

template <class T>
void binary_typed(BinaryOp op, const Array& a, const Array& b, Array& out) {
  constexpr bool kFloat = scalar::float_v<T>;
  constexpr bool kInt = scalar::int_v<T>;
  constexpr bool kBool = scalar::bool_v<T>;
  if constexpr (std::is_same_v<T, float>) {
    if (op == BinaryOp::Atan2) {
      binary_drive(a, b, out, math_kernels().atan2);
      return;
    }
    const int f = arith_fn(op);
    if (f >= 0) {
      binary_drive(a, b, out, math_kernels().arith[f]);
      return;
    }
  }
  switch (op) {
    case BinaryOp::Add:
      binary_loop<T, T>(a, b, out, AddOp{});
      return;
#define SMELT_BINARY_CASE(name, fn, accepted, Out)                                          \
  case BinaryOp::name:                                                                     \
    if constexpr (accepted) {                                                              \
      binary_loop<T, Out>(a, b, out, [](T x, T y) -> Out { return scalar::fn<T>(x, y); }); \
      return;                                                                              \
    }                                                                                      \
    break;
    SMELT_BINARY_CASE(Subtract, subtract, kFloat || kInt, T)
    SMELT_BINARY_CASE(Multiply, multiply, true, T)
    SMELT_BINARY_CASE(Divide, divide, kFloat, T)
    SMELT_BINARY_CASE(FloorDivide, floor_divide, kFloat || kInt, T)
    SMELT_BINARY_CASE(Remainder, remainder, kFloat || kInt, T)
    SMELT_BINARY_CASE(Fmod, fmod, kFloat || kInt, T)
    SMELT_BINARY_CASE(Power, power, kFloat || kInt, T)
    SMELT_BINARY_CASE(Maximum, maximum, true, T)
    SMELT_BINARY_CASE(Minimum, minimum, true, T)
    SMELT_BINARY_CASE(Atan2, atan2, kFloat, T)
    SMELT_BINARY_CASE(Equal, equal, true, bool)
    SMELT_BINARY_CASE(NotEqual, not_equal, true, bool)
    SMELT_BINARY_CASE(Less, less, true, bool)
    SMELT_BINARY_CASE(LessEqual, less_equal, true, bool)
    SMELT_BINARY_CASE(Greater, greater, true, bool)
    SMELT_BINARY_CASE(GreaterEqual, greater_equal, true, bool)
    SMELT_BINARY_CASE(LogicalAnd, logical_and, true, bool)
    SMELT_BINARY_CASE(LogicalOr, logical_or, true, bool)
    SMELT_BINARY_CASE(LogicalXor, logical_xor, true, bool)
    SMELT_BINARY_CASE(BitwiseAnd, bitwise_and, kInt || kBool, T)
    SMELT_BINARY_CASE(BitwiseOr, bitwise_or, kInt || kBool, T)
    SMELT_BINARY_CASE(BitwiseXor, bitwise_xor, kInt || kBool, T)
    SMELT_BINARY_CASE(LeftShift, left_shift, kInt, T)
    SMELT_BINARY_CASE(RightShift, right_shift, kInt, T)
#undef SMELT_BINARY_CASE
  }
  no_kernel(std::string("Binary(") + binary_op_name(op) + ")", dtype_of<T>());
}

// ---- Select -----------------------------------------------------------------------------------

/// One run of a select: d[i] = c[i*cs] ? x[i*xs] : y[i*ys], with the common patterns unrolled.
/// Both operands are loaded and combined through scalar::select's mask, which vectorizes; a `?:`
/// compiled to a branch per element that mispredicts on data (4 ns an element).
template <class T>
void select_run(const bool* c, int64_t cs, const T* x, int64_t xs, const T* y, int64_t ys, T* d, int64_t n) {
  using scalar::select;
  if (cs == 1 && xs == 1 && ys == 1) {
    for (int64_t i = 0; i < n; ++i) d[i] = select(c[i], x[i], y[i]);
  } else if (cs == 1 && xs == 1 && ys == 0) {
    const T v = *y;
    for (int64_t i = 0; i < n; ++i) d[i] = select(c[i], x[i], v);
  } else if (cs == 1 && xs == 0 && ys == 1) {
    const T u = *x;
    for (int64_t i = 0; i < n; ++i) d[i] = select(c[i], u, y[i]);
  } else if (cs == 1 && xs == 0 && ys == 0) {
    const T u = *x, v = *y;
    for (int64_t i = 0; i < n; ++i) d[i] = select(c[i], u, v);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = select(c[i * cs], x[i * xs], y[i * ys]);
  }
}

}  // namespace

void eval_Unary(const UnaryParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& in = inputs[0];
  Array& out = outputs[0];
  if (!try_donate(out, in)) alloc_contiguous(out);
  dispatch_all(in.dtype(), [&]<class T>() { unary_typed<T>(p.op, in, out); });
}

void eval_Binary(const BinaryParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& a = inputs[0];
  const Array& b = inputs[1];
  Array& out = outputs[0];
  SMELT_ASSERT(a.dtype() == b.dtype() && a.shape() == b.shape() && a.shape() == out.shape(),
               "Binary: operands must be broadcast and promoted by the op (" + std::string(dtype_name(a.dtype())) +
                   shape_to_string(a.shape()) + ", " + dtype_name(b.dtype()) + shape_to_string(b.shape()) + ")");
  // Same index in, same index out: writing over an operand's buffer is safe.
  if (!try_donate(out, a) && !try_donate(out, b)) alloc_contiguous(out);
  dispatch_all(a.dtype(), [&]<class T>() { binary_typed<T>(p.op, a, b, out); });
}

void eval_Select(const NoParams&, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& c = inputs[0];
  const Array& x = inputs[1];
  const Array& y = inputs[2];
  Array& out = outputs[0];
  SMELT_ASSERT(c.dtype() == Dtype::Bool && x.dtype() == y.dtype() && c.shape() == out.shape() &&
                   x.shape() == out.shape() && y.shape() == out.shape(),
               "Select: operands must be broadcast and promoted by the op");
  if (!try_donate(out, x) && !try_donate(out, y) && !try_donate(out, c)) alloc_contiguous(out);
  const auto &nc = c.node(), &nx = x.node(), &ny = y.node();
  const bool* cp = in_ptr<bool>(c);
  // Selecting moves bits unchanged: dispatch by element size only.
  dispatch_by_size(x.dtype(), [&]<class T>() {
    const T* xp = in_ptr<T>(x);
    const T* yp = in_ptr<T>(y);
    T* d = out_ptr<T>(out);
    const int64_t cs = flat_stride(nc), xs = flat_stride(nx), ys = flat_stride(ny);
    if (cs >= 0 && xs >= 0 && ys >= 0) {
      parallel_for(out.size(), kGrain, [&](int64_t lo, int64_t hi) {
        select_run<T>(cp + lo * cs, cs, xp + lo * xs, xs, yp + lo * ys, ys, d + lo, hi - lo);
      });
      return;
    }
    Strides os = row_major_strides(out.shape());
    parallel_strided<4>(out.shape(), {&nc.strides, &nx.strides, &ny.strides, &os},
                        [&](const std::array<int64_t, 4>& off, int64_t len, const std::array<int64_t, 4>& st) {
                          select_run<T>(cp + off[0], st[0], xp + off[1], st[1], yp + off[2], st[2], d + off[3],
                                        len);
                        });
  });
}

void eval_Cast(const CastParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  const Array& in = inputs[0];
  Array& out = outputs[0];
  if (!try_donate(out, in)) alloc_contiguous(out);
  dispatch_all(in.dtype(), [&]<class From>() {
    dispatch_all(p.to, [&]<class To>() { unary_loop<From, To>(in, out, [](From v) { return convert<To, From>(v); }); });
  });
}

void add_f32_run(const float* x, const float* y, float* d, int64_t n, bool y_first) {
  if (y_first)
    binary_run<float, float, AddOp>(y, 1, x, 1, d, n);
  else
    binary_run<float, float, AddOp>(x, 1, y, 1, d, n);
}

}  // namespace smelt::cpu
