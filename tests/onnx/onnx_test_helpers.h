// Builders for small ONNX models and tensors in tests, through the generated protobuf classes.
#pragma once

#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "smelt/onnx.h"
#include "src/onnx/proto/onnx.pb.h"

namespace smelt::test {

namespace pb = ::onnx;

/// A fresh folder under the system temp dir, unique to this process and `name`.
inline std::string temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("smelt_onnx_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline pb::ValueInfoProto tensor_info(const std::string& name, int elem_type, const std::vector<int64_t>& dims) {
  pb::ValueInfoProto v;
  v.set_name(name);
  auto* t = v.mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  auto* shape = t->mutable_shape();
  for (auto d : dims) shape->add_dim()->set_dim_value(d);
  return v;
}

inline pb::NodeProto make_node(const std::string& op, const std::vector<std::string>& in,
                               const std::vector<std::string>& out, const std::string& name = "") {
  pb::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (const auto& i : in) n.add_input(i);
  for (const auto& o : out) n.add_output(o);
  return n;
}

inline void add_int_attr(pb::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::INT);
  a->set_i(v);
}

inline void add_ints_attr(pb::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}

/// A graph attribute `name` (If's branches, Loop's and Scan's body) holding `g`.
inline void add_graph_attr(pb::NodeProto& n, const std::string& name, const pb::GraphProto& g) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::GRAPH);
  *a->mutable_g() = g;
}

/// A float [n] initializer `name` stored as external data at `location`, with the optional
/// "offset" and "length" entries (empty: left out).
inline pb::TensorProto external_float_tensor(const std::string& name, int64_t n, const std::string& location,
                                             const std::string& offset = "", const std::string& length = "") {
  pb::TensorProto w;
  w.set_name(name);
  w.set_data_type(pb::TensorProto::FLOAT);
  w.add_dims(n);
  w.set_data_location(pb::TensorProto::EXTERNAL);
  auto add = [&](const char* k, const std::string& v) {
    auto* e = w.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", location);
  if (!offset.empty()) add("offset", offset);
  if (!length.empty()) add("length", length);
  return w;
}

/// A model around one graph, importing the default domain at `opset`.
inline pb::ModelProto make_model(const pb::GraphProto& g, int64_t opset = 18, int64_t ir = 9) {
  pb::ModelProto m;
  m.set_ir_version(ir);
  m.set_producer_name("smelt-test");
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  *m.mutable_graph() = g;
  return m;
}

/// y = op(x) for one tensor input and output.
inline pb::ModelProto unary_model(const std::string& op, int elem_type, const std::vector<int64_t>& dims,
                                  int64_t opset = 18) {
  pb::GraphProto g;
  g.set_name("g");
  *g.add_node() = make_node(op, {"x"}, {"y"}, "n0");
  *g.add_input() = tensor_info("x", elem_type, dims);
  *g.add_output() = tensor_info("y", elem_type, dims);
  return make_model(g, opset);
}

inline std::string serialize(const google::protobuf::MessageLite& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

inline onnx::Model load_proto(const pb::ModelProto& m, const std::string& base_dir = ".") {
  std::string bytes = serialize(m);
  return onnx::load_from_memory(bytes.data(), bytes.size(), base_dir);
}

/// A TensorProto holding `values` as raw little-endian bytes.
template <class T>
pb::TensorProto raw_tensor(int elem_type, const std::vector<int64_t>& dims, const std::vector<T>& values,
                           const std::string& name = "t") {
  pb::TensorProto t;
  t.set_name(name);
  t.set_data_type(elem_type);
  for (auto d : dims) t.add_dims(d);
  std::string raw(values.size() * sizeof(T), '\0');
  if (!raw.empty()) std::memcpy(raw.data(), values.data(), raw.size());
  t.set_raw_data(raw);
  return t;
}

inline onnx::Value parse_tensor(const pb::TensorProto& t) {
  std::string bytes = serialize(t);
  return onnx::parse_value(bytes.data(), bytes.size(), {}, "test tensor");
}

}  // namespace smelt::test
