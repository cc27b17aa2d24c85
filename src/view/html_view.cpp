// The offline HTML graph view: the page skeleton, the graph data it draws and the overlay legend.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <type_traits>

#include "smelt/errors.h"
#include "smelt/view.h"
#include "src/view/graph_data.h"
#include "src/view/page_assets.h"

namespace smelt::view {
namespace {

using onnx::Attribute;
using onnx::Graph;
using onnx::Node;

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 8);
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

/// A JSON string literal that is also safe inside a <script> element: no '<', '>' or '&' (so no
/// "</script>"), no raw control characters and no U+2028/U+2029 (line breaks to older JS).
std::string js_string(const std::string& s) {
  std::string out = "\"";
  char buf[8];
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(s[i + 2]) == 0xA8 || static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
      out += static_cast<unsigned char>(s[i + 2]) == 0xA8 ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string js_strings(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + js_string(v[i]);
  return out + "]";
}

/// At most `n` bytes of `s` without cutting a UTF-8 sequence, with "…" when shortened.
std::string clip(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  size_t end = n;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return s.substr(0, end) + "\xE2\x80\xA6";
}

template <class T>
std::string list_short(const std::vector<T>& v, size_t shown) {
  std::string s = "[";
  for (size_t i = 0; i < v.size() && i < shown; ++i) {
    if (i) s += ", ";
    if constexpr (std::is_same_v<T, std::string>) s += "\"" + clip(v[i], 24) + "\"";
    else if constexpr (std::is_floating_point_v<T>) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v[i]));
      s += buf;
    } else s += std::to_string(v[i]);
  }
  if (v.size() > shown) s += ", ... (" + std::to_string(v.size()) + ")";
  return s + "]";
}

/// "axis=1", "perm=[0, 2, 1]", "value=tensor(float)[3]", "then_branch=graph 'g' (4 nodes)".
std::string attribute_text(const Attribute& a) {
  std::string v;
  char buf[32];
  switch (a.type) {
    case Attribute::Type::Float: std::snprintf(buf, sizeof buf, "%g", static_cast<double>(a.f)); v = buf; break;
    case Attribute::Type::Int: v = std::to_string(a.i); break;
    case Attribute::Type::String: v = "\"" + clip(a.s, 48) + "\""; break;
    case Attribute::Type::Tensor:
    case Attribute::Type::SparseTensor: v = a.t.describe(); break;
    case Attribute::Type::Graph:
      v = a.g ? "graph '" + a.g->name + "' (" + std::to_string(a.g->nodes.size()) + " nodes)" : "graph";
      break;
    case Attribute::Type::TypeProto: v = a.tp.to_string(); break;
    case Attribute::Type::Floats: v = list_short(a.floats, 8); break;
    case Attribute::Type::Ints: v = list_short(a.ints, 8); break;
    case Attribute::Type::Strings: v = list_short(a.strings, 6); break;
    case Attribute::Type::Tensors: v = std::to_string(a.tensors.size()) + " tensors"; break;
    case Attribute::Type::Graphs: v = std::to_string(a.graphs.size()) + " graphs"; break;
    case Attribute::Type::SparseTensors: v = std::to_string(a.tensors.size()) + " sparse tensors"; break;
    case Attribute::Type::TypeProtos: v = std::to_string(a.type_protos.size()) + " types"; break;
    case Attribute::Type::Undefined: v = "?"; break;
  }
  if (!a.ref_attr_name.empty()) v = "@" + a.ref_attr_name;
  return a.name + "=" + v;
}

/// A distinct color per segment: hues a golden angle apart.
std::string segment_color(size_t k) {
  char buf[48];
  const double hue = std::fmod(static_cast<double>(k) * 137.508, 360.0);
  std::snprintf(buf, sizeof buf, "hsl(%.1f,70%%,%d%%)", hue, 78 - static_cast<int>(k / 360 % 3) * 8);
  return buf;
}

const char* kind_name(onnx::SegmentKind k) {
  switch (k) {
    case onnx::SegmentKind::Compiled: return "Compiled";
    case onnx::SegmentKind::EagerSmall: return "EagerSmall";
    case onnx::SegmentKind::Break: return "Break";
  }
  return "?";
}

