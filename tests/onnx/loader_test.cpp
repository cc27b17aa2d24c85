// Tests of the ONNX loader: tensor conversions, external data, models, and the errors for bad files.
#include <fstream>

#include "onnx/onnx_test_helpers.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

using onnx::ElemType;

// ---------------------------------------------------------------------------------------------
// Tensors: every smelt dtype, raw_data and typed fields
// ---------------------------------------------------------------------------------------------

template <class T>
void check_raw_roundtrip(int code, Dtype dtype) {
  Array ref = random_array({2, 3}, dtype, -50, 50, 7);
  auto bytes = raw_bytes(ref);
  std::vector<uint8_t> v(bytes.begin(), bytes.end());
  pb::TensorProto t = raw_tensor(code, {2, 3}, v);
  onnx::Value got = parse_tensor(t);
  ASSERT_TRUE(got.is_tensor());
  EXPECT_EQ(got.elem_type(), static_cast<ElemType>(code));
  EXPECT_TRUE(bit_equal(got.array(), ref)) << dtype_name(dtype);
}

TEST(OnnxLoader, RawDataEveryDtype) {
  check_raw_roundtrip<bool>(pb::TensorProto::BOOL, bool_);
  check_raw_roundtrip<int8_t>(pb::TensorProto::INT8, int8);
  check_raw_roundtrip<int16_t>(pb::TensorProto::INT16, int16);
  check_raw_roundtrip<int32_t>(pb::TensorProto::INT32, int32);
  check_raw_roundtrip<int64_t>(pb::TensorProto::INT64, int64);
  check_raw_roundtrip<uint8_t>(pb::TensorProto::UINT8, uint8);
  check_raw_roundtrip<uint16_t>(pb::TensorProto::UINT16, uint16);
  check_raw_roundtrip<uint32_t>(pb::TensorProto::UINT32, uint32);
  check_raw_roundtrip<uint64_t>(pb::TensorProto::UINT64, uint64);
  check_raw_roundtrip<uint16_t>(pb::TensorProto::FLOAT16, float16);
  check_raw_roundtrip<uint16_t>(pb::TensorProto::BFLOAT16, bfloat16);
  check_raw_roundtrip<float>(pb::TensorProto::FLOAT, float32);
  check_raw_roundtrip<double>(pb::TensorProto::DOUBLE, float64);
}

TEST(OnnxLoader, TypedFieldsEveryDtype) {
  auto values = random_values(6, -100, 100, 3);
  for (auto& v : values) v = std::floor(v);
  auto make = [&](int code) {
    pb::TensorProto t;
    t.set_data_type(code);
    t.add_dims(2);
    t.add_dims(3);
    return t;
  };
  // float_data, double_data, int64_data, uint64_data
  {
    auto t = make(pb::TensorProto::FLOAT);
    for (auto v : values) t.add_float_data(static_cast<float>(v));
    EXPECT_TRUE(all_close(parse_tensor(t).array(), values, 0, 0));
    EXPECT_EQ(parse_tensor(t).array().dtype(), float32);
  }
  {
    auto t = make(pb::TensorProto::DOUBLE);
    for (auto v : values) t.add_double_data(v + 0.25);
    std::vector<double> want;
    for (auto v : values) want.push_back(v + 0.25);
    EXPECT_TRUE(all_close(parse_tensor(t).array(), want, 0, 0));
  }
  {
    auto t = make(pb::TensorProto::INT64);
    for (auto v : values) t.add_int64_data(static_cast<int64_t>(v) * 1000000007LL);
    auto got = parse_tensor(t).array().to_vector<int64_t>();
    for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(got[i], static_cast<int64_t>(values[i]) * 1000000007LL);
  }
  for (int code : {pb::TensorProto::UINT32, pb::TensorProto::UINT64}) {
    auto t = make(code);
    for (auto v : values) t.add_uint64_data(static_cast<uint64_t>(std::fabs(v)));
    onnx::Value got = parse_tensor(t);
    EXPECT_EQ(got.array().dtype(), code == pb::TensorProto::UINT32 ? uint32 : uint64);
    std::vector<double> want;
    for (auto v : values) want.push_back(std::fabs(v));
    EXPECT_TRUE(all_close(got.array(), want, 0, 0));
  }
  // int32_data holds int32, int16, int8, uint16, uint8 and bool one per entry.
  struct Case {
    int code;
    Dtype dtype;
  };
  for (Case c : {Case{pb::TensorProto::INT32, int32}, Case{pb::TensorProto::INT16, int16},
                 Case{pb::TensorProto::INT8, int8}, Case{pb::TensorProto::UINT16, uint16},
                 Case{pb::TensorProto::UINT8, uint8}}) {
    auto t = make(c.code);
    std::vector<double> want;
    for (auto v : values) {
      double x = is_unsigned_integral(c.dtype) ? std::fabs(v) : v;
      t.add_int32_data(static_cast<int32_t>(x));
      want.push_back(x);
    }
    onnx::Value got = parse_tensor(t);
    EXPECT_EQ(got.array().dtype(), c.dtype);
    EXPECT_TRUE(all_close(got.array(), want, 0, 0)) << dtype_name(c.dtype);
  }
  {
    auto t = make(pb::TensorProto::BOOL);
    for (int i = 0; i < 6; ++i) t.add_int32_data(i % 3 == 0 ? 1 : 0);
    EXPECT_EQ(parse_tensor(t).array().to_vector<bool>(), (std::vector<bool>{true, false, false, true, false, false}));
  }
  // float16 / bfloat16 travel as their bits in int32_data.
  {
    Array ref = random_array({2, 3}, float16, -4, 4, 11);
    auto bits = copy(ref).to_vector<float>();
    auto t = make(pb::TensorProto::FLOAT16);
    for (auto f : bits) t.add_int32_data(float_to_half(f));
    EXPECT_TRUE(bit_equal(parse_tensor(t).array(), ref));
  }
  {
    Array ref = random_array({2, 3}, bfloat16, -4, 4, 12);
    auto vals = ref.to_vector<float>();
    auto t = make(pb::TensorProto::BFLOAT16);
    for (auto f : vals) t.add_int32_data(float_to_bfloat16(f));
    EXPECT_TRUE(bit_equal(parse_tensor(t).array(), ref));
  }
}

