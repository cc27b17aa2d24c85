// CUDA gathers, scatters, nonzero, Concatenate, Pad and SliceUpdate against the CPU backend, bit for
// bit: every dtype and index dtype, views (transposed, negative steps, broadcast), negative and
// out-of-range indices (the CPU's messages), duplicates in every scatter path, empty arrays.
#include <limits>
#include <string>
#include <vector>

#include "src/core/node.h"
#include "tests/backend/cuda/cuda_test_utils.h"

#if SMELT_HAS_CUDA
#include "src/backend/cuda/kernels.h"
#include "src/backend/cuda/scan_util.h"
#endif

namespace smelt {
namespace {

using namespace smelt::test;

constexpr int64_t kBefore = std::numeric_limits<int64_t>::min();  // a slice stop before index 0

const std::vector<Dtype>& index_dtypes() {
  static const std::vector<Dtype> d = {int8, int16, int32, int64, uint8, uint16, uint32, uint64};
  return d;
}
const std::vector<ScatterReduce>& reductions() {
  static const std::vector<ScatterReduce> r = {ScatterReduce::Assign, ScatterReduce::Add, ScatterReduce::Mul,
                                               ScatterReduce::Max, ScatterReduce::Min};
  return r;
}
const char* reduce_name(ScatterReduce r) {
  switch (r) {
    case ScatterReduce::Assign: return "assign";
    case ScatterReduce::Add: return "add";
    case ScatterReduce::Mul: return "mul";
    case ScatterReduce::Max: return "max";
    case ScatterReduce::Min: return "min";
  }
  return "?";
}

/// Random indices for an axis of size `dim` (negative ones too, for signed dtypes).
Array rnd_indices(const Shape& s, Dtype d, int64_t dim, uint32_t seed, bool negative = true) {
  const bool neg = negative && is_signed_integral(d);
  return random_array(s, d, neg ? -static_cast<double>(dim) : 0.0, static_cast<double>(dim), seed);
}

/// The message of the InvalidArgument that evaluating f() raises ("no error" when none).
template <class F>
std::string error_of(F f) {
  try {
    Array r = f();
    r.eval();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no error";
}

/// Indices as int64 from explicit values.
Array ints(const std::vector<int64_t>& v, const Shape& s) { return Array(v, s); }

// ---- Gathers ------------------------------------------------------------------------------------

TEST(CudaTake, EveryDtypeAxisAndView) {
  SMELT_REQUIRE_GPU();
  const auto& dts = all_dtypes();
  for (size_t t = 0; t < dts.size(); ++t) {
    const Dtype dt = dts[t];
    SCOPED_TRACE(dtype_name(dt));
    Array x = special_array({4, 5, 6}, dt, -50, 50, static_cast<uint32_t>(10 + t));
    Array g = on_gpu(x);
    for (int axis : {0, 1, 2, -1}) {
      SCOPED_TRACE("axis " + std::to_string(axis));
      const int64_t dim = x.shape()[axis < 0 ? axis + 3 : axis];
      Array i = rnd_indices({3, 2}, t % 2 ? int32 : int64, dim, static_cast<uint32_t>(20 + t));
      EXPECT_TRUE(same_as_cpu(take(g, on_gpu(i), axis), take(x, i, axis)));
    }
    // Views of the data: transposed, negative steps, broadcast.
    Array i = rnd_indices({7}, int64, 5, static_cast<uint32_t>(30 + t));
    Array gi = on_gpu(i);
    EXPECT_TRUE(same_as_cpu(take(transpose(g, {2, 1, 0}), gi, 1), take(transpose(x, {2, 1, 0}), i, 1)));
    const std::vector<int64_t> start{-1, 0, -1}, stop{kBefore, 5, kBefore}, step{-1, 1, -2};
    EXPECT_TRUE(same_as_cpu(take(slice(g, start, stop, step), gi, 1), take(slice(x, start, stop, step), i, 1)));
    EXPECT_TRUE(same_as_cpu(take(broadcast_to(slice(g, {0, 0, 0}, {1, 5, 6}), {3, 5, 6}), gi, 1),
                            take(broadcast_to(slice(x, {0, 0, 0}, {1, 5, 6}), {3, 5, 6}), i, 1)));
    // The flattened form.
    Array f = rnd_indices({4, 3}, int32, 120, static_cast<uint32_t>(40 + t));
    EXPECT_TRUE(same_as_cpu(take(g, on_gpu(f)), take(x, f)));
  }
}

TEST(CudaTake, EveryIndexDtypeStridedIndicesScalarEmptyAndLarge) {
  SMELT_REQUIRE_GPU();
  Array x = special_array({6, 5}, float32, -5, 5, 50);
  Array g = on_gpu(x);
  for (Dtype idt : index_dtypes()) {
    SCOPED_TRACE(dtype_name(idt));
    Array i = rnd_indices({4, 3}, idt, 5, 51);
    EXPECT_TRUE(same_as_cpu(take(g, on_gpu(i), 1), take(x, i, 1)));
    // Index arrays read through strides: transposed, every other row.
    EXPECT_TRUE(same_as_cpu(take(g, transpose(on_gpu(i)), 0), take(x, transpose(i), 0)));
    EXPECT_TRUE(same_as_cpu(take(g, slice(on_gpu(i), {0, 0}, {4, 3}, {2, 1}), 1), take(x, slice(i, {0, 0}, {4, 3}, {2, 1}), 1)));
    // A broadcast index array (every element the same index).
    Array b = broadcast_to(slice(i, {1, 1}, {2, 2}), {5, 2});
    EXPECT_TRUE(same_as_cpu(take(g, broadcast_to(slice(on_gpu(i), {1, 1}, {2, 2}), {5, 2}), 1), take(x, b, 1)));
  }
  // A 0-d index drops the axis; the index array may stay on the host.
  Array s(static_cast<long long>(-2));
  EXPECT_TRUE(same_as_cpu(take(g, on_gpu(s), 0), take(x, s, 0)));
  EXPECT_TRUE(same_as_cpu(take(g, s, 1), take(x, s, 1)));
  // Empty index arrays and empty data.
  Array e = zeros({0}, int64);
  EXPECT_TRUE(same_as_cpu(take(g, on_gpu(e), 1), take(x, e, 1)));
  EXPECT_TRUE(same_as_cpu(take(g, on_gpu(zeros({2, 0}, int32)), 0), take(x, zeros({2, 0}, int32), 0)));
  Array z = zeros({0, 5}, float64);
  Array zi = ints({4, -1}, {2});
  EXPECT_TRUE(same_as_cpu(take(on_gpu(z), on_gpu(zi), 1), take(z, zi, 1)));
  // Large: an embedding lookup (rows of 64 over 300k outputs).
  Array table = random_array({1000, 64}, float32, -1, 1, 52);
  Array rows = rnd_indices({5000}, int64, 1000, 53);
  EXPECT_TRUE(same_as_cpu(take(on_gpu(table), on_gpu(rows), 0), take(table, rows, 0)));
}

TEST(CudaTakeAlongAxis, EveryDtypeAxisAndBroadcast) {
  SMELT_REQUIRE_GPU();
  const auto& dts = all_dtypes();
  for (size_t t = 0; t < dts.size(); ++t) {
    const Dtype dt = dts[t];
    SCOPED_TRACE(dtype_name(dt));
    Array x = special_array({4, 5, 6}, dt, -50, 50, static_cast<uint32_t>(60 + t));
    Array g = on_gpu(x);
    for (int axis : {0, 1, 2, -1}) {
      SCOPED_TRACE("axis " + std::to_string(axis));
      const int ax = axis < 0 ? axis + 3 : axis;
      Shape is = x.shape();
      is[ax] = 3;
      Array i = rnd_indices(is, t % 2 ? int64 : int16, x.shape()[ax], static_cast<uint32_t>(70 + t));
      EXPECT_TRUE(same_as_cpu(take_along_axis(g, on_gpu(i), axis), take_along_axis(x, i, axis)));
      // Transposed data and indices (the gathered axis moves with the transpose).
      const int tax = ax == 0 ? 1 : (ax == 1 ? 0 : 2);
      EXPECT_TRUE(same_as_cpu(take_along_axis(transpose(g, {1, 0, 2}), transpose(on_gpu(i), {1, 0, 2}), tax),
                              take_along_axis(transpose(x, {1, 0, 2}), transpose(i, {1, 0, 2}), tax)));
    }
    // Indices broadcast over the data (size-1 axes), and data broadcast over the indices.
    Array i1 = rnd_indices({1, 7, 6}, int32, 5, static_cast<uint32_t>(80 + t));
    EXPECT_TRUE(same_as_cpu(take_along_axis(g, on_gpu(i1), 1), take_along_axis(x, i1, 1)));
    Array x1 = special_array({1, 5, 1}, dt, -50, 50, static_cast<uint32_t>(90 + t));
    Array i2 = rnd_indices({4, 3, 6}, int64, 5, static_cast<uint32_t>(100 + t));
    EXPECT_TRUE(same_as_cpu(take_along_axis(on_gpu(x1), on_gpu(i2), 1), take_along_axis(x1, i2, 1)));
  }
  Array x = special_array({3, 4}, float32, -5, 5, 110);
  Array e = zeros({3, 0}, int64);
  EXPECT_TRUE(same_as_cpu(take_along_axis(on_gpu(x), on_gpu(e), 1), take_along_axis(x, e, 1)));
}

TEST(CudaGatherND, EveryDtypeDepthAndBatchDims) {
  SMELT_REQUIRE_GPU();
  const auto& dts = all_dtypes();
  for (size_t t = 0; t < dts.size(); ++t) {
    const Dtype dt = dts[t];
    SCOPED_TRACE(dtype_name(dt));
    const uint32_t seed = static_cast<uint32_t>(120 + 10 * t);
    Array x = special_array({3, 4, 5, 2}, dt, -50, 50, seed);
    Array g = on_gpu(x);
    auto check = [&](const Array& data, const Array& gdata, const Array& idx, int batch_dims) {
      EXPECT_TRUE(same_as_cpu(gather_nd(gdata, on_gpu(idx), batch_dims), gather_nd(data, idx, batch_dims)));
    };
    check(x, g, rnd_indices({6, 1}, int64, 3, seed + 1), 0);
    Array i2 = concatenate({rnd_indices({2, 3, 1}, int32, 3, seed + 2), rnd_indices({2, 3, 1}, int32, 4, seed + 3)}, -1);
    check(x, g, i2, 0);
    Array i4 = concatenate({rnd_indices({5, 1}, int64, 3, seed + 4), rnd_indices({5, 1}, int64, 4, seed + 5),
                            rnd_indices({5, 1}, int64, 5, seed + 6), rnd_indices({5, 1}, int64, 2, seed + 7)},
                           -1);
    check(x, g, i4, 0);
    // batch_dims: indices address the axes after the batch axes.
    Array b1 = concatenate({rnd_indices({3, 7, 1}, int64, 4, seed + 8), rnd_indices({3, 7, 1}, int64, 5, seed + 9)}, -1);
    check(x, g, b1, 1);
    check(x, g, rnd_indices({3, 4, 2, 1}, uint8, 5, seed + 10), 2);
    // No components: whole sub-arrays. Transposed indices and data.
    check(x, g, zeros({3, 0}, int64), 0);
    EXPECT_TRUE(same_as_cpu(gather_nd(g, on_gpu(transpose(i2, {1, 0, 2}))), gather_nd(x, transpose(i2, {1, 0, 2}))));
    Array i3 = concatenate({rnd_indices({4, 1}, int64, 2, seed + 11), rnd_indices({4, 1}, int64, 5, seed + 12)}, -1);
    EXPECT_TRUE(same_as_cpu(gather_nd(transpose(g, {3, 2, 1, 0}), on_gpu(i3)), gather_nd(transpose(x, {3, 2, 1, 0}), i3)));
  }
}

TEST(CudaIndex, OutOfRangeIndicesRaiseTheCpusMessage) {
  SMELT_REQUIRE_GPU();
  Array x = random_array({4, 5}, float32, -1, 1, 140);
  Array g = on_gpu(x);
  // take: the first bad index in row-major order, as stored (negative, huge unsigned, narrow).
  Array bad = ints({1, 9, -8, 2}, {4});
  const std::string m = "take: index 9 is out of range for axis 1 with size 5";
  EXPECT_EQ(error_of([&] { return take(x, bad, 1); }), m);
  EXPECT_EQ(error_of([&] { return take(g, on_gpu(bad), 1); }), m);
  EXPECT_THROW_MSG(take(g, on_gpu(bad), 1).eval(), InvalidArgument, m);
  Array neg = astype(ints({1, -6, 9}, {3}), int8);
  EXPECT_EQ(error_of([&] { return take(g, on_gpu(neg), 1); }), "take: index -6 is out of range for axis 1 with size 5");
  Array huge = Array(std::vector<uint64_t>{2, std::numeric_limits<uint64_t>::max()}, {2});
  EXPECT_EQ(error_of([&] { return take(g, on_gpu(huge), 0); }),
            "take: index 18446744073709551615 is out of range for axis 0 with size 4");
  EXPECT_EQ(error_of([&] { return take(g, on_gpu(huge), 0); }), error_of([&] { return take(x, huge, 0); }));
  // Row-major order of a transposed index array, not its memory order.
  Array t = transpose(ints({0, 1, 7, 2, 8, 3}, {2, 3}));  // rows [0 2] [1 8] [7 3]: 8 comes first
  EXPECT_EQ(error_of([&] { return take(g, transpose(on_gpu(ints({0, 1, 7, 2, 8, 3}, {2, 3}))), 1); }),
            "take: index 8 is out of range for axis 1 with size 5");
  EXPECT_EQ(error_of([&] { return take(x, t, 1); }), "take: index 8 is out of range for axis 1 with size 5");
  // Nothing to gather, but the index is still checked; an empty axis has no valid index.
  Array z = zeros({0, 5}, int32);
  EXPECT_EQ(error_of([&] { return take(on_gpu(z), on_gpu(ints({3, 7}, {2})), 1); }),
            "take: index 7 is out of range for axis 1 with size 5");
  EXPECT_EQ(error_of([&] { return take(on_gpu(zeros({3, 0})), on_gpu(ints({0}, {1})), 1); }),
            "take: index 0 is out of range for axis 1 with size 0");
  // take_along_axis, gather_nd (the component's axis, batch_dims counted), scatter, scatter_nd.
  Array ta = ints({0, 1, 2, 3, 4, -5, -6, 0, 1, 2, 3, 4}, {4, 3});
  EXPECT_EQ(error_of([&] { return take_along_axis(g, on_gpu(ta), 1); }),
            "take_along_axis: index -6 is out of range for axis 1 with size 5");
  EXPECT_EQ(error_of([&] { return take_along_axis(x, ta, 1); }),
            "take_along_axis: index -6 is out of range for axis 1 with size 5");
  Array gi = ints({1, 2, 3, 9}, {2, 2});
  EXPECT_EQ(error_of([&] { return gather_nd(g, on_gpu(gi)); }), "gather_nd: index 9 is out of range for axis 1 with size 5");
  EXPECT_EQ(error_of([&] { return gather_nd(x, gi); }), "gather_nd: index 9 is out of range for axis 1 with size 5");
  Array bi = ints({1, 2, 5, 0}, {4, 1});
  EXPECT_EQ(error_of([&] { return gather_nd(g, on_gpu(bi), 1); }), "gather_nd: index 5 is out of range for axis 1 with size 5");
  EXPECT_EQ(error_of([&] { return gather_nd(on_gpu(zeros({4, 0})), on_gpu(ints({1, 7}, {2, 1}))); }),
            "gather_nd: index 7 is out of range for axis 0 with size 4");
  Array si = ints({1, 2, 1, 2, 4, 0, 0, 0, 0, 0}, {2, 5});
  Array su = random_array({2, 5}, float32, -1, 1, 141);
  for (ScatterReduce r : reductions()) {
    SCOPED_TRACE(reduce_name(r));
    EXPECT_EQ(error_of([&] { return scatter(g, on_gpu(si), on_gpu(su), 0, r); }),
              "scatter: index 4 is out of range for axis 0 with size 4");
    EXPECT_EQ(error_of([&] { return scatter(x, si, su, 0, r); }), "scatter: index 4 is out of range for axis 0 with size 4");
    Array ni = ints({0, 1, 2, 7, 3, -9}, {3, 2});
    EXPECT_EQ(error_of([&] { return scatter_nd(g, on_gpu(ni), Array(1.0f), r); }),
              "scatter_nd: index 7 is out of range for axis 1 with size 5");
    EXPECT_EQ(error_of([&] { return scatter_nd(x, ni, Array(1.0f), r); }),
              "scatter_nd: index 7 is out of range for axis 1 with size 5");
  }
  // A large array (the hashed buckets) and a negative index past the start.
  Array big = zeros({100000});
  EXPECT_EQ(error_of([&] { return scatter(on_gpu(big), on_gpu(ints({5, -100001}, {2})), Array(1.0f), 0); }),
            "scatter: index -100001 is out of range for axis 0 with size 100000");
  // The device is fine afterwards.
  EXPECT_TRUE(same_as_cpu(take(g, on_gpu(ints({4, -5}, {2})), 1), take(x, ints({4, -5}, {2}), 1)));
}

TEST(CudaIndex, MoreThanTenComponentsOrAxesRaiseUnsupported) {
  SMELT_REQUIRE_GPU();
  const Shape eleven(11, 2);
  Array x = on_gpu(zeros(eleven));
  EXPECT_THROW_MSG(gather_nd(x, on_gpu(zeros({1, 11}, int64))).eval(), UnsupportedError,
                   "gather_nd: CUDA kernels take at most 10 index components, indices int64[1,11] have 11");
  EXPECT_THROW_MSG(scatter_nd(x, on_gpu(zeros({1, 11}, int64)), Array(1.0f)).eval(), UnsupportedError,
                   "scatter_nd: CUDA kernels take at most 10 index components");
  EXPECT_THROW_MSG(nonzero(x), UnsupportedError, "nonzero: CUDA kernels take at most 10 axes longer than 1");
  std::vector<std::pair<int64_t, int64_t>> w(11, {1, 0});
  EXPECT_THROW_MSG(pad(on_gpu(zeros(Shape(11, 1))), w).eval(), UnsupportedError,
                   "Pad: CUDA kernels take at most 10 non-mergeable axes");
  // Size-1 axes and mergeable ones do not count.
  Shape many(14, 1);
  many[3] = 3;
  many[9] = 2;
  Array m = special_array(many, int32, -1, 2, 142);
  EXPECT_TRUE(same_as_cpu(nonzero(on_gpu(m)), nonzero(m)));
  std::vector<std::pair<int64_t, int64_t>> w2(14, {0, 0});
  w2[9] = {1, 2};
  EXPECT_TRUE(same_as_cpu(pad(on_gpu(m), w2, PadMode::Edge), pad(m, w2, PadMode::Edge)));
}

// ---- Scatters -----------------------------------------------------------------------------------

TEST(CudaScatter, EveryDtypeAndReductionWithDuplicates) {
  SMELT_REQUIRE_GPU();
  const auto& dts = all_dtypes();
  for (size_t t = 0; t < dts.size(); ++t) {
    const Dtype dt = dts[t];
    for (ScatterReduce r : reductions()) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + reduce_name(r));
      const uint32_t seed = static_cast<uint32_t>(200 + 10 * t + static_cast<int>(r));
      Array x = special_array({6, 5}, dt, -50, 50, seed);
      Array g = on_gpu(x);
      // 8 index rows into 6: repeated targets in every column.
      Array i0 = rnd_indices({8, 5}, int64, 6, seed + 1);
      Array u0 = special_array({8, 5}, dt, -50, 50, seed + 2);
      EXPECT_TRUE(same_as_cpu(scatter(g, on_gpu(i0), on_gpu(u0), 0, r), scatter(x, i0, u0, 0, r)));
      Array i1 = rnd_indices({6, 9}, int32, 5, seed + 3);
      Array u1 = special_array({6, 9}, dt, -50, 50, seed + 4);
      EXPECT_TRUE(same_as_cpu(scatter(g, on_gpu(i1), on_gpu(u1), -1, r), scatter(x, i1, u1, -1, r)));
      // Indices smaller than the data on the other axis, updates broadcast from one value.
      Array i2 = rnd_indices({4, 3}, uint8, 6, seed + 5);
      EXPECT_TRUE(same_as_cpu(scatter(g, on_gpu(i2), Array(7), 0, r), scatter(x, i2, Array(7), 0, r)));
    }
  }
}

TEST(CudaScatter, PathsViewsAndIndexDtypes) {
  SMELT_REQUIRE_GPU();
  Array x = special_array({6, 5}, float32, -3, 3, 300);
  Array g = on_gpu(x);
  for (ScatterReduce r : reductions()) {
    SCOPED_TRACE(reduce_name(r));
    // No repeated target (one thread per update): a broadcast permutation as the index array.
    Array perm = ints({5, 3, 1, 0, 2, 4}, {6, 1});
    Array u = special_array({6, 5}, float32, -3, 3, 301);
    EXPECT_TRUE(same_as_cpu(scatter(g, broadcast_to(on_gpu(perm), {6, 5}), on_gpu(u), 0, r),
                            scatter(x, broadcast_to(perm, {6, 5}), u, 0, r)));
    // Views: transposed data, transposed indices and updates, negative-step updates.
    Array i = rnd_indices({5, 6}, int64, 6, 302);
    Array v = special_array({5, 6}, float32, -3, 3, 303);
    EXPECT_TRUE(same_as_cpu(scatter(transpose(g), on_gpu(i), on_gpu(v), 1, r), scatter(transpose(x), i, v, 1, r)));
    EXPECT_TRUE(same_as_cpu(scatter(g, transpose(on_gpu(i)), transpose(on_gpu(v)), 0, r),
                            scatter(x, transpose(i), transpose(v), 0, r)));
    const std::vector<int64_t> start{-1, -1}, stop{kBefore, kBefore}, step{-1, -1};
    EXPECT_TRUE(same_as_cpu(scatter(g, on_gpu(transpose(i)), slice(on_gpu(transpose(v)), start, stop, step), 0, r),
                            scatter(x, transpose(i), slice(transpose(v), start, stop, step), 0, r)));
    // Every index dtype; a 3-d array along its middle axis.
    for (Dtype idt : index_dtypes()) {
      SCOPED_TRACE(dtype_name(idt));
      Array ii = rnd_indices({3, 7, 2}, idt, 4, 304);
      Array y = special_array({3, 4, 2}, int16, -100, 100, 305);
      Array uu = special_array({3, 7, 2}, int16, -30000, 30000, 306);
      EXPECT_TRUE(same_as_cpu(scatter(on_gpu(y), on_gpu(ii), on_gpu(uu), 1, r), scatter(y, ii, uu, 1, r)));
    }
    // A large array and few updates: the hashed buckets (with and without repeats).
    Array big = random_array({200000}, float32, -1, 1, 307);
    Array bi = rnd_indices({60}, int64, 50, 308);  // repeats
    Array bu = random_array({60}, float32, -1, 1, 309);
    EXPECT_TRUE(same_as_cpu(scatter(on_gpu(big), on_gpu(bi), on_gpu(bu), 0, r), scatter(big, bi, bu, 0, r)));
    Array bj = ints({199999, 0, 1000, -1000}, {4});
    Array bu4 = slice(bu, {0}, {4});
    EXPECT_TRUE(same_as_cpu(scatter(on_gpu(big), on_gpu(bj), on_gpu(bu4), 0, r), scatter(big, bj, bu4, 0, r)));
  }
}

TEST(CudaScatter, LongBucketsApplyInIndexOrder) {
  SMELT_REQUIRE_GPU();
  // Float sums and products depend on the order: many updates of a few targets (buckets far
  // longer than one thread sorts), and the boundary lengths 32 and 33.
  Array x = random_array({3}, float32, -1, 1, 400);
  Array i = rnd_indices({5000}, int32, 3, 401, false);
  Array u = random_array({5000}, float32, -1, 1, 402);
  Array um = random_array({5000}, float32, 0.999, 1.001, 403);
  for (ScatterReduce r : reductions()) {
    SCOPED_TRACE(reduce_name(r));
    const Array& upd = r == ScatterReduce::Mul ? um : u;
    EXPECT_TRUE(same_as_cpu(scatter(on_gpu(x), on_gpu(i), on_gpu(upd), 0, r), scatter(x, i, upd, 0, r)));
  }
  // Target 0: 33 updates (even j), target 1: 32 (odd j), target 2: the last one.
  std::vector<int64_t> b;
  for (int j = 0; j < 66; ++j) b.push_back(j == 65 ? 2 : j % 2);
  Array bidx = ints(b, {66});
  Array bu = random_array({66}, float64, -1, 1, 404);
  EXPECT_TRUE(same_as_cpu(scatter(on_gpu(zeros({3}, float64)), on_gpu(bidx), on_gpu(bu), 0, ScatterReduce::Add),
                          scatter(zeros({3}, float64), bidx, bu, 0, ScatterReduce::Add)));
  // Signed zeros and NaN: max and min keep the first of equal values, NaN wins.
  Array z = astype(Array(std::vector<double>{0.0, -0.0, NAN, -0.0, 0.0, 1.0}, {6}), float16);
  Array zi = ints({0, 0, 1, 1, 2, 2}, {6});
  for (ScatterReduce r : {ScatterReduce::Max, ScatterReduce::Min, ScatterReduce::Add}) {
    Array base = astype(Array(std::vector<double>{-0.0, 0.0, -0.0}, {3}), float16);
    EXPECT_TRUE(same_as_cpu(scatter(on_gpu(base), on_gpu(zi), on_gpu(z), 0, r), scatter(base, zi, z, 0, r)));
  }
}

TEST(CudaScatterND, EveryDtypeReductionAndDepth) {
  SMELT_REQUIRE_GPU();
  const auto& dts = all_dtypes();
  for (size_t t = 0; t < dts.size(); ++t) {
    const Dtype dt = dts[t];
    for (ScatterReduce r : reductions()) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + reduce_name(r));
      const uint32_t seed = static_cast<uint32_t>(500 + 10 * t + static_cast<int>(r));
      Array x = special_array({5, 4, 3}, dt, -50, 50, seed);
      Array g = on_gpu(x);
      auto check = [&](const Array& idx, const Array& upd) {
        EXPECT_TRUE(same_as_cpu(scatter_nd(g, on_gpu(idx), on_gpu(upd), r), scatter_nd(x, idx, upd, r)));
      };
      check(rnd_indices({7, 1}, int64, 5, seed + 1), special_array({7, 4, 3}, dt, -50, 50, seed + 2));
      check(concatenate({rnd_indices({6, 1}, int32, 5, seed + 3), rnd_indices({6, 1}, int32, 4, seed + 4)}, -1),
            special_array({6, 3}, dt, -50, 50, seed + 5));
      check(concatenate({rnd_indices({2, 3, 1}, int64, 5, seed + 6), rnd_indices({2, 3, 1}, int64, 4, seed + 7),
                         rnd_indices({2, 3, 1}, int64, 3, seed + 8)},
                        -1),
            special_array({2, 3}, dt, -50, 50, seed + 9));
      check(zeros({3, 0}, int64), special_array({3, 5, 4, 3}, dt, -50, 50, seed + 10));  // every row: the whole array
      check(rnd_indices({2, 3, 1}, uint16, 5, seed + 11), special_array({2, 3, 4, 3}, dt, -50, 50, seed + 12));
      // Broadcast updates and a transposed index array.
      EXPECT_TRUE(same_as_cpu(scatter_nd(g, on_gpu(ints({4, -1, 0}, {3, 1})), Array(3), r),
                              scatter_nd(x, ints({4, -1, 0}, {3, 1}), Array(3), r)));
      Array ti = rnd_indices({2, 5}, int64, 4, seed + 13);
      Array tu = special_array({5, 3}, dt, -50, 50, seed + 14);
      EXPECT_TRUE(same_as_cpu(scatter_nd(g, transpose(on_gpu(ti)), on_gpu(tu), r), scatter_nd(x, transpose(ti), tu, r)));
    }
  }
}

