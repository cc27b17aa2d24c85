// Compiled ONNX models: the top-level graph traced in segments that end at break operators.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <list>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "smelt/compile.h"
#include "smelt/errors.h"
#include "smelt/onnx.h"
#include "smelt/telemetry.h"
#include "src/compile/graph_replay.h"
#include "src/compile/passes.h"
#include "src/compile/tape.h"
#include "src/compile/tiered.h"
#include "src/core/node.h"
#include "src/core/thread_pool.h"
#include "src/onnx/device_constants.h"
#include "src/onnx/executor.h"
#include "src/onnx/host_inputs.h"
#include "src/onnx/registry.h"

namespace smelt::onnx {
namespace detail {

namespace {

/// Break outputs up to this many integer elements stay host values.
constexpr int64_t kHostValueLimit = 4096;
/// Evicted keys remembered per site (for "evicted earlier" miss reasons).
constexpr size_t kEvictedMemory = 256;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// What a live value is at run time. Host values are small integer tensors the host knows
/// (break outputs and what is computed only from them and constants); dynamic values are every
/// other tensor; constants are non-tensor values computed from constants only.
enum class Kind : uint8_t { Dynamic, Host, Constant };

bool is_host_candidate(const Value& v) {
  if (!v.is_tensor()) return false;
  ElemType t = v.elem_type();
  if (t != ElemType::Int32 && t != ElemType::Int64 && t != ElemType::Bool) return false;
  return v.array().size() <= kHostValueLimit;
}

bool has_tracer(const Value& v) {
  std::vector<Array> arrays;
  collect_arrays(v, arrays);
  return std::any_of(arrays.begin(), arrays.end(), [](const Array& a) { return smelt::detail::is_tracer(a); });
}

std::string hex_double(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%a", x);
  return buf;
}

/// A text that equal values (by content) share: used for keys and static-input checks.
std::string fingerprint(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::None: return "none";
    case Value::Kind::Tensor: {
      const Array& a = v.host_array();  // a device value is read once, however often it is keyed
      std::string s = elem_type_name(v.elem_type()) + shape_to_string(a.shape()) + "{";
      if (is_integral(a.dtype()) || a.dtype() == Dtype::Bool) {
        for (auto x : a.to_vector<int64_t>()) s += std::to_string(x) + ",";
      } else {
        for (auto x : a.to_vector<double>()) s += hex_double(x) + ",";
      }
      return s + "}";
    }
    case Value::Kind::Strings: {
      std::string s = "strings" + shape_to_string(v.shape()) + "{";
      for (const auto& x : v.string_tensor().data) s += std::to_string(x.size()) + ":" + x;
      return s + "}";
    }
    case Value::Kind::Sequence: {
      std::string s = "seq{";
      for (const auto& i : v.items()) s += fingerprint(i) + ";";
      return s + "}";
    }
    case Value::Kind::Optional: return v.content() ? "opt{" + fingerprint(*v.content()) + "}" : "opt{}";
    case Value::Kind::Map: {
      std::string s = "map{";
      for (auto k : v.map_int_keys()) s += std::to_string(k) + ",";
      for (const auto& k : v.map_string_keys()) s += std::to_string(k.size()) + ":" + k;
      return s + fingerprint(v.map_values()) + "}";
    }
  }
  return "?";
}

/// "n=[3,4]" (at most 8 values shown) for messages and events.
std::string host_text(const std::string& name, const Value& v) {
  auto vals = v.host_array().to_vector<int64_t>();
  std::string s = name + "=[";
  for (size_t i = 0; i < vals.size() && i < 8; ++i) s += (i ? "," : "") + std::to_string(vals[i]);
  if (vals.size() > 8) s += ",...";
  return s + "]";
}

/// "NonZero NonZero_0": the form the break error uses.
std::string short_label(const Node& n) { return n.name.empty() ? n.op_type : n.op_type + " " + n.name; }

/// The first sentence of an error message (the eval error's advice is for compiled functions).
std::string first_sentence(const std::string& s) {
  size_t end = std::min(s.find('\n'), s.find(". "));
  return s.substr(0, end);
}

}  // namespace

// Declared in src/onnx/host_inputs.h: the graph view names the tensors behind a break's reason.
const std::vector<const char*>* host_input_names(const Node& n) {
  static const std::map<std::string, std::vector<const char*>> table = [] {
    std::map<std::string, std::vector<const char*>> t{
        {"Reshape", {nullptr, "shape"}},
        {"Expand", {nullptr, "shape"}},
        {"Tile", {nullptr, "repeats"}},
        {"ConstantOfShape", {"input"}},
        {"Range", {"start", "limit", "delta"}},
        {"Slice", {nullptr, "starts", "ends", "axes", "steps"}},
        {"TopK", {nullptr, "K"}},
        {"Pad", {nullptr, "pads", "constant_value", "axes"}},
        {"OneHot", {nullptr, "depth"}},
        {"Split", {nullptr, "split"}},
        {"Squeeze", {nullptr, "axes"}},
        {"Unsqueeze", {nullptr, "axes"}},
        {"CumSum", {nullptr, "axis"}},
        {"Resize", {nullptr, "roi", "scales", "sizes"}},
        {"Upsample", {nullptr, "scales"}},
        {"Trilu", {nullptr, "k"}},
        {"CenterCropPad", {nullptr, "shape"}},
        {"Col2Im", {nullptr, "image_shape", "block_shape"}},
        {"AffineGrid", {nullptr, "size"}},
        {"DFT", {nullptr, "dft_length", "axis"}},
        {"STFT", {nullptr, "frame_step", nullptr, "frame_length"}},
        {"HannWindow", {"size"}},
        {"HammingWindow", {"size"}},
        {"BlackmanWindow", {"size"}},
        {"MelWeightMatrix", {"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"}},
        {"Loop", {"M", "cond"}},
        {"If", {"cond"}},
    };
    for (const char* r : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                          "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"})
      t[r] = {nullptr, "axes"};
    return t;
  }();
  if (!normalize_domain(n.domain).empty()) return nullptr;
  auto it = table.find(n.op_type);
  return it == table.end() ? nullptr : &it->second;
}