TEST(OnnxLoader, ZeroSizeAndScalarTensors) {
  pb::TensorProto empty = raw_tensor<float>(pb::TensorProto::FLOAT, {0, 3}, {});
  onnx::Value e = parse_tensor(empty);
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
  pb::TensorProto scalar = raw_tensor<int64_t>(pb::TensorProto::INT64, {}, {42});
  onnx::Value s = parse_tensor(scalar);
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.array().item<int64_t>(), 42);
}

TEST(OnnxLoader, StringTensorIsItsOwnKind) {
  pb::TensorProto t;
  t.set_data_type(pb::TensorProto::STRING);
  t.add_dims(3);
  for (const char* s : {"a", "", "héllo"}) t.add_string_data(s);
  onnx::Value v = parse_tensor(t);
  EXPECT_TRUE(v.is_strings());
  EXPECT_EQ(v.elem_type(), ElemType::String);
  EXPECT_EQ(v.string_tensor().data, (std::vector<std::string>{"a", "", "héllo"}));
  EXPECT_THROW_MSG((void)v.array(), InvalidArgument, "array() asked of a tensor(string)[3]");
}

TEST(OnnxLoader, SubByteTypesUnpackWithTheirTrueType) {
  // int4: two per byte, low nibble first, sign-extended; an odd count leaves half a byte.
  std::vector<uint8_t> packed{0x7F, 0x18, 0x0E};  // nibbles 0xF, 0x7, 0x8, 0x1, 0xE
  pb::TensorProto t = raw_tensor(pb::TensorProto::INT4, {5}, packed);
  onnx::Value v = parse_tensor(t);
  EXPECT_EQ(v.elem_type(), ElemType::Int4);
  EXPECT_EQ(v.array().dtype(), int8);
  EXPECT_EQ(v.array().to_vector<int>(), (std::vector<int>{-1, 7, -8, 1, -2}));
  pb::TensorProto u = raw_tensor(pb::TensorProto::UINT4, {5}, packed);
  EXPECT_EQ(parse_tensor(u).array().to_vector<int>(), (std::vector<int>{15, 7, 8, 1, 14}));
  // int2: four per byte.
  pb::TensorProto i2 = raw_tensor(pb::TensorProto::INT2, {5}, std::vector<uint8_t>{0xE4, 0x03});
  EXPECT_EQ(parse_tensor(i2).elem_type(), ElemType::Int2);
  EXPECT_EQ(parse_tensor(i2).array().to_vector<int>(), (std::vector<int>{0, 1, -2, -1, -1}));
  // int4 in int32_data: one packed byte per entry.
  pb::TensorProto typed;
  typed.set_data_type(pb::TensorProto::UINT4);
  typed.add_dims(3);
  typed.add_int32_data(0x21);
  typed.add_int32_data(0x03);
  EXPECT_EQ(parse_tensor(typed).array().to_vector<int>(), (std::vector<int>{1, 2, 3}));
}