TEST(CudaScatterND, LongBucketsHashedBucketsAndSlices) {
  SMELT_REQUIRE_GPU();
  for (ScatterReduce r : reductions()) {
    SCOPED_TRACE(reduce_name(r));
    // 200 rows of 8 into 2 targets: long buckets, each element of the slice in order.
    Array x = random_array({2, 8}, float32, -1, 1, 600);
    Array i = rnd_indices({200, 1}, int64, 2, 601);
    Array u = random_array({200, 8}, float32, r == ScatterReduce::Mul ? 0.99 : -1, r == ScatterReduce::Mul ? 1.01 : 1, 602);
    EXPECT_TRUE(same_as_cpu(scatter_nd(on_gpu(x), on_gpu(i), on_gpu(u), r), scatter_nd(x, i, u, r)));
    // Many targets, few rows: hashed buckets; rows of 2.
    Array y = random_array({100000, 2}, float64, -1, 1, 603);
    Array j = rnd_indices({20, 1}, int32, 10, 604);
    Array v = random_array({20, 2}, float64, -1, 1, 605);
    EXPECT_TRUE(same_as_cpu(scatter_nd(on_gpu(y), on_gpu(j), on_gpu(v), r), scatter_nd(y, j, v, r)));
    // Wide slices: rows of 4000.
    Array w = random_array({50, 4000}, float32, -1, 1, 606);
    Array rows = ints({3, 7, 3, 49, -1, 0}, {6, 1});
    Array wu = random_array({6, 4000}, float32, -1, 1, 607);
    EXPECT_TRUE(same_as_cpu(scatter_nd(on_gpu(w), on_gpu(rows), on_gpu(wu), r), scatter_nd(w, rows, wu, r)));
  }
  // A 0-d array, k = 0: every row updates it, in order.
  Array s(1.0);
  Array srows = random_array({40}, float64, -1, 1, 608);
  EXPECT_TRUE(same_as_cpu(scatter_nd(on_gpu(s), on_gpu(zeros({40, 0}, int32)), on_gpu(srows), ScatterReduce::Add),
                          scatter_nd(s, zeros({40, 0}, int32), srows, ScatterReduce::Add)));
}

