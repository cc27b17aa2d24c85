// The offline HTML graph view: a layered SVG drawing of an ONNX graph, colored by an overlay.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "smelt/errors.h"
#include "smelt/view.h"
#include "src/onnx/executor.h"
#include "src/view/layout.h"

namespace smelt::view {
namespace {

using onnx::Attribute;
using onnx::Graph;
using onnx::Node;

constexpr int kBoxW = 160, kBoxH = 44, kGapX = 24, kGapY = 60, kMargin = 20;

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

enum class VKind : uint8_t { Input, Node, Output };

/// What the overlay says about each node of the graph (by node index).
struct NodeMarks {
  std::vector<int> segment;        // -1: no segment
  std::vector<std::string> fused;  // FusedGroup::str(), "" when not fused
  std::vector<char> folded;
};

NodeMarks mark_nodes(const Graph& g, const onnx::Overlay& ov) {
  const size_t n = g.nodes.size();
  NodeMarks m{std::vector<int>(n, -1), std::vector<std::string>(n), std::vector<char>(n, 0)};
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
      const std::string text = f.str();
      for (const auto& label : f.nodes) {
        auto it = positions_of.find(label);
        if (it == positions_of.end()) continue;
        for (size_t p : it->second) {
          if (p < s.start || p >= s.stop || !m.fused[order[p]].empty()) continue;
          m.fused[order[p]] = text;
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

constexpr const char* kStyle = R"CSS(
body{margin:0;font:13px system-ui,sans-serif;color:#222;display:flex;height:100vh}
#main{flex:1;overflow:auto}
#head{padding:8px 14px;border-bottom:1px solid #ddd;background:#fafafa}
#head h1{font-size:16px;margin:0 0 4px}
#legend ul{list-style:none;padding:0;margin:4px 0}
#legend li{margin:2px 0}
.sw{display:inline-block;width:14px;height:14px;border:1px solid #777;vertical-align:middle;margin-right:6px}
#panel{width:360px;border-left:1px solid #ccc;overflow:auto;padding:8px 12px;background:#fcfcfc}
#panel h2{font-size:15px;margin:4px 0}
#panel ul{margin:2px 0 8px;padding-left:18px}
code{font-size:12px}
svg text{font-size:12px;pointer-events:none;text-anchor:middle}
svg text.nm{font-size:10px;fill:#444}
g.n{cursor:pointer}
g.n rect{stroke:#556;stroke-width:1}
g.n rect.brk{stroke:#c00;stroke-width:4}
g.n rect.fus{stroke:#224;stroke-width:2;stroke-dasharray:6 3}
g.n.fold text{fill:#888}
g.n.sel rect{stroke:#06f;stroke-width:4}
g.io rect{rx:20}
path.e{fill:none;stroke:#8a8fa0;stroke-width:1.3}
path.e:hover{stroke:#e60;stroke-width:3.5}
)CSS";

constexpr const char* kScript = R"JS(
(function(){
var P=document.getElementById('panel'),sel=null;
function esc(s){return String(s).replace(/[&<>"']/g,function(c){return{'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c];});}
function names(v){if(!v||!v.length)return'<i>none</i>';return'<ul>'+v.map(function(x){
  if(!x)return'<li><i>(omitted)</i></li>';var t=T[x]||'';
  return'<li><code>'+esc(x)+'</code>'+(t?' '+esc(t):'')+'</li>';}).join('')+'</ul>';}
document.getElementById('graph').addEventListener('click',function(e){
  var g=e.target.closest?e.target.closest('g.n'):null;if(!g)return;
  if(sel)sel.classList.remove('sel');sel=g;g.classList.add('sel');
  var d=N[+g.getAttribute('data-i')],h='<h2>'+esc(d.o)+'</h2>';
  h+='<p>name: <code>'+esc(d.n)+'</code>'+(d.d?'<br>domain: <code>'+esc(d.d)+'</code>':'')+'</p>';
  h+='<b>inputs</b>'+names(d.i)+'<b>outputs</b>'+names(d.u);
  if(d.a&&d.a.length)h+='<b>attributes</b><ul>'+d.a.map(function(x){return'<li><code>'+esc(x)+'</code></li>';}).join('')+'</ul>';
  if(d.s)h+='<p><b>segment</b> '+esc(d.s)+'</p>';
  if(d.f)h+='<p><b>fused kernel</b> '+esc(d.f)+'</p>';
  if(d.h)h+='<p><b>host-folded</b>: known at trace time, costs nothing at run time</p>';
  P.innerHTML=h;});
})();
)JS";

}  // namespace

std::string graph_html(const onnx::Model& model, const onnx::Overlay* overlay, const std::string& title) {
  if (!model.graph) throw InvalidArgument("graph_html: the model has no graph");
  const Graph& g = *model.graph;
  std::set<std::string> initializer_names;
  for (const auto& [name, v] : g.initializers) initializer_names.insert(name);

  // Vertices: graph inputs that are not initializers, nodes, graph outputs.
  std::vector<VKind> kind;
  std::vector<size_t> ref;  // index into g.inputs, g.nodes or g.outputs
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (initializer_names.count(g.inputs[i].name)) continue;
    producer[g.inputs[i].name] = kind.size();
    kind.push_back(VKind::Input);
    ref.push_back(i);
  }
  const size_t first_node = kind.size();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& o : g.nodes[i].outputs)
      if (!o.empty()) producer[o] = kind.size();
    kind.push_back(VKind::Node);
    ref.push_back(i);
  }
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    kind.push_back(VKind::Output);
    ref.push_back(i);
  }
  const size_t count = kind.size();

  // Edges, one per (producer, consumer) pair, titled by the tensors they carry.
  std::map<std::pair<size_t, size_t>, std::vector<std::string>> edge_names;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const size_t v = first_node + i;
    for (const auto& name : onnx::detail::node_reads(g.nodes[i])) {
      auto it = producer.find(name);
      if (it != producer.end() && it->second != v) edge_names[{it->second, v}].push_back(name);
    }
  }
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    auto it = producer.find(g.outputs[i].name);
    if (it != producer.end()) edge_names[{it->second, first_node + g.nodes.size() + i}].push_back(g.outputs[i].name);
  }
  std::vector<std::pair<size_t, size_t>> edges;
  edges.reserve(edge_names.size());
  for (const auto& [e, names] : edge_names) edges.push_back(e);
  const detail::Layout lay = detail::layered_layout(count, edges);

  size_t widest = 1;
  for (const auto& row : lay.layers) widest = std::max(widest, row.size());
  const int width = kMargin * 2 + static_cast<int>(widest) * (kBoxW + kGapX) - kGapX;
  const int height = kMargin * 2 + static_cast<int>(lay.layers.size()) * (kBoxH + kGapY) - kGapY;
  std::vector<int> vx(count), vy(count);
  for (size_t l = 0; l < lay.layers.size(); ++l) {
    const auto& row = lay.layers[l];
    const int offset = static_cast<int>(widest - row.size()) * (kBoxW + kGapX) / 2;
    for (size_t k = 0; k < row.size(); ++k) {
      vx[row[k]] = kMargin + offset + static_cast<int>(k) * (kBoxW + kGapX);
      vy[row[k]] = kMargin + static_cast<int>(l) * (kBoxH + kGapY);
    }
  }

  NodeMarks marks;
  if (overlay) marks = mark_nodes(g, *overlay);

  // Declared types by tensor name, for the details panel.
  std::map<std::string, std::string> types;
  for (const auto& [name, v] : g.initializers) types[name] = "initializer " + v.describe();
  for (const auto* list : {&g.value_info, &g.inputs, &g.outputs})
    for (const auto& vi : *list)
      if (!types.count(vi.name)) types[vi.name] = vi.type.to_string();

  std::string svg;
  svg.reserve(count * 420 + edges.size() * 160);
  char buf[256];
  std::snprintf(buf, sizeof buf, "<svg id=\"graph\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", width,
                height, width, height);
  svg += buf;
  for (const auto& [e, names] : edge_names) {
    const int x1 = vx[e.first] + kBoxW / 2, y1 = vy[e.first] + kBoxH;
    const int x2 = vx[e.second] + kBoxW / 2, y2 = vy[e.second];
    const int ym = (y1 + y2) / 2;
    std::snprintf(buf, sizeof buf, "<path class=\"e\" d=\"M%d %dC%d %d %d %d %d %d\"><title>", x1, y1, x1, ym, x2, ym,
                  x2, y2);
    svg += buf;
    for (size_t k = 0; k < names.size(); ++k) svg += (k ? ", " : "") + html_escape(names[k]);
    svg += "</title></path>\n";
  }
  std::string data = "var N=[";
  for (size_t v = 0; v < count; ++v) {
    std::string op, name, fill = "#e6ecf5", rect_class, group_class = "n", full;
    std::string json;
    if (kind[v] == VKind::Input) {
      const auto& in = g.inputs[ref[v]];
      op = "input";
      name = in.name;
      fill = "#dcefd6";
      group_class += " io";
      full = "input " + in.name;
      json = "{o:\"graph input\",n:" + js_string(in.name) + ",i:[],u:[" + js_string(in.name) + "]}";
    } else if (kind[v] == VKind::Output) {
      const auto& out = g.outputs[ref[v]];
      op = "output";
      name = out.name;
      fill = "#f7efd2";
      group_class += " io";
      full = "output " + out.name;
      json = "{o:\"graph output\",n:" + js_string(out.name) + ",i:[" + js_string(out.name) + "],u:[]}";
    } else {
      const size_t i = ref[v];
      const Node& n = g.nodes[i];
      op = n.op_type;
      name = n.name;
      full = n.label();
      std::vector<std::string> attrs;
      for (const auto& a : n.attributes) attrs.push_back(attribute_text(a));
      std::string seg_text, fused_text;
      bool folded = false;
      if (overlay) {
        const int seg = marks.segment[i];
        if (seg >= 0) {
          const auto& s = overlay->segments[static_cast<size_t>(seg)];
          fill = segment_color(static_cast<size_t>(seg));
          seg_text = "#" + std::to_string(seg) + " " + kind_name(s.kind) + " (positions " + std::to_string(s.start) +
                     ".." + std::to_string(s.stop - 1) + "): " + s.reason;
          if (s.kind == onnx::SegmentKind::Break) rect_class = "brk";
        } else {
          fill = "#ffffff";
          seg_text = "not run in the overlay's call";
        }
        fused_text = marks.fused[i];
        if (!fused_text.empty() && rect_class.empty()) rect_class = "fus";
        folded = marks.folded[i] != 0;
        if (folded) {
          fill = "#d4d4d4";
          group_class += " fold";
        }
      }
      json = "{o:" + js_string(n.op_type) + ",n:" + js_string(n.name) + ",d:" + js_string(n.domain) +
             ",i:" + js_strings(n.inputs) + ",u:" + js_strings(n.outputs) + ",a:" + js_strings(attrs) +
             (seg_text.empty() ? "" : ",s:" + js_string(seg_text)) +
             (fused_text.empty() ? "" : ",f:" + js_string(fused_text)) + (folded ? ",h:1" : "") + "}";
    }
    data += (v ? ",\n" : "\n") + json;
    std::snprintf(buf, sizeof buf, "<g class=\"%s\" data-i=\"%zu\" transform=\"translate(%d %d)\"><title>",
                  group_class.c_str(), v, vx[v], vy[v]);
    svg += buf;
    svg += html_escape(full);
    std::snprintf(buf, sizeof buf, "</title><rect width=\"%d\" height=\"%d\" rx=\"5\" fill=\"%s\"%s%s%s/>", kBoxW,
                  kBoxH, fill.c_str(), rect_class.empty() ? "" : " class=\"", rect_class.c_str(),
                  rect_class.empty() ? "" : "\"");
    svg += buf;
    std::snprintf(buf, sizeof buf, "<text x=\"%d\" y=\"18\">", kBoxW / 2);
    svg += buf;
    svg += html_escape(clip(op, 24));
    std::snprintf(buf, sizeof buf, "</text><text class=\"nm\" x=\"%d\" y=\"34\">", kBoxW / 2);
    svg += buf;
    svg += html_escape(clip(name, 28));
    svg += "</text></g>\n";
  }
  svg += "</svg>\n";
  data += "];\nvar T={";
  bool first = true;
  for (const auto& [name, type] : types) {
    data += (first ? "\n" : ",\n") + js_string(name) + ":" + js_string(type);
    first = false;
  }
  data += "};\n";

  // Header: title, counts, opsets, initializers, legend.
  const std::string heading = title.empty() ? (g.name.empty() ? "ONNX graph" : g.name) : title;
  std::string head = "<div id=\"head\"><h1>" + html_escape(heading) + "</h1><div>" +
                     std::to_string(g.nodes.size()) + " nodes, " + std::to_string(first_node) + " inputs, " +
                     std::to_string(g.outputs.size()) + " outputs, " + std::to_string(g.initializers.size()) +
                     " initializers";
  std::string opsets;
  for (const auto& o : model.opsets)
    opsets += (opsets.empty() ? "" : ", ") + (o.domain.empty() ? std::string("ai.onnx") : o.domain) + " " +
              std::to_string(o.version);
  if (!opsets.empty()) head += "; opsets " + html_escape(opsets);
  if (!model.producer_name.empty())
    head += "; producer " + html_escape(model.producer_name + " " + model.producer_version);
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
  head += "<div id=\"legend\">";
  if (overlay) {
    head += "<b>segments</b> (" + std::to_string(overlay->segments.size()) + ")<ul>";
    for (size_t k = 0; k < overlay->segments.size(); ++k) {
      const auto& s = overlay->segments[k];
      head += "<li class=\"seg\"><span class=\"sw\" style=\"background:" + segment_color(k) + "\"></span>#" +
              std::to_string(k) + " <b>" + kind_name(s.kind) + "</b> positions " + std::to_string(s.start) + ".." +
              std::to_string(s.stop - 1) + ": " + html_escape(s.start_node) +
              (s.stop - s.start > 1 ? " .. " + html_escape(s.stop_node) : "") + " &mdash; " + html_escape(s.reason);
      if (!s.host_values.empty()) {
        std::string hv;
        for (const auto& h : s.host_values) hv += (hv.empty() ? "" : ", ") + h;
        head += " (static host values: " + html_escape(hv) + ")";
      }
      if (!s.fused.empty()) head += " (" + std::to_string(s.fused.size()) + " fused kernels)";
      head += "</li>";
    }
    head += "</ul>marks: <span class=\"sw\" style=\"border:3px solid #c00\"></span>break node "
            "<span class=\"sw\" style=\"border:2px dashed #224\"></span>in a fused kernel "
            "<span class=\"sw\" style=\"background:#d4d4d4\"></span>host-folded (known at trace time)";
  } else {
    head += "no overlay: <code>smelt view MODEL --compile</code> colors the nodes by compiled segment";
  }
  head += "</div></div>\n";

  std::string html;
  html.reserve(svg.size() + data.size() + head.size() + 4096);
  html += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>";
  html += html_escape(heading);
  html += "</title>\n<style>";
  html += kStyle;
  html += "</style></head>\n<body><div id=\"main\">\n";
  html += head;
  html += svg;
  html += "</div>\n<div id=\"panel\"><p>Click a node for its details; hover an edge for its tensor.</p></div>\n<script>\n";
  html += data;
  html += kScript;
  html += "</script></body></html>\n";
  return html;
}

void write_graph_html(const std::string& path, const onnx::Model& model, const onnx::Overlay* overlay,
                      const std::string& title) {
  const std::string html = graph_html(model, overlay, title);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error("write_graph_html: cannot write '" + path + "'");
  f.write(html.data(), static_cast<std::streamsize>(html.size()));
  f.close();
  if (!f) throw Error("write_graph_html: cannot write '" + path + "' (write failed)");
}

}  // namespace smelt::view