TEST(OnnxLoader, Float8KeepsItsTypeAndCastsExactly) {
  // e4m3fn bits: 0x38 = 1.0, 0xC0 = -2.0, 0x7E = 448, 0x7F = NaN, 0x01 = 2^-9.
  std::vector<uint8_t> bits{0x38, 0xC0, 0x7E, 0x7F, 0x01};
  onnx::Value v = parse_tensor(raw_tensor(pb::TensorProto::FLOAT8E4M3FN, {5}, bits));
  EXPECT_EQ(v.elem_type(), ElemType::Float8E4M3FN);
  EXPECT_EQ(v.array().to_vector<uint8_t>(), bits);
  onnx::Value f = onnx::cast(v, ElemType::Float);
  EXPECT_TRUE(all_close(f.array(), {1.0, -2.0, 448.0, NAN, std::ldexp(1.0, -9)}, 0, 0));
  // Back to e4m3fn: round to nearest even, saturating overflow; without saturation it is NaN.
  Array src(std::vector<float>{1.0625f, 1.1875f, 1000.0f, -1e9f}, Shape{4});
  EXPECT_EQ(onnx::cast(onnx::Value::tensor(src), ElemType::Float8E4M3FN).array().to_vector<uint8_t>(),
            (std::vector<uint8_t>{0x38, 0x3A, 0x7E, 0xFE}));
  EXPECT_EQ(onnx::cast(onnx::Value::tensor(src), ElemType::Float8E4M3FN, false).array().to_vector<uint8_t>(),
            (std::vector<uint8_t>{0x38, 0x3A, 0x7F, 0x7F}));
  // e5m2 has infinities.
  onnx::Value e5 = onnx::cast(onnx::Value::tensor(Array(std::vector<float>{INFINITY, -3.0f}, Shape{2})),
                              ElemType::Float8E5M2, false);
  EXPECT_EQ(e5.array().to_vector<uint8_t>(), (std::vector<uint8_t>{0x7C, 0xC2}));
}

TEST(OnnxLoader, ComplexAndUnknownTypesAreErrors) {
  pb::TensorProto c = raw_tensor<float>(pb::TensorProto::COMPLEX64, {1}, {1.0f, 2.0f});
  EXPECT_THROW_MSG(parse_tensor(c), OnnxError, "complex64 tensors are not supported");
  pb::TensorProto u = raw_tensor<float>(pb::TensorProto::FLOAT, {1}, {1.0f});
  u.set_data_type(99);
  EXPECT_THROW_MSG(parse_tensor(u), OnnxError, "unknown element type code 99");
}

TEST(OnnxLoader, DataSizeMismatchNamesTheTensor) {
  pb::TensorProto t = raw_tensor<float>(pb::TensorProto::FLOAT, {3, 4}, {1, 2, 3}, "weights");
  EXPECT_THROW_MSG(parse_tensor(t), OnnxError, "'weights': raw data has 12 bytes; tensor(float)[3,4] needs 48");
  pb::TensorProto typed;
  typed.set_name("bias");
  typed.set_data_type(pb::TensorProto::INT64);
  typed.add_dims(4);
  typed.add_int64_data(1);
  EXPECT_THROW_MSG(parse_tensor(typed), OnnxError, "'bias': 1 values in int64_data; tensor(int64)[4] needs 4");
  pb::TensorProto neg = raw_tensor<float>(pb::TensorProto::FLOAT, {-1}, {});
  EXPECT_THROW_MSG(parse_tensor(neg), OnnxError, "negative dimension in shape [-1]");
  pb::TensorProto strings;
  strings.set_data_type(pb::TensorProto::STRING);
  strings.add_dims(2);
  strings.add_string_data("x");
  EXPECT_THROW_MSG(parse_tensor(strings), OnnxError, "1 strings for tensor(string)[2]");
}

// ---------------------------------------------------------------------------------------------
// External data
// ---------------------------------------------------------------------------------------------

pb::ModelProto external_model(const std::string& location, int64_t offset, int64_t length, int64_t n) {
  pb::GraphProto g;
  g.set_name("g");
  *g.add_initializer() = external_float_tensor("w", n, location, offset >= 0 ? std::to_string(offset) : "",
                                                length >= 0 ? std::to_string(length) : "");
  *g.add_node() = make_node("Add", {"x", "w"}, {"y"});
  *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {n});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {n});
  return make_model(g);
}