namespace {

/// Why a node whose trace raised UnknownValueError is a break, from the node's point of view:
/// "NonZero 'nz': output shape depends on the values of its input", "Reshape 'r': needs the
/// values of input 'shape' on the host". `traced[i]`: input i holds a traced value.
std::string break_reason(const Node& n, const std::vector<bool>& traced) {
  const std::string who = n.label() + ": ";
  const bool standard = normalize_domain(n.domain).empty();
  if (standard && (n.op_type == "NonZero" || n.op_type == "Unique" || n.op_type == "NonMaxSuppression"))
    return who + "output shape depends on the values of its input" + (n.inputs.size() > 1 ? "s" : "");
  if (standard && n.op_type == "Compress") return who + "output shape depends on the values of input 'condition'";
  if (standard && n.op_type == "If") return who + "which branch runs depends on the value of input 'cond'";
  std::vector<std::string> names;
  if (const auto* formal = host_input_names(n))
    for (size_t i = 0; i < formal->size() && i < traced.size(); ++i)
      if ((*formal)[i] && traced[i]) names.push_back(std::string("'") + (*formal)[i] + "'");
  if (names.empty() && standard && n.op_type == "Loop")
    return who + "runs eagerly: a Loop evaluates its condition and state on the host after every iteration";
  if (names.empty()) {
    // An operator without a table entry: name its traced inputs by their values.
    for (size_t i = 0; i < traced.size(); ++i)
      if (traced[i] && i < n.inputs.size()) names.push_back(std::to_string(i) + " ('" + n.inputs[i] + "')");
    if (names.empty()) return who + "needs the values of a traced value on the host";
  }
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) list += (i ? ", " : "") + names[i];
  return who + "needs the values of input" + (names.size() > 1 ? "s " : " ") + list + " on the host";
}

/// Random operators without a seed (Dropout given a training mode too) draw new values on every
/// run: they never enter a trace.
bool is_unseeded_random(const Node& n) {
  static const std::set<std::string> ops{"RandomNormal", "RandomUniform", "RandomNormalLike",
                                         "RandomUniformLike", "Bernoulli", "Multinomial"};
  if (!normalize_domain(n.domain).empty() || n.attribute("seed")) return false;
  // Dropout draws only in training mode (its third input, opset 12); breaking at every Dropout
  // that has one is conservative when that input is a constant false.
  if (n.op_type == "Dropout") return n.inputs.size() > 2 && !n.inputs[2].empty();
  return ops.count(n.op_type) > 0;
}

/// What a value computed in a trace depends on: traced tensors, and which host values.
struct Lineage {
  bool dynamic = false;
  std::set<std::string> host;
  void merge(const Lineage& o) {
    dynamic = dynamic || o.dynamic;
    host.insert(o.host.begin(), o.host.end());
  }
};

/// One key component per live value entering a segment: (name, description).
using KeyParts = std::vector<std::pair<std::string, std::string>>;

std::string key_text(const KeyParts& parts) {
  std::string s;
  for (const auto& [n, d] : parts) s += std::to_string(n.size()) + ":" + n + "=" + d + ";";
  return s;
}

struct OutputSlot {
  std::string name;
  int tape_output = -1;  // index into the tape's outputs, or -1 for a constant
  ElemType elem_type = ElemType::Undefined;
  Value constant;
  bool dynamic = true;  // depends on a traced (non-host) value
};

struct TracedWiring;

/// A traced segment for one key: where it ends, how to run it, what it produces.
struct SegmentEntry {
  KeyParts key;
  std::string key_text;
  size_t stop = 0;            // the break's position, or the node count at the end of the graph
  std::string reason;         // why it ends
  std::string break_reason;   // why the break node could not be traced, phrased for the node
  std::string break_error;    // the error behind it (telemetry only)
  bool compiled = false;
  std::vector<std::string> args;  // live names passed as the tape's inputs, in order
  std::vector<std::string> host_static;
  compiler::Tape tape;  // as traced; moved into `program` by the passes
  /// The optimized tape: unfused while its kernels build (tiered execution), then fused.
  std::shared_ptr<compiler::TieredProgram> program;
  std::vector<OutputSlot> outputs;
  std::vector<std::string> folded;
  /// Per step of the tape as traced (before the passes): the position of the ONNX node that
  /// made it, or -1; with the traced wiring, it names the nodes of each fused group (overlay).
  std::vector<int> step_position;
  std::shared_ptr<const TracedWiring> traced;
};
using EntryPtr = std::shared_ptr<const SegmentEntry>;

/// A position where segments start: its LRU of entries and its counters.
struct Site {
  std::set<std::string> host_static;  // host values some trace here needed on the host
  /// Set once a trace here made a segment under eager_below: later calls run it eagerly up to
  /// this position without a key or a trace (running nodes eagerly is always correct).
  std::optional<EntryPtr> eager;
  std::list<EntryPtr> lru;            // most recently used first
  std::unordered_map<std::string, std::list<EntryPtr>::iterator> index;
  std::unordered_set<std::string> evicted;
  SegmentStats stats;
};

/// The outcome of tracing from a position: an entry, or host values that must become static.
struct TraceResult {
  std::shared_ptr<SegmentEntry> entry;
  std::set<std::string> need_static;
};

/// The fused kernels of `e`'s optimized tape and the ONNX nodes each came from. The passes keep
/// value ids (they forward or drop values, never renumber), so walking back from a kernel's
/// outputs through the tape as traced, until values that the optimized tape still defines (the
/// kernel's arguments, constants, other steps' results), finds the steps it replaced.
/// The wiring of a tape as traced, kept across the passes: which step made each value, and what
/// each step read (flat: step i read reads[read_begin[i] .. read_begin[i + 1])).
struct TracedWiring {
  std::vector<int> producer;
  std::vector<int> read_begin;
  std::vector<int> reads;

  explicit TracedWiring(const compiler::Tape& tape) : producer(tape.values.size(), -1) {
    read_begin.reserve(tape.steps.size() + 1);
    for (size_t i = 0; i < tape.steps.size(); ++i) {
      read_begin.push_back(static_cast<int>(reads.size()));
      reads.insert(reads.end(), tape.steps[i].inputs.begin(), tape.steps[i].inputs.end());
      for (int o : tape.steps[i].outputs) producer[static_cast<size_t>(o)] = static_cast<int>(i);
    }
    read_begin.push_back(static_cast<int>(reads.size()));
  }
};

