// CUDA Scan (cumsum, cumprod, cummax, cummin; reverse, exclusive) and RandomBits against the CPU:
// bit for bit wherever the order of operations is the CPU's or does not matter, and within the
// documented bound for float cumsum/cumprod over few long lines (chunked, another association).
#include <cmath>
#include <string>

#include "src/backend/cpu/threefry.h"
#include "tests/backend/cuda/cuda_test_utils.h"

namespace smelt {
namespace {

using namespace smelt::test;

struct ScanCase {
  const char* name;
  bool exclusive_allowed;
  std::function<Array(const Array&, int, bool, bool)> fn;
};

const std::vector<ScanCase>& scan_cases() {
  static const std::vector<ScanCase> c = {
      {"cumsum", true, [](const Array& a, int ax, bool r, bool e) { return cumsum(a, ax, r, e); }},
      {"cumprod", true, [](const Array& a, int ax, bool r, bool e) { return cumprod(a, ax, r, e); }},
      {"cummax", false, [](const Array& a, int ax, bool r, bool) { return cummax(a, ax, r); }},
      {"cummin", false, [](const Array& a, int ax, bool r, bool) { return cummin(a, ax, r); }},
  };
  return c;
}

/// Every scan of `x` (CPU) and `g` (its GPU copy, any layout) along `axis`, bit for bit.
void check_exact(const Array& x, const Array& g, int axis) {
  for (const auto& c : scan_cases())
    for (bool rev : {false, true})
      for (bool excl : {false, true}) {
        if (excl && !c.exclusive_allowed) continue;
        SCOPED_TRACE(std::string(c.name) + " " + dtype_name(x.dtype()) + " " + shape_to_string(x.shape()) + " axis " +
                     std::to_string(axis) + (rev ? " reverse" : "") + (excl ? " exclusive" : ""));
        EXPECT_TRUE(same_as_cpu(c.fn(g, axis, rev, excl), c.fn(x, axis, rev, excl)));
      }
}

double eps_of(Dtype dt) {
  switch (dt) {
    case Dtype::Float16: return 0x1p-10;
    case Dtype::BFloat16: return 0x1p-7;
    case Dtype::Float32: return 0x1p-23;
    default: return 0x1p-52;
  }
}

/// The documented bound of float cumsum/cumprod over few long lines (docs/cuda.md): output i,
/// the scan of `terms` elements, is within (terms + 64) * eps(accumulator) * scale of the CPU's,
/// plus one rounding to the output dtype; scale is the sum of the magnitudes of those elements
/// (cumsum) or the magnitude of the result (cumprod). NaN and ±inf must match exactly.
::testing::AssertionResult within_scan_bound(bool prod, const Array& g, const Array& c, const Array& x, int axis,
                                             bool rev, bool excl) {
  if (g.shape() != c.shape() || g.dtype() != c.dtype()) return same_as_cpu(g, c);
  const Dtype dt = c.dtype();
  const double eps_acc = dt == float64 ? 0x1p-52 : 0x1p-23, eps_out = eps_of(dt);
  auto gv = as_doubles(on_cpu(g)), cv = as_doubles(c);
  auto terms = as_doubles(cumsum(ones(x.shape(), float64), axis, rev, excl));
  auto mag = as_doubles(cumsum(abs(astype(x, float64)), axis, rev, excl));
  for (size_t i = 0; i < cv.size(); ++i) {
    if (std::isnan(cv[i]) || std::isnan(gv[i]) || std::isinf(cv[i]) || std::isinf(gv[i])) {
      if (!(std::isnan(cv[i]) && std::isnan(gv[i])) && cv[i] != gv[i])
        return ::testing::AssertionFailure() << "element " << i << ": GPU " << gv[i] << ", CPU " << cv[i];
      continue;
    }
    const double scale = prod ? std::abs(cv[i]) : mag[i];
    const double bound = (terms[i] + 64) * eps_acc * scale + eps_out * std::abs(cv[i]) + 1e-300;
    if (std::abs(gv[i] - cv[i]) > bound)
      return ::testing::AssertionFailure() << "element " << i << ": GPU " << gv[i] << ", CPU " << cv[i]
                                           << " (bound " << bound << ")";
  }
  return ::testing::AssertionSuccess();
}

TEST(CudaScan, EveryOpDtypeAxisReverseExclusive) {
  SMELT_REQUIRE_GPU();
  // Short lines: one thread per line in the CPU's order, so float sums are bit-exact too.
  uint32_t seed = 10;
  for (Dtype dt : all_dtypes()) {
    Array x = special_array({5, 6, 40}, dt, -2, 2, ++seed);
    Array g = on_gpu(x);
    for (int axis : {0, 1, 2, -1}) check_exact(x, g, axis);
    check_exact(transpose(x, {2, 0, 1}), transpose(g, {2, 0, 1}), 0);
    const std::vector<int64_t> start = {4, 0, 39}, stop = {-6, 6, -41}, step = {-1, 2, -3};
    check_exact(slice(x, start, stop, step), slice(g, start, stop, step), 2);
    check_exact(slice(x, start, stop, step), slice(g, start, stop, step), 0);
  }
}

TEST(CudaScan, ManyLinesAreBitExact) {
  SMELT_REQUIRE_GPU();
  // 4096 lines or more: sequential per line whatever their length (float sums included).
  Array x = special_array({4096, 300}, float32, -2, 2, 20);
  Array g = on_gpu(x);
  EXPECT_TRUE(same_as_cpu(cumsum(g, 1), cumsum(x, 1)));
  EXPECT_TRUE(same_as_cpu(cumsum(g, 1, true, true), cumsum(x, 1, true, true)));
  Array y = random_array({300, 4100}, float16, 0.9, 1.1, 21);
  y.eval();
  EXPECT_TRUE(same_as_cpu(cumprod(on_gpu(y), 0), cumprod(y, 0)));
  EXPECT_TRUE(same_as_cpu(cumsum(transpose(on_gpu(y)), 1, true), cumsum(transpose(y), 1, true)));
}

TEST(CudaScan, FewLongLinesExactOps) {
  SMELT_REQUIRE_GPU();
  // Chunked (fewer than 4096 lines longer than 256): integers, bool and max/min are exact in
  // any association, so bit for bit.
  uint32_t seed = 30;
  for (Dtype dt : all_dtypes()) {
    Array x = special_array({3, 9000}, dt, -2, 2, ++seed);
    Array g = on_gpu(x);
    for (bool rev : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (rev ? " reverse" : ""));
      EXPECT_TRUE(same_as_cpu(cummax(g, 1, rev), cummax(x, 1, rev)));
      EXPECT_TRUE(same_as_cpu(cummin(g, -1, rev), cummin(x, -1, rev)));
      EXPECT_TRUE(same_as_cpu(cummax(transpose(g), 0, rev), cummax(transpose(x), 0, rev)));
      if (is_floating(dt)) continue;
      for (bool excl : {false, true}) {
        EXPECT_TRUE(same_as_cpu(cumsum(g, 1, rev, excl), cumsum(x, 1, rev, excl)));
        EXPECT_TRUE(same_as_cpu(cumprod(g, 1, rev, excl), cumprod(x, 1, rev, excl)));
        EXPECT_TRUE(same_as_cpu(cumsum(transpose(g), 0, rev, excl), cumsum(transpose(x), 0, rev, excl)));
      }
    }
  }
  // One line of 100 000 (25 chunks), and an exactly chunk-sized one.
  Array i = random_array({100000}, int32, -1000, 1000, 40);
  i.eval();
  EXPECT_TRUE(same_as_cpu(cumsum(on_gpu(i), 0), cumsum(i, 0)));
  EXPECT_TRUE(same_as_cpu(cummax(on_gpu(i), 0, true), cummax(i, 0, true)));
  Array f = special_array({2, 4096}, float64, -2, 2, 41);
  EXPECT_TRUE(same_as_cpu(cummin(on_gpu(f), 1), cummin(f, 1)));
}

TEST(CudaScan, FewLongLinesFloatSumsWithinTheBound) {
  SMELT_REQUIRE_GPU();
  uint32_t seed = 50;
  for (Dtype dt : {float16, bfloat16, float32, float64}) {
    for (double lo : {-3.0, 0.0}) {  // mixed signs and all positive
      Array x = random_array({3, 20000}, dt, lo, 3.0, ++seed);
      x.eval();
      Array g = on_gpu(x);
      for (bool rev : {false, true})
        for (bool excl : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " lo " + std::to_string(lo) + (rev ? " reverse" : "") +
                       (excl ? " exclusive" : ""));
          Array gs = cumsum(g, 1, rev, excl), cs = cumsum(x, 1, rev, excl);
          EXPECT_TRUE(within_scan_bound(false, gs, cs, x, 1, rev, excl));
          if (lo < 0) {
            // Mixed signs, the usual case: within 4 x the dtype's tolerance of the magnitudes'
            // sum, like the reductions.
            auto gv = as_doubles(on_cpu(gs)), cv = as_doubles(cs);
            auto mag = as_doubles(cumsum(abs(astype(x, float64)), 1, rev, excl));
            for (size_t i = 0; i < cv.size(); ++i)
              ASSERT_LE(std::abs(gv[i] - cv[i]), 4 * tolerance_for(dt) * mag[i] + 1e-300) << "element " << i;
          }
        }
    }
    // Products of values near 1 (no overflow or underflow over 20 000 factors), along axis 0.
    Array y = random_array({20000, 2}, dt, 0.999, 1.001, ++seed);
    y.eval();
    for (bool excl : {false, true})
      EXPECT_TRUE(within_scan_bound(true, cumprod(on_gpu(y), 0, true, excl), cumprod(y, 0, true, excl), y, 0, true, excl));
    // NaN and ±inf land where the CPU has them.
    Array s = special_array({2, 9000}, dt, -2, 2, ++seed);
    EXPECT_TRUE(within_scan_bound(false, cumsum(on_gpu(s), 1), cumsum(s, 1), s, 1, false, false));
  }
}