TEST(OnnxLoader, ExternalDataWithOffsetAndLength) {
  std::string dir = temp_dir("external");
  auto values = random_values(8, -5, 5, 21);
  std::vector<float> f(values.begin(), values.end());
  {
    std::ofstream out(dir + "/weights.bin", std::ios::binary);
    std::vector<char> pad(64, 0x55);
    out.write(pad.data(), 64);  // the tensor starts at offset 64
    out.write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size() * 4));
    out.write(pad.data(), 16);
  }
  onnx::Model m = load_proto(external_model("weights.bin", 64, 32, 8), dir);
  Array x = random_array({8}, float32, -1, 1, 22);
  auto out = onnx::run(m, {onnx::Value::tensor(x)});
  auto xv = x.to_vector<double>();
  std::vector<double> want;
  for (size_t i = 0; i < 8; ++i) want.push_back(static_cast<double>(static_cast<float>(xv[i] + static_cast<double>(f[i]))));
  EXPECT_TRUE(all_close(out[0].array(), want, 1e-6, 1e-6));

  // A model file on disk finds its data beside it; without length the rest of the file is read.
  {
    std::ofstream out(dir + "/tail.bin", std::ios::binary);
    out.write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size() * 4));
  }
  std::string path = dir + "/model.onnx";
  {
    std::ofstream out(path, std::ios::binary);
    out << serialize(external_model("tail.bin", -1, -1, 8));
  }
  onnx::Model m2 = onnx::load(path);
  auto w = m2.graph->initializers[0].second.array().to_vector<float>();
  EXPECT_EQ(w, f);
}

TEST(OnnxLoader, ExternalDataErrors) {
  std::string dir = temp_dir("external_errors");
  {
    std::ofstream out(dir + "/short.bin", std::ios::binary);
    out << std::string(16, '\0');
  }
  EXPECT_THROW_MSG(load_proto(external_model("missing.bin", 0, 32, 8), dir), OnnxError,
                   "external data file 'missing.bin' not found");
  EXPECT_THROW_MSG(load_proto(external_model("short.bin", 8, 32, 8), dir), OnnxError,
                   "external data file 'short.bin' has 16 bytes; offset 8 + length 32 is past its end");
  EXPECT_THROW_MSG(load_proto(external_model("short.bin", 0, 16, 8), dir), OnnxError,
                   "raw data has 16 bytes; tensor(float)[8] needs 32");
  EXPECT_THROW_MSG(load_proto(external_model("../etc/passwd", 0, 32, 8), dir), OnnxError,
                   "must be a relative path inside the model's folder");
  EXPECT_THROW_MSG(load_proto(external_model("/etc/passwd", 0, 32, 8), dir), OnnxError,
                   "must be a relative path inside the model's folder");
}

// ---------------------------------------------------------------------------------------------
// Models: structure, opsets, attributes, functions, malformed files
// ---------------------------------------------------------------------------------------------

TEST(OnnxLoader, ModelStructure) {
  pb::GraphProto g;
  g.set_name("main");
  auto n = make_node("Transpose", {"x"}, {"y"}, "t0");
  add_ints_attr(n, "perm", {1, 0});
  *g.add_node() = n;
  *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {2, 3});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {3, 2});
  pb::ModelProto mp = make_model(g, 17, 8);
  auto* extra = mp.add_opset_import();
  extra->set_domain("com.example");
  extra->set_version(2);
  auto* meta = mp.add_metadata_props();
  meta->set_key("author");
  meta->set_value("tests");
  onnx::Model m = load_proto(mp);
  EXPECT_EQ(m.ir_version, 8);
  EXPECT_EQ(m.opset(""), 17);
  EXPECT_EQ(m.opset("ai.onnx"), 17);
  EXPECT_EQ(m.opset("com.example"), 2);
  EXPECT_EQ(m.opset("nothing"), 0);
  EXPECT_EQ(m.producer_name, "smelt-test");
  ASSERT_EQ(m.metadata.size(), 1u);
  ASSERT_EQ(m.graph->nodes.size(), 1u);
  const onnx::Node& node = m.graph->nodes[0];
  EXPECT_EQ(node.label(), "Transpose 't0'");
  ASSERT_NE(node.attribute("perm"), nullptr);
  EXPECT_EQ(node.attribute("perm")->type, onnx::Attribute::Type::Ints);
  EXPECT_EQ(node.attribute("perm")->ints, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(m.graph->inputs[0].type.to_string(), "tensor(float)[2,3]");
  Array x = random_array({2, 3}, float32, -1, 1, 5);
  auto out = onnx::run(m, {onnx::Value::tensor(x)});
  EXPECT_TRUE(bit_equal(out[0].array(), copy(transpose(x))));
}

