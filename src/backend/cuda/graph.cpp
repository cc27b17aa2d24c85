// CUDA graphs for compiled replays: capture, reading the captured nodes, address patching, launch.
//
// How a call of a compiled entry runs on a stream. The first call replays the tape plainly: it
// builds the kernels and warms cuBLASLt's handle, heuristics and workspace. The second captures:
// the tape's lazy graph is evaluated with every launch of this thread redirected to a private
// capture stream (so that no other thread's work on the caller's stream is captured), and every
// block the work allocates, temporaries included, is kept. The graph is instantiated and launched
// once on the caller's stream. Its buffers stay owned by the graph: intermediates for good,
// outputs until the caller drops them. Later calls bind their buffers to the graph: an input whose
// buffer moved, or an output the caller still holds (a new block is taken), is patched by
// rewriting the kernel, memset and copy node parameters that point into it in the executable graph,
// then the graph launches as one. Inputs on the host, the host steps over them and their copies
// to the GPU (a batch built from host data) run before the launch; the graph reads the uploads.
// Gathers and scatters check their indices after the launch (read_index_checks).
// Anything the capture cannot take (a host synchronization, a
// host<->device copy, a node the driver cannot describe) makes the entry replay plainly for good.
#include "src/backend/cuda/graph.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "smelt/errors.h"
#include "smelt/telemetry.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/runtime.h"
#include "src/core/caching_allocator.h"
#include "src/core/node.h"
#include "src/core/node_state.h"
#include "src/core/stream_state.h"

