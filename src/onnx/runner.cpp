// The eager runner: nodes in topological order over a name -> value map, subgraphs and functions.
#include <algorithm>
#include <new>
#include <queue>
#include <string_view>
#include <stdexcept>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>

#include "smelt/compile.h"
#include "smelt/onnx.h"
#include "src/onnx/device_constants.h"
#include "smelt/transforms.h"
#include "src/onnx/executor.h"
#include "src/onnx/registry.h"
#include "src/ops/op_utils.h"
#include "src/transforms/origin.h"

namespace smelt::onnx {

namespace detail {

Opsets opsets_of(const std::vector<OpsetImport>& list, const Opsets* fallback) {
  Opsets out;
  if (fallback) out = *fallback;
  for (const auto& o : list) out[normalize_domain(o.domain)] = o.version;
  return out;
}

namespace {

bool has_subgraphs(const Node& n) {
  for (const auto& a : n.attributes)
    if (a.g || !a.graphs.empty()) return true;
  return false;
}

/// subgraph_reads as views into the subgraphs' own strings (they outlive any use here).
void subgraph_read_views(const Node& n, std::vector<std::string_view>& out) {
  std::vector<const Graph*> work;
  for (const auto& a : n.attributes) {
    if (a.g) work.push_back(a.g.get());
    for (const auto& g : a.graphs) work.push_back(g.get());
  }
  while (!work.empty()) {
    const Graph* g = work.back();
    work.pop_back();
    for (const auto& m : g->nodes) {
      for (const auto& i : m.inputs)
        if (!i.empty()) out.push_back(i);
      for (const auto& a : m.attributes) {
        if (a.g) work.push_back(a.g.get());
        for (const auto& h : a.graphs) work.push_back(h.get());
      }
    }
    for (const auto& o : g->outputs) out.push_back(o.name);
  }
}

}  // namespace

void subgraph_reads(const Node& n, std::vector<std::string>& out) {
  std::vector<std::string_view> views;
  subgraph_read_views(n, views);
  for (auto v : views) out.emplace_back(v);
}

std::vector<std::string> node_reads(const Node& n) {
  std::vector<std::string> reads;
  for (const auto& in : n.inputs)
    if (!in.empty()) reads.push_back(in);
  subgraph_reads(n, reads);
  std::sort(reads.begin(), reads.end());
  reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
  return reads;
}

std::vector<size_t> topological_order(const std::vector<Node>& nodes) {
  // Kahn's algorithm, preferring file order: producers by name, then in-degrees.
  const size_t count = nodes.size();
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < count; ++i)
    for (const auto& o : nodes[i].outputs)
      if (!o.empty()) producer[o] = i;
  std::vector<std::vector<size_t>> consumers(count);
  std::vector<size_t> indegree(count, 0);
  for (size_t i = 0; i < count; ++i) {
    for (const auto& r : node_reads(nodes[i])) {
      auto it = producer.find(r);
      if (it == producer.end() || it->second == i) continue;
      consumers[it->second].push_back(i);
      ++indegree[i];
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < count; ++i)
    if (indegree[i] == 0) ready.push(i);
  std::vector<size_t> order;
  order.reserve(count);
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t c : consumers[i])
      if (--indegree[c] == 0) ready.push(c);
  }
  if (order.size() != count) {
    for (size_t i = 0; i < count; ++i)
      if (indegree[i] > 0) throw OnnxError(nodes[i].label() + ": the graph has a cycle through this node");
  }
  return order;
}

std::vector<Value> Executor::gather_inputs(const Node& n, const Scope& scope) {
  std::vector<Value> inputs;
  inputs.reserve(n.inputs.size());
  for (const auto& name : n.inputs) {
    if (name.empty()) {
      inputs.emplace_back();
      continue;
    }
    const Value* v = scope.find(name);
    if (!v)
      throw OnnxError(n.label() + ": input '" + name +
                      "' is neither a graph input, an initializer, nor the output of another node");
    inputs.push_back(*v);
  }
  return inputs;
}

