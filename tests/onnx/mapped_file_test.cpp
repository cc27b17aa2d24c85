// Loading without copies: model files parse from a map, external data is used in place (mapped),
// inline raw data moves out of the parsed protobuf; the values are the file's in every case.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "onnx/onnx_test_helpers.h"
#include "smelt/memory.h"
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

/// `m` written to `dir`/`name`; the path.
std::string write_model(const pb::ModelProto& m, const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  std::ofstream out(path, std::ios::binary);
  m.SerializeToOstream(&out);
  return path;
}

TEST(OnnxLoadInPlace, InlineRawDataOfAFileStaysInTheMappedFile) {
  // onnx::load splits the large raw_data fields out before the parse (src/onnx/wire_split.h):
  // whole-byte tensors whose bytes are aligned in the file alias it, misaligned ones and bools are
  // copied. Names of 1 to 8 letters put the tensors' bytes at offsets of each residue mod 4.
  const std::string dir = temp_dir("in_place_inline");
  constexpr int kFloatTensors = 8;
  pb::GraphProto g;
  g.set_name("g");
  std::vector<std::vector<float>> values;
  for (int i = 0; i < kFloatTensors; ++i) {
    values.push_back(iota_floats(1500, static_cast<float>(10000 * i)));
    const std::string name(static_cast<size_t>(i + 1), static_cast<char>('a' + i));
    *g.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {1500}, values.back(), name);
    *g.add_node() = make_node("Neg", {name}, {name + "_y"});
    *g.add_output() = tensor_info(name + "_y", pb::TensorProto::FLOAT, {1500});
  }
  std::vector<uint8_t> flags(5000);
  for (size_t i = 0; i < flags.size(); ++i) flags[i] = static_cast<uint8_t>(i % 5 == 0 ? 9 : 0);
  *g.add_initializer() = raw_tensor<uint8_t>(pb::TensorProto::BOOL, {5000}, flags, "flags");
  *g.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {3}, {1, 2, 3}, "small");
  const std::string path = write_model(make_model(g), dir, "m.onnx");
  std::vector<Array> arrays;
  std::vector<onnx::Value> outputs;
  {
    onnx::Model model = onnx::load(path);
    ASSERT_EQ(model.graph->initializers.size(), kFloatTensors + 2u);
    for (const auto& [name, v] : model.graph->initializers) arrays.push_back(v.array());
    outputs = onnx::run(model, {});
  }
  std::string file_bytes;
  {
    std::ifstream in(path, std::ios::binary);
    file_bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  int aliased = 0;
  for (size_t i = 0; i < kFloatTensors; ++i) {
    const size_t at = file_bytes.find(std::string(reinterpret_cast<const char*>(values[i].data()), 1500 * 4));
    ASSERT_NE(at, std::string::npos);
    EXPECT_EQ(in_place(arrays[i]), at % 4 == 0) << i << " at " << at;  // the map starts on a page
    aliased += in_place(arrays[i]);
    EXPECT_EQ(arrays[i].to_vector<float>(), values[i]) << i;
    std::vector<float> neg = values[i];
    for (auto& x : neg) x = -x;
    EXPECT_EQ(outputs[i].array().to_vector<float>(), neg) << i;
  }
  EXPECT_GT(aliased, 0);
  EXPECT_LT(aliased, kFloatTensors);
  const Array& flags_array = arrays[kFloatTensors];
  const Array& small_array = arrays[kFloatTensors + 1];
  EXPECT_FALSE(in_place(flags_array));  // bool bytes are normalized: copied
  const auto fv = flags_array.to_vector<bool>();
  for (size_t i = 0; i < fv.size(); ++i) ASSERT_EQ(fv[i], i % 5 == 0) << i;
  EXPECT_FALSE(in_place(small_array));
  EXPECT_EQ(small_array.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  // The model is gone; the arrays still read the file, which the runs did not change.
  arrays.resize(kFloatTensors);
  for (auto& a : arrays) a = -a;
  eval(arrays);
  std::ifstream in(path, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()), file_bytes);
}

