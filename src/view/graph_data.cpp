// The graph view's data (see graph_data.h): scope and fused-kernel groups, edges, overlay marks.
#include "src/view/graph_data.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "smelt/errors.h"
#include "src/onnx/executor.h"
#include "src/onnx/host_inputs.h"

namespace smelt::view::detail {
namespace {

using onnx::Graph;
using onnx::Node;

/// What the overlay says about each node of the graph (by node index).
struct NodeMarks {
  std::vector<int> segment;  // -1: no segment
  std::vector<int> fused;    // index into the flattened fused kernels, -1: none
  std::vector<char> folded;
};

NodeMarks mark_nodes(const Graph& g, const onnx::Overlay& ov, std::vector<FusedKernel>& kernels) {
  const size_t n = g.nodes.size();
  NodeMarks m{std::vector<int>(n, -1), std::vector<int>(n, -1), std::vector<char>(n, 0)};
  // The overlay's positions index the execution order of compiled models (the runner's order).
  std::vector<size_t> order;
  try {
    order = onnx::detail::topological_order(g.nodes);
  } catch (const Error&) {
    for (size_t i = 0; i < n; ++i) order.push_back(i);
  }
  std::unordered_map<std::string, std::vector<size_t>> positions_of;  // label -> positions, ascending
  for (size_t p = 0; p < order.size(); ++p) positions_of[g.nodes[order[p]].label()].push_back(p);
  for (size_t k = 0; k < ov.segments.size(); ++k) {
    const auto& s = ov.segments[k];
    for (size_t p = s.start; p < s.stop && p < order.size(); ++p) m.segment[order[p]] = static_cast<int>(k);
    for (const auto& f : s.fused) {
      const int id = static_cast<int>(kernels.size());
      kernels.push_back({static_cast<int>(k), f.str(), f.kernel});
      for (const auto& label : f.nodes) {
        auto it = positions_of.find(label);
        if (it == positions_of.end()) continue;
        // Of nodes sharing a label, the first of this segment not yet in a kernel.
        for (size_t p : it->second) {
          if (p < s.start || p >= s.stop || m.fused[order[p]] >= 0) continue;
          m.fused[order[p]] = id;
          break;
        }
      }
    }
  }
  for (const auto& label : ov.host_folded) {
    auto it = positions_of.find(label);
    if (it == positions_of.end()) continue;
    for (size_t p : it->second) {
      const size_t i = order[p];
      const int seg = m.segment[i];
      if (m.folded[i] || (seg >= 0 && ov.segments[static_cast<size_t>(seg)].kind != onnx::SegmentKind::Compiled))
        continue;
      m.folded[i] = 1;
      break;
    }
  }
  return m;
}

/// The model's tensors behind a break node's reason: the inputs whose formal names the reason
/// quotes ("needs the values of input 'shape'"), or whose values decide the output shape or branch.
std::vector<std::string> break_tensors_of(const Node& n, const std::string& reason) {
  std::vector<std::string> out;
  auto add = [&](size_t i) {
    if (i < n.inputs.size() && !n.inputs[i].empty() &&
        std::find(out.begin(), out.end(), n.inputs[i]) == out.end())
      out.push_back(n.inputs[i]);
  };
  const bool standard = n.domain.empty() || n.domain == "ai.onnx";
  if (standard && (n.op_type == "NonZero" || n.op_type == "Unique" || n.op_type == "NonMaxSuppression")) {
    for (size_t i = 0; i < n.inputs.size(); ++i) add(i);
  } else if (standard && n.op_type == "Compress") {
    add(1);
  } else if (standard && n.op_type == "If") {
    add(0);
  } else if (const auto* formal = onnx::detail::host_input_names(n)) {
    for (size_t i = 0; i < formal->size(); ++i)
      if ((*formal)[i] && reason.find(std::string("'") + (*formal)[i] + "'") != std::string::npos) add(i);
  }
  // Operators without a table entry name the tensor itself: "input 2 ('value name')".
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (!n.inputs[i].empty() && reason.find("('" + n.inputs[i] + "')") != std::string::npos) add(i);
  return out;
}

/// Groups by scope path, created parent first; the root is group 0.
class GroupTree {
 public:
  explicit GroupTree(std::vector<Group>& groups) : groups_(groups) {
    if (groups_.empty()) groups_.push_back({"", -1, -1});
  }
  int of_path(const std::vector<std::string>& path) {
    int g = 0;
    for (const auto& part : path) {
      auto [it, fresh] = index_.try_emplace({g, part}, static_cast<int>(groups_.size()));
      if (fresh) groups_.push_back({part, g, -1});
      g = it->second;
    }
    return g;
  }
  int depth(int g) const {
    int d = 0;
    for (; g > 0; g = groups_[static_cast<size_t>(g)].parent) ++d;
    return d;
  }
  int common_ancestor(int a, int b) const {
    int da = depth(a), db = depth(b);
    for (; da > db; --da) a = groups_[static_cast<size_t>(a)].parent;
    for (; db > da; --db) b = groups_[static_cast<size_t>(b)].parent;
    while (a != b) {
      a = groups_[static_cast<size_t>(a)].parent;
      b = groups_[static_cast<size_t>(b)].parent;
    }
    return a;
  }