namespace smelt::cuda {

namespace {

std::atomic<int>& graph_switch() {
  static std::atomic<int> s{[] {
    const char* v = std::getenv("SMELT_CUDA_GRAPHS");
    return (v && std::string(v) == "0") ? 0 : 1;
  }()};
  return s;
}

struct AtomicCounters {
  std::atomic<uint64_t> captures{0}, launches{0}, patched{0}, failed{0}, plain{0};
};
AtomicCounters& counters() {
  static AtomicCounters c;
  return c;
}

// Why a graphed call is computed again by the plain replay: a captured gather or scatter saw an
// index out of range, and only the plain replay raises the eager error for it.
constexpr const char* kBadIndex = "an index is out of range: the plain replay raises the error";

// Kernels may choose vector widths from an address's alignment: a buffer may move only to an
// address with the same remainder, so that every captured kernel stays valid for it.
constexpr uint64_t kAlign = 256;

std::string error_name(CUresult r) {
  const char* name = nullptr;
  if (const DriverApi* d = driver()) d->cuGetErrorName(r, &name);
  return name ? name : "CUDA error " + std::to_string(r);
}

uint64_t address(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

/// The allocator a capture hands out (runtime.h, ThreadCapture): the device's own, keeping a
/// reference to every block, so that no block the graph reads or writes is ever given to
/// anyone else while the graph exists (a temporary freed during the capture would otherwise be).
class CaptureAllocator final : public Allocator {
 public:
  explicit CaptureAllocator(Allocator& real) : real_(real) {}
  BufferPtr allocate(size_t bytes) override {
    // A block that only this list still holds was last used by work already queued on the
    // capture's one stream, so a later step may take it (stream order), as the caching allocator
    // reuses freed blocks in a plain replay: the graph then holds about the plain replay's peak,
    // not every intermediate of the tape. The smallest block that fits, wasting at most half.
    BufferPtr* best = nullptr;
    for (BufferPtr& b : blocks)
      if (b.use_count() == 1 && b->bytes >= bytes && b->bytes / 2 <= bytes && (!best || b->bytes < (*best)->bytes))
        best = &b;
    if (best) return *best;
    BufferPtr b = real_.allocate(bytes);
    blocks.push_back(b);
    return b;
  }
  void release(void* ptr, size_t bytes) override { real_.release(ptr, bytes); }
  MemoryStats stats() const override { return real_.stats(); }
  void reset_peak() override { real_.reset_peak(); }
  void clear_cache() override { real_.clear_cache(); }
  void set_limit(size_t bytes) override { real_.set_limit(bytes); }
  size_t set_cache_limit(size_t bytes) override { return real_.set_cache_limit(bytes); }

  std::vector<BufferPtr> blocks;

 private:
  Allocator& real_;
};

/// Private capture streams, reused by later captures (streams are cheap to keep, slow to make).
class StreamPool {
 public:
  CUstream acquire(int device) {
    {
      std::lock_guard lock(mutex_);
      auto& v = free_[device];
      if (!v.empty()) {
        CUstream s = v.back();
        v.pop_back();
        return s;
      }
    }
    CUstream s = nullptr;
    check(driver()->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate", "cuda graph capture");
    return s;
  }
  void release(int device, CUstream s) {
    std::lock_guard lock(mutex_);
    free_[device].push_back(s);
  }

 private:
  std::mutex mutex_;
  std::map<int, std::vector<CUstream>> free_;
};

StreamPool& stream_pool() {
  static auto* p = new StreamPool();  // never destroyed: its streams live as long as the process
  return *p;
}

/// Clears the thread's capture however the capture ends.
struct CaptureGuard {
  explicit CaptureGuard(const ThreadCapture* c) { set_thread_capture(c); }
  ~CaptureGuard() { set_thread_capture(nullptr); }
  CaptureGuard(const CaptureGuard&) = delete;
  CaptureGuard& operator=(const CaptureGuard&) = delete;
};

// A buffer whose address may change from call to call: an input's, or an output's that the
// caller may still hold when the next call comes.
struct Slot {
  uint64_t base = 0;
  size_t bytes = 0;
};

struct KernelNode {
  CUgraphNode node = nullptr;
  CUDA_KERNEL_NODE_PARAMS params{};
  std::vector<std::vector<unsigned char>> args;  // each parameter's bytes, as captured, then patched
  std::vector<void*> arg_ptrs;                   // into args: what kernelParams points to
  bool dirty = false;
};

struct MemsetNode {
  CUgraphNode node = nullptr;
  CUDA_MEMSET_NODE_PARAMS params{};
  bool dirty = false;
};

struct MemcpyNode {
  CUgraphNode node = nullptr;
  CUDA_MEMCPY3D params{};
  bool dirty = false;
};

// An 8-byte word of a kernel parameter that points into a slot: slot base + delta.
struct KernelSite {
  size_t node, arg, byte, slot;
  uint64_t delta;
};
struct MemsetSite {
  size_t node, slot;
  uint64_t delta;
};
// A device copy's source (`dst` false) or destination that lies in a slot.
struct MemcpySite {
  size_t node, slot;
  bool dst;
  uint64_t delta;
};

struct InputBinding {
  size_t slot;
  int64_t offset;
  Strides strides;
};

struct OutputRecord {
  enum class From { Input, Held, Constant } from;
  size_t index;  // the input slot's first input (Input) or the held buffer (Held)
  BufferPtr constant;
  Shape shape;
  Dtype dtype;
  Strides strides;
  int64_t offset;
};

/// One captured graph: the graph of one stream of one entry.
struct Instance {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  std::vector<Slot> slots;  // [0, num_input_slots): inputs' buffers; then held outputs' buffers
  size_t num_input_slots = 0;
  std::vector<size_t> slot_held;  // per output slot: its index in `held`
  std::vector<InputBinding> inputs;
  std::vector<size_t> slot_first_input;  // per input slot: the first input bound to it
  std::vector<BufferPtr> held;           // every buffer of the graph that no input brings
  std::vector<OutputRecord> outputs;
  std::vector<KernelNode> kernels;
  std::vector<MemsetNode> memsets;
  std::vector<MemcpyNode> memcpys;
  std::vector<KernelSite> kernel_sites;
  std::vector<MemsetSite> memset_sites;
  std::vector<MemcpySite> memcpy_sites;
  std::string unpatchable;  // why buffers may not move (empty: they may)
  std::vector<CUstream> launched_on;
  bool patching = false;  // set while the executable graph is being patched and launched
  // The modules of the captured kernels (compiler.h, LoadedModule): the graph's nodes name their
  // functions, so the modules stay loaded while the graph lives. Released after destroy() has
  // waited for the graph's launches, so their unloads wait for nothing more.
  std::vector<std::shared_ptr<const void>> modules;
  // The validation words of the captured gathers and scatters (runtime.h, defer_index_check):
  // read after every launch, since the captured kernels cannot raise.
  std::vector<BufferPtr> index_checks;

  void destroy(int device) {
    const DriverApi* d = driver();
    if (!d || !exec) return;
    try {
      device_state(device);  // the context is current on this thread
    } catch (const Error&) {
      return;
    }
    // The graph may still run: its buffers go back to the allocator only after it has.
    for (CUstream s : launched_on) d->cuStreamSynchronize(s);
    d->cuGraphExecDestroy(exec);
    d->cuGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
  }
};

/// The slot whose buffer holds address `w`, or -1.
int slot_of(const std::vector<Slot>& slots, uint64_t w) {
  for (size_t s = 0; s < slots.size(); ++s)
    if (w >= slots[s].base && w < slots[s].base + slots[s].bytes) return static_cast<int>(s);
  return -1;
}

/// Whether one end of a captured copy is device memory (a unified address is asked about).
bool on_device(const DriverApi& d, CUmemorytype type, CUdeviceptr ptr) {
  if (type == CU_MEMORYTYPE_DEVICE) return true;
  if (type != CU_MEMORYTYPE_UNIFIED) return false;
  unsigned int actual = 0;
  return d.cuPointerGetAttribute(&actual, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr) == CUDA_SUCCESS &&
         actual == CU_MEMORYTYPE_DEVICE;
}

/// Reads the captured nodes into `g`: kernel parameters (to patch), memset targets; refuses
/// nodes a replay cannot take. Returns why the graph is refused (empty: accepted).
std::string read_nodes(const DriverApi& d, Instance& g, int& num_kernels) {
  size_t n = 0;
  if (CUresult r = d.cuGraphGetNodes(g.graph, nullptr, &n); r != CUDA_SUCCESS) return "cuGraphGetNodes failed: " + error_name(r);
  std::vector<CUgraphNode> nodes(n);
  if (n && d.cuGraphGetNodes(g.graph, nodes.data(), &n) != CUDA_SUCCESS) return "cuGraphGetNodes failed";
  num_kernels = 0;
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type;
    if (CUresult r = d.cuGraphNodeGetType(node, &type); r != CUDA_SUCCESS) return "cuGraphNodeGetType failed: " + error_name(r);
    switch (type) {
      case CU_GRAPH_NODE_TYPE_KERNEL: {
        ++num_kernels;
        KernelNode k;
        k.node = node;
        if (CUresult r = d.cuGraphKernelNodeGetParams(node, &k.params); r != CUDA_SUCCESS)
          return "cuGraphKernelNodeGetParams failed: " + error_name(r);
        // The parameters' layout comes from the function (cuFuncGetParamInfo); a kernel whose
        // layout cannot be read keeps the graph, but its buffers may not move.
        CUfunction f = k.params.func ? k.params.func : reinterpret_cast<CUfunction>(k.params.kern);
        bool readable = k.params.kernelParams != nullptr;
        for (size_t i = 0; readable; ++i) {
          size_t off = 0, size = 0;
          CUresult r = d.cuFuncGetParamInfo(f, i, &off, &size);
          if (r != CUDA_SUCCESS) {
            if (i == 0) readable = false;  // no layout (a zero-parameter kernel is treated alike)
            break;
          }
          const auto* src = static_cast<const unsigned char*>(k.params.kernelParams[i]);
          k.args.emplace_back(src, src + size);
        }
        if (!readable && g.unpatchable.empty())
          g.unpatchable = "the parameters of a captured kernel cannot be read (cuFuncGetParamInfo)";
        k.arg_ptrs.resize(k.args.size());  // pointed at `args` when the node is patched
        k.params.extra = nullptr;
        g.kernels.push_back(std::move(k));
        break;
      }
      case CU_GRAPH_NODE_TYPE_MEMSET: {
        MemsetNode m;
        m.node = node;
        if (CUresult r = d.cuGraphMemsetNodeGetParams(node, &m.params); r != CUDA_SUCCESS)
          return "cuGraphMemsetNodeGetParams failed: " + error_name(r);
        g.memsets.push_back(m);
        break;
      }
      case CU_GRAPH_NODE_TYPE_MEMCPY: {
        MemcpyNode m;
        m.node = node;
        if (CUresult r = d.cuGraphMemcpyNodeGetParams(node, &m.params); r != CUDA_SUCCESS)
          return "cuGraphMemcpyNodeGetParams failed: " + error_name(r);
        // Host memory captured by address would be read again by every replay, long after
        // the copy's source is gone.
        if (!on_device(d, m.params.srcMemoryType, m.params.srcDevice) ||
            !on_device(d, m.params.dstMemoryType, m.params.dstDevice))
          return "the replay copies between the host and the device";
        g.memcpys.push_back(m);
        break;
      }
      case CU_GRAPH_NODE_TYPE_EMPTY: break;
      case CU_GRAPH_NODE_TYPE_HOST:
      case CU_GRAPH_NODE_TYPE_GRAPH:
      case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
      case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT:
      case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
      case CU_GRAPH_NODE_TYPE_MEM_FREE:
      case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
      case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return "the capture holds a node of type " + std::to_string(static_cast<int>(type));
    }
  }
  return "";
}

/// Finds the words of kernel parameters, memset targets and copy ends that point into a slot.
void find_sites(Instance& g) {
  for (size_t k = 0; k < g.kernels.size(); ++k) {
    const auto& args = g.kernels[k].args;
    for (size_t a = 0; a < args.size(); ++a) {
      // Pointers sit at 8-byte-aligned offsets of a parameter (a pointer, or a struct holding
      // pointers); any such word that falls inside a slot's buffer is taken as a pointer into it.
      for (size_t b = 0; b + 8 <= args[a].size(); b += 8) {
        uint64_t w;
        std::memcpy(&w, args[a].data() + b, 8);
        if (int s = slot_of(g.slots, w); s >= 0)
          g.kernel_sites.push_back({k, a, b, static_cast<size_t>(s), w - g.slots[static_cast<size_t>(s)].base});
      }
    }
  }
  for (size_t m = 0; m < g.memsets.size(); ++m)
    if (int s = slot_of(g.slots, g.memsets[m].params.dst); s >= 0)
      g.memset_sites.push_back({m, static_cast<size_t>(s), g.memsets[m].params.dst - g.slots[static_cast<size_t>(s)].base});
  for (size_t m = 0; m < g.memcpys.size(); ++m) {
    const CUDA_MEMCPY3D& p = g.memcpys[m].params;
    if (int s = slot_of(g.slots, p.srcDevice); s >= 0)
      g.memcpy_sites.push_back({m, static_cast<size_t>(s), false, p.srcDevice - g.slots[static_cast<size_t>(s)].base});
    if (int s = slot_of(g.slots, p.dstDevice); s >= 0)
      g.memcpy_sites.push_back({m, static_cast<size_t>(s), true, p.dstDevice - g.slots[static_cast<size_t>(s)].base});
  }
}

class TapeGraph final : public compiler::GraphReplay {
 public:
  /// `split`: the tape's host prologue and device part, when it has host steps: each call runs
  /// the prologue and queues its uploads, and the graph is the device part's, with the uploads
  /// as inputs (patched to each call's).
  TapeGraph(int device, std::string name, std::optional<compiler::HostSplit> split)
      : device_(device), name_(std::move(name)), split_(std::move(split)) {}

  ~TapeGraph() override {
    for (auto& [stream, ps] : streams_)
      if (ps.graph) ps.graph->destroy(device_);
  }

  std::optional<std::vector<Array>> run(const compiler::Tape& tape, const std::vector<Array>& inputs) override {
    if (!graphs_enabled()) return std::nullopt;
    const uint64_t stream = smelt::detail::current_stream_id(Device::cuda(device_));
    // Events are emitted after the lock is released: a subscriber may call this function.
    std::vector<telemetry::Event> events;
    std::optional<std::vector<Array>> result;
    if (failed_flag_.load()) {
      counters().plain++;
      return std::nullopt;
    }
    PerStream* ps = nullptr;
    {
      std::lock_guard lock(mutex_);  // only the map: streams never wait for each other's calls
      ps = &streams_[stream];
    }
    {
      std::lock_guard lock(ps->mutex);
      result = run_locked(tape, inputs, *ps, stream, events);
    }
    for (const auto& e : events) telemetry::emit(e);
    return result;
  }

 private:
  /// One stream's graph. Its own lock: calls on different streams (one smelt::Stream per thread)
  /// capture, patch, launch and wait side by side; calls on one stream take turns.
  struct PerStream {
    std::mutex mutex;
    uint64_t calls = 0;
    std::unique_ptr<Instance> graph;
  };

  std::optional<std::vector<Array>> run_locked(const compiler::Tape& tape, const std::vector<Array>& inputs,
                                               PerStream& ps, uint64_t stream, std::vector<telemetry::Event>& events) {
    if (failed_flag_.load()) {  // another stream failed while this call waited
      counters().plain++;
      return std::nullopt;
    }
    if (ps.calls++ == 0) {  // the warm-up call: kernels built, libraries initialized
      counters().plain++;
      return std::nullopt;
    }
    // The host prologue runs and its uploads are queued first; lazy inputs queue their own work
    // now, on the caller's stream, before the graph's.
    std::vector<Array> bound = split_ ? compiler::host_prologue_inputs(tape, *split_, inputs) : inputs;
    bool lazy = false;
    for (const Array& a : bound) lazy = lazy || !detail::is_evaluated(a.node());
    if (lazy) eval(bound);
    const compiler::Tape& replayed = split_ ? split_->device : tape;
    if (!ps.graph) return capture(replayed, bound, ps, stream, events);
    std::string why;
    std::optional<std::vector<Array>> result;
    try {
      result = relaunch(*ps.graph, bound, why);
    } catch (const Error& e) {
      if (!ps.graph->patching) throw;  // e.g. no memory for a new output: nothing was changed
      fail(e.what(), events);          // a failed patch or launch leaves the graph in an unknown state
      ps.graph->destroy(device_);
      ps.graph.reset();
      counters().plain++;
      return std::nullopt;
    }
    if (!result) {
      counters().plain++;
      if (telemetry::enabled()) events.push_back({"cuda.graph.plain", 0.0, {{"function", name_}, {"reason", why}}});
    }
    return result;
  }

  void fail(const std::string& why, std::vector<telemetry::Event>& events) {
    {
      std::lock_guard lock(mutex_);
      if (failed_.empty()) failed_ = why;
    }
    failed_flag_.store(true);
    counters().failed++;
    if (telemetry::enabled()) events.push_back({"cuda.graph.fallback", 0.0, {{"function", name_}, {"reason", why}}});
  }

  std::optional<std::vector<Array>> capture(const compiler::Tape& tape, const std::vector<Array>& inputs, PerStream& ps,
                                            uint64_t stream_id, std::vector<telemetry::Event>& events) {
    const auto t0 = std::chrono::steady_clock::now();
    DeviceState& ds = device_state(device_);
    const DriverApi& d = *driver();
    auto g = std::make_unique<Instance>();
    CaptureAllocator keep(allocator(Device::cuda(device_)));
    std::vector<Array> values;
    std::string why;
    CUstream cs = stream_pool().acquire(device_);
    if (CUresult r = d.cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_RELAXED); r != CUDA_SUCCESS) {
      why = "cuStreamBeginCapture failed: " + error_name(r);
    } else {
      {
        const ThreadCapture tc{device_, cs, &keep, &g->modules, &g->index_checks};
        CaptureGuard guard(&tc);
        try {
          values = compiler::replay_tape_values(tape, inputs);
          std::vector<Array> outs;
          for (int o : tape.outputs) outs.push_back(values[static_cast<size_t>(o)]);
          // Only the outputs (and inputs) stay referenced here: an intermediate's buffer goes
          // back to `keep` once the steps that read it have run, for later steps to reuse.
          std::vector<char> needed(values.size(), 0);
          for (int o : tape.outputs) needed[static_cast<size_t>(o)] = 1;
          for (int i = 0; i < tape.num_inputs && static_cast<size_t>(i) < values.size(); ++i) needed[static_cast<size_t>(i)] = 1;
          for (size_t i = 0; i < values.size(); ++i)
            if (!needed[i]) values[i] = Array();
          eval(outs);
        } catch (const std::exception& e) {
          why = e.what();  // a synchronization or host read inside the replay, most often
        }
      }
      const CUresult end = d.cuStreamEndCapture(cs, &g->graph);
      if (why.empty() && end != CUDA_SUCCESS) why = "cuStreamEndCapture failed: " + error_name(end);
    }
    stream_pool().release(device_, cs);
    // One reference per module is enough (a kernel launched many times was added each time).
    std::sort(g->modules.begin(), g->modules.end());
    g->modules.erase(std::unique(g->modules.begin(), g->modules.end()), g->modules.end());
    if (why.empty()) why = bind(tape, inputs, values, keep, *g);
    int num_kernels = 0;
    if (why.empty()) why = read_nodes(d, *g, num_kernels);
    // One kernel is graphed too: a graph launch costs the host less than the plain replay of
    // even one fused step (W4's RMSNorm, one row kernel: 2.9 us a call against 4.7 with its
    // weight's cast kernel, and 87 us event-timed on the H200 when it replayed plainly against 79).
    if (why.empty() && num_kernels == 0) why = "the replay launches no kernel: there is nothing to graph";
    if (why.empty()) {
      find_sites(*g);
      if (CUresult r = d.cuGraphInstantiate(&g->exec, g->graph, 0); r != CUDA_SUCCESS)
        why = "cuGraphInstantiate failed: " + error_name(r);
    }
    if (why.empty()) {
      CUstream s = current_stream(ds);
      if (CUresult r = d.cuGraphLaunch(g->exec, s); r != CUDA_SUCCESS) why = "cuGraphLaunch failed: " + error_name(r);
      else g->launched_on.push_back(s);
    }
    if (!why.empty()) {
      // Nothing captured ran: the plain replay computes this call. The values made here are
      // dropped unread (their buffers never held results).
      if (g->exec) d.cuGraphExecDestroy(g->exec);
      if (g->graph) d.cuGraphDestroy(g->graph);
      g->exec = nullptr;
      fail(why, events);
      counters().plain++;
      return std::nullopt;
    }
    wait_if_multi_stream(ds, g->launched_on.back());
    const bool indices_in_range = read_index_checks(*g);
    std::vector<Array> outs;
    for (int o : tape.outputs) outs.push_back(values[static_cast<size_t>(o)]);
    counters().captures++;
    counters().launches++;
    if (telemetry::enabled()) {
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      events.push_back({"cuda.graph.capture",
                        ms,
                        {{"function", name_},
                         {"stream", std::to_string(stream_id)},
                         {"kernels", std::to_string(num_kernels)},
                         {"held_buffers", std::to_string(g->held.size())},
                         {"patchable", g->unpatchable.empty() ? "yes" : g->unpatchable}}});
    }
    ps.graph = std::move(g);
    if (!indices_in_range) {
      counters().plain++;
      if (telemetry::enabled()) events.push_back({"cuda.graph.plain", 0.0, {{"function", name_}, {"reason", kBadIndex}}});
      return std::nullopt;
    }
    return outs;
  }

  /// After a launch: whether every captured index check passed (one synchronization, only for
  /// graphs that gather or scatter). When one did not, the call runs the plain replay, which
  /// raises the eager error naming the first bad index; the graph stays for later calls.
  bool read_index_checks(const Instance& g) {
    if (g.index_checks.empty()) return true;
    const DriverApi& d = *driver();
    DeviceState& ds = device_state(device_);
    CUstream stream = current_stream(ds);
    std::vector<uint64_t> words(g.index_checks.size());
    for (size_t i = 0; i < words.size(); ++i)
      check(d.cuMemcpyDtoHAsync(&words[i], static_cast<CUdeviceptr>(address(g.index_checks[i]->ptr)), sizeof(uint64_t), stream),
            "cuMemcpyDtoHAsync", name_);
    check(d.cuStreamSynchronize(stream), "cuStreamSynchronize", name_);
    return std::all_of(words.begin(), words.end(), [](uint64_t w) { return w == ~uint64_t{0}; });
  }

  /// Records which buffers the graph uses: the inputs' (slots), those it holds, and where each
  /// output lives. Returns why the capture cannot be bound (empty: bound).
  std::string bind(const compiler::Tape& tape, const std::vector<Array>& inputs, const std::vector<Array>& values,
                   CaptureAllocator& keep, Instance& g) {
    std::map<const Buffer*, size_t> input_slot;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto& n = inputs[i].node();
      if (!n.buffer) return "input " + std::to_string(i) + " has no buffer";
      auto [it, fresh] = input_slot.emplace(n.buffer.get(), g.slots.size());
      if (fresh) {
        g.slots.push_back({address(n.buffer->ptr), n.buffer->bytes});
        g.slot_first_input.push_back(i);
      }
      g.inputs.push_back({it->second, n.offset, n.strides});
    }
    g.num_input_slots = g.slots.size();
    std::map<const Buffer*, BufferPtr> constants;
    for (const auto& [id, a] : tape.constants)
      if (a.node().buffer) constants.emplace(a.node().buffer.get(), a.node().buffer);
    std::map<const Buffer*, size_t> held;
    auto hold = [&](const BufferPtr& b) {
      if (!b || input_slot.count(b.get()) || constants.count(b.get())) return;
      if (held.emplace(b.get(), g.held.size()).second) g.held.push_back(b);
    };
    for (const BufferPtr& b : keep.blocks) hold(b);
    for (const Array& v : values)
      if (v.valid() && detail::is_evaluated(v.node())) hold(v.node().buffer);
    std::map<size_t, size_t> output_slot;  // held index -> slot
    for (int o : tape.outputs) {
      const auto& n = values[static_cast<size_t>(o)].node();
      if (!n.buffer) return "an output has no buffer";
      OutputRecord r{OutputRecord::From::Held, 0, nullptr, n.shape, n.dtype, n.strides, n.offset};
      if (auto it = input_slot.find(n.buffer.get()); it != input_slot.end()) {
        r.from = OutputRecord::From::Input;
        r.index = it->second;
      } else if (auto c = constants.find(n.buffer.get()); c != constants.end()) {
        r.from = OutputRecord::From::Constant;
        r.constant = c->second;
      } else {
        auto h = held.find(n.buffer.get());
        if (h == held.end()) return "an output's buffer is not among the capture's";
        r.index = h->second;
        if (output_slot.emplace(r.index, g.slots.size()).second) {
          g.slots.push_back({address(n.buffer->ptr), n.buffer->bytes});
          g.slot_held.push_back(r.index);
        }
      }
      g.outputs.push_back(std::move(r));
    }
    return "";
  }

