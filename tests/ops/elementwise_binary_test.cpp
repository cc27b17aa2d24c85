// Tests for the element-wise binary ops: float math against long double, exact integer semantics
// (wraparound, division by zero, shifts, powers), NaN/±inf/-0 cases and bool operands.
#include <cmath>
#include <numbers>

#include "op_cases.h"
#include "ops/elementwise_helpers.h"

namespace smelt {
namespace {

using namespace smelt::test;

TEST(Binary, FloatOpsMatchLongDoubleOnEveryFloatDtype) {
  uint32_t seed = 1;
  int checked = 0;
  for (const OpCase* c : op_cases_of_arity(2)) {
    if (!c->ref2) continue;  // comparisons, logical and bitwise ops: exact tests below
    for (const Domain& dom : c->domains) {
      for (Dtype d : SMELT_FLOAT_DTYPES) {
        Array a = random_array({5, 23}, d, dom.lo, dom.hi, seed++);
        Array b = random_array({5, 23}, d, dom.blo, dom.bhi, seed++);
        Array out = c->binary(a, b);
        EXPECT_EQ(out.dtype(), d) << c->name;
        auto x = as_doubles(a), y = as_doubles(b);
        std::vector<double> expected(x.size());
        for (size_t i = 0; i < x.size(); ++i) expected[i] = static_cast<double>(c->ref2(x[i], y[i]));
        // Remainders cancel: allow an absolute error on the scale of the operands.
        double tol = tolerance_for(d);
        EXPECT_TRUE(all_close(out, expected, tol, tol * 10)) << c->name << " " << dtype_name(d);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 15 * 4);  // 11 ops, 4 of them with divisors of both signs, in 4 float dtypes
}

TEST(Binary, IntegerOperandsOfTrueDivisionAndArctan2GiveFloat32) {
  Array a = array_of<int32_t>({7, -7, 1, 0, 100000});
  Array b = array_of<int32_t>({2, 2, 3, 5, 7});
  Array q = divide(a, b);
  EXPECT_EQ(q.dtype(), float32);
  EXPECT_TRUE(all_close(q, {3.5, -3.5, 1.0 / 3, 0, 100000.0 / 7}, 1e-7));
  EXPECT_EQ(divide(array_of<uint64_t>({1}), array_of<int64_t>({2})).dtype(), float32);
  EXPECT_EQ(divide(array_of<bool>({true}), array_of<bool>({true})).dtype(), float32);
  EXPECT_EQ(divide(array_of<int8_t>({1}), astype(Array(2.0), float16)).dtype(), float16);
  Array t = arctan2(a, b);
  EXPECT_EQ(t.dtype(), float32);
  EXPECT_NEAR(t.to_vector<double>()[1], std::atan2(-7.0, 2.0), 1e-6);
  // Integer division by zero in true division is IEEE.
  auto z = as_doubles(divide(array_of<int16_t>({1, -1, 0}), array_of<int16_t>({0, 0, 0})));
  EXPECT_EQ(z[0], INFINITY);
  EXPECT_EQ(z[1], -INFINITY);
  EXPECT_TRUE(std::isnan(z[2]));
}

TEST(Binary, TrueDivisionAndArctan2OfEveryIntegerDtype) {
  uint32_t seed = 40;
  for (Dtype d : {int8, int16, int32, int64, uint8, uint16, uint32, uint64, bool_}) {
    double lo = is_signed_integral(d) ? -100 : 0, hi = d == bool_ ? 2 : 100;
    Array a = random_array({64}, d, lo, hi, seed++);
    Array b = random_array({64}, d, d == bool_ ? 1 : 1, hi, seed++);
    auto x = as_doubles(a), y = as_doubles(b);
    std::vector<double> q, t;
    for (size_t i = 0; i < x.size(); ++i) {
      q.push_back(x[i] / y[i]);
      t.push_back(std::atan2(x[i], y[i]));
    }
    Array qa = divide(a, b), ta = arctan2(a, b);
    EXPECT_EQ(qa.dtype(), float32) << dtype_name(d);
    EXPECT_EQ(ta.dtype(), float32) << dtype_name(d);
    EXPECT_TRUE(all_close(qa, q, tolerance_for(float32), 1e-7)) << dtype_name(d);
    EXPECT_TRUE(all_close(ta, t, tolerance_for(float32), 1e-7)) << dtype_name(d);
  }
}

// Exact references in 128-bit arithmetic.
template <class T>
T ref_floordiv(T a, T b) {
  if (b == 0) return 0;
  __int128 x = a, y = b, q = x / y;
  if (x % y != 0 && ((x < 0) != (y < 0))) --q;
  return wrap<T>(q);
}
template <class T>
T ref_remainder(T a, T b) {
  if (b == 0) return 0;
  __int128 x = a, y = b, r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return wrap<T>(r);
}
template <class T>
T ref_fmod(T a, T b) {
  if (b == 0) return 0;
  return wrap<T>(static_cast<__int128>(a) % static_cast<__int128>(b));
}
template <class T>
T ref_power(T a, T b) {
  if (static_cast<__int128>(b) < 0) return a == 1 ? T(1) : (a == T(-1) ? ((b % 2) ? T(-1) : T(1)) : T(0));
  uint64_t r = 1;
  for (__int128 i = 0; i < static_cast<__int128>(b); ++i) r *= static_cast<uint64_t>(a);
  return static_cast<T>(r);
}
template <class T>
T ref_shl(T a, T b) {
  __int128 c = b;
  if (c < 0 || c >= static_cast<__int128>(sizeof(T) * 8)) return 0;
  return static_cast<T>(static_cast<uint64_t>(a) << static_cast<int>(c));
}
template <class T>
T ref_shr(T a, T b) {
  __int128 c = b;
  if (c < 0 || c >= static_cast<__int128>(sizeof(T) * 8)) return static_cast<__int128>(a) < 0 ? T(-1) : T(0);
  __int128 p = static_cast<__int128>(1) << static_cast<int>(c), x = a, q = x / p;
  if (x % p != 0 && x < 0) --q;  // floor division by 2^c
  return wrap<T>(q);
}

template <class T>
void check_integer_ops(const std::vector<T>& x, const std::vector<T>& y, bool small_exponents) {
  Array a = array_of(x), b = array_of(y);
  auto add_v = values<T>(add(a, b)), sub_v = values<T>(subtract(a, b)), mul_v = values<T>(multiply(a, b));
  auto fdiv_v = values<T>(floor_divide(a, b)), rem_v = values<T>(remainder(a, b)), fmod_v = values<T>(fmod(a, b));
  auto max_v = values<T>(maximum(a, b)), min_v = values<T>(minimum(a, b));
  auto and_v = values<T>(bitwise_and(a, b)), or_v = values<T>(bitwise_or(a, b)), xor_v = values<T>(bitwise_xor(a, b));
  auto shl_v = values<T>(left_shift(a, b)), shr_v = values<T>(right_shift(a, b));
  auto eq = values<bool>(equal(a, b)), ne = values<bool>(not_equal(a, b)), lt = values<bool>(less(a, b));
  auto le = values<bool>(less_equal(a, b)), gt = values<bool>(greater(a, b)), ge = values<bool>(greater_equal(a, b));
  auto land = values<bool>(logical_and(a, b)), lor = values<bool>(logical_or(a, b));
  auto lxor = values<bool>(logical_xor(a, b));
  std::vector<T> pow_v;
  if (small_exponents) pow_v = values<T>(power(a, b));
  for (size_t i = 0; i < x.size(); ++i) {
    const T p = x[i], q = y[i];
    const __int128 P = p, Q = q;
    SCOPED_TRACE(std::string(dtype_name(dtype_of<T>())) + " a=" + std::to_string(static_cast<long long>(p)) +
                 " b=" + std::to_string(static_cast<long long>(q)));
    EXPECT_EQ(add_v[i], wrap<T>(P + Q));
    EXPECT_EQ(sub_v[i], wrap<T>(P - Q));
    EXPECT_EQ(mul_v[i], wrap<T>(mul_mod(P, Q)));
    EXPECT_EQ(fdiv_v[i], ref_floordiv(p, q));
    EXPECT_EQ(rem_v[i], ref_remainder(p, q));
    EXPECT_EQ(fmod_v[i], ref_fmod(p, q));
    EXPECT_EQ(max_v[i], P >= Q ? p : q);
    EXPECT_EQ(min_v[i], P <= Q ? p : q);
    EXPECT_EQ(and_v[i], static_cast<T>(p & q));
    EXPECT_EQ(or_v[i], static_cast<T>(p | q));
    EXPECT_EQ(xor_v[i], static_cast<T>(p ^ q));
    EXPECT_EQ(shl_v[i], ref_shl(p, q));
    EXPECT_EQ(shr_v[i], ref_shr(p, q));
    EXPECT_EQ(eq[i], P == Q);
    EXPECT_EQ(ne[i], P != Q);
    EXPECT_EQ(lt[i], P < Q);
    EXPECT_EQ(le[i], P <= Q);
    EXPECT_EQ(gt[i], P > Q);
    EXPECT_EQ(ge[i], P >= Q);
    EXPECT_EQ(land[i], P != 0 && Q != 0);
    EXPECT_EQ(lor[i], P != 0 || Q != 0);
    EXPECT_EQ(lxor[i], (P != 0) != (Q != 0));
    if (small_exponents) {
      EXPECT_EQ(pow_v[i], ref_power(p, q));
    }
  }
}

TEST(Binary, Int8AndUInt8ExhaustiveAgainst128BitReference) {
  std::vector<int8_t> sa, sb;
  std::vector<uint8_t> ua, ub;
  for (int i = 0; i < 256; ++i)
    for (int j = 0; j < 256; ++j) {
      sa.push_back(static_cast<int8_t>(i - 128));
      sb.push_back(static_cast<int8_t>(j - 128));
      ua.push_back(static_cast<uint8_t>(i));
      ub.push_back(static_cast<uint8_t>(j));
    }
  check_integer_ops(sa, sb, true);
  check_integer_ops(ua, ub, true);
}

TEST(Binary, EveryIntegerDtypeAgainst128BitReference) {
  for_types<SMELT_INT_TYPES>([]<class T>() {
    auto [x, y] = int_pairs<T>(400, 5);
    check_integer_ops(x, y, false);
    // Shift counts around the bit width, and powers with small exponents.
    std::vector<T> sx = random_ints<T>(300, 8), sy(300);
    for (size_t i = 0; i < sy.size(); ++i)
      sy[i] = static_cast<T>(static_cast<int>(i % (sizeof(T) * 8 + 8)) - (std::is_signed_v<T> ? 4 : 0));
    check_integer_ops(sx, sy, false);
    std::vector<T> px = int_edges<T>(), py;
    auto r = random_ints<T>(100, 9);
    px.insert(px.end(), r.begin(), r.end());
    for (size_t i = 0; i < px.size(); ++i) py.push_back(static_cast<T>(static_cast<int>(i % 70) - (std::is_signed_v<T> ? 5 : 0)));
    check_integer_ops(px, py, true);
  });
}

TEST(Binary, IntegerCornerCases) {
  const int64_t mn = std::numeric_limits<int64_t>::min(), mx = std::numeric_limits<int64_t>::max();
  Array a = array_of<int64_t>({mn, mn, 7, -7, 7, -7, 0, 5});
  Array b = array_of<int64_t>({-1, 0, -2, 2, 0, -1, 0, -5});
  EXPECT_EQ(values<int64_t>(floor_divide(a, b)), (std::vector<int64_t>{mn, 0, -4, -4, 0, 7, 0, -1}));
  EXPECT_EQ(values<int64_t>(remainder(a, b)), (std::vector<int64_t>{0, 0, -1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(values<int64_t>(fmod(a, b)), (std::vector<int64_t>{0, 0, 1, -1, 0, 0, 0, 0}));
  EXPECT_EQ(values<int64_t>(add(array_of<int64_t>({mx}), array_of<int64_t>({1}))), (std::vector<int64_t>{mn}));
  // Powers: wrapping, negative exponents, huge exponents.
  Array base = array_of<int64_t>({2, 2, 1, -1, -1, 3, 0, 2, -2, 0, 7});
  Array ex = array_of<int64_t>({62, 64, -5, -3, -4, -1, -1, mx, 63, 0, 0});
  EXPECT_EQ(values<int64_t>(power(base, ex)),
            (std::vector<int64_t>{int64_t{1} << 62, 0, 1, -1, 1, 0, 0, 0, mn, 1, 1}));
  // 3^(2^31-1) mod 2^32 and 3^(2^63-1) mod 2^64 (computed with Python's pow(3, e, 2**n)).
  EXPECT_EQ(values<int32_t>(power(array_of<int32_t>({-1, 3}), array_of<int32_t>({2147483647, 2147483647}))),
            (std::vector<int32_t>{-1, -1431655765}));
  EXPECT_EQ(values<int64_t>(power(array_of<int64_t>({3}), array_of<int64_t>({mx}))),
            (std::vector<int64_t>{-6148914691236517205}));
  EXPECT_EQ(values<uint8_t>(power(array_of<uint8_t>({3, 2, 0}), array_of<uint8_t>({5, 8, 0}))),
            (std::vector<uint8_t>{243, 0, 1}));
  // Shifts past the width: 0 to the left, the sign fill to the right; negative counts alike.
  Array s = array_of<int32_t>({1, 1, -8, -8, 8, -1, 5});
  Array c = array_of<int32_t>({31, 32, 33, 100, -1, -1, 0});
  EXPECT_EQ(values<int32_t>(left_shift(s, c)), (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), 0, 0, 0, 0, 0, 5}));
  EXPECT_EQ(values<int32_t>(right_shift(s, c)), (std::vector<int32_t>{0, 0, -1, -1, 0, -1, 5}));
  EXPECT_EQ(values<uint16_t>(right_shift(array_of<uint16_t>({65535, 65535}), array_of<uint16_t>({15, 16}))),
            (std::vector<uint16_t>{1, 0}));
  EXPECT_EQ(values<int8_t>(left_shift(array_of<int8_t>({1, 3}), array_of<int8_t>({7, 7}))),
            (std::vector<int8_t>{-128, -128}));
}

TEST(Binary, FloatDivisionSpecialCasesFollowNumPy) {
  struct Case {
    double a, b, floordiv, mod, fmod_v;
  };
  const double inf = INFINITY, nan = NAN;
  const std::vector<Case> cases = {
      {7.5, 2, 3, 1.5, 1.5},         {-7.5, 2, -4, 0.5, -1.5},       {7.5, -2, -4, -0.5, 1.5},
      {-7.5, -2, 3, -1.5, -1.5},     {6, -3, -2, -0.0, 0.0},         {-6, 3, -2, 0.0, -0.0},
      {-0.0, 3, -0.0, 0.0, -0.0},    {0.0, -3, -0.0, -0.0, 0.0},     {5, 0.0, inf, nan, nan},
      {-5, 0.0, -inf, nan, nan},     {0.0, 0.0, nan, nan, nan},      {5, inf, 0.0, 5, 5},
      {-5, inf, -1, inf, -5},        {5, -inf, -1, -inf, 5},         {-5, -inf, 0.0, -5, -5},
      {inf, 5, nan, nan, nan},       {nan, 1, nan, nan, nan},        {1, nan, nan, nan, nan},
  };
  auto same = [](double got, double want) {
    if (std::isnan(want)) return std::isnan(got);
    return got == want && std::signbit(got) == std::signbit(want);
  };
  for (Dtype d : SMELT_FLOAT_DTYPES) {
    std::vector<double> av, bv;
    for (auto& c : cases) {
      av.push_back(c.a);
      bv.push_back(c.b);
    }
    Array a = astype(Array(av, {static_cast<int64_t>(av.size())}), d);
    Array b = astype(Array(bv, {static_cast<int64_t>(bv.size())}), d);
    auto fd = as_doubles(floor_divide(a, b)), md = as_doubles(remainder(a, b)), fm = as_doubles(fmod(a, b));
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(std::to_string(cases[i].a) + " , " + std::to_string(cases[i].b) + " " + dtype_name(d));
      EXPECT_TRUE(same(fd[i], cases[i].floordiv)) << "floor_divide " << fd[i];
      EXPECT_TRUE(same(md[i], cases[i].mod)) << "remainder " << md[i];
      EXPECT_TRUE(same(fm[i], cases[i].fmod_v)) << "fmod " << fm[i];
    }
  }
}

TEST(Binary, NanInfAndSignedZeros) {
  const double inf = INFINITY, nan = NAN;
  for (Dtype d : SMELT_FLOAT_DTYPES) {
    auto arr = [d](std::vector<double> v) { return astype(Array(v, {static_cast<int64_t>(v.size())}), d); };
    Array a = arr({nan, 1, inf, -inf, nan, 0.0, -0.0});
    Array b = arr({1, nan, nan, 1, nan, -0.0, 0.0});
    auto mx = as_doubles(maximum(a, b)), mn = as_doubles(minimum(a, b));
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(std::isnan(mx[i]), i != 3) << i;
      EXPECT_EQ(std::isnan(mn[i]), i != 3) << i;
    }
    EXPECT_EQ(mx[3], 1);
    EXPECT_EQ(mn[3], -inf);
    // Comparisons with NaN are false except !=.
    EXPECT_EQ(values<bool>(equal(a, b)), (std::vector<bool>{false, false, false, false, false, true, true}));
    EXPECT_EQ(values<bool>(not_equal(a, b)), (std::vector<bool>{true, true, true, true, true, false, false}));
    EXPECT_EQ(values<bool>(less(a, b)), (std::vector<bool>{false, false, false, true, false, false, false}));
    EXPECT_EQ(values<bool>(greater_equal(a, b)), (std::vector<bool>{false, false, false, false, false, true, true}));
    // NaN is truthy; zeros of both signs are false.
    EXPECT_EQ(values<bool>(logical_and(a, b)), (std::vector<bool>{true, true, true, true, true, false, false}));
    EXPECT_EQ(values<bool>(logical_or(a, b)), (std::vector<bool>{true, true, true, true, true, false, false}));
    EXPECT_EQ(values<bool>(logical_xor(a, arr({0, 1, 0, 1, 0, 1, 0}))),
              (std::vector<bool>{true, false, true, false, true, true, false}));
    // IEEE arithmetic.
    auto sum = as_doubles(add(arr({inf, inf, -0.0, -0.0}), arr({-inf, 1, -0.0, 0.0})));
    EXPECT_TRUE(std::isnan(sum[0]));
    EXPECT_EQ(sum[1], inf);
    EXPECT_TRUE(std::signbit(sum[2]));
    EXPECT_FALSE(std::signbit(sum[3]));
    auto pw = as_doubles(power(arr({0.0, -8, nan, 1, 2}), arr({-1, 1.0 / 3, 0, nan, inf})));
    EXPECT_EQ(pw[0], inf);
    EXPECT_TRUE(std::isnan(pw[1]));
    EXPECT_EQ(pw[2], 1);
    EXPECT_EQ(pw[3], 1);
    EXPECT_EQ(pw[4], inf);
    auto at = as_doubles(arctan2(arr({0.0, -0.0, 1, inf}), arr({-0.0, -0.0, 0.0, inf})));
    EXPECT_NEAR(at[0], std::numbers::pi, 4e-3 * std::numbers::pi);
    EXPECT_NEAR(at[1], -std::numbers::pi, 4e-3 * std::numbers::pi);
    EXPECT_NEAR(at[2], std::numbers::pi / 2, 4e-3);
    EXPECT_NEAR(at[3], std::numbers::pi / 4, 4e-3);
  }
}

// A contiguous operand with a broadcast one that repeats a short pattern (a per-channel vector
// of a channels-last activation) takes the CPU's periodic path, which copies the pattern into a
// longer run: each element must be what the same op gives on a contiguous copy of the pattern,
// bit for bit, on either side of the op, for patterns of one trailing axis or two, and past the
// path's longest pattern (64 elements).
TEST(Binary, RepeatedPatternOperandsGiveTheBitsOfTheirContiguousCopies) {
  uint32_t seed = 700;
  for (Dtype d : {float32, float64, int32, float16}) {
    for (const Shape& pattern : std::vector<Shape>{{2}, {3}, {8}, {16}, {60}, {100}, {7, 3}, {5, 1, 8}}) {
      Shape full{2, 5};
      for (int64_t e : pattern) full.push_back(e);
      if (pattern.size() < 3) full.insert(full.begin() + 2, 7);
      SCOPED_TRACE(std::string(dtype_name(d)) + " pattern " + shape_to_string(pattern));
      Array a = random_array(full, d, -4, 4, seed++);
      Array b = random_array(pattern, d, 0.5, 3, seed++);
      // The pattern written out to the full shape on the host: a contiguous operand.
      const std::vector<double> bv = as_doubles(b);
      int64_t n = 1;
      for (int64_t e : full) n *= e;
      std::vector<double> wide(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        // Row-major index of element i in `pattern` broadcast from the right (size-1 axes repeat).
        int64_t rest = i, at = 0, step = 1;
        for (size_t k = pattern.size(); k-- > 0;) {
          const int64_t extent = full[full.size() - pattern.size() + k];
          const int64_t idx = rest % extent;
          rest /= extent;
          if (pattern[k] != 1) at += idx * step;
          step *= pattern[k];
        }
        wide[static_cast<size_t>(i)] = bv[static_cast<size_t>(at)];
      }
      Array b_full = astype(Array(wide, full), d);
      for (auto op : {+[](const Array& x, const Array& y) { return subtract(x, y); },
                      +[](const Array& x, const Array& y) { return divide(x, y); },
                      +[](const Array& x, const Array& y) { return maximum(x, y); },
                      +[](const Array& x, const Array& y) { return less(x, y); }}) {
        EXPECT_TRUE(bit_equal(op(a, b), op(a, b_full))) << "pattern on the right";
        EXPECT_TRUE(bit_equal(op(b, a), op(b_full, a))) << "pattern on the left";
      }
    }
  }
}

TEST(Binary, HalfArithmeticRoundsOncePerOp) {
  // 2049 is not a float16: 2048 + 1 rounds to even (2048); 1 + 2^-11 rounds to 1.
  Array a = astype(Array(std::vector<double>{2048, 1, 65504}, {3}), float16);
  Array b = astype(Array(std::vector<double>{1, std::ldexp(1.0, -11), 65504}, {3}), float16);
  auto s = as_doubles(add(a, b));
  EXPECT_EQ(s[0], 2048);
  EXPECT_EQ(s[1], 1);
  EXPECT_EQ(s[2], INFINITY);  // overflow
  Array c = astype(Array(std::vector<double>{1, 3}, {2}), bfloat16);
  auto q = as_doubles(divide(c, astype(Array(std::vector<double>{3, 1}, {2}), bfloat16)));
  EXPECT_EQ(q[0], static_cast<double>(static_cast<float>(bfloat16_t(1.0f / 3.0f))));
  EXPECT_EQ(q[1], 3);
}

TEST(Binary, BoolOperands) {
  Array t = array_of<bool>({true, true, false, false});
  Array u = array_of<bool>({true, false, true, false});
  EXPECT_EQ(add(t, u).dtype(), bool_);
  EXPECT_EQ(values<bool>(add(t, u)), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(values<bool>(multiply(t, u)), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(values<bool>(maximum(t, u)), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(values<bool>(minimum(t, u)), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(values<bool>(bitwise_and(t, u)), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(values<bool>(bitwise_or(t, u)), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(values<bool>(bitwise_xor(t, u)), (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(values<bool>(greater(t, u)), (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ(values<bool>(equal(t, u)), (std::vector<bool>{true, false, false, true}));
  // Integer-only arithmetic on bools computes in int8, as NumPy.
  Array fd = floor_divide(t, u);
  EXPECT_EQ(fd.dtype(), int8);
  EXPECT_EQ(values<int8_t>(fd), (std::vector<int8_t>{1, 0, 0, 0}));
  EXPECT_EQ(power(t, u).dtype(), int8);
  EXPECT_EQ(values<int8_t>(power(t, u)), (std::vector<int8_t>{1, 1, 0, 1}));
  EXPECT_EQ(values<int8_t>(remainder(t, u)), (std::vector<int8_t>{0, 0, 0, 0}));
  EXPECT_EQ(fmod(t, u).dtype(), int8);
  EXPECT_EQ(values<int8_t>(left_shift(t, u)), (std::vector<int8_t>{2, 1, 0, 0}));
  EXPECT_EQ(right_shift(t, u).dtype(), int8);
  Array q = divide(t, u);
  EXPECT_EQ(q.dtype(), float32);
  auto qv = as_doubles(q);
  EXPECT_EQ(qv[0], 1);
  EXPECT_EQ(qv[1], INFINITY);
  EXPECT_TRUE(std::isnan(qv[3]));
}

TEST(Binary, MixedDtypesComputeInThePromotedType) {
  // int8 + uint8 -> int16: no wrap at 127/255.
  Array a = array_of<int8_t>({127, -128, -1});
  Array b = array_of<uint8_t>({255, 255, 1});
  Array s = add(a, b);
  EXPECT_EQ(s.dtype(), int16);
  EXPECT_EQ(values<int16_t>(s), (std::vector<int16_t>{382, 127, 0}));
  EXPECT_EQ(values<bool>(less(a, b)), (std::vector<bool>{true, true, true}));
  // int32 with float16 -> float16 (the float's dtype).
  Array h = multiply(array_of<int32_t>({3, -2}), astype(Array(std::vector<double>{0.5, 1.5}, {2}), float16));
  EXPECT_EQ(h.dtype(), float16);
  EXPECT_TRUE(all_close(h, {1.5, -3}, 0));
  // float16 with bfloat16 -> float32.
  Array f = add(astype(Array(1.0), float16), astype(Array(2.0), bfloat16));
  EXPECT_EQ(f.dtype(), float32);
  EXPECT_EQ(f.item<float>(), 3.0f);
  // int64 with uint64 -> float64.
  Array g = subtract(array_of<int64_t>({-1}), array_of<uint64_t>({1}));
  EXPECT_EQ(g.dtype(), float64);
  EXPECT_EQ(g.item<double>(), -2.0);
}

TEST(Binary, Errors) {
  Array f = zeros({2, 3});
  Array i = zeros({3}, int32);
  Array t = array_of<bool>({true, false});
  EXPECT_THROW_MSG(subtract(t, t), DtypeError,
                   "subtract: not defined for bool inputs (bool[2] and bool[2]); use logical_xor or bitwise_xor");
  EXPECT_THROW_MSG(t - t, DtypeError, "subtract: not defined for bool inputs");
  EXPECT_THROW_MSG(bitwise_and(f, i), DtypeError, "bitwise_and: needs integer or bool inputs, got float32[2,3] and int32[3]");
  EXPECT_THROW_MSG(bitwise_or(i, f), DtypeError, "bitwise_or: needs integer or bool inputs, got int32[3] and float32[2,3]");
  EXPECT_THROW_MSG(bitwise_xor(f, f), DtypeError, "bitwise_xor: needs integer or bool inputs");
  EXPECT_THROW_MSG(f & i, DtypeError, "bitwise_and: needs integer or bool inputs");
  EXPECT_THROW_MSG(left_shift(i, f), DtypeError, "left_shift: needs integer inputs, got int32[3] and float32[2,3]");
  EXPECT_THROW_MSG(right_shift(astype(f, float64), i), DtypeError,
                   "right_shift: needs integer inputs, got float64[2,3] and int32[3]");
  EXPECT_THROW_MSG(i << f, DtypeError, "left_shift: needs integer inputs");
  EXPECT_THROW_MSG(add(zeros({2, 3}), zeros({4})), ShapeError,
                   "add: shapes cannot be broadcast together (float32[2,3], float32[4])");
  EXPECT_THROW_MSG(zeros({2, 3}, int8) < zeros({2, 2}), ShapeError,
                   "less: shapes cannot be broadcast together (int8[2,3], float32[2,2])");
  for (const OpCase* c : op_cases_of_arity(2)) {
    const std::string name = c->name;
    EXPECT_THROW_MSG(c->binary(Array(), i), InvalidArgument, name + ": an input is an empty handle");
    EXPECT_THROW_MSG(c->binary(i, Array()), InvalidArgument, name + ": an input is an empty handle");
    EXPECT_THROW_MSG(c->binary(zeros({2}, int32), zeros({3}, int32)), ShapeError,
                     name + ": shapes cannot be broadcast together (int32[2], int32[3])");
  }
}

}  // namespace
}  // namespace smelt