template <class LabelOf>
std::vector<FusedGroup> fused_groups(const SegmentEntry& e, const compiler::Tape& tape, const TracedWiring& traced,
                                     LabelOf label_of) {
  std::vector<FusedGroup> groups;
  const std::vector<int>& producer = traced.producer;
  std::vector<char> defined(tape.values.size(), 0);
  for (int i = 0; i < tape.num_inputs; ++i) defined[static_cast<size_t>(i)] = 1;
  for (const auto& c : tape.constants) defined[static_cast<size_t>(c.first)] = 1;
  for (const auto& st : tape.steps)
    for (int o : st.outputs) defined[static_cast<size_t>(o)] = 1;
  for (const auto& st : tape.steps) {
    if (st.prim.kind != PrimKind::Fused) continue;
    std::set<int> positions;
    std::vector<char> seen(tape.values.size(), 0);
    std::vector<int> work;
    for (int o : st.outputs) {
      seen[static_cast<size_t>(o)] = 1;
      if (producer[static_cast<size_t>(o)] >= 0) work.push_back(producer[static_cast<size_t>(o)]);
    }
    while (!work.empty()) {
      const int step = work.back();
      work.pop_back();
      const size_t si = static_cast<size_t>(step);
      if (si < e.step_position.size() && e.step_position[si] >= 0) positions.insert(e.step_position[si]);
      for (int r = traced.read_begin[si]; r < traced.read_begin[si + 1]; ++r) {
        const size_t v = static_cast<size_t>(traced.reads[static_cast<size_t>(r)]);
        if (seen[v] || defined[v]) continue;
        seen[v] = 1;
        if (producer[v] >= 0) work.push_back(producer[v]);
      }
    }
    FusedGroup g;
    g.kernel = st.prim.str();
    for (int p : positions) g.nodes.push_back(label_of(static_cast<size_t>(p)));
    groups.push_back(std::move(g));
  }
  return groups;
}

size_t count_fused(const compiler::Tape& tape) {
  return static_cast<size_t>(std::count_if(tape.steps.begin(), tape.steps.end(),
                                           [](const compiler::Step& st) { return st.prim.kind == PrimKind::Fused; }));
}

/// A live value of the call: its value and kind.
struct Live {
  Value value;
  Kind kind = Kind::Dynamic;
};

}  // namespace

struct CompiledModelImpl {
  Model model;
  CompileModelOptions options;
  Device device;  // options.device resolved: where every call runs
  Executor exec;
  std::vector<size_t> order;                            // execution order of the top-level nodes
  std::vector<std::vector<std::string>> reads;          // per position
  std::unordered_map<std::string, size_t> last_use;     // name -> last position reading it
  std::unordered_set<std::string> graph_outputs;
  Scope constants;  // initializers and static inputs: the parent scope of every call
  std::vector<std::string> dynamic_inputs;              // graph inputs that are not static
  std::map<size_t, Site> sites;
  CompiledModelStats totals;
  /// The latest call's path: the overlay is made from it when asked for, not on every call.
  struct PathStep {
    size_t pos;       // where the segment (or the break node) starts
    EntryPtr entry;   // kept alive even if evicted since
    bool is_break;    // the break node after `entry`'s segment
  };
  std::vector<PathStep> last;
  // Calls run in parallel: what they share is the graph, the constants and the executor (all
  // read-only after prepare) and the caches below. `mutex` guards sites, totals and last, held
  // only for lookups, inserts and counters; everything a call computes is its own.
  // `trace_mutex` makes misses trace one at a time, so that two calls missing one key trace
  // it once (the second finds the first's entry); hits never take it.
  mutable std::mutex mutex;
  std::mutex trace_mutex;

  CompiledModelImpl(const Model& m, CompileModelOptions o)
      : model(m), options(std::move(o)), device(options.device.value_or(default_device())), exec(model) {}

  const Graph& graph() const { return *model.graph; }
  const Node& node_at(size_t pos) const { return graph().nodes[order[pos]]; }

  void prepare();
  std::vector<Value> call(std::unordered_map<std::string, Value> given, const RunOptions& options);
  Overlay overlay() const;

 private:
  Site& site_at(size_t pos);
  KeyParts make_key(const std::set<std::string>& host_static, const std::map<std::string, Live>& live) const;
  std::string explain_miss(const Site& site, const KeyParts& key) const;
  EntryPtr lookup_or_trace(size_t pos, int segment, const std::map<std::string, Live>& live, const Scope& scope,
                           const Executor& exec);
  // `exec` is the call's executor (it carries the call's RunGuard), not the member.
  TraceResult trace(size_t pos, const std::set<std::string>& host_static, const std::map<std::string, Live>& live,
                    const Scope& scope, KeyParts key, const Executor& exec);
  EntryPtr find_cached(Site& site, const std::string& text);
  void count_run(size_t pos, bool compiled, compiler::Tier tier);
  [[noreturn]] void raise_break(size_t pos) const;
  void insert(Site& site, std::shared_ptr<SegmentEntry> entry);
  std::vector<std::string> inputs_behind(size_t pos) const;
};

void CompiledModelImpl::prepare() {
  if (!model.graph) throw OnnxError("compile: the model has no graph");
  const Graph& g = graph();
  order = topological_order(g.nodes);
  reads.resize(order.size());
  for (size_t p = 0; p < order.size(); ++p) {
    reads[p] = node_reads(g.nodes[order[p]]);
    for (const auto& r : reads[p]) last_use[r] = p;
  }
  for (const auto& o : g.outputs) graph_outputs.insert(o.name);
  check_device(device, "compile: CompileModelOptions::device");
  // On a GPU the traces capture the device copies (uploaded once per model and device, shared
  // with onnx::run), so no call moves an initializer.
  for (const auto& [name, v] : g.initializers) constants.values[name] = initializer_on(g, name, v, device);
  for (const auto& [name, v] : options.static_inputs) {
    // A plain reference for the lambda: clang before 16 cannot capture structured bindings.
    const std::string& wanted = name;
    auto it = std::find_if(g.inputs.begin(), g.inputs.end(), [&](const ValueInfo& i) { return i.name == wanted; });
    if (it == g.inputs.end()) {
      std::string names;
      for (const auto& in : g.inputs) names += (names.empty() ? "" : ", ") + in.name;
      throw OnnxError("compile: static input '" + name + "' is not a graph input (the model's inputs are: " + names + ")");
    }
    check_input(*it, v);
    constants.values[name] = value_to_device(v, device);
  }
  for (const auto& in : g.inputs)
    if (!options.static_inputs.count(in.name)) dynamic_inputs.push_back(in.name);
}

