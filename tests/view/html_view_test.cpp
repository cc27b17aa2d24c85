// The offline HTML graph view: escaping, self-containment, overlay colors and marks, large graphs.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <unistd.h>

#include "smelt/onnx.h"
#include "smelt/view.h"
#include "src/view/graph_data.h"
#include "tests/onnx/model_builder.h"
#include "tests/view/scoped_model.h"
#include "tests/test_utils.h"

namespace smelt::test {
namespace {

namespace fs = std::filesystem;
using onnx::ElemType;
using onnx::Value;

/// The repository root: this file lives in tests/view/ (CMake compiles it by absolute path).
fs::path repo_root() { return fs::path(__FILE__).parent_path().parent_path().parent_path(); }
std::string model_path(const std::string& name) { return (repo_root() / "models" / (name + ".onnx")).string(); }

std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size())) ++n;
  return n;
}

void expect_self_contained(const std::string& html) {
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_EQ(count_of(html, "<script"), 1u);
  EXPECT_EQ(count_of(html, "</script>"), 1u);
  EXPECT_NE(html.find("<canvas id=\"graph\""), std::string::npos);
}

/// The vertex of node `name` in `d`.
const view::detail::Vertex& vertex_of(const onnx::Model& m, const view::detail::GraphData& d, const std::string& name) {
  for (const auto& v : d.vertices)
    if ((v.kind == view::detail::VertexKind::Node || v.kind == view::detail::VertexKind::ConstantNode) &&
        m.graph->nodes[v.ref].name == name)
      return v;
  throw std::runtime_error("no vertex for node " + name);
}

/// "a > b > c": the names of the groups from the root down to `g`.
std::string group_path(const view::detail::GraphData& d, int g) {
  std::string s;
  for (; g > 0; g = d.groups[static_cast<size_t>(g)].parent) s = d.groups[static_cast<size_t>(g)].name + (s.empty() ? "" : " > " + s);
  return s;
}

/// Greater -> NonZero -> Squeeze -> Gather -> Mul: a break at NonZero between two segments.
onnx::Model nonzero_model() {
  GraphBuilder b;
  auto x = b.input("x", ElemType::Float, 1);
  auto m = b.node("Greater", {x, b.float_scalar("thr", 0.0f)});
  auto nz = b.node("NonZero", {m});
  auto idx = b.node("Squeeze", {nz, b.int64s("ax0", {0})});
  auto picked = b.node("Gather", {x, idx}, {attr_int("axis", 0)});
  auto y = b.node("Mul", {picked, b.float_scalar("two", 2.0f)});
  b.output(y);
  return make_model(b.graph());
}

TEST(GraphView, TinyTransformerHasEveryNodeAndIsSelfContained) {
  onnx::Model m = onnx::load(model_path("tiny_transformer"));
  const std::string html = view::graph_html(m);
  expect_self_contained(html);
  const view::detail::GraphData d = view::detail::graph_data(m, nullptr);
  size_t nodes = 0, inputs = 0, outputs = 0;
  for (const auto& v : d.vertices) {
    nodes += v.kind == view::detail::VertexKind::Node || v.kind == view::detail::VertexKind::ConstantNode;
    inputs += v.kind == view::detail::VertexKind::Input;
    outputs += v.kind == view::detail::VertexKind::Output;
  }
  EXPECT_EQ(nodes, m.graph->nodes.size());
  EXPECT_EQ(outputs, m.graph->outputs.size());
  EXPECT_EQ(inputs, 1u);  // input_ids; the other graph inputs are initializers
  for (const auto& n : m.graph->nodes) EXPECT_NE(html.find(",n:\"" + n.name + "\""), std::string::npos) << n.label();
  EXPECT_NE(html.find("initializers (" + std::to_string(m.graph->initializers.size()) + ")"), std::string::npos);
  EXPECT_NE(html.find("no overlay"), std::string::npos);
  EXPECT_NE(html.find("var D={overlay:false"), std::string::npos);
  EXPECT_EQ(html, view::graph_html(m));
}

