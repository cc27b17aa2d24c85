// The body of the per-ISA float32 math kernels; included once per ISA with SMELT_MATH_ISA set.
//
// Included by elementwise_math_base.cpp and elementwise_math_v3.cpp only. Everything here has
// internal linkage or lives in namespace SMELT_MATH_ISA, so no code compiled for one ISA can be
// linked in place of another's.
#include <cmath>
#include <cstring>

#include "src/backend/cpu/elementwise_math.h"
#include "src/backend/cpu/reduce_eight_rows.h"
#include "src/backend/cpu/vector_math.h"

#ifndef SMELT_MATH_ISA
#error "define SMELT_MATH_ISA before including elementwise_math_impl.h"
#endif

namespace smelt::cpu::SMELT_MATH_ISA {

namespace {

namespace vm = ::SMELT_VMATH_NAMESPACE;

// Elements per block: results go to a stack buffer first and are copied out, so the output may
// alias the input (a donated buffer) while the compiler still sees two distinct arrays, and the
// trigonometric fix-up pass can read the original inputs.
constexpr int64_t kBlock = 512;

// Each functor computes exactly what the scalar_math.h function of the same name computes.
#define SMELT_MATH_FUNCTOR(Name, expr) \
  struct Name {                        \
    float operator()(float x) const { return expr; } \
  };
SMELT_MATH_FUNCTOR(Sqrt, std::sqrt(x))
SMELT_MATH_FUNCTOR(Rsqrt, vm::rsqrt(x))
SMELT_MATH_FUNCTOR(Exp, vm::exp(x))
SMELT_MATH_FUNCTOR(Exp2, vm::exp2(x))
SMELT_MATH_FUNCTOR(Expm1, vm::expm1(x))
SMELT_MATH_FUNCTOR(Log, vm::log(x))
SMELT_MATH_FUNCTOR(Log2, vm::log2(x))
SMELT_MATH_FUNCTOR(Log10, vm::log10(x))
SMELT_MATH_FUNCTOR(Log1p, vm::log1p(x))
SMELT_MATH_FUNCTOR(Asin, vm::asin(x))
SMELT_MATH_FUNCTOR(Acos, vm::acos(x))
SMELT_MATH_FUNCTOR(Atan, vm::atan(x))
SMELT_MATH_FUNCTOR(Sinh, vm::sinh(x))
SMELT_MATH_FUNCTOR(Cosh, vm::cosh(x))
SMELT_MATH_FUNCTOR(Tanh, vm::tanh(x))
SMELT_MATH_FUNCTOR(Erf, vm::erf(x))
SMELT_MATH_FUNCTOR(Sigmoid, vm::sigmoid(x))
// sin, cos, tan: the fast path alone; the run redoes lanes outside it (vm::sin picks per element).
SMELT_MATH_FUNCTOR(SinFast, vm::detail::sin_fast(x))
SMELT_MATH_FUNCTOR(CosFast, vm::detail::cos_fast(x))
SMELT_MATH_FUNCTOR(TanFast, vm::detail::tan_fast(x))
SMELT_MATH_FUNCTOR(SinSlow, vm::detail::sin_slow(x))
SMELT_MATH_FUNCTOR(CosSlow, vm::detail::cos_slow(x))
SMELT_MATH_FUNCTOR(TanSlow, vm::detail::tan_slow(x))
#undef SMELT_MATH_FUNCTOR

template <class F>
void block(const float* s, int64_t st, float* buf, int64_t m) {
  const F f{};
  if (st == 1) {
    for (int64_t j = 0; j < m; ++j) buf[j] = f(s[j]);
  } else {
    for (int64_t j = 0; j < m; ++j) buf[j] = f(s[j * st]);
  }
}

template <class F>
void unary_run(const void* sv, int64_t st, void* dv, int64_t n) {
  const float* s = static_cast<const float*>(sv);
  float* d = static_cast<float*>(dv);
  if (st == 0) {
    const float v = F{}(s[0]);
    for (int64_t i = 0; i < n; ++i) d[i] = v;
    return;
  }
  float buf[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = n - b < kBlock ? n - b : kBlock;
    block<F>(s + b * st, st, buf, m);
    std::memcpy(d + b, buf, static_cast<size_t>(m) * sizeof(float));
  }
}

/// Counts the lanes of a block off the fast path of sin/cos/tan (|x| > 2^18, inf, NaN).
inline int64_t trig_slow_lanes(const float* s, int64_t st, int64_t m) {
  int64_t slow = 0;
  if (st == 1) {
    for (int64_t j = 0; j < m; ++j) slow += !(std::fabs(s[j]) <= vm::detail::kTrigFastMax);
  } else {
    for (int64_t j = 0; j < m; ++j) slow += !(std::fabs(s[j * st]) <= vm::detail::kTrigFastMax);
  }
  return slow;
}

/// The fast path over each block, vectorized; the rare blocks with a slow lane are then fixed
/// element by element. Equal to Slow-or-Fast per element, as vm::sin/cos/tan pick.
template <class Fast, class Slow>
void trig_run(const void* sv, int64_t st, void* dv, int64_t n) {
  const float* s = static_cast<const float*>(sv);
  float* d = static_cast<float*>(dv);
  const Fast fast{};
  const Slow slow{};
  if (st == 0) {
    const float v = vm::detail::trig_fast(s[0]) ? fast(s[0]) : slow(s[0]);
    for (int64_t i = 0; i < n; ++i) d[i] = v;
    return;
  }
  float buf[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = n - b < kBlock ? n - b : kBlock;
    const float* sb = s + b * st;
    block<Fast>(sb, st, buf, m);
    if (trig_slow_lanes(sb, st, m) != 0) {
      for (int64_t j = 0; j < m; ++j)
        if (!vm::detail::trig_fast(sb[j * st])) buf[j] = slow(sb[j * st]);
    }
    std::memcpy(d + b, buf, static_cast<size_t>(m) * sizeof(float));
  }
}

void atan2_run(const void* xv, int64_t xs, const void* yv, int64_t ys, void* dv, int64_t n) {
  const float* x = static_cast<const float*>(xv);
  const float* y = static_cast<const float*>(yv);
  float* d = static_cast<float*>(dv);
  float buf[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = n - b < kBlock ? n - b : kBlock;
    const float* xb = x + b * xs;
    const float* yb = y + b * ys;
    if (xs == 1 && ys == 1) {
      for (int64_t j = 0; j < m; ++j) buf[j] = vm::atan2(xb[j], yb[j]);
    } else if (xs == 1 && ys == 0) {
      const float v = *yb;
      for (int64_t j = 0; j < m; ++j) buf[j] = vm::atan2(xb[j], v);
    } else if (xs == 0 && ys == 1) {
      const float u = *xb;
      for (int64_t j = 0; j < m; ++j) buf[j] = vm::atan2(u, yb[j]);
    } else {
      for (int64_t j = 0; j < m; ++j) buf[j] = vm::atan2(xb[j * xs], yb[j * ys]);
    }
    std::memcpy(d + b, buf, static_cast<size_t>(m) * sizeof(float));
  }
}

// ReLU and the arithmetic: scalar_math.h's relu, add, subtract, multiply, divide, maximum and
// minimum for float, restated here (this file must not instantiate the library's inline
// functions for another ISA); tests/backend/cpu/vector_math_test.cpp checks them against those.
struct Relu {
  float operator()(float x) const { return !(x <= 0.0f) ? x : 0.0f; }
};
struct Add {
  float operator()(float x, float y) const { return x + y; }
};
struct Subtract {
  float operator()(float x, float y) const { return x - y; }
};
struct Multiply {
  float operator()(float x, float y) const { return x * y; }
};
struct Divide {
  float operator()(float x, float y) const { return x / y; }
};
struct Maximum {
  float operator()(float x, float y) const { return (x >= y || x != x) ? x : y; }
};
struct Minimum {
  float operator()(float x, float y) const { return (x <= y || x != x) ? x : y; }
};

/// A one-instruction unary op: no stack buffer (an output aliasing the input reads each element
/// before writing it).
template <class F>
void simple_unary_run(const void* sv, int64_t st, void* dv, int64_t n) {
  const float* s = static_cast<const float*>(sv);
  float* d = static_cast<float*>(dv);
  const F f{};
  if (st == 1) {
    for (int64_t i = 0; i < n; ++i) d[i] = f(s[i]);
  } else if (st == 0) {
    const float v = f(s[0]);
    for (int64_t i = 0; i < n; ++i) d[i] = v;
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = f(s[i * st]);
  }
}

template <class F>
void arith_run(const void* xv, int64_t xs, const void* yv, int64_t ys, void* dv, int64_t n) {
  const float* x = static_cast<const float*>(xv);
  const float* y = static_cast<const float*>(yv);
  float* d = static_cast<float*>(dv);
  const F f{};
  if (xs == 1 && ys == 1) {
    for (int64_t i = 0; i < n; ++i) d[i] = f(x[i], y[i]);
  } else if (xs == 1 && ys == 0) {
    const float v = *y;
    for (int64_t i = 0; i < n; ++i) d[i] = f(x[i], v);
  } else if (xs == 0 && ys == 1) {
    const float u = *x;
    for (int64_t i = 0; i < n; ++i) d[i] = f(u, y[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = f(x[i * xs], y[i * ys]);
  }
}

/// Red<ReduceOp::Sum, float> as EightRows reads it, a type of this ISA's own.
struct FloatSum {
  using Acc = float;
  static constexpr ReduceOp kOp = ReduceOp::Sum;
  static constexpr bool kPairwise = true;
  static float init() { return 0.0f; }
};

void eight_rows_sum(const float* p, int64_t n, int64_t s, bool sequence, void* out) {
  typename EightRows<FloatSum>::V acc;
  if (sequence) EightRows<FloatSum>::sequence(p, n, s, acc);
  else EightRows<FloatSum>::run(p, n, s, acc);
  std::memcpy(out, &acc, sizeof acc);
}

}  // namespace

const MathKernels& math_kernels() {
  static const MathKernels k = [] {
    MathKernels t{};
    auto set = [&t](MathFn f, UnaryRun r) { t.unary[static_cast<int>(f)] = r; };
    set(MathFn::Sqrt, &unary_run<Sqrt>);
    set(MathFn::Rsqrt, &unary_run<Rsqrt>);
    set(MathFn::Exp, &unary_run<Exp>);
    set(MathFn::Exp2, &unary_run<Exp2>);
    set(MathFn::Expm1, &unary_run<Expm1>);
    set(MathFn::Log, &unary_run<Log>);
    set(MathFn::Log2, &unary_run<Log2>);
    set(MathFn::Log10, &unary_run<Log10>);
    set(MathFn::Log1p, &unary_run<Log1p>);
    set(MathFn::Sin, &trig_run<SinFast, SinSlow>);
    set(MathFn::Cos, &trig_run<CosFast, CosSlow>);
    set(MathFn::Tan, &trig_run<TanFast, TanSlow>);
    set(MathFn::Asin, &unary_run<Asin>);
    set(MathFn::Acos, &unary_run<Acos>);
    set(MathFn::Atan, &unary_run<Atan>);
    set(MathFn::Sinh, &unary_run<Sinh>);
    set(MathFn::Cosh, &unary_run<Cosh>);
    set(MathFn::Tanh, &unary_run<Tanh>);
    set(MathFn::Erf, &unary_run<Erf>);
    set(MathFn::Sigmoid, &unary_run<Sigmoid>);
    t.atan2 = &atan2_run;
    t.relu = &simple_unary_run<Relu>;
    auto arith = [&t](ArithFn f, BinaryRun r) { t.arith[static_cast<int>(f)] = r; };
    arith(ArithFn::Add, &arith_run<Add>);
    arith(ArithFn::Subtract, &arith_run<Subtract>);
    arith(ArithFn::Multiply, &arith_run<Multiply>);
    arith(ArithFn::Divide, &arith_run<Divide>);
    arith(ArithFn::Maximum, &arith_run<Maximum>);
    arith(ArithFn::Minimum, &arith_run<Minimum>);
    t.eight_rows_sum = &eight_rows_sum;
    return t;
  }();
  return k;
}

}  // namespace smelt::cpu::SMELT_MATH_ISA
