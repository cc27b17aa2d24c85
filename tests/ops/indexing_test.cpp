// Tests for the indexing ops: take, take_along_axis, gather_nd, scatter, scatter_nd, one_hot, nonzero.
#include <cmath>
#include <limits>

#include "src/core/node.h"
#include "src/core/thread_pool.h"
#include "test_utils.h"

namespace smelt {
namespace {

using test::all_close;
using test::as_doubles;
using test::bit_equal;
using test::random_array;

const std::vector<Dtype> kAllDtypes = {bool_,  int8,    int16,   int32,    int64,   uint8,  uint16,
                                       uint32, uint64,  float16, bfloat16, float32, float64};
const std::vector<Dtype> kIndexDtypes = {int8, int16, int32, int64, uint8, uint16, uint32, uint64};

std::vector<int64_t> unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> c(s.size());
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
    c[d] = i % s[d];
    i /= s[d];
  }
  return c;
}

int64_t ravel(const std::vector<int64_t>& c, const Shape& s) {
  int64_t off = 0;
  for (size_t d = 0; d < s.size(); ++d) off = off * s[d] + c[d];
  return off;
}

template <class F>
std::vector<double> build(const Shape& shape, F f) {
  std::vector<double> out(static_cast<size_t>(shape_size(shape)));
  for (int64_t i = 0; i < shape_size(shape); ++i) out[i] = f(unravel(i, shape));
  return out;
}

::testing::AssertionResult exact(Array got, const Shape& shape, const std::vector<double>& expected) {
  if (got.shape() != shape)
    return ::testing::AssertionFailure() << "shape " << shape_to_string(got.shape()) << " != " << shape_to_string(shape);
  return all_close(got, expected, 0.0, 0.0);
}

Array rnd(const Shape& s, Dtype d, uint32_t seed = 1) { return random_array(s, d, -50.0, 50.0, seed); }

/// Random indices in [lo, hi) of an integer dtype (negative ones only for signed dtypes).
Array rnd_indices(const Shape& s, Dtype d, int64_t dim, uint32_t seed, bool negative = true) {
  bool neg = negative && is_signed_integral(d);
  return random_array(s, d, neg ? -static_cast<double>(dim) : 0.0, static_cast<double>(dim), seed);
}

int64_t wrap(int64_t i, int64_t dim) { return i < 0 ? i + dim : i; }

// ---- take -------------------------------------------------------------------------------------

TEST(Take, AxisFormMatchesReferenceForEveryIndexDtype) {
  Array a = rnd({4, 5, 3}, float32);
  auto av = as_doubles(a);
  uint32_t seed = 10;
  for (Dtype idt : kIndexDtypes) {
    for (int axis = -3; axis < 3; ++axis) {
      int ax = axis < 0 ? axis + 3 : axis;
      int64_t dim = a.shape()[ax];
      Array idx = rnd_indices({2, 3}, idt, dim, seed++);
      auto iv = as_doubles(idx);
      Shape out_shape(a.shape().begin(), a.shape().begin() + ax);
      out_shape.insert(out_shape.end(), {2, 3});
      out_shape.insert(out_shape.end(), a.shape().begin() + ax + 1, a.shape().end());
      auto expected = build(out_shape, [&](auto c) {
        std::vector<int64_t> src(c.begin(), c.begin() + ax);
        src.push_back(wrap(static_cast<int64_t>(iv[c[ax] * 3 + c[ax + 1]]), dim));
        src.insert(src.end(), c.begin() + ax + 2, c.end());
        return av[ravel(src, a.shape())];
      });
      EXPECT_TRUE(exact(take(a, idx, axis), out_shape, expected)) << dtype_name(idt) << " axis " << axis;
    }
  }
}

TEST(Take, EveryDataDtypeDuplicatesAndNonContiguous) {
  for (Dtype d : kAllDtypes) {
    Array a = rnd({6, 4}, d, 3);
    auto av = as_doubles(a);
    Array idx({5, -1, 0, 5, -6, 2}, {6});
    Array got = take(a, idx, 0);
    EXPECT_TRUE(exact(got, {6, 4}, build({6, 4}, [&](auto c) {
                        int64_t rows[] = {5, 5, 0, 5, 0, 2};
                        return av[rows[c[0]] * 4 + c[1]];
                      })))
        << dtype_name(d);
    EXPECT_EQ(got.dtype(), d);
  }
  // Transposed data, reversed indices, broadcast indices.
  Array a = rnd({3, 7}, int64, 4);
  auto av = as_doubles(a);
  Array t = transpose(a);  // [7,3]
  Array idx = flip(Array({0, 6, 3, 2}, {4}));
  EXPECT_TRUE(exact(take(t, idx, 0), {4, 3}, build({4, 3}, [&](auto c) {
                      int64_t r[] = {2, 3, 6, 0};
                      return av[c[1] * 7 + r[c[0]]];
                    })));
  Array bidx = broadcast_to(Array({1, -1}, {1, 2}), {3, 2});
  EXPECT_TRUE(exact(take(t, bidx, 1), {7, 3, 2}, build({7, 3, 2}, [&](auto c) {
                      return av[(c[2] ? 2 : 1) * 7 + c[0]];
                    })));
}