void Executor::bind_outputs(const Node& n, std::vector<Value> outputs, Scope& scope,
                            const std::unordered_set<std::string>& keep) {
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    if (n.outputs[k].empty()) continue;
    if (k >= outputs.size() || (outputs[k].is_none() && keep.count(n.outputs[k])))
      throw OnnxError(n.label() + ": output " + std::to_string(k) + " ('" + n.outputs[k] + "') was not produced");
    scope.values[n.outputs[k]] = std::move(outputs[k]);
  }
}

void Executor::run_nodes(const std::vector<Node>& nodes, Scope& scope, const Opsets& opsets,
                         const std::unordered_set<std::string>& keep) const {
  // The plan of this run (who produces what, what each node reads, how often each value is
  // read) is made of views into `nodes`, which outlive the run: no name is copied per node.
  const size_t count = nodes.size();
  struct Produced {
    size_t node;
    int uses = 0;
  };
  std::unordered_map<std::string_view, Produced> producer;
  producer.reserve(count);
  for (size_t i = 0; i < count; ++i)
    for (const auto& o : nodes[i].outputs)
      if (!o.empty()) producer.insert_or_assign(std::string_view(o), Produced{i});  // the last one wins, as in topological_order
  // What node i reads, sorted and unique (node_reads): reads[begin[i], begin[i + 1]).
  std::vector<std::string_view> reads;
  std::vector<size_t> begin(count + 1, 0);
  bool file_order = true;  // every producer comes before its readers: the order is the file's
  for (size_t i = 0; i < count; ++i) {
    begin[i] = reads.size();
    for (const auto& in : nodes[i].inputs)
      if (!in.empty()) reads.push_back(in);
    if (has_subgraphs(nodes[i])) subgraph_read_views(nodes[i], reads);
    auto first = reads.begin() + static_cast<std::ptrdiff_t>(begin[i]);
    std::sort(first, reads.end());
    reads.erase(std::unique(first, reads.end()), reads.end());
    for (auto it = first; it != reads.end(); ++it) {
      auto p = producer.find(*it);
      if (p == producer.end()) continue;
      ++p->second.uses;
      if (p->second.node > i) file_order = false;
    }
  }
  begin[count] = reads.size();
  // Kahn's algorithm preferring file order gives the file order itself when it is topological
  // (the ONNX rule, so nearly always); only other graphs (and cycles, which it names) need it.
  std::vector<size_t> order;
  if (file_order) {
    order.resize(count);
    for (size_t i = 0; i < count; ++i) order[i] = i;
  } else {
    order = topological_order(nodes);
  }
  // What the values this graph makes weigh, for the run's memory budget: added when bound,
  // taken off when dropped; the rest is given back when the graph is done (or throws).
  RunGuard::Charge charge(guard_);
  std::unordered_map<std::string, int64_t> held;
  int64_t total = 0;
  const bool budgeted = guard_ && guard_->budget() > 0;
  for (size_t i : order) {
    const Node& n = nodes[i];
    if (guard_) guard_->check(n);
    bind_outputs(n, run_node(n, gather_inputs(n, scope), scope, opsets, &nodes), scope, keep);
    if (budgeted) {
      for (const auto& o : n.outputs) {
        if (o.empty()) continue;
        auto it = scope.values.find(o);
        if (it == scope.values.end()) continue;
        int64_t bytes = value_bytes(it->second);
        int64_t& h = held[o];
        total += bytes - h;
        h = bytes;
      }
      charge.set(total, n);
    }
    // Drop inputs nobody reads any more, so large models don't hold every activation.
    for (size_t k = begin[i]; k < begin[i + 1]; ++k) {
      auto p = producer.find(reads[k]);
      if (p == producer.end() || --p->second.uses != 0) continue;
      const std::string name(reads[k]);
      if (keep.count(name)) continue;
      scope.values.erase(name);
      if (!budgeted) continue;
      auto h = held.find(name);
      if (h == held.end()) continue;
      total -= h->second;
      held.erase(h);
      charge.set(total, n);
    }
  }
}

void Executor::check_depth(const Node& n, int depth, const std::string& what) const {
  if (guard_ && depth > guard_->max_depth())
    throw OnnxError(n.label() + ": " + what + " would nest " + std::to_string(depth) +
                    " levels deep, past the run's max_call_depth of " + std::to_string(guard_->max_depth()) +
                    " (RunOptions::max_call_depth)");
}

