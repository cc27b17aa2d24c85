// Layered DAG layout for the graph view: longest-path layers, barycenter ordering within layers.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace smelt::view::detail {

struct Layout {
  std::vector<int> layer;                 // per vertex
  std::vector<int> slot;                  // per vertex: its index within its layer
  std::vector<std::vector<size_t>> layers;  // vertices of each layer, left to right
};

/// Lays out `count` vertices joined by `edges` (from, to). Layer = longest path from a source,
/// computed in topological order (a worklist, no recursion); vertices on a cycle are taken in
/// index order and their back edges ignored. Within a layer vertices start in index order and
/// `sweeps` alternating down/up barycenter passes reorder them. Deterministic, O(sweeps * E log V).
Layout layered_layout(size_t count, const std::vector<std::pair<size_t, size_t>>& edges, int sweeps = 4);

}  // namespace smelt::view::detail