TEST(Take, ScalarEmptyFlattenedAndLarge) {
  Array a = rnd({4, 5}, uint16);
  auto av = as_doubles(a);
  EXPECT_TRUE(exact(take(a, Array(int64_t{-2}), 1), {4}, build({4}, [&](auto c) { return av[c[0] * 5 + 3]; })));
  EXPECT_EQ(take(a, zeros({0}, int32), 0).shape(), (Shape{0, 5}));
  EXPECT_EQ(take(a, zeros({2, 0}, int32), 1).shape(), (Shape{4, 2, 0}));
  EXPECT_TRUE(exact(take(a, Array({19, 0, -1, 7}, {2, 2})), {2, 2}, {av[19], av[0], av[19], av[7]}));
  EXPECT_TRUE(exact(take(transpose(a), Array({1, 5}, {2})), {2}, {av[5], av[6]}));
  EXPECT_TRUE(exact(take(Array(3.5f), Array({0, 0, -1}, {3})), {3}, {3.5, 3.5, 3.5}));
  EXPECT_EQ(take(zeros({0, 3}), Array({1}, {1}), 1).shape(), (Shape{0, 1}));
  // Large gather (several threads): rows of a [2000, 40] table.
  Array big = rnd({2000, 40}, float32, 8);
  auto bv = as_doubles(big);
  Array rows = rnd_indices({3000}, int32, 2000, 9);
  auto rv = as_doubles(rows);
  EXPECT_TRUE(exact(take(big, rows, 0), {3000, 40}, build({3000, 40}, [&](auto c) {
                      return bv[wrap(static_cast<int64_t>(rv[c[0]]), 2000) * 40 + c[1]];
                    })));
  Array cols = rnd_indices({70000}, int64, 40, 10);
  auto cv = as_doubles(cols);
  Array g = take(slice(big, {0}, {3}), cols, 1);
  EXPECT_TRUE(exact(g, {3, 70000}, build({3, 70000}, [&](auto c) {
                      return bv[c[0] * 40 + wrap(static_cast<int64_t>(cv[c[1]]), 40)];
                    })));
}

TEST(Take, Errors) {
  Array a = zeros({5, 3});
  EXPECT_THROW_MSG(take(a, Array({0, 7}, {2}), 0).eval(), InvalidArgument,
                   "take: index 7 is out of range for axis 0 with size 5");
  EXPECT_THROW_MSG(take(a, Array({-6}, {1}), 0).eval(), InvalidArgument,
                   "take: index -6 is out of range for axis 0 with size 5");
  EXPECT_THROW_MSG(take(a, Array({1, 3, 4, 9}, {4}), -1).eval(), InvalidArgument,
                   "take: index 3 is out of range for axis 1 with size 3");
  EXPECT_THROW_MSG(take(a, Array({std::numeric_limits<uint64_t>::max()}, {1}), 0).eval(), InvalidArgument,
                   "take: index 18446744073709551615 is out of range for axis 0 with size 5");
  EXPECT_THROW_MSG(take(a, Array({15}, {1})).eval(), InvalidArgument,
                   "take: index 15 is out of range for axis 0 with size 15");
  EXPECT_THROW_MSG(take(zeros({0}), Array({0}, {1}), 0).eval(), InvalidArgument,
                   "take: index 0 is out of range for axis 0 with size 0");
  EXPECT_THROW_MSG(take(a, Array({1.0f}, {1}), 0), DtypeError, "take: indices must have an integer dtype, got float32[1]");
  EXPECT_THROW_MSG(take(a, Array(true), 0), DtypeError, "take: indices must have an integer dtype, got bool[]");
  EXPECT_THROW_MSG(take(a, Array(0), 2), InvalidArgument, "take: axis 2 is out of range for an array of rank 2");
  EXPECT_THROW_MSG(take(Array(), Array(0), 0), InvalidArgument, "take: an input is an empty handle");
  // The first bad index in order is reported, also from a multi-threaded kernel.
  std::vector<int32_t> many(100000, 1);
  many[70000] = 9;
  many[90000] = -8;
  EXPECT_THROW_MSG(take(a, Array(many, {100000}), 0).eval(), InvalidArgument, "take: index 9 is out of range");
}

// ---- take_along_axis ----------------------------------------------------------------------------

