// Tests for sort, argsort, topk and unique against std::stable_sort references on random data.
#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

#include "src/core/node.h"
#include "test_utils.h"

namespace smelt {
namespace {

using test::all_close;
using test::as_doubles;
using test::bit_equal;
using test::random_array;

const std::vector<Dtype> kAllDtypes = {bool_,  int8,    int16,    int32,   int64,  uint8,  uint16,
                                       uint32, uint64,  float16,  bfloat16, float32, float64};

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// NumPy's order: ascending, NaN after everything; `descending` is its exact reverse (NaN first).
bool ref_less(double a, double b) { return a < b || (std::isnan(b) && !std::isnan(a)); }

struct Rows {
  int64_t n = 0, rows = 0, inner = 1;
  // Row-major index of element j of row r (rows enumerate the other axes in row-major order).
  int64_t at(int64_t r, int64_t j) const { return (r / inner) * n * inner + j * inner + r % inner; }
};
Rows rows_of(const Shape& shape, int axis) {
  Rows L;
  L.n = shape[axis];
  L.rows = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (static_cast<int>(d) == axis) continue;
    L.rows *= shape[d];
    if (static_cast<int>(d) > axis) L.inner *= shape[d];
  }
  return L;
}

// Stable argsort along `axis` of row-major values: the expected output of argsort.
std::vector<int64_t> ref_argsort(const std::vector<double>& v, const Shape& shape, int axis, bool descending) {
  Rows L = rows_of(shape, axis);
  std::vector<int64_t> out(v.size());
  for (int64_t r = 0; r < L.rows; ++r) {
    std::vector<int64_t> idx(L.n);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
      double x = v[L.at(r, a)], y = v[L.at(r, b)];
      return descending ? ref_less(y, x) : ref_less(x, y);
    });
    for (int64_t j = 0; j < L.n; ++j) out[L.at(r, j)] = idx[j];
  }
  return out;
}

std::vector<double> gather_rows(const std::vector<double>& v, const Shape& shape, int axis,
                                const std::vector<int64_t>& idx) {
  Rows L = rows_of(shape, axis);
  std::vector<double> out(v.size());
  for (int64_t r = 0; r < L.rows; ++r)
    for (int64_t j = 0; j < L.n; ++j) out[L.at(r, j)] = v[L.at(r, idx[L.at(r, j)])];
  return out;
}

