// Tests of the checked size arithmetic (src/core/shape_math.h) and of the ops that use it.
#include <limits>

#include "smelt/ops.h"
#include "src/core/shape_math.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t k2p32 = int64_t{1} << 32;
constexpr int64_t k2p62 = int64_t{1} << 62;

TEST(ShapeMath, CheckedArithmeticNamesTheOpAndValues) {
  EXPECT_EQ(checked_mul(3, 4, "op"), 12);
  EXPECT_EQ(checked_mul(kMax, 1, "op"), kMax);
  EXPECT_EQ(checked_add(kMax - 1, 1, "op"), kMax);
  EXPECT_EQ(checked_sub(-kMax, 1, "op"), std::numeric_limits<int64_t>::min());
  EXPECT_THROW_MSG(checked_mul(k2p32, k2p32, "tile"), ShapeError, "tile: size 4294967296 * 4294967296 overflows int64");
  EXPECT_THROW_MSG(checked_mul(-k2p32, k2p32, "tile"), ShapeError, "overflows int64");
  EXPECT_THROW_MSG(checked_add(k2p62, k2p62 + k2p62 / 2, "pad"), ShapeError,
                   "pad: size 4611686018427387904 + 6917529027641081856 overflows int64");
  EXPECT_THROW_MSG(checked_sub(std::numeric_limits<int64_t>::min(), 1, "conv"), ShapeError, "conv: size ");
  EXPECT_EQ(to_size(5, "op", "count"), 5);
  EXPECT_THROW_MSG(to_size(-5, "repeat", "count"), InvalidArgument, "repeat: count -5 is negative");
  EXPECT_EQ(to_int(7, "op", "axis"), 7);
  EXPECT_THROW_MSG(to_int(int64_t{1} << 40, "transpose", "axis"), InvalidArgument,
                   "transpose: axis 1099511627776 does not fit in an int");
}

TEST(ShapeMath, ElementCountAndBytes) {
  EXPECT_EQ(element_count({}, "op"), 1);
  EXPECT_EQ(element_count({2, 3, 4}, "op"), 24);
  // A zero anywhere is an empty array, whatever the other dimensions multiply to.
  EXPECT_EQ(element_count({k2p62, 0, k2p62}, "op"), 0);
  EXPECT_THROW_MSG(element_count({k2p32, k2p32}, "expand"), ShapeError,
                   "expand: shape [4294967296,4294967296] has more elements than an int64 can count");
  EXPECT_THROW_MSG(element_count({2, -1}, "reshape"), InvalidArgument, "reshape: negative dimension in shape [2,-1]");
  EXPECT_EQ(array_bytes({2, 3}, float64, "op"), 48);
  EXPECT_EQ(array_bytes({kMaxArrayBytes / 4}, float32, "op"), kMaxArrayBytes);
  EXPECT_THROW_MSG(array_bytes({kMaxArrayBytes / 4 + 1}, float32, "zeros"), ShapeError,
                   "zeros: an array of float32[35184372088833] (35184372088833 elements of 4 bytes) is larger than the "
                   "2^47 bytes a process can address");
  // The count fits in int64 but the bytes do not.
  EXPECT_THROW_MSG(array_bytes({k2p62}, float64, "zeros"), ShapeError, "is larger than the 2^47 bytes");
}

TEST(ShapeMath, OpsRefuseShapesThatOverflow) {
  Array x = random_array({4}, float32);
  EXPECT_THROW_MSG(tile(x, {k2p62}), ShapeError, "tile: size 4611686018427387904 * 4 overflows int64");
  EXPECT_THROW_MSG(repeat(x, k2p62, 0), ShapeError, "repeat: size 4 * 4611686018427387904 overflows int64");
  EXPECT_THROW_MSG(pad(x, {{k2p62, k2p62}}), ShapeError, "pad: size 4611686018427387908 + 4611686018427387904 overflows int64");
  EXPECT_THROW_MSG(reshape(x, {k2p32, k2p32, -1}), ShapeError, "reshape: size 4294967296 * 4294967296 overflows int64");
  EXPECT_THROW_MSG(broadcast_to(reshape(x, {4, 1}), {4, k2p62}), ShapeError,
                   "Broadcast: shape [4,4611686018427387904] has more elements than an int64 can count");
  EXPECT_THROW_MSG(zeros({k2p32, k2p32}, float32), ShapeError, "has more elements than an int64 can count");
  EXPECT_THROW_MSG(zeros({int64_t{1} << 46}, float32), ShapeError, "is larger than the 2^47 bytes");
  // An empty array with huge other dimensions is fine: it never addresses memory.
  Array e = zeros({0, k2p62, k2p62}, float32);
  EXPECT_EQ(e.size(), 0);
}

TEST(ShapeMath, ConvAttributesThatOverflowAreShapeErrors) {
  Array x = random_array({1, 1, 8}, float32), w = random_array({1, 1, 3}, float32);
  ConvOptions o;
  o.dilations = {k2p62};
  EXPECT_THROW_MSG(conv(x, w, o), ShapeError, "overflows int64");
  ConvOptions p;
  p.padding_lo = {kMax};
  p.padding_hi = {kMax};
  EXPECT_THROW_MSG(conv(x, w, p), ShapeError, "overflows int64");
}

}  // namespace
}  // namespace smelt::test