TEST(TakeAlongAxis, MatchesReferenceWithBroadcasting) {
  for (Dtype idt : {int32, int64, uint8}) {
    Array a = rnd({3, 4, 5}, float64, 2);
    auto av = as_doubles(a);
    for (int axis = 0; axis < 3; ++axis) {
      Shape is = a.shape();
      is[axis] = 6;
      Array idx = rnd_indices(is, idt, a.shape()[axis], 20 + axis);
      auto iv = as_doubles(idx);
      auto expected = build(is, [&](auto c) {
        auto src = c;
        src[axis] = wrap(static_cast<int64_t>(iv[ravel(c, is)]), a.shape()[axis]);
        return av[ravel(src, a.shape())];
      });
      EXPECT_TRUE(exact(take_along_axis(a, idx, axis), is, expected)) << dtype_name(idt) << " " << axis;
      EXPECT_TRUE(exact(take_along_axis(a, idx, axis - 3), is, expected));
    }
  }
  // Indices [1,1,2] broadcast against [3,4,5] on the other axes; data [3,1,5] against indices [1,4,2].
  Array a = rnd({3, 4, 5}, int16, 5);
  auto av = as_doubles(a);
  Array idx({4, -1}, {1, 1, 2});
  EXPECT_TRUE(exact(take_along_axis(a, idx, 2), {3, 4, 2}, build({3, 4, 2}, [&](auto c) {
                      return av[ravel({c[0], c[1], c[2] ? 4 : 4}, {3, 4, 5})];
                    })));
  Array b = rnd({3, 1, 5}, int16, 6);
  auto bv = as_doubles(b);
  Array idx2 = Array({0, 1, 2, 3, 4, 0, 1, 2}, {1, 4, 2});
  EXPECT_TRUE(exact(take_along_axis(b, idx2, 2), {3, 4, 2}, build({3, 4, 2}, [&](auto c) {
                      int64_t k[] = {0, 1, 2, 3, 4, 0, 1, 2};
                      return bv[c[0] * 5 + k[c[1] * 2 + c[2]]];
                    })));
  // Non-contiguous data (argsort-style use on a transposed array).
  Array t = transpose(rnd({5, 3}, float32, 7));
  auto tv = as_doubles(t);
  Array order({2, 0, 1, 4, 3}, {1, 5});
  EXPECT_TRUE(exact(take_along_axis(t, broadcast_to(order, {3, 5}), 1), {3, 5}, build({3, 5}, [&](auto c) {
                      int64_t k[] = {2, 0, 1, 4, 3};
                      return tv[c[0] * 5 + k[c[1]]];
                    })));
}

TEST(TakeAlongAxis, Errors) {
  Array a = zeros({3, 4});
  EXPECT_THROW_MSG(take_along_axis(a, Array({0}, {1}), 0), ShapeError,
                   "take_along_axis: indices int32[1] must have the rank of the array float32[3,4]");
  EXPECT_THROW_MSG(take_along_axis(a, zeros({2, 3}, int32), 0), ShapeError,
                   "take_along_axis: indices int32[2,3] and array float32[3,4] do not broadcast on axis 1");
  EXPECT_THROW_MSG(take_along_axis(a, Array({4}, {1, 1}), 1).eval(), InvalidArgument,
                   "take_along_axis: index 4 is out of range for axis 1 with size 4");
  EXPECT_THROW_MSG(take_along_axis(a, zeros({1, 1}), 1), DtypeError,
                   "take_along_axis: indices must have an integer dtype, got float32[1,1]");
  EXPECT_THROW_MSG(take_along_axis(a, zeros({1, 1}, int8), -3), InvalidArgument,
                   "take_along_axis: axis -3 is out of range for an array of rank 2");
}

// ---- gather_nd ----------------------------------------------------------------------------------

TEST(GatherND, OnnxExamplesAndBatchDims) {
  // The ONNX GatherND examples.
  Array d1({0, 1, 2, 3}, {2, 2});
  EXPECT_TRUE(exact(gather_nd(d1, Array({0, 0, 1, 1}, {2, 2})), {2}, {0, 3}));
  EXPECT_TRUE(exact(gather_nd(d1, Array({1, 0}, {2, 1})), {2, 2}, {2, 3, 0, 1}));
  Array d3({0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2});
  EXPECT_TRUE(exact(gather_nd(d3, Array({0, 1, 1, 0}, {2, 2})), {2, 2}, {2, 3, 4, 5}));
  EXPECT_TRUE(exact(gather_nd(d3, Array({0, 1, 1, 0}, {2, 1, 2})), {2, 1, 2}, {2, 3, 4, 5}));
  EXPECT_TRUE(exact(gather_nd(d3, Array({1, 0}, {2, 1}), 1), {2, 2}, {2, 3, 4, 5}));
}

TEST(GatherND, RandomMatchesReference) {
  for (Dtype idt : {int32, int64, uint8, int16}) {
    for (int b = 0; b < 2; ++b) {
      for (int64_t k = 1; k <= 3 - b; ++k) {
        Array a = rnd({3, 4, 5, 2}, bfloat16, 30 + k);
        auto av = as_doubles(a);
        Shape is{3, 2, k};
        Array idx = random_array(is, idt, is_signed_integral(idt) ? -3.0 : 0.0, 3.0, 40 + b * 4 + k);
        auto iv = as_doubles(idx);
        Shape out{3, 2};
        out.insert(out.end(), a.shape().begin() + b + k, a.shape().end());
        auto expected = build(out, [&](auto c) {
          std::vector<int64_t> src;
          for (int d = 0; d < b; ++d) src.push_back(c[d]);
          for (int64_t j = 0; j < k; ++j) {
            int64_t dim = a.shape()[b + j];
            src.push_back(wrap(static_cast<int64_t>(iv[(c[0] * 2 + c[1]) * k + j]), dim));
          }
          for (size_t d = 2; d < c.size(); ++d) src.push_back(c[d]);
          return av[ravel(src, a.shape())];
        });
        EXPECT_TRUE(exact(gather_nd(a, idx, b), out, expected)) << dtype_name(idt) << " b=" << b << " k=" << k;
        // Same from a non-contiguous copy of the data.
        Array tt = transpose(copy(transpose(a, {3, 2, 1, 0})), {3, 2, 1, 0});
        EXPECT_TRUE(exact(gather_nd(tt, idx, b), out, expected));
      }
    }
  }
  // k = 0: every index row selects the whole (batch) slice.
  Array a = rnd({2, 3}, int32, 50);
  auto av = as_doubles(a);
  EXPECT_TRUE(exact(gather_nd(a, zeros({4, 0}, int64)), {4, 2, 3}, build({4, 2, 3}, [&](auto c) {
                      return av[c[1] * 3 + c[2]];
                    })));
  EXPECT_EQ(gather_nd(a, zeros({0, 2}, int64)).shape(), (Shape{0}));
}