TEST(CudaScatter, ReusesABufferNothingElseSees) {
  SMELT_REQUIRE_GPU();
  Array x = special_array({8, 8}, int32, -50, 50, 700);
  Array c = copy(on_gpu(x));
  c.eval();
  const void* storage = c.node().buffer->ptr;
  Array out = scatter(c, on_gpu(ints({7, 0}, {1, 2})), Array(-1), 0);
  c = Array();  // the scatter node now holds the only reference
  out.eval();
  EXPECT_EQ(out.node().buffer->ptr, storage);
  EXPECT_TRUE(same_as_cpu(out, scatter(x, ints({7, 0}, {1, 2}), Array(-1), 0)));
  Array c2 = copy(out);
  c2.eval();
  const void* storage2 = c2.node().buffer->ptr;
  Array out2 = slice_update(c2, Array(5), {2, 0}, {3, 8});
  c2 = Array();
  out2.eval();
  EXPECT_EQ(out2.node().buffer->ptr, storage2);
  EXPECT_TRUE(same_as_cpu(out2, slice_update(scatter(x, ints({7, 0}, {1, 2}), Array(-1), 0), Array(5), {2, 0}, {3, 8})));
  // Still seen elsewhere: copied, the original unchanged.
  Array keep = on_gpu(x);
  Array out3 = scatter_nd(keep, on_gpu(ints({1}, {1, 1})), Array(9));
  out3.eval();
  EXPECT_NE(out3.node().buffer->ptr, keep.node().buffer->ptr);
  EXPECT_TRUE(same_as_cpu(keep, x));
}

