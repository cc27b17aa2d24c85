// Accuracy, special values and bit-exactness of the vectorized float32 math and its kernels.
// (Every function within 1 ulp of the exact value, erf within 1.08: max_ulps.)
// vector_math.h is included first: it must compile on its own (standard headers only).
#include "src/backend/cpu/vector_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "smelt/memory.h"
#include "src/backend/cpu/elementwise_math.h"
#include "src/backend/cpu/reduce_order.h"
#include "src/backend/cpu/scalar_math.h"
#include "test_utils.h"

namespace smelt {
namespace {

namespace s = smelt::scalar;
using cpu::MathFn;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kMax = std::numeric_limits<float>::max();
constexpr float kMinNormal = std::numeric_limits<float>::min();
constexpr float kDenormMin = std::numeric_limits<float>::denorm_min();

struct Fn {
  const char* name;
  MathFn id;
  float (*f)(float);           // the scalar function (the fused kernels' code)
  double (*ref)(double);       // float64 reference
  Array (*op)(const Array&);   // the eager op
  float16_t (*h)(float16_t);   // the scalar float16 function
  bfloat16_t (*b)(bfloat16_t);
};

#define SMELT_FN(name, id, ref_expr, op)                                                              \
  Fn {                                                                                                \
    #name, MathFn::id, &s::name<float>, [](double x) -> double { return ref_expr; }, &op,             \
        &s::name<float16_t>, &s::name<bfloat16_t>                                                     \
  }

const std::vector<Fn>& functions() {
  static const std::vector<Fn> fns = {
      SMELT_FN(sqrt, Sqrt, std::sqrt(x), smelt::sqrt),
      SMELT_FN(rsqrt, Rsqrt, 1.0 / std::sqrt(x), smelt::rsqrt),
      SMELT_FN(exp, Exp, std::exp(x), smelt::exp),
      SMELT_FN(exp2, Exp2, std::exp2(x), smelt::exp2),
      SMELT_FN(expm1, Expm1, std::expm1(x), smelt::expm1),
      SMELT_FN(log, Log, std::log(x), smelt::log),
      SMELT_FN(log2, Log2, std::log2(x), smelt::log2),
      SMELT_FN(log10, Log10, std::log10(x), smelt::log10),
      SMELT_FN(log1p, Log1p, std::log1p(x), smelt::log1p),
      SMELT_FN(sin, Sin, std::sin(x), smelt::sin),
      SMELT_FN(cos, Cos, std::cos(x), smelt::cos),
      SMELT_FN(tan, Tan, std::tan(x), smelt::tan),
      SMELT_FN(asin, Asin, std::asin(x), smelt::arcsin),
      SMELT_FN(acos, Acos, std::acos(x), smelt::arccos),
      SMELT_FN(atan, Atan, std::atan(x), smelt::arctan),
      SMELT_FN(sinh, Sinh, std::sinh(x), smelt::sinh),
      SMELT_FN(cosh, Cosh, std::cosh(x), smelt::cosh),
      SMELT_FN(tanh, Tanh, std::tanh(x), smelt::tanh),
      SMELT_FN(erf, Erf, std::erf(x), smelt::erf),
      SMELT_FN(sigmoid, Sigmoid, 1.0 / (1.0 + std::exp(-x)), smelt::sigmoid),
  };
  return fns;
}
#undef SMELT_FN

/// The float32 error bound of a function in ulps: 1, except erf, which computes in float rather
/// than double (vector_math.h: an exhaustive check of [0, 4.5] measured 1.0523 ulp).
double max_ulps(MathFn id) { return id == MathFn::Erf ? 1.08 : 1.0; }

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }
/// Identical bits, or both NaN.
bool same(float a, float b) { return bits(a) == bits(b) || (std::isnan(a) && std::isnan(b)); }

/// The spacing of floats with 1 + `mant_bits` significant bits at |r| (subnormal spacing below
/// the smallest normal 2^min_exp).
double ulp_at(double r, int mant_bits, int min_exp) {
  const double a = std::fabs(r);
  int e;
  std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  return std::ldexp(1.0, std::max(e - 1, min_exp) - mant_bits);
}

/// Error of `got` against the exact `ref` in ulps of the result type; an infinity or NaN must
/// match what rounding `ref` gives exactly (else the error is infinite).
double ulp_error(double got, double ref, double rounded_ref, int mant_bits, int min_exp) {
  if (std::isnan(rounded_ref) || std::isnan(got)) return std::isnan(rounded_ref) && std::isnan(got) ? 0.0 : INFINITY;
  if (std::isinf(rounded_ref) || std::isinf(got)) return got == rounded_ref ? 0.0 : INFINITY;
  return std::fabs(got - ref) / ulp_at(ref, mant_bits, min_exp);
}

double ulp_error_f32(float got, double ref) {
  return ulp_error(got, ref, static_cast<double>(static_cast<float>(ref)), 23, -126);
}

/// NaN, +-inf, +-0 or finite: results must agree on this with the correctly rounded value.
int value_class(float x) {
  if (std::isnan(x)) return 0;
  if (std::isinf(x)) return x > 0 ? 1 : 2;
  if (x == 0) return std::signbit(x) ? 4 : 3;
  return 5;
}

/// Random float32s: every bit pattern (NaNs, infinities, subnormals), and magnitudes uniform in
/// log scale over [2^lo, 2^hi) with either sign.
std::vector<float> random_floats(size_t n, int lo, int hi, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> e(lo, hi);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    if (i % 2 == 0) {
      v[i] = std::bit_cast<float>(static_cast<uint32_t>(g()));
    } else {
      const double m = std::exp2(e(g));
      v[i] = static_cast<float>(g() & 1 ? -m : m);
    }
  }
  return v;
}