TEST(OnnxLoader, SymbolicAndSequenceTypes) {
  pb::GraphProto g;
  g.set_name("g");
  pb::ValueInfoProto in;
  in.set_name("x");
  auto* tt = in.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(pb::TensorProto::INT64);
  tt->mutable_shape()->add_dim()->set_dim_param("N");
  tt->mutable_shape()->add_dim();
  *g.add_input() = in;
  pb::ValueInfoProto out;
  out.set_name("y");
  out.mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
      pb::TensorProto::INT64);
  *g.add_output() = out;
  *g.add_node() = make_node("SequenceConstruct", {"x", "x"}, {"y"});
  onnx::Model m = load_proto(make_model(g));
  EXPECT_EQ(m.graph->inputs[0].type.to_string(), "tensor(int64)[N,?]");
  EXPECT_EQ(m.graph->outputs[0].type.to_string(), "seq(tensor(int64))");
  auto res = onnx::run(m, {onnx::Value::tensor(Array(std::vector<int64_t>{1, 2, 3, 4}, Shape{2, 2}))});
  ASSERT_TRUE(res[0].is_sequence());
  EXPECT_EQ(res[0].items().size(), 2u);
}

TEST(OnnxLoader, SparseInitializerIsDensified) {
  pb::GraphProto g;
  g.set_name("g");
  pb::SparseTensorProto s;
  *s.mutable_values() = raw_tensor<float>(pb::TensorProto::FLOAT, {2}, {5.0f, -1.5f}, "w");
  *s.mutable_indices() = raw_tensor<int64_t>(pb::TensorProto::INT64, {2, 2}, {0, 1, 1, 2}, "");
  s.add_dims(2);
  s.add_dims(3);
  *g.add_sparse_initializer() = s;
  *g.add_node() = make_node("Identity", {"w"}, {"y"});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {2, 3});
  onnx::Model m = load_proto(make_model(g));
  auto out = onnx::run(m, std::vector<onnx::Value>{});
  EXPECT_TRUE(all_close(out[0].array(), {0, 5, 0, 0, 0, -1.5}, 0, 0));
}

TEST(OnnxLoader, MalformedAndTruncatedFilesAreErrors) {
  std::string bytes = serialize(unary_model("Relu", pb::TensorProto::FLOAT, {4}));
  // Cut inside the graph: protobuf sees a length past the end.
  std::string cut = bytes.substr(0, bytes.size() - 7);
  EXPECT_THROW_MSG(onnx::load_from_memory(cut.data(), cut.size()), OnnxError,
                   "not a valid ONNX model (the protobuf data is malformed or truncated");
  std::string junk = "this is not a model at all\x01\x02\xff";
  EXPECT_THROW_MSG(onnx::load_from_memory(junk.data(), junk.size()), OnnxError, "not a valid ONNX model");
  EXPECT_THROW_MSG(onnx::load_from_memory("", 0), OnnxError, "has no IR version");
  pb::ModelProto no_graph;
  no_graph.set_ir_version(8);
  no_graph.add_opset_import()->set_version(18);
  EXPECT_THROW_MSG(load_proto(no_graph), OnnxError, "the model has no graph");
  pb::ModelProto old = unary_model("Relu", pb::TensorProto::FLOAT, {4});
  old.set_ir_version(2);
  EXPECT_THROW_MSG(load_proto(old), OnnxError, "IR version 2 is not supported (smelt reads 3 to 13)");
  pb::ModelProto no_opset = unary_model("Relu", pb::TensorProto::FLOAT, {4});
  no_opset.clear_opset_import();
  EXPECT_THROW_MSG(load_proto(no_opset), OnnxError, "imports no operator set");
  // A file on disk: missing, and truncated.
  EXPECT_THROW_MSG(onnx::load("/nonexistent/model.onnx"), OnnxError, "cannot open '/nonexistent/model.onnx'");
  std::string dir = temp_dir("truncated");
  {
    std::ofstream out(dir + "/m.onnx", std::ios::binary);
    out << cut;
  }
  EXPECT_THROW_MSG(onnx::load(dir + "/m.onnx"), OnnxError, "m.onnx': not a valid ONNX model");
}

