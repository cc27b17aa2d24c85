// What the graph view draws, before it is written out: vertices, the scope and fused-kernel groups, edges and overlay marks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "smelt/onnx.h"

namespace smelt::view::detail {

enum class VertexKind : uint8_t {
  Input,        // a graph input that is not an initializer
  Node,         // a node of the top-level graph (Constant nodes are ConstantNode)
  Output,       // a graph output
  ConstantNode, // a Constant node without inputs: drawn only when constants are shown
  Initializer,  // an initializer some node reads: drawn only when constants are shown
};

struct Vertex {
  VertexKind kind = VertexKind::Node;
  size_t ref = 0;        // index into the graph's inputs, nodes, outputs or initializers
  int group = 0;         // the innermost group holding it (0: the root)
  int segment = -1;      // overlay segment of a node, -1 when none
  int fused = -1;        // index into GraphData::fused, -1 when in no fused kernel
  bool folded = false;   // host-folded in the overlay's call
};

/// A group is a scope of the exporter's `/`-separated node names (`/m/h.0/attn/MatMul` lies in
/// m > h.0 > attn) or a fused kernel (placed in the innermost scope holding all its nodes).
/// Parents come before their children; group 0 is the root.
struct Group {
  std::string name;  // the scope's last component, or "kernel #k"
  int parent = -1;
  int fused = -1;    // index into GraphData::fused for a fused kernel's group
};

struct FusedKernel {
  int segment = 0;
  std::string text;    // FusedGroup::str()
  std::string kernel;  // FusedGroup::kernel
};

struct GraphData {
  std::vector<Vertex> vertices;
  std::vector<Group> groups;
  std::vector<std::pair<size_t, size_t>> edges;  // (producer, consumer) vertex indices, sorted, unique
  std::vector<FusedKernel> fused;
  /// Per overlay segment: the model's tensors behind a Break segment's reason (the inputs its
  /// node reads on the host or whose values decide its output shape or branch); empty otherwise.
  std::vector<std::vector<std::string>> break_tensors;
};

/// The scope path of a node name: its `/`-separated components but the last, empty ones skipped
/// ("/m/h.0/attn/MatMul" -> {"m", "h.0", "attn"}; "MatMul_3" -> {}).
std::vector<std::string> scope_of(const std::string& node_name);

/// Builds the view's data for the top-level graph of `model`, marked by `overlay` when given.
GraphData graph_data(const onnx::Model& model, const onnx::Overlay* overlay);

}  // namespace smelt::view::detail
