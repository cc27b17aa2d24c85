// Loads a serialized model and runs it once, bounded, on inputs made from its declarations: what the
// structure-aware fuzzer does with each input and what the corpus replay test repeats.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "smelt/errors.h"
#include "smelt/onnx.h"
#include "smelt/ops.h"

namespace smelt::fuzz {

// External data must never reach the fuzzing machine's files: this folder does not exist.
inline constexpr const char* kNoFolder = "/nonexistent-smelt-fuzz-folder";
// Inputs larger than this are not made (the run is skipped): the fuzzer looks for crashes, and
// big inputs only slow it down.
inline constexpr int64_t kMaxInputElements = int64_t{1} << 16;
// The bounds of every run: a wrong trip count or shape must end in an error, not a hang or a
// machine out of memory.
inline constexpr std::chrono::milliseconds kRunTimeout{2000};
inline constexpr int64_t kRunBudgetBytes = int64_t{256} << 20;

/// A tensor for a declared graph input: symbolic and unknown dims are 2, values a fixed small
/// pattern (indices stay small and non-negative). nullopt when the declaration cannot be met.
inline std::optional<onnx::Value> input_for(const onnx::ValueInfo& info) {
  const onnx::TypeInfo& t = info.type;
  switch (t.kind) {
    case onnx::TypeInfo::Kind::Optional: return onnx::Value();
    case onnx::TypeInfo::Kind::Sequence: {
      onnx::TypeInfo element = t.element ? *t.element : onnx::TypeInfo{};
      return onnx::Value::sequence({}, element);
    }
    case onnx::TypeInfo::Kind::Tensor: break;
    case onnx::TypeInfo::Kind::SparseTensor:
    case onnx::TypeInfo::Kind::Map:
    case onnx::TypeInfo::Kind::Opaque:
    case onnx::TypeInfo::Kind::Unknown: return std::nullopt;
  }
  Shape shape;
  int64_t n = 1;
  if (t.shape) {
    for (const auto& d : *t.shape) {
      int64_t v = d.value >= 0 ? d.value : 2;
      if (v > kMaxInputElements) return std::nullopt;
      shape.push_back(v);
      n *= v;
      if (n > kMaxInputElements) return std::nullopt;
    }
  } else {
    shape = {2};
    n = 2;
  }
  if (t.elem_type == onnx::ElemType::String) {
    onnx::StringTensor s{shape, {}};
    for (int64_t i = 0; i < n; ++i) s.data.push_back(std::string(static_cast<size_t>(i % 4), 'a') + "b");
    return onnx::Value::strings(std::move(s));
  }
  auto storage = onnx::storage_dtype(t.elem_type == onnx::ElemType::Undefined ? onnx::ElemType::Float : t.elem_type);
  if (!storage) return std::nullopt;
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = static_cast<double>(i % 5);
  Array a = astype(Array(values, shape), *storage);
  if (onnx::is_storage_type(t.elem_type)) return onnx::Value::tensor(a, t.elem_type);
  return onnx::Value::tensor(a);
}

/// Loads `data` as a model and runs it once under kRunTimeout and kRunBudgetBytes. Every
/// smelt::Error is an expected outcome (returned as its message); anything else (a crash, a
/// sanitizer report, another exception) is a bug and leaves this function.
inline std::string load_and_run(const uint8_t* data, size_t size) {
  onnx::Model model;
  try {
    model = onnx::load_from_memory(data, size, kNoFolder);
  } catch (const Error& e) {
    return std::string("load: ") + e.what();
  }
  std::vector<onnx::Value> inputs;
  std::vector<std::string> initializers;
  for (const auto& [name, value] : model.graph->initializers) initializers.push_back(name);
  for (const auto& in : model.graph->inputs) {
    bool backed = false;
    for (const auto& name : initializers) backed = backed || name == in.name;
    if (backed) break;  // inputs backed by initializers come last and may be left out
    auto v = input_for(in);
    if (!v) return "skipped: an input that cannot be made (" + in.type.to_string() + ")";
    inputs.push_back(std::move(*v));
  }
  onnx::RunOptions options;
  options.timeout = kRunTimeout;
  options.memory_budget_bytes = kRunBudgetBytes;
  try {
    auto out = onnx::run(model, inputs, options);
    return "ran: " + std::to_string(out.size()) + " outputs";
  } catch (const Error& e) {
    return std::string("run: ") + e.what();
  }
}

}  // namespace smelt::fuzz
