// Splits a model file's large initializer bytes from the rest of its protobuf before parsing.
//
// Why: protobuf copies every bytes field it parses into a string of its own. For a model with
// its weights inline (a GPT-2 small export: 312 MB) that copy, and the page faults of the fresh
// memory under it, was most of the load (190-240 ms of a 294 ms warm first call on the GPU
// machine). Reading the wire format down to the raw_data fields of the graph's initializers
// (ModelProto.graph = 7, GraphProto.initializer = 5, TensorProto.raw_data = 9) takes a few page
// reads; the rest of the file (nodes, names, small tensors) is re-framed into a short buffer that
// protobuf parses as usual, and the lifted bytes become the arrays' buffers where they lie in
// the mapped file, as mapped external data does.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace smelt::onnx::detail {

/// One initializer's raw_data taken out of the protobuf: where its bytes are in the file.
struct LiftedBytes {
  size_t initializer = 0;  // index among GraphProto.initializer (its order in the file)
  size_t offset = 0;       // of the first data byte, from the start of the file
  size_t size = 0;
};

/// The model's bytes without the lifted fields (each enclosing message re-framed to its new length),
/// and what was lifted.
struct SplitModel {
  std::string rest;
  std::vector<LiftedBytes> lifted;
};

/// Lifts each raw_data field of at least `min_bytes` bytes from the top-level graph's initializers.
/// Nothing (the caller parses the whole file) when there is nothing that large, or when the bytes
/// are not plainly framed: malformed or truncated, a group, the graph given twice (protobuf would
/// merge them), an initializer with two raw_data fields (the last would win). Parsing `rest` then
/// gives the message the whole file gives, less those fields' values.
std::optional<SplitModel> split_initializer_bytes(const char* data, size_t size, size_t min_bytes);

}  // namespace smelt::onnx::detail
