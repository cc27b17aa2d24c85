// Tests for the shape ops: views (reshape, transpose, slice, ...), concatenate/stack/split, slice_update, pad, tile, repeat.
#include <algorithm>
#include <limits>
#include <numeric>

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

// ---- A tiny host reference: row-major values with a shape. ------------------------------------

struct Ref {
  Shape shape;
  std::vector<double> v;
  double at(const std::vector<int64_t>& c) const {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + c[d];
    return v[off];
  }
};

Ref ref_of(Array a) { return {a.shape(), as_doubles(a)}; }

std::vector<int64_t> unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> c(s.size());
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
    c[d] = i % s[d];
    i /= s[d];
  }
  return c;
}

/// Expected values over `shape`, each from f(coords).
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

bool shares_buffer(Array a, Array b) {
  a.eval();
  b.eval();
  return a.node().buffer == b.node().buffer;
}

/// Random values of any dtype (wider range than the default so integers vary).
Array rnd(const Shape& s, Dtype d, uint32_t seed = 1) { return random_array(s, d, -50.0, 50.0, seed); }

// ---- reshape / flatten / squeeze / expand_dims ---------------------------------------------------

TEST(Reshape, ContiguousIsAViewAndInfersMinusOne) {
  Array a = rnd({2, 3, 4}, float32);
  Array r = reshape(a, {4, -1});
  EXPECT_EQ(r.shape(), (Shape{4, 6}));
  EXPECT_TRUE(shares_buffer(a, r));
  EXPECT_TRUE(exact(r, {4, 6}, as_doubles(a)));
  EXPECT_EQ(reshape(a, {-1}).shape(), (Shape{24}));
  EXPECT_EQ(reshape(a, {2, 3, 4}).id(), a.id());  // same shape: the same array
}

TEST(Reshape, NonContiguousCopiesCorrectly) {
  Array a = rnd({3, 4}, int32);
  Array t = transpose(a);  // [4,3]
  Array r = reshape(t, {12});
  Ref ra = ref_of(a);
  EXPECT_TRUE(exact(r, {12}, build({12}, [&](auto c) { return ra.at({c[0] % 3, c[0] / 3}); })));
  EXPECT_FALSE(shares_buffer(a, r));
}

TEST(Reshape, StridedViewsStayViewsWhenPossible) {
  Array a = rnd({4, 6}, float64);
  Array t = transpose(a);                  // [6,4], strides [1,6]
  Array e = reshape(t, {6, 1, 4, 1});      // only size-1 axes added: a view
  EXPECT_TRUE(shares_buffer(a, e));
  Ref ra = ref_of(a);
  EXPECT_TRUE(exact(e, {6, 1, 4, 1}, build({6, 1, 4, 1}, [&](auto c) { return ra.at({c[2], c[0]}); })));
  Array s = slice(a, {0, 0}, {4, 6}, {1, 2});  // [4,3] with strides [6,2]
  Array split_rows = reshape(s, {2, 2, 3});    // splits the outer axis: a view
  EXPECT_TRUE(shares_buffer(a, split_rows));
  EXPECT_TRUE(exact(split_rows, {2, 2, 3},
                    build({2, 2, 3}, [&](auto c) { return ra.at({c[0] * 2 + c[1], c[2] * 2}); })));
  Array merged = reshape(s, {12});  // rows 6 apart, 3 columns 2 apart: one stride-2 run, a view
  EXPECT_TRUE(shares_buffer(a, merged));
  EXPECT_TRUE(exact(merged, {12}, build({12}, [&](auto c) { return ra.at({c[0] / 3, (c[0] % 3) * 2}); })));
  Array gap = reshape(slice(a, {0, 0}, {4, 3}), {12});  // rows 6 apart, 3 columns: a gap, a copy
  EXPECT_FALSE(shares_buffer(a, gap));
  EXPECT_TRUE(exact(gap, {12}, build({12}, [&](auto c) { return ra.at({c[0] / 3, c[0] % 3}); })));
  Array b = broadcast_to(rnd({3, 1}, int16), {3, 5});
  Array flat = reshape(b, {15});
  Ref rb = ref_of(b);
  EXPECT_TRUE(exact(flat, {15}, rb.v));
  Array sp = reshape(b, {3, 5, 1});
  EXPECT_TRUE(exact(sp, {3, 5, 1}, rb.v));
}

TEST(Reshape, ZeroSizeAndScalars) {
  Array z = zeros({0, 3}, float32);
  EXPECT_EQ(reshape(z, {3, 0}).shape(), (Shape{3, 0}));
  EXPECT_EQ(reshape(z, {-1}).shape(), (Shape{0}));
  EXPECT_EQ(reshape(transpose(z), {0, 1, 3}).size(), 0);
  Array s(5.0f);
  EXPECT_TRUE(exact(reshape(s, {1, 1}), {1, 1}, {5.0}));
  EXPECT_TRUE(exact(reshape(reshape(s, {1}), {}), {}, {5.0}));
}

TEST(Reshape, Errors) {
  Array a = zeros({2, 3});
  EXPECT_THROW_MSG(reshape(a, {-1, -1}), InvalidArgument, "reshape: more than one -1 in the target shape [-1,-1]");
  EXPECT_THROW_MSG(reshape(a, {-2, 3}), InvalidArgument, "reshape: negative dimension in the target shape [-2,3]");
  EXPECT_THROW_MSG(reshape(a, {4, 2}), ShapeError, "reshape: cannot reshape float32[2,3] (6 elements) to [4,2]");
  EXPECT_THROW_MSG(reshape(a, {4, -1}), ShapeError, "reshape: cannot reshape float32[2,3] to [4,-1]");
  EXPECT_THROW_MSG(reshape(zeros({0, 3}), {0, -1}), ShapeError, "reshape: cannot reshape float32[0,3] to [0,-1]");
  EXPECT_THROW_MSG(reshape(Array(), {1}), InvalidArgument, "reshape: an input is an empty handle");
}