TEST(GatherND, Errors) {
  Array a = zeros({2, 3, 4});
  EXPECT_THROW_MSG(gather_nd(a, Array(0)), ShapeError, "gather_nd: indices must have at least one axis, got int32[]");
  EXPECT_THROW_MSG(gather_nd(a, zeros({2, 4}, int32)), ShapeError,
                   "gather_nd: the last axis of indices int32[2,4] (size 4) exceeds the 3 axes of data float32[2,3,4] after batch_dims 0");
  EXPECT_THROW_MSG(gather_nd(a, zeros({3, 1}, int32), 1), ShapeError,
                   "gather_nd: the first 1 (batch) axes of data float32[2,3,4] and indices int32[3,1] must match");
  EXPECT_THROW_MSG(gather_nd(a, zeros({2, 1}, int32), 2), InvalidArgument,
                   "gather_nd: batch_dims 2 must be in [0, 2) for data float32[2,3,4] and indices int32[2,1]");
  EXPECT_THROW_MSG(gather_nd(a, zeros({2, 1}, int32), -1), InvalidArgument, "gather_nd: batch_dims -1 must be in");
  EXPECT_THROW_MSG(gather_nd(a, Array({0, 3}, {1, 2})).eval(), InvalidArgument,
                   "gather_nd: index 3 is out of range for axis 1 with size 3");
  EXPECT_THROW_MSG(gather_nd(a, Array({0, -5, 0, 0}, {2, 2}), 1).eval(), InvalidArgument,
                   "gather_nd: index -5 is out of range for axis 2 with size 4");
  EXPECT_THROW_MSG(gather_nd(a, zeros({1, 1}, float16)), DtypeError,
                   "gather_nd: indices must have an integer dtype, got float16[1,1]");
}

// ---- scatter (ONNX ScatterElements) ----------------------------------------------------------

const std::vector<ScatterReduce> kReductions = {ScatterReduce::Assign, ScatterReduce::Add, ScatterReduce::Mul,
                                                ScatterReduce::Max, ScatterReduce::Min};

double combine(ScatterReduce r, double x, double y) {
  switch (r) {
    case ScatterReduce::Assign: return y;
    case ScatterReduce::Add: return x + y;
    case ScatterReduce::Mul: return x * y;
    case ScatterReduce::Max: return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y);
    case ScatterReduce::Min: return std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y);
  }
  return 0;
}

/// Sequential ONNX ScatterElements over row-major index order (duplicates: last write wins).
std::vector<double> scatter_reference(const std::vector<double>& a, const Shape& as, const std::vector<double>& idx,
                                      const Shape& is, const std::vector<double>& upd, int axis, ScatterReduce r) {
  auto out = a;
  for (int64_t i = 0; i < shape_size(is); ++i) {
    auto c = unravel(i, is);
    c[axis] = wrap(static_cast<int64_t>(idx[i]), as[axis]);
    double& x = out[ravel(c, as)];
    x = combine(r, x, upd[i]);
  }
  return out;
}

TEST(Scatter, EveryReductionWithDuplicates) {
  for (ScatterReduce r : kReductions) {
    for (Dtype d : {float32, float64, int32, int64, float16}) {
      for (int axis = 0; axis < 2; ++axis) {
        Array a = random_array({4, 5}, d, -4, 4, 60);
        Shape is{3, 4};
        is[axis] = 6;  // more updates than the axis length: duplicates
        Array idx = rnd_indices(is, int64, a.shape()[axis], 61 + axis);
        Array upd = random_array(is, d, -4, 4, 62);
        auto expected = scatter_reference(as_doubles(a), a.shape(), as_doubles(idx), is, as_doubles(upd), axis, r);
        Array got = scatter(a, idx, upd, axis, r);
        double rtol = d == float16 ? 1e-2 : 1e-6, atol = d == float16 ? 5e-2 : 1e-5;
        EXPECT_EQ(got.dtype(), d);
        EXPECT_TRUE(all_close(got, expected, rtol, atol)) << dtype_name(d) << " reduce " << int(r) << " axis " << axis;
      }
    }
  }
}

