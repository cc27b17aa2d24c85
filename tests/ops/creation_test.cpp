// Tests for the creation ops: full, zeros, ones, *_like, arange, linspace, eye, identity, tril, triu.
#include <limits>

#include "test_utils.h"

namespace smelt {
namespace {

using test::all_close;
using test::as_doubles;
using test::bit_equal;
using test::random_array;

const std::vector<Dtype> kAllDtypes = {bool_,  int8,    int16,    int32,   int64,  uint8,  uint16,
                                       uint32, uint64,  float16,  bfloat16, float32, float64};

// ---- full, zeros, ones -----------------------------------------------------------------------

TEST(Full, EveryDtypeConvertsTheValue) {
  for (Dtype dt : kAllDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    Array f = full({2, 3}, Array(2.75), dt);
    EXPECT_EQ(f.shape(), (Shape{2, 3}));
    EXPECT_EQ(f.dtype(), dt);
    double expected = dt == bool_ ? 1.0 : is_floating(dt) ? 2.75 : 2.0;
    EXPECT_TRUE(all_close(f, std::vector<double>(6, expected), 0, 0));
    EXPECT_TRUE(all_close(zeros({3, 0, 2}, dt), {}, 0, 0));
    EXPECT_TRUE(all_close(zeros({4}, dt), std::vector<double>(4, 0.0), 0, 0));
    EXPECT_TRUE(all_close(ones({2, 2}, dt), std::vector<double>(4, 1.0), 0, 0));
  }
}

TEST(Full, KeepsTheValueDtypeAndBroadcastsArrays) {
  Array f = full({3}, Array(int64_t{-7}));
  EXPECT_EQ(f.dtype(), int64);
  EXPECT_EQ(f.to_vector<int64_t>(), (std::vector<int64_t>{-7, -7, -7}));
  Array row(std::vector<float>{1.5f, -2.0f}, {2});
  Array g = full({3, 2}, row, float64);
  EXPECT_EQ(g.dtype(), float64);
  EXPECT_TRUE(all_close(g, {1.5, -2, 1.5, -2, 1.5, -2}, 0, 0));
  Array s = full({}, Array(3.0f));
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.item<float>(), 3.0f);
  // Out-of-range values convert with astype's rules (wrapping for narrowing integers).
  EXPECT_EQ(full({1}, Array(300), uint8).to_vector<int>(), (std::vector<int>{44}));
  Array nan = full({2}, Array(std::numeric_limits<double>::quiet_NaN()), float16);
  EXPECT_TRUE(all_close(nan, {NAN, NAN}, 0, 0));
}

TEST(Full, LikeKeepsShapeDtypeAndDevice) {
  Array a = random_array({2, 5}, int16);
  Array z = zeros_like(a), o = ones_like(transpose(a));
  EXPECT_EQ(z.shape(), (Shape{2, 5}));
  EXPECT_EQ(z.dtype(), int16);
  EXPECT_TRUE(all_close(z, std::vector<double>(10, 0.0), 0, 0));
  EXPECT_EQ(o.shape(), (Shape{5, 2}));
  EXPECT_TRUE(all_close(o, std::vector<double>(10, 1.0), 0, 0));
  EXPECT_EQ(z.device(), a.device());
}

TEST(Full, Errors) {
  EXPECT_THROW_MSG(full({2, -1}, Array(1.0f)), InvalidArgument, "full: negative dimension in shape [2,-1]");
  EXPECT_THROW_MSG(zeros({-3}), InvalidArgument, "zeros: negative dimension in shape [-3]");
  EXPECT_THROW_MSG(ones({1, -2}), InvalidArgument, "ones: negative dimension in shape [1,-2]");
  EXPECT_THROW_MSG(full({2}, Array()), InvalidArgument, "full: an input is an empty handle");
  EXPECT_THROW_MSG(zeros_like(Array()), InvalidArgument, "zeros_like: an input is an empty handle");
  EXPECT_THROW_MSG(ones_like(Array()), InvalidArgument, "ones_like: an input is an empty handle");
}

// ---- arange ----------------------------------------------------------------------------------

TEST(Arange, CountIsCeilOfTheSpan) {
  EXPECT_EQ(arange(0, 10, 3, int32).to_vector<int32_t>(), (std::vector<int32_t>{0, 3, 6, 9}));
  EXPECT_EQ(arange(0, 9, 3, int32).to_vector<int32_t>(), (std::vector<int32_t>{0, 3, 6}));
  EXPECT_EQ(arange(10, 0, -3, int64).to_vector<int64_t>(), (std::vector<int64_t>{10, 7, 4, 1}));
  EXPECT_EQ(arange(5, 0, 1, int32).size(), 0);
  EXPECT_EQ(arange(0, 5, -1, int32).size(), 0);
  EXPECT_EQ(arange(3, 3, 1, int32).size(), 0);
  EXPECT_EQ(arange(0.0, 1.0, 0.1).size(), 10);
  // (1.3 - 1) / 0.1 is 3.0000000000000004 in float64: NumPy's famous fourth element.
  EXPECT_EQ(arange(1.0, 1.3, 0.1).size(), 4);
}

TEST(Arange, FloatValuesAreStartPlusIStep) {
  for (Dtype dt : {float16, bfloat16, float32, float64}) {
    SCOPED_TRACE(dtype_name(dt));
    Array a = arange(-1.5, 2.0, 0.25, dt);
    EXPECT_EQ(a.dtype(), dt);
    std::vector<double> expected;
    for (int i = 0; i < 14; ++i) expected.push_back(-1.5 + i * 0.25);
    EXPECT_TRUE(all_close(a, expected, 0, 0));
  }
  Array d = arange(1.0, -1.0, -0.3, float64);
  std::vector<double> expected;
  for (int i = 0; i < 7; ++i) expected.push_back(1.0 + i * -0.3);
  EXPECT_TRUE(all_close(d, expected, 0, 0));
  EXPECT_EQ(arange(0.0, 4.0).dtype(), float32);
}

TEST(Arange, IntegerDtypes) {
  for (Dtype dt : {int8, int16, int32, int64, uint8, uint16, uint32, uint64}) {
    SCOPED_TRACE(dtype_name(dt));
    Array a = arange(2, 12, 2, dt);
    EXPECT_EQ(a.dtype(), dt);
    EXPECT_TRUE(all_close(a, {2, 4, 6, 8, 10}, 0, 0));
  }
  EXPECT_EQ(arange(5).dtype(), int32);
  EXPECT_EQ(arange(5).to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(4, int64).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(arange(-2, int32).size(), 0);
  // Narrow types wrap like NumPy's casts.
  EXPECT_EQ(arange(126, 130, 1, int8).to_vector<int>(), (std::vector<int>{126, 127, -128, -127}));
  // Large int64 steps stay exact.
  int64_t big = int64_t{1} << 52;
  EXPECT_EQ(arange(static_cast<double>(big), static_cast<double>(big + 6), 2.0, int64).to_vector<int64_t>(),
            (std::vector<int64_t>{big, big + 2, big + 4}));
}

TEST(Arange, FractionalStepsWithIntegerDtypesFollowNumPy) {
  // NumPy's documented behavior: the step used is dtype(start + step) - dtype(start).
  EXPECT_EQ(arange(0, 5, 0.5, int64).to_vector<int64_t>(), std::vector<int64_t>(10, 0));
  EXPECT_EQ(arange(-3, 3, 0.5, int64).to_vector<int64_t>(),
            (std::vector<int64_t>{-3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(arange(0, 5, 1.5, int32).to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(Arange, Errors) {
  EXPECT_THROW_MSG(arange(0, 10, 0, int32), InvalidArgument, "arange: step is 0");
  EXPECT_THROW_MSG(arange(0.0, 1.0, 0.0), InvalidArgument, "arange: step is 0");
  EXPECT_THROW_MSG(arange(0, 5, 1, bool_), DtypeError, "arange: bool is not a valid dtype for a range");
  EXPECT_THROW_MSG(arange(0.0, INFINITY, 1.0), InvalidArgument, "arange: start, stop and step must be finite");
  EXPECT_THROW_MSG(arange(NAN, 1.0, 1.0), InvalidArgument, "arange: start, stop and step must be finite");
  EXPECT_THROW_MSG(arange(0.0, 1e300, 1e-300), InvalidArgument, "arange: the range");
}

// ---- linspace --------------------------------------------------------------------------------

// NumPy's linspace in float64: start + i * step, the last element exactly stop.
std::vector<double> ref_linspace(double start, double stop, int64_t num, bool endpoint) {
  std::vector<double> y;
  int64_t div = endpoint ? num - 1 : num;
  for (int64_t i = 0; i < num; ++i) y.push_back(div > 0 ? i * ((stop - start) / div) + start : start);
  if (endpoint && num > 1) y.back() = stop;
  return y;
}

TEST(Linspace, MatchesNumPyFloat64Values) {
  EXPECT_TRUE(all_close(linspace(0, 1, 5, float64), {0, 0.25, 0.5, 0.75, 1}, 0, 0));
  EXPECT_TRUE(all_close(linspace(0, 1, 5, float64, false), {0, 0.2, 0.4, 0.6000000000000001, 0.8}, 0, 0));
  for (auto [start, stop, num] : std::vector<std::tuple<double, double, int64_t>>{
           {0.1, 0.7, 7}, {-3.3, 9.1, 50}, {5, -5, 11}, {1e-3, 1e3, 33}, {2, 2, 4}}) {
    for (bool endpoint : {true, false}) {
      auto ref = ref_linspace(start, stop, num, endpoint);
      Array y = linspace(start, stop, num, float64, endpoint);
      EXPECT_TRUE(all_close(y, ref, 0, 0));
      if (endpoint) {
        EXPECT_EQ(y.to_vector<double>().back(), stop);  // exactly stop
      }
      EXPECT_TRUE(all_close(linspace(start, stop, num, float32, endpoint),
                            [&] {
                              auto r = ref;
                              for (auto& v : r) v = static_cast<float>(v);
                              return r;
                            }(),
                            0, 0));
    }
  }
}

TEST(Linspace, CountsAndDefaults) {
  EXPECT_EQ(linspace(0, 1, 0).shape(), (Shape{0}));
  EXPECT_EQ(linspace(0, 1, 0).dtype(), float32);
  EXPECT_TRUE(all_close(linspace(3, 7, 1), {3}, 0, 0));
  EXPECT_TRUE(all_close(linspace(3, 7, 1, float32, false), {3}, 0, 0));
  EXPECT_TRUE(all_close(linspace(3, 7, 2), {3, 7}, 0, 0));
}

TEST(Linspace, IntegerDtypesFloor) {
  // NumPy floors before the cast, so negative fractions go down.
  EXPECT_EQ(linspace(-1, 0, 3, int32).to_vector<int32_t>(), (std::vector<int32_t>{-1, -1, 0}));
  EXPECT_EQ(linspace(0, 1, 4, int64).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 1}));
  EXPECT_EQ(linspace(-2, 2, 5, int8).to_vector<int>(), (std::vector<int>{-2, -1, 0, 1, 2}));
  EXPECT_EQ(linspace(0, 300, 3, uint16).to_vector<int>(), (std::vector<int>{0, 150, 300}));
  EXPECT_EQ(linspace(0, 2, 3, bool_).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  Array h = linspace(-1, 1, 9, float16);
  EXPECT_EQ(h.dtype(), float16);
  EXPECT_TRUE(all_close(h, ref_linspace(-1, 1, 9, true), 0, 0));
}

TEST(Linspace, Errors) {
  EXPECT_THROW_MSG(linspace(0, 1, -1), InvalidArgument, "linspace: num must be non-negative, got -1");
}

// ---- eye, identity ---------------------------------------------------------------------------

std::vector<double> ref_eye(int64_t n, int64_t m, int64_t k) {
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) out.push_back(j == i + k ? 1.0 : 0.0);
  return out;
}

TEST(Eye, DiagonalsAndShapes) {
  for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{{3, 3}, {3, 5}, {5, 2}, {1, 1}, {0, 3}, {4, 0}})
    for (int64_t k : {-6, -2, -1, 0, 1, 3, 7}) {
      SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(m) + " k " + std::to_string(k));
      Array e = eye(n, m, k);
      EXPECT_EQ(e.shape(), (Shape{n, m}));
      EXPECT_EQ(e.dtype(), float32);
      EXPECT_TRUE(all_close(e, ref_eye(n, m, k), 0, 0));
    }
  EXPECT_EQ(eye(3).shape(), (Shape{3, 3}));
  EXPECT_TRUE(all_close(eye(2, std::nullopt, 1), {0, 1, 0, 0}, 0, 0));
  // Huge offsets are simply empty diagonals.
  EXPECT_TRUE(all_close(eye(2, 2, std::numeric_limits<int64_t>::max()), {0, 0, 0, 0}, 0, 0));
  EXPECT_TRUE(all_close(eye(2, 2, std::numeric_limits<int64_t>::min()), {0, 0, 0, 0}, 0, 0));
}

TEST(Eye, EveryDtypeAndIdentity) {
  for (Dtype dt : kAllDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    EXPECT_EQ(eye(3, 4, -1, dt).dtype(), dt);
    EXPECT_TRUE(all_close(eye(3, 4, -1, dt), ref_eye(3, 4, -1), 0, 0));
    Array id = identity(4, dt);
    EXPECT_EQ(id.dtype(), dt);
    EXPECT_TRUE(all_close(id, ref_eye(4, 4, 0), 0, 0));
  }
  EXPECT_EQ(identity(0).shape(), (Shape{0, 0}));
}

TEST(Eye, Errors) {
  EXPECT_THROW_MSG(eye(-1), InvalidArgument, "eye: negative dimension, n = -1, m = -1");
  EXPECT_THROW_MSG(eye(2, -3), InvalidArgument, "eye: negative dimension, n = 2, m = -3");
  EXPECT_THROW_MSG(identity(-2), InvalidArgument, "identity: negative dimension, n = -2");
}

// ---- tril, triu ------------------------------------------------------------------------------

std::vector<double> ref_triangle(const std::vector<double>& v, const Shape& shape, int64_t k, bool lower) {
  int64_t n = shape[shape.size() - 2], m = shape.back();
  std::vector<double> out(v.size());
  for (size_t e = 0; e < v.size(); ++e) {
    int64_t j = static_cast<int64_t>(e) % m, i = (static_cast<int64_t>(e) / m) % n;
    bool keep = lower ? j <= i + k : j >= i + k;
    out[e] = keep ? v[e] : 0.0;
  }
  return out;
}

TEST(Triangle, MatchesReferenceOverOffsetsAndBatches) {
  for (Shape shape : {Shape{4, 4}, Shape{3, 6}, Shape{6, 3}, Shape{2, 3, 4, 5}, Shape{1, 1}, Shape{0, 3}, Shape{2, 0, 0}}) {
    Array a = random_array(shape, float32, -3, 3, 5);
    auto v = as_doubles(a);
    for (int64_t k : {-7, -2, -1, 0, 1, 2, 7}) {
      SCOPED_TRACE(shape_to_string(shape) + " k " + std::to_string(k));
      EXPECT_TRUE(all_close(tril(a, k), ref_triangle(v, shape, k, true), 0, 0));
      EXPECT_TRUE(all_close(triu(a, k), ref_triangle(v, shape, k, false), 0, 0));
    }
  }
  Array a = random_array({3, 3}, int32, -9, 9, 6);
  EXPECT_TRUE(all_close(tril(a), ref_triangle(as_doubles(a), {3, 3}, 0, true), 0, 0));
  EXPECT_TRUE(all_close(triu(a), ref_triangle(as_doubles(a), {3, 3}, 0, false), 0, 0));
  EXPECT_TRUE(bit_equal(tril(a, std::numeric_limits<int64_t>::max()), a));
  EXPECT_TRUE(bit_equal(triu(a, std::numeric_limits<int64_t>::min()), a));
}

TEST(Triangle, KeepsEveryDtype) {
  for (Dtype dt : kAllDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    Array a = dt == bool_ ? random_array({4, 5}, dt, 0, 2, 7) : random_array({4, 5}, dt, 1, 9, 7);
    Array l = tril(a, 1), u = triu(a, -1);
    EXPECT_EQ(l.dtype(), dt);
    EXPECT_EQ(u.dtype(), dt);
    EXPECT_TRUE(all_close(l, ref_triangle(as_doubles(a), {4, 5}, 1, true), 0, 0));
    EXPECT_TRUE(all_close(u, ref_triangle(as_doubles(a), {4, 5}, -1, false), 0, 0));
  }
}

TEST(Triangle, NonContiguousAndSpecialValues) {
  Array base = random_array({5, 7}, float64, -3, 3, 8);
  Array t = transpose(base);
  EXPECT_TRUE(all_close(tril(t, -1), ref_triangle(as_doubles(t), {7, 5}, -1, true), 0, 0));
  Array s = slice(base, {4, 6}, {-6, -8}, {-2, -3});
  EXPECT_TRUE(all_close(triu(s, 1), ref_triangle(as_doubles(s), s.shape(), 1, false), 0, 0));
  Array b = broadcast_to(slice(base, {0, 0}, {1, 7}), {3, 4, 7});
  EXPECT_TRUE(all_close(triu(b), ref_triangle(as_doubles(b), {3, 4, 7}, 0, false), 0, 0));
  // NaN and infinities above the diagonal are zeroed, below kept.
  Array n(std::vector<double>{NAN, INFINITY, -INFINITY, NAN}, {2, 2});
  EXPECT_TRUE(all_close(tril(n), {NAN, 0, -INFINITY, NAN}, 0, 0));
  EXPECT_TRUE(all_close(triu(n), {NAN, INFINITY, 0, NAN}, 0, 0));
}

TEST(Triangle, Errors) {
  EXPECT_THROW_MSG(tril(zeros({3})), InvalidArgument, "tril: needs an array of at least 2 dimensions, got float32[3]");
  EXPECT_THROW_MSG(triu(Array(1)), InvalidArgument, "triu: needs an array of at least 2 dimensions, got int32[]");
  EXPECT_THROW_MSG(tril(Array()), InvalidArgument, "tril: an input is an empty handle");
}

}  // namespace
}  // namespace smelt