std::vector<double> to_double(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

// Random values with many ties for integers (and a few NaNs/infinities for floats).
Array test_input(const Shape& shape, Dtype dtype, uint32_t seed) {
  if (dtype == bool_) return random_array(shape, dtype, 0.0, 2.0, seed);
  // Unsigned values stay small: a wrapped negative would not survive the float64 reference.
  if (is_unsigned_integral(dtype)) return random_array(shape, dtype, 0.0, 40.0, seed);
  if (!is_floating(dtype)) return random_array(shape, dtype, -20.0, 20.0, seed);
  auto v = test::random_values(static_cast<size_t>(shape_size(shape)), -5.0, 5.0, seed);
  for (size_t i = 0; i < v.size(); i += 7) v[i] = kNaN;
  for (size_t i = 3; i < v.size(); i += 11) v[i] = i % 2 ? kInf : -kInf;
  for (size_t i = 5; i < v.size(); i += 13) v[i] = std::round(v[i]);  // ties
  return astype(Array(v, shape), dtype);
}

TEST(Sort, MatchesStableSortEveryDtypeAndAxis) {
  const Shape shape{5, 6, 9};
  for (Dtype dt : kAllDtypes) {
    Array a = test_input(shape, dt, 3);
    auto v = as_doubles(a);
    for (int axis : {0, 1, 2, -1, -2}) {
      int ax = axis < 0 ? axis + 3 : axis;
      SCOPED_TRACE(std::string(dtype_name(dt)) + " axis " + std::to_string(axis));
      Array s = sort(a, axis);
      EXPECT_EQ(s.dtype(), dt);
      EXPECT_EQ(s.shape(), shape);
      auto idx = ref_argsort(v, shape, ax, false);
      EXPECT_TRUE(all_close(s, gather_rows(v, shape, ax, idx), 0, 0));
      Array i = argsort(a, axis);
      EXPECT_EQ(i.dtype(), int64);
      EXPECT_TRUE(all_close(i, to_double(idx), 0, 0));
      Array d = argsort(a, axis, true);
      EXPECT_TRUE(all_close(d, to_double(ref_argsort(v, shape, ax, true)), 0, 0));
    }
  }
}

TEST(Sort, NaNSortsLastAndInfinitiesInPlace) {
  for (Dtype dt : {float16, bfloat16, float32, float64}) {
    SCOPED_TRACE(dtype_name(dt));
    Array a = astype(Array(std::vector<double>{kNaN, 1.0, -kInf, kNaN, 0.0, kInf, -2.0}, {7}), dt);
    EXPECT_TRUE(all_close(sort(a), {-kInf, -2.0, 0.0, 1.0, kInf, kNaN, kNaN}, 0, 0));
    EXPECT_TRUE(all_close(argsort(a), {2, 6, 4, 1, 5, 0, 3}, 0, 0));
    // Descending is the reverse order with ties (the NaNs) kept in input order: NaN first.
    EXPECT_TRUE(all_close(argsort(a, -1, true), {0, 3, 5, 1, 4, 6, 2}, 0, 0));
  }
}

TEST(Sort, KeepsSignedZeroBitsInInputOrder) {
  // -0 == +0, so a stable sort keeps them in input order, bits included.
  Array a(std::vector<float>{0.0f, -0.0f, -1.0f, -0.0f, 0.0f}, {5});
  auto s = sort(a).to_vector<float>();
  EXPECT_EQ(s[0], -1.0f);
  EXPECT_FALSE(std::signbit(s[1]));
  EXPECT_TRUE(std::signbit(s[2]));
  EXPECT_TRUE(std::signbit(s[3]));
  EXPECT_FALSE(std::signbit(s[4]));
}

TEST(Sort, ArgsortIsStableWithManyTies) {
  for (Dtype dt : {int8, uint16, float16, float32}) {
    SCOPED_TRACE(dtype_name(dt));
    Array a = random_array({3, 2000}, dt, 0.0, 4.0, 11);
    auto v = as_doubles(a);
    EXPECT_TRUE(all_close(argsort(a), to_double(ref_argsort(v, {3, 2000}, 1, false)), 0, 0));
    EXPECT_TRUE(all_close(argsort(a, -1, true), to_double(ref_argsort(v, {3, 2000}, 1, true)), 0, 0));
    EXPECT_TRUE(all_close(argsort(a, 0, true), to_double(ref_argsort(v, {3, 2000}, 0, true)), 0, 0));
  }
}

TEST(Sort, ExtremeIntegers) {
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  Array a(std::vector<int64_t>{hi, 0, lo, -1, hi - 1, lo + 1}, {6});
  EXPECT_EQ(sort(a).to_vector<int64_t>(), (std::vector<int64_t>{lo, lo + 1, -1, 0, hi - 1, hi}));
  const uint64_t top = std::numeric_limits<uint64_t>::max();
  Array u(std::vector<uint64_t>{top, 1, uint64_t{1} << 63, 0}, {4});
  EXPECT_EQ(sort(u).to_vector<uint64_t>(), (std::vector<uint64_t>{0, 1, uint64_t{1} << 63, top}));
  EXPECT_EQ(argsort(u).to_vector<int64_t>(), (std::vector<int64_t>{3, 1, 2, 0}));
}

TEST(Sort, NonContiguousInputs) {
  Array base = test_input({8, 12}, float32, 5);
  std::vector<Array> views = {transpose(base), slice(base, {7, 11}, {-9, -13}, {-2, -3}),
                              broadcast_to(slice(base, {0, 0}, {1, 12}), {4, 12}), flip(base, {0})};
  for (auto& view : views) {
    Shape shape = view.shape();
    auto v = as_doubles(view);
    for (int axis : {0, 1}) {
      auto idx = ref_argsort(v, shape, axis, false);
      EXPECT_TRUE(all_close(sort(view, axis), gather_rows(v, shape, axis, idx), 0, 0));
      EXPECT_TRUE(all_close(argsort(view, axis), to_double(idx), 0, 0));
    }
  }
}

TEST(Sort, SortsATemporaryInPlaceWithoutTouchingItsSource) {
  Array a = test_input({64, 50}, float64, 9);
  auto before = as_doubles(a);
  Array s = sort(astype(a, float32), 1);  // the cast's buffer is donated to the sort
  Shape shape{64, 50};
  auto v = as_doubles(astype(a, float32));
  EXPECT_TRUE(all_close(s, gather_rows(v, shape, 1, ref_argsort(v, shape, 1, false)), 0, 0));
  EXPECT_TRUE(all_close(a, before, 0, 0));
  // argsort of an 8-byte temporary writes its indices over the temporary's buffer.
  Array i = argsort(a * 1.0, 0);
  EXPECT_TRUE(all_close(i, to_double(ref_argsort(before, shape, 0, false)), 0, 0));
  EXPECT_TRUE(all_close(a, before, 0, 0));
}

TEST(Sort, LongRowsAreThreadCountIndependent) {
  // One long row sorts in parallel chunks merged stably; the result may not depend on threads.
  const int saved = cpu_threads();
  for (Dtype dt : {int8, float32, bfloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    Array a = dt == int8 ? random_array({200003}, dt, -50, 50, 4) : test_input({200003}, dt, 4);
    auto v = as_doubles(a);
    auto idx = ref_argsort(v, {200003}, 0, false);
    std::vector<Array> sorted, args;
    for (int threads : {1, 2, 3, 8}) {
      set_cpu_threads(threads);
      sorted.push_back(sort(a));
      args.push_back(argsort(a, 0, true));
      eval({sorted.back(), args.back()});
    }
    set_cpu_threads(saved);
    EXPECT_TRUE(all_close(sorted[0], gather_rows(v, {200003}, 0, idx), 0, 0));
    EXPECT_TRUE(all_close(args[0], to_double(ref_argsort(v, {200003}, 0, true)), 0, 0));
    for (size_t i = 1; i < sorted.size(); ++i) {
      EXPECT_TRUE(bit_equal(sorted[i], sorted[0]));
      EXPECT_TRUE(bit_equal(args[i], args[0]));
    }
  }
  set_cpu_threads(saved);
}

TEST(Sort, EmptyAndSizeOneAxes) {
  Array e = zeros({0, 4}, float32);
  EXPECT_EQ(sort(e, 0).shape(), (Shape{0, 4}));
  EXPECT_EQ(argsort(e, 1).shape(), (Shape{0, 4}));
  EXPECT_EQ(sort(e, 1).size(), 0);
  Array one = test_input({1, 5}, int32, 2);
  EXPECT_TRUE(bit_equal(sort(one, 0), one));
  EXPECT_EQ(argsort(one, 0).to_vector<int64_t>(), std::vector<int64_t>(5, 0));
}

TEST(Sort, Errors) {
  Array a = zeros({2, 3});
  EXPECT_THROW_MSG(sort(a, 2), InvalidArgument, "sort: axis 2 is out of range for an array of rank 2");
  EXPECT_THROW_MSG(argsort(a, -3), InvalidArgument, "argsort: axis -3 is out of range");
  EXPECT_THROW_MSG(sort(Array(1.0f)), InvalidArgument, "sort: axis -1 is out of range for an array of rank 0");
  EXPECT_THROW_MSG(sort(Array()), InvalidArgument, "sort: an input is an empty handle");
  EXPECT_THROW_MSG(argsort(Array()), InvalidArgument, "argsort: an input is an empty handle");
}

// ---- topk ------------------------------------------------------------------------------------

// The first k of a stable sort by value (best first): ties keep the lower index first.
void check_topk(Array a, int64_t k, int axis, bool largest) {
  Shape shape = a.shape();
  int ax = axis < 0 ? axis + a.ndim() : axis;
  auto v = as_doubles(a);
  auto order = ref_argsort(v, shape, ax, largest);
  Rows L = rows_of(shape, ax);
  Shape out_shape = shape;
  out_shape[ax] = k;
  Rows O = rows_of(out_shape, ax);
  std::vector<double> ev(shape_size(out_shape)), ei(ev.size());
  for (int64_t r = 0; r < L.rows; ++r)
    for (int64_t j = 0; j < k; ++j) {
      int64_t i = order[L.at(r, j)];
      ei[O.at(r, j)] = static_cast<double>(i);
      ev[O.at(r, j)] = v[L.at(r, i)];
    }
  auto [values, indices] = topk(a, k, axis, largest);
  EXPECT_EQ(values.shape(), out_shape);
  EXPECT_EQ(values.dtype(), a.dtype());
  EXPECT_EQ(indices.dtype(), int64);
  EXPECT_TRUE(all_close(values, ev, 0, 0));
  EXPECT_TRUE(all_close(indices, ei, 0, 0));
}

TEST(TopK, MatchesReferenceEveryDtype) {
  for (Dtype dt : kAllDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    Array a = test_input({6, 40}, dt, 21);
    for (int64_t k : {0, 1, 5, 39, 40})
      for (bool largest : {true, false}) {
        SCOPED_TRACE("k " + std::to_string(k) + (largest ? " largest" : " smallest"));
        check_topk(a, k, -1, largest);
        if (k <= 6) check_topk(a, k, 0, largest);
      }
  }
}

TEST(TopK, NaNIsTheLargest) {
  Array a(std::vector<float>{1.0f, NAN, 3.0f, -INFINITY, NAN, 2.0f}, {6});
  auto [v, i] = topk(a, 3);
  EXPECT_TRUE(all_close(v, {kNaN, kNaN, 3.0}, 0, 0));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 4, 2}));
  auto [sv, si] = topk(a, 4, -1, false);
  EXPECT_TRUE(all_close(sv, {-kInf, 1.0, 2.0, 3.0}, 0, 0));
  EXPECT_EQ(si.to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 5, 2}));
}