TEST(Scatter, IndexDtypesSmallerIndicesBroadcastUpdatesNonContiguous) {
  for (Dtype idt : kIndexDtypes) {
    Array a = rnd({5, 4, 3}, int32, 70);
    Shape is{2, 5, 3};  // smaller than the data on axis 0 (allowed), longer on the scatter axis
    Array idx = rnd_indices(is, idt, 4, 71);
    Array upd = rnd(is, int32, 72);
    auto expected = scatter_reference(as_doubles(a), a.shape(), as_doubles(idx), is, as_doubles(upd), 1,
                                      ScatterReduce::Add);
    EXPECT_TRUE(exact(scatter(a, idx, upd, 1, ScatterReduce::Add), a.shape(), expected)) << dtype_name(idt);
  }
  // Scalar update broadcast, float update cast to int, transposed data and reversed indices.
  Array a = transpose(rnd({3, 4}, int16, 73));  // [4,3]
  Array idx = flip(Array({0, 3, 3, 1}, {4, 1}), {0});
  auto expected = scatter_reference(as_doubles(a), {4, 3}, as_doubles(idx), {4, 1}, std::vector<double>(4, 9), 0,
                                    ScatterReduce::Assign);
  EXPECT_TRUE(exact(scatter(a, idx, Array(9.7), 0), {4, 3}, expected));
  // Empty indices leave the data as it is.
  EXPECT_EQ(scatter(a, zeros({0, 3}, int32), Array(1), 0).id(), a.id());
}

TEST(Scatter, WrapsNaNAndBool) {
  Array a({int8_t{100}, int8_t{-100}}, {2});
  Array idx({0, 0, 1, 1}, {4});
  Array upd({int8_t{100}, int8_t{1}, int8_t{-100}, int8_t{0}}, {4});
  EXPECT_TRUE(exact(scatter(a, idx, upd, 0, ScatterReduce::Add), {2}, {-55, 56}));    // 100+100+1, -100-100+0 wrapped
  EXPECT_TRUE(exact(scatter(a, idx, upd, 0, ScatterReduce::Mul), {2}, {16, 0}));      // 100*100*1 = 10000 -> 16
  Array i64({std::numeric_limits<int64_t>::max()}, {1});
  EXPECT_TRUE(exact(scatter(i64, Array({0}, {1}), Array(int64_t{1}), 0, ScatterReduce::Add), {1},
                    {static_cast<double>(std::numeric_limits<int64_t>::min())}));
  Array f({1.0f, 2.0f, 3.0f}, {3});
  Array nan_upd({NAN, 0.5f}, {2});
  EXPECT_TRUE(all_close(scatter(f, Array({1, 2}, {2}), nan_upd, 0, ScatterReduce::Max), {1, NAN, 3}));
  EXPECT_TRUE(all_close(scatter(f, Array({1, 2}, {2}), nan_upd, 0, ScatterReduce::Min), {1, NAN, 0.5}));
  EXPECT_TRUE(all_close(scatter(f, Array({0, 0}, {2}), Array({INFINITY, -INFINITY}, {2}), 0, ScatterReduce::Add),
                        {NAN, 2, 3}));
  Array b({false, true, false}, {3});
  Array bi({0, 1, 2}, {3});
  Array bu({true, false, false}, {3});
  EXPECT_TRUE(exact(scatter(b, bi, bu, 0, ScatterReduce::Add), {3}, {1, 1, 0}));  // or
  EXPECT_TRUE(exact(scatter(b, bi, bu, 0, ScatterReduce::Mul), {3}, {0, 0, 0}));  // and
  EXPECT_TRUE(exact(scatter(b, bi, bu, 0, ScatterReduce::Max), {3}, {1, 1, 0}));
  EXPECT_TRUE(exact(scatter(b, bi, bu, 0, ScatterReduce::Min), {3}, {0, 0, 0}));
  EXPECT_TRUE(exact(scatter(b, bi, bu, 0), {3}, {1, 0, 0}));
}

TEST(Scatter, LargeIsDeterministicAcrossThreadCounts) {
  Array a = rnd({64, 3000}, float32, 80);
  Array idx = rnd_indices({64, 3000}, int32, 3000, 81);
  Array upd = random_array({64, 3000}, float32, -1, 1, 82);
  auto expected = scatter_reference(as_doubles(a), a.shape(), as_doubles(idx), {64, 3000}, as_doubles(upd), 1,
                                    ScatterReduce::Assign);
  int before = num_threads();
  std::vector<std::vector<uint8_t>> runs;
  for (int threads : {1, 3, 4}) {
    set_num_threads(threads);
    Array got = scatter(a, idx, upd, 1);
    EXPECT_TRUE(exact(got, a.shape(), expected));
    runs.push_back(test::raw_bytes(scatter(a, idx, upd, 1, ScatterReduce::Add)));
  }
  set_num_threads(before);
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
}