std::vector<Value> Executor::run_node(const Node& node, const std::vector<Value>& inputs, const Scope& scope,
                                      const Opsets& opsets, const std::vector<Node>* graph) const {
  if (const Function* f = function_for(node)) {
    check_depth(node, scope.depth + 1, "the call of function " + f->name);
    return run_function(*f, node, inputs, scope.depth + 1);
  }
  auto it = opsets.find(node.domain);
  int64_t version = it == opsets.end() ? 0 : it->second;
  OpFn fn = version > 0 ? OpRegistry::global().find(node.domain, node.op_type, version) : nullptr;
  if (!fn)
    throw OnnxError(node.label() + ": operator " + (node.domain.empty() ? "ai.onnx" : node.domain) +
                    "::" + node.op_type + " (opset " + std::to_string(version) + ") is not supported");
  // The subgraph callback captures one pointer, so that std::function keeps it inline instead of
  // allocating on every node.
  struct Caller {
    const Executor* self;
    const Scope& scope;
    const Opsets& opsets;
    const Node& node;
  } caller{this, scope, opsets, node};
  OpContext ctx(
      node, version, inputs,
      [&caller](const Graph& g, const std::vector<Value>& in) {
        const auto& [self, scope, opsets, node] = caller;
        self->check_depth(node, scope.depth + 1, "subgraph '" + g.name + "'");
        // A run stopped inside a subgraph (deadline, cancellation, memory) names the path to the
        // node it stopped at ("Loop 'l' > Add 'step': ..."): the inner node alone may be
        // anonymous or ambiguous.
        try {
          return self->run_graph(g, in, &scope, opsets);
        } catch (const Cancelled& e) {
          throw Cancelled(node.label() + " > " + e.what());
        } catch (const DeadlineExceeded& e) {
          throw DeadlineExceeded(node.label() + " > " + e.what());
        } catch (const OutOfMemory& e) {
          throw OutOfMemory(node.label() + " > " + e.what());
        }
      },
      guard_);
  if (!graph && model_.graph) {
    const auto& top = model_.graph->nodes;
    if (!top.empty() && &node >= top.data() && &node < top.data() + top.size()) graph = &top;
  }
  ctx.set_graph_nodes(graph);
  const bool differentiated = smelt::detail::in_transform();
  const uint64_t mark = differentiated ? transforms::origin_mark() : 0;
  try {
    std::vector<Value> out = fn(ctx);
    if (differentiated) {
      // Under grad/vjp: name this node as the origin of the arrays it made, so that a missing
      // vjp rule says which ONNX node needs it.
      std::vector<Array> made;
      for (const auto& v : out) collect_arrays(v, made);
      transforms::set_origin(made, mark, "ONNX node " + node.label());
    }
    // Evaluate here, not at the end of the graph, so that a kernel or an allocation that fails
    // is reported against this node. Traced values (a compiled segment, onnx::run under
    // smelt::compile) are left to the trace.
    std::vector<Array> arrays;
    for (const auto& v : out) collect_arrays(v, arrays);
    std::erase_if(arrays, [](const Array& a) { return !a.valid() || smelt::detail::is_tracer(a); });
    if (guard_ && guard_->budget() > 0) {
      // The outputs' shapes are known before they are computed: a size from the model that
      // cannot fit the budget is refused now, not after allocating and filling it (found by the
      // fuzzer: Pad, MaxPool and ConvTranspose outputs of 17-300 GB took seconds or the machine).
      int64_t bytes = 0;
      for (const auto& a : arrays) {
        if (a.is_evaluated()) continue;  // already held (an input passed through)
        const int64_t b = a.size() * static_cast<int64_t>(a.itemsize());  // checked when the shape was made
        bytes = bytes > INT64_MAX - b ? INT64_MAX : bytes + b;
      }
      guard_->check_room(bytes, node, "");
    }
    if (!arrays.empty()) eval(std::move(arrays));
    return out;
  } catch (...) {
    rethrow_in_node(node, inputs);
  }
}

std::string node_context(const Node& node, const std::vector<Value>& inputs) {
  std::string s = node.label() + " (inputs ";
  if (inputs.empty()) s += "none";
  for (size_t i = 0; i < inputs.size(); ++i) s += (i ? ", " : "") + inputs[i].describe();
  return s + ")";
}