TEST(TopK, TiesKeepTheLowerIndexFirst) {
  Array a = random_array({4, 3000}, int16, 0.0, 3.0, 8);  // only three distinct values
  for (int64_t k : {1, 7, 1500, 2999}) {
    check_topk(a, k, 1, true);
    check_topk(a, k, 1, false);
  }
}

TEST(TopK, SmallKOfLongRowsAndStridedInputs) {
  Array a = test_input({3, 50000}, float32, 13);
  check_topk(a, 10, 1, true);
  check_topk(a, 10, 1, false);
  Array base = test_input({30, 20}, bfloat16, 14);
  check_topk(transpose(base), 4, 1, true);
  check_topk(slice(base, {29, 0}, {-31, 20}, {-3, 2}), 3, 0, false);
  check_topk(broadcast_to(slice(base, {0, 0}, {1, 20}), {5, 20}), 6, 1, true);
}

TEST(TopK, LongRowsAreThreadCountIndependent) {
  // A long row is searched in parallel chunks whose candidates are merged.
  const int saved = cpu_threads();
  Array a = random_array({2, 150001}, int16, -300, 300, 19);  // many ties
  std::vector<Array> vals, idxs;
  for (int threads : {1, 2, 3, 8}) {
    set_cpu_threads(threads);
    auto [v, i] = topk(a, 25, 1, threads % 2 == 0);
    auto [v2, i2] = topk(a, 25, 1, threads % 2 != 0);
    eval({v, i, v2, i2});
    vals.push_back(threads % 2 == 0 ? v : v2);
    idxs.push_back(threads % 2 == 0 ? i : i2);
  }
  set_cpu_threads(saved);
  for (size_t t = 1; t < vals.size(); ++t) {
    EXPECT_TRUE(bit_equal(vals[t], vals[0]));
    EXPECT_TRUE(bit_equal(idxs[t], idxs[0]));
  }
  check_topk(a, 25, 1, true);
  check_topk(a, 25, 1, false);
  check_topk(test_input({1, 100000}, float32, 20), 7, 1, true);
}