// ---- Concatenate, Pad, SliceUpdate --------------------------------------------------------------

TEST(CudaConcatenate, EveryDtypeAxisViewAndManyInputs) {
  SMELT_REQUIRE_GPU();
  const auto& dts = all_dtypes();
  for (size_t t = 0; t < dts.size(); ++t) {
    const Dtype dt = dts[t];
    SCOPED_TRACE(dtype_name(dt));
    const uint32_t seed = static_cast<uint32_t>(800 + 10 * t);
    Array a = special_array({2, 3, 4}, dt, -50, 50, seed);
    Array b = special_array({2, 5, 4}, dt, -50, 50, seed + 1);
    Array c = special_array({2, 1, 4}, dt, -50, 50, seed + 2);
    EXPECT_TRUE(same_as_cpu(concatenate({on_gpu(a), on_gpu(b), on_gpu(c)}, 1), concatenate({a, b, c}, 1)));
    Array d = special_array({3, 3, 4}, dt, -50, 50, seed + 3);
    EXPECT_TRUE(same_as_cpu(concatenate({on_gpu(a), on_gpu(d)}, 0), concatenate({a, d}, 0)));
    Array e = special_array({2, 3, 7}, dt, -50, 50, seed + 4);
    EXPECT_TRUE(same_as_cpu(concatenate({on_gpu(e), on_gpu(a)}, -1), concatenate({e, a}, -1)));
    // Views: transposed, negative steps, broadcast.
    EXPECT_TRUE(same_as_cpu(concatenate({transpose(on_gpu(a), {0, 2, 1}), on_gpu(special_array({2, 4, 2}, dt, -5, 5, seed))}, 2),
                            concatenate({transpose(a, {0, 2, 1}), special_array({2, 4, 2}, dt, -5, 5, seed)}, 2)));
    const std::vector<int64_t> start{-1, -1, -1}, stop{kBefore, kBefore, kBefore}, step{-1, -2, -3};
    const std::vector<int64_t> c0{0, 0, 0}, c1{2, 1, 2};
    EXPECT_TRUE(same_as_cpu(
        concatenate({slice(on_gpu(b), start, stop, step), broadcast_to(slice(on_gpu(c), c0, c1), {2, 3, 2})}, 1),
        concatenate({slice(b, start, stop, step), broadcast_to(slice(c, c0, c1), {2, 3, 2})}, 1)));
  }
  // Many small inputs (stack), empty parts, and zero-size results.
  std::vector<Array> parts, gparts;
  for (int j = 0; j < 40; ++j) {
    parts.push_back(special_array({3}, float32, -5, 5, static_cast<uint32_t>(900 + j)));
    gparts.push_back(on_gpu(parts.back()));
  }
  EXPECT_TRUE(same_as_cpu(stack(gparts, 1), stack(parts, 1)));
  Array p = special_array({2, 3}, int8, -5, 5, 950);
  EXPECT_TRUE(same_as_cpu(concatenate({on_gpu(zeros({2, 0}, int8)), on_gpu(p), on_gpu(zeros({2, 0}, int8))}, 1),
                          concatenate({zeros({2, 0}, int8), p, zeros({2, 0}, int8)}, 1)));
  EXPECT_TRUE(same_as_cpu(concatenate({on_gpu(zeros({0, 3})), on_gpu(zeros({0, 2}))}, 1),
                          concatenate({zeros({0, 3}), zeros({0, 2})}, 1)));
  // Mixed dtypes promote first.
  EXPECT_TRUE(same_as_cpu(concatenate({on_gpu(p), on_gpu(special_array({2, 2}, float16, -5, 5, 951))}, 1),
                          concatenate({p, special_array({2, 2}, float16, -5, 5, 951)}, 1)));
}

