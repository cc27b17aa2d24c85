// Tests for the element-wise unary ops: float math against long double, exact integer semantics,
// NaN/±inf/-0 cases, erfinv accuracy and the dtype rules.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "op_cases.h"
#include "ops/elementwise_helpers.h"
#include "src/core/thread_pool.h"

namespace smelt {
namespace {

using namespace smelt::test;

using UnaryFn = Array (*)(const Array&);
using RefFn = UnaryRef;
using op_case_detail::erfinv_reference;

/// The unary cases of tests/op_cases.h with a float reference (in the table's order).
std::vector<const OpCase*> float_cases() {
  std::vector<const OpCase*> out;
  for (const OpCase* c : op_cases_of_arity(1))
    if (c->ref1) out.push_back(c);
  return out;
}

std::vector<double> reference(const std::vector<double>& x, RefFn ref) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<double>(ref(x[i]));
  return out;
}

TEST(Unary, FloatOpsMatchLongDoubleOnEveryFloatDtype) {
  uint32_t seed = 1;
  for (const OpCase* c : float_cases()) {
    for (Dtype d : SMELT_FLOAT_DTYPES) {
      Array a = random_array({3, 41}, d, c->domains[0].lo, c->domains[0].hi, seed++);
      Array out = c->unary(a);
      EXPECT_EQ(out.dtype(), d) << c->name;
      EXPECT_EQ(out.shape(), (Shape{3, 41})) << c->name;
      double tol = tolerance_for(d);
      EXPECT_TRUE(all_close(out, reference(as_doubles(a), c->ref1), tol, tol * 1e-3))
          << c->name << " " << dtype_name(d);
    }
  }
}

TEST(Unary, FloatMathOnIntegersComputesInFloat32) {
  const std::vector<std::string> integral_results = {"abs", "negative", "sign", "square", "relu",
                                                     "floor", "ceil", "round"};
  uint32_t seed = 100;
  for (const OpCase* c : float_cases()) {
    bool keeps_dtype = std::find(integral_results.begin(), integral_results.end(), c->name) != integral_results.end();
    for (Dtype d : {int8, int16, int32, int64, uint8, uint16, uint32, uint64, bool_}) {
      double lo = std::ceil(c->domains[0].lo), hi = std::floor(c->domains[0].hi);
      if (is_unsigned_integral(d) || d == bool_) lo = std::max(lo, 0.0);
      if (d == bool_) hi = std::min(hi, 1.0);
      if (hi - lo < 1) continue;
      if (d == bool_ && (c->name == std::string("negative") || c->name == std::string("sign") ||
                         c->name == std::string("square")))
        continue;  // DtypeError, tested below
      Array a = random_array({50}, d, lo, hi + 1, seed++);
      Array out = c->unary(a);
      std::vector<double> expected = reference(as_doubles(a), c->ref1);
      if (keeps_dtype) {
        EXPECT_EQ(out.dtype(), d) << c->name << " " << dtype_name(d);
        if (is_unsigned_integral(d) && c->name == std::string("negative"))
          continue;  // wraps, checked exactly below
        EXPECT_TRUE(all_close(out, expected, 0, 0)) << c->name << " " << dtype_name(d);
      } else {
        EXPECT_EQ(out.dtype(), float32) << c->name << " " << dtype_name(d);
        EXPECT_TRUE(all_close(out, expected, tolerance_for(float32), 1e-7)) << c->name << " " << dtype_name(d);
      }
    }
  }
}

TEST(Unary, IntegerSemanticsAreExact) {
  for_types<SMELT_INT_TYPES>([]<class T>() {
    std::vector<T> x = int_edges<T>();
    auto r = random_ints<T>(200, 3);
    x.insert(x.end(), r.begin(), r.end());
    Array a = array_of(x);
    auto abs_v = values<T>(smelt::abs(a));
    auto neg_v = values<T>(smelt::negative(a));
    auto sign_v = values<T>(smelt::sign(a));
    auto sq_v = values<T>(smelt::square(a));
    auto relu_v = values<T>(smelt::relu(a));
    auto not_v = values<T>(smelt::bitwise_not(a));
    auto lnot_v = values<bool>(smelt::logical_not(a));
    auto nan_v = values<bool>(smelt::isnan(a));
    auto inf_v = values<bool>(smelt::isinf(a));
    auto fin_v = values<bool>(smelt::isfinite(a));
    for (size_t i = 0; i < x.size(); ++i) {
      __int128 v = x[i];
      SCOPED_TRACE(std::to_string(static_cast<long long>(x[i])) + " " + dtype_name(dtype_of<T>()));
      EXPECT_EQ(abs_v[i], wrap<T>(v < 0 ? -v : v));
      EXPECT_EQ(neg_v[i], wrap<T>(-v));
      EXPECT_EQ(sign_v[i], static_cast<T>(v > 0 ? 1 : (v < 0 ? -1 : 0)));
      EXPECT_EQ(sq_v[i], wrap<T>(mul_mod(v, v)));
      EXPECT_EQ(relu_v[i], v > 0 ? x[i] : T(0));
      EXPECT_EQ(not_v[i], wrap<T>(-v - 1));
      EXPECT_EQ(lnot_v[i], v == 0);
      EXPECT_FALSE(nan_v[i]);
      EXPECT_FALSE(inf_v[i]);
      EXPECT_TRUE(fin_v[i]);
    }
    // Rounding an integer is the identity: the same array comes back.
    EXPECT_EQ(smelt::floor(a).id(), a.id());
    EXPECT_EQ(smelt::ceil(a).id(), a.id());
    EXPECT_EQ(smelt::round(a).id(), a.id());
  });
}

TEST(Unary, Int8AndUInt8Exhaustive) {
  std::vector<int8_t> s(256);
  std::vector<uint8_t> u(256);
  for (int i = 0; i < 256; ++i) {
    s[i] = static_cast<int8_t>(i - 128);
    u[i] = static_cast<uint8_t>(i);
  }
  auto sa = values<int8_t>(smelt::abs(array_of(s)));
  auto sn = values<int8_t>(smelt::negative(array_of(s)));
  auto sq = values<int8_t>(smelt::square(array_of(s)));
  auto un = values<uint8_t>(smelt::negative(array_of(u)));
  auto uq = values<uint8_t>(smelt::square(array_of(u)));
  for (int i = 0; i < 256; ++i) {
    int v = i - 128;
    EXPECT_EQ(sa[i], static_cast<int8_t>(v < 0 ? -v : v));
    EXPECT_EQ(sn[i], static_cast<int8_t>(-v));
    EXPECT_EQ(sq[i], static_cast<int8_t>(v * v));
    EXPECT_EQ(un[i], static_cast<uint8_t>(256 - i));
    EXPECT_EQ(uq[i], static_cast<uint8_t>(i * i));
  }
  EXPECT_EQ(sa[0], -128);  // abs(INT8_MIN) wraps
}

TEST(Unary, BoolRules) {
  Array b = array_of<bool>({true, false, true});
  EXPECT_EQ(smelt::abs(b).id(), b.id());
  EXPECT_EQ(smelt::relu(b).id(), b.id());
  EXPECT_EQ(smelt::floor(b).id(), b.id());
  EXPECT_EQ(values<bool>(smelt::logical_not(b)), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(values<bool>(smelt::bitwise_not(b)), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(values<bool>(smelt::isnan(b)), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(values<bool>(smelt::isfinite(b)), (std::vector<bool>{true, true, true}));
  Array e = smelt::exp(b);
  EXPECT_EQ(e.dtype(), float32);
  EXPECT_TRUE(all_close(e, {std::exp(1.0), 1.0, std::exp(1.0)}, 1e-6));
  // Unsigned relu and abs are the identity.
  Array u = array_of<uint16_t>({0, 7, 65535});
  EXPECT_EQ(smelt::relu(u).id(), u.id());
  EXPECT_EQ(smelt::abs(u).id(), u.id());
}

// Special values through each float dtype: the expected value is NumPy's.
struct Special {
  const char* name;
  UnaryFn op;
  double in, out;
};

TEST(Unary, SpecialValues) {
  const double inf = INFINITY, nan = NAN;
  const std::vector<Special> cases = {
      {"abs", [](const Array& a) { return smelt::abs(a); }, -0.0, 0.0},
      {"abs", [](const Array& a) { return smelt::abs(a); }, -inf, inf},
      {"abs", [](const Array& a) { return smelt::abs(a); }, nan, nan},
      {"negative", [](const Array& a) { return smelt::negative(a); }, 0.0, -0.0},
      {"negative", [](const Array& a) { return smelt::negative(a); }, inf, -inf},
      {"sign", [](const Array& a) { return smelt::sign(a); }, -0.0, 0.0},
      {"sign", [](const Array& a) { return smelt::sign(a); }, 0.0, 0.0},
      {"sign", [](const Array& a) { return smelt::sign(a); }, nan, nan},
      {"sign", [](const Array& a) { return smelt::sign(a); }, -inf, -1},
      {"sign", [](const Array& a) { return smelt::sign(a); }, inf, 1},
      {"square", [](const Array& a) { return smelt::square(a); }, -inf, inf},
      {"reciprocal", [](const Array& a) { return smelt::reciprocal(a); }, 0.0, inf},
      {"reciprocal", [](const Array& a) { return smelt::reciprocal(a); }, -0.0, -inf},
      {"reciprocal", [](const Array& a) { return smelt::reciprocal(a); }, inf, 0.0},
      {"sqrt", [](const Array& a) { return smelt::sqrt(a); }, -1.0, nan},
      {"sqrt", [](const Array& a) { return smelt::sqrt(a); }, -0.0, -0.0},
      {"sqrt", [](const Array& a) { return smelt::sqrt(a); }, inf, inf},
      {"rsqrt", [](const Array& a) { return smelt::rsqrt(a); }, 0.0, inf},
      {"rsqrt", [](const Array& a) { return smelt::rsqrt(a); }, inf, 0.0},
      {"exp", [](const Array& a) { return smelt::exp(a); }, -inf, 0.0},
      {"exp", [](const Array& a) { return smelt::exp(a); }, inf, inf},
      {"exp", [](const Array& a) { return smelt::exp(a); }, nan, nan},
      {"exp2", [](const Array& a) { return smelt::exp2(a); }, 3.0, 8.0},
      {"expm1", [](const Array& a) { return smelt::expm1(a); }, -0.0, -0.0},
      {"expm1", [](const Array& a) { return smelt::expm1(a); }, -inf, -1.0},
      {"log", [](const Array& a) { return smelt::log(a); }, 0.0, -inf},
      {"log", [](const Array& a) { return smelt::log(a); }, -1.0, nan},
      {"log", [](const Array& a) { return smelt::log(a); }, inf, inf},
      {"log2", [](const Array& a) { return smelt::log2(a); }, 8.0, 3.0},
      {"log10", [](const Array& a) { return smelt::log10(a); }, 100.0, 2.0},
      {"log1p", [](const Array& a) { return smelt::log1p(a); }, -1.0, -inf},
      {"log1p", [](const Array& a) { return smelt::log1p(a); }, -0.0, -0.0},
      {"sin", [](const Array& a) { return smelt::sin(a); }, inf, nan},
      {"sin", [](const Array& a) { return smelt::sin(a); }, -0.0, -0.0},
      {"cos", [](const Array& a) { return smelt::cos(a); }, 0.0, 1.0},
      {"tan", [](const Array& a) { return smelt::tan(a); }, -0.0, -0.0},
      {"arcsin", [](const Array& a) { return smelt::arcsin(a); }, 2.0, nan},
      {"arccos", [](const Array& a) { return smelt::arccos(a); }, 1.0, 0.0},
      {"arctan", [](const Array& a) { return smelt::arctan(a); }, inf, std::numbers::pi / 2},
      {"sinh", [](const Array& a) { return smelt::sinh(a); }, -inf, -inf},
      {"cosh", [](const Array& a) { return smelt::cosh(a); }, -inf, inf},
      {"tanh", [](const Array& a) { return smelt::tanh(a); }, -inf, -1.0},
      {"tanh", [](const Array& a) { return smelt::tanh(a); }, 30.0, 1.0},
      {"arcsinh", [](const Array& a) { return smelt::arcsinh(a); }, -inf, -inf},
      {"arccosh", [](const Array& a) { return smelt::arccosh(a); }, 0.5, nan},
      {"arctanh", [](const Array& a) { return smelt::arctanh(a); }, 1.0, inf},
      {"arctanh", [](const Array& a) { return smelt::arctanh(a); }, -1.0, -inf},
      {"erf", [](const Array& a) { return smelt::erf(a); }, -inf, -1.0},
      {"erf", [](const Array& a) { return smelt::erf(a); }, -0.0, -0.0},
      {"erfinv", [](const Array& a) { return smelt::erfinv(a); }, 1.0, inf},
      {"erfinv", [](const Array& a) { return smelt::erfinv(a); }, -1.0, -inf},
      {"erfinv", [](const Array& a) { return smelt::erfinv(a); }, 1.5, nan},
      {"erfinv", [](const Array& a) { return smelt::erfinv(a); }, -2.0, nan},
      {"erfinv", [](const Array& a) { return smelt::erfinv(a); }, nan, nan},
      {"erfinv", [](const Array& a) { return smelt::erfinv(a); }, -0.0, -0.0},
      {"erfinv", [](const Array& a) { return smelt::erfinv(a); }, 0.0, 0.0},
      {"sigmoid", [](const Array& a) { return smelt::sigmoid(a); }, inf, 1.0},
      {"sigmoid", [](const Array& a) { return smelt::sigmoid(a); }, -inf, 0.0},
      {"sigmoid", [](const Array& a) { return smelt::sigmoid(a); }, nan, nan},
      {"sigmoid", [](const Array& a) { return smelt::sigmoid(a); }, 0.0, 0.5},
      {"relu", [](const Array& a) { return smelt::relu(a); }, nan, nan},
      {"relu", [](const Array& a) { return smelt::relu(a); }, -0.0, 0.0},
      {"relu", [](const Array& a) { return smelt::relu(a); }, -inf, 0.0},
      {"relu", [](const Array& a) { return smelt::relu(a); }, inf, inf},
      {"floor", [](const Array& a) { return smelt::floor(a); }, -0.5, -1.0},
      {"floor", [](const Array& a) { return smelt::floor(a); }, -0.0, -0.0},
      {"floor", [](const Array& a) { return smelt::floor(a); }, -inf, -inf},
      {"ceil", [](const Array& a) { return smelt::ceil(a); }, -0.5, -0.0},
      {"ceil", [](const Array& a) { return smelt::ceil(a); }, nan, nan},
      {"round", [](const Array& a) { return smelt::round(a); }, 0.5, 0.0},
      {"round", [](const Array& a) { return smelt::round(a); }, 1.5, 2.0},
      {"round", [](const Array& a) { return smelt::round(a); }, 2.5, 2.0},
      {"round", [](const Array& a) { return smelt::round(a); }, -0.5, -0.0},
      {"round", [](const Array& a) { return smelt::round(a); }, -2.5, -2.0},
      {"round", [](const Array& a) { return smelt::round(a); }, -3.5, -4.0},
      {"round", [](const Array& a) { return smelt::round(a); }, inf, inf},
  };
  for (const auto& c : cases) {
    for (Dtype d : SMELT_FLOAT_DTYPES) {
      Array a = astype(Array(c.in), d);
      double got = smelt::test::as_doubles(c.op(a))[0];
      SCOPED_TRACE(std::string(c.name) + "(" + std::to_string(c.in) + ") " + dtype_name(d));
      if (std::isnan(c.out)) {
        EXPECT_TRUE(std::isnan(got)) << got;
      } else if (c.out == 0 || std::isinf(c.out)) {
        EXPECT_EQ(got, c.out);
        EXPECT_EQ(std::signbit(got), std::signbit(c.out)) << "sign of " << got;
      } else {
        EXPECT_NEAR(got, c.out, tolerance_for(d) * std::fabs(c.out));
      }
    }
  }
}

TEST(Unary, ClassificationAndLogicalNotOnSpecials) {
  for (Dtype d : SMELT_FLOAT_DTYPES) {
    Array a = astype(Array(std::vector<double>{NAN, INFINITY, -INFINITY, -0.0, 0.0, 1.5}, {6}), d);
    EXPECT_EQ(values<bool>(isnan(a)), (std::vector<bool>{true, false, false, false, false, false}));
    EXPECT_EQ(values<bool>(isinf(a)), (std::vector<bool>{false, true, true, false, false, false}));
    EXPECT_EQ(values<bool>(isfinite(a)), (std::vector<bool>{false, false, false, true, true, true}));
    // NaN is truthy; both zeros are false.
    EXPECT_EQ(values<bool>(logical_not(a)), (std::vector<bool>{false, false, false, true, true, false}));
    EXPECT_EQ(isnan(a).dtype(), bool_);
  }
}

TEST(Unary, ErfinvIsAccurateToAFewUlpsInFloat64) {
  std::vector<double> ys = random_values(3000, -1.0, 1.0, 9);
  for (int k = 1; k <= 53; ++k) {
    ys.push_back(1.0 - std::ldexp(1.0, -k));
    ys.push_back(-1.0 + std::ldexp(1.0, -k));
    ys.push_back(1.0 - 1.5 * std::ldexp(1.0, -k - 1));
  }
  for (int e = 1; e <= 1074; e += 13) ys.push_back(std::ldexp(1.0, -e));
  ys.push_back(0.5);
  ys.push_back(std::nextafter(0.5, 1.0));
  ys.push_back(std::nextafter(0.5, 0.0));
  auto got = as_doubles(erfinv(Array(ys, {static_cast<int64_t>(ys.size())})));
  double worst = 0;
  for (size_t i = 0; i < ys.size(); ++i) {
    long double ref = erfinv_reference(ys[i]);
    double r = static_cast<double>(ref);
    double ulp = std::nextafter(std::fabs(r), INFINITY) - std::fabs(r);
    double err = static_cast<double>(std::fabs(static_cast<long double>(got[i]) - ref)) / ulp;
    worst = std::max(worst, err);
    EXPECT_LE(err, 3.0) << "erfinv(" << ys[i] << ") = " << got[i] << ", reference " << r;
  }
  EXPECT_LE(worst, 3.0);
}

TEST(Unary, SigmoidIsStableForLargeMagnitudes) {
  Array a = Array(std::vector<double>{-1000, -700, -40, 40, 700, 1000}, {6});
  auto v = as_doubles(sigmoid(a));
  EXPECT_EQ(v[0], 0.0);
  EXPECT_NEAR(v[1], std::exp(-700.0), 1e-15 * std::exp(-700.0));
  EXPECT_NEAR(v[2], std::exp(-40.0), 1e-15 * std::exp(-40.0));
  EXPECT_EQ(v[3], 1.0);
  EXPECT_EQ(v[5], 1.0);
  auto f = as_doubles(sigmoid(astype(a, float32)));
  EXPECT_EQ(f[0], 0.0);
  EXPECT_GT(f[2], 0.0);  // 4.2e-18: no underflow through 1/(1+exp(40))
  EXPECT_EQ(f[5], 1.0);
  for (double x : as_doubles(sigmoid(astype(a, float16)))) EXPECT_FALSE(std::isnan(x));
}

TEST(Unary, ZeroDimensionalEmptyAndLarge) {
  Array s = exp(Array(1.0f));
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_NEAR(s.item<float>(), std::exp(1.0f), 1e-6);
  Array e = sin(zeros({2, 0, 3}));
  EXPECT_EQ(e.shape(), (Shape{2, 0, 3}));
  EXPECT_EQ(e.size(), 0);
  e.eval();
  EXPECT_EQ(as_doubles(negative(zeros({0}, int8))).size(), 0u);
  // Large enough for several threads; the result must not depend on the thread count.
  Array big = random_array({300001}, float32, -4, 4, 5);
  int saved = num_threads();
  set_num_threads(1);
  Array one = tanh(big);
  one.eval();
  set_num_threads(4);
  Array four = tanh(big);
  four.eval();
  set_num_threads(saved);
  EXPECT_TRUE(bit_equal(one, four));
  EXPECT_TRUE(all_close(one, reference(as_doubles(big), [](long double x) { return std::tanh(x); }), 2e-6, 1e-9));
}

TEST(Unary, NonContiguousInputs) {
  Array base = random_array({6, 7}, float32, -3, 3, 11);
  std::vector<double> b = as_doubles(base);
  // Transposed.
  Array t = transpose(base);
  std::vector<double> expected;
  for (int j = 0; j < 7; ++j)
    for (int i = 0; i < 6; ++i) expected.push_back(std::exp(b[i * 7 + j]));
  EXPECT_TRUE(all_close(exp(t), expected, 2e-6));
  // Negative-step slice of every other row and column, reversed.
  Array s = slice(base, {5, 6}, {-7, -8}, {-2, -3});
  expected.clear();
  for (int i = 5; i >= 0; i -= 2)
    for (int j = 6; j >= 0; j -= 3) expected.push_back(std::fabs(b[i * 7 + j]));
  EXPECT_EQ(s.shape(), (Shape{3, 3}));
  EXPECT_TRUE(all_close(abs(s), expected, 0));
  // Broadcast view (zero strides).
  Array row = slice(base, {0, 0}, {1, 7});
  Array br = broadcast_to(row, {4, 7});
  expected.clear();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 7; ++j) expected.push_back(b[j] * b[j]);
  EXPECT_TRUE(all_close(square(br), expected, 2e-6));
  Array scalar_view = broadcast_to(Array(2.0), {3, 2});
  EXPECT_TRUE(all_close(sqrt(scalar_view), std::vector<double>(6, std::sqrt(2.0)), 1e-15));
}

TEST(Unary, Errors) {
  Array b = array_of<bool>({true, false, true});
  EXPECT_THROW_MSG(negative(b), DtypeError, "negative: not defined for bool inputs (bool[3]); use logical_not");
  EXPECT_THROW_MSG(-b, DtypeError, "negative: not defined for bool inputs (bool[3])");
  EXPECT_THROW_MSG(sign(b), DtypeError, "sign: not defined for bool inputs (bool[3])");
  EXPECT_THROW_MSG(square(b), DtypeError, "square: not defined for bool inputs (bool[3])");
  EXPECT_THROW_MSG(bitwise_not(zeros({2, 3})), DtypeError,
                   "bitwise_not: needs an integer or bool input, got float32[2,3]");
  EXPECT_THROW_MSG(~ones({4}, float16), DtypeError, "bitwise_not: needs an integer or bool input, got float16[4]");
  for (const OpCase* c : op_cases_of_arity(1))
    EXPECT_THROW_MSG(c->unary(Array()), InvalidArgument, std::string(c->name) + ": an input is an empty handle");
}

}  // namespace
}  // namespace smelt