TEST(Sort, DescendingSortPrimitive) {
  // The Sort primitive also sorts descending (NaN first), for backends of other front ends.
  Array a = test_input({4, 30}, float32, 23);
  Array d = make_array(a.shape(), a.dtype(), a.device(), make_prim(PrimKind::Sort, SortParams{1, true}), {a});
  auto v = as_doubles(a);
  EXPECT_TRUE(all_close(d, gather_rows(v, {4, 30}, 1, ref_argsort(v, {4, 30}, 1, true)), 0, 0));
}

TEST(TopK, UnsortedRequestReturnsTheSameSortedResult) {
  Array a = test_input({7, 30}, float64, 17);
  auto [v1, i1] = topk(a, 5, 1, true, true);
  auto [v2, i2] = topk(a, 5, 1, true, false);
  EXPECT_TRUE(bit_equal(v1, v2));
  EXPECT_TRUE(bit_equal(i1, i2));
}

TEST(TopK, UsingOnlyOneOutput) {
  Array a = test_input({5, 8}, int32, 3);
  Array idx = topk(a, 2).second;  // the values output is dropped before evaluation
  auto order = ref_argsort(as_doubles(a), {5, 8}, 1, true);
  for (int64_t r = 0; r < 5; ++r) {
    EXPECT_EQ(idx.to_vector<int64_t>()[r * 2], order[r * 8]);
    EXPECT_EQ(idx.to_vector<int64_t>()[r * 2 + 1], order[r * 8 + 1]);
  }
}