void rethrow_in_node(const Node& node, const std::vector<Value>& inputs) {
  rethrow_with_context(node_context(node, inputs), node.label());
}

void rethrow_with_context(const std::string& context, const std::string& label) {
  auto message = [&](const std::string& what) {
    // OpContext::fail already starts with the label; say it once, with the inputs.
    std::string rest = !label.empty() && what.rfind(label + ": ", 0) == 0 ? what.substr(label.size() + 2) : what;
    return context + ": " + rest;
  };
  try {
    throw;
  } catch (const Error& e) {
    // Exactly the types below are re-raised with the context; UnknownValueError is the
    // compiler's break signal and names its node already, and subclasses other parts add keep
    // their type and message.
    const std::type_info& t = typeid(e);
    if (t == typeid(InvalidArgument)) throw InvalidArgument(message(e.what()));
    if (t == typeid(ShapeError)) throw ShapeError(message(e.what()));
    if (t == typeid(DtypeError)) throw DtypeError(message(e.what()));
    if (t == typeid(UnsupportedError)) throw UnsupportedError(message(e.what()));
    if (t == typeid(OnnxError)) throw OnnxError(message(e.what()));
    if (t == typeid(OutOfMemory)) throw OutOfMemory(message(e.what()));
    if (t == typeid(DeviceError)) throw DeviceError(message(e.what()));
    if (t == typeid(Error)) throw Error(message(e.what()));
    throw;
  } catch (const std::bad_alloc&) {
    throw OutOfMemory(message("out of memory (std::bad_alloc from the host allocator)"));
  } catch (const std::length_error& e) {
    throw ShapeError(message(std::string("a size is too large (") + e.what() + ")"));
  } catch (const std::exception& e) {
    throw OnnxError(message(e.what()));
  }
}

std::vector<Value> Executor::run_function(const Function& f, const Node& call, const std::vector<Value>& inputs,
                                          int depth) const {
  if (inputs.size() > f.inputs.size())
    throw OnnxError(call.label() + ": " + std::to_string(inputs.size()) + " inputs given; function " + f.name +
                    " takes " + std::to_string(f.inputs.size()));
  Scope scope;
  scope.depth = depth;
  for (size_t i = 0; i < f.inputs.size(); ++i) scope.values[f.inputs[i]] = i < inputs.size() ? inputs[i] : Value();
  // Attributes that refer to the caller's take its value, else the function's default, else go.
  std::vector<Node> body;
  body.reserve(f.nodes.size());
  for (const auto& n : f.nodes) {
    Node m = n;
    m.attributes.clear();
    for (const auto& a : n.attributes) {
      if (a.ref_attr_name.empty()) {
        m.attributes.push_back(a);
        continue;
      }
      const Attribute* src = call.attribute(a.ref_attr_name);
      if (!src)
        for (const auto& d : f.attribute_defaults)
          if (d.name == a.ref_attr_name) src = &d;
      if (!src) continue;
      Attribute copy = *src;
      copy.name = a.name;
      m.attributes.push_back(std::move(copy));
    }
    body.push_back(std::move(m));
  }
  Opsets opsets = opsets_of(f.opsets, &model_opsets_);
  std::unordered_set<std::string> keep(f.outputs.begin(), f.outputs.end());
  run_nodes(body, scope, opsets, keep);
  std::vector<Value> out;
  for (const auto& o : f.outputs) {
    const Value* v = scope.find(o);
    out.push_back(v ? *v : Value());
  }
  return out;
}

