// Layered DAG layout for the graph view (see layout.h).
#include "src/view/layout.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace smelt::view::detail {

Layout layered_layout(size_t count, const std::vector<std::pair<size_t, size_t>>& edges, int sweeps) {
  Layout out;
  out.layer.assign(count, 0);
  out.slot.assign(count, 0);
  std::vector<std::vector<size_t>> succ(count), pred(count);
  std::vector<size_t> indegree(count, 0);
  for (const auto& [u, v] : edges) {
    if (u >= count || v >= count || u == v) continue;
    succ[u].push_back(v);
    pred[v].push_back(u);
    ++indegree[v];
  }
  // Kahn's algorithm preferring low indices; when only cycles remain, the lowest unplaced vertex
  // is forced, and edges into already placed vertices (back edges) do not raise their layer.
  std::vector<char> placed(count, 0);
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < count; ++i)
    if (indegree[i] == 0) ready.push(i);
  size_t next_forced = 0;
  for (size_t done = 0; done < count; ++done) {
    size_t u;
    if (!ready.empty()) {
      u = ready.top();
      ready.pop();
      if (placed[u]) {
        --done;
        continue;
      }
    } else {
      while (placed[next_forced]) ++next_forced;
      u = next_forced;
    }
    placed[u] = 1;
    for (size_t v : succ[u]) {
      if (placed[v]) continue;
      out.layer[v] = std::max(out.layer[v], out.layer[u] + 1);
      if (--indegree[v] == 0) ready.push(v);
    }
  }
  int depth = 0;
  for (size_t i = 0; i < count; ++i) depth = std::max(depth, out.layer[i] + 1);
  out.layers.assign(count ? static_cast<size_t>(depth) : 0, {});
  for (size_t i = 0; i < count; ++i) out.layers[static_cast<size_t>(out.layer[i])].push_back(i);

  // Centered x of each vertex, so that layers of different widths compare.
  std::vector<double> x(count, 0.0);
  auto place = [&](size_t l) {
    const auto& row = out.layers[l];
    const double half = (static_cast<double>(row.size()) - 1.0) / 2.0;
    for (size_t k = 0; k < row.size(); ++k) {
      out.slot[row[k]] = static_cast<int>(k);
      x[row[k]] = static_cast<double>(k) - half;
    }
  };
  for (size_t l = 0; l < out.layers.size(); ++l) place(l);
  std::vector<std::pair<double, size_t>> keyed;
  for (int s = 0; s < sweeps; ++s) {
    const bool down = s % 2 == 0;
    for (size_t step = 0; step < out.layers.size(); ++step) {
      const size_t l = down ? step : out.layers.size() - 1 - step;
      auto& row = out.layers[l];
      keyed.clear();
      for (size_t v : row) {
        const auto& nbrs = down ? pred[v] : succ[v];
        double sum = 0.0;
        size_t n = 0;
        for (size_t w : nbrs) {
          if (down ? out.layer[w] >= out.layer[v] : out.layer[w] <= out.layer[v]) continue;
          sum += x[w];
          ++n;
        }
        keyed.emplace_back(n ? sum / static_cast<double>(n) : x[v], v);
      }
      std::stable_sort(keyed.begin(), keyed.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      for (size_t k = 0; k < row.size(); ++k) row[k] = keyed[k].second;
      place(l);
    }
  }
  return out;
}

}  // namespace smelt::view::detail
