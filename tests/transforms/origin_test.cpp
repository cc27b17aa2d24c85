// Tests of the origin table (src/transforms/origin.h): a missing vjp rule names the unit that made the node.
#include "smelt/transforms.h"
#include "src/transforms/origin.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

Array scatter_mul(const Array& x) {
  return scatter(x, Array(std::vector<int64_t>{0, 2}, Shape{2}), Array(std::vector<float>{2, 3}, Shape{2}), 0,
                 ScatterReduce::Mul);
}

TEST(TransformsOrigin, MissingRuleNamesTheRecordedOrigin) {
  Array x = random_array({4}, float32, 1, 2, 1);
  auto f = [](const std::vector<Array>& in) {
    Array before = in[0] * 2.0f;  // made before the mark: keeps no origin
    uint64_t mark = transforms::origin_mark();
    Array s = scatter_mul(before);
    transforms::set_origin({s}, mark, "unit 'u1'");
    EXPECT_EQ(transforms::origin_of(s), "unit 'u1'");
    EXPECT_EQ(transforms::origin_of(before), "");
    return std::vector<Array>{sum(s)};
  };
  EXPECT_THROW_MSG(vjp(f, {x}, {ones({}, float32)}), UnsupportedError, "vjp: unit 'u1': Scatter(");
}

TEST(TransformsOrigin, WithoutAnOriginTheMessageIsThePrimitives) {
  Array x = random_array({4}, float32, 1, 2, 2);
  auto f = [](const std::vector<Array>& in) { return std::vector<Array>{sum(scatter_mul(in[0]))}; };
  try {
    vjp(f, {x}, {ones({}, float32)});
    ADD_FAILURE() << "expected UnsupportedError";
  } catch (const UnsupportedError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("vjp: Scatter(", 0), 0u) << e.what();
  }
}

TEST(TransformsOrigin, AnEarlierUnitKeepsItsOrigin) {
  // An outer unit's walk stops at nodes an inner unit already claimed (nested subgraphs).
  uint64_t outer = transforms::origin_mark();
  Array x = random_array({4}, float32, 1, 2, 3);
  uint64_t inner = transforms::origin_mark();
  Array a = x * 3.0f;
  transforms::set_origin({a}, inner, "inner");
  Array b = a + 1.0f;
  transforms::set_origin({b}, outer, "outer");
  EXPECT_EQ(transforms::origin_of(a), "inner");
  EXPECT_EQ(transforms::origin_of(b), "outer");
}

}  // namespace
}  // namespace smelt::test