std::vector<float> eval_op(const Fn& fn, const std::vector<float>& x) {
  return fn.op(Array(x, Shape{static_cast<int64_t>(x.size())})).to_vector<float>();
}

// ---- Accuracy ---------------------------------------------------------------------------------

/// Max ulp error over random inputs, through the eager kernels; the eager results must equal the
/// scalar function's bit for bit.
TEST(VectorMath, RandomInputsWithinOneUlp) {
  for (const Fn& fn : functions()) {
    std::vector<float> x = random_floats(1 << 20, -30, 10, 1);
    const std::vector<float> wide = random_floats(1 << 17, -149, 128, 2);
    x.insert(x.end(), wide.begin(), wide.end());
    const std::vector<float> got = eval_op(fn, x);
    double worst = 0;
    float worst_x = 0;
    size_t mismatches = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!same(got[i], fn.f(x[i]))) ++mismatches;
      const double e = ulp_error_f32(got[i], fn.ref(x[i]));
      if (e > worst) worst = e, worst_x = x[i];
    }
    EXPECT_EQ(mismatches, 0u) << fn.name << ": eager and scalar differ";
    EXPECT_LE(worst, max_ulps(fn.id)) << fn.name << " worst at x = " << std::hexfloat << worst_x;
    std::printf("%-8s max error %.4f ulp at %a\n", fn.name, worst, static_cast<double>(worst_x));
  }
}

TEST(VectorMath, Atan2RandomInputsWithinOneUlp) {
  const std::vector<float> y = random_floats(1 << 19, -40, 40, 3), x = random_floats(1 << 19, -40, 40, 4);
  const size_t n = y.size();
  const std::vector<float> got =
      arctan2(Array(y, Shape{static_cast<int64_t>(n)}), Array(x, Shape{static_cast<int64_t>(n)})).to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(same(got[i], s::atan2<float>(y[i], x[i]))) << y[i] << ", " << x[i];
    worst = std::max(worst, ulp_error_f32(got[i], std::atan2(double(y[i]), double(x[i]))));
  }
  EXPECT_LE(worst, 1.0);
}