using detail::VertexKind;

/// "var D={...};": the data the page's script draws (see kPageScript). Vertices are objects with
/// short keys, defaults left out: k kind (0 input, 1 node, 2 output, 3 Constant node,
/// 4 initializer; default 1), o op type, n name, g group (default 0), s segment and f fused kernel
/// (default -1), h host-folded, d domain, i/u input and output tensors, a attributes. Groups are
/// [name, parent, fused kernel or -1]; E is the edges, flat (producer, consumer) pairs.
std::string page_data(const onnx::Model& model, const onnx::Overlay* overlay, const detail::GraphData& d,
                      const std::string& stats) {
  const Graph& g = *model.graph;
  std::string out;
  out.reserve(d.vertices.size() * 220 + d.edges.size() * 12 + 4096);
  out += "var D={overlay:" + std::string(overlay ? "true" : "false") + ",stats:" + js_string(stats) + ",\nV:[";
  for (size_t k = 0; k < d.vertices.size(); ++k) {
    const detail::Vertex& v = d.vertices[k];
    std::string r = k ? ",\n{" : "\n{";
    switch (v.kind) {
      case VertexKind::Input: {
        const std::string& name = g.inputs[v.ref].name;
        r += "k:0,o:\"input\",n:" + js_string(name) + ",u:[" + js_string(name) + "]";
        break;
      }
      case VertexKind::Output: {
        const std::string& name = g.outputs[v.ref].name;
        r += "k:2,o:\"output\",n:" + js_string(name) + ",i:[" + js_string(name) + "]";
        break;
      }
      case VertexKind::Initializer: {
        const std::string& name = g.initializers[v.ref].first;
        r += "k:4,o:\"initializer\",n:" + js_string(name) + ",u:[" + js_string(name) + "]";
        break;
      }
      case VertexKind::Node:
      case VertexKind::ConstantNode: {
        const Node& n = g.nodes[v.ref];
        std::vector<std::string> attrs;
        for (const auto& a : n.attributes) attrs.push_back(attribute_text(a));
        r += std::string(v.kind == VertexKind::ConstantNode ? "k:3," : "") + "o:" + js_string(n.op_type) +
             ",n:" + js_string(n.name) + ",i:" + js_strings(n.inputs) + ",u:" + js_strings(n.outputs);
        if (!attrs.empty()) r += ",a:" + js_strings(attrs);
        if (!n.domain.empty()) r += ",d:" + js_string(n.domain);
        break;
      }
    }
    if (v.group) r += ",g:" + std::to_string(v.group);
    if (v.segment >= 0) r += ",s:" + std::to_string(v.segment);
    if (v.fused >= 0) r += ",f:" + std::to_string(v.fused);
    if (v.folded) r += ",h:1";
    out += r + "}";
  }
  out += "],\nG:[";
  for (size_t k = 0; k < d.groups.size(); ++k)
    out += (k ? ",[" : "[") + js_string(d.groups[k].name) + "," + std::to_string(d.groups[k].parent) + "," +
           std::to_string(d.groups[k].fused) + "]";
  out += "],\nE:[";
  for (size_t k = 0; k < d.edges.size(); ++k)
    out += (k ? "," : "") + std::to_string(d.edges[k].first) + "," + std::to_string(d.edges[k].second);
  out += "],\nS:[";
  if (overlay)
    for (size_t k = 0; k < overlay->segments.size(); ++k) {
      const auto& s = overlay->segments[k];
      out += std::string(k ? ",\n" : "\n") + "{k:\"" + kind_name(s.kind) + "\",c:\"" + segment_color(k) +
             "\",p:" + js_string(std::to_string(s.start) + ".." + std::to_string(s.stop - 1)) +
             ",r:" + js_string(s.reason) + ",hv:" + js_strings(s.host_values) + ",x:" + js_strings(d.break_tensors[k]) +
             "}";
    }
  out += "],\nF:[";
  for (size_t k = 0; k < d.fused.size(); ++k)
    out += std::string(k ? ",\n" : "\n") + "{s:" + std::to_string(d.fused[k].segment) + ",t:" + js_string(d.fused[k].text) +
           ",e:" + js_string(d.fused[k].kernel) + "}";
  // Declared types by tensor name, for the details panel.
  std::map<std::string, std::string> types;
  for (const auto& [name, v] : g.initializers) types[name] = "initializer " + v.describe();
  for (const auto* list : {&g.value_info, &g.inputs, &g.outputs})
    for (const auto& vi : *list)
      if (!types.count(vi.name)) types[vi.name] = vi.type.to_string();
  out += "],\nT:{";
  bool first = true;
  for (const auto& [name, type] : types) {
    out += (first ? "\n" : ",\n") + js_string(name) + ":" + js_string(type);
    first = false;
  }
  return out + "}};\n";
}