TEST(TopK, EmptyInputs) {
  auto [v, i] = topk(zeros({0, 5}), 2);
  EXPECT_EQ(v.shape(), (Shape{0, 2}));
  EXPECT_EQ(i.shape(), (Shape{0, 2}));
  EXPECT_EQ(i.to_vector<int64_t>().size(), 0u);
  auto [v0, i0] = topk(zeros({3, 0}), 0);
  EXPECT_EQ(v0.shape(), (Shape{3, 0}));
  EXPECT_EQ(v0.to_vector<float>().size(), 0u);
}

TEST(TopK, Errors) {
  Array a = zeros({2, 3}, int32);
  EXPECT_THROW_MSG(topk(a, 4), InvalidArgument, "topk: k = 4 is outside [0, 3] for axis -1 of int32[2,3]");
  EXPECT_THROW_MSG(topk(a, -1, 0), InvalidArgument, "topk: k = -1 is outside [0, 2] for axis 0 of int32[2,3]");
  EXPECT_THROW_MSG(topk(a, 1, 2), InvalidArgument, "topk: axis 2 is out of range for an array of rank 2");
  EXPECT_THROW_MSG(topk(Array(3), 1), InvalidArgument, "topk: axis -1 is out of range for an array of rank 0");
  EXPECT_THROW_MSG(topk(Array(), 1), InvalidArgument, "topk: an input is an empty handle");
}

// ---- unique ----------------------------------------------------------------------------------

struct RefUnique {
  std::vector<double> values;
  std::vector<int64_t> indices, inverse, counts;
};