TEST(CudaScan, IntegerWraparound) {
  SMELT_REQUIRE_GPU();
  // int64 sums past 2^63 and products past 2^64 wrap as on the CPU, in both layouts.
  for (const Shape& shape : {Shape{40}, Shape{9000}}) {
    Array big = astype(random_array(shape, float64, 4e18, 9e18, 60), int64);
    big.eval();
    EXPECT_TRUE(same_as_cpu(cumsum(on_gpu(big), 0), cumsum(big, 0)));
    Array ubig = astype(random_array(shape, float64, 1e19, 1.8e19, 61), uint64);
    ubig.eval();
    EXPECT_TRUE(same_as_cpu(cumsum(on_gpu(ubig), 0, true), cumsum(ubig, 0, true)));
    Array f = random_array(shape, int32, -100000, 100000, 62);
    f.eval();
    EXPECT_TRUE(same_as_cpu(cumprod(on_gpu(f), 0), cumprod(f, 0)));
    Array u8 = random_array(shape, uint8, 0, 255, 63);
    u8.eval();
    EXPECT_TRUE(same_as_cpu(cumsum(on_gpu(u8), 0, false, true), cumsum(u8, 0, false, true)));
    EXPECT_TRUE(same_as_cpu(cumprod(on_gpu(u8), 0), cumprod(u8, 0)));
  }
}