  /// Binds this call's buffers to the graph (patching what moved) and launches it; nullopt (and
  /// `why`) when the call cannot be bound.
  std::optional<std::vector<Array>> relaunch(Instance& g, const std::vector<Array>& inputs, std::string& why) {
    const DriverApi& d = *driver();
    DeviceState& ds = device_state(device_);
    std::vector<uint64_t> base(g.slots.size());
    std::vector<const Buffer*> bound(g.num_input_slots, nullptr);
    std::vector<char> moved(g.slots.size(), 0);
    for (size_t s = 0; s < g.slots.size(); ++s) base[s] = g.slots[s].base;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto& n = inputs[i].node();
      const InputBinding& b = g.inputs[i];
      if (!n.buffer) {
        why = "input " + std::to_string(i) + " has no buffer";
        return std::nullopt;
      }
      // The captured kernels bake in each input's strides and offset.
      if (n.offset != b.offset || n.strides != b.strides) {
        why = "input " + std::to_string(i) + " has other strides or another offset than at the capture";
        return std::nullopt;
      }
      if (!bound[b.slot]) {
        bound[b.slot] = n.buffer.get();
        base[b.slot] = address(n.buffer->ptr);
      } else if (bound[b.slot] != n.buffer.get()) {
        why = "inputs that shared a buffer at the capture no longer do";
        return std::nullopt;
      }
    }
    std::vector<BufferPtr> fresh(g.slots.size());
    for (size_t s = g.num_input_slots; s < g.slots.size(); ++s) {
      const BufferPtr& h = g.held[g.slot_held[s - g.num_input_slots]];
      if (h.use_count() > 1) {  // the caller still holds the last call's output: write a new one
        if (!g.unpatchable.empty()) {
          why = "an output of the last call is still held and " + g.unpatchable;
          return std::nullopt;
        }
        fresh[s] = allocator(Device::cuda(device_)).allocate(h->bytes);
        base[s] = address(fresh[s]->ptr);
      }
    }
    bool any = false;
    for (size_t s = 0; s < g.slots.size(); ++s) {
      if (base[s] == g.slots[s].base) continue;
      if (base[s] % kAlign != g.slots[s].base % kAlign) {
        why = "a buffer moved to an address of another alignment";
        return std::nullopt;
      }
      moved[s] = 1;
      any = true;
    }
    if (any && !g.unpatchable.empty()) {
      why = "an input buffer moved and " + g.unpatchable;
      return std::nullopt;
    }
    g.patching = true;
    if (any) {
      for (const KernelSite& site : g.kernel_sites) {
        if (!moved[site.slot]) continue;
        const uint64_t w = base[site.slot] + site.delta;
        std::memcpy(g.kernels[site.node].args[site.arg].data() + site.byte, &w, 8);
        g.kernels[site.node].dirty = true;
      }
      for (const MemsetSite& site : g.memset_sites) {
        if (!moved[site.slot]) continue;
        g.memsets[site.node].params.dst = base[site.slot] + site.delta;
        g.memsets[site.node].dirty = true;
      }
      for (const MemcpySite& site : g.memcpy_sites) {
        if (!moved[site.slot]) continue;
        CUDA_MEMCPY3D& p = g.memcpys[site.node].params;
        (site.dst ? p.dstDevice : p.srcDevice) = base[site.slot] + site.delta;
        g.memcpys[site.node].dirty = true;
      }
      for (KernelNode& k : g.kernels) {
        if (!k.dirty) continue;
        for (size_t i = 0; i < k.args.size(); ++i) k.arg_ptrs[i] = k.args[i].data();
        k.params.kernelParams = k.arg_ptrs.data();
        check(d.cuGraphExecKernelNodeSetParams(g.exec, k.node, &k.params), "cuGraphExecKernelNodeSetParams", name_);
        k.dirty = false;
      }
      for (MemsetNode& m : g.memsets) {
        if (!m.dirty) continue;
        check(d.cuGraphExecMemsetNodeSetParams(g.exec, m.node, &m.params, ds.ctx), "cuGraphExecMemsetNodeSetParams", name_);
        m.dirty = false;
      }
      for (MemcpyNode& m : g.memcpys) {
        if (!m.dirty) continue;
        check(d.cuGraphExecMemcpyNodeSetParams(g.exec, m.node, &m.params, ds.ctx), "cuGraphExecMemcpyNodeSetParams", name_);
        m.dirty = false;
      }
      for (size_t s = 0; s < g.slots.size(); ++s) {
        g.slots[s].base = base[s];
        if (fresh[s]) g.held[g.slot_held[s - g.num_input_slots]] = fresh[s];
      }
    }
    CUstream stream = current_stream(ds);
    check(d.cuGraphLaunch(g.exec, stream), "cuGraphLaunch", name_);
    if (std::find(g.launched_on.begin(), g.launched_on.end(), stream) == g.launched_on.end()) g.launched_on.push_back(stream);
    g.patching = false;
    wait_if_multi_stream(ds, stream);
    counters().launches++;
    if (any) counters().patched++;
    if (!read_index_checks(g)) {
      why = kBadIndex;
      return std::nullopt;
    }
    std::vector<Array> outs;
    outs.reserve(g.outputs.size());
    for (const OutputRecord& r : g.outputs) {
      const BufferPtr& buffer = r.from == OutputRecord::From::Held       ? g.held[r.index]
                                : r.from == OutputRecord::From::Constant ? r.constant
                                                                         : inputs[g.slot_first_input[r.index]].node().buffer;
      outs.push_back(detail::make_leaf(r.shape, r.dtype, Device::cuda(device_), buffer, r.strides, r.offset));
    }
    return outs;
  }

