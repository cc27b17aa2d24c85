// The offline HTML graph view of an ONNX model, optionally colored by a compiled model's overlay.
#pragma once

#include <string>

#include "smelt/onnx.h"

namespace smelt::view {

/// One self-contained HTML document (inline CSS, SVG and JS; no external URL, works from a
/// file:// path) drawing the top-level graph of `model` as a layered DAG: graph inputs, nodes
/// ("OpType" with the node name below) and graph outputs; edges name their tensor on hover;
/// initializers are summarized in the header and listed in each node's details. Clicking a node
/// shows its op type, name, domain, inputs and outputs with their declared types, attributes,
/// segment and fused group.
///
/// With `overlay` (onnx::overlay or CompiledModel::overlay of the same model) each node is filled
/// with its segment's color and a legend lists the segments (kind, positions, first and last
/// node, reason); break nodes have a thick red outline, nodes of a fused kernel a dashed one and
/// host-folded nodes are greyed. Overlay positions index the top-level graph's execution order.
/// `title` defaults to the graph's name. The output is deterministic.
std::string graph_html(const onnx::Model& model, const onnx::Overlay* overlay = nullptr, const std::string& title = "");

/// Writes graph_html(model, overlay, title) to `path`; raises smelt::Error naming the path when
/// the file cannot be written.
void write_graph_html(const std::string& path, const onnx::Model& model, const onnx::Overlay* overlay = nullptr,
                      const std::string& title = "");

}  // namespace smelt::view
