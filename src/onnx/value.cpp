// ONNX element types, declared types and runtime values (tensors, strings, sequences, maps, optionals).
#include <mutex>
#include <string>
#include <utility>

#include "smelt/compile.h"
#include "smelt/errors.h"
#include "smelt/onnx.h"
#include "smelt/ops.h"

namespace smelt::onnx {

std::string elem_type_name(ElemType t) {
  switch (t) {
    case ElemType::Undefined: return "undefined";
    case ElemType::Float: return "float";
    case ElemType::UInt8: return "uint8";
    case ElemType::Int8: return "int8";
    case ElemType::UInt16: return "uint16";
    case ElemType::Int16: return "int16";
    case ElemType::Int32: return "int32";
    case ElemType::Int64: return "int64";
    case ElemType::String: return "string";
    case ElemType::Bool: return "bool";
    case ElemType::Float16: return "float16";
    case ElemType::Double: return "double";
    case ElemType::UInt32: return "uint32";
    case ElemType::UInt64: return "uint64";
    case ElemType::Complex64: return "complex64";
    case ElemType::Complex128: return "complex128";
    case ElemType::BFloat16: return "bfloat16";
    case ElemType::Float8E4M3FN: return "float8e4m3fn";
    case ElemType::Float8E4M3FNUZ: return "float8e4m3fnuz";
    case ElemType::Float8E5M2: return "float8e5m2";
    case ElemType::Float8E5M2FNUZ: return "float8e5m2fnuz";
    case ElemType::UInt4: return "uint4";
    case ElemType::Int4: return "int4";
    case ElemType::Float4E2M1: return "float4e2m1";
    case ElemType::Float8E8M0: return "float8e8m0";
    case ElemType::UInt2: return "uint2";
    case ElemType::Int2: return "int2";
  }
  return "unknown(" + std::to_string(static_cast<int32_t>(t)) + ")";
}

std::optional<Dtype> storage_dtype(ElemType t) {
  switch (t) {
    case ElemType::Float: return Dtype::Float32;
    case ElemType::UInt8: return Dtype::UInt8;
    case ElemType::Int8: return Dtype::Int8;
    case ElemType::UInt16: return Dtype::UInt16;
    case ElemType::Int16: return Dtype::Int16;
    case ElemType::Int32: return Dtype::Int32;
    case ElemType::Int64: return Dtype::Int64;
    case ElemType::Bool: return Dtype::Bool;
    case ElemType::Float16: return Dtype::Float16;
    case ElemType::Double: return Dtype::Float64;
    case ElemType::UInt32: return Dtype::UInt32;
    case ElemType::UInt64: return Dtype::UInt64;
    case ElemType::BFloat16: return Dtype::BFloat16;
    case ElemType::Float8E4M3FN:
    case ElemType::Float8E4M3FNUZ:
    case ElemType::Float8E5M2:
    case ElemType::Float8E5M2FNUZ:
    case ElemType::Float4E2M1:
    case ElemType::Float8E8M0:
    case ElemType::UInt4:
    case ElemType::UInt2: return Dtype::UInt8;
    case ElemType::Int4:
    case ElemType::Int2: return Dtype::Int8;
    case ElemType::Undefined:
    case ElemType::String:
    case ElemType::Complex64:
    case ElemType::Complex128: return std::nullopt;
  }
  return std::nullopt;
}

bool is_storage_type(ElemType t) {
  switch (t) {
    case ElemType::Float8E4M3FN:
    case ElemType::Float8E4M3FNUZ:
    case ElemType::Float8E5M2:
    case ElemType::Float8E5M2FNUZ:
    case ElemType::Float4E2M1:
    case ElemType::Float8E8M0:
    case ElemType::UInt4:
    case ElemType::Int4:
    case ElemType::UInt2:
    case ElemType::Int2: return true;
    default: return false;
  }
}

ElemType elem_type_of(Dtype dtype) {
  switch (dtype) {
    case Dtype::Bool: return ElemType::Bool;
    case Dtype::Int8: return ElemType::Int8;
    case Dtype::Int16: return ElemType::Int16;
    case Dtype::Int32: return ElemType::Int32;
    case Dtype::Int64: return ElemType::Int64;
    case Dtype::UInt8: return ElemType::UInt8;
    case Dtype::UInt16: return ElemType::UInt16;
    case Dtype::UInt32: return ElemType::UInt32;
    case Dtype::UInt64: return ElemType::UInt64;
    case Dtype::Float16: return ElemType::Float16;
    case Dtype::BFloat16: return ElemType::BFloat16;
    case Dtype::Float32: return ElemType::Float;
    case Dtype::Float64: return ElemType::Double;
  }
  return ElemType::Undefined;
}

namespace {

std::string dims_to_string(const std::vector<Dim>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    if (dims[i].value >= 0) s += std::to_string(dims[i].value);
    else if (!dims[i].param.empty()) s += dims[i].param;
    else s += "?";
  }
  return s + "]";
}

std::string shape_text(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<Dim> dims_of(const Shape& shape) {
  std::vector<Dim> dims;
  for (auto d : shape) dims.push_back(Dim{d, {}});
  return dims;
}

}  // namespace

std::string TypeInfo::to_string() const {
  auto inner = [&] { return element ? element->to_string() : std::string("?"); };
  switch (kind) {
    case Kind::Unknown: return "unknown";
    case Kind::Tensor:
      return "tensor(" + elem_type_name(elem_type) + ")" + (shape ? dims_to_string(*shape) : "");
    case Kind::SparseTensor:
      return "sparse_tensor(" + elem_type_name(elem_type) + ")" + (shape ? dims_to_string(*shape) : "");
    case Kind::Sequence: return "seq(" + inner() + ")";
    case Kind::Map: return "map(" + elem_type_name(elem_type) + "," + inner() + ")";
    case Kind::Optional: return "optional(" + inner() + ")";
    case Kind::Opaque: return "opaque";
  }
  return "unknown";
}

// ---------------------------------------------------------------------------------------------
// Value
// ---------------------------------------------------------------------------------------------

namespace detail {

/// The host copy of a device tensor (Value::host_array), made once.
struct HostCopy {
  std::mutex mutex;
  Array array;
};

Value with_host_copy(Value device_value, Array host) {
  if (!device_value.is_tensor() || !device_value.host_ || !host.valid()) return device_value;
  // A fresh copy: the value's other handles keep theirs.
  device_value.host_ = std::make_shared<HostCopy>();
  device_value.host_->array = std::move(host);
  return device_value;
}

}  // namespace detail

Value Value::tensor(Array a) {
  if (!a.valid()) throw InvalidArgument("onnx::Value::tensor: empty array handle");
  Value v;
  v.kind_ = Kind::Tensor;
  v.elem_ = elem_type_of(a.dtype());
  v.array_ = std::move(a);
  if (v.array_.device().type != Device::Type::Cpu) v.host_ = std::make_shared<detail::HostCopy>();
  return v;
}

Value Value::tensor(Array a, ElemType type) {
  if (!a.valid()) throw InvalidArgument("onnx::Value::tensor: empty array handle");
  auto storage = storage_dtype(type);
  if (!storage || *storage != a.dtype())
    throw DtypeError("onnx::Value::tensor: " + elem_type_name(type) + " cannot be held in " +
                     dtype_name(a.dtype()) + (storage ? std::string(" (it needs ") + dtype_name(*storage) + ")" : ""));
  Value v;
  v.kind_ = Kind::Tensor;
  v.elem_ = type;
  v.array_ = std::move(a);
  if (v.array_.device().type != Device::Type::Cpu) v.host_ = std::make_shared<detail::HostCopy>();
  return v;
}

Value Value::strings(StringTensor s) {
  int64_t n = 1;
  for (auto d : s.shape) {
    if (d < 0) throw InvalidArgument("onnx::Value::strings: negative dimension in " + shape_text(s.shape));
    n *= d;
  }
  if (static_cast<int64_t>(s.data.size()) != n)
    throw ShapeError("onnx::Value::strings: " + std::to_string(s.data.size()) + " strings for shape " +
                     shape_text(s.shape));
  Value v;
  v.kind_ = Kind::Strings;
  v.elem_ = ElemType::String;
  v.strings_ = std::make_shared<const StringTensor>(std::move(s));
  return v;
}

Value Value::sequence(std::vector<Value> items, TypeInfo element) {
  Value v;
  v.kind_ = Kind::Sequence;
  v.items_ = std::make_shared<const std::vector<Value>>(std::move(items));
  v.element_ = std::make_shared<const TypeInfo>(std::move(element));
  return v;
}

Value Value::map(ElemType key_type, std::vector<int64_t> int_keys, std::vector<std::string> string_keys,
                 Value values) {
  if (!values.is_sequence()) throw InvalidArgument("onnx::Value::map: the values must be a sequence");
  size_t nkeys = key_type == ElemType::String ? string_keys.size() : int_keys.size();
  if (nkeys != values.items().size())
    throw ShapeError("onnx::Value::map: " + std::to_string(nkeys) + " keys for " +
                     std::to_string(values.items().size()) + " values");
  Value v;
  v.kind_ = Kind::Map;
  v.elem_ = key_type;
  v.int_keys_ = std::make_shared<const std::vector<int64_t>>(std::move(int_keys));
  v.string_keys_ = std::make_shared<const std::vector<std::string>>(std::move(string_keys));
  v.items_ = std::make_shared<const std::vector<Value>>(std::vector<Value>{std::move(values)});
  return v;
}

Value Value::optional(std::optional<Value> content, TypeInfo element) {
  Value v;
  v.kind_ = Kind::Optional;
  v.content_ = std::make_shared<const std::optional<Value>>(std::move(content));
  v.element_ = std::make_shared<const TypeInfo>(std::move(element));
  return v;
}

namespace {
[[noreturn]] void wrong_kind(const Value& v, const char* want) {
  throw InvalidArgument(std::string("onnx::Value: ") + want + " asked of a " + v.describe());
}
}  // namespace

const Array& Value::array() const {
  if (kind_ != Kind::Tensor) wrong_kind(*this, "array()");
  return array_;
}
const Array& Value::host_array() const {
  if (kind_ != Kind::Tensor) wrong_kind(*this, "host_array()");
  // On the CPU; or traced (in a compiled segment's trace or under a transform): the caller's read
  // raises UnknownValueError naming its operation as before, the compiler's break signal.
  if (!host_ || smelt::detail::is_tracer(array_)) return array_;
  std::lock_guard lock(host_->mutex);
  if (!host_->array.valid()) {
    Array h = to_device(array_, Device::cpu());
    h.eval();
    host_->array = std::move(h);
  }
  return host_->array;
}
ElemType Value::elem_type() const {
  if (kind_ != Kind::Tensor && kind_ != Kind::Strings) wrong_kind(*this, "elem_type()");
  return elem_;
}
const Shape& Value::shape() const {
  if (kind_ == Kind::Tensor) return array_.shape();
  if (kind_ == Kind::Strings) return strings_->shape;
  wrong_kind(*this, "shape()");
}
const StringTensor& Value::string_tensor() const {
  if (kind_ != Kind::Strings) wrong_kind(*this, "string_tensor()");
  return *strings_;
}
const std::vector<Value>& Value::items() const {
  if (kind_ != Kind::Sequence) wrong_kind(*this, "items()");
  return *items_;
}
const std::optional<Value>& Value::content() const {
  if (kind_ != Kind::Optional) wrong_kind(*this, "content()");
  return *content_;
}
ElemType Value::map_key_type() const {
  if (kind_ != Kind::Map) wrong_kind(*this, "map_key_type()");
  return elem_;
}
const std::vector<int64_t>& Value::map_int_keys() const {
  if (kind_ != Kind::Map) wrong_kind(*this, "map_int_keys()");
  return *int_keys_;
}
const std::vector<std::string>& Value::map_string_keys() const {
  if (kind_ != Kind::Map) wrong_kind(*this, "map_string_keys()");
  return *string_keys_;
}
const Value& Value::map_values() const {
  if (kind_ != Kind::Map) wrong_kind(*this, "map_values()");
  return (*items_)[0];
}
const TypeInfo& Value::element_type() const {
  if (kind_ != Kind::Sequence && kind_ != Kind::Optional) wrong_kind(*this, "element_type()");
  return *element_;
}

TypeInfo Value::type() const {
  TypeInfo t;
  switch (kind_) {
    case Kind::None: return t;
    case Kind::Tensor:
    case Kind::Strings:
      t.kind = TypeInfo::Kind::Tensor;
      t.elem_type = elem_;
      t.shape = dims_of(shape());
      return t;
    case Kind::Sequence:
      t.kind = TypeInfo::Kind::Sequence;
      t.element = element_;
      return t;
    case Kind::Map:
      t.kind = TypeInfo::Kind::Map;
      t.elem_type = elem_;
      t.element = (*items_)[0].element_;
      return t;
    case Kind::Optional:
      t.kind = TypeInfo::Kind::Optional;
      t.element = element_;
      return t;
  }
  return t;
}

std::string Value::describe() const {
  switch (kind_) {
    case Kind::None: return "none";
    case Kind::Tensor:
    case Kind::Strings: return "tensor(" + elem_type_name(elem_) + ")" + shape_text(shape());
    case Kind::Sequence:
      return "seq(" + element_->to_string() + ") of " + std::to_string(items_->size());
    case Kind::Map: return type().to_string();
    case Kind::Optional:
      return content_->has_value() ? "optional(" + (*content_)->describe() + ")"
                                   : "optional(" + element_->to_string() + ") empty";
  }
  return "none";
}

// ---------------------------------------------------------------------------------------------
// Model structures
// ---------------------------------------------------------------------------------------------

const char* attribute_type_name(Attribute::Type t) {
  switch (t) {
    case Attribute::Type::Undefined: return "undefined";
    case Attribute::Type::Float: return "float";
    case Attribute::Type::Int: return "int";
    case Attribute::Type::String: return "string";
    case Attribute::Type::Tensor: return "tensor";
    case Attribute::Type::Graph: return "graph";
    case Attribute::Type::SparseTensor: return "sparse_tensor";
    case Attribute::Type::TypeProto: return "type_proto";
    case Attribute::Type::Floats: return "floats";
    case Attribute::Type::Ints: return "ints";
    case Attribute::Type::Strings: return "strings";
    case Attribute::Type::Tensors: return "tensors";
    case Attribute::Type::Graphs: return "graphs";
    case Attribute::Type::SparseTensors: return "sparse_tensors";
    case Attribute::Type::TypeProtos: return "type_protos";
  }
  return "undefined";
}

const Attribute* Node::attribute(const std::string& attr_name) const {
  for (const auto& a : attributes)
    if (a.name == attr_name) return &a;
  return nullptr;
}

std::string Node::label() const {
  std::string s = domain.empty() || domain == "ai.onnx" ? op_type : domain + "." + op_type;
  if (!name.empty()) s += " '" + name + "'";
  return s;
}

int64_t Model::opset(const std::string& d) const {
  auto norm = [](const std::string& x) { return x == "ai.onnx" ? std::string() : x; };
  for (const auto& o : opsets)
    if (norm(o.domain) == norm(d)) return o.version;
  return 0;
}

}  // namespace smelt::onnx
