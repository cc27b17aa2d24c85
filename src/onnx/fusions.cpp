// Load-time pattern rewrites of exporter subgraphs into fused ops, and the ai.smelt ops they produce.
#include "src/onnx/fusions.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/onnx/ops/op_helpers.h"
#include "src/onnx/registry.h"

namespace smelt::onnx {

namespace {

// Constants of a pattern must match within this relative tolerance (float32 spellings of
// 1/sqrt(2) and sqrt(2) differ from the exact values by ~2e-8).
constexpr double kConstRtol = 1e-6;

bool near(double v, double target) { return std::abs(v - target) <= kConstRtol * std::abs(target); }

/// Every tensor name a graph's nodes (and their nested subgraphs) read, and its outputs; nested
/// graphs may read the enclosing scope's values implicitly.
void collect_reads(const Graph& g, std::set<std::string>& out) {
  std::vector<const Graph*> work{&g};
  while (!work.empty()) {
    const Graph* cur = work.back();
    work.pop_back();
    for (const auto& n : cur->nodes) {
      for (const auto& i : n.inputs)
        if (!i.empty()) out.insert(i);
      for (const auto& a : n.attributes) {
        if (a.g) work.push_back(a.g.get());
        for (const auto& s : a.graphs) work.push_back(s.get());
      }
    }
    for (const auto& o : cur->outputs) out.insert(o.name);
  }
}

/// One graph being rewritten: who produces and who reads each tensor, and its constants.
class GraphFuser {
 public:
  GraphFuser(Graph& g, int64_t opset) : g_(g), opset_(opset), dead_(g.nodes.size(), false) {
    for (const auto& in : g_.inputs) inputs_.insert(in.name);
    for (const auto& o : g_.outputs) outputs_.insert(o.name);
    for (size_t i = 0; i < g_.initializers.size(); ++i) inits_[g_.initializers[i].first] = i;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      for (const auto& o : n.outputs)
        if (!o.empty()) producer_[o] = i;
      for (const auto& in : n.inputs)
        if (!in.empty()) {
          ++uses_[in];
          auto& c = consumers_[in];
          if (c.empty() || c.back() != i) c.push_back(i);  // distinct nodes: Mul(d, d) is one consumer
        }
      std::set<std::string> nested;
      for (const auto& a : n.attributes) {
        if (a.g) collect_reads(*a.g, nested);
        for (const auto& s : a.graphs) collect_reads(*s, nested);
      }
      for (const auto& r : nested) ++uses_[r];
    }
  }

