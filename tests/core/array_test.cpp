// Tests for array construction, metadata, views and element reads.
#include "test_utils.h"
#include "src/core/node.h"

namespace smelt {
namespace {

TEST(Array, FromVectorRoundTrips) {
  Array a(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.dtype(), float32);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(Array, TransposeIsAView) {
  Array a(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  Array t = transpose(a);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{1, 4, 2, 5, 3, 6}));
  t.eval();
  EXPECT_EQ(t.node().buffer, a.node().buffer);
}

}  // namespace
}  // namespace smelt