  /// With several streams every node waits for its stream at its end (runtime.h, finish_node);
  /// a graph does so once for all its nodes.
  void wait_if_multi_stream(const DeviceState& ds, CUstream stream) {
    if (ds.multi_stream.load()) check(driver()->cuStreamSynchronize(stream), "cuStreamSynchronize", name_);
  }

  const int device_;
  const std::string name_;
  const std::optional<compiler::HostSplit> split_;  // the host prologue, when the tape has one
  std::mutex mutex_;                       // guards streams_ (the map, not its entries) and failed_
  std::map<uint64_t, PerStream> streams_;  // by smelt stream id: a graph uses its stream's workspaces
  std::string failed_;                     // why this entry replays plainly for good
  std::atomic<bool> failed_flag_{false};   // failed_ is set
};

}  // namespace

bool graphs_enabled() { return graph_switch().load(std::memory_order_relaxed) != 0; }
void set_graphs_enabled(bool on) { graph_switch() = on ? 1 : 0; }

GraphCounters graph_counters() {
  auto& c = counters();
  return {c.captures.load(), c.launches.load(), c.patched.load(), c.failed.load(), c.plain.load()};
}

std::unique_ptr<compiler::GraphReplay> make_tape_graph(const compiler::Tape& tape, const std::string& name) {
  if (!graphs_enabled() || tape.steps.empty()) return nullptr;
  // Inputs and steps on one GPU: a graph captures one device's stream. Constants may live
  // elsewhere (a host scalar becomes a kernel literal); a step that copies one from the host is
  // refused when the capture is read (read_nodes). Host inputs, the host steps over them and
  // their copies to the GPU (a batch made on the host, device.h rule 2) are a prologue that runs
  // before each launch (compiler::split_host_prologue).
  std::optional<Device> device;
  for (int i = 0; i < tape.num_inputs && !device; ++i)
    if (tape.values[static_cast<size_t>(i)].device.type == Device::Type::Cuda) device = tape.values[static_cast<size_t>(i)].device;
  for (size_t i = 0; i < tape.steps.size() && !device; ++i)
    if (tape.steps[i].device.type == Device::Type::Cuda) device = tape.steps[i].device;
  if (!device) return nullptr;
  // Why a GPU tape gets no graph, once per trace (telemetry `cuda.graph.none`): the user sees
  // which input or step keeps the entry on one launch per kernel.
  auto none = [&](const std::string& why) -> std::unique_ptr<compiler::GraphReplay> {
    if (telemetry::enabled()) telemetry::emit({"cuda.graph.none", 0.0, {{"function", name}, {"reason", why}}});
    return nullptr;
  };
  for (int i = 0; i < tape.num_inputs; ++i) {
    const Device d = tape.values[static_cast<size_t>(i)].device;
    if (d.type == Device::Type::Cuda && !(d == *device))
      return none("input " + std::to_string(i) + " is on " + d.str() + ", not on " + device->str());
  }
  std::string why;
  std::optional<compiler::HostSplit> split;
  try {
    split = compiler::split_host_prologue(tape, *device, why);
  } catch (const Error& e) {  // the split's tape failed its check: replay plainly, never fail the trace
    return none(std::string("the host prologue could not be split off: ") + e.what());
  }
  if (!split) return none(why);
  if (split->host_steps.empty()) split.reset();  // the tape is its own device part
  else if (split->device.steps.empty()) return none("the tape runs no step on " + device->str());
  const DriverApi* d = driver();  // after the device checks: CPU tapes never load the driver
  if (!d) return none("the CUDA driver is not loaded");
  if (!d->graphs_missing.empty()) return none("the driver lacks " + d->graphs_missing);
  return std::make_unique<TapeGraph>(device->index, name, std::move(split));
}

}  // namespace smelt::cuda