  FusionCounts run() {
    FusionCounts c;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i] || !standard(g_.nodes[i])) continue;
      const std::string& op = g_.nodes[i].op_type;
      if (op == "BatchNormalization" && fold_conv_bn(i)) ++c.conv_bn;
    }
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i] || !standard(g_.nodes[i])) continue;
      if (g_.nodes[i].op_type == "ReduceMean" && fuse_layer_norm(i)) ++c.layer_norm;
    }
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i] || !standard(g_.nodes[i])) continue;
      if (g_.nodes[i].op_type == "Softmax" && fuse_attention(i)) ++c.attention;
    }
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i] || !standard(g_.nodes[i])) continue;
      if (g_.nodes[i].op_type == "Erf" && fuse_gelu(i)) ++c.gelu;
      else if (g_.nodes[i].op_type == "Tanh" && fuse_gelu_tanh(i)) ++c.gelu;
    }
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i] || !standard(g_.nodes[i])) continue;
      if (g_.nodes[i].op_type == "Gemm") c.gemm_weights += transpose_gemm_weight(i);
    }
    if (c.total() > 0) finish();
    return c;
  }

 private:
  static bool standard(const Node& n) { return normalize_domain(n.domain).empty(); }

  /// The live standard-domain node `i` with one output, of op type `op`.
  bool is(std::optional<size_t> i, const char* op) const {
    if (!i || dead_[*i]) return false;
    const Node& n = g_.nodes[*i];
    return standard(n) && n.op_type == op && n.outputs.size() == 1 && !n.outputs[0].empty();
  }
  std::optional<size_t> producer(const std::string& name) const {
    auto it = producer_.find(name);
    return it == producer_.end() ? std::nullopt : std::optional<size_t>(it->second);
  }
  int uses(const std::string& name) const {
    auto it = uses_.find(name);
    return it == uses_.end() ? 0 : it->second;
  }
  /// An intermediate read exactly `n` times (by the pattern) and not a graph output.
  bool private_to_pattern(const std::string& name, int n = 1) const {
    return !name.empty() && uses(name) == n && !outputs_.count(name);
  }
  /// The one node reading a single-use intermediate.
  std::optional<size_t> sole_consumer(const std::string& name) const {
    if (!private_to_pattern(name)) return std::nullopt;
    auto it = consumers_.find(name);
    if (it == consumers_.end() || it->second.size() != 1) return std::nullopt;
    return it->second[0];
  }
  /// The (first) output of node `i`; is() has checked that it has one.
  const std::string& out(size_t i) const {
    SMELT_ASSERT(!g_.nodes[i].outputs.empty(), "fusions: a pattern node without an output");
    return g_.nodes[i].outputs[0];
  }

  /// A constant tensor: an initializer the caller cannot override, or a Constant node's value.
  const Value* constant(const std::string& name) const {
    if (name.empty() || inputs_.count(name)) return nullptr;
    auto p = producer(name);
    auto it = inits_.find(name);
    // A name both an initializer and a node output (a malformed graph) is no constant.
    if (it != inits_.end()) return p ? nullptr : &g_.initializers[it->second].second;
    if (!is(p, "Constant")) return nullptr;
    const Attribute* a = g_.nodes[*p].attribute("value");
    return a && a->type == Attribute::Type::Tensor ? &a->t : nullptr;
  }
  /// A constant numeric tensor of one element and rank <= 1 (it cannot broadcast the other operand up).
  std::optional<double> scalar(const std::string& name) const {
    const Value* v = constant(name);
    if (!v || !v->is_tensor() || is_storage_type(v->elem_type())) return std::nullopt;
    const Array& a = v->array();
    if (a.size() != 1 || a.ndim() > 1) return std::nullopt;
    return a.item<double>();
  }
  bool scalar_is(const std::string& name, double target) const {
    auto v = scalar(name);
    return v && near(*v, target);
  }
  /// The operand of a binary node other than `known` (input 0 or 1), or "" when neither is.
  std::string other_operand(size_t i, const std::string& known) const {
    const Node& n = g_.nodes[i];
    if (n.inputs.size() != 2) return "";
    if (n.inputs[0] == known) return n.inputs[1];
    if (n.inputs[1] == known) return n.inputs[0];
    return "";
  }
  /// For a commutative binary node with a scalar constant operand equal to `target`: the other operand.
  std::string operand_beside_scalar(size_t i, double target) const {
    const Node& n = g_.nodes[i];
    if (n.inputs.size() != 2) return "";
    if (scalar_is(n.inputs[1], target)) return n.inputs[0];
    if (scalar_is(n.inputs[0], target)) return n.inputs[1];
    return "";
  }

  /// Replaces the pattern `nodes` by `fused`, placed at `at` (the one of them writing the
  /// pattern's output); the others die. Names the fused node after the ones it replaces.
  void replace(std::vector<size_t> nodes, size_t at, Node fused, const char* tag) {
    std::sort(nodes.begin(), nodes.end());
    std::string name = std::string(tag) + "(";
    for (size_t k = 0; k < nodes.size(); ++k) {
      const Node& n = g_.nodes[nodes[k]];
      name += (k ? "," : "") + (n.name.empty() ? n.op_type : n.name);
    }
    fused.name = name + ")";
    for (size_t i : nodes) {
      if (i == at) continue;
      dead_[i] = true;
      for (const auto& o : g_.nodes[i].outputs) removed_.insert(o);
    }
    g_.nodes[at] = std::move(fused);
  }

  bool fuse_gelu(size_t e) {
    const Node& erf = g_.nodes[e];
    if (!is(e, "Erf") || erf.inputs.size() != 1 || !private_to_pattern(erf.inputs[0])) return false;
    // x / sqrt(2) or x * (1 / sqrt(2))
    auto p = producer(erf.inputs[0]);
    std::string x;
    if (is(p, "Div")) {
      const Node& d = g_.nodes[*p];
      if (d.inputs.size() == 2 && scalar_is(d.inputs[1], std::sqrt(2.0))) x = d.inputs[0];
    } else if (is(p, "Mul")) {
      x = operand_beside_scalar(*p, std::sqrt(0.5));
    }
    if (x.empty()) return false;
    return gelu_tail({*p, e}, x, false);
  }

  /// x^3 as Pow(x, 3), Mul(x, Mul(x, x)) or Mul(Mul(x, x), x): the nodes, or empty.
  std::vector<size_t> cube_of(const std::string& name, const std::string& x) const {
    auto c = producer(name);
    if (!private_to_pattern(name)) return {};
    if (is(c, "Pow")) {
      const Node& n = g_.nodes[*c];
      if (n.inputs.size() == 2 && n.inputs[0] == x && scalar_is(n.inputs[1], 3.0)) return {*c};
      return {};
    }
    if (!is(c, "Mul")) return {};
    std::string sq = other_operand(*c, x);
    auto s = producer(sq);
    if (sq.empty() || sq == x || !is(s, "Mul") || !private_to_pattern(sq)) return {};
    const Node& n = g_.nodes[*s];
    if (n.inputs.size() != 2 || n.inputs[0] != x || n.inputs[1] != x) return {};
    return {*c, *s};
  }

  /// The tanh form: tanh(sqrt(2/pi) * (x + 0.044715 * x^3)), then the erf form's tail.
  bool fuse_gelu_tanh(size_t t) {
    const Node& th = g_.nodes[t];
    if (!is(t, "Tanh") || th.inputs.size() != 1 || !private_to_pattern(th.inputs[0])) return false;
    auto scale = producer(th.inputs[0]);
    if (!is(scale, "Mul")) return false;
    std::string v = operand_beside_scalar(*scale, std::sqrt(2.0 / M_PI));
    auto add = producer(v);
    if (v.empty() || !private_to_pattern(v) || !is(add, "Add") || g_.nodes[*add].inputs.size() != 2) return false;
    // One operand of the Add is x, the other 0.044715 * x^3.
    for (int k = 0; k < 2; ++k) {
      const std::string x = g_.nodes[*add].inputs[static_cast<size_t>(k)];
      const std::string w = g_.nodes[*add].inputs[static_cast<size_t>(1 - k)];
      auto m = producer(w);
      if (x.empty() || w == x || !is(m, "Mul") || !private_to_pattern(w)) continue;
      std::string cube = operand_beside_scalar(*m, 0.044715);
      std::vector<size_t> cube_nodes = cube.empty() ? std::vector<size_t>{} : cube_of(cube, x);
      if (cube_nodes.empty()) continue;
      std::vector<size_t> head = cube_nodes;
      head.insert(head.end(), {*m, *add, *scale, t});
      return gelu_tail(head, x, true);
    }
    return false;
  }

  /// The common end of both GELU forms after the Erf or Tanh (the last of `head`):
  /// Add 1, then Mul x and Mul 0.5 in any of the exporters' orders.
  bool gelu_tail(std::vector<size_t> nodes, const std::string& x, bool approximate) {
    const std::string f = out(nodes.back());
    auto a = sole_consumer(f);
    if (!is(a, "Add") || other_operand(*a, f).empty() || !scalar_is(other_operand(*a, f), 1.0)) return false;
    auto b = sole_consumer(out(*a));
    if (!is(b, "Mul")) return false;
    std::string o = other_operand(*b, out(*a));
    if (o.empty()) return false;
    nodes.push_back(*a);
    nodes.push_back(*b);
    size_t last = *b;  // the node writing the pattern's output
    if (o == x) {  // (x * (1 + f)) * 0.5
      auto c = sole_consumer(out(*b));
      if (!is(c, "Mul") || !scalar_is(other_operand(*c, out(*b)), 0.5)) return false;
      nodes.push_back(*c);
      last = *c;
    } else if (scalar_is(o, 0.5)) {  // x * ((1 + f) * 0.5)
      auto c = sole_consumer(out(*b));
      if (!is(c, "Mul") || other_operand(*c, out(*b)) != x) return false;
      nodes.push_back(*c);
      last = *c;
    } else {  // (x * 0.5) * (1 + f)
      auto h = producer(o);
      if (!is(h, "Mul") || !private_to_pattern(o) || other_operand(*h, x).empty() ||
          !scalar_is(other_operand(*h, x), 0.5))
        return false;
      nodes.push_back(*h);
    }
    Node fused;
    fused.domain = kSmeltDomain;
    fused.op_type = "Gelu";
    fused.inputs = {x};
    fused.outputs = {out(last)};
    Attribute approx;
    approx.name = "approximate";
    approx.type = Attribute::Type::Int;
    approx.i = approximate ? 1 : 0;
    fused.attributes.push_back(approx);
    replace(nodes, last, std::move(fused), approximate ? "gelu_tanh" : "gelu");
    return true;
  }

  /// A ReduceMean over the last axis only, keeping dims, reading `x`.
  bool is_last_axis_mean(std::optional<size_t> r, const std::string& x) const {
    if (!is(r, "ReduceMean")) return false;
    const Node& n = g_.nodes[*r];
    if (n.inputs.empty() || n.inputs[0] != x) return false;
    const Attribute* keep = n.attribute("keepdims");
    if (keep && (keep->type != Attribute::Type::Int || keep->i != 1)) return false;
    std::vector<int64_t> axes;
    if (const Attribute* a = n.attribute("axes")) {
      if (a->type != Attribute::Type::Ints) return false;
      axes = a->ints;
    } else if (n.inputs.size() >= 2 && !n.inputs[1].empty()) {  // opset 18: axes is an input
      const Value* v = constant(n.inputs[1]);
      if (!v || !v->is_tensor() || !is_integral(v->array().dtype())) return false;
      axes = v->array().to_vector<int64_t>();
    }
    return axes == std::vector<int64_t>{-1};
  }

  bool fuse_layer_norm(size_t r1) {
    const Node& mean1 = g_.nodes[r1];
    if (mean1.inputs.empty()) return false;
    const std::string x = mean1.inputs[0];
    if (!is_last_axis_mean(r1, x)) return false;
    auto s = sole_consumer(out(r1));
    if (!is(s, "Sub") || g_.nodes[*s].inputs.size() != 2 || g_.nodes[*s].inputs[0] != x ||
        g_.nodes[*s].inputs[1] != out(r1))
      return false;
    const std::string d = out(*s);
    // d feeds the square (Pow(d, 2) or Mul(d, d)) and the final Div, nothing else.
    auto cs = consumers_.find(d);
    if (cs == consumers_.end() || cs->second.size() != 2 || outputs_.count(d)) return false;
    std::optional<size_t> sq, div;
    for (size_t i : cs->second) {
      const Node& n = g_.nodes[i];
      if (is(i, "Div") && n.inputs.size() == 2 && n.inputs[0] == d && n.inputs[1] != d) div = i;
      else if (is(i, "Pow") && n.inputs.size() == 2 && n.inputs[0] == d && scalar_is(n.inputs[1], 2.0)) sq = i;
      else if (is(i, "Mul") && n.inputs.size() == 2 && n.inputs[0] == d && n.inputs[1] == d) sq = i;
    }
    if (!sq || !div) return false;
    const int sq_reads = g_.nodes[*sq].op_type == "Mul" ? 2 : 1;
    if (uses(d) != sq_reads + 1) return false;
    auto r2 = sole_consumer(out(*sq));
    if (!is_last_axis_mean(r2, out(*sq))) return false;
    auto add = sole_consumer(out(*r2));
    if (!is(add, "Add")) return false;
    std::string eps_name = other_operand(*add, out(*r2));
    auto eps = scalar(eps_name);
    if (eps_name.empty() || !eps || !(*eps >= 0.0)) return false;
    auto root = sole_consumer(out(*add));
    if (!is(root, "Sqrt") || sole_consumer(out(*root)) != div || g_.nodes[*div].inputs[1] != out(*root)) return false;
    std::vector<size_t> nodes{r1, *s, *sq, *r2, *add, *root, *div};
    std::string gamma, beta;
    std::string y = out(*div);
    // A 1-d constant scale, then a 1-d constant shift (as LayerNormalization's scale and bias).
    auto one_d_const = [&](const std::string& name) {
      const Value* v = constant(name);
      return v && v->is_tensor() && !is_storage_type(v->elem_type()) && v->array().ndim() == 1;
    };
    if (auto m = sole_consumer(y); is(m, "Mul")) {
      std::string gname = other_operand(*m, y);
      if (!gname.empty() && gname != y && one_d_const(gname)) {
        gamma = gname;
        nodes.push_back(*m);
        y = out(*m);
        if (auto b = sole_consumer(y); is(b, "Add")) {
          std::string bname = other_operand(*b, y);
          if (!bname.empty() && bname != y && one_d_const(bname)) {
            beta = bname;
            nodes.push_back(*b);
            y = out(*b);
          }
        }
      }
    }
    Node fused;
    fused.domain = kSmeltDomain;
    fused.op_type = "LayerNorm";
    fused.inputs = {x, gamma, beta};
    while (!fused.inputs.empty() && fused.inputs.back().empty()) fused.inputs.pop_back();
    fused.outputs = {y};
    const size_t last = nodes.back();
    Attribute e;
    e.name = "epsilon";
    e.type = Attribute::Type::Float;
    e.f = static_cast<float>(*eps);
    fused.attributes.push_back(e);
    replace(nodes, last, std::move(fused), "layer_norm");
    return true;
  }

  /// A Softmax over the last axis of a rank-4 input (the pattern's Transpose fixes the rank): axis
  /// -1 or 3; without the attribute only from opset 13, where the default became -1.
  /// Before opset 13 Softmax normalizes over the axes from `axis` on, flattened: only -1 is
  /// the last axis whatever the rank.
  bool softmax_on_last_axis(const Node& n) const {
    const Attribute* a = n.attribute("axis");
    if (!a) return opset_ >= 13;
    if (a->type != Attribute::Type::Int) return false;
    return a->i == -1 || (a->i == 3 && opset_ >= 13);
  }

  /// A constant integer tensor's values (axes inputs), or nothing.
  std::optional<std::vector<int64_t>> const_ints(const std::string& name) const {
    const Value* v = constant(name);
    if (!v || !v->is_tensor() || is_storage_type(v->elem_type()) || !is_integral(v->array().dtype())) return std::nullopt;
    return v->array().to_vector<int64_t>();
  }

  /// A GQA repeat of a key/value tensor: Reshape(Expand(Unsqueeze(x, axes=[2]), shape), shape)
  /// (Hugging Face's repeat_kv). Its shapes may be computed: the fused op checks at run time that
  /// the chain is a repeat of each head and otherwise runs the chain as written.
  struct Repeat {
    std::string source, expand_shape, reshape_shape;
    std::vector<size_t> nodes;
  };
  std::optional<Repeat> repeat_of(const std::string& name) const {
    auto r = producer(name);
    if (!is(r, "Reshape") || !private_to_pattern(name)) return std::nullopt;
    const Node& rs = g_.nodes[*r];
    if (rs.inputs.size() != 2) return std::nullopt;
    if (const Attribute* z = rs.attribute("allowzero"); z && (z->type != Attribute::Type::Int || z->i != 0))
      return std::nullopt;
    auto e = producer(rs.inputs[0]);
    if (!is(e, "Expand") || !private_to_pattern(rs.inputs[0]) || g_.nodes[*e].inputs.size() != 2) return std::nullopt;
    const Node& ex = g_.nodes[*e];
    auto u = producer(ex.inputs[0]);
    if (!is(u, "Unsqueeze") || !private_to_pattern(ex.inputs[0])) return std::nullopt;
    const Node& un = g_.nodes[*u];
    std::optional<std::vector<int64_t>> axes;
    if (const Attribute* a = un.attribute("axes")) {
      if (a->type == Attribute::Type::Ints) axes = a->ints;
    } else if (un.inputs.size() == 2) {
      axes = const_ints(un.inputs[1]);
    }
    if (!axes || *axes != std::vector<int64_t>{2} || un.inputs.empty() || un.inputs[0].empty()) return std::nullopt;
    return Repeat{un.inputs[0], ex.inputs[1], rs.inputs[1], {*u, *e, *r}};
  }

  /// Exporters' attention: MatMul(q, [Transpose] k) -> [Mul|Div by a scalar constant]
  /// -> [Add mask | Where(cond, scores, fill) | Where(cond, fill, scores)] -> Softmax(last axis)
  /// -> MatMul(., v), k and v optionally behind a GQA repeat  =>  ai.smelt::ScaledDotProductAttention.
  /// The fill is -inf, or a value at the bottom of float32's range (<= -3e38: Hugging Face's
  /// torch.finfo(dtype).min for float32 and bfloat16 models, GPT-2's exports). Such a fill masks
  /// exactly as -inf does: on a row that keeps a key, the softmax's max m is a kept score, and
  /// exp(fill - m) is 0 in float32 for every m above fill + 104 (any score but the fill itself).
  /// A row whose keys are all masked gives zeros in the op (the file's graph: NaN with -inf, the
  /// mean of v with a finite fill).
  bool fuse_attention(size_t si) {
    const Node& smx = g_.nodes[si];
    // is() first: it guarantees the one output that out(si) reads (a Softmax without outputs was
    // indexed past its empty output list; found by the fuzzer under UBSan).
    if (!is(si, "Softmax") || smx.inputs.size() != 1 || !softmax_on_last_axis(smx) ||
        !private_to_pattern(smx.inputs[0]))
      return false;
    auto pv = sole_consumer(out(si));
    if (!is(pv, "MatMul") || g_.nodes[*pv].inputs.size() != 2 || g_.nodes[*pv].inputs[0] != out(si) ||
        g_.nodes[*pv].inputs[1] == out(si))
      return false;
    std::vector<size_t> nodes{si, *pv};
    auto is_mask_fill = [&](const std::string& name) {
      auto v = scalar(name);
      return v && *v <= -3e38;  // -inf, or float32's lowest values (see above)
    };
    // The mask step, if any.
    std::string scores = smx.inputs[0], mask;
    int64_t mask_kind = 0;  // 0 none, 1 additive, 2 condition true = attend, 3 condition true = masked
    auto mp = producer(scores);
    // The scaled scores: MatMul, optionally scaled; returns the MatMul's node and the scale.
    auto scaled = [&](const std::string& name, std::vector<size_t>& used, double& scale) -> std::optional<size_t> {
      if (!private_to_pattern(name)) return std::nullopt;
      auto p = producer(name);
      std::string mm = name;
      scale = 1.0;
      if (is(p, "Mul") && g_.nodes[*p].inputs.size() == 2) {
        const Node& n = g_.nodes[*p];
        int which = scalar(n.inputs[1]) ? 1 : scalar(n.inputs[0]) ? 0 : -1;
        if (which < 0) return std::nullopt;  // a scale that is not a scalar constant
        scale = *scalar(n.inputs[static_cast<size_t>(which)]);
        mm = n.inputs[static_cast<size_t>(1 - which)];
        used.push_back(*p);
      } else if (is(p, "Div") && g_.nodes[*p].inputs.size() == 2) {
        auto c = scalar(g_.nodes[*p].inputs[1]);
        if (!c || *c == 0) return std::nullopt;
        scale = 1.0 / *c;
        mm = g_.nodes[*p].inputs[0];
        used.push_back(*p);
      }
      if (mm != name && !private_to_pattern(mm)) return std::nullopt;
      auto m = producer(mm);
      if (!is(m, "MatMul") || g_.nodes[*m].inputs.size() != 2) return std::nullopt;
      if (!std::isfinite(scale)) return std::nullopt;
      used.push_back(*m);
      return m;
    };
    std::vector<size_t> used;
    double scale = 1.0;
    std::optional<size_t> qk;
    if (is(mp, "Add") && g_.nodes[*mp].inputs.size() == 2) {
      for (size_t k = 0; k < 2 && !qk; ++k) {
        used.clear();
        qk = scaled(g_.nodes[*mp].inputs[k], used, scale);
        if (qk) mask = g_.nodes[*mp].inputs[1 - k];
      }
      mask_kind = 1;
    } else if (is(mp, "Where") && g_.nodes[*mp].inputs.size() == 3) {
      const Node& w = g_.nodes[*mp];
      if (is_mask_fill(w.inputs[2])) {
        qk = scaled(w.inputs[1], used, scale);
        mask_kind = 2;
      } else if (is_mask_fill(w.inputs[1])) {
        qk = scaled(w.inputs[2], used, scale);
        mask_kind = 3;
      }
      mask = w.inputs[0];
    } else {
      qk = scaled(scores, used, scale);
    }
    if (!qk || (mask_kind != 0 && mask.empty())) return false;
    if (mask_kind != 0) nodes.push_back(*mp);
    nodes.insert(nodes.end(), used.begin(), used.end());
    const Node& mm = g_.nodes[*qk];
    std::string q = mm.inputs[0], k = mm.inputs[1], v = g_.nodes[*pv].inputs[1];
    if (q.empty() || k.empty() || v.empty()) return false;
    Node fused;
    fused.domain = kSmeltDomain;
    fused.op_type = "ScaledDotProductAttention";
    // kᵀ is usually a Transpose of k ([0,1,3,2] of [B, H, T, D], or [0,2,3,1] straight from
    // [B, T, H, D]): the op takes its input with the permutation (views, no copy).
    auto tp = producer(k);
    std::string k_es, k_rs, v_es, v_rs;
    if (is(tp, "Transpose") && private_to_pattern(k) && g_.nodes[*tp].inputs.size() == 1) {
      const Attribute* perm = g_.nodes[*tp].attribute("perm");
      if (perm && perm->type == Attribute::Type::Ints && perm->ints.size() == 4) {
        nodes.push_back(*tp);
        k = g_.nodes[*tp].inputs[0];
        fused.attributes.push_back(*perm);
        fused.attributes.back().name = "k_perm";
        if (perm->ints == std::vector<int64_t>{0, 1, 3, 2})
          if (auto r = repeat_of(k)) {
            k = r->source, k_es = r->expand_shape, k_rs = r->reshape_shape;
            nodes.insert(nodes.end(), r->nodes.begin(), r->nodes.end());
          }
      }
    }
    if (auto r = repeat_of(v)) {
      v = r->source, v_es = r->expand_shape, v_rs = r->reshape_shape;
      nodes.insert(nodes.end(), r->nodes.begin(), r->nodes.end());
    }
    fused.inputs = {q, k, v, mask, k_es, k_rs, v_es, v_rs};
    while (!fused.inputs.empty() && fused.inputs.back().empty()) fused.inputs.pop_back();
    fused.outputs = {out(*pv)};
    Attribute sc;  // a float64 tensor: a float64 model's scale keeps its precision
    sc.name = "scale";
    sc.type = Attribute::Type::Tensor;
    sc.t = Value::tensor(Array(scale));
    fused.attributes.push_back(sc);
    // The axis as written: 3 is the last axis only for rank-4 scores (the op's case); other
    // ranks run the subgraph's math over that axis.
    Attribute ax;
    ax.name = "softmax_axis";
    ax.type = Attribute::Type::Int;
    ax.i = smx.attribute("axis") ? smx.attribute("axis")->i : -1;
    fused.attributes.push_back(ax);
    Attribute mk;
    mk.name = "mask_kind";
    mk.type = Attribute::Type::Int;
    mk.i = mask_kind;
    fused.attributes.push_back(mk);
    replace(nodes, *pv, std::move(fused), "attention");
    return true;
  }

  /// A constant of a floating dtype whose values the fold can read.
  const Value* float_const(const std::string& name) const {
    auto it = inits_.find(name);
    if (name.empty() || inputs_.count(name) || producer_.count(name) || it == inits_.end()) return nullptr;
    const Value* v = &g_.initializers[it->second].second;
    if (!v->is_tensor() || is_storage_type(v->elem_type()) || !is_floating(v->array().dtype())) return nullptr;
    return v;
  }

  std::string fresh_name(const std::string& base) {
    std::string name = base;
    auto taken = [&](const std::string& n) {
      return inits_.count(n) || reserved_.count(n) || producer_.count(n) || inputs_.count(n) || uses_.count(n);
    };
    for (int k = 1; taken(name); ++k)
      name = base + "_" + std::to_string(k);
    reserved_.insert(name);  // added to the graph in finish()
    return name;
  }

  bool fold_conv_bn(size_t b) {
    const Node& bn = g_.nodes[b];
    if (bn.inputs.size() != 5 || bn.outputs.empty() || bn.outputs[0].empty()) return false;
    for (size_t k = 1; k < bn.outputs.size(); ++k)
      if (!bn.outputs[k].empty()) return false;  // training-mode statistics are wanted
    if (const Attribute* t = bn.attribute("training_mode"); t && (t->type != Attribute::Type::Int || t->i != 0))
      return false;
    if (const Attribute* sp = bn.attribute("spatial"); sp && (sp->type != Attribute::Type::Int || sp->i != 1))
      return false;
    double eps = 1e-5;
    if (const Attribute* e = bn.attribute("epsilon")) {
      if (e->type != Attribute::Type::Float) return false;
      eps = e->f;
    }
    auto c = producer(bn.inputs[0]);
    if (!is(c, "Conv") || !private_to_pattern(bn.inputs[0])) return false;
    const Node& conv = g_.nodes[*c];
    if (conv.inputs.size() < 2) return false;
    const Value* w = float_const(conv.inputs[1]);
    const bool has_bias = conv.inputs.size() >= 3 && !conv.inputs[2].empty();
    const Value* cb = has_bias ? float_const(conv.inputs[2]) : nullptr;
    if (!w || (has_bias && !cb) || w->array().ndim() < 3) return false;
    const int64_t m = w->array().shape()[0];
    const Dtype dt = w->array().dtype();
    std::vector<std::vector<double>> p;  // scale, bias, mean, var
    for (size_t k = 1; k < 5; ++k) {
      const Value* v = float_const(bn.inputs[k]);
      if (!v || v->array().shape() != Shape{m}) return false;
      p.push_back(v->array().to_vector<double>());
    }
    if (cb && cb->array().shape() != Shape{m}) return false;
    std::vector<double> wv = w->array().to_vector<double>();
    std::vector<double> bias = cb ? cb->array().to_vector<double>() : std::vector<double>(static_cast<size_t>(m), 0.0);
    const size_t per = m > 0 ? wv.size() / static_cast<size_t>(m) : 0;
    for (size_t o = 0; o < static_cast<size_t>(m); ++o) {
      double k = p[0][o] / std::sqrt(p[3][o] + eps);
      for (size_t j = 0; j < per; ++j) wv[o * per + j] *= k;
      bias[o] = (bias[o] - p[2][o]) * k + p[1][o];
    }
    Array new_w = astype(Array(wv, w->array().shape()), dt);
    Array new_b = astype(Array(bias, Shape{m}), cb ? cb->array().dtype() : dt);
    new_w.eval();
    new_b.eval();
    Node fused = conv;
    fused.inputs.resize(3);
    fused.inputs[1] = fresh_name(conv.inputs[1] + "_bn_folded");
    fused.inputs[2] = fresh_name((has_bias ? conv.inputs[2] : conv.inputs[1] + "_bias") + "_bn_folded");
    added_.emplace_back(fused.inputs[1], Value::tensor(new_w));
    added_.emplace_back(fused.inputs[2], Value::tensor(new_b));
    fused.outputs = {bn.outputs[0]};
    std::vector<size_t> nodes{*c, b};
    replace(nodes, b, std::move(fused), "conv_bn");
    return true;
  }

  /// Whether node `i` is a Gemm that reads B (input 1) transposed: transB an int other than 0.
  bool reads_b_transposed(size_t i) const {
    const Node& n = g_.nodes[i];
    const Attribute* t = n.attribute("transB");
    return !dead_[i] && standard(n) && n.op_type == "Gemm" && n.inputs.size() >= 2 && t &&
           t->type == Attribute::Type::Int && t->i != 0;
  }

  /// Gemm(A, B, C, transB=1) with a constant 2-d B  =>  Gemm(A, Bᵀ, C) with Bᵀ stored row-major,
  /// made here once. The GEMM reads only row-major operands (a transposed one is summed in
  /// another order by the BLAS kernels), so each call copied B into row-major order: for
  /// MobileNetV3-small's classifier weights, a third of its eager call at one thread. The same
  /// values reach the same GEMM call, so the bits are the same. Only when every reader of B is
  /// such a Gemm reading it as B: they are rewritten together, share the one transposed copy,
  /// and B itself goes (a weight also read otherwise, a tied embedding, is not doubled in
  /// memory). Returns how many Gemms it rewrote.
  int transpose_gemm_weight(size_t i) {
    if (!reads_b_transposed(i)) return 0;
    const std::string b = g_.nodes[i].inputs[1];
    const Value* w = float_const(b);
    if (!w || w->array().ndim() != 2 || outputs_.count(b)) return 0;
    auto readers = consumers_.find(b);
    if (readers == consumers_.end()) return 0;
    for (size_t r : readers->second) {
      const Node& n = g_.nodes[r];
      if (!reads_b_transposed(r) || n.inputs[0] == b || (n.inputs.size() > 2 && n.inputs[2] == b)) return 0;
    }
    // One use per reader: no reader reads it twice, and no nested subgraph reads it.
    if (static_cast<int>(readers->second.size()) != uses(b)) return 0;
    Array t = copy(transpose(w->array()));
    t.eval();
    const std::string name = fresh_name(b + "_transposed");
    added_.emplace_back(name, Value::tensor(t));
    for (size_t r : readers->second) {
      Node gemm = g_.nodes[r];
      gemm.inputs[1] = name;
      std::erase_if(gemm.attributes, [](const Attribute& a) { return a.name == "transB"; });
      replace({r}, r, std::move(gemm), "gemm_wt");
    }
    return static_cast<int>(readers->second.size());
  }

  /// Drops the dead nodes, Constant nodes and initializers only they read, and the value_info
  /// of removed tensors.
  void finish() {
    std::set<std::string> reads;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i]) continue;
      const Node& n = g_.nodes[i];
      for (const auto& in : n.inputs) reads.insert(in);
      for (const auto& a : n.attributes) {
        if (a.g) collect_reads(*a.g, reads);
        for (const auto& s : a.graphs) collect_reads(*s, reads);
      }
    }
    // A Constant that fed only the rewritten nodes goes with them (it reads nothing, so the
    // reads above stay right); other unread Constants stay as the file has them.
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (!dead_[i] && standard(n) && n.op_type == "Constant" && n.outputs.size() == 1 && uses(n.outputs[0]) > 0 &&
          !reads.count(n.outputs[0]) && !outputs_.count(n.outputs[0])) {
        dead_[i] = true;
        removed_.insert(n.outputs[0]);
      }
    }
    std::vector<Node> kept;
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (!dead_[i]) kept.push_back(std::move(g_.nodes[i]));
    g_.nodes = std::move(kept);
    std::erase_if(g_.value_info, [&](const ValueInfo& v) { return removed_.count(v.name) > 0; });
    for (auto& a : added_) g_.initializers.push_back(std::move(a));
    // Only initializers this pass stopped reading go: others may be there on purpose (unused
    // ones the caller can still name, graph-input defaults).
    std::erase_if(g_.initializers, [&](const auto& kv) {
      return !reads.count(kv.first) && !outputs_.count(kv.first) && !inputs_.count(kv.first) && uses(kv.first) > 0;
    });
  }

  Graph& g_;
  int64_t opset_;  // the model's default-domain opset (Softmax's default axis depends on it)
  std::vector<bool> dead_;
  std::set<std::string> inputs_, outputs_, removed_, reserved_;
  std::unordered_map<std::string, size_t> inits_, producer_;
  std::unordered_map<std::string, int> uses_;
  std::unordered_map<std::string, std::vector<size_t>> consumers_;
  std::vector<std::pair<std::string, Value>> added_;
};