// Flattened unique with std::map (NaNs share one key, placed last), in sorted or first-seen order.
RefUnique ref_unique(const std::vector<double>& v, bool sorted) {
  std::map<std::pair<int, double>, int64_t> first;  // (is NaN, value) -> first index; -0 == +0
  for (size_t i = 0; i < v.size(); ++i) {
    bool nan = std::isnan(v[i]);
    first.emplace(std::make_pair(nan ? 1 : 0, nan ? 0.0 : v[i]), static_cast<int64_t>(i));
  }
  std::vector<int64_t> firsts;
  for (auto& [k, i] : first) firsts.push_back(i);
  if (!sorted) std::sort(firsts.begin(), firsts.end());
  RefUnique r;
  auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  for (int64_t f : firsts) {
    r.values.push_back(v[f]);
    r.indices.push_back(f);
    r.counts.push_back(std::count_if(v.begin(), v.end(), [&](double x) { return same(x, v[f]); }));
  }
  for (double x : v)
    for (size_t u = 0; u < r.values.size(); ++u)
      if (same(x, r.values[u])) {
        r.inverse.push_back(static_cast<int64_t>(u));
        break;
      }
  return r;
}

void check_unique(Array a, bool sorted) {
  auto ref = ref_unique(as_doubles(a), sorted);
  auto u = unique(a, std::nullopt, sorted);
  EXPECT_EQ(u.values.dtype(), a.dtype());
  EXPECT_EQ(u.values.ndim(), 1);
  EXPECT_TRUE(all_close(u.values, ref.values, 0, 0));
  EXPECT_EQ(u.indices.to_vector<int64_t>(), ref.indices);
  EXPECT_EQ(u.inverse.shape(), a.shape());
  EXPECT_EQ(u.inverse.dtype(), int64);
  EXPECT_EQ(u.inverse.to_vector<int64_t>(), ref.inverse);
  EXPECT_EQ(u.counts.to_vector<int64_t>(), ref.counts);
}

TEST(Unique, FlattenedEveryDtype) {
  for (Dtype dt : kAllDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    Array a = test_input({4, 25}, dt, 31);
    check_unique(a, true);
    check_unique(a, false);
  }
}

TEST(Unique, NaNsCollapseAndSignedZerosAreEqual) {
  Array a(std::vector<double>{kNaN, 1.0, kNaN, -0.0, 0.0, 1.0}, {6});
  auto u = unique(a);
  EXPECT_TRUE(all_close(u.values, {0.0, 1.0, kNaN}, 0, 0));
  EXPECT_TRUE(std::signbit(u.values.to_vector<double>()[0]));  // the first occurrence's bits
  EXPECT_EQ(u.indices.to_vector<int64_t>(), (std::vector<int64_t>{3, 1, 0}));
  EXPECT_EQ(u.inverse.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 2, 0, 0, 1}));
  EXPECT_EQ(u.counts.to_vector<int64_t>(), (std::vector<int64_t>{2, 2, 2}));
  auto f = unique(a, std::nullopt, false);
  EXPECT_TRUE(all_close(f.values, {kNaN, 1.0, 0.0}, 0, 0));
  EXPECT_EQ(f.indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(f.inverse.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 2, 2, 1}));
}

TEST(Unique, NonContiguousScalarAndEmpty) {
  Array base = test_input({6, 9}, int16, 33);
  check_unique(transpose(base), true);
  check_unique(slice(base, {5, 8}, {-7, -10}, {-2, -3}), false);
  auto s = unique(Array(7));
  EXPECT_EQ(s.values.to_vector<int32_t>(), (std::vector<int32_t>{7}));
  EXPECT_EQ(s.inverse.shape(), Shape{});
  EXPECT_EQ(s.counts.to_vector<int64_t>(), (std::vector<int64_t>{1}));
  auto e = unique(zeros({0, 3}, uint8));
  EXPECT_EQ(e.values.shape(), (Shape{0}));
  EXPECT_EQ(e.values.dtype(), uint8);
  EXPECT_EQ(e.inverse.shape(), (Shape{0, 3}));
  EXPECT_EQ(e.counts.shape(), (Shape{0}));
}