/// Near k pi/2 the reduction of sin/cos/tan cancels most bits; the nearest floats up to the end
/// of the fast path (2^18) and past it (the C library's exact reduction).
TEST(VectorMath, TrigNearMultiplesOfHalfPi) {
  std::vector<float> x;
  std::mt19937 g(5);
  for (int i = 0; i < 20000; ++i) {
    const double k = static_cast<double>(g() % (1u << (i % 2 ? 18 : 22)));
    float v = static_cast<float>(k * 1.5707963267948966);
    x.insert(x.end(), {v, std::nextafter(v, kInf), std::nextafter(v, -kInf), -v});
  }
  for (float v : {262144.0f, 262144.03f, 262143.98f, 1e30f, kMax, 3.0e38f})
    x.insert(x.end(), {v, -v});
  for (const Fn& fn : functions()) {
    if (fn.id != MathFn::Sin && fn.id != MathFn::Cos && fn.id != MathFn::Tan) continue;
    const std::vector<float> got = eval_op(fn, x);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_TRUE(same(got[i], fn.f(x[i]))) << fn.name << "(" << x[i] << ")";
      ASSERT_LE(ulp_error_f32(got[i], fn.ref(x[i])), 1.0) << fn.name << "(" << std::hexfloat << x[i] << ")";
    }
  }
}

// ---- Special values and thresholds ------------------------------------------------------------

/// Special inputs give exactly the C library's special results (NaN, +-inf, signed zeros);
/// others stay within 1 ulp.
TEST(VectorMath, SpecialValues) {
  const std::vector<float> x = {0.0f, -0.0f, kInf, -kInf, kNaN, -kNaN, kDenormMin, -kDenormMin, kMinNormal,
                                -kMinNormal, kMax, -kMax, 1.0f, -1.0f, 0.5f, -0.5f, 2.0f, -2.0f, 1e-30f, -1e-30f,
                                std::nextafter(1.0f, 2.0f), std::nextafter(1.0f, 0.0f), std::nextafter(-1.0f, -2.0f),
                                std::nextafter(-1.0f, 0.0f), 3.0e-39f, -3.0e-39f};
  for (const Fn& fn : functions()) {
    const std::vector<float> got = eval_op(fn, x);
    for (size_t i = 0; i < x.size(); ++i) {
      const double ref = fn.ref(x[i]);
      const float want = static_cast<float>(ref);
      EXPECT_EQ(value_class(got[i]), value_class(want))
          << fn.name << "(" << x[i] << ") = " << got[i] << ", want " << want;
      EXPECT_LE(ulp_error_f32(got[i], ref), max_ulps(fn.id)) << fn.name << "(" << x[i] << ")";
      EXPECT_TRUE(same(got[i], fn.f(x[i]))) << fn.name << "(" << x[i] << "): eager and scalar differ";
    }
  }
}

/// Around where a function overflows to inf, underflows to subnormals or 0, or rounds to +-1,
/// every float of a window gives the correctly rounded value's class and stays within 1 ulp.
TEST(VectorMath, OverflowAndUnderflowThresholds) {
  struct Case {
    MathFn id;
    std::vector<float> at;
  };
  const std::vector<Case> cases = {
      {MathFn::Exp, {88.72284f, -87.33655f, -103.27893f, -103.97208f}},
      {MathFn::Exp2, {128.0f, -126.0f, -149.0f, -150.0f}},
      {MathFn::Expm1, {88.72284f, -16.635532f, -17.3286f}},
      {MathFn::Sinh, {89.41599f, -89.41599f}},
      {MathFn::Cosh, {89.41599f, -89.41599f}},
      {MathFn::Tanh, {9.010913f, -9.010913f, 1e-4f}},
      {MathFn::Sigmoid, {-103.97208f, -87.33655f, 16.635532f, 17.32868f}},
      {MathFn::Erf, {3.9192059f, -3.9192059f, 1.0f}},
      {MathFn::Log, {1.0f, kMinNormal}},
      {MathFn::Log1p, {-1.0f, 1e-7f, -1e-7f}},
      {MathFn::Asin, {1.0f, -1.0f}},
      {MathFn::Acos, {1.0f, -1.0f}},
  };
  for (const Case& c : cases) {
    const Fn& fn = functions()[static_cast<size_t>(c.id)];
    ASSERT_EQ(fn.id, c.id);
    std::vector<float> x;
    for (float a : c.at) {
      float lo = a, hi = a;
      for (int i = 0; i < 2048; ++i) lo = std::nextafter(lo, -kInf), hi = std::nextafter(hi, kInf);
      for (float v = lo; v != hi; v = std::nextafter(v, kInf)) x.push_back(v);
    }
    const std::vector<float> got = eval_op(fn, x);
    for (size_t i = 0; i < x.size(); ++i) {
      const double ref = fn.ref(x[i]);
      ASSERT_EQ(value_class(got[i]), value_class(static_cast<float>(ref)))
          << fn.name << "(" << std::hexfloat << x[i] << ")";
      ASSERT_LE(ulp_error_f32(got[i], ref), max_ulps(fn.id)) << fn.name << "(" << std::hexfloat << x[i] << ")";
    }
  }
}