TEST(CudaPad, EveryModeDtypeAndView) {
  SMELT_REQUIRE_GPU();
  const std::vector<std::pair<int64_t, int64_t>> w{{1, 2}, {0, 0}, {2, 1}};
  const auto& dts = all_dtypes();
  for (size_t t = 0; t < dts.size(); ++t) {
    const Dtype dt = dts[t];
    SCOPED_TRACE(dtype_name(dt));
    Array x = special_array({3, 4, 5}, dt, -50, 50, static_cast<uint32_t>(1000 + t));
    Array g = on_gpu(x);
    for (PadMode m : {PadMode::Constant, PadMode::Reflect, PadMode::Edge}) {
      SCOPED_TRACE(static_cast<int>(m));
      EXPECT_TRUE(same_as_cpu(pad(g, w, m), pad(x, w, m)));
      EXPECT_TRUE(same_as_cpu(pad(g, {{1, 1}}, m), pad(x, {{1, 1}}, m)));
      EXPECT_TRUE(same_as_cpu(pad(transpose(g, {2, 0, 1}), w, m), pad(transpose(x, {2, 0, 1}), w, m)));
      const std::vector<int64_t> start{-1, 0, -1}, stop{kBefore, 4, kBefore}, step{-1, 2, -2};
      EXPECT_TRUE(same_as_cpu(pad(slice(g, start, stop, step), {{2, 0}, {1, 1}, {0, 2}}, m),
                              pad(slice(x, start, stop, step), {{2, 0}, {1, 1}, {0, 2}}, m)));
    }
    // Constant values: cast to the dtype (NaN for floats).
    EXPECT_TRUE(same_as_cpu(pad(g, w, PadMode::Constant, Array(7)), pad(x, w, PadMode::Constant, Array(7))));
    EXPECT_TRUE(same_as_cpu(pad(g, w, PadMode::Constant, Array(NAN)), pad(x, w, PadMode::Constant, Array(NAN))));
  }
  // An empty input axis with constant padding: all fill. Zero-size results.
  Array e = zeros({0, 3}, int16);
  EXPECT_TRUE(same_as_cpu(pad(on_gpu(e), {{2, 1}, {1, 1}}, PadMode::Constant, Array(4)),
                          pad(e, {{2, 1}, {1, 1}}, PadMode::Constant, Array(4))));
  Array e2 = zeros({0, 3}, float32);
  EXPECT_TRUE(same_as_cpu(pad(on_gpu(e2), {{0, 0}, {1, 1}}, PadMode::Edge), pad(e2, {{0, 0}, {1, 1}}, PadMode::Edge)));
  // 1-d reflect and edge of a longer array; a broadcast input.
  Array v = special_array({9}, float64, -5, 5, 1100);
  EXPECT_TRUE(same_as_cpu(pad(on_gpu(v), {{8, 8}}, PadMode::Reflect), pad(v, {{8, 8}}, PadMode::Reflect)));
  EXPECT_TRUE(same_as_cpu(pad(on_gpu(v), {{20, 3}}, PadMode::Edge), pad(v, {{20, 3}}, PadMode::Edge)));
  EXPECT_TRUE(same_as_cpu(pad(broadcast_to(on_gpu(v), {4, 9}), {{1, 1}, {2, 2}}, PadMode::Reflect),
                          pad(broadcast_to(v, {4, 9}), {{1, 1}, {2, 2}}, PadMode::Reflect)));
}