Site& CompiledModelImpl::site_at(size_t pos) {
  auto it = sites.find(pos);
  if (it != sites.end()) return it->second;
  Site& s = sites[pos];
  s.stats.position = pos;
  s.stats.start_node = node_at(pos).label();
  return s;
}

KeyParts CompiledModelImpl::make_key(const std::set<std::string>& host_static,
                                     const std::map<std::string, Live>& live) const {
  KeyParts key;
  for (const auto& [name, l] : live) {
    std::string d;
    switch (l.kind) {
      case Kind::Host:
        d = host_static.count(name) ? "host " + fingerprint(l.value)
                                         : "host " + l.value.describe() + "@" + l.value.array().device().str();
        break;
      case Kind::Dynamic:
        if (l.value.is_tensor())
          d = l.value.describe() + "@" + l.value.array().device().str();
        else if (l.value.is_none())
          d = "none";
        else
          d = "runtime " + l.value.type().to_string();
        break;
      case Kind::Constant: d = "constant " + fingerprint(l.value); break;
    }
    key.emplace_back(name, std::move(d));
  }
  return key;
}

std::string CompiledModelImpl::explain_miss(const Site& site, const KeyParts& key) const {
  std::string text = key_text(key);
  if (site.evicted.count(text)) return "evicted earlier (cache_size " + std::to_string(options.cache_size) + ")";
  if (site.lru.empty()) return "first call";
  std::string best;
  size_t best_diffs = SIZE_MAX;
  for (const auto& e : site.lru) {
    std::vector<std::string> diffs;
    std::map<std::string, std::string> old(e->key.begin(), e->key.end());
    std::map<std::string, std::string> now(key.begin(), key.end());
    for (const auto& [n, d] : now) {
      auto it = old.find(n);
      if (it == old.end())
        diffs.push_back(n + ": new value " + d);
      else if (it->second != d)
        diffs.push_back(n + ": " + it->second + " -> " + d);
    }
    for (const auto& [n, d] : old)
      if (!now.count(n)) diffs.push_back(n + ": no longer live");
    if (diffs.empty()) diffs.push_back("host values read on the host: " + std::to_string(site.host_static.size()));
    if (diffs.size() < best_diffs) {
      best_diffs = diffs.size();
      best = diffs[0];
      for (size_t i = 1; i < diffs.size(); ++i) best += "; " + diffs[i];
    }
  }
  return best;
}

std::vector<std::string> CompiledModelImpl::inputs_behind(size_t pos) const {
  // The graph inputs (not static) that the node at `pos` depends on, through its producers.
  const Graph& g = graph();
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& o : g.nodes[i].outputs)
      if (!o.empty()) producer[o] = i;
  std::set<std::string> dynamic(dynamic_inputs.begin(), dynamic_inputs.end());
  std::vector<std::string> work = reads[pos];
  std::unordered_set<std::string> seen(work.begin(), work.end());
  std::set<std::string> found;
  while (!work.empty()) {
    std::string n = work.back();
    work.pop_back();
    if (dynamic.count(n)) found.insert(n);
    auto it = producer.find(n);
    if (it == producer.end()) continue;
    for (const auto& r : node_reads(g.nodes[it->second]))
      if (seen.insert(r).second) work.push_back(r);
  }
  std::vector<std::string> out;
  for (const auto& in : dynamic_inputs)  // graph order
    if (found.count(in)) out.push_back(in);
  return out;
}

void CompiledModelImpl::raise_break(size_t pos) const {
  std::vector<std::string> deps = inputs_behind(pos);
  std::string who;
  for (size_t i = 0; i < deps.size(); ++i) who += (i ? ", " : "") + deps[i];
  if (deps.empty()) who = "a value it reads";
  throw UnknownValueError(short_label(node_at(pos)) + ": " + who + (deps.size() > 1 ? " are" : " is") +
                          " only known when the model runs. Pass the graph inputs it depends on as "
                          "static_inputs, or call smelt::onnx::run without compiling.");
}