TEST(CudaScan, EmptyBroadcastAndErrors) {
  SMELT_REQUIRE_GPU();
  for (const Shape& s : {Shape{0, 5}, Shape{5, 0}, Shape{0}}) {
    Array x = zeros(s, int16);
    for (int axis = 0; axis < static_cast<int>(s.size()); ++axis) {
      EXPECT_TRUE(same_as_cpu(cumsum(on_gpu(x), axis), cumsum(x, axis)));
      EXPECT_TRUE(same_as_cpu(cummax(on_gpu(x), axis), cummax(x, axis)));
    }
  }
  Array row = special_array({1, 5000}, float32, -2, 2, 70);
  Array b = broadcast_to(row, {3, 5000}), bg = broadcast_to(on_gpu(row), {3, 5000});
  EXPECT_TRUE(same_as_cpu(cumsum(bg, 0), cumsum(b, 0)));        // sequential: exact
  EXPECT_TRUE(same_as_cpu(cummax(bg, 1, true), cummax(b, 1, true)));  // chunked max: exact
  EXPECT_TRUE(within_scan_bound(false, cumsum(bg, 1), cumsum(b, 1), b, 1, false, false));

  EXPECT_THROW_MSG(cumsum(on_gpu(Array(2.0f)), 0), InvalidArgument,
                   "cumsum: axis 0 is out of range for an array of rank 0");
  Array big = on_gpu(zeros(Shape(12, 2), float32));
  Axes rev;
  for (int i = 11; i >= 0; --i) rev.push_back(i);
  EXPECT_THROW_MSG(cumsum(transpose(big, rev), 0).eval(), UnsupportedError,
                   "Scan(cumsum): CUDA kernels take at most 10 non-mergeable axes");
}

// ---- RandomBits --------------------------------------------------------------------------------

