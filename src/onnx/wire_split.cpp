// Splits a model file's large initializer bytes from the rest of its protobuf (see wire_split.h).
#include "src/onnx/wire_split.h"

#include <cstdint>

namespace smelt::onnx::detail {

namespace {

// Field numbers in onnx.proto that the split walks through.
constexpr uint64_t kModelGraph = 7;
constexpr uint64_t kGraphInitializer = 5;
constexpr uint64_t kTensorRawData = 9;

// Protobuf wire types (groups, 3 and 4, are not used by onnx.proto: a split meeting one gives up).
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;

/// One field of a message: its bytes from the tag to its end, and a length-delimited one's payload.
struct Field {
  uint64_t number = 0;
  int wire = 0;
  const char* begin = nullptr;
  const char* payload = nullptr;
  size_t payload_size = 0;
  const char* end = nullptr;
};

bool read_varint(const char*& p, const char* end, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p == end) return false;
    const auto byte = static_cast<uint8_t>(*p++);
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;  // more than ten bytes
}

/// Reads the field at `p` (advancing past it); false at a malformed or truncated one or a group.
bool next_field(const char*& p, const char* end, Field& f) {
  f.begin = p;
  uint64_t tag = 0;
  if (!read_varint(p, end, tag)) return false;
  f.number = tag >> 3;
  f.wire = static_cast<int>(tag & 7);
  if (f.number == 0) return false;
  uint64_t skip = 0;
  switch (f.wire) {
    case kVarint:
      if (!read_varint(p, end, skip)) return false;
      skip = 0;
      break;
    case kFixed64: skip = 8; break;
    case kFixed32: skip = 4; break;
    case kLengthDelimited:
      if (!read_varint(p, end, skip)) return false;
      break;
    default: return false;
  }
  if (skip > static_cast<uint64_t>(end - p)) return false;
  f.payload = p;
  f.payload_size = static_cast<size_t>(skip);
  p += skip;
  f.end = p;
  return true;
}

void append_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

/// Appends a length-delimited field `number` holding `payload`.
void append_message(std::string& out, uint64_t number, const std::string& payload) {
  append_varint(out, (number << 3) | kLengthDelimited);
  append_varint(out, payload.size());
  out += payload;
}

/// A TensorProto's bytes without its raw_data field when that field is at least `min_bytes` long;
/// sets `raw` to the field. False when the tensor is malformed or has raw_data twice.
bool split_tensor(const Field& tensor, size_t min_bytes, std::string& out, std::optional<Field>& raw) {
  raw.reset();
  int raw_fields = 0;
  const char* p = tensor.payload;
  const char* const end = tensor.payload + tensor.payload_size;
  Field f;
  while (p != end) {
    if (!next_field(p, end, f)) return false;
    if (f.number == kTensorRawData && f.wire == kLengthDelimited) {
      if (++raw_fields > 1) return false;
      if (f.payload_size >= min_bytes) {
        raw = f;
        continue;
      }
    }
    out.append(f.begin, f.end);
  }
  return true;
}

/// A GraphProto's bytes with the large raw_data of its initializers lifted into `lifted`.
bool split_graph(const Field& graph, const char* file, size_t min_bytes, std::string& out,
                 std::vector<LiftedBytes>& lifted) {
  const char* p = graph.payload;
  const char* const end = graph.payload + graph.payload_size;
  size_t initializer = 0;
  Field f;
  std::string tensor;
  while (p != end) {
    if (!next_field(p, end, f)) return false;
    if (f.number == kGraphInitializer && f.wire == kLengthDelimited) {
      tensor.clear();
      std::optional<Field> raw;
      if (!split_tensor(f, min_bytes, tensor, raw)) return false;
      if (raw) {
        lifted.push_back({initializer, static_cast<size_t>(raw->payload - file), raw->payload_size});
        append_message(out, kGraphInitializer, tensor);
      } else {
        out.append(f.begin, f.end);
      }
      ++initializer;
      continue;
    }
    out.append(f.begin, f.end);
  }
  return true;
}

}  // namespace

std::optional<SplitModel> split_initializer_bytes(const char* data, size_t size, size_t min_bytes) {
  SplitModel split;
  const char* p = data;
  const char* const end = data + size;
  bool graph_seen = false;
  Field f;
  while (p != end) {
    if (!next_field(p, end, f)) return std::nullopt;
    if (f.number == kModelGraph && f.wire == kLengthDelimited) {
      if (graph_seen) return std::nullopt;
      graph_seen = true;
      std::string graph;
      if (!split_graph(f, data, min_bytes, graph, split.lifted)) return std::nullopt;
      append_message(split.rest, kModelGraph, graph);
      continue;
    }
    split.rest.append(f.begin, f.end);
  }
  if (split.lifted.empty()) return std::nullopt;
  return split;
}

}  // namespace smelt::onnx::detail