// ---- 16-bit floats: every bit pattern ---------------------------------------------------------

template <class H>
void check_all_16bit(int mant_bits, int min_exp, H (*scalar_fn)(H), const Fn& fn) {
  std::vector<H> x(65536);
  for (uint32_t i = 0; i < 65536; ++i) x[i] = H::from_bits(static_cast<uint16_t>(i));
  const std::vector<H> got = fn.op(Array(x, Shape{65536})).template to_vector<H>();
  double worst = 0;
  uint32_t worst_i = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    const H want_scalar = scalar_fn(x[i]);
    const float g = static_cast<float>(got[i]);
    if (!(std::isnan(g) && std::isnan(static_cast<float>(want_scalar)))) {
      ASSERT_EQ(got[i].bits, want_scalar.bits) << fn.name << " at bits " << i << ": eager and scalar differ";
    }
    const double ref = fn.ref(static_cast<double>(static_cast<float>(x[i])));
    const double rounded = static_cast<double>(static_cast<float>(H(static_cast<float>(ref))));
    const double e = ulp_error(g, ref, rounded, mant_bits, min_exp);
    if (e > worst) worst = e, worst_i = i;
  }
  EXPECT_LE(worst, 1.0) << fn.name << " worst at bits " << worst_i;
}

TEST(VectorMath, EveryFloat16AndBfloat16) {
  for (const Fn& fn : functions()) {
    check_all_16bit<float16_t>(10, -14, fn.h, fn);
    check_all_16bit<bfloat16_t>(7, -126, fn.b, fn);
  }
}

// ---- Kernels: layouts, threads, ISAs ----------------------------------------------------------

std::vector<float> mixed_inputs() {
  std::vector<float> x = random_floats(50000, -20, 20, 7);
  for (float v : {0.0f, -0.0f, kInf, -kInf, kNaN, kDenormMin, kMax, 1e30f, 3e5f, -3e5f}) x.push_back(v);
  return x;
}

/// Strided, reversed and broadcast inputs take the same values as contiguous ones.
TEST(VectorMath, NonContiguousInputs) {
  const std::vector<float> x = mixed_inputs();
  const int64_t n = static_cast<int64_t>(x.size());
  const Array a(x, Shape{n});
  for (const Fn& fn : functions()) {
    const std::vector<float> step = fn.op(slice(a, {n - 1}, {-n - 1}, {-3})).to_vector<float>();
    for (size_t i = 0; i < step.size(); ++i) {
      const float v = x[static_cast<size_t>(n - 1) - 3 * i];
      ASSERT_TRUE(same(step[i], fn.f(v))) << fn.name << "(" << v << ")";
    }
    const std::vector<float> t = fn.op(transpose(reshape(a, {2, n / 2}))).to_vector<float>();
    for (int64_t i = 0; i < n / 2; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const float v = x[static_cast<size_t>(j * (n / 2) + i)], r = t[static_cast<size_t>(i * 2 + j)];
        ASSERT_TRUE(same(r, fn.f(v))) << fn.name << "(" << v << ")";
      }
    for (float v : {0.7f, 1e30f}) {
      const std::vector<float> bc = fn.op(broadcast_to(Array(v), {1000})).to_vector<float>();
      for (float r : bc) ASSERT_TRUE(same(r, fn.f(v))) << fn.name << "(" << v << ")";
    }
  }
}

