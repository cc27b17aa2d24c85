// The split of large initializer bytes from a model's protobuf: the rest parses to the same model
// less those bytes, the lifted ranges are the bytes, and anything not plainly framed is declined.
#include <gtest/gtest.h>

#include <random>

#include "onnx/onnx_test_helpers.h"
#include "src/onnx/wire_split.h"

namespace smelt {
namespace {

using namespace smelt::test;

std::vector<float> floats(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + 0.25f * static_cast<float>(i);
  return v;
}

/// A model with a large and a small float initializer, a node, metadata after the graph.
pb::ModelProto sample_model() {
  pb::GraphProto g;
  g.set_name("g");
  *g.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {40, 50}, floats(2000, -7.0f), "big");
  *g.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {3}, floats(3, 1.0f), "small");
  *g.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {1100}, floats(1100, 3.0f), "big2");
  *g.add_node() = make_node("Add", {"big2", "big2"}, {"y"});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {1100});
  pb::ModelProto m = make_model(g);
  auto* kv = m.add_metadata_props();
  kv->set_key("k");
  kv->set_value("v");
  return m;
}

TEST(WireSplit, RestParsesToTheModelLessTheLiftedBytes) {
  const pb::ModelProto m = sample_model();
  const std::string bytes = serialize(m);
  auto split = onnx::detail::split_initializer_bytes(bytes.data(), bytes.size(), 4096);
  ASSERT_TRUE(split);
  ASSERT_EQ(split->lifted.size(), 2u);  // "big" (8,000 bytes) and "big2" (4,400); "small" stays
  EXPECT_EQ(split->lifted[0].initializer, 0u);
  EXPECT_EQ(split->lifted[1].initializer, 2u);
  for (const auto& l : split->lifted) {
    const std::string& raw = m.graph().initializer(static_cast<int>(l.initializer)).raw_data();
    ASSERT_EQ(l.size, raw.size());
    EXPECT_EQ(bytes.compare(l.offset, l.size, raw), 0);
  }
  EXPECT_LT(split->rest.size(), bytes.size() - 12000);
  pb::ModelProto rest;
  ASSERT_TRUE(rest.ParseFromString(split->rest));
  pb::ModelProto expected = m;
  expected.mutable_graph()->mutable_initializer(0)->clear_raw_data();
  expected.mutable_graph()->mutable_initializer(2)->clear_raw_data();
  EXPECT_EQ(serialize(rest), serialize(expected));
}

/// A length-delimited field `number` holding `payload`, in protobuf's wire format.
std::string frame(int number, const std::string& payload) {
  std::string out(1, static_cast<char>((number << 3) | 2));
  for (uint64_t v = payload.size();; v >>= 7) {
    out.push_back(static_cast<char>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0)));
    if (v < 0x80) break;
  }
  return out + payload;
}

TEST(WireSplit, DeclinesWhatItCannotSplitFaithfully) {
  const std::string bytes = serialize(sample_model());
  auto split = [](const std::string& b, size_t min = 4096) {
    return onnx::detail::split_initializer_bytes(b.data(), b.size(), min);
  };
  EXPECT_FALSE(split(bytes, 1 << 20));  // nothing that large
  EXPECT_FALSE(split(bytes.substr(0, bytes.size() - 1)));  // truncated
  // The graph twice: protobuf merges the two; the split leaves that to it.
  EXPECT_FALSE(split(bytes + serialize([&] {
                       pb::ModelProto g;
                       *g.mutable_graph() = sample_model().graph();
                       return g;
                     }())));
  // An initializer with raw_data twice (protobuf keeps the last): serialized by hand, as a
  // serializer never writes it.
  pb::TensorProto extra;
  extra.set_raw_data(std::string(8000, '\1'));
  const std::string doubled =
      serialize(raw_tensor<float>(pb::TensorProto::FLOAT, {2000}, floats(2000, 0.0f), "w")) + serialize(extra);
  const std::string model = frame(7, frame(5, doubled));
  EXPECT_FALSE(split(model));
  EXPECT_TRUE(split(frame(7, frame(5, serialize(extra)))));  // the same with raw_data once
  EXPECT_FALSE(split(std::string("\x0b\x00", 2)));  // a group (wire type 3)
  EXPECT_FALSE(split(std::string("\x00\x01", 2)));  // field number 0
}

TEST(WireSplit, NeverReadsPastTheBytesOfAMangledModel) {
  // Truncations, overwritten bytes and lengths that point past the end: the split either declines
  // or returns ranges inside the bytes (the address sanitizer build checks the reads).
  const std::string bytes = serialize(sample_model());
  std::mt19937 rng(7);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string b = bytes;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) b[rng() % b.size()] = static_cast<char>(rng());
    if (trial % 3 == 0) b.resize(rng() % b.size());
    auto split = onnx::detail::split_initializer_bytes(b.data(), b.size(), 4096);
    if (!split) continue;
    for (const auto& l : split->lifted) {
      ASSERT_LE(l.offset, b.size());
      ASSERT_LE(l.size, b.size() - l.offset);
      ASSERT_GE(l.size, 4096u);
    }
  }
}

}  // namespace
}  // namespace smelt