// ---------------------------------------------------------------------------------------------
// The fused operators
// ---------------------------------------------------------------------------------------------

using E = ElemType;

/// The float type the fused ops compute in: float64 stays, the others use float32.
Dtype compute_type(Dtype dt) { return dt == float64 ? float64 : float32; }

std::vector<Value> op_gelu(OpContext& c) {
  c.require_types(0, {E::Float, E::Double, E::Float16, E::BFloat16});
  const Array& x = c.tensor(0);
  bool approximate = c.attr_int("approximate", 0) != 0;
  return {tv(keep_dtype(gelu(keep_dtype(x, compute_type(x.dtype())), approximate), x.dtype()))};
}

std::vector<Value> op_layer_norm(OpContext& c) {
  c.require_types(0, {E::Float, E::Double, E::Float16, E::BFloat16});
  const Array& x = c.tensor(0);
  if (x.ndim() == 0) c.fail("input must have rank >= 1, got " + c.input(0).describe());
  Dtype ct = compute_type(x.dtype());
  std::optional<Array> weight, bias;
  if (c.has(1)) weight = keep_dtype(c.tensor(1), ct);
  if (c.has(2)) bias = keep_dtype(c.tensor(2), ct);
  double eps = c.attr_float("epsilon", 1e-5f);
  const Shape row{x.shape().back()};
  if ((!weight || weight->shape() == row) && (!bias || bias->shape() == row))
    return {tv(keep_dtype(layer_norm(keep_dtype(x, ct), weight, bias, eps), x.dtype()))};
  // Parameters that broadcast otherwise (a [1] scale): applied as the exporter's Mul and Add were.
  Array y = layer_norm(keep_dtype(x, ct), std::nullopt, std::nullopt, eps);
  if (weight) y = multiply(y, *weight);
  if (bias) y = add(y, *bias);
  return {tv(keep_dtype(y, x.dtype()))};
}

}  // namespace

