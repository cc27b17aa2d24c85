// Loading without copies: model files parse from a map, external data is used in place (mapped),
// inline raw data moves out of the parsed protobuf; the values are the file's in every case.
#include <gtest/gtest.h>

#include <fstream>
#include <numeric>

#include "onnx/onnx_test_helpers.h"
#include "src/core/node.h"

namespace smelt {
namespace {

using namespace smelt::test;

/// Whether `a`'s buffer is memory smelt's allocator does not own (a map or a moved-out string).
bool in_place(const Array& a) { return a.node().buffer && a.node().buffer->allocator == nullptr; }

std::vector<float> iota_floats(size_t n, float start) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

void write_bytes(const std::string& path, const void* data, size_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}

/// A model whose initializers are float [n] tensors at the given byte offsets of `location`,
/// each the output of an Identity.
pb::ModelProto external_floats(const std::string& location, const std::vector<std::pair<int64_t, int64_t>>& offset_n) {
  pb::GraphProto g;
  g.set_name("g");
  for (size_t i = 0; i < offset_n.size(); ++i) {
    const std::string name = "w" + std::to_string(i);
    *g.add_initializer() = external_float_tensor(name, offset_n[i].second, location, std::to_string(offset_n[i].first),
                                                  std::to_string(offset_n[i].second * 4));
    *g.add_node() = make_node("Identity", {name}, {"y" + std::to_string(i)});
    *g.add_output() = tensor_info("y" + std::to_string(i), pb::TensorProto::FLOAT, {offset_n[i].second});
  }
  return make_model(g);
}

TEST(OnnxLoadInPlace, ExternalDataIsMappedAndOutlivesTheModel) {
  const std::string dir = temp_dir("in_place_external");
  // w0: 4096 floats at offset 0 (mapped), w1: 3000 floats at offset 16386 (not a multiple of 4:
  // copied), w2: 10 floats (small: copied).
  std::vector<float> data = iota_floats(8000, 0.5f);
  write_bytes(dir + "/w.bin", data.data(), data.size() * 4);
  std::vector<char> shifted(16386 + 3000 * 4);
  std::memcpy(shifted.data() + 16386, data.data() + 100, 3000 * 4);
  write_bytes(dir + "/odd.bin", shifted.data(), shifted.size());
  pb::ModelProto m = external_floats("w.bin", {{0, 4096}, {4096 * 4, 10}});
  pb::ModelProto odd = external_floats("odd.bin", {{16386, 3000}});
  *m.mutable_graph()->add_initializer() = odd.graph().initializer(0);
  m.mutable_graph()->mutable_initializer(2)->set_name("w2");
  *m.mutable_graph()->add_node() = make_node("Identity", {"w2"}, {"y2"});
  *m.mutable_graph()->add_output() = tensor_info("y2", pb::TensorProto::FLOAT, {3000});
  const std::string path = dir + "/m.onnx";
  {
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
  }
  Array w0, w1, w2;
  {
    onnx::Model model = onnx::load(path);
    ASSERT_EQ(model.graph->initializers.size(), 3u);
    w0 = model.graph->initializers[0].second.array();
    w1 = model.graph->initializers[1].second.array();
    w2 = model.graph->initializers[2].second.array();
    auto out = onnx::run(model, {});
    EXPECT_EQ(out[0].array().to_vector<float>(), std::vector<float>(data.begin(), data.begin() + 4096));
  }
  // The model is gone; the arrays keep their bytes (the map lives as long as a buffer over it).
  EXPECT_TRUE(in_place(w0));
  EXPECT_FALSE(in_place(w1));  // 10 floats: a buffer of their own
  EXPECT_FALSE(in_place(w2));  // misaligned for float: copied
  EXPECT_EQ(w0.to_vector<float>(), std::vector<float>(data.begin(), data.begin() + 4096));
  EXPECT_EQ(w1.to_vector<float>(), std::vector<float>(data.begin() + 4096, data.begin() + 4106));
  EXPECT_EQ(w2.to_vector<float>(), std::vector<float>(data.begin() + 100, data.begin() + 3100));
  // Arithmetic on a mapped array reads it; writing a result never touches the file.
  EXPECT_EQ((w0 * 2.0f).to_vector<float>()[4095], data[4095] * 2.0f);
  std::ifstream check(dir + "/w.bin", std::ios::binary);
  std::vector<float> again(8000);
  check.read(reinterpret_cast<char*>(again.data()), 8000 * 4);
  EXPECT_EQ(again, data);
}

TEST(OnnxLoadInPlace, InlineRawDataMovesOutOfTheProtobuf) {
  pb::GraphProto g;
  g.set_name("g");
  const std::vector<float> big = iota_floats(5000, -3.0f);
  *g.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {50, 100}, big, "big");
  *g.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {3}, {1, 2, 3}, "small");
  std::vector<uint8_t> flags(5000);
  for (size_t i = 0; i < flags.size(); ++i) flags[i] = static_cast<uint8_t>(i % 3 == 0 ? 7 : 0);
  *g.add_initializer() = raw_tensor<uint8_t>(pb::TensorProto::BOOL, {5000}, flags, "flags");
  for (const char* n : {"big", "small", "flags"}) *g.add_node() = make_node("Identity", {n}, {std::string(n) + "_y"});
  *g.add_output() = tensor_info("big_y", pb::TensorProto::FLOAT, {50, 100});
  *g.add_output() = tensor_info("small_y", pb::TensorProto::FLOAT, {3});
  *g.add_output() = tensor_info("flags_y", pb::TensorProto::BOOL, {5000});
  onnx::Model model = load_proto(make_model(g));
  const Array a = model.graph->initializers[0].second.array();
  EXPECT_TRUE(in_place(a));
  EXPECT_EQ(a.shape(), (Shape{50, 100}));
  EXPECT_EQ(a.to_vector<float>(), big);
  EXPECT_FALSE(in_place(model.graph->initializers[1].second.array()));
  EXPECT_EQ(model.graph->initializers[1].second.array().to_vector<float>(), (std::vector<float>{1, 2, 3}));
  // Bool bytes are normalized to 0/1, so bool tensors are copied.
  const Array f = model.graph->initializers[2].second.array();
  EXPECT_FALSE(in_place(f));
  const auto fv = f.to_vector<bool>();
  for (size_t i = 0; i < fv.size(); ++i) ASSERT_EQ(fv[i], i % 3 == 0) << i;
}

TEST(OnnxLoadInPlace, EmptyAndMissingFiles) {
  const std::string dir = temp_dir("in_place_files");
  write_bytes(dir + "/empty.onnx", "", 0);
  EXPECT_THROW(onnx::load(dir + "/empty.onnx"), OnnxError);  // read (an empty file cannot be mapped), then refused
  try {
    onnx::load(dir + "/missing.onnx");
    ADD_FAILURE() << "no error";
  } catch (const OnnxError& e) {
    EXPECT_EQ(std::string(e.what()), "load: cannot open '" + dir + "/missing.onnx'");
  }
}

}  // namespace
}  // namespace smelt