TEST(Flatten, RangesAndErrors) {
  Array a = rnd({2, 3, 4, 5}, uint8);
  EXPECT_EQ(flatten(a).shape(), (Shape{120}));
  EXPECT_EQ(flatten(a, 1, 2).shape(), (Shape{2, 12, 5}));
  EXPECT_EQ(flatten(a, -2).shape(), (Shape{2, 3, 20}));
  EXPECT_TRUE(exact(flatten(a, 1, 2), {2, 12, 5}, as_doubles(a)));
  EXPECT_EQ(flatten(Array(3)).shape(), (Shape{1}));
  EXPECT_THROW_MSG(flatten(a, 2, 1), InvalidArgument, "flatten: start_axis 2 is after end_axis 1 for shape [2,3,4,5]");
  EXPECT_THROW_MSG(flatten(a, 4), InvalidArgument, "flatten: axis 4 is out of range for an array of rank 4");
}

TEST(Squeeze, AllAndSomeAxes) {
  Array a = rnd({1, 3, 1, 2}, float16);
  EXPECT_EQ(squeeze(a).shape(), (Shape{3, 2}));
  EXPECT_EQ(squeeze(a, {0}).shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(squeeze(a, {-2, 0}).shape(), (Shape{3, 2}));
  EXPECT_TRUE(exact(squeeze(a), {3, 2}, as_doubles(a)));
  EXPECT_TRUE(shares_buffer(a, squeeze(a)));
  EXPECT_EQ(squeeze(zeros({1, 1})).shape(), (Shape{}));
  EXPECT_THROW_MSG(squeeze(a, {1}), ShapeError, "squeeze: axis 1 of shape [1,3,1,2] has size 3, not 1");
  EXPECT_THROW_MSG(squeeze(a, {4}), InvalidArgument, "squeeze: axis 4 is out of range for an array of rank 4");
  EXPECT_THROW_MSG(squeeze(a, {0, -4}), InvalidArgument, "squeeze: repeated axis in the axes for shape [1,3,1,2]");
}

TEST(ExpandDims, AxesAndErrors) {
  Array a = rnd({3, 2}, bool_);
  EXPECT_EQ(expand_dims(a, 0).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(expand_dims(a, -1).shape(), (Shape{3, 2, 1}));
  EXPECT_EQ(expand_dims(a, {0, 3}).shape(), (Shape{1, 3, 2, 1}));
  EXPECT_EQ(expand_dims(a, {1, -1}).shape(), (Shape{3, 1, 2, 1}));
  EXPECT_TRUE(exact(expand_dims(a, {0, 3}), {1, 3, 2, 1}, as_doubles(a)));
  EXPECT_EQ(expand_dims(Array(1.5), 0).shape(), (Shape{1}));
  EXPECT_THROW_MSG(expand_dims(a, 3), InvalidArgument, "expand_dims: axis 3 is out of range for an array of rank 3");
  EXPECT_THROW_MSG(expand_dims(a, {1, 1}), InvalidArgument, "expand_dims: repeated axis");
}

// ---- transpose / swapaxes / moveaxis --------------------------------------------------------------

TEST(Transpose, PermutationsMatchReference) {
  Array a = rnd({2, 3, 4}, int64);
  Ref r = ref_of(a);
  std::vector<int> perm = {0, 1, 2};
  do {
    Array t = transpose(a, {perm[0], perm[1], perm[2]});
    Shape s{a.shape()[perm[0]], a.shape()[perm[1]], a.shape()[perm[2]]};
    auto expected = build(s, [&](auto c) {
      std::vector<int64_t> src(3);
      for (int i = 0; i < 3; ++i) src[perm[i]] = c[i];
      return r.at(src);
    });
    EXPECT_TRUE(exact(t, s, expected));
    EXPECT_TRUE(exact(copy(t), s, expected));
  } while (std::next_permutation(perm.begin(), perm.end()));
  EXPECT_EQ(transpose(a).shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(transpose(a, {-3, -2, -1}).id(), a.id());
  EXPECT_TRUE(shares_buffer(a, transpose(a, {2, 0, 1})));
  EXPECT_EQ(transpose(Array(2)).shape(), (Shape{}));
}

TEST(Transpose, Errors) {
  Array a = zeros({2, 3});
  EXPECT_THROW_MSG(transpose(a, {0}), InvalidArgument,
                   "transpose: the permutation has 1 axes for an array of rank 2 (shape [2,3])");
  EXPECT_THROW_MSG(transpose(a, {0, 0}), InvalidArgument,
                   "transpose: the axes [0,0] are not a permutation (repeated axis) for shape [2,3]");
  EXPECT_THROW_MSG(transpose(a, {0, 2}), InvalidArgument, "transpose: axis 2 is out of range for an array of rank 2");
}

TEST(Transpose, SwapaxesAndMoveaxis) {
  Array a = rnd({2, 3, 4, 5}, bfloat16);
  Ref r = ref_of(a);
  Array s = swapaxes(a, 1, -1);
  EXPECT_TRUE(exact(s, {2, 5, 4, 3}, build({2, 5, 4, 3}, [&](auto c) { return r.at({c[0], c[3], c[2], c[1]}); })));
  Array m = moveaxis(a, 0, -1);
  EXPECT_TRUE(exact(m, {3, 4, 5, 2}, build({3, 4, 5, 2}, [&](auto c) { return r.at({c[3], c[0], c[1], c[2]}); })));
  Array m2 = moveaxis(a, 3, 1);
  EXPECT_TRUE(exact(m2, {2, 5, 3, 4}, build({2, 5, 3, 4}, [&](auto c) { return r.at({c[0], c[2], c[3], c[1]}); })));
  EXPECT_THROW_MSG(swapaxes(a, 0, 4), InvalidArgument, "swapaxes: axis 4 is out of range for an array of rank 4");
  EXPECT_THROW_MSG(moveaxis(a, -5, 0), InvalidArgument, "moveaxis: axis -5 is out of range for an array of rank 4");
}

// ---- broadcast -------------------------------------------------------------------------------------

TEST(Broadcast, ToAndArrays) {
  Array a = rnd({3, 1}, uint16);
  Ref r = ref_of(a);
  Array b = broadcast_to(a, {2, 3, 4});
  EXPECT_TRUE(exact(b, {2, 3, 4}, build({2, 3, 4}, [&](auto c) { return r.at({c[1], 0}); })));
  EXPECT_TRUE(shares_buffer(a, b));
  EXPECT_EQ(broadcast_to(a, {3, 0}).size(), 0);
  EXPECT_TRUE(exact(broadcast_to(Array(7), {2, 2}), {2, 2}, {7, 7, 7, 7}));
  auto v = broadcast_arrays({a, rnd({4}, int8), Array(1.0f)});
  for (auto& x : v) EXPECT_EQ(x.shape(), (Shape{3, 4}));
  EXPECT_THROW_MSG(broadcast_to(a, {3, 4, 2}), ShapeError, "broadcast_to: cannot broadcast uint16[3,1] to shape [3,4,2]");
  EXPECT_THROW_MSG(broadcast_to(a, {4}), ShapeError, "broadcast_to: cannot broadcast uint16[3,1] to shape [4]");
  EXPECT_THROW_MSG(broadcast_to(a, {3, -1}), ShapeError, "broadcast_to: cannot broadcast");
  EXPECT_THROW_MSG(broadcast_arrays({a, zeros({2, 5})}), ShapeError,
                   "broadcast_arrays: shapes [3,1] and [2,5] cannot be broadcast together");
  EXPECT_EQ(broadcast_shapes({2, 1}, {3}), (Shape{2, 3}));
}

// ---- slice / flip ----------------------------------------------------------------------------------

// Python's slice.indices, written independently of the library.
std::vector<int64_t> py_slice(int64_t n, int64_t start, int64_t stop, int64_t step) {
  auto fix = [&](int64_t x, bool is_start) {
    if (x < 0) x += n;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    (void)is_start;
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  int64_t s = fix(start, true), e = fix(stop, false);
  std::vector<int64_t> out;
  if (step > 0)
    for (int64_t i = s; i < e; i += step) out.push_back(i);
  else
    for (int64_t i = s; i > e; i += step) out.push_back(i);
  return out;
}

TEST(Slice, MatchesPythonSlicingOnRandomParameters) {
  Array a = rnd({7, 6}, int32);
  Ref r = ref_of(a);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int64_t> pos(-10, 10), stp(-4, 4);
  for (int trial = 0; trial < 200; ++trial) {
    int64_t s0 = pos(rng), e0 = pos(rng), st0 = stp(rng), s1 = pos(rng), e1 = pos(rng), st1 = stp(rng);
    if (st0 == 0) st0 = 1;
    if (st1 == 0) st1 = -1;
    auto i0 = py_slice(7, s0, e0, st0), i1 = py_slice(6, s1, e1, st1);
    Shape s{static_cast<int64_t>(i0.size()), static_cast<int64_t>(i1.size())};
    Array v = slice(a, {s0, s1}, {e0, e1}, {st0, st1});
    ASSERT_TRUE(exact(v, s, build(s, [&](auto c) { return r.at({i0[c[0]], i1[c[1]]}); })))
        << s0 << ":" << e0 << ":" << st0 << ", " << s1 << ":" << e1 << ":" << st1;
    // A slice of a slice (strides compose, including negative ones).
    if (s[0] > 1) {
      Array w = slice(v, {-1}, {std::numeric_limits<int64_t>::min()}, {-2});
      auto j0 = py_slice(s[0], -1, std::numeric_limits<int64_t>::min(), -2);
      Shape sw{static_cast<int64_t>(j0.size()), s[1]};
      ASSERT_TRUE(exact(w, sw, build(sw, [&](auto c) { return r.at({i0[j0[c[0]]], i1[c[1]]}); })));
    }
  }
}

TEST(Slice, ClampingExtremesAndViews) {
  Array a = rnd({5}, float64);
  Ref r = ref_of(a);
  const int64_t big = std::numeric_limits<int64_t>::max(), small = std::numeric_limits<int64_t>::min();
  EXPECT_TRUE(exact(slice(a, {-100}, {100}), {5}, r.v));
  EXPECT_TRUE(exact(slice(a, {big}, {small}, {-1}), {5}, {r.v[4], r.v[3], r.v[2], r.v[1], r.v[0]}));
  EXPECT_TRUE(exact(slice(a, {0}, {big}, {big}), {1}, {r.v[0]}));
  EXPECT_TRUE(exact(slice(a, {big}, {small}, {small}), {1}, {r.v[4]}));
  EXPECT_EQ(slice(a, {3}, {1}).shape(), (Shape{0}));
  EXPECT_EQ(slice(a, {1}, {3}, {-1}).shape(), (Shape{0}));
  EXPECT_EQ(slice(a, {}, {}).id(), a.id());
  EXPECT_TRUE(shares_buffer(a, slice(a, {4}, {0}, {-2})));
  Array b = rnd({3, 4, 5}, uint32);
  Ref rb = ref_of(b);
  Array s2 = slice(b, Axes{2, 0}, {4, 1}, {0, 3}, {-2, 1});
  EXPECT_TRUE(exact(s2, {2, 4, 2}, build({2, 4, 2}, [&](auto c) { return rb.at({c[0] + 1, c[1], 4 - 2 * c[2]}); })));
  Array z = zeros({0, 3}, int8);
  EXPECT_EQ(slice(z, {0, 1}, {5, 3}).shape(), (Shape{0, 2}));
  EXPECT_EQ(slice(z, {-1}, {small}, {-1}).shape(), (Shape{0, 3}));
}

TEST(Slice, Errors) {
  Array a = zeros({2, 3}, int32);
  EXPECT_THROW_MSG(slice(a, {0, 0}, {1, 1}, {1, 0}), InvalidArgument, "slice: step 0 on axis 1 of int32[2,3]");
  EXPECT_THROW_MSG(slice(a, {0, 0, 0}, {1, 1, 1}), InvalidArgument,
                   "slice: start, stop and step must have the same length, at most the rank of int32[2,3] (got 3, 3, 0)");
  EXPECT_THROW_MSG(slice(a, {0}, {1, 1}), InvalidArgument, "slice: start, stop and step must have the same length");
  EXPECT_THROW_MSG(slice(a, Axes{0}, {0, 1}, {1}, {}), InvalidArgument,
                   "slice: axes, start, stop and step must have the same length (got 1, 2, 1, 0) for int32[2,3]");
  EXPECT_THROW_MSG(slice(a, Axes{0, -2}, {0, 0}, {1, 1}, {}), InvalidArgument, "slice: axis -2 given twice");
  EXPECT_THROW_MSG(slice(a, Axes{2}, {0}, {1}, {}), InvalidArgument, "slice: axis 2 is out of range for an array of rank 2");
}

TEST(Flip, AxesAndAll) {
  Array a = rnd({2, 3, 4}, float16);
  Ref r = ref_of(a);
  EXPECT_TRUE(exact(flip(a), {2, 3, 4}, build({2, 3, 4}, [&](auto c) { return r.at({1 - c[0], 2 - c[1], 3 - c[2]}); })));
  EXPECT_TRUE(exact(flip(a, {-1}), {2, 3, 4}, build({2, 3, 4}, [&](auto c) { return r.at({c[0], c[1], 3 - c[2]}); })));
  EXPECT_TRUE(exact(flip(flip(a, {1}), {1}), {2, 3, 4}, r.v));
  EXPECT_TRUE(shares_buffer(a, flip(a, {0, 2})));
  EXPECT_EQ(flip(Array(1)).shape(), (Shape{}));
  EXPECT_EQ(flip(zeros({0, 2})).shape(), (Shape{0, 2}));
  EXPECT_THROW_MSG(flip(a, {3}), InvalidArgument, "flip: axis 3 is out of range for an array of rank 3");
  EXPECT_THROW_MSG(flip(a, {0, 0}), InvalidArgument, "flip: repeated axis");
}

// ---- concatenate / stack / split ---------------------------------------------------------------

TEST(Concatenate, EveryDtypeAndAxis) {
  for (Dtype d : kAllDtypes) {
    Array a = rnd({2, 3, 4}, d, 1), b = rnd({2, 5, 4}, d, 2), c = rnd({2, 1, 4}, d, 3);
    Ref ra = ref_of(a), rb = ref_of(b), rc = ref_of(c);
    Array out = concatenate({a, b, c}, 1);
    EXPECT_EQ(out.dtype(), d);
    EXPECT_TRUE(exact(out, {2, 9, 4}, build({2, 9, 4}, [&](auto x) {
                        if (x[1] < 3) return ra.at({x[0], x[1], x[2]});
                        if (x[1] < 8) return rb.at({x[0], x[1] - 3, x[2]});
                        return rc.at({x[0], 0, x[2]});
                      })))
        << dtype_name(d);
    Array last = concatenate({a, a}, -1);
    EXPECT_TRUE(exact(last, {2, 3, 8}, build({2, 3, 8}, [&](auto x) { return ra.at({x[0], x[1], x[2] % 4}); })));
  }
}

TEST(Concatenate, PromotesDtypes) {
  Array a = rnd({2, 2}, int32, 1), b = rnd({1, 2}, float32, 2), c = rnd({1, 2}, uint8, 3);
  Array out = concatenate({a, b, c});
  EXPECT_EQ(out.dtype(), float32);
  auto va = as_doubles(a), vb = as_doubles(b), vc = as_doubles(c);
  std::vector<double> expected = va;
  expected.insert(expected.end(), vb.begin(), vb.end());
  expected.insert(expected.end(), vc.begin(), vc.end());
  EXPECT_TRUE(exact(out, {4, 2}, expected));
  EXPECT_EQ(concatenate({rnd({1}, int8), rnd({1}, uint8)}).dtype(), int16);
  EXPECT_EQ(concatenate({rnd({1}, bool_), rnd({1}, bool_)}).dtype(), bool_);
  EXPECT_EQ(concatenate({rnd({1}, float16), rnd({1}, bfloat16)}).dtype(), float32);
}

TEST(Concatenate, NonContiguousZeroSizeAndLarge) {
  Array a = rnd({4, 3}, float64, 1), b = rnd({5, 3}, float64, 2);
  Ref ra = ref_of(a), rb = ref_of(b);
  // Transposed [3,4] and reversed [3,5] views.
  Array out = concatenate({transpose(a), flip(transpose(b), {1}), zeros({3, 0}, float64)}, 1);
  EXPECT_TRUE(exact(out, {3, 9}, build({3, 9}, [&](auto c) {
                      return c[1] < 4 ? ra.at({c[1], c[0]}) : rb.at({4 - (c[1] - 4), c[0]});
                    })));
  // A broadcast view.
  Array bc = concatenate({broadcast_to(Array(2.5), {2, 3}), a}, 0);
  EXPECT_TRUE(exact(slice(bc, {0}, {2}), {2, 3}, std::vector<double>(6, 2.5)));
  EXPECT_EQ(concatenate({zeros({0, 3}), zeros({0, 3})}).shape(), (Shape{0, 3}));
  EXPECT_EQ(concatenate({zeros({2, 0}), zeros({3, 0})}).shape(), (Shape{5, 0}));
  EXPECT_TRUE(exact(concatenate({a}), {4, 3}, ra.v));
  // Large enough to run on several threads; same bits on one thread.
  Array big1 = rnd({300, 129}, float32, 4), big2 = rnd({300, 7}, float32, 5);
  Array cat = concatenate({transpose(big1), transpose(big2)}, 0);
  Ref r1 = ref_of(big1), r2 = ref_of(big2);
  EXPECT_TRUE(exact(cat, {136, 300}, build({136, 300}, [&](auto c) {
                      return c[0] < 129 ? r1.at({c[1], c[0]}) : r2.at({c[1], c[0] - 129});
                    })));
}

TEST(Concatenate, Errors) {
  Array a = zeros({2, 3}), b = zeros({2, 4}, int32);
  EXPECT_THROW_MSG(concatenate({a, b}, 0), ShapeError,
                   "concatenate: the arrays must have the same rank and match on every axis but 0: float32[2,3], "
                   "int32[2,4]");
  EXPECT_THROW_MSG(concatenate({a, zeros({2, 3, 1})}, 1), ShapeError,
                   "concatenate: the arrays must have the same rank and match on every axis but 1: float32[2,3], "
                   "float32[2,3,1]");
  EXPECT_THROW_MSG(concatenate({}), InvalidArgument, "concatenate: needs at least one array");
  EXPECT_THROW_MSG(concatenate({Array(1), Array(2)}), ShapeError,
                   "concatenate: 0-d arrays cannot be concatenated (int32[], int32[])");
  EXPECT_THROW_MSG(concatenate({a, a}, 2), InvalidArgument, "concatenate: axis 2 is out of range for an array of rank 2");
  EXPECT_THROW_MSG(concatenate({a, Array()}), InvalidArgument, "concatenate: an input is an empty handle");
}

TEST(Stack, AxesAndErrors) {
  Array a = rnd({2, 3}, int16, 1), b = rnd({2, 3}, int16, 2);
  Ref ra = ref_of(a), rb = ref_of(b);
  EXPECT_TRUE(exact(stack({a, b}), {2, 2, 3}, build({2, 2, 3}, [&](auto c) {
                      return (c[0] ? rb : ra).at({c[1], c[2]});
                    })));
  EXPECT_TRUE(exact(stack({a, b}, -1), {2, 3, 2}, build({2, 3, 2}, [&](auto c) {
                      return (c[2] ? rb : ra).at({c[0], c[1]});
                    })));
  EXPECT_TRUE(exact(stack({a, b}, 1), {2, 2, 3}, build({2, 2, 3}, [&](auto c) {
                      return (c[1] ? rb : ra).at({c[0], c[2]});
                    })));
  EXPECT_TRUE(exact(stack({Array(1.0f), Array(2.0f), Array(3.0f)}), {3}, {1, 2, 3}));
  EXPECT_EQ(stack({astype(a, int8), astype(b, float16)}).dtype(), float16);
  EXPECT_THROW_MSG(stack({a, zeros({3, 2})}), ShapeError, "stack: all arrays must have the same shape: int16[2,3], float32[3,2]");
  EXPECT_THROW_MSG(stack({}), InvalidArgument, "stack: needs at least one array");
  EXPECT_THROW_MSG(stack({a, Array()}), InvalidArgument, "stack: an input is an empty handle");
  EXPECT_THROW_MSG(stack({a}, 3), InvalidArgument, "stack: axis 3 is out of range for an array of rank 3");
}

TEST(Split, SectionsAndIndices) {
  Array a = rnd({6, 4}, uint64);
  Ref r = ref_of(a);
  auto parts = split(a, 3);
  ASSERT_EQ(parts.size(), 3u);
  for (int p = 0; p < 3; ++p)
    EXPECT_TRUE(exact(parts[p], {2, 4}, build({2, 4}, [&](auto c) { return r.at({2 * p + c[0], c[1]}); })));
  auto cols = split(a, 2, -1);
  EXPECT_TRUE(exact(cols[1], {6, 2}, build({6, 2}, [&](auto c) { return r.at({c[0], c[1] + 2}); })));
  // array_split with indices: Python slicing, so negative and unordered indices work.
  auto q = split(a, std::vector<int64_t>{1, -2, 3, 10});
  ASSERT_EQ(q.size(), 5u);
  EXPECT_EQ(q[0].shape(), (Shape{1, 4}));
  EXPECT_EQ(q[1].shape(), (Shape{3, 4}));
  EXPECT_EQ(q[2].shape(), (Shape{0, 4}));
  EXPECT_EQ(q[3].shape(), (Shape{3, 4}));
  EXPECT_EQ(q[4].shape(), (Shape{0, 4}));
  EXPECT_TRUE(exact(q[3], {3, 4}, build({3, 4}, [&](auto c) { return r.at({3 + c[0], c[1]}); })));
  EXPECT_EQ(split(a, std::vector<int64_t>{}).size(), 1u);
  EXPECT_EQ(split(zeros({0, 2}), 4).size(), 4u);
  EXPECT_THROW_MSG(split(a, 4), ShapeError,
                   "split: axis 0 of uint64[6,4] (size 6) does not divide into 4 equal sections");
  EXPECT_THROW_MSG(split(a, 0), InvalidArgument, "split: the number of sections must be positive, got 0");
  EXPECT_THROW_MSG(split(a, 2, 2), InvalidArgument, "split: axis 2 is out of range for an array of rank 2");
  EXPECT_THROW_MSG(split(Array(1), std::vector<int64_t>{0}), InvalidArgument,
                   "split: axis 0 is out of range for an array of rank 0");
}

// ---- slice_update ---------------------------------------------------------------------------------

TEST(SliceUpdate, RegionsStepsAndBroadcast) {
  for (Dtype d : {float32, int8, bool_, float16, uint64}) {
    Array a = rnd({5, 6}, d, 1);
    Array u = rnd({2, 3}, d, 2);
    Ref ra = ref_of(a), ru = ref_of(u);
    Array out = slice_update(a, u, {4, 1}, {0, 6}, {-2, 2});  // rows 4, 2; cols 1, 3, 5
    EXPECT_TRUE(exact(out, {5, 6}, build({5, 6}, [&](auto c) {
                        bool row = c[0] == 4 || c[0] == 2, col = c[1] % 2 == 1;
                        if (row && col) return ru.at({(4 - c[0]) / 2, (c[1] - 1) / 2});
                        return ra.at(c);
                      })))
        << dtype_name(d);
    EXPECT_TRUE(exact(a, {5, 6}, ra.v));  // the input is unchanged
  }
  Array a = rnd({3, 4}, int32);
  Ref ra = ref_of(a);
  // Broadcast row update and a float update cast (truncated) to int32.
  Array out = slice_update(a, Array({1.9, -2.7}, {2, 1}), {1}, {3});
  EXPECT_TRUE(exact(out, {3, 4}, build({3, 4}, [&](auto c) { return c[0] == 0 ? ra.at(c) : (c[0] == 1 ? 1.0 : -2.0); })));
  EXPECT_TRUE(exact(slice_update(a, Array(7), {0, 0}, {3, 4}), {3, 4}, std::vector<double>(12, 7)));
  EXPECT_EQ(slice_update(a, Array(5), {1}, {1}).id(), a.id());  // empty region
  EXPECT_TRUE(exact(slice_update(Array(1.5f), Array(2), {}, {}), {}, {2.0}));  // 0-d: the whole array
  // Non-contiguous input and update.
  Array t = transpose(rnd({4, 3}, float64, 5));
  Array upd = flip(rnd({2}, float64, 6));
  Ref rt = ref_of(t), rupd = ref_of(upd);
  Array o2 = slice_update(t, upd, {1, 1}, {2, 3});
  EXPECT_TRUE(exact(o2, {3, 4}, build({3, 4}, [&](auto c) {
                      return c[0] == 1 && (c[1] == 1 || c[1] == 2) ? rupd.v[c[1] - 1] : rt.at(c);
                    })));
  // A temporary input: its buffer may be reused, the result must still be right.
  Array o3 = slice_update(copy(a), Array(0), {0}, {1});
  EXPECT_TRUE(exact(o3, {3, 4}, build({3, 4}, [&](auto c) { return c[0] == 0 ? 0.0 : ra.at(c); })));
}

TEST(SliceUpdate, ReusesABufferNothingElseSees) {
  Array x = rnd({64, 64}, float32, 3);
  Ref rx = ref_of(x);
  Array c = copy(x);
  c.eval();
  const void* storage = c.node().buffer->ptr;
  Array out = slice_update(c, Array(1.0f), {0, 0}, {64, 64}, {2, 3});
  c = Array();  // the update node now holds the only reference
  out.eval();
  EXPECT_EQ(out.node().buffer->ptr, storage);
  EXPECT_TRUE(exact(out, {64, 64}, build({64, 64}, [&](auto i) {
                      return i[0] % 2 == 0 && i[1] % 3 == 0 ? 1.0 : rx.at(i);
                    })));
  // A buffer that is still visible elsewhere is copied, not overwritten.
  Array kept = copy(x);
  Array out2 = slice_update(kept, Array(2.0f), {0}, {1});
  out2.eval();
  EXPECT_NE(out2.node().buffer, kept.node().buffer);
  EXPECT_TRUE(exact(kept, {64, 64}, rx.v));
}

TEST(SliceUpdate, Errors) {
  Array a = zeros({3, 4});
  EXPECT_THROW_MSG(slice_update(a, zeros({3}), {0}, {2}), ShapeError,
                   "slice_update: the update float32[3] does not broadcast to the slice shape [2,4] of float32[3,4]");
  EXPECT_THROW_MSG(slice_update(a, zeros({1, 2, 4}), {0}, {2}), ShapeError, "slice_update: the update float32[1,2,4]");
  EXPECT_THROW_MSG(slice_update(a, Array(1), {0}, {2}, {0}), InvalidArgument, "slice_update: step 0 on axis 0 of float32[3,4]");
  EXPECT_THROW_MSG(slice_update(a, Array(), {0}, {2}), InvalidArgument, "slice_update: an input is an empty handle");
  EXPECT_THROW_MSG(slice_update(a, Array(1), {0, 0, 0}, {1, 1, 1}), InvalidArgument,
                   "slice_update: start, stop and step must have the same length");
}

// ---- pad --------------------------------------------------------------------------------------

// NumPy's pad index rules, written from its documentation.
int64_t np_pad_index(int64_t x, int64_t n, PadMode mode) {
  if (x >= 0 && x < n) return x;
  if (mode == PadMode::Constant) return -1;
  if (mode == PadMode::Edge) return x < 0 ? 0 : n - 1;
  // reflect: mirror about the edge element, which is not repeated
  return x < 0 ? -x : 2 * (n - 1) - x;
}

std::vector<double> pad_reference(const Ref& r, const std::vector<std::pair<int64_t, int64_t>>& w, PadMode mode,
                                  double value, Shape& out_shape) {
  out_shape = r.shape;
  for (size_t d = 0; d < w.size(); ++d) out_shape[d] += w[d].first + w[d].second;
  return build(out_shape, [&](auto c) {
    std::vector<int64_t> src(c.size());
    for (size_t d = 0; d < c.size(); ++d) {
      src[d] = np_pad_index(c[d] - w[d].first, r.shape[d], mode);
      if (src[d] < 0) return value;
    }
    return r.at(src);
  });
}

TEST(Pad, EveryModeMatchesReference) {
  std::vector<std::pair<int64_t, int64_t>> w = {{2, 1}, {0, 3}, {1, 1}};
  for (PadMode mode : {PadMode::Constant, PadMode::Reflect, PadMode::Edge}) {
    for (Dtype d : kAllDtypes) {
      Array a = rnd({3, 4, 2}, d, 7);
      Ref r = ref_of(a);
      Shape s;
      double value = d == bool_ ? 1.0 : 5.0;
      auto expected = pad_reference(r, w, mode, value, s);
      EXPECT_TRUE(exact(pad(a, w, mode, Array(value)), s, expected)) << dtype_name(d) << " mode " << int(mode);
      // The same from non-contiguous views.
      Array t = transpose(transpose(a, {2, 0, 1}), {1, 2, 0});
      EXPECT_TRUE(exact(pad(t, w, mode, Array(value)), s, expected)) << dtype_name(d);
    }
  }
}

TEST(Pad, KnownNumpyValues) {
  Array a({1, 2, 3, 4, 5}, {5});
  // np.pad([1,2,3,4,5], (2,3), mode)
  EXPECT_TRUE(exact(pad(a, {{2, 3}}, PadMode::Constant), {10}, {0, 0, 1, 2, 3, 4, 5, 0, 0, 0}));
  EXPECT_TRUE(exact(pad(a, {{2, 3}}, PadMode::Reflect), {10}, {3, 2, 1, 2, 3, 4, 5, 4, 3, 2}));
  EXPECT_TRUE(exact(pad(a, {{2, 3}}, PadMode::Edge), {10}, {1, 1, 1, 2, 3, 4, 5, 5, 5, 5}));
  EXPECT_TRUE(exact(pad(a, {{4, 4}}, PadMode::Reflect), {13}, {5, 4, 3, 2, 1, 2, 3, 4, 5, 4, 3, 2, 1}));
  // One pair for every axis; a float value cast into an int array.
  Array m({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(exact(pad(m, {{1, 1}}, PadMode::Constant, Array(-1.5)), {4, 4},
                    {-1, -1, -1, -1, -1, 1, 2, -1, -1, 3, 4, -1, -1, -1, -1, -1}));
}

TEST(Pad, NonFiniteValuesLazyValueZeroSizeAndLarge) {
  Array a = rnd({2, 3}, float32);
  Ref r = ref_of(a);
  Shape s;
  auto nan_expected = pad_reference(r, {{1, 0}, {0, 2}}, PadMode::Constant, std::nan(""), s);
  EXPECT_TRUE(exact(pad(a, {{1, 0}, {0, 2}}, PadMode::Constant, Array(std::nan(""))), s, nan_expected));
  auto inf_expected = pad_reference(r, {{1, 1}, {1, 1}}, PadMode::Constant, -INFINITY, s);
  EXPECT_TRUE(exact(pad(a, {{1, 1}}, PadMode::Constant, Array(-INFINITY)), s, inf_expected));
  // A value that is not evaluated yet (a graph node) pads through a composition.
  Array lazy = astype(Array(3.0), float16);
  ASSERT_FALSE(lazy.is_evaluated());
  auto lazy_expected = pad_reference(r, {{0, 1}, {2, 0}}, PadMode::Constant, 3.0, s);
  EXPECT_TRUE(exact(pad(a, {{0, 1}, {2, 0}}, PadMode::Constant, lazy), s, lazy_expected));
  EXPECT_TRUE(exact(pad(a, {{1, 1}}, PadMode::Constant, Array({4.0f}, {1})), {4, 5},
                    pad_reference(r, {{1, 1}, {1, 1}}, PadMode::Constant, 4.0, s)));
  // Zero-size: constant padding of an empty axis, and any mode padding another axis.
  EXPECT_TRUE(exact(pad(zeros({0, 2}), {{1, 1}}, PadMode::Constant, Array(2.0f)), {2, 4}, std::vector<double>(8, 2.0)));
  EXPECT_EQ(pad(zeros({0, 2}), {{0, 0}, {1, 1}}, PadMode::Edge).shape(), (Shape{0, 4}));
  EXPECT_EQ(pad(zeros({0, 2}), {{0, 0}, {1, 1}}, PadMode::Reflect).shape(), (Shape{0, 4}));
  EXPECT_EQ(pad(a, {{0, 0}}, PadMode::Edge).id(), a.id());
  EXPECT_EQ(pad(Array(2), {{1, 1}}).shape(), (Shape{}));  // 0-d: no axes to pad
  // Large enough for several threads.
  Array big = rnd({70, 600}, int32, 9);
  Ref rb = ref_of(big);
  for (PadMode mode : {PadMode::Constant, PadMode::Reflect, PadMode::Edge}) {
    auto expected = pad_reference(rb, {{3, 5}, {7, 2}}, mode, 0.0, s);
    EXPECT_TRUE(exact(pad(big, {{3, 5}, {7, 2}}, mode), s, expected));
  }
}

TEST(Pad, Errors) {
  Array a = zeros({2, 3});
  EXPECT_THROW_MSG(pad(a, {{1, 1}, {1, 1}, {1, 1}}), InvalidArgument,
                   "pad: pad_width needs one (before, after) pair per axis of float32[2,3] or a single pair for all axes, got 3 pairs");
  EXPECT_THROW_MSG(pad(a, {{0, -1}}), InvalidArgument, "pad: negative pad width (0, -1) on axis 0 of float32[2,3]");
  EXPECT_THROW_MSG(pad(a, {{0, 0}, {3, 0}}, PadMode::Reflect), InvalidArgument,
                   "pad: reflect padding (3, 0) on axis 1 of float32[2,3] must be smaller than the axis size 3");
  EXPECT_THROW_MSG(pad(zeros({1}), {{1, 0}}, PadMode::Reflect), InvalidArgument,
                   "pad: reflect padding (1, 0) on axis 0 of float32[1] must be smaller than the axis size 1");
  EXPECT_THROW_MSG(pad(zeros({0, 3}), {{1, 0}, {0, 0}}, PadMode::Edge), InvalidArgument,
                   "pad: edge padding cannot extend the empty axis 0 of float32[0,3]");
  EXPECT_THROW_MSG(pad(a, {{1, 1}}, PadMode::Constant, zeros({2})), InvalidArgument,
                   "pad: the constant value must have one element, got float32[2]");
  EXPECT_THROW_MSG(pad(a, {{1, 1}}, PadMode::Constant, Array()), InvalidArgument, "pad: an input is an empty handle");
}

// ---- tile / repeat ----------------------------------------------------------------------------

TEST(Tile, MatchesNumpy) {
  Array a = rnd({2, 3}, int8);
  Ref r = ref_of(a);
  EXPECT_TRUE(exact(tile(a, {2, 2}), {4, 6}, build({4, 6}, [&](auto c) { return r.at({c[0] % 2, c[1] % 3}); })));
  EXPECT_TRUE(exact(tile(a, {3}), {2, 9}, build({2, 9}, [&](auto c) { return r.at({c[0], c[1] % 3}); })));
  EXPECT_TRUE(exact(tile(a, {2, 1, 1}), {2, 2, 3}, build({2, 2, 3}, [&](auto c) { return r.at({c[1], c[2]}); })));
  EXPECT_TRUE(exact(tile(transpose(a), {1, 2}), {3, 4}, build({3, 4}, [&](auto c) { return r.at({c[1] % 2, c[0]}); })));
  EXPECT_EQ(tile(a, {0, 2}).shape(), (Shape{0, 6}));
  EXPECT_EQ(tile(a, {}).id(), a.id());
  EXPECT_TRUE(exact(tile(Array(true), {3}), {3}, {1, 1, 1}));
  Array h = rnd({3}, float16);
  EXPECT_TRUE(bit_equal(tile(h, {2}), concatenate({h, h})));
  EXPECT_THROW_MSG(tile(a, {2, -1}), InvalidArgument, "tile: negative repetition count in [2,-1] for int8[2,3]");
  EXPECT_THROW_MSG(tile(Array(), {2}), InvalidArgument, "tile: an input is an empty handle");
}

TEST(Repeat, AxisAndFlattened) {
  Array a = rnd({2, 3}, bfloat16);
  Ref r = ref_of(a);
  EXPECT_TRUE(exact(repeat(a, 2, 0), {4, 3}, build({4, 3}, [&](auto c) { return r.at({c[0] / 2, c[1]}); })));
  EXPECT_TRUE(exact(repeat(a, 3, -1), {2, 9}, build({2, 9}, [&](auto c) { return r.at({c[0], c[1] / 3}); })));
  EXPECT_TRUE(exact(repeat(a, 2), {12}, build({12}, [&](auto c) { return r.v[c[0] / 2]; })));
  EXPECT_TRUE(exact(repeat(transpose(a), 2, 1), {3, 4}, build({3, 4}, [&](auto c) { return r.at({c[1] / 2, c[0]}); })));
  EXPECT_EQ(repeat(a, 0, 1).shape(), (Shape{2, 0}));
  EXPECT_EQ(repeat(a, 1, 1).id(), a.id());
  EXPECT_TRUE(exact(repeat(Array(4), 3), {3}, {4, 4, 4}));
  EXPECT_THROW_MSG(repeat(a, -1, 0), InvalidArgument, "repeat: negative repeat count -1 for bfloat16[2,3]");
  EXPECT_THROW_MSG(repeat(a, 2, 2), InvalidArgument, "repeat: axis 2 is out of range for an array of rank 2");
  EXPECT_THROW_MSG(repeat(Array(), 2), InvalidArgument, "repeat: an input is an empty handle");
}

// ---- Thread count independence ----------------------------------------------------------------

TEST(ShapeOps, ResultsDoNotDependOnThreadCount) {
  Array a = rnd({130, 257}, float32, 11);
  auto run = [&] {
    auto bytes = test::raw_bytes(pad(transpose(a), {{1, 2}, {3, 0}}, PadMode::Reflect));
    for (Array x : {concatenate({transpose(a), flip(transpose(a))}, 1), tile(a, {2, 1}), repeat(a, 2, 1)}) {
      auto more = test::raw_bytes(x);
      bytes.insert(bytes.end(), more.begin(), more.end());
    }
    return bytes;
  };
  int before = num_threads();
  set_num_threads(1);
  auto one = run();
  set_num_threads(4);
  auto four = run();
  set_num_threads(before);
  EXPECT_EQ(one, four);
}

}  // namespace
}  // namespace smelt
