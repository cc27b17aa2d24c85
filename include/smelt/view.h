// The offline HTML graph view of an ONNX model, optionally colored by a compiled model's overlay.
#pragma once

#include <string>

#include "smelt/onnx.h"

namespace smelt::view {

struct GraphViewOptions {
  /// The page title; default: the graph's name.
  std::string title;
  /// The device the overlay's model was compiled for ("cuda:0"), named in the legend; "" for none.
  std::string device;
};

/// One self-contained HTML document (inline CSS, SVG and JS written by smelt; no external URL,
/// works from a file:// path) drawing the top-level graph of `model`. Nodes are grouped by the
/// `/`-separated scopes of their names (`/m/h.0/attn/MatMul` lies in m > h.0 > attn): a closed
/// group is one box with its node count and its nodes' segment colors, opened and closed by a
/// click; the page lays out only the open groups (a layered layout per group, in the page). Pan
/// and zoom with the mouse, fit to screen, search by node name, op type or tensor name, a
/// minimap. Constant nodes and initializers are hidden behind a toggle that draws them right
/// above their consumers. Clicking a node shows its op type, name, scope, domain, inputs and
/// outputs with their declared types, attributes, segment and fused kernel. With `?selftest` in
/// its URL the page checks itself and writes the result into `<pre id="selftest">`; with
/// `?find=TEXT` it opens on the first match of TEXT.
///
/// With `overlay` (onnx::overlay or CompiledModel::overlay of the same model) each node is filled
/// with its segment's color and a legend lists the segments (kind, positions, first and last
/// node, reason, the tensors behind a break's reason); break nodes have a thick red outline, each
/// fused kernel is a group of its own (a dashed frame labelled with its nodes) and host-folded
/// nodes are greyed. Overlay positions index the top-level graph's execution order. The output
/// is deterministic.
std::string graph_html(const onnx::Model& model, const onnx::Overlay* overlay, const GraphViewOptions& options);
std::string graph_html(const onnx::Model& model, const onnx::Overlay* overlay = nullptr, const std::string& title = "");

/// Writes graph_html(model, overlay, options) to `path`; raises smelt::Error naming the path when
/// the file cannot be written.
void write_graph_html(const std::string& path, const onnx::Model& model, const onnx::Overlay* overlay,
                      const GraphViewOptions& options);
void write_graph_html(const std::string& path, const onnx::Model& model, const onnx::Overlay* overlay = nullptr,
                      const std::string& title = "");

}  // namespace smelt::view