TEST(GraphView, TinyCnnWithItsCompiledOverlay) {
  onnx::Model m = onnx::load(model_path("tiny_cnn"));
  Value x = Value::tensor(random_array({1, 3, 32, 32}, float32, -1.0, 1.0, 7));
  onnx::Overlay ov = onnx::overlay(m, {x});
  ASSERT_FALSE(ov.segments.empty());
  const std::string html = view::graph_html(m, &ov, view::GraphViewOptions{"tiny <cnn>", "cpu"});
  expect_self_contained(html);
  EXPECT_NE(html.find("<title>tiny &lt;cnn&gt;</title>"), std::string::npos);
  EXPECT_NE(html.find("compiled for <b>cpu</b>"), std::string::npos);
  EXPECT_EQ(count_of(html, "<li class=\"seg\">"), ov.segments.size());
  const view::detail::GraphData d = view::detail::graph_data(m, &ov);
  // Every node ran in a segment; the nodes of each fused kernel are one group of their own.
  size_t kernels = 0;
  for (const auto& s : ov.segments) kernels += s.fused.size();
  ASSERT_EQ(d.fused.size(), kernels);
  for (const auto& n : m.graph->nodes) EXPECT_GE(vertex_of(m, d, n.name).segment, 0) << n.label();
  size_t k = 0;
  for (const auto& s : ov.segments)
    for (const auto& f : s.fused) {
      EXPECT_EQ(d.fused[k].text, f.str());
      EXPECT_NE(html.find(f.str()), std::string::npos) << f.str();
      for (const auto& label : f.nodes) {
        const auto* n = [&]() -> const onnx::Node* {
          for (const auto& node : m.graph->nodes)
            if (node.label() == label) return &node;
          return nullptr;
        }();
        ASSERT_NE(n, nullptr) << label;
        const auto& v = vertex_of(m, d, n->name);
        EXPECT_EQ(v.fused, static_cast<int>(k)) << label;
        EXPECT_EQ(d.groups[static_cast<size_t>(v.group)].fused, static_cast<int>(k)) << label;
        EXPECT_EQ(d.groups[static_cast<size_t>(v.group)].name, "kernel #" + std::to_string(k));
      }
      ++k;
    }
  EXPECT_EQ(html, view::graph_html(m, &ov, view::GraphViewOptions{"tiny <cnn>", "cpu"}));
}

TEST(GraphView, NonZeroBreakIsMarkedWithDistinctSegmentColorsAndItsTensor) {
  onnx::Model m = nonzero_model();
  onnx::CompileModelOptions co;
  co.eager_below = 0;
  Value x = Value::tensor(random_array({16}, float32, -1.0, 1.0, 3));
  onnx::Overlay ov = onnx::overlay(m, {x}, co);
  ASSERT_EQ(ov.segments.size(), 3u);
  ASSERT_EQ(ov.segments[1].kind, onnx::SegmentKind::Break);
  const std::string html = view::graph_html(m, &ov);
  expect_self_contained(html);
  EXPECT_EQ(count_of(html, "<li class=\"seg\">"), 3u);
  std::regex swatch("<li class=\"seg\"><span class=\"sw\" style=\"background:([^\"]+)\">");
  std::set<std::string> colors;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), swatch); it != std::sregex_iterator(); ++it)
    colors.insert((*it)[1].str());
  EXPECT_EQ(colors.size(), 3u);
  EXPECT_NE(html.find("<b>Break</b>"), std::string::npos);
  EXPECT_NE(html.find(escaped(ov.segments[1].reason)), std::string::npos);
  // The break's reason names the tensor as the model names it: NonZero reads Greater's output.
  const view::detail::GraphData d = view::detail::graph_data(m, &ov);
  EXPECT_EQ(d.break_tensors[1], std::vector<std::string>{"Greater_0:0"});
  EXPECT_TRUE(d.break_tensors[0].empty());
  EXPECT_NE(html.find("(tensor <code>Greater_0:0</code>)"), std::string::npos);
  EXPECT_EQ(vertex_of(m, d, "Greater_0").segment, 0);
  EXPECT_EQ(vertex_of(m, d, "NonZero_0").segment, 1);
  EXPECT_EQ(vertex_of(m, d, "Mul_0").segment, 2);
  // Attributes are shown in short form in the details data.
  EXPECT_NE(html.find("\"axis=0\""), std::string::npos);
}

TEST(GraphView, BreakTensorsFollowTheFormalNamesOfTheReason) {
  GraphBuilder b;
  auto x = b.input("x", ElemType::Float, 2);
  auto s = b.input("target_shape", ElemType::Int64, 1);
  auto r = b.node("Reshape", {x, s});
  auto u = b.node("CustomOp", {r, s});
  b.output(u);
  onnx::Model m = make_model(b.graph());
  onnx::Overlay ov;
  for (size_t p = 0; p < 2; ++p) {
    onnx::OverlaySegment seg;
    seg.start = p;
    seg.stop = p + 1;
    seg.kind = onnx::SegmentKind::Break;
    ov.segments.push_back(seg);
  }
  ov.segments[0].reason = "Reshape 'Reshape_0': needs the values of input 'shape' on the host";
  ov.segments[1].reason = "CustomOp 'CustomOp_0': needs the values of input 1 ('target_shape') on the host";
  const view::detail::GraphData d = view::detail::graph_data(m, &ov);
  EXPECT_EQ(d.break_tensors[0], std::vector<std::string>{"target_shape"});
  EXPECT_EQ(d.break_tensors[1], std::vector<std::string>{"target_shape"});
}