TEST(CudaRandom, BitsEqualTheCpus) {
  SMELT_REQUIRE_GPU();
  for (uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{0x123456789abcdefull}}) {
    Array k = random::key(seed);
    Array gk = on_gpu(k);
    // Keys made on the GPU: split rows (contiguous) and a column of a 2x3 draw (stride 3).
    Array gs = random::split(gk, 3), cs = random::split(k, 3);
    EXPECT_TRUE(same_as_cpu(gs, cs));
    Array g_row = reshape(slice(gs, {1, 0}, {2, 2}), {2}), c_row = reshape(slice(cs, {1, 0}, {2, 2}), {2});
    Array g_col = reshape(slice(random::bits(gk, {2, 3}), {0, 1}, {2, 2}), {2});
    Array c_col = reshape(slice(random::bits(k, {2, 3}), {0, 1}, {2, 2}), {2});
    const std::vector<std::pair<Array, Array>> keys = {{gk, k}, {g_row, c_row}, {g_col, c_col}};
    for (const auto& [gkey, ckey] : keys) {
      for (const Shape& shape : {Shape{0}, Shape{1}, Shape{2}, Shape{3}, Shape{4}, Shape{7}, Shape{1001}, Shape{3, 5, 7},
                                 Shape{1 << 20}, Shape{(1 << 20) + 1}}) {
        SCOPED_TRACE("seed " + std::to_string(seed) + " shape " + shape_to_string(shape));
        EXPECT_TRUE(same_as_cpu(random::bits(gkey, shape), random::bits(ckey, shape)));
      }
    }
  }
}

TEST(CudaRandom, DistributionsEqualTheCpus) {
  SMELT_REQUIRE_GPU();
  Array k = random::key(7), gk = on_gpu(k);
  for (Dtype dt : {float16, bfloat16, float32, float64}) {
    SCOPED_TRACE(dtype_name(dt));
    EXPECT_TRUE(same_as_cpu(random::uniform(gk, {1000}, -2.0, 5.0, dt), random::uniform(k, {1000}, -2.0, 5.0, dt)));
    // erfinv is libdevice's on the GPU: within the element-wise bound (docs/cuda.md).
    EXPECT_TRUE(same_as_cpu(random::normal(gk, {1000}, 0.0, 1.0, dt), random::normal(k, {1000}, 0.0, 1.0, dt), 16));
  }
  for (Dtype dt : {int32, uint8, int64}) {
    SCOPED_TRACE(dtype_name(dt));
    EXPECT_TRUE(same_as_cpu(random::randint(gk, 0, 100, {3, 333}, dt), random::randint(k, 0, 100, {3, 333}, dt)));
  }
  Array p = Array({0.1f, 0.5f, 0.9f});
  EXPECT_TRUE(same_as_cpu(random::bernoulli(gk, on_gpu(p), {400, 3}), random::bernoulli(k, p, {400, 3})));
}

TEST(CudaRandom, OutputsPastTwoToThe32UseSubkeys) {
  SMELT_REQUIRE_GPU();
  // 2^32 + 5 words (16 GiB): the first 2^32 - 1 under subkey 0 of split(key, 2), the last 6
  // under subkey 1, as the CPU and JAX lay them out. Checked at a few positions.
  const int64_t block = 0xFFFFFFFFll, n = block + 6;
  Array k = random::key(99);
  Array g;
  try {
    g = random::bits(on_gpu(k), {n});
    g.eval();
  } catch (const OutOfMemory& e) {
    GTEST_SKIP() << "not enough GPU memory for 16 GiB: " << e.what();
  }
  auto sub = on_cpu(random::bits(k, {4})).to_vector<uint32_t>();
  const int64_t h = (block + 1) / 2;  // pairs (j, j + h); j = block / 2 pads with a zero counter
  auto expect_at = [&](int64_t i) -> uint32_t {
    if (i >= block) return random::bits(Array(std::vector<uint32_t>{sub[2], sub[3]}, {2}), {6}).to_vector<uint32_t>()[i - block];
    if (i == block / 2) return cpu::threefry2x32(sub[0], sub[1], static_cast<uint32_t>(i), 0u).x0;
    if (i < h) return cpu::threefry2x32(sub[0], sub[1], static_cast<uint32_t>(i), static_cast<uint32_t>(i + h)).x0;
    return cpu::threefry2x32(sub[0], sub[1], static_cast<uint32_t>(i - h), static_cast<uint32_t>(i)).x1;
  };
  for (int64_t at : {int64_t{0}, h - 2, block / 2 - 1, h + 1, block - 3, block}) {
    const int64_t len = std::min<int64_t>(3, n - at);
    auto got = on_cpu(slice(g, {at}, {at + len})).to_vector<uint32_t>();
    for (int64_t j = 0; j < len; ++j) EXPECT_EQ(got[j], expect_at(at + j)) << "element " << at + j;
  }
  auto tail = on_cpu(slice(g, {n - 6}, {n})).to_vector<uint32_t>();
  for (int64_t j = 0; j < 6; ++j) EXPECT_EQ(tail[j], expect_at(block + j)) << "tail " << j;
  g = Array();
  clear_memory_cache(gpu());  // the 16 GiB go back to the device
}

}  // namespace
}  // namespace smelt