FusionCounts apply_fusions(Model& model) {
  FusionCounts total;
  auto main = std::make_shared<Graph>(*model.graph);
  // Worklist of graphs to rewrite; each nested graph is copied and re-attached before its turn.
  std::vector<Graph*> work{main.get()};
  while (!work.empty()) {
    Graph* g = work.back();
    work.pop_back();
    FusionCounts c = GraphFuser(*g, model.opset("")).run();
    total.gelu += c.gelu;
    total.layer_norm += c.layer_norm;
    total.conv_bn += c.conv_bn;
    total.attention += c.attention;
    total.gemm_weights += c.gemm_weights;
    for (auto& n : g->nodes)
      for (auto& a : n.attributes) {
        if (a.g) {
          auto copy = std::make_shared<Graph>(*a.g);
          work.push_back(copy.get());
          a.g = copy;
        }
        for (auto& s : a.graphs) {
          auto copy = std::make_shared<Graph>(*s);
          work.push_back(copy.get());
          s = copy;
        }
      }
  }
  if (total.total() == 0) return total;  // the model keeps its original graph
  model.graph = main;
  if ((total.gelu > 0 || total.layer_norm > 0 || total.attention > 0) && model.opset(kSmeltDomain) == 0)
    model.opsets.push_back(OpsetImport{kSmeltDomain, 1});
  return total;
}

void register_fusion_ops(OpRegistry& r) {
  r.add(kSmeltDomain, "Gelu", 1, op_gelu);
  r.add(kSmeltDomain, "LayerNorm", 1, op_layer_norm);
}

}  // namespace smelt::onnx
