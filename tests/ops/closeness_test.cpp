// isclose, allclose and array_equal: NumPy's semantics, broadcasting, infinities, NaN, dtypes, errors.
#include <cmath>
#include <limits>

#include "smelt/compile.h"
#include "test_utils.h"

namespace smelt {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

/// NumPy's definition, element by element, in the precision it computes in (float32 here, as
/// NumPy does for float32 operands): |a - b| <= atol + rtol * |b| for finite b, or a == b.
bool reference_close(float a, float b, float rtol, float atol, bool equal_nan) {
  if (std::isnan(a) || std::isnan(b)) return equal_nan && std::isnan(a) && std::isnan(b);
  if (a == b) return true;
  if (!std::isfinite(b)) return false;
  float bound = rtol * std::fabs(b);
  bound = atol + bound;
  return std::fabs(a - b) <= bound;
}

TEST(IsClose, MatchesTheDefinitionOnRandomValues) {
  // Pairs at every distance from equal to far apart, with NaN and infinities mixed in.
  auto [ka, kb] = random::split(random::key(3));
  const int64_t n = 4096;
  std::vector<float> a = random::normal(ka, {n}).to_vector<float>();
  std::vector<float> scale = random::uniform(kb, {n}, -9.0, 1.0).to_vector<float>();
  std::vector<float> b(a.size());
  for (size_t i = 0; i < a.size(); ++i) b[i] = a[i] * (1.0f + std::pow(10.0f, scale[i]));
  const float specials[] = {kNan, kInf, -kInf, 0.0f, -0.0f, 1e-30f};
  for (size_t i = 0; i < 96; ++i) {
    a[i * 41 % a.size()] = specials[i % 6];
    b[i * 37 % b.size()] = specials[(i / 6) % 6];
  }
  for (double rtol : {1e-5, 1e-3, 0.0}) {
    for (double atol : {1e-8, 1e-4, 0.0}) {
      for (bool equal_nan : {false, true}) {
        Array got = isclose(Array(a, {n}), Array(b, {n}), rtol, atol, equal_nan);
        ASSERT_EQ(got.dtype(), bool_);
        std::vector<bool> g = got.to_vector<bool>();
        int64_t differing = 0;
        for (size_t i = 0; i < a.size(); ++i)
          differing += g[i] != reference_close(a[i], b[i], static_cast<float>(rtol), static_cast<float>(atol), equal_nan);
        EXPECT_EQ(differing, 0) << "rtol " << rtol << " atol " << atol << " equal_nan " << equal_nan;
      }
    }
  }
}

TEST(IsClose, InfinitiesAndNan) {
  Array a({kInf, kInf, -kInf, kInf, 1.0f, 3e38f, kNan, kNan, kNan});
  Array b({kInf, -kInf, -kInf, 1.0f, kInf, kInf, kNan, 1.0f, kInf});
  EXPECT_EQ(isclose(a, b).to_vector<bool>(),
            (std::vector<bool>{true, false, true, false, false, false, false, false, false}));
  EXPECT_EQ(isclose(a, b, 1e-5, 1e-8, /*equal_nan=*/true).to_vector<bool>(),
            (std::vector<bool>{true, false, true, false, false, false, true, false, false}));
}

TEST(IsClose, IsNotSymmetric) {
  // NumPy's test scales the tolerance by |b| only: 1 vs 1.1 at rtol 0.095 is close one way.
  EXPECT_TRUE(isclose(Array(1.0), Array(1.1), 0.095, 0.0).item<bool>());
  EXPECT_FALSE(isclose(Array(1.1), Array(1.0), 0.095, 0.0).item<bool>());
}

TEST(IsClose, BroadcastsAndIsLazy) {
  Array a = reshape(arange(6, float32), {2, 3});
  Array b({0.0f, 1.0f, 5.0f});
  Array c = isclose(a, b);
  EXPECT_FALSE(c.is_evaluated());  // an op like the others: nothing has run yet
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  EXPECT_EQ(c.to_vector<bool>(), (std::vector<bool>{true, true, false, false, false, true}));
  EXPECT_EQ(isclose(Array(2.0f), b).shape(), (Shape{3}));
}

TEST(IsClose, Dtypes) {
  // Integers compare as float64 (exactly), including with floats: 2^24 + 1 is not 2^24.
  EXPECT_EQ(isclose(Array({1, 2, 3}), Array({1, 2, 4})).to_vector<bool>(), (std::vector<bool>{true, true, false}));
  EXPECT_FALSE(isclose(Array(16777217), Array(16777216.0f), 0.0, 0.0).item<bool>());
  EXPECT_TRUE(isclose(Array(true), Array(1.0)).item<bool>());
  EXPECT_TRUE(isclose(Array(uint64_t{5}), Array(int64_t{5})).item<bool>());
  // Halves compare in float32: the next float16 after 1 is 1 + 2^-10, close at rtol 1e-3 only.
  Array one(float16_t(1.0f)), next(float16_t(1.0f + 1.0f / 1024));
  EXPECT_FALSE(isclose(one, next).item<bool>());
  EXPECT_TRUE(isclose(one, next, 1e-3).item<bool>());
  EXPECT_TRUE(isclose(Array(bfloat16_t(0.1f)), Array(0.1f), 1e-2).item<bool>());
  EXPECT_FALSE(isclose(Array(bfloat16_t(0.1f)), Array(0.1f)).item<bool>());  // 0.10009765625
  // float32 with float64 compares in float64.
  EXPECT_FALSE(isclose(Array(0.1f), Array(0.1), 0.0, 0.0).item<bool>());
}

TEST(IsClose, CompiledEqualsEager) {
  auto f = compile([](const Array& a, const Array& b) { return isclose(a, b, 1e-3, 1e-6, true); });
  auto [ka, kb] = random::split(random::key(11));
  Array a = random::normal(ka, {64, 33});
  Array b = a + random::normal(kb, {64, 33}) * 1e-3f;
  Array b_special = where(random::bernoulli(kb, Array(0.1f), {64, 33}), Array(kNan), b);
  EXPECT_EQ(f(a, b_special).to_vector<bool>(), isclose(a, b_special, 1e-3, 1e-6, true).to_vector<bool>());
}

TEST(IsClose, Errors) {
  Array a = zeros({2, 3}), b = zeros({4});
  EXPECT_THROW_MSG(isclose(a, b), ShapeError, "isclose: shapes cannot be broadcast together (float32[2,3], float32[4])");
  EXPECT_THROW_MSG(isclose(a, a, -1.0), InvalidArgument, "isclose: rtol must be a finite non-negative number, got -1");
  EXPECT_THROW_MSG(isclose(a, a, 1e-5, std::nan("")), InvalidArgument,
                   "isclose: atol must be a finite non-negative number, got nan");
  EXPECT_THROW_MSG(isclose(Array(), a), InvalidArgument, "isclose: an input is an empty handle");
}

TEST(AllClose, ReturnsABool) {
  Array a({1.0f, 2.0f, 3.0f});
  EXPECT_TRUE(allclose(a, a + 1e-7f));
  EXPECT_FALSE(allclose(a, a + 1e-3f));
  EXPECT_TRUE(allclose(a, a + 1e-3f, 1e-3));
  EXPECT_TRUE(allclose(zeros({0}), zeros({0})));           // empty: vacuously true
  EXPECT_TRUE(allclose(reshape(arange(4, float32), {2, 2}), Array({0.0f, 1.0f}) + Array({0.0f, 2.0f}, {2, 1})));
  EXPECT_FALSE(allclose(Array({kNan}), Array({kNan})));
  EXPECT_TRUE(allclose(Array({kNan, kInf}), Array({kNan, kInf}), 1e-5, 1e-8, true));
}

TEST(AllClose, Errors) {
  EXPECT_THROW_MSG(allclose(zeros({2, 3}), zeros({3, 2})), ShapeError,
                   "allclose: shapes cannot be broadcast together (float32[2,3], float32[3,2])");
  EXPECT_THROW_MSG(allclose(zeros({2}, int32), zeros({5}, float16)), ShapeError,
                   "allclose: shapes cannot be broadcast together (int32[2], float16[5])");
  EXPECT_THROW_MSG(allclose(zeros({2}), zeros({2}), 1e-5, -1e-8), InvalidArgument,
                   "allclose: atol must be a finite non-negative number, got -1e-08");
}

TEST(ArrayEqual, ShapesAndValues) {
  Array a = reshape(arange(6), {2, 3});
  EXPECT_TRUE(array_equal(a, reshape(arange(6), {2, 3})));
  EXPECT_FALSE(array_equal(a, reshape(arange(6), {3, 2})));  // different shapes: false, as NumPy
  EXPECT_FALSE(array_equal(a, arange(3)));                    // no broadcasting
  EXPECT_FALSE(array_equal(a, a + 1));
  EXPECT_TRUE(array_equal(zeros({2, 0}), zeros({2, 0})));
  EXPECT_FALSE(array_equal(zeros({2, 0}), zeros({0})));
  EXPECT_TRUE(array_equal(transpose(a), transpose(a)));
  EXPECT_TRUE(array_equal(Array(0.0f), Array(-0.0f)));  // values, not bits
}

TEST(ArrayEqual, DtypesAndNan) {
  EXPECT_TRUE(array_equal(Array({1, 2}), Array({1.0f, 2.0f})));  // 1 == 1.0 (NumPy)
  EXPECT_TRUE(array_equal(Array({1, 2}), Array({int64_t{1}, int64_t{2}})));
  EXPECT_TRUE(array_equal(Array({true, false}), Array({1, 0})));
  // An integer with a float compares in float64: 2^24 + 1 differs from float32 2^24.
  EXPECT_FALSE(array_equal(Array(16777217), Array(16777216.0f)));
  EXPECT_FALSE(array_equal(Array(-1), Array(uint32_t{4294967295u})));
  Array n({1.0f, kNan});
  EXPECT_FALSE(array_equal(n, n));
  EXPECT_TRUE(array_equal(n, n, /*equal_nan=*/true));
  EXPECT_FALSE(array_equal(n, Array({1.0f, 2.0f}), true));
  EXPECT_THROW_MSG(array_equal(n, Array()), InvalidArgument, "array_equal: an input is an empty handle");
}

}  // namespace
}  // namespace smelt
