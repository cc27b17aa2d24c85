// The eval scheduler: a worklist topological order over unevaluated nodes, each claimed and run once.
//
// Several threads may evaluate graphs that share nodes (captured constants, ONNX initializers,
// a lazy array handed to two threads). There is no process-wide lock: each node is claimed by
// the one thread that runs it, and a thread that needs a node another thread is running waits
// for that node only. A thread holds a claim only while it runs that node's kernel, whose
// inputs are all evaluated by then, so waits can never form a cycle.
#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "smelt/errors.h"
#include "smelt/ops.h"
#include "src/backend/backend.h"
#include "src/core/node.h"
#include "src/core/node_state.h"

#if SMELT_HAS_CUDA
#include "src/backend/cuda/cuda.h"
#endif

namespace smelt {

namespace {

using detail::Node;
using NodePtr = std::shared_ptr<Node>;

[[noreturn]] void throw_tracer_eval(const Node& n) {
  // A placeholder has no primitive: it is an argument of the compiled function.
  const std::string what = n.prim.kind == PrimKind::None ? "an argument of the compiled function" : n.prim.str();
  throw UnknownValueError(
      "eval: " + what + " (shape " + shape_to_string(n.shape) + ", " + dtype_name(n.dtype) +
      ") is a traced value whose data is only known when the compiled function runs. Do not call "
      "eval/item/to_vector inside a compiled function; return the array instead, or compute the "
      "value outside and pass it in as a static (non-array) argument.");
}

/// The claim table, striped: a stripe's mutex guards the transition to evaluated of the nodes
/// that hash to it (their `evaluated`, `prim` and `inputs`), and lists which of them a thread is
/// running now. Waiters sleep on the stripe's condition variable.
struct Stripe {
  std::mutex mutex;
  std::condition_variable done;
  std::vector<const void*> running;  // claim keys; a handful at a time

  bool is_running(const void* key) const { return std::find(running.begin(), running.end(), key) != running.end(); }
};

/// What a claim is on: a multi-output primitive is claimed as a whole, through its group. Unlike
/// prim and inputs, `group` is therefore kept on evaluated nodes: it never changes after
/// construction, so it can be read without the lock.
const void* claim_key(const Node& n) {
  return n.group ? static_cast<const void*>(n.group.get()) : static_cast<const void*>(&n);
}

Stripe& stripe_of(const Node& n) {
  static Stripe* stripes = new Stripe[64];  // never destroyed: nodes may be evaluated during exit
  // Heap objects are 16-byte aligned: the low bits would leave most stripes unused.
  return stripes[(reinterpret_cast<uintptr_t>(claim_key(n)) >> 4) % 64];
}

enum class Claim { Mine, Done, Busy };

Claim try_claim(Node& n) {
  Stripe& s = stripe_of(n);
  std::lock_guard lock(s.mutex);
  if (n.evaluated) return Claim::Done;
  if (s.is_running(claim_key(n))) return Claim::Busy;
  s.running.push_back(claim_key(n));
  return Claim::Mine;
}

/// Ends a claim; the caller holds the stripe's lock, and wakes its waiters after releasing it.
void end_claim_locked(Stripe& s, const Node& n) {
  s.running.erase(std::find(s.running.begin(), s.running.end(), claim_key(n)));
}

/// Gives a claim back (the kernel failed) and wakes the waiters: they claim the node themselves,
/// and so meet the error in their own call.
void release_claim(Node& n) {
  Stripe& s = stripe_of(n);
  {
    std::lock_guard lock(s.mutex);
    end_claim_locked(s, n);
  }
  s.done.notify_all();
}

/// Waits until no thread runs `n`.
void wait_for(Node& n) {
  Stripe& s = stripe_of(n);
  std::unique_lock lock(s.mutex);
  s.done.wait(lock, [&] { return !s.is_running(claim_key(n)); });
}

/// Runs `prim` on `device` over evaluated `inputs`, setting each output's buffer: the backend's
/// kernel, or a transfer for a Copy whose input lives on another device (to_device).
void run_kernel(const Primitive& prim, Device device, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  if (prim.kind == PrimKind::Copy && !(inputs[0].device() == device)) {
#if SMELT_HAS_CUDA
    cuda::transfer(inputs[0], outputs[0]);
#else
    throw UnsupportedError("to_device: no device other than the CPU in this build");
#endif
  } else {
    backend_for(device).eval(prim, inputs, outputs);
  }
  for (auto& o : outputs) SMELT_ASSERT(o.node().buffer != nullptr, "eval: " + prim.str() + " produced no buffer");
}

// Runs a claimed node's primitive and turns it (and its siblings) into evaluated leaves.
void run_claimed(Node* n) {
  if (n->tracer) throw_tracer_eval(*n);
  std::vector<Array> outputs = detail::spare_arrays();
  std::vector<NodePtr> keep;  // stand-ins for dropped siblings
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
    outputs.emplace_back(NodePtr(NodePtr{}, n));
  }
  // Only the claiming thread reads prim and inputs until the node is marked evaluated below:
  // other threads copy `inputs` under the node's lock, and nothing writes them meanwhile.
  run_kernel(n->prim, n->device, n->inputs, outputs);
  // The graph above is freed outside the lock: destroying nodes may take node locks itself.
  // A single output (the common case) hands its input vector over whole: no allocation per node.
  std::vector<Array> graveyard;
  Primitive old_prim;                 // the first output's
  std::vector<Primitive> old_prims;  // its siblings'
  Stripe& s = stripe_of(*n);
  {
    std::lock_guard lock(s.mutex);
    for (auto& o : outputs) {
      Node& on = o.node();
      detail::set_evaluated(on);
      if (graveyard.empty()) {
        graveyard.swap(on.inputs);
      } else {
        for (auto& in : on.inputs) graveyard.push_back(std::move(in));
      }
      on.inputs.clear();
      if (&o == &outputs.front()) old_prim = std::move(on.prim);
      else old_prims.push_back(std::move(on.prim));
      on.prim = Primitive{};
    }
    end_claim_locked(s, *n);
  }
  s.done.notify_all();
  // The graph above is released here (outside the lock), and both lists kept for the next node.
  detail::recycle_arrays(std::move(graveyard));
  detail::recycle_arrays(std::move(outputs));
}

/// Evaluates `n`, which the caller holds: runs it when no other thread does, otherwise waits
/// for the thread that does. Its inputs are evaluated.
void evaluate_one(Node& n) {
  for (;;) {
    switch (try_claim(n)) {
      case Claim::Done: return;
      case Claim::Mine:
        try {
          run_claimed(&n);
        } catch (...) {
          release_claim(n);
          throw;
        }
        return;
      case Claim::Busy: wait_for(n); break;
    }
  }
}

}  // namespace