TEST(VectorMath, SameBitsAtAnyThreadCount) {
  const std::vector<float> x = random_floats(300000, -10, 10, 8);
  const Array a(x, Shape{static_cast<int64_t>(x.size())});
  const int threads = cpu_threads();
  for (const Fn& fn : {functions()[static_cast<size_t>(MathFn::Sin)], functions()[static_cast<size_t>(MathFn::Tanh)]}) {
    set_cpu_threads(1);
    Array one = fn.op(a);
    one.eval();
    set_cpu_threads(4);
    Array four = fn.op(a);
    four.eval();
    set_cpu_threads(threads);
    EXPECT_TRUE(test::bit_equal(one, four)) << fn.name;
  }
}

/// The baseline build of every kernel and the x86-64-v3 (AVX2) or x86-64-v4 (AVX-512) one give
/// identical bits.
void expect_kernels_agree(const cpu::MathKernels& v3) {
  const std::vector<float> x = mixed_inputs();
  const int64_t n = static_cast<int64_t>(x.size());
  const cpu::MathKernels& base = cpu::isa_base::math_kernels();
  for (const Fn& fn : functions()) {
    const int f = static_cast<int>(fn.id);
    for (int64_t st : {1, 3, 0, -1}) {
      const int64_t m = st == 0 ? n : (st == 1 || st == -1 ? n : n / 3);
      const float* src = st < 0 ? x.data() + n - 1 : x.data();
      std::vector<float> p(static_cast<size_t>(m)), q(static_cast<size_t>(m));
      base.unary[f](src, st, p.data(), m);
      v3.unary[f](src, st, q.data(), m);
      ASSERT_EQ(std::memcmp(p.data(), q.data(), p.size() * sizeof(float)), 0) << fn.name << " stride " << st;
      if (st == 1) {
        for (int64_t i = 0; i < m; ++i)
          ASSERT_TRUE(same(p[i], fn.f(x[i]))) << fn.name << "(" << x[i] << ")";
      }
    }
  }
  std::vector<float> p(static_cast<size_t>(n)), q(static_cast<size_t>(n));
  std::vector<float> y = random_floats(static_cast<size_t>(n), -20, 20, 9);
  base.atan2(y.data(), 1, x.data(), 1, p.data(), n);
  v3.atan2(y.data(), 1, x.data(), 1, q.data(), n);
  EXPECT_EQ(std::memcmp(p.data(), q.data(), p.size() * sizeof(float)), 0) << "atan2";
}

/// Each ISA's ReLU and arithmetic kernels give scalar_math.h's bits, which NaN comes out and the
/// sign of a zero included, at every stride pattern the driver passes (both contiguous, a
/// broadcast value on either side, strided).
void expect_arith_matches_scalar(const cpu::MathKernels& k, const char* isa) {
  std::vector<float> x = mixed_inputs();
  for (uint32_t b : {0xffc00000u, 0x7fc01234u, 0xff800001u, 0x80000000u}) x.push_back(std::bit_cast<float>(b));
  std::vector<float> y(x.rbegin(), x.rend());  // other pairs: NaN against numbers, +0 against -0
  for (size_t i = 0; i < 64; ++i) y[i] = x[x.size() - 1 - (i % 14)];
  const int64_t n = static_cast<int64_t>(x.size());
  auto expect_bits = [&](float got, float want, const char* op, float a, float b) {
    ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << isa << " " << op << "(" << a << ", " << b << ")";
  };
  std::vector<float> d(static_cast<size_t>(n));
  k.relu(x.data(), 1, d.data(), n);
  for (int64_t i = 0; i < n; ++i) expect_bits(d[i], scalar::relu<float>(x[i]), "relu", x[i], 0);
  k.relu(x.data(), 1, x.data() + 0, 0);  // empty run
  using Ref = float (*)(float, float);
  const std::pair<cpu::ArithFn, std::pair<const char*, Ref>> ops[] = {
      {cpu::ArithFn::Add, {"add", &scalar::add<float>}},
      {cpu::ArithFn::Subtract, {"subtract", &scalar::subtract<float>}},
      {cpu::ArithFn::Multiply, {"multiply", &scalar::multiply<float>}},
      {cpu::ArithFn::Divide, {"divide", &scalar::divide<float>}},
      {cpu::ArithFn::Maximum, {"maximum", &scalar::maximum<float>}},
      {cpu::ArithFn::Minimum, {"minimum", &scalar::minimum<float>}}};
  for (const auto& [fn, named] : ops) {
    const auto& [name, ref] = named;
    for (auto [xs, ys] : {std::pair<int64_t, int64_t>{1, 1}, {1, 0}, {0, 1}, {3, 2}}) {
      const int64_t m = (xs > 1 || ys > 1) ? n / 3 : n;
      k.arith[static_cast<int>(fn)](x.data(), xs, y.data(), ys, d.data(), m);
      for (int64_t i = 0; i < m; ++i)
        expect_bits(d[i], ref(x[i * xs], y[i * ys]), name, x[i * xs], y[i * ys]);
    }
  }
}