std::vector<Value> Executor::run_graph(const Graph& g, const std::vector<Value>& inputs, const Scope* parent,
                                       const Opsets& opsets) const {
  Scope scope;
  scope.parent = parent;
  scope.depth = parent ? parent->depth + 1 : 0;
  for (const auto& [name, value] : g.initializers) scope.values[name] = value;
  if (inputs.size() > g.inputs.size())
    throw OnnxError("subgraph '" + g.name + "': " + std::to_string(inputs.size()) + " inputs given, it takes " +
                    std::to_string(g.inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) scope.values[g.inputs[i].name] = inputs[i];
  std::unordered_set<std::string> keep;
  for (const auto& o : g.outputs) keep.insert(o.name);
  run_nodes(g.nodes, scope, opsets, keep);
  std::vector<Value> out;
  for (const auto& o : g.outputs) {
    const Value* v = scope.find(o.name);
    if (!v) throw OnnxError("subgraph '" + g.name + "': output '" + o.name + "' was not computed");
    out.push_back(*v);
  }
  return out;
}

/// Checks a given input against the graph's declaration: kind, element type and rank.
void check_input(const ValueInfo& info, const Value& v) {
  const TypeInfo& t = info.type;
  auto mismatch = [&] {
    throw OnnxError("run: input '" + info.name + "' expects " + t.to_string() + ", got " + v.describe());
  };
  switch (t.kind) {
    case TypeInfo::Kind::Tensor:
      if (!v.is_tensor() && !v.is_strings()) mismatch();
      if (t.elem_type != ElemType::Undefined && v.elem_type() != t.elem_type) mismatch();
      if (t.shape && t.shape->size() != v.shape().size()) mismatch();
      return;
    case TypeInfo::Kind::Sequence:
      if (!v.is_sequence()) mismatch();
      return;
    case TypeInfo::Kind::Optional:
      if (!v.is_optional() && !v.is_none()) mismatch();
      return;
    case TypeInfo::Kind::Map:
      if (!v.is_map()) mismatch();
      return;
    case TypeInfo::Kind::SparseTensor:
    case TypeInfo::Kind::Opaque:
    case TypeInfo::Kind::Unknown: return;
  }
}

void collect_arrays(const Value& v, std::vector<Array>& out) {
  std::vector<const Value*> work{&v};
  while (!work.empty()) {
    const Value* x = work.back();
    work.pop_back();
    switch (x->kind()) {
      case Value::Kind::Tensor: out.push_back(x->array()); break;
      case Value::Kind::Sequence:
        for (const auto& i : x->items()) work.push_back(&i);
        break;
      case Value::Kind::Optional:
        if (x->content()) work.push_back(&*x->content());
        break;
      case Value::Kind::Map: work.push_back(&x->map_values()); break;
      case Value::Kind::None:
      case Value::Kind::Strings: break;
    }
  }
}

}  // namespace detail

