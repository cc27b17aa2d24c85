// The operator registry and the accessors an operator uses to read its inputs and attributes.
#include "src/onnx/registry.h"

#include <algorithm>
#include <cmath>

#include "src/onnx/fusions.h"

namespace smelt::onnx {

// ---------------------------------------------------------------------------------------------
// OpContext
// ---------------------------------------------------------------------------------------------

void OpContext::fail(const std::string& message) const { throw OnnxError(node_.label() + ": " + message); }

const Value& OpContext::input(size_t i) const {
  if (!has(i)) fail("input " + std::to_string(i) + " is required but missing");
  return inputs_[i];
}

const Array& OpContext::tensor(size_t i) const {
  const Value& v = input(i);
  if (!v.is_tensor()) fail("input " + std::to_string(i) + " must be a numeric tensor, got " + v.describe());
  return v.array();
}

const Array& OpContext::host_tensor(size_t i) const {
  tensor(i);  // raises naming the op when input i is missing or not a tensor
  return input(i).host_array();
}

ElemType OpContext::elem_type(size_t i) const {
  const Value& v = input(i);
  if (!v.is_tensor() && !v.is_strings()) fail("input " + std::to_string(i) + " must be a tensor, got " + v.describe());
  return v.elem_type();
}

std::vector<int64_t> OpContext::ints(size_t i) const {
  const Array& a = tensor(i);
  if (!is_integral(a.dtype()))
    fail("input " + std::to_string(i) + " must be an integer tensor, got " + input(i).describe());
  return input(i).host_array().to_vector<int64_t>();
}

double OpContext::scalar(size_t i) const {
  const Array& a = tensor(i);
  if (a.size() != 1) fail("input " + std::to_string(i) + " must hold one value, got " + input(i).describe());
  return input(i).host_array().item<double>();
}

int64_t OpContext::scalar_int(size_t i) const {
  const Array& a = tensor(i);
  if (a.size() != 1) fail("input " + std::to_string(i) + " must hold one value, got " + input(i).describe());
  return input(i).host_array().item<int64_t>();
}

const Attribute& OpContext::attr_of(const char* name, Attribute::Type type) const {
  const Attribute* a = node_.attribute(name);
  if (!a) fail(std::string("attribute '") + name + "' is required");
  if (a->type != type)
    fail(std::string("attribute '") + name + "' must be " + attribute_type_name(type) + ", got " +
         attribute_type_name(a->type));
  return *a;
}

int64_t OpContext::attr_int(const char* name, int64_t fallback) const {
  return has_attr(name) ? attr_of(name, Attribute::Type::Int).i : fallback;
}
float OpContext::attr_float(const char* name, float fallback) const {
  return has_attr(name) ? attr_of(name, Attribute::Type::Float).f : fallback;
}
std::string OpContext::attr_string(const char* name, const std::string& fallback) const {
  return has_attr(name) ? attr_of(name, Attribute::Type::String).s : fallback;
}
std::vector<int64_t> OpContext::attr_ints(const char* name, std::vector<int64_t> fallback) const {
  return has_attr(name) ? attr_of(name, Attribute::Type::Ints).ints : fallback;
}
std::vector<float> OpContext::attr_floats(const char* name, std::vector<float> fallback) const {
  return has_attr(name) ? attr_of(name, Attribute::Type::Floats).floats : fallback;
}
std::vector<std::string> OpContext::attr_strings(const char* name, std::vector<std::string> fallback) const {
  return has_attr(name) ? attr_of(name, Attribute::Type::Strings).strings : fallback;
}
const Value& OpContext::attr_tensor(const char* name) const {
  const Attribute* a = node_.attribute(name);
  if (a && a->type == Attribute::Type::SparseTensor) return a->t;
  return attr_of(name, Attribute::Type::Tensor).t;
}
const Graph& OpContext::attr_graph(const char* name) const {
  const Attribute& a = attr_of(name, Attribute::Type::Graph);
  if (!a.g) fail(std::string("attribute '") + name + "' has no graph");
  return *a.g;
}

void OpContext::require_types(size_t i, std::initializer_list<ElemType> allowed) const {
  ElemType t = elem_type(i);
  if (std::find(allowed.begin(), allowed.end(), t) != allowed.end()) return;
  std::string list;
  for (auto a : allowed) list += (list.empty() ? "" : ", ") + elem_type_name(a);
  fail("input " + std::to_string(i) + " has type " + elem_type_name(t) + "; allowed: " + list);
}

void OpContext::require_same_type(size_t i, size_t j) const {
  if (elem_type(i) != elem_type(j))
    fail("inputs " + std::to_string(i) + " and " + std::to_string(j) + " must have the same type, got " +
         input(i).describe() + " and " + input(j).describe());
}

// ---------------------------------------------------------------------------------------------
// Registry
// ---------------------------------------------------------------------------------------------

namespace {
std::string key_of(std::string_view domain, std::string_view op) {
  std::string d(domain);
  if (d == "ai.onnx") d.clear();
  return d + "|" + std::string(op);
}
}  // namespace

void OpRegistry::add(const std::string& domain, const std::string& op_type, int since_version, OpFn fn) {
  auto& list = ops_[key_of(domain, op_type)];
  for (auto& e : list)
    SMELT_ASSERT(e.first != since_version, "onnx: " + op_type + " registered twice for version " +
                                               std::to_string(since_version));
  list.emplace_back(since_version, fn);
  std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
}

OpFn OpRegistry::find(std::string_view domain, std::string_view op_type, int64_t version) const {
  auto it = ops_.find(key_of(domain, op_type));
  if (it == ops_.end()) return nullptr;
  OpFn best = nullptr;
  for (const auto& [since, fn] : it->second)
    if (since <= version) best = fn;
  return best;
}

int OpRegistry::newest_opset(std::string_view domain) const {
  std::string prefix = key_of(domain, "");
  int newest = 0;
  for (const auto& [key, list] : ops_)
    if (key.compare(0, prefix.size(), prefix) == 0 && key.find('|', prefix.size()) == std::string::npos)
      for (const auto& e : list) newest = std::max(newest, e.first);
  return newest;
}

std::vector<std::pair<std::string, std::vector<int>>> OpRegistry::entries() const {
  std::vector<std::pair<std::string, std::vector<int>>> out;
  for (const auto& [key, list] : ops_) {
    std::vector<int> versions;
    for (const auto& e : list) versions.push_back(e.first);
    std::string name = key[0] == '|' ? key.substr(1) : key;
    std::replace(name.begin(), name.end(), '|', '.');
    out.emplace_back(name, versions);
  }
  std::sort(out.begin(), out.end());
  return out;
}

const OpRegistry& OpRegistry::global() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_elementwise_ops(r);
    register_shape_ops(r);
    register_reduce_ops(r);
    register_nn_ops(r);
    register_cast_ops(r);
    register_sequence_ops(r);
    register_extra_ops(r);
    register_more_ops(r);
    register_rnn_ops(r);
    register_image_ops(r);
    register_string_ops(r);
    register_resize_ops(r);
    register_attention_ops(r);
    register_control_ops(r);
    register_ml_ops(r);
    register_signal_ops(r);
    register_training_ops(r);
    register_fusion_ops(r);
    return r;
  }();
  return registry;
}

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

Array int64_array(const std::vector<int64_t>& v) {
  return Array(v.data(), Shape{static_cast<int64_t>(v.size())}, Dtype::Int64);
}

std::string type_text(const Value& v) { return v.describe(); }

}  // namespace smelt::onnx