/// Each ISA's eight-row float32 sum gives, in lane j, reduce_run's sum of row j (and for short
/// rows the plain sequence reduce_rows takes), bit for bit: rows of a channels-last activation
/// read at a stride of C, as a global average pool reads them.
void expect_eight_rows_match(const cpu::MathKernels& k, const char* isa) {
  using R = reduce_order::Red<ReduceOp::Sum, float>;
  const int64_t s = 24;
  // Finite values of mixed magnitudes (which of two NaNs a sum returns is not part of the order).
  std::vector<float> x(static_cast<size_t>(3200 * s));
  std::mt19937 g(12);
  std::uniform_real_distribution<double> mant(-1, 1), ex(-30, 30);
  for (float& v : x) v = static_cast<float>(mant(g) * std::exp2(ex(g)));
  for (int64_t n : {1, 7, 8, 49, 129, 200, 3136}) {
    float got[8];
    k.eight_rows_sum(x.data() + 3, n, s, false, got);
    for (int j = 0; j < 8; ++j) {
      const float want = reduce_order::reduce_run<R>(x.data() + 3 + j, n, s);
      ASSERT_EQ(std::bit_cast<uint32_t>(got[j]), std::bit_cast<uint32_t>(want)) << isa << " rows of " << n << ", lane " << j;
    }
    k.eight_rows_sum(x.data() + 3, n, s, true, got);
    for (int j = 0; j < 8; ++j) {
      float want = 0.0f;
      for (int64_t i = 0; i < n; ++i) want += x[static_cast<size_t>(3 + j + i * s)];
      ASSERT_EQ(std::bit_cast<uint32_t>(got[j]), std::bit_cast<uint32_t>(want)) << isa << " sequence of " << n << ", lane " << j;
    }
  }
}

TEST(VectorMath, EightRowSumsFollowReduceRunsOrderOnEveryIsa) {
  expect_eight_rows_match(cpu::isa_base::math_kernels(), "baseline");
  if (cpu::has_isa_v3()) expect_eight_rows_match(cpu::isa_v3::math_kernels(), "x86-64-v3");
  if (cpu::has_isa_v4()) expect_eight_rows_match(cpu::isa_v4::math_kernels(), "x86-64-v4");
}

TEST(VectorMath, ReluAndArithmeticGiveTheScalarBitsOnEveryIsa) {
  expect_arith_matches_scalar(cpu::isa_base::math_kernels(), "baseline");
  if (cpu::has_isa_v3()) expect_arith_matches_scalar(cpu::isa_v3::math_kernels(), "x86-64-v3");
  if (cpu::has_isa_v4()) expect_arith_matches_scalar(cpu::isa_v4::math_kernels(), "x86-64-v4");
}

TEST(VectorMath, BaselineAndAvx2KernelsAgree) {
  if (!cpu::has_isa_v3()) GTEST_SKIP() << "this CPU has no x86-64-v3";
  expect_kernels_agree(cpu::isa_v3::math_kernels());
}

TEST(VectorMath, BaselineAndAvx512KernelsAgree) {
  if (!cpu::has_isa_v4()) GTEST_SKIP() << "this CPU has no x86-64-v4";
  expect_kernels_agree(cpu::isa_v4::math_kernels());
}