/// The panel's overview: model facts, the overlay's segments and marks, the initializers.
std::string overview(const onnx::Model& model, const onnx::Overlay* overlay, const detail::GraphData& d,
                     const GraphViewOptions& options) {
  const Graph& g = *model.graph;
  const size_t inputs = static_cast<size_t>(std::count_if(d.vertices.begin(), d.vertices.end(), [](const auto& v) {
    return v.kind == VertexKind::Input;
  }));
  std::string head = "<div id=\"overview\"><h2>Model</h2><p>" + std::to_string(g.nodes.size()) + " nodes, " +
                     std::to_string(inputs) + " inputs, " + std::to_string(g.outputs.size()) + " outputs, " +
                     std::to_string(g.initializers.size()) + " initializers, " + std::to_string(d.groups.size() - 1) +
                     " groups";
  std::string opsets;
  for (const auto& o : model.opsets)
    opsets += (opsets.empty() ? "" : ", ") + (o.domain.empty() ? std::string("ai.onnx") : o.domain) + " " +
              std::to_string(o.version);
  if (!opsets.empty()) head += "; opsets " + html_escape(opsets);
  if (!model.producer_name.empty())
    head += "; producer " + html_escape(model.producer_name + " " + model.producer_version);
  head += "</p>\n<div id=\"legend\">";
  if (overlay) {
    head += "<b>segments</b> (" + std::to_string(overlay->segments.size()) + ")" +
            (options.device.empty() ? "" : " compiled for <b>" + html_escape(options.device) + "</b>") + "<ul>";
    for (size_t k = 0; k < overlay->segments.size(); ++k) {
      const auto& s = overlay->segments[k];
      head += "<li class=\"seg\"><span class=\"sw\" style=\"background:" + segment_color(k) + "\"></span>#" +
              std::to_string(k) + " <b>" + kind_name(s.kind) + "</b> positions " + std::to_string(s.start) + ".." +
              std::to_string(s.stop - 1) + ": " + html_escape(s.start_node) +
              (s.stop - s.start > 1 ? " .. " + html_escape(s.stop_node) : "") + " &mdash; " + html_escape(s.reason);
      if (!d.break_tensors[k].empty()) {
        std::string t;
        for (const auto& name : d.break_tensors[k]) t += (t.empty() ? "" : ", ") + ("<code>" + html_escape(name) + "</code>");
        head += " (tensor" + std::string(d.break_tensors[k].size() > 1 ? "s " : " ") + t + ")";
      }
      if (!s.host_values.empty()) {
        std::string hv;
        for (const auto& h : s.host_values) hv += (hv.empty() ? "" : ", ") + h;
        head += " (static host values: " + html_escape(hv) + ")";
      }
      if (!s.fused.empty()) head += " (" + std::to_string(s.fused.size()) + " fused kernels)";
      head += "</li>";
    }
    head += "</ul>marks: <span class=\"sw\" style=\"border:3px solid #c00\"></span>break node "
            "<span class=\"sw\" style=\"border:2px dashed #224\"></span>fused kernel (a group) "
            "<span class=\"sw\" style=\"background:#d4d4d4\"></span>host-folded (known at trace time); a closed "
            "group's bar shows its nodes' segments, a red <b style=\"color:#c00\">!</b> a break inside";
  } else {
    head += "no overlay: <code>smelt view MODEL --compile</code> colors the nodes by compiled segment";
  }
  head += "</div>\n";
  if (!g.initializers.empty()) {
    constexpr size_t kListed = 500;
    head += "<details><summary>initializers (" + std::to_string(g.initializers.size()) + ")</summary><ul>";
    for (size_t i = 0; i < g.initializers.size() && i < kListed; ++i)
      head += "<li><code>" + html_escape(g.initializers[i].first) + "</code> " +
              html_escape(g.initializers[i].second.describe()) + "</li>";
    if (g.initializers.size() > kListed)
      head += "<li>... " + std::to_string(g.initializers.size() - kListed) + " more</li>";
    head += "</ul></details>\n";
  }
  head += "<h3>Controls</h3><ul><li>drag to pan, wheel to zoom, <b>fit</b> (key f) shows everything; the "
          "minimap (bottom right) moves the view</li><li>click a closed group to open it, an open group's "
          "header to close it</li><li>click a node for its details; hover an edge for its tensors</li><li>search "
          "(key /) by node name, op type or tensor name; Enter or a click on a result opens its groups</li>"
          "<li><b>constants</b> shows Constant nodes and initializers next to their consumers</li></ul></div>\n";
  return head;
}

}  // namespace