TEST(Scatter, ReusesABufferNothingElseSees) {
  Array x = rnd({8, 8}, int32, 95);
  auto xv = as_doubles(x);
  Array c = copy(x);
  c.eval();
  const void* storage = c.node().buffer->ptr;
  Array out = scatter(c, Array({7, 0}, {1, 2}), Array(-1), 0);
  c = Array();  // the scatter node now holds the only reference
  out.eval();
  EXPECT_EQ(out.node().buffer->ptr, storage);
  xv[7 * 8 + 0] = -1;
  xv[0 * 8 + 1] = -1;
  EXPECT_TRUE(exact(out, {8, 8}, xv));
  Array c2 = copy(out);
  c2.eval();
  const void* storage2 = c2.node().buffer->ptr;
  Array out2 = scatter_nd(c2, Array({2}, {1, 1}), Array(5), ScatterReduce::Add);
  c2 = Array();
  out2.eval();
  EXPECT_EQ(out2.node().buffer->ptr, storage2);
  auto first = xv;
  for (int j = 0; j < 8; ++j) xv[2 * 8 + j] += 5;
  EXPECT_TRUE(exact(out2, {8, 8}, xv));
  EXPECT_TRUE(exact(out, {8, 8}, first));  // copied from, not written to
}

TEST(Scatter, Errors) {
  Array a = zeros({3, 4});
  EXPECT_THROW_MSG(scatter(a, Array({0}, {1}), Array(1.0f), 0), ShapeError,
                   "scatter: indices int32[1] must have the rank of the array float32[3,4]");
  EXPECT_THROW_MSG(scatter(a, zeros({1, 5}, int32), Array(1.0f), 0), ShapeError,
                   "scatter: indices int32[1,5] are larger than the array float32[3,4] on axis 1");
  EXPECT_THROW_MSG(scatter(a, zeros({2, 2}, int32), zeros({3}), 0), ShapeError,
                   "scatter: updates float32[3] do not broadcast to the indices shape [2,2]");
  EXPECT_THROW_MSG(scatter(a, Array({3}, {1, 1}), Array(1.0f), 0).eval(), InvalidArgument,
                   "scatter: index 3 is out of range for axis 0 with size 3");
  EXPECT_THROW_MSG(scatter(a, Array({-5}, {1, 1}), Array(1.0f), 1, ScatterReduce::Add).eval(), InvalidArgument,
                   "scatter: index -5 is out of range for axis 1 with size 4");
  EXPECT_THROW_MSG(scatter(a, zeros({1, 1}), Array(1.0f), 0), DtypeError,
                   "scatter: indices must have an integer dtype, got float32[1,1]");
  EXPECT_THROW_MSG(scatter(a, zeros({1, 1}, int32), Array(1.0f), 2), InvalidArgument,
                   "scatter: axis 2 is out of range for an array of rank 2");
  EXPECT_THROW_MSG(scatter(a, zeros({1, 1}, int32), Array(), 0), InvalidArgument, "scatter: an input is an empty handle");
  // A failed scatter leaves its input untouched.
  Array src = rnd({3}, float32, 90);
  auto before = as_doubles(src);
  EXPECT_THROW(scatter(src, Array({0, 9}, {2}), Array(5.0f), 0).eval(), InvalidArgument);
  EXPECT_TRUE(exact(src, {3}, before));
}

// ---- scatter_nd (ONNX ScatterND) ---------------------------------------------------------------

std::vector<double> scatter_nd_reference(const std::vector<double>& a, const Shape& as, const std::vector<double>& idx,
                                         const Shape& is, const std::vector<double>& upd, ScatterReduce r) {
  auto out = a;
  int64_t k = is.back(), rows = shape_size(is) / std::max<int64_t>(k, 1);
  if (k == 0) rows = shape_size(Shape(is.begin(), is.end() - 1));
  Shape rest(as.begin() + k, as.end());
  int64_t slice = shape_size(rest);
  for (int64_t row = 0; row < rows; ++row) {
    std::vector<int64_t> c;
    for (int64_t j = 0; j < k; ++j) c.push_back(wrap(static_cast<int64_t>(idx[row * k + j]), as[j]));
    for (int64_t s = 0; s < slice; ++s) {
      auto full = c;
      auto tail = unravel(s, rest);
      full.insert(full.end(), tail.begin(), tail.end());
      double& x = out[ravel(full, as)];
      x = combine(r, x, upd[row * slice + s]);
    }
  }
  return out;
}

TEST(ScatterND, OnnxExample) {
  Array data({1, 2, 3, 4, 5, 6, 7, 8}, {8});
  Array idx({4, 3, 1, 7}, {4, 1});
  Array upd({9, 10, 11, 12}, {4});
  EXPECT_TRUE(exact(scatter_nd(data, idx, upd), {8}, {1, 11, 3, 10, 9, 6, 7, 12}));
  EXPECT_TRUE(exact(scatter_nd(data, Array({1, 1}, {2, 1}), Array({5, 6}, {2}), ScatterReduce::Add), {8},
                    {1, 13, 3, 4, 5, 6, 7, 8}));
  EXPECT_TRUE(exact(scatter_nd(data, Array({1, 1}, {2, 1}), Array({5, 6}, {2}), ScatterReduce::Mul), {8},
                    {1, 60, 3, 4, 5, 6, 7, 8}));
}