TraceResult CompiledModelImpl::trace(size_t pos, const std::set<std::string>& host_static,
                                     const std::map<std::string, Live>& live, const Scope& scope, KeyParts key,
                                     const Executor& exec) {
  auto entry = std::make_shared<SegmentEntry>();
  entry->key_text = key_text(key);
  entry->key = std::move(key);
  // The trace's own values (placeholders, then what nodes make) shadow the call's: no copy of it.
  Scope t;
  t.parent = &scope;
  std::unordered_map<std::string, Lineage> lineage;
  std::vector<Array> placeholders;
  // Which ONNX node (position) made each graph node of the trace: fused groups name their nodes.
  std::unordered_map<const smelt::detail::Node*, int> made_by;
  for (const auto& [name, l] : live) {
    if (l.kind == Kind::Constant) continue;
    if (l.kind == Kind::Host) lineage[name].host.insert(name);
    if (l.kind == Kind::Dynamic) lineage[name].dynamic = true;
    if (!l.value.is_tensor()) continue;  // a run-time non-tensor: nodes that read it are breaks
    if (l.kind == Kind::Host && host_static.count(name)) {
      entry->host_static.push_back(host_text(name, l.value));
      continue;  // stays the real array: a constant of this trace
    }
    const Array& a = l.value.array();
    auto n = std::make_shared<smelt::detail::Node>();
    n->shape = a.shape();
    n->dtype = a.dtype();
    n->device = a.device();
    n->id = smelt::detail::next_node_id();
    n->tracer = true;
    Array ph(std::move(n));
    made_by[&ph.node()] = -1;
    placeholders.push_back(ph);
    entry->args.push_back(name);
    t.values[name] = Value::tensor(ph, l.value.elem_type());
  }

  const size_t count = order.size();
  size_t k = pos;
  for (; k < count; ++k) {
    const Node& node = node_at(k);
    Lineage in;
    bool runtime_non_tensor = false;
    for (const auto& r : reads[k]) {
      auto it = lineage.find(r);
      if (it == lineage.end()) continue;
      in.merge(it->second);
      const Value* v = t.find(r);
      if (v && !v->is_tensor() && !v->is_none() && (it->second.dynamic || !it->second.host.empty()))
        runtime_non_tensor = true;
    }
    if (is_unseeded_random(node)) {
      entry->break_reason = node.label() + ": a random operator without a seed draws new values on every run";
      break;
    }
    if (runtime_non_tensor) {
      entry->break_reason = node.label() + ": reads a non-tensor value that is only known at run time";
      break;
    }
    // A trace runs the nodes' host work (a Loop with a known trip count loops here too).
    if (exec.guard()) exec.guard()->check(node);
    std::vector<Value> inputs = Executor::gather_inputs(node, t);
    std::vector<Value> outputs;
    try {
      outputs = exec.run_node(node, inputs, t, exec.model_opsets());
    } catch (const UnknownValueError& e) {
      // A host value entered as an argument but a node needs it on the host: make it static.
      std::set<std::string> need;
      for (const auto& r : reads[k]) {
        auto it = lineage.find(r);
        if (it == lineage.end() || it->second.dynamic) continue;
        for (const auto& h : it->second.host)
          if (!host_static.count(h)) need.insert(h);
      }
      if (!need.empty()) return {nullptr, need};
      std::vector<bool> traced;
      for (const auto& v : inputs) traced.push_back(has_tracer(v));
      entry->break_reason = break_reason(node, traced);
      entry->break_error = first_sentence(e.what());
      break;
    } catch (const Cancelled&) {
      throw;  // the run's bounds stop the call; they are not a reason to break the segment
    } catch (const DeadlineExceeded&) {
      throw;
    } catch (const OutOfMemory&) {
      throw;
    } catch (const Error& e) {
      // Anything else a trace cannot do runs eagerly, which also raises a real error again.
      entry->break_error = first_sentence(e.what());
      entry->break_reason = node.label() + ": could not be traced (" + entry->break_error + ")";
      break;
    }
    bool all_known = true;
    bool traced_non_tensor = false;
    for (const auto& o : outputs) {
      bool traced = has_tracer(o);
      all_known = all_known && !traced;
      traced_non_tensor = traced_non_tensor || (traced && !o.is_tensor());
    }
    if (traced_non_tensor) {
      entry->break_reason = node.label() + ": makes a sequence, map or optional of traced values";
      break;
    }
    // Credit the graph nodes this node made (walking back to those made earlier) to it.
    std::vector<const smelt::detail::Node*> work;
    for (const auto& o : outputs) {
      if (!o.is_tensor() || !smelt::detail::is_tracer(o.array())) continue;
      work.push_back(&o.array().node());
    }
    while (!work.empty()) {
      const smelt::detail::Node* gn = work.back();
      work.pop_back();
      if (!made_by.emplace(gn, static_cast<int>(k)).second || !gn->tracer) continue;
      for (const auto& in : gn->inputs) work.push_back(&in.node());
    }
    Executor::bind_outputs(node, std::move(outputs), t, {});
    for (const auto& o : node.outputs)
      if (!o.empty()) lineage[o] = in;
    if (all_known) entry->folded.push_back(node.label());
  }
  entry->stop = k;
  entry->reason = k < count ? node_at(k).label() : "end of graph";
  if (k < count && !options.allow_breaks) raise_break(k);

  // Values made here that later nodes or the graph outputs read.
  std::vector<Array> traced_outputs;
  std::vector<Array> frozen;
  for (size_t p = pos; p < k; ++p) {
    for (const auto& name : node_at(p).outputs) {
      if (name.empty()) continue;
      auto lu = last_use.find(name);
      if (!graph_outputs.count(name) && (lu == last_use.end() || lu->second < k)) continue;
      const Value* v = t.find(name);
      if (!v) continue;
      OutputSlot slot;
      slot.name = name;
      slot.dynamic = lineage[name].dynamic;
      if (v->is_tensor() && smelt::detail::is_tracer(v->array())) {
        slot.tape_output = static_cast<int>(traced_outputs.size());
        slot.elem_type = v->elem_type();
        traced_outputs.push_back(v->array());
      } else {
        slot.constant = *v;
        collect_arrays(*v, frozen);
      }
      entry->outputs.push_back(std::move(slot));
    }
  }
  eval(frozen);
  std::vector<const smelt::detail::Node*> step_nodes;
  entry->tape = compiler::build_tape(placeholders, traced_outputs, device, &step_nodes);
  entry->step_position.reserve(step_nodes.size());
  for (const auto* gn : step_nodes) {
    auto it = made_by.find(gn);
    entry->step_position.push_back(it == made_by.end() ? -1 : it->second);
  }
  return {entry, {}};
}

void CompiledModelImpl::insert(Site& site, std::shared_ptr<SegmentEntry> entry) {
  site.lru.push_front(entry);
  site.index[entry->key_text] = site.lru.begin();
  site.evicted.erase(entry->key_text);
  while (site.lru.size() > std::max<size_t>(options.cache_size, 1)) {
    const EntryPtr& victim = site.lru.back();
    site.stats.evictions++;
    if (telemetry::enabled())
      telemetry::emit({"segment.cache.evict", 0.0,
                       {{"position", std::to_string(site.stats.position)},
                        {"start", site.stats.start_node},
                        {"reason", "capacity " + std::to_string(options.cache_size)}}});
    if (site.evicted.size() >= kEvictedMemory) site.evicted.clear();
    site.evicted.insert(victim->key_text);
    site.index.erase(victim->key_text);
    site.lru.pop_back();
  }
  site.stats.cached = site.lru.size();
}

EntryPtr CompiledModelImpl::find_cached(Site& site, const std::string& text) {
  auto found = site.index.find(text);
  if (found == site.index.end()) return nullptr;
  site.lru.splice(site.lru.begin(), site.lru, found->second);
  return *found->second;
}

void CompiledModelImpl::count_run(size_t pos, bool compiled, compiler::Tier tier) {
  {
    std::lock_guard lock(mutex);
    Site& site = sites.at(pos);
    if (!compiled) {
      site.stats.eager_runs++;
      return;
    }
    site.stats.compiled_runs++;
    (tier == compiler::Tier::Fused ? site.stats.fused_runs : site.stats.interpreter_runs)++;
  }
  if (telemetry::enabled())
    telemetry::emit({"segment.run", 0.0, {{"position", std::to_string(pos)}, {"tier", compiler::tier_name(tier)}}});
}

