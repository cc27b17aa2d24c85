// Tests of the origin table (src/transforms/origin.h): a missing vjp rule names the unit that made the node.
#include "smelt/compile.h"
#include "smelt/transforms.h"
#include "src/core/node.h"
#include "src/transforms/origin.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

// Every primitive a transform can meet has a vjp rule; the compile engine's fused node has none
// (it exists only in compiled tapes), so it stands in for a node without a rule.
Array fused_node(const Array& x) {
  // Fused from the first call (tiered execution would run it unfused until its kernel is built).
  static auto cf = compile([](const Array& v) { return exp(v) * 2.0f + 1.0f; }, [] {
    CompileOptions o;
    o.tiered = false;
    return o;
  }());
  Array y = cf(x);
  EXPECT_EQ(y.node().prim.kind, PrimKind::Fused);
  return y;
}

TEST(TransformsOrigin, MissingRuleNamesTheRecordedOrigin) {
  Array x = random_array({4}, float32, 1, 2, 1);
  uint64_t mark = transforms::origin_mark();
  Array y = fused_node(x);
  transforms::set_origin({y}, mark, "unit 'u1'");
  EXPECT_EQ(transforms::origin_of(y), "unit 'u1'");
  EXPECT_EQ(transforms::origin_of(x), "");
  EXPECT_THROW_MSG(transforms::vjp_rule_naming_origin(y, ones_like(y)), UnsupportedError, "vjp: unit 'u1': Fused(");
  EXPECT_THROW_MSG(transforms::vjp_rule_naming_origin(y, ones_like(y)), UnsupportedError, "has no vjp rule");
}

TEST(TransformsOrigin, WithoutAnOriginTheMessageIsThePrimitives) {
  Array y = fused_node(random_array({4}, float32, 1, 2, 2));
  try {
    transforms::vjp_rule_naming_origin(y, ones_like(y));
    ADD_FAILURE() << "expected UnsupportedError";
  } catch (const UnsupportedError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("vjp: Fused(", 0), 0u) << e.what();
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
