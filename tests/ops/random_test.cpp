// Tests for counter-based random numbers: Threefry known answers, JAX layouts, determinism, statistics.
#include <cmath>
#include <limits>
#include <set>

#include "src/backend/cpu/threefry.h"
#include "test_utils.h"

namespace smelt {
namespace {

using test::all_close;
using test::bit_equal;

// JAX's threefry_random_bits (non-partitionable) for fewer than 2^32 - 1 elements.
std::vector<uint32_t> ref_bits(uint32_t k0, uint32_t k1, int64_t n) {
  std::vector<uint32_t> out(n);
  int64_t h = (n + 1) / 2;
  for (int64_t j = 0; j < h; ++j) {
    bool real = j + h < n;
    auto r = cpu::threefry2x32(k0, k1, static_cast<uint32_t>(j), real ? static_cast<uint32_t>(j + h) : 0u);
    out[j] = r.x0;
    if (real) out[j + h] = r.x1;
  }
  return out;
}

Array row(const Array& keys, int64_t i) { return reshape(slice(keys, {i, 0}, {i + 1, 2}), {2}); }

struct Moments {
  double mean = 0, var = 0, min = INFINITY, max = -INFINITY;
};
Moments moments(Array a) {
  auto v = a.to_vector<double>();
  Moments m;
  for (double x : v) {
    m.mean += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= static_cast<double>(v.size());
  return m;
}

// ---- Threefry and keys -----------------------------------------------------------------------

TEST(Threefry, Random123KnownAnswers) {
  auto r = cpu::threefry2x32(0x13198a2e, 0x03707344, 0x243f6a88, 0x85a308d3);
  EXPECT_EQ(r.x0, 0xc4923a9cu);
  EXPECT_EQ(r.x1, 0x483df7a0u);
  r = cpu::threefry2x32(0, 0, 0, 0);
  EXPECT_EQ(r.x0, 0x6b200159u);
  EXPECT_EQ(r.x1, 0x99ba4efeu);
  r = cpu::threefry2x32(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff);
  EXPECT_EQ(r.x0, 0x1cb996fcu);
  EXPECT_EQ(r.x1, 0xbb002be7u);
}

TEST(RandomKey, FromSeed) {
  Array k = random::key(0x123456789abcdef0ull);
  EXPECT_EQ(k.dtype(), uint32);
  EXPECT_EQ(k.shape(), Shape{2});
  EXPECT_EQ(k.to_vector<uint32_t>(), (std::vector<uint32_t>{0x12345678u, 0x9abcdef0u}));
  EXPECT_EQ(random::key(42).to_vector<uint32_t>(), (std::vector<uint32_t>{0u, 42u}));
}

TEST(RandomKey, SplitMatchesJax) {
  // jax.random.split(jax.random.PRNGKey(0)) and PRNGKey(42) with the threefry2x32 PRNG.
  EXPECT_EQ(random::split(random::key(0), 2).to_vector<uint32_t>(),
            (std::vector<uint32_t>{4146024105u, 967050713u, 2718843009u, 1272950319u}));
  EXPECT_EQ(random::split(random::key(42), 2).to_vector<uint32_t>(),
            (std::vector<uint32_t>{2465931498u, 3679230171u, 255383827u, 267815257u}));
  EXPECT_EQ(random::split(random::key(0), 2).shape(), (Shape{2, 2}));
  EXPECT_EQ(random::split(random::key(0), 0).shape(), (Shape{0, 2}));
}

TEST(RandomKey, SplitIntoAPair) {
  // `auto [k1, k2] = split(key)` gives the rows of split(key, 2): JAX's `k1, k2 = split(key)`.
  auto [k1, k2] = random::split(random::key(0));
  EXPECT_EQ(k1.shape(), (Shape{2}));
  EXPECT_EQ(k1.dtype(), uint32);
  EXPECT_EQ(k1.to_vector<uint32_t>(), (std::vector<uint32_t>{4146024105u, 967050713u}));
  EXPECT_EQ(k2.to_vector<uint32_t>(), (std::vector<uint32_t>{2718843009u, 1272950319u}));
  // Each half is a key in its own right: draws from it equal draws from the row of split(key, 2).
  Array rows = random::split(random::key(0), 2);
  EXPECT_EQ(random::bits(k2, {5}).to_vector<uint32_t>(),
            random::bits(take(rows, Array(1), 0), {5}).to_vector<uint32_t>());
  EXPECT_THROW_MSG(random::split(zeros({3})), InvalidArgument,
                   "split: the key must be uint32[2] (from random::key, or one row of random::split), got float32[3]");
}

TEST(RandomKey, SplitGivesDistinctKeys) {
  Array parent = random::key(7);
  Array keys = random::split(parent, 1000);
  auto v = keys.to_vector<uint32_t>();
  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (size_t i = 0; i < v.size(); i += 2) seen.insert({v[i], v[i + 1]});
  seen.insert({0u, 7u});
  EXPECT_EQ(seen.size(), 1001u);
  // A row of a split is a key (a strided view works as well as a fresh array).
  Array sub = row(keys, 3);
  auto expected = ref_bits(v[6], v[7], 5);
  EXPECT_EQ(random::bits(sub, {5}).to_vector<uint32_t>(), expected);
  Array column = reshape(slice(transpose(keys), {0, 3}, {2, 4}), {2});
  EXPECT_EQ(random::bits(column, {5}).to_vector<uint32_t>(), expected);
}

// ---- bits ------------------------------------------------------------------------------------

TEST(RandomBits, MatchJaxLayout) {
  // PRNGKey(0), one element: the zero-key, zero-counter Random123 vector.
  EXPECT_EQ(random::bits(random::key(0), {1}).to_vector<uint32_t>(), (std::vector<uint32_t>{0x6b200159u}));
  for (int64_t n : {0, 1, 2, 3, 10, 11, 1001}) {
    SCOPED_TRACE(n);
    Array b = random::bits(random::key(1234567), {n});
    EXPECT_EQ(b.dtype(), uint32);
    EXPECT_EQ(b.to_vector<uint32_t>(), ref_bits(0, 1234567, n));
  }
  Array m = random::bits(random::key(5), {3, 0, 2});
  EXPECT_EQ(m.shape(), (Shape{3, 0, 2}));
  EXPECT_EQ(random::bits(random::key(5), {}).to_vector<uint32_t>(), ref_bits(0, 5, 1));
  // The element order is row-major over the shape.
  EXPECT_EQ(random::bits(random::key(9), {3, 7}).to_vector<uint32_t>(), ref_bits(0, 9, 21));
}

TEST(RandomBits, DeterministicAndThreadCountIndependent) {
  const int saved = cpu_threads();
  Array key = random::key(2024);
  std::vector<Array> runs;
  for (int threads : {1, 2, 5}) {
    set_cpu_threads(threads);
    runs.push_back(random::bits(key, {(1 << 20) + 3}));
    runs.back().eval();
  }
  set_cpu_threads(saved);
  EXPECT_TRUE(bit_equal(runs[1], runs[0]));
  EXPECT_TRUE(bit_equal(runs[2], runs[0]));
  EXPECT_EQ(runs[0].to_vector<uint32_t>(), ref_bits(0, 2024, (1 << 20) + 3));
}

TEST(RandomBits, DifferentKeysDiffer) {
  auto a = random::bits(random::key(1), {64}).to_vector<uint32_t>();
  auto b = random::bits(random::key(2), {64}).to_vector<uint32_t>();
  int same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  EXPECT_LE(same, 1);
}

// ---- uniform ---------------------------------------------------------------------------------

TEST(Uniform, MatchesJaxBitsToFloat) {
  // jax.random.uniform(PRNGKey(0)) == 0.41845703.
  EXPECT_EQ(random::uniform(random::key(0), {}).item<float>(), 0.41845703125f);
  // float32: the top 23 bits as a mantissa; float64: 52 bits from two words (hi << 20 | lo >> 12).
  Array key = random::key(77);
  auto w = ref_bits(0, 77, 1000);
  auto u = random::uniform(key, {1000}).to_vector<float>();
  for (size_t i = 0; i < u.size(); ++i) ASSERT_EQ(u[i], static_cast<float>(w[i] >> 9) * 0x1p-23f) << i;
  auto w2 = ref_bits(0, 77, 2000);
  auto d = random::uniform(key, {1000}, 0.0, 1.0, float64).to_vector<double>();
  for (size_t i = 0; i < d.size(); ++i) {
    uint64_t m = (static_cast<uint64_t>(w2[i]) << 20) | (w2[1000 + i] >> 12);
    ASSERT_EQ(d[i], static_cast<double>(m) * 0x1p-52) << i;
  }
}

TEST(Uniform, MeanVarianceAndRange) {
  const int64_t n = 100000;
  for (Dtype dt : {float32, float64, float16, bfloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    Array u = random::uniform(random::key(3), {n}, 0.0, 1.0, dt);
    EXPECT_EQ(u.dtype(), dt);
    auto m = moments(u);
    EXPECT_NEAR(m.mean, 0.5, 0.005);
    EXPECT_NEAR(m.var, 1.0 / 12, 0.0015);
    EXPECT_GE(m.min, 0.0);
    EXPECT_LT(m.max, 1.0);
    Array s = random::uniform(random::key(4), {200, 500}, -2.0, 5.0, dt);
    EXPECT_EQ(s.shape(), (Shape{200, 500}));
    auto ms = moments(s);
    EXPECT_NEAR(ms.mean, 1.5, 0.04);
    EXPECT_NEAR(ms.var, 49.0 / 12, 0.06);
    EXPECT_GE(ms.min, -2.0);
    EXPECT_LT(ms.max, 5.0);
  }
}

TEST(Uniform, StaysBelowHighWhenRoundingWouldReachIt) {
  // In float16 every draw of [0.999, 1) rounds to 1 or to the value just below: all must stay below.
  auto v = random::uniform(random::key(8), {4096}, 0.999, 1.0, float16).to_vector<float>();
  for (float x : v) {
    ASSERT_LT(x, 1.0f);
    ASSERT_GE(x, 0.9990234375f);  // 0.999 in float16
  }
  auto b = random::uniform(random::key(8), {4096}, 1.0, 1.0001, float32).to_vector<float>();
  for (float x : b) {
    ASSERT_LT(x, 1.0001f);
    ASSERT_GE(x, 1.0f);
  }
}

TEST(Uniform, DeterministicAndThreadCountIndependent) {
  const int saved = cpu_threads();
  std::vector<Array> f32, f64;
  for (int threads : {1, 2}) {
    set_cpu_threads(threads);
    f32.push_back(random::uniform(random::key(11), {300001}));
    f64.push_back(random::normal(random::key(11), {300001}, 0.0, 1.0, float64));
    eval({f32.back(), f64.back()});
  }
  set_cpu_threads(saved);
  EXPECT_TRUE(bit_equal(f32[0], f32[1]));
  EXPECT_TRUE(bit_equal(f64[0], f64[1]));
  EXPECT_TRUE(bit_equal(random::uniform(random::key(11), {300001}), f32[0]));
}

// ---- normal ----------------------------------------------------------------------------------

TEST(Normal, MatchesJaxAndMoments) {
  // jax.random.normal(PRNGKey(0)) == -0.20584226.
  EXPECT_NEAR(random::normal(random::key(0), {}).item<float>(), -0.20584226f, 2e-6);
  const int64_t n = 100000;
  for (Dtype dt : {float32, float64, float16, bfloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    Array z = random::normal(random::key(5), {n}, 0.0, 1.0, dt);
    EXPECT_EQ(z.dtype(), dt);
    auto m = moments(z);
    EXPECT_NEAR(m.mean, 0.0, 0.02);
    EXPECT_NEAR(m.var, 1.0, 0.03);
    EXPECT_TRUE(std::isfinite(m.min) && std::isfinite(m.max));
    auto s = moments(random::normal(random::key(6), {n}, 3.0, 0.5, dt));
    EXPECT_NEAR(s.mean, 3.0, 0.01 + (dt == bfloat16 ? 0.02 : 0.0));
    EXPECT_NEAR(s.var, 0.25, 0.01);
  }
  // Tail mass: about 4.55% beyond two standard deviations.
  auto v = random::normal(random::key(12), {n}).to_vector<float>();
  double tail = 0;
  for (float x : v) tail += std::fabs(x) > 2.0f;
  EXPECT_NEAR(tail / n, 0.0455, 0.004);
}

// ---- bernoulli, randint, categorical ---------------------------------------------------------

TEST(Bernoulli, Frequencies) {
  const int64_t n = 100000;
  Array b = random::bernoulli(random::key(1), Array(0.3f), {n});
  EXPECT_EQ(b.dtype(), bool_);
  auto m = moments(b);
  EXPECT_NEAR(m.mean, 0.3, 0.007);
  // p broadcasts against the shape: one probability per column.
  Array p(std::vector<double>{0.0, 0.1, 0.5, 0.9, 1.0}, {5});
  auto v = random::bernoulli(random::key(2), p, {20000, 5}).to_vector<bool>();
  const double probs[5] = {0.0, 0.1, 0.5, 0.9, 1.0};
  for (int c = 0; c < 5; ++c) {
    double count = 0;
    for (int64_t r = 0; r < 20000; ++r) count += v[r * 5 + c];
    EXPECT_NEAR(count / 20000, probs[c], 0.015) << c;
  }
  Array h = random::bernoulli(random::key(3), astype(Array(0.25), float16), {n});
  EXPECT_NEAR(moments(h).mean, 0.25, 0.007);
}

TEST(Randint, RangeAndUniformity) {
  const int64_t n = 100000;
  Array r = random::randint(random::key(1), -3, 7, {n});
  EXPECT_EQ(r.dtype(), int32);
  auto v = r.to_vector<int64_t>();
  std::vector<int64_t> counts(10, 0);
  for (int64_t x : v) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 7);
    counts[x + 3]++;
  }
  for (int64_t c : counts) EXPECT_NEAR(static_cast<double>(c), n / 10.0, 500.0);
  for (Dtype dt : {int8, int16, int64, uint8, uint16, uint32, uint64}) {
    SCOPED_TRACE(dtype_name(dt));
    int64_t lo = is_unsigned_integral(dt) ? 5 : -100, hi = 120;
    Array x = random::randint(random::key(2), lo, hi, {5000}, dt);
    EXPECT_EQ(x.dtype(), dt);
    auto m = moments(x);
    EXPECT_GE(m.min, lo);
    EXPECT_LT(m.max, hi);
    EXPECT_NEAR(m.mean, (lo + hi - 1) / 2.0, (hi - lo) * 0.03);
  }
  // The full int8 range and a huge int64 span.
  auto full8 = moments(random::randint(random::key(3), -128, 128, {20000}, int8));
  EXPECT_EQ(full8.min, -128);
  EXPECT_EQ(full8.max, 127);
  const int64_t big = std::numeric_limits<int64_t>::max();
  auto w = random::randint(random::key(4), -big, big, {1000}, int64).to_vector<int64_t>();
  int negatives = 0;
  for (int64_t x : w) negatives += x < 0;
  EXPECT_NEAR(negatives, 500, 80);
  // A span of one gives low.
  EXPECT_EQ(random::randint(random::key(5), 9, 10, {4}).to_vector<int>(), (std::vector<int>{9, 9, 9, 9}));
}

TEST(Categorical, FrequenciesFollowSoftmax) {
  const int64_t n = 60000;
  std::vector<double> probs = {0.1, 0.2, 0.7};
  Array logits(std::vector<float>{std::log(0.1f) + 3, std::log(0.2f) + 3, std::log(0.7f) + 3}, {3});
  Array s = random::categorical(random::key(1), logits, -1, Shape{n});
  EXPECT_EQ(s.dtype(), int32);
  EXPECT_EQ(s.shape(), (Shape{n}));
  auto v = s.to_vector<int>();
  std::vector<double> counts(3, 0);
  for (int x : v) {
    ASSERT_GE(x, 0);
    ASSERT_LT(x, 3);
    counts[x]++;
  }
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(counts[c] / n, probs[c], 0.01) << c;
}

TEST(Categorical, BatchesAxesAndShapes) {
  // Two batch rows with opposite preferences, classes along axis 0 of a [3, 2] array.
  Array logits(std::vector<double>{0.0, 5.0, -10.0, -10.0, 5.0, 0.0}, {3, 2});
  Array one = random::categorical(random::key(2), logits, 0);
  EXPECT_EQ(one.shape(), (Shape{2}));
  Array many = random::categorical(random::key(3), logits, 0, Shape{4000, 2});
  EXPECT_EQ(many.shape(), (Shape{4000, 2}));
  auto v = many.to_vector<int>();
  double first_col_2 = 0, second_col_0 = 0;
  for (int64_t r = 0; r < 4000; ++r) {
    first_col_2 += v[r * 2] == 2;
    second_col_0 += v[r * 2 + 1] == 0;
    ASSERT_NE(v[r * 2], 1);  // probability e^-15
  }
  // softmax([0, -10, 5]) puts 0.9933 on class 2; softmax([5, -10, 0]) 0.9933 on class 0.
  EXPECT_NEAR(first_col_2 / 4000, 0.9933, 0.006);
  EXPECT_NEAR(second_col_0 / 4000, 0.9933, 0.006);
  // Batch dims of size one broadcast to the requested shape.
  Array b = random::categorical(random::key(4), astype(Array(std::vector<float>{1, 2, 3}, {1, 3}), float16), 1, Shape{5, 7});
  EXPECT_EQ(b.shape(), (Shape{5, 7}));
  for (int x : b.to_vector<int>()) EXPECT_TRUE(x >= 0 && x < 3);
}

TEST(RandomShapes, ZeroSizeAndScalars) {
  Array k = random::key(6);
  for (Dtype dt : {float16, bfloat16, float32, float64}) {
    EXPECT_EQ(random::uniform(k, {0, 3}, 0, 1, dt).shape(), (Shape{0, 3}));
    EXPECT_EQ(random::uniform(k, {0, 3}, 0, 1, dt).to_vector<double>().size(), 0u);
    EXPECT_EQ(random::normal(k, {4, 0}, 0, 1, dt).to_vector<double>().size(), 0u);
    double u = random::uniform(k, {}, 2, 3, dt).item<double>();
    EXPECT_TRUE(u >= 2 && u < 3);
  }
  EXPECT_EQ(random::randint(k, 0, 5, {0}).to_vector<int>().size(), 0u);
  int r = random::randint(k, 0, 5, {}).item<int>();
  EXPECT_TRUE(r >= 0 && r < 5);
  EXPECT_EQ(random::bernoulli(k, Array(0.5f), {0}).shape(), (Shape{0}));
  EXPECT_EQ(random::bernoulli(k, Array(0.5f), {}).shape(), Shape{});
  EXPECT_EQ(random::categorical(k, zeros({4})).shape(), Shape{});
  EXPECT_EQ(random::categorical(k, zeros({4}), -1, Shape{0}).to_vector<int>().size(), 0u);
  EXPECT_EQ(random::split(k, 5).shape(), (Shape{5, 2}));
}

// ---- errors ----------------------------------------------------------------------------------

TEST(RandomErrors, BadKeys) {
  Array f = zeros({3});
  Array wide = zeros({2, 2}, uint32);
  EXPECT_THROW_MSG(random::bits(f, {2}), InvalidArgument, "bits: the key must be uint32[2] (from random::key, or one row of random::split), got float32[3]");
  EXPECT_THROW_MSG(random::split(wide, 2), InvalidArgument, "split: the key must be uint32[2]");
  EXPECT_THROW_MSG(random::split(wide, 2), InvalidArgument, "got uint32[2,2]");
  EXPECT_THROW_MSG(random::uniform(zeros({2}, int32), {2}), InvalidArgument, "uniform: the key must be uint32[2]");
  EXPECT_THROW_MSG(random::normal(f, {2}), InvalidArgument, "normal: the key must be uint32[2]");
  EXPECT_THROW_MSG(random::bernoulli(f, Array(0.5f), {2}), InvalidArgument, "bernoulli: the key must be uint32[2]");
  EXPECT_THROW_MSG(random::categorical(f, zeros({3})), InvalidArgument, "categorical: the key must be uint32[2]");
  EXPECT_THROW_MSG(random::randint(f, 0, 3, {2}), InvalidArgument, "randint: the key must be uint32[2]");
  EXPECT_THROW_MSG(random::bits(Array(), {2}), InvalidArgument, "bits: an input is an empty handle");
}

TEST(RandomErrors, Arguments) {
  Array k = random::key(0);
  EXPECT_THROW_MSG(random::split(k, -1), InvalidArgument, "split: num must be non-negative, got -1");
  EXPECT_THROW_MSG(random::bits(k, {2, -1}), InvalidArgument, "bits: negative dimension in shape [2,-1]");
  EXPECT_THROW_MSG(random::uniform(k, {-1}), InvalidArgument, "uniform: negative dimension in shape [-1]");
  EXPECT_THROW_MSG(random::uniform(k, {2}, 0, 1, int32), DtypeError, "uniform: dtype must be a floating dtype, got int32");
  EXPECT_THROW_MSG(random::uniform(k, {2}, 1, 1), InvalidArgument, "uniform: low must be below high");
  EXPECT_THROW_MSG(random::uniform(k, {2}, 2, 1), InvalidArgument, "uniform: low must be below high");
  EXPECT_THROW_MSG(random::uniform(k, {2}, 0, INFINITY), InvalidArgument, "uniform: low and high must be finite");
  EXPECT_THROW_MSG(random::uniform(k, {2}, 0, 1e6, float16), InvalidArgument, "uniform: the range [0.000000, 1000000.000000) overflows float16");
  EXPECT_THROW_MSG(random::normal(k, {2}, 0, 1, bool_), DtypeError, "normal: dtype must be a floating dtype, got bool");
  EXPECT_THROW_MSG(random::normal(k, {2}, 0, -1), InvalidArgument, "normal: mean must be finite and stddev finite and non-negative");
  EXPECT_THROW_MSG(random::normal(k, {2}, NAN, 1), InvalidArgument, "normal: mean must be finite");
  EXPECT_THROW_MSG(random::normal(k, {-2}), InvalidArgument, "normal: negative dimension");
  EXPECT_THROW_MSG(random::bernoulli(k, Array(1), {2}), DtypeError, "bernoulli: p must be a floating dtype, got int32");
  EXPECT_THROW_MSG(random::bernoulli(k, zeros({3}), {2}), ShapeError, "bernoulli: p of float32[3] does not broadcast to the shape [2]");
  EXPECT_THROW_MSG(random::bernoulli(k, zeros({2, 1}), {3}), ShapeError, "bernoulli: p of float32[2,1] does not broadcast to the shape [3]");
  EXPECT_THROW_MSG(random::bernoulli(k, Array(), {3}), InvalidArgument, "bernoulli: an input is an empty handle");
  EXPECT_THROW_MSG(random::categorical(k, zeros({3}, int32)), DtypeError, "categorical: logits must be a floating dtype, got int32");
  EXPECT_THROW_MSG(random::categorical(k, zeros({3}), 1), InvalidArgument, "categorical: axis 1 is out of range for an array of rank 1");
  EXPECT_THROW_MSG(random::categorical(k, zeros({2, 3}), -1, Shape{4}), ShapeError,
                   "categorical: the logits' batch shape [2] (logits float32[2,3] without axis -1) does not broadcast to the shape [4]");
  EXPECT_THROW_MSG(random::categorical(k, zeros({2, 3}), -1, Shape{}), ShapeError, "does not broadcast to the shape []");
  EXPECT_THROW_MSG(random::randint(k, 0, 5, {2}, float32), DtypeError, "randint: dtype must be an integer type, got float32");
  EXPECT_THROW_MSG(random::randint(k, 0, 5, {2}, bool_), DtypeError, "randint: dtype must be an integer type, got bool");
  EXPECT_THROW_MSG(random::randint(k, 5, 5, {2}), InvalidArgument, "randint: low must be below high, got [5, 5)");
  EXPECT_THROW_MSG(random::randint(k, -1, 5, {2}, uint8), InvalidArgument, "randint: low -1 is out of bounds for uint8");
  EXPECT_THROW_MSG(random::randint(k, 0, 129, {2}, int8), InvalidArgument, "randint: high 129 is out of bounds for int8");
  EXPECT_THROW_MSG(random::randint(k, 0, 3, {-2}), InvalidArgument, "randint: negative dimension");
}

}  // namespace
}  // namespace smelt