namespace {

using namespace detail;

/// Replaces initializers by the arrays of RunOptions::initializers, checking each names one with
/// the same dtype and shape (and no graph input of that name is given too).
void bind_initializers(const Graph& g, const std::map<std::string, Array>& replace,
                       const std::unordered_map<std::string, Value>& given, Scope& scope) {
  for (const auto& [name, a] : replace) {
    const Value* init = nullptr;
    for (const auto& [n, v] : g.initializers)
      if (n == name) init = &v;
    if (!init) {
      std::string names;
      for (const auto& [n, v] : g.initializers)
        if (v.is_tensor() && is_floating(v.array().dtype())) names += (names.empty() ? "" : ", ") + n;
      throw OnnxError("run: RunOptions::initializers names '" + name + "', which is not an initializer of the model" +
                      (names.empty() ? std::string(" (it has no floating-point initializers)")
                                     : " (its floating-point initializers are: " + names + ")"));
    }
    if (!a.valid()) throw InvalidArgument("run: RunOptions::initializers['" + name + "'] is an empty array handle");
    if (!init->is_tensor() || is_storage_type(init->elem_type()) || init->array().dtype() != a.dtype() ||
        init->array().shape() != a.shape())
      throw OnnxError("run: RunOptions::initializers['" + name + "'] is " + describe(a) + "; the initializer is " +
                      init->describe());
    if (given.count(name))
      throw OnnxError("run: '" + name + "' is given both as a graph input and in RunOptions::initializers");
    scope.values[name] = Value::tensor(a);
  }
}

std::vector<Value> run_bound(const Model& model, std::unordered_map<std::string, Value> given,
                             const RunOptions& options) {
  if (!model.graph) throw OnnxError("run: the model has no graph");
  RunGuard guard(options);
  // The eager runner makes arrays on the CPU whatever the process default is (a GPU when one is
  // present): its operators read shapes and indices on the host. GPU inputs still run their
  // element-wise and matrix work on the GPU, where the inputs are.
  DefaultDeviceScope device_scope(Device::cpu());
  // With a device, the tensor inputs and initializers start there (initializers uploaded once per
  // graph and device), and every operator follows its inputs (the device rule).
  const std::optional<Device> device = options.device;
  if (device) check_device(*device, "run: RunOptions::device");
  const Graph& g = *model.graph;
  Executor exec(model, &guard);
  Scope scope;
  std::unordered_set<std::string> initializer_names;
  for (const auto& [name, value] : g.initializers) {
    scope.values[name] = device ? initializer_on(g, name, value, *device) : value;
    initializer_names.insert(name);
  }
  bind_initializers(g, options.initializers, given, scope);
  for (const auto& in : g.inputs) {
    auto it = given.find(in.name);
    if (it == given.end()) {
      if (initializer_names.count(in.name)) continue;
      if (in.type.kind == TypeInfo::Kind::Optional) {
        scope.values[in.name] = Value();
        continue;
      }
      throw OnnxError("run: missing input '" + in.name + "' (" + in.type.to_string() + ")");
    }
    check_input(in, it->second);
    // Copied, not moved (a Value is a few shared handles): a graph that declares an input name
    // twice reads the same given value again (found by the fuzzer: a moved-from value crashed).
    scope.values[in.name] = device ? value_to_device(it->second, *device) : it->second;
  }
  std::unordered_set<std::string> keep;
  for (const auto& o : g.outputs) keep.insert(o.name);
  exec.run_nodes(g.nodes, scope, exec.model_opsets(), keep);
  std::vector<Value> out;
  std::vector<Array> arrays;
  for (const auto& o : g.outputs) {
    const Value* v = scope.find(o.name);
    if (!v) throw OnnxError("run: output '" + o.name + "' was not computed");
    out.push_back(*v);
    collect_arrays(*v, arrays);
  }
  // Traced outputs (under smelt::compile or a transform) stay lazy: evaluating them would cut
  // the graph a trace or a gradient needs.
  std::erase_if(arrays, [](const Array& a) { return !a.valid() || smelt::detail::is_tracer(a); });
  try {
    eval(arrays);
  } catch (...) {
    // Nodes evaluate their outputs as they run, so little is left here; whatever fails keeps its
    // type (an allocation failure is OutOfMemory with its bytes) and says where it surfaced.
    rethrow_with_context("run: evaluating the outputs", "");
  }
  return out;
}

}  // namespace

std::vector<Value> run(const Model& model, const std::vector<Value>& inputs, const RunOptions& options) {
  if (!model.graph) throw OnnxError("run: the model has no graph");
  const Graph& g = *model.graph;
  if (inputs.size() > g.inputs.size())
    throw OnnxError("run: " + std::to_string(inputs.size()) + " inputs given; the model takes " +
                    std::to_string(g.inputs.size()));
  std::unordered_map<std::string, Value> given;
  for (size_t i = 0; i < inputs.size(); ++i) given[g.inputs[i].name] = inputs[i];
  return run_bound(model, std::move(given), options);
}

std::map<std::string, Array> parameters(const Model& model) {
  if (!model.graph) throw OnnxError("parameters: the model has no graph");
  std::map<std::string, Array> out;
  for (const auto& [name, v] : model.graph->initializers)
    if (v.is_tensor() && !is_storage_type(v.elem_type()) && is_floating(v.array().dtype())) out[name] = v.array();
  return out;
}

std::map<std::string, Value> run_named(const Model& model, const std::map<std::string, Value>& inputs,
                                       const RunOptions& options) {
  if (!model.graph) throw OnnxError("run: the model has no graph");
  const Graph& g = *model.graph;
  std::unordered_map<std::string, Value> given;
  for (const auto& [name, v] : inputs) {
    bool known = false;
    for (const auto& in : g.inputs) known = known || in.name == name;
    if (!known) {
      std::string names;
      for (const auto& in : g.inputs) names += (names.empty() ? "" : ", ") + in.name;
      throw OnnxError("run: unknown input '" + name + "' (the model's inputs are: " + names + ")");
    }
    given[name] = v;
  }
  auto out = run_bound(model, std::move(given), options);
  std::map<std::string, Value> named;
  for (size_t i = 0; i < out.size(); ++i) named[g.outputs[i].name] = out[i];
  return named;
}

}  // namespace smelt::onnx