namespace detail {
std::mutex& node_mutex(const Node& n) { return stripe_of(n).mutex; }

void run_primitive(const Primitive& prim, Device device, const std::vector<Array>& inputs, std::vector<Array>& outputs) {
  // No other thread can reach `outputs` yet: no claim, no lock (run_claimed's work without them).
  run_kernel(prim, device, inputs, outputs);
  for (auto& o : outputs) set_evaluated(o.node());
}
}  // namespace detail

namespace {

/// The nodes one eval has walked: a flat list while it is short (the eager runner evaluates a
/// node or two per call, and a hash set would allocate per insert), a hash set past that.
class Visited {
 public:
  bool count(Node* n) const {
    if (big_count_ == 0) return std::find(small_.begin(), small_.end(), n) != small_.end();
    for (size_t i = slot(n);; i = (i + 1) & (big_.size() - 1)) {
      if (big_[i] == n) return true;
      if (!big_[i]) return false;
    }
  }
  /// Adds `n`; false when it was there already.
  bool insert(Node* n) {
    if (big_count_ == 0) {
      if (std::find(small_.begin(), small_.end(), n) != small_.end()) return false;
      if (small_.size() < kSmall) {
        small_.push_back(n);
        return true;
      }
      grow(4 * kSmall);
      for (Node* m : small_) put(m);
      small_.clear();
    }
    if (2 * (big_count_ + 1) > big_.size()) rehash();
    return put(n);
  }

  /// Empties the set, keeping the memory of a small one for the next walk.
  void clear() {
    small_.clear();
    if (big_count_ == 0) return;
    if (big_.size() > kKeep) std::vector<Node*>().swap(big_);
    else std::fill(big_.begin(), big_.end(), nullptr);
    big_count_ = 0;
  }

 private:
  // Past the flat list: an open-addressing table of node addresses (linear probing, at most half
  // full), which allocates only when it doubles.
  size_t slot(Node* n) const {
    const uint64_t h = (reinterpret_cast<uintptr_t>(n) >> 4) * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(h >> 32) & (big_.size() - 1);
  }
  bool put(Node* n) {
    for (size_t i = slot(n);; i = (i + 1) & (big_.size() - 1)) {
      if (big_[i] == n) return false;
      if (!big_[i]) {
        big_[i] = n;
        ++big_count_;
        return true;
      }
    }
  }
  void grow(size_t size) {
    if (big_.size() < size) big_.assign(size, nullptr);
  }
  void rehash() {
    std::vector<Node*> old(2 * big_.size(), nullptr);
    old.swap(big_);
    big_count_ = 0;
    for (Node* m : old)
      if (m) put(m);
  }