EntryPtr CompiledModelImpl::lookup_or_trace(size_t pos, int segment, const std::map<std::string, Live>& live,
                                            const Scope& scope, const Executor& exec) {
  const std::string seg = std::to_string(segment);
  // Sites live in a std::map: the reference stays valid while other calls add sites.
  Site* site_ptr = nullptr;
  std::string start_node;
  auto hit = [&](EntryPtr e) {
    if (telemetry::enabled())
      telemetry::emit({"segment.cache.hit", 0.0, {{"segment", seg}, {"position", std::to_string(pos)}, {"start", start_node}}});
    return e;
  };
  std::set<std::string> host_static;
  {
    std::lock_guard lock(mutex);
    site_ptr = &site_at(pos);
    if (site_ptr->eager) return *site_ptr->eager;
    start_node = site_ptr->stats.start_node;
    host_static = site_ptr->host_static;
  }
  Site& site = *site_ptr;
  // The key is computed outside the lock (fingerprints read host values); a trace that made more
  // host values static meanwhile makes it stale, and then the lookup below is skipped.
  EntryPtr found;
  {
    const std::string text = key_text(make_key(host_static, live));
    std::lock_guard lock(mutex);
    if (site.host_static == host_static && (found = find_cached(site, text))) site.stats.hits++;
  }
  if (found) return hit(found);
  // A miss: trace under trace_mutex, then look again, since the key may have been traced by the
  // call that held it.
  std::lock_guard trace_lock(trace_mutex);
  KeyParts key;
  std::string reason;
  {
    std::lock_guard lock(mutex);
    if (site.eager) return *site.eager;
    host_static = site.host_static;
    key = make_key(host_static, live);
    if ((found = find_cached(site, key_text(key)))) {
      site.stats.hits++;
    } else {
      site.stats.misses++;
      // The reason compares the key with every cached one: only worth it when someone listens.
      if (telemetry::enabled()) reason = explain_miss(site, key);
    }
  }
  if (found) return hit(found);
  if (telemetry::enabled())
    telemetry::emit({"segment.cache.miss", 0.0,
                     {{"segment", seg}, {"position", std::to_string(pos)}, {"start", start_node}, {"reason", reason}}});
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    {
      std::lock_guard lock(mutex);
      site.stats.traces++;
    }
    TraceResult r = trace(pos, host_static, live, scope, key, exec);
    if (!r.entry) {
      // Retrace with these host values as constants; the key now holds their values.
      std::lock_guard lock(mutex);
      site.host_static.insert(r.need_static.begin(), r.need_static.end());
      host_static = site.host_static;
      key = make_key(host_static, live);
      if (EntryPtr e = find_cached(site, key_text(key))) return e;
      continue;
    }
    std::shared_ptr<SegmentEntry> entry = r.entry;
    double trace_ms = ms_since(t0);
    const size_t nodes = entry->stop - pos;
    const bool whole = pos == 0 && entry->stop == order.size();
    const bool small = options.eager_below > 0 && nodes < static_cast<size_t>(options.eager_below) && !whole;
    double build_ms = 0.0;
    size_t fused_now = 0;
    if (nodes > 0 && !small) {
      auto t1 = std::chrono::steady_clock::now();
      compiler::PassOptions po;
      po.fuse = options.fuse;
      po.function = "onnx segment " + std::to_string(pos);
      entry->traced = std::make_shared<const TracedWiring>(entry->tape);  // before the passes
      // A segment that runs wholly on one GPU replays as one CUDA graph launch (captured on its
      // second call, the first after the fused tier is in place; null on the CPU): ResNet-50's
      // ~170 kernels and cuDNN/cuBLAS calls cost about as much host time as GPU time otherwise.
      const std::string function = po.function;
      entry->program = std::make_shared<compiler::TieredProgram>(
          std::move(entry->tape), std::move(po), compiler::tiered_enabled(options.tiered),
          [function](compiler::Program& p) { p.graph = compiler::make_graph_replay(p.tape, function); });
      entry->tape = compiler::Tape{};
      fused_now = count_fused(entry->program->current()->tape);
      entry->compiled = true;
      build_ms = ms_since(t1);
    }
    if (telemetry::enabled()) {
      std::string hv;
      for (const auto& h : entry->host_static) hv += (hv.empty() ? "" : " ") + h;
      std::string args;
      for (const auto& a : entry->args) args += (args.empty() ? "" : " ") + a;
      telemetry::emit({"segment.compile.stop", trace_ms + build_ms,
                       {{"segment", seg},
                        {"position", std::to_string(pos)},
                        {"start", node_at(pos).label()},
                        {"stop", entry->stop < order.size() ? node_at(entry->stop).label() : "end of graph"},
                        {"nodes", std::to_string(nodes)},
                        {"reason", entry->reason},
                        {"break_reason", entry->break_reason},
                        {"break_error", entry->break_error},
                        {"compiled", entry->compiled ? "true" : "false"},
                        {"host_values", hv},
                        {"arguments", args},
                        {"trace_ms", std::to_string(trace_ms)},
                        {"build_ms", std::to_string(build_ms)},
                        {"fused", std::to_string(fused_now)},
                        {"pending_kernels",
                         std::to_string(entry->program ? entry->program->pending_kernels() : 0)}}});
    }
    std::lock_guard lock(mutex);
    site.stats.trace_ms += trace_ms;
    site.stats.build_ms += build_ms;
    totals.compile_ms += trace_ms + build_ms;
    if (small && nodes > 0) {
      site.eager = entry;  // not cached by key: it serves every later call here
      return entry;
    }
    insert(site, entry);
    return entry;
  }
}