TEST(OnnxLoadInPlace, AFileLoadsAsItsBytesLoadFromMemory) {
  // The same model through both entry points: initializers (inline large and small, a subgraph's
  // own), nodes, attributes, metadata. The split covers only the top-level graph's initializers.
  const std::string dir = temp_dir("in_place_same");
  pb::GraphProto branch;
  branch.set_name("then");
  *branch.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {2048}, iota_floats(2048, 5.0f), "inner");
  *branch.add_node() = make_node("Identity", {"inner"}, {"t"});
  *branch.add_output() = tensor_info("t", pb::TensorProto::FLOAT, {2048});
  pb::GraphProto other = branch;
  other.set_name("else");
  *other.mutable_initializer(0) = raw_tensor<float>(pb::TensorProto::FLOAT, {2048}, iota_floats(2048, -5.0f), "inner");
  pb::GraphProto g;
  g.set_name("g");
  *g.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {2048}, iota_floats(2048, 0.5f), "w");
  *g.add_initializer() = raw_tensor<uint8_t>(pb::TensorProto::BOOL, {1}, {1}, "c");
  pb::NodeProto n = make_node("If", {"c"}, {"b"}, "if");
  add_graph_attr(n, "then_branch", branch);
  add_graph_attr(n, "else_branch", other);
  *g.add_node() = n;
  *g.add_node() = make_node("Add", {"b", "w"}, {"y"});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {2048});
  pb::ModelProto m = make_model(g);
  auto* kv = m.add_metadata_props();
  kv->set_key("author");
  kv->set_value("test");
  const std::string path = write_model(m, dir, "m.onnx");
  onnx::Model from_file = onnx::load(path);
  onnx::Model from_memory = load_proto(m);
  EXPECT_EQ(from_file.metadata, from_memory.metadata);
  EXPECT_EQ(from_file.graph->nodes.size(), from_memory.graph->nodes.size());
  const auto y_file = onnx::run(from_file, {})[0].array().to_vector<float>();
  EXPECT_EQ(y_file, onnx::run(from_memory, {})[0].array().to_vector<float>());
  std::vector<float> expected = iota_floats(2048, 0.5f);
  const std::vector<float> inner = iota_floats(2048, 5.0f);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] += inner[i];
  EXPECT_EQ(y_file, expected);
}

TEST(OnnxLoadInPlace, LargeModelsLoadTheirInitializersInParallelInOrder) {
  // Past 16 MiB of bytes to copy, initializers load on every CPU thread (Loader::initializers):
  // the values and their order are the file's, and a bad tensor's error is the first in file
  // order, as a sequential load reports it. 9 tensors of 2 MiB, inline (loaded from memory: copied).
  pb::GraphProto g;
  g.set_name("g");
  std::vector<std::vector<float>> values;
  for (int i = 0; i < 9; ++i) {
    values.push_back(iota_floats(size_t{1} << 19, static_cast<float>(i) * 1e6f));
    *g.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {512, 1024}, values.back(), "w" + std::to_string(i));
  }
  *g.add_node() = make_node("Identity", {"w0"}, {"y"});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {512, 1024});
  pb::ModelProto m = make_model(g);
  const int saved_threads = cpu_threads();
  for (int threads : {1, 3}) {
    set_cpu_threads(threads);
    onnx::Model model = load_proto(m);
    ASSERT_EQ(model.graph->initializers.size(), 9u);
    for (size_t i = 0; i < 9; ++i) {
      EXPECT_EQ(model.graph->initializers[i].first, "w" + std::to_string(i));
      EXPECT_EQ(model.graph->initializers[i].second.array().to_vector<float>(), values[i]) << i;
    }
  }
  // Two tensors whose dims do not match their bytes: the error names the first of them.
  m.mutable_graph()->mutable_initializer(6)->set_dims(0, 500);
  m.mutable_graph()->mutable_initializer(3)->set_dims(0, 511);
  try {
    load_proto(m);
    ADD_FAILURE() << "no error";
  } catch (const OnnxError& e) {
    EXPECT_NE(std::string(e.what()).find("initializer 'w3': raw data has 2097152 bytes; tensor(float)[511,1024] needs 2093056"),
              std::string::npos)
        << e.what();
  }
  set_cpu_threads(saved_threads);
}

TEST(OnnxLoadInPlace, CopiedWeightsOutliveTheirFiles) {
  // LoadOptions::map_weights = false: inline and external initializers are copied, so the files
  // may be truncated (a mapped page would then fault) or rewritten while the model is loaded.
  const std::string dir = temp_dir("copied_weights");
  const std::vector<float> ext = iota_floats(4096, 2.5f), inl = iota_floats(3000, -9.0f);
  write_bytes(dir + "/w.bin", ext.data(), ext.size() * 4);
  pb::ModelProto m = external_floats("w.bin", {{0, 4096}});
  *m.mutable_graph()->add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {3000}, inl, "inline");
  const std::string path = write_model(m, dir, "m.onnx");
  for (bool map : {true, false}) {
    onnx::Model model = onnx::load(path, {.map_weights = map});
    ASSERT_EQ(model.graph->initializers.size(), 2u);
    const Array e = model.graph->initializers[0].second.array(), i = model.graph->initializers[1].second.array();
    if (map) {
      EXPECT_TRUE(in_place(e));
      continue;  // a truncated mapped file would fault: not tried
    }
    std::filesystem::resize_file(dir + "/w.bin", 0);
    std::filesystem::resize_file(path, 0);
    EXPECT_EQ(e.to_vector<float>(), ext);
    EXPECT_EQ(i.to_vector<float>(), inl);
    EXPECT_EQ((e * 2.0f).to_vector<float>()[4095], ext[4095] * 2.0f);
  }
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