TEST(OnnxLoader, UnsupportedOperatorsAreAllListed) {
  pb::GraphProto g;
  g.set_name("g");
  *g.add_node() = make_node("Relu", {"x"}, {"a"}, "ok");
  *g.add_node() = make_node("FancyOp", {"a"}, {"b"}, "f1");
  *g.add_node() = make_node("FancyOp", {"b"}, {"c"}, "f2");
  auto custom = make_node("Thing", {"c"}, {"y"}, "t1");
  custom.set_domain("com.example");
  *g.add_node() = custom;
  *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {4});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {4});
  pb::ModelProto mp = make_model(g, 18);
  auto* o = mp.add_opset_import();
  o->set_domain("com.example");
  o->set_version(3);
  EXPECT_THROW_MSG(load_proto(mp), OnnxError,
                   "the model uses 2 operators smelt cannot run: ai.onnx::FancyOp (opset 18, node 'f1'), "
                   "com.example::Thing (opset 3, node 't1')");
  onnx::Model lenient = [&] {
    std::string b = serialize(mp);
    return onnx::load_from_memory(b.data(), b.size(), ".", {.check_operators = false});
  }();
  EXPECT_EQ(onnx::unsupported_operators(lenient).size(), 2u);
  // An operator newer than the model's opset is not available to it.
  EXPECT_THROW_MSG(load_proto(unary_model("Gelu", pb::TensorProto::FLOAT, {4}, 18)), OnnxError,
                   "ai.onnx::Gelu (opset 18, node 'n0')");
}

TEST(OnnxLoader, OpsetSelectsTheOperatorVersion) {
  // Squeeze takes its axes as an attribute before opset 13 and as an input from 13 on.
  pb::GraphProto g11;
  g11.set_name("g");
  auto n = make_node("Squeeze", {"x"}, {"y"});
  add_ints_attr(n, "axes", {0});
  *g11.add_node() = n;
  *g11.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {1, 3});
  *g11.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {3});
  Array x = random_array({1, 3}, float32, -1, 1, 9);
  auto out11 = onnx::run(load_proto(make_model(g11, 11)), {onnx::Value::tensor(x)});
  EXPECT_EQ(out11[0].shape(), Shape{3});

  pb::GraphProto g13;
  g13.set_name("g");
  *g13.add_initializer() = raw_tensor<int64_t>(pb::TensorProto::INT64, {1}, {0}, "axes");
  *g13.add_node() = make_node("Squeeze", {"x", "axes"}, {"y"});
  *g13.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {1, 3});
  *g13.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {3});
  auto out13 = onnx::run(load_proto(make_model(g13, 13)), {onnx::Value::tensor(x)});
  EXPECT_EQ(out13[0].shape(), Shape{3});
}

TEST(OnnxLoader, ModelLocalFunctionWithAttributeReference) {
  // custom::ScaledRelu(x) = Relu(x) then LeakyRelu with the caller's alpha.
  pb::FunctionProto f;
  f.set_domain("custom");
  f.set_name("ScaledLeaky");
  f.add_input("a");
  f.add_output("b");
  f.add_attribute("alpha");
  auto body = make_node("LeakyRelu", {"a"}, {"b"});
  auto* ref = body.add_attribute();
  ref->set_name("alpha");
  ref->set_type(pb::AttributeProto::FLOAT);
  ref->set_ref_attr_name("alpha");
  *f.add_node() = body;
  auto* fo = f.add_opset_import();
  fo->set_domain("");
  fo->set_version(18);

  pb::GraphProto g;
  g.set_name("g");
  auto call = make_node("ScaledLeaky", {"x"}, {"y"}, "call");
  call.set_domain("custom");
  auto* alpha = call.add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(pb::AttributeProto::FLOAT);
  alpha->set_f(0.5f);
  *g.add_node() = call;
  *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {4});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {4});
  pb::ModelProto mp = make_model(g);
  auto* co = mp.add_opset_import();
  co->set_domain("custom");
  co->set_version(1);
  *mp.add_functions() = f;
  onnx::Model m = load_proto(mp);
  ASSERT_EQ(m.functions.size(), 1u);
  auto out = onnx::run(m, {onnx::Value::tensor(Array(std::vector<float>{-2, -1, 0, 3}, Shape{4}))});
  EXPECT_TRUE(all_close(out[0].array(), {-1, -0.5, 0, 3}, 0, 0));
}

}  // namespace
}  // namespace smelt::test