std::vector<Value> CompiledModelImpl::call(std::unordered_map<std::string, Value> given, const RunOptions& run_options) {
  // Arrays the model makes from nothing (ConstantOfShape, Range, ...) live on its device.
  DefaultDeviceScope device_scope(device);
  if (run_options.device && *run_options.device != device)
    throw InvalidArgument("compiled model: RunOptions::device is " + run_options.device->str() +
                          " but the model was compiled for " + device.str() +
                          " (CompileModelOptions::device); compile it again for " + run_options.device->str());
  // Initializers are constants of the traces; replacing them per call would need them as segment
  // arguments. Fine-tuning goes through onnx::run (which smelt::compile can trace whole).
  if (!run_options.initializers.empty())
    throw OnnxError("compiled model: RunOptions::initializers is not supported by compiled models (their "
                    "initializers are constants of the traces); run the model with onnx::run, which "
                    "smelt::compile and the transforms trace (docs/onnx.md, \"Fine-tuning\")");
  RunGuard guard(run_options);
  // This call's executor: the same model, with this call's bounds.
  const Executor exec(model, &guard);

  auto t0 = std::chrono::steady_clock::now();
  const Graph& g = graph();
  Scope scope;
  scope.parent = &constants;  // read-only after prepare: every call reads it
  std::map<std::string, Kind> kinds;  // live values that are not constants of the model
  for (const auto& in : g.inputs) {
    if (options.static_inputs.count(in.name)) continue;
    auto it = given.find(in.name);
    if (it == given.end()) {
      if (constants.values.count(in.name)) continue;  // an initializer's default
      if (in.type.kind == TypeInfo::Kind::Optional) {
        scope.values[in.name] = Value();
        kinds[in.name] = Kind::Dynamic;
        continue;
      }
      throw OnnxError("run: missing input '" + in.name + "' (" + in.type.to_string() + ")");
    }
    check_input(in, it->second);
    // Copied, not moved (a Value is a few shared handles): a graph that declares an input name
    // twice reads the same given value again (found by the fuzzer: a moved-from value crashed).
    // Inputs on another device are moved to the model's (as onnx::run with RunOptions::device).
    scope.values[in.name] = value_to_device(it->second, device);
    kinds[in.name] = Kind::Dynamic;
  }
  uint64_t call_number;
  {
    std::lock_guard lock(mutex);
    call_number = ++totals.calls;
  }
  // The memory budget counts the values this call made that are still live (not its inputs).
  std::unordered_set<std::string> made;
  RunGuard::Charge charge(&guard);
  auto charge_live = [&](const Node& at) {
    if (guard.budget() <= 0) return;
    int64_t total = 0;
    for (const auto& name : made) {
      auto it = scope.values.find(name);
      if (it != scope.values.end()) total += value_bytes(it->second);
    }
    charge.set(total, at);
  };
  std::vector<PathStep> path;
  const size_t count = order.size();
  auto live_at = [&](size_t pos) {
    std::map<std::string, Live> live;
    for (const auto& [name, kind] : kinds) {
      auto lu = last_use.find(name);
      if (lu == last_use.end() || lu->second < pos) continue;
      live[name] = Live{scope.values.at(name), kind};
    }
    return live;
  };
  auto drop_dead = [&](size_t pos) {
    for (auto it = kinds.begin(); it != kinds.end();) {
      auto lu = last_use.find(it->first);
      if ((lu == last_use.end() || lu->second < pos) && !graph_outputs.count(it->first)) {
        scope.values.erase(it->first);
        it = kinds.erase(it);
      } else {
        ++it;
      }
    }
  };
  size_t pos = 0;
  int segment = 0;
  while (pos < count) {
    guard.check(node_at(pos));
    EntryPtr e = lookup_or_trace(pos, segment, live_at(pos), scope, exec);
    if (e->stop > pos) {
      if (e->compiled) {
        std::vector<Array> args;
        for (const auto& a : e->args) args.push_back(scope.values.at(a).array());
        std::vector<Array> outs;
        compiler::Tier tier = compiler::Tier::Fused;
        try {
          const std::shared_ptr<const compiler::Program> program = e->program->acquire();
          tier = program->tier;
          std::optional<ThreadCapScope> cap;  // the interpreter tier beside running compilers
          if (tier == compiler::Tier::Interpreter) cap.emplace(&compiler::threads_beside_compilers);
          std::optional<std::vector<Array>> graphed;
          if (program->graph) graphed = program->graph->run(program->tape, args);
          if (graphed) outs = std::move(*graphed);
          else if (compiler::can_run_tape(program->tape, args)) outs = compiler::run_tape(program->tape, args);
          else outs = compiler::replay_tape(program->tape, args);
          // Evaluate inside the segment, so that a kernel or allocation failure names its nodes.
          std::vector<Array> ready;
          for (const auto& a : outs)
            if (a.valid() && !smelt::detail::is_tracer(a)) ready.push_back(a);
          eval(std::move(ready));
        } catch (...) {
          const Node& first = node_at(pos);
          std::string context = "compiled segment " + std::to_string(segment) + " (nodes " + first.label() +
                                (e->stop - 1 > pos ? " .. " + node_at(e->stop - 1).label() : std::string()) + ")";
          rethrow_with_context(context, "");
        }
        for (const auto& s : e->outputs)
          scope.values[s.name] = s.tape_output >= 0 ? Value::tensor(outs[static_cast<size_t>(s.tape_output)], s.elem_type)
                                                    : s.constant;
        count_run(pos, true, tier);
      } else {
        for (size_t p = pos; p < e->stop; ++p) {
          const Node& n = node_at(p);
          guard.check(n);
          Executor::bind_outputs(n, exec.run_node(n, Executor::gather_inputs(n, scope), scope, exec.model_opsets()),
                                 scope, graph_outputs);
        }
        count_run(pos, false, compiler::Tier::Fused);
      }
      for (const auto& s : e->outputs) {
        const Value& v = scope.values.at(s.name);
        kinds[s.name] = v.is_tensor() ? (!s.dynamic && is_host_candidate(v) ? Kind::Host : Kind::Dynamic)
                                      : (s.dynamic ? Kind::Dynamic : Kind::Constant);
        made.insert(s.name);
      }
      charge_live(node_at(e->stop - 1));
      path.push_back({pos, e, false});
      ++segment;
    }
    if (e->stop < count) {
      const Node& n = node_at(e->stop);
      guard.check(n);
      std::vector<Value> outs = exec.run_node(n, Executor::gather_inputs(n, scope), scope, exec.model_opsets());
      Executor::bind_outputs(n, std::move(outs), scope, graph_outputs);
      for (const auto& o : n.outputs) {
        if (o.empty()) continue;
        const Value& v = scope.values.at(o);
        kinds[o] = is_host_candidate(v) ? Kind::Host : Kind::Dynamic;
        made.insert(o);
      }
      charge_live(n);
      {
        std::lock_guard lock(mutex);
        totals.break_runs++;
      }
      path.push_back({e->stop, e, true});
      ++segment;
    }
    pos = e->stop + 1;
    drop_dead(pos);
  }
  std::vector<Value> out;
  std::vector<Array> arrays;
  for (const auto& o : g.outputs) {
    const Value* v = scope.find(o.name);
    if (!v) throw OnnxError("run: output '" + o.name + "' was not computed");
    out.push_back(*v);
    collect_arrays(*v, arrays);
  }
  try {
    eval(arrays);
  } catch (...) {
    // Segments and nodes evaluate their outputs as they run, so little is left here; whatever
    // fails keeps its type (an allocation failure is OutOfMemory with its bytes) and says where.
    rethrow_with_context("compiled model: evaluating the outputs", "");
  }
  const size_t segments = path.size();
  const RunStats call_stats = guard.stats();
  {
    std::lock_guard lock(mutex);
    last = std::move(path);  // with calls in parallel: the path of the call that finished last
    totals.device_to_host_copies += call_stats.device_to_host_copies;
    totals.device_to_host_bytes += call_stats.device_to_host_bytes;
  }
  if (telemetry::enabled())
    telemetry::emit({"segment.call", ms_since(t0),
                     {{"segments", std::to_string(segments)}, {"call", std::to_string(call_number)}}});
  return out;
}

