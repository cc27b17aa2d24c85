// The offline HTML graph view: escaping, self-containment, overlay colors and marks, large graphs.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <unistd.h>

#include "smelt/onnx.h"
#include "smelt/view.h"
#include "tests/onnx/model_builder.h"
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

/// The <rect .../> of the node whose hover title is `label` (as Node::label() spells it).
std::string rect_of(const std::string& html, const std::string& label) {
  const std::string key = "><title>" + escaped(label) + "</title><rect";
  size_t p = html.find(key);
  if (p == std::string::npos) return "";
  size_t g = html.rfind("<g ", p);
  size_t end = html.find("/>", p);
  return html.substr(g, end - g);
}

void expect_self_contained(const std::string& html) {
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(count_of(html, "<script"), 1u);
  EXPECT_EQ(count_of(html, "</script>"), 1u);
  EXPECT_NE(html.find("<svg id=\"graph\""), std::string::npos);
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

TEST(GraphView, TinyTransformerDrawsEveryNodeAndIsSelfContained) {
  onnx::Model m = onnx::load(model_path("tiny_transformer"));
  const std::string html = view::graph_html(m);
  expect_self_contained(html);
  for (const auto& n : m.graph->nodes) EXPECT_NE(html.find("<title>" + escaped(n.label()) + "</title>"), std::string::npos) << n.label();
  EXPECT_EQ(count_of(html, "<g class=\"n"), m.graph->nodes.size() + m.graph->outputs.size() +
                                                  [&] {
                                                    size_t k = 0;
                                                    std::set<std::string> inits;
                                                    for (const auto& [name, v] : m.graph->initializers) inits.insert(name);
                                                    for (const auto& in : m.graph->inputs) k += !inits.count(in.name);
                                                    return k;
                                                  }());
  // Initializers are summarized, not drawn: their names appear in the details data only.
  if (!m.graph->initializers.empty()) {
    EXPECT_NE(html.find("initializers (" + std::to_string(m.graph->initializers.size()) + ")"), std::string::npos);
  }
  EXPECT_NE(html.find("no overlay"), std::string::npos);
  EXPECT_EQ(html, view::graph_html(m));
}

TEST(GraphView, TinyCnnWithItsCompiledOverlay) {
  onnx::Model m = onnx::load(model_path("tiny_cnn"));
  Value x = Value::tensor(random_array({1, 3, 32, 32}, float32, -1.0, 1.0, 7));
  onnx::Overlay ov = onnx::overlay(m, {x});
  ASSERT_FALSE(ov.segments.empty());
  const std::string html = view::graph_html(m, &ov, "tiny <cnn>");
  expect_self_contained(html);
  EXPECT_NE(html.find("<title>tiny &lt;cnn&gt;</title>"), std::string::npos);
  EXPECT_EQ(count_of(html, "<li class=\"seg\">"), ov.segments.size());
  for (const auto& n : m.graph->nodes) EXPECT_NE(rect_of(html, n.label()), "") << n.label();
  // Every node of the fused kernels is marked (unless the build fell back to unfused kernels).
  for (const auto& s : ov.segments)
    for (const auto& f : s.fused) {
      for (const auto& label : f.nodes) EXPECT_NE(rect_of(html, label).find("class=\"fus\""), std::string::npos) << label;
      std::string in_js = f.str();
      EXPECT_NE(html.find(in_js), std::string::npos) << in_js;
    }
  EXPECT_EQ(html, view::graph_html(m, &ov, "tiny <cnn>"));
}

TEST(GraphView, NonZeroBreakIsMarkedWithDistinctSegmentColors) {
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
  // The break node is outlined; its neighbors are filled with their own segments' colors.
  EXPECT_NE(rect_of(html, "NonZero 'NonZero_0'").find("class=\"brk\""), std::string::npos);
  EXPECT_EQ(rect_of(html, "Greater 'Greater_0'").find("class=\"brk\""), std::string::npos);
  std::vector<std::string> fills;
  for (const char* label : {"Greater 'Greater_0'", "NonZero 'NonZero_0'", "Mul 'Mul_0'"}) {
    std::string r = rect_of(html, label);
    size_t p = r.find("fill=\"");
    ASSERT_NE(p, std::string::npos) << label;
    fills.push_back(r.substr(p + 6, r.find('"', p + 6) - p - 6));
  }
  EXPECT_TRUE(colors.count(fills[0]) && colors.count(fills[1]) && colors.count(fills[2]));
  EXPECT_NE(fills[0], fills[1]);
  EXPECT_NE(fills[1], fills[2]);
  // Attributes are shown in short form in the details data.
  EXPECT_NE(html.find("\"axis=0\""), std::string::npos);
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
  const std::string html = view::graph_html(m, &ov);
  EXPECT_NE(rect_of(html, "Neg 'n'").find("class=\"fus\""), std::string::npos);
  EXPECT_NE(rect_of(html, "Relu 'r'").find("class=\"fus\""), std::string::npos);
  EXPECT_EQ(rect_of(html, "Shape 's'").find("class=\"fus\""), std::string::npos);
  EXPECT_NE(rect_of(html, "Shape 's'").find("<g class=\"n fold\""), std::string::npos);
  EXPECT_NE(html.find("f:\"Fused[Neg 'n', Relu 'r']\""), std::string::npos);
  EXPECT_NE(html.find("h:1"), std::string::npos);
  // The layout follows the data: Neg sits above Relu although the file lists Relu first.
  auto y_of = [&](const std::string& label) {
    std::string r = rect_of(html, label);
    std::smatch mt;
    EXPECT_TRUE(std::regex_search(r, mt, std::regex("translate\\((\\d+) (\\d+)\\)")));
    return std::stoi(mt[2].str());
  };
  EXPECT_LT(y_of("Neg 'n'"), y_of("Relu 'r'"));
  EXPECT_LT(y_of("Relu 'r'"), y_of("Shape 's'"));
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
  const std::string html = view::graph_html(m, nullptr, "<i>t</i>");
  expect_self_contained(html);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_EQ(html.find("<b>\""), std::string::npos);
  EXPECT_EQ(html.find("<i>t</i>"), std::string::npos);
  EXPECT_EQ(html.find("\xE2\x80\xA8"), std::string::npos);
  EXPECT_NE(html.find(escaped("Relu '<script>alert(\"x&y\")</script>'")), std::string::npos);
  EXPECT_NE(html.find(escaped(evil_input)), std::string::npos);
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
  const std::string html = view::graph_html(m);
  EXPECT_EQ(count_of(html, "<g class=\"n"), 3002u);
  EXPECT_EQ(count_of(html, "<path class=\"e\""), 4001u);
  EXPECT_NE(html.find("<title>Add &#39;Add_999&#39;</title>"), std::string::npos);
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
  const std::string html = view::graph_html(m, &ov);
  EXPECT_NE(html.find("<title>Add &#39;a&#39;</title>"), std::string::npos);
  EXPECT_NE(html.find("<title>Relu &#39;b&#39;</title>"), std::string::npos);
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