TEST(CudaSliceUpdate, EveryDtypeStepsBroadcastAndViews) {
  SMELT_REQUIRE_GPU();
  const auto& dts = all_dtypes();
  for (size_t t = 0; t < dts.size(); ++t) {
    const Dtype dt = dts[t];
    SCOPED_TRACE(dtype_name(dt));
    const uint32_t seed = static_cast<uint32_t>(1200 + 10 * t);
    Array x = special_array({6, 7}, dt, -50, 50, seed);
    Array g = on_gpu(x);
    Array u = special_array({3, 4}, dt, -50, 50, seed + 1);
    EXPECT_TRUE(same_as_cpu(slice_update(g, on_gpu(u), {0, 1}, {6, 5}, {2, 1}), slice_update(x, u, {0, 1}, {6, 5}, {2, 1})));
    // Negative steps; a broadcast update; a transposed update; another dtype (cast first).
    Array u2 = special_array({3, 3}, dt, -50, 50, seed + 2);
    EXPECT_TRUE(same_as_cpu(slice_update(g, on_gpu(u2), {-1, 6}, {kBefore, 0}, {-2, -2}),
                            slice_update(x, u2, {-1, 6}, {kBefore, 0}, {-2, -2})));
    Array row = special_array({1, 7}, dt, -50, 50, seed + 3);
    EXPECT_TRUE(same_as_cpu(slice_update(g, on_gpu(row), {1, 0}, {5, 7}), slice_update(x, row, {1, 0}, {5, 7})));
    Array ut = special_array({4, 3}, dt, -50, 50, seed + 4);
    EXPECT_TRUE(same_as_cpu(slice_update(g, transpose(on_gpu(ut)), {2, 2}, {5, 6}), slice_update(x, transpose(ut), {2, 2}, {5, 6})));
    EXPECT_TRUE(same_as_cpu(slice_update(g, Array(3.5f), {0, 0}, {6, 7}, {5, 3}), slice_update(x, Array(3.5f), {0, 0}, {6, 7}, {5, 3})));
    // A view as the array being updated (copied first).
    EXPECT_TRUE(same_as_cpu(slice_update(transpose(g), on_gpu(u), {1, 2}, {4, 6}), slice_update(transpose(x), u, {1, 2}, {4, 6})));
  }
}