Overlay CompiledModelImpl::overlay() const {
  Overlay ov;
  const size_t count = order.size();
  for (size_t k = 0; k < last.size(); ++k) {
    const PathStep& p = last[k];
    const SegmentEntry& e = *p.entry;
    OverlaySegment os;
    os.start = p.pos;
    if (p.is_break) {
      os.stop = p.pos + 1;
      os.start_node = os.stop_node = node_at(p.pos).label();
      os.kind = SegmentKind::Break;
      os.reason = e.break_reason;
    } else {
      os.stop = e.stop;
      os.start_node = node_at(p.pos).label();
      os.stop_node = node_at(e.stop - 1).label();
      os.compiled = e.compiled;
      os.kind = e.compiled ? SegmentKind::Compiled : SegmentKind::EagerSmall;
      os.reason = e.stop < count ? "break: " + e.reason : e.reason;
      if (!e.compiled) os.reason += " (fewer than eager_below = " + std::to_string(options.eager_below) + " nodes)";
      os.host_values = e.host_static;
      if (e.program)  // the kernels of the tier that runs now
        os.fused = fused_groups(e, e.program->current()->tape, *e.traced, [&](size_t n) { return node_at(n).label(); });
      for (const auto& f : os.fused) ov.fused.push_back("segment " + std::to_string(k) + ": " + f.str());
      if (e.compiled) ov.host_folded.insert(ov.host_folded.end(), e.folded.begin(), e.folded.end());
    }
    ov.segments.push_back(std::move(os));
  }
  return ov;
}

}  // namespace detail

std::vector<Value> CompiledModel::operator()(const std::vector<Value>& inputs, const RunOptions& options) const {
  const auto& impl = *impl_;
  const Graph& g = impl.graph();
  std::unordered_map<std::string, Value> given;
  const bool all = !impl.options.static_inputs.empty() && inputs.size() == g.inputs.size();
  if (all) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      auto s = impl.options.static_inputs.find(g.inputs[i].name);
      if (s == impl.options.static_inputs.end()) {
        given[g.inputs[i].name] = inputs[i];
      } else if (!inputs[i].is_none() && detail::fingerprint(inputs[i]) != detail::fingerprint(s->second)) {
        throw OnnxError("compiled model: input '" + s->first + "' is static; it was given " + s->second.describe() +
                        " at compile time and differs in this call (" + inputs[i].describe() +
                        "). Compile again to change it.");
      }
    }
  } else {
    if (inputs.size() > impl.dynamic_inputs.size())
      throw OnnxError("compiled model: " + std::to_string(inputs.size()) + " inputs given; the model takes " +
                      std::to_string(impl.dynamic_inputs.size()) + " besides its static inputs (or " +
                      std::to_string(g.inputs.size()) + " with them)");
    for (size_t i = 0; i < inputs.size(); ++i) given[impl.dynamic_inputs[i]] = inputs[i];
  }
  return impl_->call(std::move(given), options);
}

std::map<std::string, Value> CompiledModel::run_named(const std::map<std::string, Value>& inputs,
                                                     const RunOptions& options) const {
  const auto& impl = *impl_;
  const Graph& g = impl.graph();
  std::unordered_map<std::string, Value> given;
  for (const auto& [name, v] : inputs) {
    const std::string& wanted = name;  // clang before 16 cannot capture structured bindings
    bool known = std::any_of(g.inputs.begin(), g.inputs.end(), [&](const ValueInfo& i) { return i.name == wanted; });
    if (!known) {
      std::string names;
      for (const auto& in : g.inputs) names += (names.empty() ? "" : ", ") + in.name;
      throw OnnxError("run: unknown input '" + name + "' (the model's inputs are: " + names + ")");
    }
    auto s = impl.options.static_inputs.find(name);
    if (s != impl.options.static_inputs.end()) {
      if (!v.is_none() && detail::fingerprint(v) != detail::fingerprint(s->second))
        throw OnnxError("compiled model: input '" + name + "' is static; it was given " + s->second.describe() +
                        " at compile time and differs in this call (" + v.describe() + "). Compile again to change it.");
      continue;
    }
    given[name] = v;
  }
  auto out = impl_->call(std::move(given), options);
  std::map<std::string, Value> named;
  for (size_t i = 0; i < out.size(); ++i) named[g.outputs[i].name] = out[i];
  return named;
}

CompiledModelStats CompiledModel::stats() const {
  std::lock_guard lock(impl_->mutex);
  CompiledModelStats s = impl_->totals;
  s.device = impl_->device;
  for (const auto& [pos, site] : impl_->sites) {
    s.segments.push_back(site.stats);
    s.interpreter_runs += site.stats.interpreter_runs;
    s.fused_runs += site.stats.fused_runs;
  }
  return s;
}

Overlay CompiledModel::overlay() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->overlay();
}

const Model& CompiledModel::model() const { return impl_->model; }

std::string FusedGroup::str() const {
  std::string s = "Fused[";
  for (size_t i = 0; i < nodes.size(); ++i) s += (i ? ", " : "") + nodes[i];
  return s + "]";
}

CompiledModel compile(const Model& model, const std::vector<Value>& example_inputs, CompileModelOptions options) {
  CompiledModel cm;
  cm.impl_ = std::make_shared<detail::CompiledModelImpl>(model, std::move(options));
  cm.impl_->prepare();
  if (!example_inputs.empty()) cm(example_inputs);
  return cm;
}

Overlay overlay(const CompiledModel& compiled) { return compiled.overlay(); }

Overlay overlay(const Model& model, const std::vector<Value>& inputs, CompileModelOptions options) {
  // One call that shows the fused kernels: built before it runs, not on the interpreter tier.
  options.tiered = false;
  return compile(model, inputs, std::move(options)).overlay();
}

}  // namespace smelt::onnx