std::string graph_html(const onnx::Model& model, const onnx::Overlay* overlay, const GraphViewOptions& options) {
  const detail::GraphData d = detail::graph_data(model, overlay);
  const Graph& g = *model.graph;
  const std::string heading = options.title.empty() ? (g.name.empty() ? "ONNX graph" : g.name) : options.title;
  const std::string stats = std::to_string(g.nodes.size()) + " nodes";
  const std::string data = page_data(model, overlay, d, stats);
  const std::string panel = overview(model, overlay, d, options);

  std::string html;
  html.reserve(data.size() + panel.size() + 32768);
  html += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>";
  html += html_escape(heading);
  html += "</title>\n<style>";
  html += detail::kPageStyle;
  html += "</style></head>\n<body><div id=\"main\">\n<div id=\"bar\"><h1>" + html_escape(heading) +
          "</h1><span id=\"stats\"></span><input id=\"q\" type=\"search\" placeholder=\"search: node name, op type, "
          "tensor\" autocomplete=\"off\"><button id=\"fit\" title=\"fit to screen (f)\">fit</button><button "
          "id=\"expand\">expand all</button><button id=\"collapse\">collapse all</button><label><input "
          "type=\"checkbox\" id=\"consts\"> constants</label></div>\n";
  html += "<div id=\"view\"><canvas id=\"graph\"></canvas><div id=\"tip\" hidden></div><canvas id=\"mini\" width=\"220\" "
          "height=\"160\"></canvas></div>\n</div>\n<div id=\"panel\"><pre id=\"errors\" hidden></pre><pre "
          "id=\"selftest\" hidden></pre><div id=\"results\"></div><div id=\"details\"><p>Click a node or a group for "
          "its details.</p></div>\n";
  html += panel;
  html += "</div>\n<script>\n";
  html += data;
  html += detail::kPageScript;
  html += "</script></body></html>\n";
  return html;
}

std::string graph_html(const onnx::Model& model, const onnx::Overlay* overlay, const std::string& title) {
  return graph_html(model, overlay, GraphViewOptions{title, ""});
}

void write_graph_html(const std::string& path, const onnx::Model& model, const onnx::Overlay* overlay,
                      const GraphViewOptions& options) {
  const std::string html = graph_html(model, overlay, options);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error("write_graph_html: cannot write '" + path + "'");
  f.write(html.data(), static_cast<std::streamsize>(html.size()));
  f.close();
  if (!f) throw Error("write_graph_html: cannot write '" + path + "' (write failed)");
}

void write_graph_html(const std::string& path, const onnx::Model& model, const onnx::Overlay* overlay,
                      const std::string& title) {
  write_graph_html(path, model, overlay, GraphViewOptions{title, ""});
}

}  // namespace smelt::view
