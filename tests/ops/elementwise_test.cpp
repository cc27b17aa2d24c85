// Tests for element-wise ops as a whole: broadcasting, empty and 0-d arrays, non-contiguous
// inputs, buffer donation, thread-count independence, where, clip, the operators and errors.
#include <cmath>

#include "ops/elementwise_helpers.h"
#include "src/core/node.h"

namespace smelt {
namespace {

using namespace smelt::test;

/// Row-major values of `shape` from f(index vector).
template <class F>
std::vector<double> tabulate(const Shape& shape, F f) {
  std::vector<double> out;
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t n = shape_size(shape);
  for (int64_t k = 0; k < n; ++k) {
    out.push_back(f(idx));
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

TEST(Elementwise, BroadcastingSizeOneAndZeroD) {
  Array a = random_array({3, 1}, float32, -2, 2, 1);
  Array b = random_array({1, 4}, float32, -2, 2, 2);
  auto x = as_doubles(a), y = as_doubles(b);
  Array s = add(a, b);
  EXPECT_EQ(s.shape(), (Shape{3, 4}));
  EXPECT_TRUE(all_close(s, tabulate({3, 4}, [&](auto& i) { return x[i[0]] + y[i[1]]; }), 1e-6));

  Array c = random_array({2, 3, 4}, int32, -50, 50, 3);
  Array r = array_of<int32_t>({1, -2, 3, 4});
  auto cv = as_doubles(c);
  EXPECT_TRUE(all_close(multiply(c, r), tabulate({2, 3, 4}, [&](auto& i) {
                          const double rv[] = {1, -2, 3, 4};
                          return cv[(i[0] * 3 + i[1]) * 4 + i[2]] * rv[i[2]];
                        }),
                        0));

  Array z = subtract(Array(10.0f), a);  // 0-d with [3,1]
  EXPECT_EQ(z.shape(), (Shape{3, 1}));
  EXPECT_TRUE(all_close(z, {10 - x[0], 10 - x[1], 10 - x[2]}, 1e-6));
  Array zz = multiply(Array(3), Array(4));
  EXPECT_EQ(zz.shape(), Shape{});
  EXPECT_EQ(zz.item<int32_t>(), 12);

  // Three-way broadcast in where.
  Array cond = reshape(array_of<bool>({true, false, true}), {3, 1, 1});
  Array wx = reshape(arange(4, int32), {1, 4, 1});
  Array wy = array_of<int32_t>({-1, -2, -3, -4, -5});
  Array w = where(cond, wx, wy);
  EXPECT_EQ(w.shape(), (Shape{3, 4, 5}));
  EXPECT_TRUE(all_close(w, tabulate({3, 4, 5}, [](auto& i) { return i[0] != 1 ? double(i[1]) : -1.0 - i[2]; }), 0));
}

TEST(Elementwise, EmptyArrays) {
  Array e = add(zeros({1}), zeros({0}));
  EXPECT_EQ(e.shape(), (Shape{0}));
  EXPECT_EQ(as_doubles(e).size(), 0u);
  Array f = multiply(zeros({2, 0, 3}, int16), array_of<int16_t>({1, 2, 3}));
  EXPECT_EQ(f.shape(), (Shape{2, 0, 3}));
  EXPECT_EQ(f.dtype(), int16);
  f.eval();
  Array g = less(zeros({0, 4}), zeros({1, 4}));
  EXPECT_EQ(g.shape(), (Shape{0, 4}));
  EXPECT_EQ(g.dtype(), bool_);
  g.eval();
  Array w = where(zeros({0}, bool_), zeros({0}), Array(1.0f));
  EXPECT_EQ(w.shape(), (Shape{0}));
  w.eval();
  EXPECT_EQ(as_doubles(clip(zeros({0, 2}), Array(0.0f), std::nullopt)).size(), 0u);
  EXPECT_EQ(as_doubles(transpose(add(zeros({0, 3}), zeros({3})))).size(), 0u);
}

TEST(Elementwise, NonContiguousOperands) {
  Array base = random_array({7, 5}, float64, -3, 3, 4);
  Array other = random_array({5, 7}, float64, -3, 3, 5);
  auto bv = as_doubles(base), ov = as_doubles(other);
  // Transposed with contiguous.
  Array t = transpose(base);
  EXPECT_TRUE(all_close(subtract(t, other), tabulate({5, 7}, [&](auto& i) {
                          return bv[i[1] * 5 + i[0]] - ov[i[0] * 7 + i[1]];
                        }),
                        1e-15));
  // Both strided: negative steps on both axes of one, transposed other.
  Array rev = slice(base, {6, 4}, {-8, -6}, {-1, -1});  // [7,5] reversed
  Array tt = transpose(other);                          // [7,5] transposed
  EXPECT_TRUE(all_close(maximum(rev, tt), tabulate({7, 5}, [&](auto& i) {
                          return std::max(bv[(6 - i[0]) * 5 + (4 - i[1])], ov[i[1] * 7 + i[0]]);
                        }),
                        0));
  // Every other column with a broadcast row.
  Array cols = slice(base, {0, 0}, {7, 5}, {1, 2});  // [7,3]
  Array row = broadcast_to(array_of<double>({1, 2, 3}), {7, 3});
  EXPECT_TRUE(all_close(multiply(cols, row), tabulate({7, 3}, [&](auto& i) {
                          return bv[i[0] * 5 + 2 * i[1]] * (i[1] + 1.0);
                        }),
                        1e-15));
  // Scalar on the left of a strided operand.
  EXPECT_TRUE(all_close(power(Array(2.0), rev), tabulate({7, 5}, [&](auto& i) {
                          return std::pow(2.0, bv[(6 - i[0]) * 5 + (4 - i[1])]);
                        }),
                        1e-15));
  // where with a transposed condition and sliced x.
  Array cond = transpose(greater(other, Array(0.0)));  // [7,5]
  Array w = where(cond, rev, Array(-100.0));
  EXPECT_TRUE(all_close(w, tabulate({7, 5}, [&](auto& i) {
                          return ov[i[1] * 7 + i[0]] > 0 ? bv[(6 - i[0]) * 5 + (4 - i[1])] : -100.0;
                        }),
                        0));
}

TEST(Elementwise, LargeInputsDoNotDependOnTheThreadCount) {
  Array a = random_array({400, 300}, float32, -5, 5, 6);
  Array b = random_array({300, 400}, float32, -5, 5, 7);
  Array c = random_array({400, 300}, float32, -1, 1, 8);
  auto run = [&](int threads) {
    set_cpu_threads(threads);
    std::vector<Array> r = {
        add(transpose(b), a),                                  // strided
        multiply(a, Array(1.5f)),                              // scalar fast path
        remainder(a, c),                                       // contiguous
        where(greater(c, Array(0.0f)), a, transpose(b)),      // select, strided
        arctan2(slice(a, {399, 0}, {-401, 300}, {-1, 1}), c),  // negative step
    };
    eval(r);
    return r;
  };
  int saved = cpu_threads();
  auto one = run(1);
  auto many = run(4);
  set_cpu_threads(saved);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(bit_equal(one[i], many[i])) << i;
  auto av = as_doubles(a), bv = as_doubles(b);
  EXPECT_TRUE(all_close(one[0], tabulate({400, 300}, [&](auto& i) {
                          return bv[i[1] * 400 + i[0]] + av[i[0] * 300 + i[1]];
                        }),
                        1e-6, 1e-6));
  std::vector<double> scaled(av.size());
  for (size_t i = 0; i < av.size(); ++i) scaled[i] = static_cast<float>(av[i] * 1.5f);
  EXPECT_TRUE(all_close(one[1], scaled, 1e-7));
}

TEST(Elementwise, DonationReusesAnUnreferencedInput) {
  Array a = random_array({1000}, float32, -1, 1, 9);
  auto av = as_doubles(a);
  Array x = exp(a);
  x.eval();
  const void* p = x.data();
  Array y = sin(x);
  x = Array();  // y's node holds the last reference
  y.eval();
  EXPECT_EQ(y.data(), p);
  std::vector<double> expected;
  for (double v : av) expected.push_back(std::sin(static_cast<float>(std::exp(v))));
  EXPECT_TRUE(all_close(y, expected, 2e-6));

  // Binary: the second operand is donated when the first is still held.
  Array u = multiply(a, Array(2.0f));
  u.eval();
  const void* q = u.data();
  Array z = add(a, u);
  u = Array();
  z.eval();
  EXPECT_EQ(z.data(), q);
  expected.clear();
  for (double v : av) expected.push_back(v + 2 * v);
  EXPECT_TRUE(all_close(z, expected, 1e-6));

  // A comparison writes bool over an int8 input of the same item size.
  Array i8 = astype(random_array({64}, int16, -100, 100, 10), int8);
  i8.eval();
  auto iv = as_doubles(i8);
  const void* r = i8.data();
  Array lt = i8 < 0;  // a weak scalar keeps int8, so the Binary reads i8 itself
  i8 = Array();
  lt.eval();
  EXPECT_EQ(lt.data(), r);
  auto lv = values<bool>(lt);
  for (size_t k = 0; k < iv.size(); ++k) EXPECT_EQ(lv[k], iv[k] < 0);

  // Select donates x.
  Array sx = negative(a);
  sx.eval();
  const void* sp = sx.data();
  Array s = where(greater(a, Array(0.0f)), sx, Array(7.0f));
  sx = Array();
  s.eval();
  EXPECT_EQ(s.data(), sp);
  expected.clear();
  for (double v : av) expected.push_back(v > 0 ? -v : 7.0);
  EXPECT_TRUE(all_close(s, expected, 0));
}

TEST(Elementwise, DonationNeverCorruptsAReferencedInput) {
  Array a = random_array({257}, float64, -1, 1, 11);
  Array x = exp(a);
  x.eval();
  auto before = as_doubles(x);
  // Held by the user.
  Array y = add(x, x);
  Array n = negative(x);
  eval({y, n});
  EXPECT_NE(y.data(), x.data());
  EXPECT_NE(n.data(), x.data());
  EXPECT_EQ(as_doubles(x), before);
  // Held only through a view: the view's data must survive.
  Array view = reshape(x, {257, 1});
  view.eval();
  Array w = sqrt(x);
  x = Array();
  w.eval();
  EXPECT_EQ(as_doubles(view), before);
  // The same node twice in one op.
  Array v = exp(a);
  Array sq = multiply(v, v);
  v = Array();
  std::vector<double> expected;
  for (double e : before) expected.push_back(e * e);
  EXPECT_TRUE(all_close(sq, expected, 1e-15));
}

TEST(Elementwise, Where) {
  // Non-bool conditions are truthy as astype(bool): NaN is true, -0 is false.
  Array cond = Array(std::vector<float>{NAN, -0.0f, 2.0f, 0.0f}, {4});
  Array w = where(cond, array_of<int32_t>({1, 2, 3, 4}), array_of<int32_t>({-1, -2, -3, -4}));
  EXPECT_EQ(w.dtype(), int32);
  EXPECT_EQ(values<int32_t>(w), (std::vector<int32_t>{1, -2, 3, -4}));
  // x and y promote: uint8 with int8 -> int16; int32 with float16 -> float16.
  Array p = where(array_of<int64_t>({0, 5}), array_of<uint8_t>({200, 201}), array_of<int8_t>({-100, -101}));
  EXPECT_EQ(p.dtype(), int16);
  EXPECT_EQ(values<int16_t>(p), (std::vector<int16_t>{-100, 201}));
  Array h = where(array_of<bool>({true, false}), array_of<int32_t>({3, 4}), astype(Array(0.5), float16));
  EXPECT_EQ(h.dtype(), float16);
  EXPECT_TRUE(all_close(h, {3, 0.5}, 0));
  // Every dtype passes its bits through unchanged.
  for (Dtype d : all_dtypes()) {
    Array x = random_array({33}, d, -100, 100, 12);
    Array y = random_array({33}, d, -100, 100, 13);
    Array c = random_array({33}, bool_, -1, 1, 14);
    auto xv = as_doubles(x), yv = as_doubles(y), cv = as_doubles(c);
    std::vector<double> expected;
    for (size_t i = 0; i < xv.size(); ++i) expected.push_back(cv[i] != 0 ? xv[i] : yv[i]);
    Array r = where(c, x, y);
    EXPECT_EQ(r.dtype(), d);
    EXPECT_TRUE(all_close(r, expected, 0)) << dtype_name(d);
  }
  // NaN payloads and signed zeros are copied, not recomputed.
  Array nz = where(array_of<bool>({true, true}), Array(std::vector<double>{-0.0, NAN}, {2}), Array(1.0));
  auto nv = as_doubles(nz);
  EXPECT_TRUE(std::signbit(nv[0]));
  EXPECT_TRUE(std::isnan(nv[1]));
}

TEST(Elementwise, Clip) {
  Array a = Array(std::vector<float>{-3, -1, 0, 1, 3, NAN}, {6});
  auto both = as_doubles(clip(a, Array(-1.5f), Array(2.0f)));
  EXPECT_EQ(std::vector<double>(both.begin(), both.end() - 1), (std::vector<double>{-1.5, -1, 0, 1, 2}));
  EXPECT_TRUE(std::isnan(both[5]));
  auto lo = as_doubles(clip(a, Array(0.0f), std::nullopt));
  EXPECT_EQ(std::vector<double>(lo.begin(), lo.end() - 1), (std::vector<double>{0, 0, 0, 1, 3}));
  EXPECT_TRUE(std::isnan(lo[5]));
  auto hi = as_doubles(clip(a, std::nullopt, Array(0.0f)));
  EXPECT_EQ(std::vector<double>(hi.begin(), hi.end() - 1), (std::vector<double>{-3, -1, 0, 0, 0}));
  // A NaN bound propagates.
  auto nb = as_doubles(clip(a, Array(NAN), std::nullopt));
  for (double v : nb) EXPECT_TRUE(std::isnan(v));
  // lo > hi gives hi (NumPy: minimum applied last).
  EXPECT_EQ(as_doubles(clip(array_of<int32_t>({-5, 0, 5}), Array(2), Array(1))), (std::vector<double>{1, 1, 1}));
  // Bounds broadcast and promote.
  Array m = reshape(array_of<int32_t>({-9, 0, 9, -9, 0, 9}), {2, 3});
  Array c = clip(m, array_of<int32_t>({-1, -2, -3}), array_of<int32_t>({1, 2, 3}));
  EXPECT_EQ(c.dtype(), int32);
  EXPECT_EQ(values<int32_t>(c), (std::vector<int32_t>{-1, 0, 3, -1, 0, 3}));
  EXPECT_EQ(clip(m, Array(0.5f), std::nullopt).dtype(), float32);
  EXPECT_EQ(clip(array_of<uint8_t>({1, 250}), weak_scalar(int64_t{10}, uint8), weak_scalar(int64_t{200}, uint8)).dtype(),
            uint8);
}

TEST(Elementwise, Operators) {
  Array a = array_of<int32_t>({-7, -1, 0, 3, 8});
  Array b = array_of<int32_t>({2, 3, 5, -2, 3});
  EXPECT_EQ(values<int32_t>(a + b), (std::vector<int32_t>{-5, 2, 5, 1, 11}));
  EXPECT_EQ(values<int32_t>(a - b), (std::vector<int32_t>{-9, -4, -5, 5, 5}));
  EXPECT_EQ(values<int32_t>(a * b), (std::vector<int32_t>{-14, -3, 0, -6, 24}));
  EXPECT_EQ((a / b).dtype(), float32);
  EXPECT_TRUE(all_close(a / b, {-3.5, -1.0 / 3, 0, -1.5, 8.0 / 3}, 1e-7));
  EXPECT_EQ(values<int32_t>(a % b), (std::vector<int32_t>{1, 2, 0, -1, 2}));
  EXPECT_EQ(values<int32_t>(-a), (std::vector<int32_t>{7, 1, 0, -3, -8}));
  EXPECT_EQ(values<int32_t>(~a), (std::vector<int32_t>{6, 0, -1, -4, -9}));
  EXPECT_EQ(values<bool>(!a), (std::vector<bool>{false, false, true, false, false}));
  EXPECT_EQ(values<bool>(a == b), (std::vector<bool>{false, false, false, false, false}));
  EXPECT_EQ(values<bool>(a != b), (std::vector<bool>{true, true, true, true, true}));
  EXPECT_EQ(values<bool>(a < b), (std::vector<bool>{true, true, true, false, false}));
  EXPECT_EQ(values<bool>(a <= b), (std::vector<bool>{true, true, true, false, false}));
  EXPECT_EQ(values<bool>(a > b), (std::vector<bool>{false, false, false, true, true}));
  EXPECT_EQ(values<bool>(a >= b), (std::vector<bool>{false, false, false, true, true}));
  EXPECT_EQ(values<bool>(a && b), (std::vector<bool>{true, true, false, true, true}));
  EXPECT_EQ(values<bool>(a || b), (std::vector<bool>{true, true, true, true, true}));
  EXPECT_EQ(values<int32_t>(a & b), (std::vector<int32_t>{-7 & 2, -1 & 3, 0, 3 & -2, 8 & 3}));
  EXPECT_EQ(values<int32_t>(a | b), (std::vector<int32_t>{-7 | 2, -1 | 3, 5, 3 | -2, 8 | 3}));
  EXPECT_EQ(values<int32_t>(a ^ b), (std::vector<int32_t>{-7 ^ 2, -1 ^ 3, 5, 3 ^ -2, 8 ^ 3}));
  EXPECT_EQ(values<int32_t>(a << array_of<int32_t>({1, 2, 3, 4, 40})), (std::vector<int32_t>{-14, -4, 0, 48, 0}));
  EXPECT_EQ(values<int32_t>(a >> array_of<int32_t>({1, 2, 3, 1, 40})), (std::vector<int32_t>{-4, -1, 0, 1, 0}));
  // With C++ scalars on either side (weak: the array's dtype is kept).
  EXPECT_EQ(values<int32_t>(a + 1), (std::vector<int32_t>{-6, 0, 1, 4, 9}));
  EXPECT_EQ(values<int32_t>(10 - a), (std::vector<int32_t>{17, 11, 10, 7, 2}));
  EXPECT_EQ(values<int32_t>(a * 2), (std::vector<int32_t>{-14, -2, 0, 6, 16}));
  EXPECT_EQ((a * 2).dtype(), int32);
  EXPECT_EQ((a * 0.5).dtype(), float32);
  EXPECT_TRUE(all_close(a * 0.5, {-3.5, -0.5, 0, 1.5, 4}, 0));
  EXPECT_TRUE(all_close(1 / a, {-1.0 / 7, -1, INFINITY, 1.0 / 3, 0.125}, 1e-7));
  EXPECT_EQ(values<int32_t>(a % 3), (std::vector<int32_t>{2, 2, 0, 0, 2}));
  EXPECT_EQ(values<int32_t>(-7 % b), (std::vector<int32_t>{1, 2, 3, -1, 2}));
  EXPECT_EQ(values<bool>(a < 1), (std::vector<bool>{true, true, true, false, false}));
  EXPECT_EQ(values<bool>(0 <= a), (std::vector<bool>{false, false, true, true, true}));
  EXPECT_EQ(values<bool>(a == 3), (std::vector<bool>{false, false, false, true, false}));
  EXPECT_EQ(values<bool>(3 != a), (std::vector<bool>{true, true, true, false, true}));
  EXPECT_EQ(values<bool>(a > -1.5), (std::vector<bool>{false, true, true, true, true}));
  EXPECT_EQ(values<bool>(-1 >= a), (std::vector<bool>{true, true, false, false, false}));
  EXPECT_EQ(values<int32_t>(a & 1), (std::vector<int32_t>{1, 1, 0, 1, 0}));
  EXPECT_EQ(values<int32_t>(6 | a), (std::vector<int32_t>{-1, -1, 6, 7, 14}));
  EXPECT_EQ(values<int32_t>(a ^ -1), (std::vector<int32_t>{6, 0, -1, -4, -9}));
  EXPECT_EQ(values<bool>(array_of<bool>({true, false}) & true), (std::vector<bool>{true, false}));
  Array f = Array(std::vector<float>{1.5f, -2.0f}, {2});
  EXPECT_EQ((f + 1).dtype(), float32);
  EXPECT_TRUE(all_close(2.0f * f - 1, {2, -5}, 0));
}

TEST(Elementwise, Errors) {
  Array a = zeros({2, 3});
  EXPECT_THROW_MSG(where(zeros({2}, bool_), a, a), ShapeError,
                   "where: shapes cannot be broadcast together (bool[2], float32[2,3], float32[2,3])");
  EXPECT_THROW_MSG(where(Array(), a, a), InvalidArgument, "where: an input is an empty handle");
  EXPECT_THROW_MSG(where(a, Array(), a), InvalidArgument, "where: an input is an empty handle");
  EXPECT_THROW_MSG(where(a, a, Array()), InvalidArgument, "where: an input is an empty handle");
  EXPECT_THROW_MSG(clip(a, std::nullopt, std::nullopt), InvalidArgument,
                   "clip: at least one of lo and hi must be given (a is float32[2,3])");
  EXPECT_THROW_MSG(clip(a, zeros({4}), std::nullopt), ShapeError,
                   "clip: shapes cannot be broadcast together (float32[2,3], float32[4])");
  EXPECT_THROW_MSG(clip(a, zeros({3}), zeros({2})), ShapeError,
                   "clip: shapes cannot be broadcast together (float32[2,3], float32[3], float32[2])");
  EXPECT_THROW_MSG(clip(Array(), Array(1.0f), std::nullopt), InvalidArgument, "clip: an input is an empty handle");
  EXPECT_THROW_MSG(clip(a, Array(), std::nullopt), InvalidArgument, "clip: an input is an empty handle");
  EXPECT_THROW_MSG(clip(a, std::nullopt, Array()), InvalidArgument, "clip: an input is an empty handle");
  EXPECT_THROW_MSG(copy(Array()), InvalidArgument, "copy: an input is an empty handle");
  // A kernel handed a dtype its op never produces (only reachable by building nodes by hand).
  Array bad = make_array({2}, float32, Device::cpu(), make_prim(PrimKind::Unary, UnaryParams{UnaryOp::Sqrt}),
                         {array_of<int32_t>({1, 4})});
  EXPECT_THROW_MSG(bad.eval(), DtypeError, "Unary(Sqrt): no CPU kernel for dtype int32");
  Array bad2 = make_array({2}, float32, Device::cpu(), make_prim(PrimKind::Binary, BinaryParams{BinaryOp::LeftShift}),
                          {zeros({2}), zeros({2})});
  EXPECT_THROW_MSG(bad2.eval(), DtypeError, "Binary(LeftShift): no CPU kernel for dtype float32");
}

}  // namespace
}  // namespace smelt