  static constexpr size_t kSmall = 32;
  static constexpr size_t kKeep = 1 << 16;
  std::vector<Node*> small_;
  std::vector<Node*> big_;  // a power of two long once used
  size_t big_count_ = 0;
};

struct Frame {
  NodePtr node;
  bool expanded;
};

/// The walk's lists. Each thread keeps one set between evals, so that evaluating a node or two
/// (the eager runner evaluates after every operator) allocates nothing for the walk; an eval
/// nested in another on the same thread (a kernel that evaluates) gets lists of its own.
struct WalkLists {
  std::vector<NodePtr> order;
  Visited visited;
  std::vector<Frame> stack;
  std::vector<NodePtr> inputs;  // one node's inputs, copied under its lock

  /// Drops every hold (also after a throw) and the memory of a large walk.
  void clear() {
    auto reset = [](auto& v) {
      v.clear();
      if (v.capacity() > 4096) std::remove_reference_t<decltype(v)>().swap(v);
    };
    reset(order);
    reset(stack);
    reset(inputs);
    visited.clear();
  }
};

/// Set when this thread's kept lists are destroyed (thread exit; for the main thread, before the
/// static objects, whose destructors may still evaluate): later evals use lists of their own.
/// Trivially destructible, so it stays readable after that.
thread_local bool kept_walk_gone = false;

/// This thread's lists, and whether an eval on it uses them now.
struct KeptWalk {
  WalkLists lists;
  bool busy = false;
  ~KeptWalk() { kept_walk_gone = true; }
};
thread_local KeptWalk kept_walk;

class WalkScope {
 public:
  WalkScope() {
    if (!kept_walk_gone && !kept_walk.busy) {
      kept_walk.busy = true;
      lists_ = &kept_walk.lists;
    } else {
      own_ = std::make_unique<WalkLists>();
      lists_ = own_.get();
    }
  }
  ~WalkScope() {
    lists_->clear();
    if (!own_) kept_walk.busy = false;
  }
  WalkScope(const WalkScope&) = delete;
  WalkScope& operator=(const WalkScope&) = delete;
  WalkLists& lists() { return *lists_; }

 private:
  WalkLists* lists_;
  std::unique_ptr<WalkLists> own_;
};

}  // namespace

void eval(std::vector<Array> arrays) {
  // Post-order over unevaluated nodes with an explicit stack (graphs can be very deep). The
  // order holds each node it lists, so nodes another thread's run frees stay valid here; each
  // hold is dropped as soon as the node is done, so that donation sees the true use counts.
  WalkScope walk;
  std::vector<NodePtr>& order = walk.lists().order;
  Visited& visited = walk.lists().visited;
  std::vector<Frame>& stack = walk.lists().stack;
  std::vector<NodePtr>& inputs = walk.lists().inputs;
  for (auto& a : arrays) {
    if (!a.valid()) throw InvalidArgument("eval: an array is an empty handle (default-constructed)");
    Node* root = &a.node();
    if (detail::is_evaluated(*root) || visited.count(root)) continue;
    // Name the value the caller asked for, not the placeholder the walk would reach first.
    if (root->tracer) throw_tracer_eval(*root);
    stack.push_back({a.node_ptr(), false});
    while (!stack.empty()) {
      Frame f = std::move(stack.back());
      stack.pop_back();
      if (f.expanded) {
        order.push_back(std::move(f.node));
        continue;
      }
      Node* n = f.node.get();
      if (!visited.insert(n)) continue;
      inputs.clear();
      {
        Stripe& s = stripe_of(*n);
        std::lock_guard lock(s.mutex);
        if (n->evaluated) continue;
        // A node another thread is running is waited for, not walked: its inputs are its
        // runner's (they may be donated to its output right now).
        if (!s.is_running(claim_key(*n)))
          for (auto& in : n->inputs) inputs.push_back(in.node_ptr());
      }
      stack.push_back({std::move(f.node), true});
      // Pushed in reverse, so that inputs are evaluated first to last, as written.
      for (auto it = inputs.rbegin(); it != inputs.rend(); ++it)
        if (!detail::is_evaluated(**it) && !visited.count(it->get()))
          stack.push_back({std::move(*it), false});
    }
  }
  inputs.clear();
  for (auto& n : order) {
    if (!detail::is_evaluated(*n)) evaluate_one(*n);
    n.reset();
  }
}

}  // namespace smelt
