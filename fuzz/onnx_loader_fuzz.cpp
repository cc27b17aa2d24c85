// libFuzzer entry: arbitrary bytes as a serialized ONNX model through load_from_memory.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "smelt/errors.h"
#include "smelt/onnx.h"

namespace {

// External data must never reach the fuzzing machine's files: this folder does not exist.
const char* const kNoFolder = "/nonexistent-smelt-fuzz-folder";

// Touches what the loader built so that its strings and types are read back (and checked by
// the sanitizers), as `smelt info` would.
size_t walk(const smelt::onnx::Model& m) {
  size_t n = 0;
  std::vector<const smelt::onnx::Graph*> work{m.graph.get()};
  while (!work.empty()) {
    const smelt::onnx::Graph* g = work.back();
    work.pop_back();
    for (const auto& v : g->inputs) n += v.type.to_string().size();
    for (const auto& v : g->outputs) n += v.type.to_string().size();
    for (const auto& v : g->value_info) n += v.type.to_string().size();
    for (const auto& [name, value] : g->initializers) n += name.size() + value.describe().size();
    for (const auto& node : g->nodes) {
      n += node.label().size();
      for (const auto& a : node.attributes) {
        n += a.t.describe().size() + a.tp.to_string().size();
        for (const auto& t : a.tensors) n += t.describe().size();
        if (a.g) work.push_back(a.g.get());
        for (const auto& sub : a.graphs) work.push_back(sub.get());
      }
    }
  }
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  smelt::onnx::LoadOptions options;
  options.check_operators = true;
  try {
    smelt::onnx::Model m = smelt::onnx::load_from_memory(data, size, kNoFolder, options);
    // check_operators passed, so the listing must agree that every operator can run.
    if (!smelt::onnx::unsupported_operators(m).empty()) {
      std::fprintf(stderr, "load_from_memory accepted a model that unsupported_operators rejects\n");
      std::abort();
    }
    (void)walk(m);
  } catch (const smelt::OnnxError& e) {
    // Only the operator check failed: the model loads without it, and the listing must then
    // name at least one operator.
    if (std::string(e.what()).find("smelt cannot run") == std::string::npos) return 0;
    smelt::onnx::LoadOptions unchecked;
    unchecked.check_operators = false;
    // The operator check runs before the rest is parsed, so the unchecked load may still find
    // the file malformed: that is an expected outcome too (a handler of its own: an exception
    // leaving this catch block would end the process).
    try {
      smelt::onnx::Model m = smelt::onnx::load_from_memory(data, size, kNoFolder, unchecked);
      if (smelt::onnx::unsupported_operators(m).empty()) {
        std::fprintf(stderr, "load_from_memory rejected operators that unsupported_operators accepts\n");
        std::abort();
      }
      (void)walk(m);
    } catch (const smelt::Error&) {
    }
  } catch (const smelt::Error&) {
    // Malformed input: an error with a message is the expected outcome.
  }
  return 0;
}