// SMELT_CPU_ISA caps the kernels' instruction set. Every level the CPU has gives the baseline's
// bits; the ctest pass under SMELT_CPU_ISA=avx2 (scripts/test.sh) runs every other test there.
TEST(CpuIsa, EveryAvailableCapGivesTheBaselineBits) {
  const std::vector<float> x = random_floats(100000, -30, 30, 12);
  const int64_t n = static_cast<int64_t>(x.size());
  const cpu::MathKernels& base = cpu::math_kernels_for(cpu::CpuIsa::Baseline);
  EXPECT_EQ(&base, &cpu::isa_base::math_kernels());
  int tried = 0;
  for (cpu::CpuIsa isa : {cpu::CpuIsa::Avx2, cpu::CpuIsa::Avx512}) {
    if (isa > cpu::cpu_isa_supported()) continue;
    ++tried;
    SCOPED_TRACE(cpu::cpu_isa_name(isa));
    const cpu::MathKernels& k = cpu::math_kernels_for(isa);
    EXPECT_EQ(&k, isa == cpu::CpuIsa::Avx2 ? &cpu::isa_v3::math_kernels() : &cpu::isa_v4::math_kernels());
    for (const Fn& fn : functions()) {
      const int f = static_cast<int>(fn.id);
      std::vector<float> p(x.size()), q(x.size());
      base.unary[f](x.data(), 1, p.data(), n);
      k.unary[f](x.data(), 1, q.data(), n);
      EXPECT_EQ(std::memcmp(p.data(), q.data(), p.size() * sizeof(float)), 0) << fn.name;
    }
    std::vector<float> p(x.size()), q(x.size());
    const std::vector<float> y = random_floats(x.size(), -5, 5, 13);
    base.atan2(y.data(), 1, x.data(), 1, p.data(), n);
    k.atan2(y.data(), 1, x.data(), 1, q.data(), n);
    EXPECT_EQ(std::memcmp(p.data(), q.data(), p.size() * sizeof(float)), 0) << "atan2";
  }
  if (tried == 0) GTEST_SKIP() << "this CPU has the baseline level only";
}

TEST(CpuIsa, CapAboveTheCpuFallsToWhatItHas) {
  EXPECT_EQ(&cpu::math_kernels_for(cpu::CpuIsa::Avx512), &cpu::math_kernels_for(cpu::cpu_isa_supported()));
  EXPECT_LE(cpu::cpu_isa(), cpu::cpu_isa_supported());
}

TEST(CpuIsa, FollowsTheEnvironment) {
  const char* env = std::getenv("SMELT_CPU_ISA");
  const cpu::CpuIsa want =
      env && *env ? std::min(cpu::parse_cpu_isa(env), cpu::cpu_isa_supported()) : cpu::cpu_isa_supported();
  EXPECT_EQ(cpu::cpu_isa(), want) << "SMELT_CPU_ISA=" << (env ? env : "(unset)");
  EXPECT_EQ(&cpu::math_kernels(), &cpu::math_kernels_for(want));
}

TEST(CpuIsa, NamesAndErrors) {
  for (cpu::CpuIsa isa : {cpu::CpuIsa::Baseline, cpu::CpuIsa::Avx2, cpu::CpuIsa::Avx512})
    EXPECT_EQ(cpu::parse_cpu_isa(cpu::cpu_isa_name(isa)), isa);
  EXPECT_STREQ(cpu::cpu_isa_name(cpu::CpuIsa::Avx2), "avx2");
  for (const char* bad : {"AVX2", "sse4", "", "avx-512"})
    EXPECT_THROW_MSG(cpu::parse_cpu_isa(bad), InvalidArgument,
                     std::string("SMELT_CPU_ISA: unknown value '") + bad + "' (accepted: baseline, avx2, avx512)");
}

/// An output written over its input (a donated buffer) is still right.
TEST(VectorMath, InPlaceOutput) {
  const std::vector<float> x = mixed_inputs();
  for (const Fn& fn : functions()) {
    std::vector<float> buf = x;
    cpu::math_kernels().unary[static_cast<int>(fn.id)](buf.data(), 1, buf.data(), static_cast<int64_t>(buf.size()));
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_TRUE(same(buf[i], fn.f(x[i]))) << fn.name << "(" << x[i] << ")";
  }
}

}  // namespace
}  // namespace smelt