// Unique slices along an axis: compare slices lexicographically (row-major over other axes).
TEST(Unique, SlicesAlongAnAxis) {
  // Rows 0 and 2 repeat, as do rows 1 and 4.
  Array a(std::vector<int32_t>{3, 1, 2, 0, 5, 1, 3, 1, 2, 0, 4, 4, 0, 5, 1}, {5, 3});
  for (bool sorted : {true, false}) {
    auto u = unique(a, 0, sorted);
    if (sorted) {
      EXPECT_EQ(u.values.to_vector<int32_t>(), (std::vector<int32_t>{0, 4, 4, 0, 5, 1, 3, 1, 2}));
      EXPECT_EQ(u.indices.to_vector<int64_t>(), (std::vector<int64_t>{3, 1, 0}));
      EXPECT_EQ(u.inverse.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 2, 0, 1}));
      EXPECT_EQ(u.counts.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 2}));
    } else {
      EXPECT_EQ(u.values.to_vector<int32_t>(), (std::vector<int32_t>{3, 1, 2, 0, 5, 1, 0, 4, 4}));
      EXPECT_EQ(u.indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 3}));
      EXPECT_EQ(u.inverse.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 2, 1}));
      EXPECT_EQ(u.counts.to_vector<int64_t>(), (std::vector<int64_t>{2, 2, 1}));
    }
    EXPECT_EQ(u.values.shape(), (Shape{3, 3}));
  }
  // Columns of the transpose are the rows above.
  auto t = unique(transpose(a), -1);
  EXPECT_EQ(t.values.shape(), (Shape{3, 3}));
  EXPECT_EQ(t.values.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 3, 4, 5, 1, 4, 1, 2}));
  EXPECT_EQ(t.inverse.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 2, 0, 1}));
}

TEST(Unique, RandomSlicesAgainstReference) {
  // Middle axis of a 3-d float array: slices [2, 4] with values from a tiny set, so many repeat.
  Array a = astype(random_array({2, 40, 4}, int32, 0.0, 2.0, 41), float32);
  auto v = as_doubles(a);
  auto slice_of = [&](int64_t s) {
    std::vector<double> out;
    for (int64_t o = 0; o < 2; ++o)
      for (int64_t i = 0; i < 4; ++i) out.push_back(v[(o * 40 + s) * 4 + i]);
    return out;
  };
  std::map<std::vector<double>, int64_t> first;
  for (int64_t s = 0; s < 40; ++s) first.emplace(slice_of(s), s);
  auto u = unique(a, 1);
  ASSERT_EQ(u.values.shape(), (Shape{2, static_cast<int64_t>(first.size()), 4}));
  std::vector<int64_t> firsts;
  for (auto& [k, s] : first) firsts.push_back(s);
  EXPECT_EQ(u.indices.to_vector<int64_t>(), firsts);
  auto inv = u.inverse.to_vector<int64_t>();
  auto cnt = u.counts.to_vector<int64_t>();
  std::vector<int64_t> expected_counts(firsts.size(), 0);
  for (int64_t s = 0; s < 40; ++s) {
    EXPECT_EQ(slice_of(s), slice_of(firsts[inv[s]]));
    expected_counts[inv[s]]++;
  }
  EXPECT_EQ(cnt, expected_counts);
}

TEST(Unique, AxisWithEmptySlices) {
  auto u = unique(zeros({3, 0}), 0);  // three equal (empty) slices
  EXPECT_EQ(u.values.shape(), (Shape{1, 0}));
  EXPECT_EQ(u.counts.to_vector<int64_t>(), (std::vector<int64_t>{3}));
  EXPECT_EQ(u.inverse.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
  auto e = unique(zeros({0, 2}), 0);
  EXPECT_EQ(e.values.shape(), (Shape{0, 2}));
}

TEST(Unique, Errors) {
  EXPECT_THROW_MSG(unique(zeros({2, 3}), 2), InvalidArgument, "unique: axis 2 is out of range for an array of rank 2");
  EXPECT_THROW_MSG(unique(Array(1.0), 0), InvalidArgument, "unique: axis 0 is out of range for an array of rank 0");
  EXPECT_THROW_MSG(unique(Array()), InvalidArgument, "unique: an input is an empty handle");
}

}  // namespace
}  // namespace smelt
