// libFuzzer entry: arbitrary bytes as a test-data value (.pb) through parse_value.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "smelt/errors.h"
#include "smelt/onnx.h"

namespace {

smelt::onnx::TypeInfo tensor_type() {
  smelt::onnx::TypeInfo t;
  t.kind = smelt::onnx::TypeInfo::Kind::Tensor;
  return t;
}

smelt::onnx::TypeInfo wrap(smelt::onnx::TypeInfo::Kind kind, smelt::onnx::TypeInfo element) {
  smelt::onnx::TypeInfo t;
  t.kind = kind;
  t.element = std::make_shared<const smelt::onnx::TypeInfo>(std::move(element));
  return t;
}

}  // namespace

// The first byte picks the expected message (tensor, sequence, optional, map), as a test-data
// file's declared type would; the rest is the serialized message. Seeds from the node suite are
// raw .pb files, so the script prefixes them with 0 (tensor).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using Kind = smelt::onnx::TypeInfo::Kind;
  smelt::onnx::TypeInfo type;
  switch (data[0] % 6) {
    case 0: type = smelt::onnx::TypeInfo{}; break;
    case 1: type = tensor_type(); break;
    case 2: type = wrap(Kind::Sequence, tensor_type()); break;
    case 3: type = wrap(Kind::Optional, tensor_type()); break;
    case 4: type = wrap(Kind::Optional, wrap(Kind::Sequence, tensor_type())); break;
    default: type = wrap(Kind::Map, tensor_type()); break;
  }
  try {
    smelt::onnx::Value v = smelt::onnx::parse_value(data + 1, size - 1, type, "fuzz");
    (void)v.describe();
    (void)v.type().to_string();
  } catch (const smelt::Error&) {
  }
  return 0;
}
