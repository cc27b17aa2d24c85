// CPU copies into row-major order: transposed views (copied in tiles), permutations of 3-4 axes,
// broadcasts and slices give each element where a reference index walk puts it, at any thread
// count.
#include <gtest/gtest.h>

#include <numeric>

#include "smelt/memory.h"
#include "smelt/smelt.h"
#include "src/core/node.h"

namespace smelt {
namespace {

/// The row-major elements of `a` by a plain index walk over its shape and strides.
template <class T>
std::vector<T> reference(const Array& base, const Shape& shape, const std::vector<int64_t>& strides, int64_t offset) {
  const std::vector<T> all = base.to_vector<T>();
  std::vector<T> out;
  const size_t nd = shape.size();
  std::vector<int64_t> idx(nd, 0);
  int64_t total = 1;
  for (auto d : shape) total *= d;
  for (int64_t n = 0; n < total; ++n) {
    int64_t off = offset;
    for (size_t d = 0; d < nd; ++d) off += idx[d] * strides[d];
    out.push_back(all[static_cast<size_t>(off)]);
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

template <class T>
void check_permutations(Dtype dt) {
  const std::vector<std::pair<Shape, std::vector<int>>> cases = {
      {{37, 53}, {1, 0}},              // a ragged 2-D transpose (tiles of 16 with remainders)
      {{64, 128}, {1, 0}},             // whole tiles
      {{3, 29, 41}, {0, 2, 1}},        // a batch of transposes
      {{5, 7, 33, 17}, {2, 0, 3, 1}},  // the innermost source axis strided, the contiguous one in the middle
      {{4, 9, 20}, {2, 1, 0}},
      {{300, 8}, {1, 0}},              // short rows: the element-by-element path
      {{2, 3, 4}, {1, 2, 0}},
  };
  for (const auto& [shape, perm] : cases) {
    const int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
    std::vector<double> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), 1.0);
    Array base = astype(reshape(Array(v, Shape{n}), shape), dt);
    base.eval();
    Array t = transpose(base, perm);
    Shape tshape;
    std::vector<int64_t> tstrides;
    const Strides rm = row_major_strides(shape);
    for (int p : perm) {
      tshape.push_back(shape[static_cast<size_t>(p)]);
      tstrides.push_back(rm[static_cast<size_t>(p)]);
    }
    const std::vector<T> want = reference<T>(base, tshape, tstrides, 0);
    for (int threads : {1, 2, 3}) {
      set_cpu_threads(threads);
      EXPECT_EQ(copy(t).to_vector<T>(), want) << shape_to_string(shape) << " threads " << threads;
    }
  }
  // A transposed slice (an offset and a row stride larger than the row).
  Array big = astype(reshape(arange(0.0, 40.0 * 50.0, 1.0), {40, 50}), dt);
  Array s = transpose(slice(big, {3, 5}, {35, 45}, {1, 1}), {1, 0});
  const std::vector<T> want = reference<T>(big, {40, 32}, {1, 50}, 3 * 50 + 5);
  EXPECT_EQ(copy(s).to_vector<T>(), want);
}

TEST(CpuCopy, TransposedViewsCopyInTilesToTheSameElements) {
  DefaultDeviceScope cpu(Device::cpu());
  const int saved = cpu_threads();
  check_permutations<float>(float32);
  check_permutations<double>(float64);
  check_permutations<int8_t>(int8);
  check_permutations<uint16_t>(uint16);
  set_cpu_threads(saved);
}

}  // namespace
}  // namespace smelt
