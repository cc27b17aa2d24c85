// The eval scheduler: a worklist topological order over unevaluated nodes, run one by one.
#include <mutex>
#include <unordered_set>

#include "smelt/errors.h"
#include "smelt/ops.h"
#include "src/backend/backend.h"
#include "src/core/node.h"

#if SMELT_HAS_CUDA
#include "src/backend/cuda/cuda.h"
#endif

namespace smelt {

namespace {

using detail::Node;

// Nodes are shared between threads; one eval at a time keeps the graph mutations simple.
std::recursive_mutex& eval_mutex() {
  static std::recursive_mutex m;
  return m;
}

[[noreturn]] void throw_tracer_eval(const Node& n) {
  // A placeholder has no primitive: it is an argument of the compiled function.
  const std::string what = n.prim.kind == PrimKind::None ? "an argument of the compiled function" : n.prim.str();
  throw UnknownValueError(
      "eval: " + what + " (shape " + shape_to_string(n.shape) + ", " + dtype_name(n.dtype) +
      ") is a traced value whose data is only known when the compiled function runs. Do not call "
      "eval/item/to_vector inside a compiled function; return the array instead, or compute the "
      "value outside and pass it in as a static (non-array) argument.");
}

// Runs one node's primitive and turns it (and its siblings) into evaluated leaves.
void run_node(Node* n) {
  if (n->tracer) throw_tracer_eval(*n);
  std::vector<Array> outputs;
  std::vector<std::shared_ptr<Node>> keep;  // stand-ins for dropped siblings
  if (n->group) {
    auto& g = *n->group;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      auto sib = g.nodes[i].lock();
      if (!sib) {
        sib = detail::make_node(g.shapes[i], g.dtypes[i], n->device, n->prim, {});
        keep.push_back(sib);
      }
      outputs.emplace_back(sib);
    }
  } else {
    // A non-owning handle: the node is alive (held by a consumer or a root), and an owning one
    // would defeat buffer donation, which looks at use counts.
    outputs.emplace_back(std::shared_ptr<Node>(std::shared_ptr<Node>{}, n));
  }
  if (n->prim.kind == PrimKind::Copy && !(n->inputs[0].device() == n->device)) {
    // to_device: a Copy whose input lives elsewhere is a transfer between devices.
#if SMELT_HAS_CUDA
    cuda::transfer(n->inputs[0], outputs[0]);
#else
    throw UnsupportedError("to_device: no device other than the CPU in this build");
#endif
  } else {
    backend_for(n->device).eval(n->prim, n->inputs, outputs);
  }
  for (auto& o : outputs) {
    Node& on = o.node();
    SMELT_ASSERT(on.buffer != nullptr, "eval: " + n->prim.str() + " produced no buffer");
    on.evaluated = true;
    on.prim = Primitive{};
    on.inputs.clear();
    on.group.reset();
  }
}

}  // namespace

void eval(std::vector<Array> arrays) {
  std::lock_guard lock(eval_mutex());
  // Post-order over unevaluated nodes with an explicit stack (graphs can be very deep).
  std::vector<Node*> order;
  std::unordered_set<Node*> visited;
  struct Frame {
    Node* node;
    size_t next_input;
  };
  std::vector<Frame> stack;
  for (auto& a : arrays) {
    if (!a.valid()) throw InvalidArgument("eval: an array is an empty handle (default-constructed)");
    Node* root = &a.node();
    if (root->evaluated || visited.count(root)) continue;
    // Name the value the caller asked for, not the placeholder the walk would reach first.
    if (root->tracer) throw_tracer_eval(*root);
    visited.insert(root);
    stack.push_back({root, 0});
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next_input < f.node->inputs.size()) {
        Node* in = &f.node->inputs[f.next_input++].node();
        if (!in->evaluated && !visited.count(in)) {
          visited.insert(in);
          stack.push_back({in, 0});
        }
        continue;
      }
      order.push_back(f.node);
      stack.pop_back();
    }
  }
  for (Node* n : order) {
    if (n->evaluated) continue;  // a sibling computed it already
    run_node(n);
  }
}

}  // namespace smelt