// ---- nonzero and the scan ------------------------------------------------------------------------

TEST(CudaNonzero, EveryDtypeShapeAndView) {
  SMELT_REQUIRE_GPU();
  const auto& dts = all_dtypes();
  for (size_t t = 0; t < dts.size(); ++t) {
    const Dtype dt = dts[t];
    SCOPED_TRACE(dtype_name(dt));
    // Values in [-2, 2) floored: a quarter zeros; floats add NaN (non-zero), ±0 and ±inf.
    for (Shape s : {Shape{7}, Shape{5, 7}, Shape{3, 1, 4}, Shape{2, 3, 1, 2, 5}}) {
      Array x = special_array(s, dt, -2, 2, static_cast<uint32_t>(1300 + t));
      EXPECT_TRUE(same_as_cpu(nonzero(on_gpu(x)), nonzero(x)));
    }
    Array x = special_array({5, 6, 7}, dt, -2, 2, static_cast<uint32_t>(1320 + t));
    EXPECT_TRUE(same_as_cpu(nonzero(transpose(on_gpu(x), {2, 0, 1})), nonzero(transpose(x, {2, 0, 1}))));
    EXPECT_TRUE(same_as_cpu(nonzero(slice(on_gpu(x), {-1, 0, -1}, {kBefore, 6, kBefore}, {-2, 1, -3})),
                            nonzero(slice(x, {-1, 0, -1}, {kBefore, 6, kBefore}, {-2, 1, -3}))));
    EXPECT_TRUE(same_as_cpu(nonzero(broadcast_to(on_gpu(special_array({1, 7}, dt, -2, 2, 1340)), {3, 7})),
                            nonzero(broadcast_to(special_array({1, 7}, dt, -2, 2, 1340), {3, 7}))));
  }
  // 0-d, empty, all zeros, a lazy input.
  EXPECT_TRUE(same_as_cpu(nonzero(on_gpu(Array(5))), nonzero(Array(5))));
  EXPECT_TRUE(same_as_cpu(nonzero(on_gpu(Array(0.0))), nonzero(Array(0.0))));
  EXPECT_TRUE(same_as_cpu(nonzero(on_gpu(zeros({0, 3}, int32))), nonzero(zeros({0, 3}, int32))));
  EXPECT_TRUE(same_as_cpu(nonzero(on_gpu(zeros({4, 3}))), nonzero(zeros({4, 3}))));
  Array a = special_array({3, 4}, int32, -2, 2, 1350);
  EXPECT_TRUE(same_as_cpu(nonzero(astype(on_gpu(a), float16)), nonzero(astype(a, float16))));
  // More than 1024 blocks of 1024: a two-level scan of the block counts.
  Array big = random_array({1100, 1000}, int8, -1, 2, 1360);
  EXPECT_TRUE(same_as_cpu(nonzero(on_gpu(big)), nonzero(big)));
}

