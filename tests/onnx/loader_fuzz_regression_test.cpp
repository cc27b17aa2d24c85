// Regression tests for malformed inputs that crashed, hung or over-allocated in the loader (fuzz/).
#include <fstream>
#include <vector>

#include "onnx/onnx_test_helpers.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

onnx::Model load_bytes(const std::vector<uint8_t>& bytes, const std::string& base_dir = "/nonexistent-smelt-dir") {
  return onnx::load_from_memory(bytes.data(), bytes.size(), base_dir);
}

onnx::Value parse_bytes(const std::vector<uint8_t>& bytes, const onnx::TypeInfo& type = {}) {
  return onnx::parse_value(bytes.data(), bytes.size(), type, "fuzz input");
}

TEST(OnnxLoaderFuzz, DimsFarLargerThanTheData) {
  // TensorProto{dims: [2^40], data_type: FLOAT, raw_data: ""}: the element buffer (4 TiB) was
  // allocated before the raw data's size was compared with the shape.
  const std::vector<uint8_t> bytes = {0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0x10, 0x01, 0x4a, 0x00};
  EXPECT_THROW_MSG(parse_bytes(bytes), OnnxError,
                   "fuzz input: raw data has 0 bytes; tensor(float)[1099511627776] needs 4398046511104");
  // The same through a typed field (float_data) and a sub-byte type (int4 in int32_data).
  pb::TensorProto t;
  t.set_data_type(pb::TensorProto::FLOAT);
  t.add_dims(int64_t{1} << 40);
  t.add_float_data(1.0f);
  EXPECT_THROW_MSG(parse_tensor(t), OnnxError, "1 values in float_data; tensor(float)[1099511627776] needs 1099511627776");
  t.set_data_type(pb::TensorProto::INT4);
  t.clear_float_data();
  EXPECT_THROW_MSG(parse_tensor(t), OnnxError, "0 values in int32_data; tensor(int4)[1099511627776] needs 549755813888");
}

TEST(OnnxLoaderFuzz, ZeroDimBesideDimsWhoseProductOverflows) {
  // Found by the fuzz preset (a LabelEncoder attribute tensor): dims [0, 2^40, 2^40] hold no
  // elements, so the size check passed, and computing the strides overflowed int64.
  pb::TensorProto t;
  t.set_data_type(pb::TensorProto::FLOAT);
  t.add_dims(0);
  t.add_dims(int64_t{1} << 40);
  t.add_dims(int64_t{1} << 40);
  EXPECT_THROW_MSG(parse_tensor(t), OnnxError, "test tensor: shape [0,1099511627776,1099511627776] is too large");
}

TEST(OnnxLoaderFuzz, SparseShapeWhoseDenseFormOverflows) {
  // A model whose sparse initializer has no values and dims [2^40, 2^40]: the element count
  // overflowed int64 (undefined behaviour) before the dense buffer was sized from it.
  const std::vector<uint8_t> bytes = {0x08, 0x08, 0x3a, 0x1f, 0x7a, 0x1d, 0x0a, 0x07, 0x08, 0x00, 0x10, 0x01, 0x42,
                                      0x01, 0x73, 0x12, 0x04, 0x08, 0x00, 0x10, 0x07, 0x18, 0x80, 0x80, 0x80, 0x80,
                                      0x80, 0x20, 0x18, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0x42, 0x02, 0x10, 0x12};
  EXPECT_THROW_MSG(load_bytes(bytes), OnnxError,
                   "sparse initializer 's': the dense form of sparse shape [1099511627776,1099511627776] is larger "
                   "than 1024 MiB");
}

TEST(OnnxLoaderFuzz, SparseShapeTooLargeToExpand) {
  // No overflow, but 2^31 float32 elements (8 GiB) from a few bytes of dims.
  pb::GraphProto g;
  g.set_name("g");
  auto* s = g.add_sparse_initializer();
  *s->mutable_values() = raw_tensor<float>(pb::TensorProto::FLOAT, {1}, {2.0f}, "w");
  *s->mutable_indices() = raw_tensor<int64_t>(pb::TensorProto::INT64, {1}, {5}, "i");
  s->add_dims(int64_t{1} << 31);
  EXPECT_THROW_MSG(load_proto(make_model(g)), OnnxError,
                   "sparse initializer 'w': the dense form of sparse shape [2147483648] is larger than 1024 MiB");
  // A sparse tensor within the limit still expands.
  s->set_dims(0, 8);
  onnx::Model m = load_proto(make_model(g));
  ASSERT_EQ(m.graph->initializers.size(), 1u);
  EXPECT_TRUE(all_close(m.graph->initializers[0].second.array(), std::vector<double>{0, 0, 0, 0, 0, 2, 0, 0}, 0, 0));
}

TEST(OnnxLoaderFuzz, ExternalDataLocationIsAFolder) {
  // A folder opens as a stream on Linux and its "size" could be 2^63 - 1, which sized a string.
  std::string dir = temp_dir("fuzz_external_folder");
  std::filesystem::create_directories(std::filesystem::path(dir) / "weights");
  pb::GraphProto g;
  g.set_name("g");
  auto* t = g.add_initializer();
  t->set_name("w");
  t->set_data_type(pb::TensorProto::FLOAT);
  t->add_dims(2);
  t->set_data_location(pb::TensorProto::EXTERNAL);
  auto* kv = t->add_external_data();
  kv->set_key("location");
  kv->set_value("weights");
  EXPECT_THROW_MSG(load_proto(make_model(g), dir), OnnxError,
                   "initializer 'w': external data location 'weights' is not a regular file");
  kv->set_value(".");
  EXPECT_THROW_MSG(load_proto(make_model(g), dir), OnnxError, "external data location '.' is not a regular file");
  std::filesystem::remove_all(dir);
}

TEST(OnnxLoaderFuzz, NestingDepthIsBounded) {
  // The loader recurses over nested types and subgraphs; protobuf's parser refuses messages
  // nested more than 100 deep, which bounds that recursion. A type 150 sequences deep is
  // rejected as malformed, one 20 deep loads.
  auto model_with_depth = [](int depth) {
    pb::GraphProto g;
    g.set_name("g");
    pb::ValueInfoProto* v = g.add_input();
    v->set_name("x");
    pb::TypeProto* t = v->mutable_type();
    for (int i = 0; i < depth; ++i) t = t->mutable_sequence_type()->mutable_elem_type();
    t->mutable_tensor_type()->set_elem_type(pb::TensorProto::FLOAT);
    return make_model(g);
  };
  EXPECT_THROW_MSG(load_proto(model_with_depth(150)), OnnxError, "not a valid ONNX model");
  onnx::Model m = load_proto(model_with_depth(20));
  EXPECT_EQ(m.graph->inputs[0].type.to_string().substr(0, 8), "seq(seq(");
}

}  // namespace
}  // namespace smelt::test