TEST(GraphView, OverlayMarksFusedAndHostFoldedNodesByExecutionOrder) {
  // File order differs from execution order: Relu comes first in the file but needs Neg's output.
  GraphBuilder b;
  auto x = b.input("x", ElemType::Float, 1);
  onnx::Graph g = *b.graph();
  onnx::Node relu{"r", "Relu", "", "", {"n_out"}, {"r_out"}, {}};
  onnx::Node neg{"n", "Neg", "", "", {x}, {"n_out"}, {}};
  onnx::Node shape{"s", "Shape", "", "", {"r_out"}, {"s_out"}, {}};
  g.nodes = {relu, neg, shape};
  onnx::ValueInfo o1, o2;
  o1.name = "r_out";
  o2.name = "s_out";
  g.outputs = {o1, o2};
  onnx::Model m = make_model(std::make_shared<onnx::Graph>(g));
  onnx::Overlay ov;
  onnx::OverlaySegment seg;
  seg.start = 0;
  seg.stop = 3;
  seg.start_node = "Neg 'n'";
  seg.stop_node = "Shape 's'";
  seg.kind = onnx::SegmentKind::Compiled;
  seg.compiled = true;
  seg.reason = "end of graph";
  onnx::FusedGroup fg;
  fg.nodes = {"Neg 'n'", "Relu 'r'"};
  seg.fused = {fg};
  ov.segments = {seg};
  ov.host_folded = {"Shape 's'"};
  const view::detail::GraphData d = view::detail::graph_data(m, &ov);
  EXPECT_EQ(vertex_of(m, d, "n").fused, 0);
  EXPECT_EQ(vertex_of(m, d, "r").fused, 0);
  EXPECT_EQ(vertex_of(m, d, "s").fused, -1);
  EXPECT_TRUE(vertex_of(m, d, "s").folded);
  EXPECT_FALSE(vertex_of(m, d, "n").folded);
  ASSERT_EQ(d.groups.size(), 2u);  // the root and the kernel
  EXPECT_EQ(vertex_of(m, d, "n").group, 1);
  EXPECT_EQ(vertex_of(m, d, "s").group, 0);
  const std::string html = view::graph_html(m, &ov);
  EXPECT_NE(html.find("t:\"Fused[Neg 'n', Relu 'r']\""), std::string::npos);
  EXPECT_NE(html.find("h:1"), std::string::npos);
  EXPECT_NE(html.find("[\"kernel #0\",0,0]"), std::string::npos);
}