TEST(CudaScanUtil, ExclusiveInt64ScanAtEveryLevel) {
  SMELT_REQUIRE_GPU();
#if SMELT_HAS_CUDA
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{1023}, int64_t{1024}, int64_t{1025}, int64_t{3000},
                    int64_t{1100000}}) {
    SCOPED_TRACE("n " + std::to_string(n));
    Array v = on_gpu(random_array({n}, int64, -1000000, 1000000, static_cast<uint32_t>(1400 + n % 97)));
    Array out = on_gpu(zeros({n + 1}, int64));
    v.eval();
    out.eval();
    const std::vector<int64_t> in = on_cpu(v).to_vector<int64_t>();
    std::vector<int64_t> expected(static_cast<size_t>(n) + 1, 0);
    for (int64_t j = 0; j < n; ++j) expected[j + 1] = expected[j] + in[j];
    cuda::DeviceState& s = cuda::device_state(0);
    const uint64_t o = cuda::dptr(out);
    cuda::exclusive_scan_i64(s, n > 0 ? cuda::dptr(v) : 0, o, n, o + 8 * static_cast<uint64_t>(n), "test");
    EXPECT_EQ(on_cpu(out).to_vector<int64_t>(), expected);
    if (n == 0) continue;
    // In place, without a total.
    cuda::exclusive_scan_i64(s, cuda::dptr(v), cuda::dptr(v), n, 0, "test");
    expected.pop_back();
    EXPECT_EQ(on_cpu(v).to_vector<int64_t>(), expected);
  }
#endif
}

}  // namespace
}  // namespace smelt