TEST(ScatterND, EveryReductionRandomWithDuplicates) {
  for (ScatterReduce r : kReductions) {
    for (Dtype idt : {int32, int64, uint8}) {
      for (int64_t k = 1; k <= 3; ++k) {
        Array a = random_array({4, 3, 5}, float64, -3, 3, 100 + k);
        Shape is{7, k};
        Array idx = random_array(is, idt, is_signed_integral(idt) ? -3.0 : 0.0, 3.0, 101 + k);
        Shape us{7};
        us.insert(us.end(), a.shape().begin() + k, a.shape().end());
        Array upd = random_array(us, float64, -3, 3, 102);
        auto expected = scatter_nd_reference(as_doubles(a), a.shape(), as_doubles(idx), is, as_doubles(upd), r);
        EXPECT_TRUE(all_close(scatter_nd(a, idx, upd, r), expected, 1e-12, 1e-12))
            << dtype_name(idt) << " k=" << k << " reduce " << int(r);
        // Non-contiguous data and broadcast updates.
        Array tdata = transpose(copy(transpose(a)));
        Shape one = us;
        one[0] = 1;
        Array upd1 = random_array(one, float64, -3, 3, 103);
        auto upd1_full = as_doubles(broadcast_to(upd1, us));
        auto expected1 = scatter_nd_reference(as_doubles(a), a.shape(), as_doubles(idx), is, upd1_full, r);
        EXPECT_TRUE(all_close(scatter_nd(tdata, idx, upd1, r), expected1, 1e-12, 1e-12));
      }
    }
  }
}

TEST(ScatterND, DtypesIntegersAndLarge) {
  for (Dtype d : kAllDtypes) {
    Array a = rnd({4, 3}, d, 110);
    Array idx({3, -4, 3}, {3, 1});
    Array upd = rnd({3, 3}, d, 111);
    auto expected = scatter_nd_reference(as_doubles(a), a.shape(), as_doubles(idx), {3, 1}, as_doubles(upd),
                                         ScatterReduce::Assign);
    Array got = scatter_nd(a, idx, upd);
    EXPECT_EQ(got.dtype(), d);
    EXPECT_TRUE(exact(got, {4, 3}, expected)) << dtype_name(d);
  }
  Array w({int16_t{30000}}, {1});
  EXPECT_TRUE(exact(scatter_nd(w, Array({0, 0}, {2, 1}), Array({int16_t{30000}, int16_t{10000}}, {2}), ScatterReduce::Add),
                    {1}, {70000 - 65536}));
  // Large slices (several threads): rows of [50, 4000] updated with duplicates, add.
  Array big = random_array({50, 4000}, float32, -1, 1, 112);
  Array rows({3, 7, 3, 49, -1, 0}, {6, 1});
  Array upd = random_array({6, 4000}, float32, -1, 1, 113);
  auto expected = scatter_nd_reference(as_doubles(big), big.shape(), as_doubles(rows), {6, 1}, as_doubles(upd),
                                       ScatterReduce::Add);
  EXPECT_TRUE(all_close(scatter_nd(big, rows, upd, ScatterReduce::Add), expected, 1e-6, 1e-6));
  // k = 0 and a 0-d array: every row updates the whole array.
  EXPECT_TRUE(exact(scatter_nd(Array(1.0), zeros({3, 0}, int32), Array({2.0, 3.0, 4.0}, {3}), ScatterReduce::Add), {},
                    {10}));
  EXPECT_EQ(scatter_nd(big, zeros({0, 1}, int32), zeros({0, 4000})).id(), big.id());
}

TEST(ScatterND, Errors) {
  Array a = zeros({3, 4});
  EXPECT_THROW_MSG(scatter_nd(a, Array(0), Array(1.0f)), ShapeError,
                   "scatter_nd: indices must have at least one axis, got int32[]");
  EXPECT_THROW_MSG(scatter_nd(a, zeros({1, 3}, int32), Array(1.0f)), ShapeError,
                   "scatter_nd: the last axis of indices int32[1,3] (size 3) exceeds the rank of the array float32[3,4]");
  EXPECT_THROW_MSG(scatter_nd(a, zeros({2, 1}, int32), zeros({2, 3})), ShapeError,
                   "scatter_nd: updates float32[2,3] do not broadcast to the expected shape [2,4] (indices int32[2,1], "
                   "array float32[3,4])");
  EXPECT_THROW_MSG(scatter_nd(a, Array({1, 4}, {1, 2}), Array(1.0f)).eval(), InvalidArgument,
                   "scatter_nd: index 4 is out of range for axis 1 with size 4");
  EXPECT_THROW_MSG(scatter_nd(a, Array({-4, 0}, {1, 2}), Array(1.0f), ScatterReduce::Max).eval(), InvalidArgument,
                   "scatter_nd: index -4 is out of range for axis 0 with size 3");
  EXPECT_THROW_MSG(scatter_nd(a, zeros({1, 1}, bfloat16), Array(1.0f)), DtypeError,
                   "scatter_nd: indices must have an integer dtype, got bfloat16[1,1]");
}

// ---- one_hot -------------------------------------------------------------------------------------