 private:
  std::vector<Group>& groups_;
  std::map<std::pair<int, std::string>, int> index_;
};

bool is_constant_node(const Node& n) {
  return n.op_type == "Constant" && (n.domain.empty() || n.domain == "ai.onnx") &&
         std::all_of(n.inputs.begin(), n.inputs.end(), [](const std::string& s) { return s.empty(); });
}

}  // namespace

std::vector<std::string> scope_of(const std::string& node_name) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t slash = node_name.find('/', begin);
    if (slash == std::string::npos) break;
    if (slash > begin) parts.push_back(node_name.substr(begin, slash - begin));
    begin = slash + 1;
  }
  return parts;  // the text after the last '/' is the node's own name
}

GraphData graph_data(const onnx::Model& model, const onnx::Overlay* overlay) {
  if (!model.graph) throw InvalidArgument("graph_html: the model has no graph");
  const Graph& g = *model.graph;
  GraphData d;
  GroupTree tree(d.groups);
  NodeMarks marks;
  if (overlay) marks = mark_nodes(g, *overlay, d.fused);

  std::unordered_map<std::string, size_t> initializer_index;
  for (size_t i = 0; i < g.initializers.size(); ++i) initializer_index.emplace(g.initializers[i].first, i);

  // Vertices: graph inputs that are not initializers, nodes, graph outputs; initializers last.
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (initializer_index.count(g.inputs[i].name)) continue;
    producer[g.inputs[i].name] = d.vertices.size();
    d.vertices.push_back({VertexKind::Input, i, 0});
  }
  const size_t first_node = d.vertices.size();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    for (const auto& o : n.outputs)
      if (!o.empty()) producer[o] = d.vertices.size();
    Vertex v{is_constant_node(n) ? VertexKind::ConstantNode : VertexKind::Node, i, tree.of_path(scope_of(n.name))};
    if (overlay) {
      v.segment = marks.segment[i];
      v.fused = marks.fused[i];
      v.folded = marks.folded[i] != 0;
    }
    d.vertices.push_back(v);
  }
  const size_t first_output = d.vertices.size();
  for (size_t i = 0; i < g.outputs.size(); ++i) d.vertices.push_back({VertexKind::Output, i, 0});

  // A fused kernel is a group in the innermost scope holding all of its nodes.
  if (!d.fused.empty()) {
    std::vector<int> lca(d.fused.size(), -1);
    for (size_t v = first_node; v < first_output; ++v) {
      const int f = d.vertices[v].fused;
      if (f < 0) continue;
      int& a = lca[static_cast<size_t>(f)];
      a = a < 0 ? d.vertices[v].group : tree.common_ancestor(a, d.vertices[v].group);
    }
    std::vector<int> group_of_kernel(d.fused.size(), -1);
    for (size_t f = 0; f < d.fused.size(); ++f) {
      if (lca[f] < 0) continue;  // none of its nodes was found
      group_of_kernel[f] = static_cast<int>(d.groups.size());
      d.groups.push_back({"kernel #" + std::to_string(f), lca[f], static_cast<int>(f)});
    }
    for (size_t v = first_node; v < first_output; ++v)
      if (d.vertices[v].fused >= 0) d.vertices[v].group = group_of_kernel[static_cast<size_t>(d.vertices[v].fused)];
  }

  // Edges from producers (initializers: one vertex each, in the scope of all their readers).
  std::set<std::pair<size_t, size_t>> edges;
  std::unordered_map<size_t, size_t> initializer_vertex;  // initializer index -> vertex
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const size_t v = first_node + i;
    for (const auto& name : onnx::detail::node_reads(g.nodes[i])) {
      auto it = producer.find(name);
      if (it != producer.end()) {
        if (it->second != v) edges.insert({it->second, v});
        continue;
      }
      auto init = initializer_index.find(name);
      if (init == initializer_index.end()) continue;
      auto [iv, fresh] = initializer_vertex.try_emplace(init->second, d.vertices.size());
      if (fresh) d.vertices.push_back({VertexKind::Initializer, init->second, d.vertices[v].group});
      Vertex& w = d.vertices[iv->second];
      w.group = tree.common_ancestor(w.group, d.vertices[v].group);
      edges.insert({iv->second, v});
    }
  }
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    auto it = producer.find(g.outputs[i].name);
    if (it != producer.end()) edges.insert({it->second, first_output + i});
  }
  d.edges.assign(edges.begin(), edges.end());

  if (overlay) {
    d.break_tensors.resize(overlay->segments.size());
    for (size_t v = first_node; v < first_output; ++v) {
      const int s = d.vertices[v].segment;
      if (s < 0 || overlay->segments[static_cast<size_t>(s)].kind != onnx::SegmentKind::Break) continue;
      d.break_tensors[static_cast<size_t>(s)] =
          break_tensors_of(g.nodes[d.vertices[v].ref], overlay->segments[static_cast<size_t>(s)].reason);
    }
  }
  return d;
}

}  // namespace smelt::view::detail