TEST(GraphView, ScopesOfExporterNames) {
  using view::detail::scope_of;
  EXPECT_EQ(scope_of("/model/layers.0/self_attn/q_proj/MatMul"),
            (std::vector<std::string>{"model", "layers.0", "self_attn", "q_proj"}));
  EXPECT_EQ(scope_of("MatMul_3"), std::vector<std::string>{});
  EXPECT_EQ(scope_of("/MatMul"), std::vector<std::string>{});
  EXPECT_EQ(scope_of("a//b/"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(scope_of(""), std::vector<std::string>{});
}

TEST(GraphView, GroupsFollowScopesAndKernelsSitInTheirCommonScope) {
  onnx::Model m = scoped_transformer(2, 2);
  onnx::Overlay ov = scoped_overlay(m);
  const view::detail::GraphData d = view::detail::graph_data(m, &ov);
  for (size_t g = 1; g < d.groups.size(); ++g) EXPECT_LT(d.groups[g].parent, static_cast<int>(g));
  EXPECT_EQ(d.groups[0].parent, -1);
  const auto& q = vertex_of(m, d, "/model/layers.1/self_attn/q_proj/MatMul");
  EXPECT_EQ(group_path(d, q.group), "model > layers.1 > self_attn > q_proj");
  EXPECT_EQ(q.kind, view::detail::VertexKind::Node);
  EXPECT_EQ(vertex_of(m, d, "/model/layers.0/input_layernorm/Constant0").kind, view::detail::VertexKind::ConstantNode);
  // Each GELU is a fused kernel, a group inside its scope.
  ASSERT_EQ(d.fused.size(), 2u);
  const auto& tanh = vertex_of(m, d, "/model/layers.0/mlp/act/Tanh");
  ASSERT_GE(tanh.fused, 0);
  EXPECT_EQ(group_path(d, tanh.group), "model > layers.0 > mlp > act > kernel #" + std::to_string(tanh.fused));
  // An initializer sits in the innermost scope of its readers.
  for (const auto& v : d.vertices) {
    if (v.kind != view::detail::VertexKind::Initializer) continue;
    if (m.graph->initializers[v.ref].first == "model.layers.1.self_attn.q_proj.weight") {
      EXPECT_EQ(group_path(d, v.group), "model > layers.1 > self_attn > q_proj");
    }
  }
  // A kernel whose nodes lie in two scopes is a group in their common scope.
  onnx::Overlay across = ov;
  across.segments[0].fused = {onnx::FusedGroup{{"Add '/model/layers.0/Add'", "MatMul '/model/layers.0/mlp/fc2/MatMul'"}, "k", }};
  const view::detail::GraphData d2 = view::detail::graph_data(m, &across);
  const auto& add = vertex_of(m, d2, "/model/layers.0/Add");
  EXPECT_EQ(add.fused, 0);
  EXPECT_EQ(group_path(d2, add.group), "model > layers.0 > kernel #0");
  EXPECT_EQ(add.group, vertex_of(m, d2, "/model/layers.0/mlp/fc2/MatMul").group);
  // The NonZero of layer 1 is a break reading the graph input.
  const auto& nz = vertex_of(m, d, "/model/layers.1/self_attn/mask/NonZero");
  ASSERT_GE(nz.segment, 0);
  EXPECT_EQ(ov.segments[static_cast<size_t>(nz.segment)].kind, onnx::SegmentKind::Break);
  EXPECT_EQ(d.break_tensors[static_cast<size_t>(nz.segment)], std::vector<std::string>{"attention_mask"});
}

TEST(GraphView, TenThousandScopedNodes) {
  onnx::Model m = scoped_transformer(105);
  ASSERT_GE(m.graph->nodes.size(), 10000u);
  onnx::Overlay ov = scoped_overlay(m);
  const view::detail::GraphData d = view::detail::graph_data(m, &ov);
  size_t initializers = 0;
  for (const auto& v : d.vertices) initializers += v.kind == view::detail::VertexKind::Initializer;
  EXPECT_EQ(initializers, m.graph->initializers.size());
  EXPECT_EQ(d.fused.size(), 105u);
  // The root; model, embed_tokens, norm, lm_head; per layer the layer, its two norms, self_attn
  // with q/k/v/o_proj, mlp with fc1, act and fc2 (12); mask in every 10th layer; a GELU kernel per layer.
  EXPECT_EQ(d.groups.size(), 1u + 4 + 105 * 12 + 10 + 105);
  const std::string html = view::graph_html(m, &ov);
  expect_self_contained(html);
  EXPECT_EQ(html, view::graph_html(m, &ov));
}

TEST(GraphView, HostileNamesAreEscapedEverywhere) {
  GraphBuilder b;
  const std::string evil_input = "in<\"&'>";
  auto x = b.input(evil_input, ElemType::Float, 2);
  onnx::Graph g = *b.graph();
  onnx::Node n{"<script>alert(\"x&y\")</script>", "Relu", "</script>", "", {x}, {"out</script><b>"}, {}};
  onnx::Attribute a;
  a.name = "note";
  a.type = onnx::Attribute::Type::String;
  a.s = "</script><script>bad()</script>\xE2\x80\xA8";
  n.attributes = {a};
  g.nodes = {n};
  onnx::ValueInfo o;
  o.name = "out</script><b>";
  g.outputs = {o};
  onnx::ValueInfo vi;
  vi.name = o.name;
  vi.type.kind = onnx::TypeInfo::Kind::Tensor;
  vi.type.elem_type = ElemType::Float;
  vi.type.shape = std::vector<onnx::Dim>{{2, ""}, {-1, "N<1>"}};
  g.value_info = {vi};
  onnx::Model m = make_model(std::make_shared<onnx::Graph>(g));
  onnx::Overlay ov;
  onnx::OverlaySegment seg;
  seg.stop = 1;
  seg.start_node = n.label();
  seg.reason = n.label() + ": needs the values of input 1 ('" + evil_input + "') on the host";
  ov.segments = {seg};
  const std::string html = view::graph_html(m, &ov, "<i>t</i>");
  expect_self_contained(html);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_EQ(html.find("<b>\""), std::string::npos);
  EXPECT_EQ(html.find("<i>t</i>"), std::string::npos);
  EXPECT_EQ(html.find("\xE2\x80\xA8"), std::string::npos);
  // In the legend names are HTML-escaped.
  EXPECT_NE(html.find(escaped("Relu '<script>alert(\"x&y\")</script>'")), std::string::npos);
  EXPECT_NE(html.find("<code>" + escaped(evil_input) + "</code>"), std::string::npos);
  EXPECT_NE(html.find("\"in\\u003c\\\"\\u0026'\\u003e\""), std::string::npos);
  // In the script data '<', '>' and '&' are \u escapes, quotes backslashed.
  EXPECT_NE(html.find("\\u003cscript\\u003ealert(\\\"x\\u0026y\\\")"), std::string::npos);
  EXPECT_NE(html.find("\\u2028"), std::string::npos);
  EXPECT_NE(html.find("tensor(float)[2,N\\u003c1\\u003e]"), std::string::npos);
}

TEST(GraphView, ThreeThousandNodeDiamondChain) {
  GraphBuilder b;
  std::string prev = b.input("x", ElemType::Float, 1);
  for (int i = 0; i < 1000; ++i) {
    auto l = b.node("Relu", {prev});
    auto r = b.node("Neg", {prev});
    prev = b.node("Add", {l, r});
  }
  b.output(prev);
  onnx::Model m = make_model(b.graph());
  ASSERT_EQ(m.graph->nodes.size(), 3000u);
  const view::detail::GraphData d = view::detail::graph_data(m, nullptr);
  EXPECT_EQ(d.vertices.size(), 3002u);
  EXPECT_EQ(d.edges.size(), 4001u);
  EXPECT_EQ(d.groups.size(), 1u);
  const std::string html = view::graph_html(m);
  EXPECT_NE(html.find("n:\"Add_999\""), std::string::npos);
  EXPECT_EQ(html, view::graph_html(m));

  // An overlay over all of it: one segment per 100 positions.
  onnx::Overlay ov;
  for (size_t s = 0; s < 30; ++s) {
    onnx::OverlaySegment seg;
    seg.start = s * 100;
    seg.stop = s * 100 + 100;
    seg.kind = s % 2 ? onnx::SegmentKind::Break : onnx::SegmentKind::Compiled;
    ov.segments.push_back(seg);
  }
  const std::string colored = view::graph_html(m, &ov);
  std::regex swatch("<li class=\"seg\"><span class=\"sw\" style=\"background:([^\"]+)\">");
  std::set<std::string> colors;
  for (auto it = std::sregex_iterator(colored.begin(), colored.end(), swatch); it != std::sregex_iterator(); ++it)
    colors.insert((*it)[1].str());
  EXPECT_EQ(colors.size(), 30u);
}

TEST(GraphView, CyclicGraphStillDraws) {
  GraphBuilder b;
  auto x = b.input("x", ElemType::Float, 1);
  onnx::Graph g = *b.graph();
  g.nodes = {onnx::Node{"a", "Add", "", "", {x, "b_out"}, {"a_out"}, {}},
             onnx::Node{"b", "Relu", "", "", {"a_out"}, {"b_out"}, {}}};
  onnx::Model m = make_model(std::make_shared<onnx::Graph>(g));
  onnx::Overlay ov;
  onnx::OverlaySegment seg;
  seg.stop = 2;
  ov.segments = {seg};
  const view::detail::GraphData d = view::detail::graph_data(m, &ov);
  EXPECT_EQ(vertex_of(m, d, "a").segment, 0);
  EXPECT_EQ(vertex_of(m, d, "b").segment, 0);
  EXPECT_EQ(d.edges.size(), 3u);  // x -> a, a -> b, b -> a
  const std::string html = view::graph_html(m, &ov);
  EXPECT_NE(html.find("o:\"Add\",n:\"a\""), std::string::npos);
  EXPECT_NE(html.find("o:\"Relu\",n:\"b\""), std::string::npos);
}

TEST(GraphView, WritesTheFileAndNamesThePathOnFailure) {
  onnx::Model m = nonzero_model();
  const fs::path dir = fs::temp_directory_path() / ("smelt_view_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "g.html").string();
  view::write_graph_html(path, m, nullptr, "t");
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), view::graph_html(m, nullptr, "t"));
  fs::remove_all(dir);
  const std::string bad = (dir / "missing" / "g.html").string();
  EXPECT_THROW_MSG(view::write_graph_html(bad, m), Error, "write_graph_html: cannot write '" + bad + "'");
  onnx::Model empty;
  EXPECT_THROW_MSG(view::graph_html(empty), InvalidArgument, "graph_html: the model has no graph");
}

}  // namespace
}  // namespace smelt::test