TEST(OneHot, MatchesReference) {
  for (Dtype idt : kIndexDtypes) {
    Array idx = random_array({3, 4}, idt, is_signed_integral(idt) ? -7.0 : 0.0, 7.0, 120);
    auto iv = as_doubles(idx);
    const int64_t depth = 5;
    auto expected = build({3, 4, depth}, [&](auto c) {
      int64_t i = static_cast<int64_t>(iv[c[0] * 4 + c[1]]);
      if (i < 0) i += depth;  // ONNX OneHot: negative counts from the end; out of range gives zeros
      return i == c[2] ? 1.0 : 0.0;
    });
    Array got = one_hot(idx, depth);
    EXPECT_EQ(got.dtype(), float32);
    EXPECT_TRUE(exact(got, {3, 4, depth}, expected)) << dtype_name(idt);
  }
  EXPECT_TRUE(exact(one_hot(Array({2, -1, 3, -4}, {4}), 3, int8), {4, 3}, {0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(one_hot(Array({1}, {1}), 2, bool_).dtype(), bool_);
  EXPECT_TRUE(exact(one_hot(Array(int64_t{1}), 3), {3}, {0, 1, 0}));
  EXPECT_TRUE(exact(one_hot(Array({std::numeric_limits<uint64_t>::max()}, {1}), 3), {1, 3}, {0, 0, 0}));
  EXPECT_EQ(one_hot(zeros({2, 0}, int32), 4).shape(), (Shape{2, 0, 4}));
  EXPECT_EQ(one_hot(Array({1}, {1}), 0).shape(), (Shape{1, 0}));
  EXPECT_THROW_MSG(one_hot(Array({1.0f}, {1}), 3), DtypeError, "one_hot: indices must have an integer dtype, got float32[1]");
  EXPECT_THROW_MSG(one_hot(Array({1}, {1}), -1), InvalidArgument, "one_hot: depth must be non-negative, got -1");
}

// ---- nonzero -------------------------------------------------------------------------------------

/// Coordinates [ndim, count] of the non-zero elements in row-major order.
std::vector<double> nonzero_reference(const std::vector<double>& v, const Shape& s, int64_t& count) {
  std::vector<std::vector<int64_t>> coords;
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i)
    if (v[i] != 0 || std::isnan(v[i])) coords.push_back(unravel(i, s));
  count = static_cast<int64_t>(coords.size());
  std::vector<double> out;
  for (size_t d = 0; d < s.size(); ++d)
    for (auto& c : coords) out.push_back(static_cast<double>(c[d]));
  return out;
}

TEST(Nonzero, EveryDtypeAndShape) {
  for (Dtype d : kAllDtypes) {
    for (Shape s : {Shape{7}, Shape{3, 4}, Shape{2, 3, 4}, Shape{2, 1, 3, 2}}) {
      Array a = random_array(s, d, -1.5, 1.5, 130);  // many zeros after rounding for integers
      int64_t count;
      auto expected = nonzero_reference(as_doubles(a), s, count);
      Array got = nonzero(a);
      EXPECT_EQ(got.dtype(), int64);
      EXPECT_TRUE(exact(got, {static_cast<int64_t>(s.size()), count}, expected)) << dtype_name(d);
    }
  }
}

TEST(Nonzero, EdgeCases) {
  // All zeros, -0.0 is zero, NaN is not.
  EXPECT_EQ(nonzero(zeros({3, 4})).shape(), (Shape{2, 0}));
  EXPECT_TRUE(exact(nonzero(Array({-0.0f, NAN, 0.0f, INFINITY}, {4})), {1, 2}, {1, 3}));
  // Empty input, 0-d inputs ([0, count]), 3-d, non-contiguous views.
  EXPECT_EQ(nonzero(zeros({0, 3}, int32)).shape(), (Shape{2, 0}));
  EXPECT_EQ(nonzero(Array(5)).shape(), (Shape{0, 1}));
  EXPECT_EQ(nonzero(Array(0.0)).shape(), (Shape{0, 0}));
  Array a({0, 1, 0, 2, 3, 0, 0, 0, 4, 0, 5, 0}, {2, 3, 2});
  EXPECT_TRUE(exact(nonzero(a), {3, 5}, {0, 0, 0, 1, 1, 0, 1, 2, 1, 2, 1, 1, 0, 0, 0}));
  Array t = transpose(a, {2, 0, 1});  // [2,2,3]
  int64_t count;
  auto expected = nonzero_reference(as_doubles(t), {2, 2, 3}, count);
  EXPECT_TRUE(exact(nonzero(t), {3, count}, expected));
  Array lazy = astype(a, float16);  // evaluated by nonzero
  EXPECT_TRUE(exact(nonzero(lazy), {3, 5}, {0, 0, 0, 1, 1, 0, 1, 2, 1, 2, 1, 1, 0, 0, 0}));
  EXPECT_THROW_MSG(nonzero(Array()), InvalidArgument, "nonzero: an input is an empty handle");
}

TEST(Nonzero, LargeAcrossThreadCounts) {
  Array a = random_array({300, 700}, int8, -2, 2, 140);
  int64_t count;
  auto expected = nonzero_reference(as_doubles(a), {300, 700}, count);
  Array flipped = flip(a, {1});
  int64_t fcount;
  auto fexpected = nonzero_reference(as_doubles(flipped), {300, 700}, fcount);
  int before = num_threads();
  for (int threads : {1, 4}) {
    set_num_threads(threads);
    EXPECT_TRUE(exact(nonzero(a), {2, count}, expected));
    EXPECT_TRUE(exact(nonzero(flipped), {2, fcount}, fexpected));
  }
  set_num_threads(before);
}

}  // namespace
}  // namespace smelt
