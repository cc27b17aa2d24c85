// The compile engine: keys, the LRU cache with miss explanations, tracing, and replay.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <future>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "smelt/compile.h"
#include "smelt/errors.h"
#include "smelt/telemetry.h"
#include "smelt/transforms.h"
#include "src/codegen/kernel_builder.h"
#include "src/compile/graph_replay.h"
#include "src/compile/passes.h"
#include "src/compile/shapeless.h"
#include "src/compile/tape.h"
#include "src/compile/tiered.h"
#if SMELT_HAS_CUDA
#include "src/backend/cuda/compiler.h"
#endif
#include "src/core/node.h"

namespace smelt {

namespace {

std::atomic<uint64_t> g_traces{0};

std::atomic<int>& compile_switch() {
  // 1 enabled, 0 disabled; the environment decides the initial value.
  static std::atomic<int> s{[] {
    const char* v = std::getenv("SMELT_DISABLE_COMPILE");
    return (v && std::string(v) != "0" && std::string(v) != "") ? 0 : 1;
  }()};
  return s;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void disable_compile() { compile_switch() = 0; }
void enable_compile() { compile_switch() = 1; }
bool compile_enabled() { return compile_switch() != 0; }
uint64_t global_trace_count() { return g_traces.load(); }
void wait_for_kernel_builds() {
  codegen::wait_for_background_builds();
#if SMELT_HAS_CUDA
  cuda::wait_for_prebuilds();
#endif
}

namespace detail {

// Inside a transform (grad, jvp, ...) a compiled function runs its function directly, as it does
// on tracers, so the transform sees (and differentiates) the ops it builds.
bool is_tracer(const Array& a) { return (a.valid() && a.node().tracer) || in_transform(); }

/// What one call's inputs look like: the part of the key that is compared component-wise.
struct CallKey {
  std::string structure;  // tree structure and static leaves
  // The default device of the call (arrays f makes from nothing go there: device.h, rule 1) and
  // every input's device (an op's device follows its inputs': rule 3). The trace bakes both in.
  Device device;
  std::vector<Device> devices;
  std::vector<Dtype> dtypes;
  // Ranks only (as [-1,...]) when shapeless, except for inputs with a zero-size axis: ops take
  // other paths for empty arrays (softmax, logsumexp, max's check), so those keep their shape.
  std::vector<Shape> shapes;

  bool operator==(const CallKey&) const = default;
  size_t hash() const {
    auto device_bits = [](Device d) { return static_cast<size_t>(d.type) << 16 | static_cast<size_t>(d.index); };
    size_t h = std::hash<std::string>()(structure) ^ device_bits(device);
    for (auto d : devices) h = h * 31 + device_bits(d);
    for (auto d : dtypes) h = h * 31 + static_cast<size_t>(d);
    for (auto& s : shapes) {
      h = h * 131 + s.size();
      for (auto x : s) h = h * 31 + static_cast<size_t>(x);
    }
    return h;
  }
};

struct CallKeyHash {
  size_t operator()(const CallKey& s) const { return s.hash(); }
};

struct Entry {
  CallKey signature;
  std::string out_structure;
  // The optimized tape (unfused while its kernels build, then fused), with its shapeless plan
  // (an entry that serves any shape of its ranks) or its device-graph replayer.
  std::unique_ptr<compiler::TieredProgram> program;
  // The function could not be traced or lowered for this signature and runs eagerly (fallback
  // Eager). Remembered like any entry so that later calls neither re-trace nor repeat the event.
  bool eager = false;
};

bool has_zero_axis(const Shape& s) { return std::find(s.begin(), s.end(), 0) != s.end(); }

/// True when a shapeless key component stands for every shape of its rank.
bool rank_only(const Shape& key) { return !key.empty() && key[0] == -1; }

class CompileEngine {
 public:
  CompileEngine(CompileOptions options, std::string name) : options_(std::move(options)), name_(std::move(name)) {}

  std::vector<Array> call(const std::vector<Array>& inputs, const std::string& structure, const TraceFn& trace,
                          std::string& out_structure) {
    CallKey sig = make_signature(inputs, structure);
    std::shared_ptr<Entry> entry;
    std::shared_future<std::shared_ptr<Entry>> pending;
    std::promise<std::shared_ptr<Entry>> mine;
    std::string reason;
    // Events are emitted after the lock is released: a subscriber may call this function.
    std::vector<telemetry::Event> events;
    {
      std::lock_guard lock(mutex_);
      if (auto it = index_.find(sig); it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);  // most recently used first
        entry = *it->second;
        stats_.hits++;
        if (telemetry::enabled()) events.push_back({"compile.cache.hit", 0.0, {{"function", name_}}});
      } else if (auto fl = in_flight_.find(sig); fl != in_flight_.end()) {
        pending = fl->second;  // another thread is tracing this signature: wait for its entry
        stats_.hits++;
      } else {
        stats_.misses++;
        reason = explain_miss(sig);
        if (telemetry::enabled()) events.push_back({"compile.cache.miss", 0.0, {{"function", name_}, {"reason", reason}}});
        in_flight_.emplace(sig, mine.get_future().share());
      }
    }
    for (auto& e : events) telemetry::emit(e);
    events.clear();
    if (pending.valid()) {
      entry = pending.get();  // rethrows the tracing thread's error: the same signature fails alike
    } else if (!entry) {
      // Traced and built without the lock, so that other signatures (and hits) of this function
      // proceed on other threads meanwhile.
      try {
        entry = trace_entry(sig, inputs, trace, reason);
      } catch (...) {
        std::lock_guard lock(mutex_);
        in_flight_.erase(sig);  // a failed trace is not cached: the next call traces again
        mine.set_exception(std::current_exception());
        throw;
      }
      {
        std::lock_guard lock(mutex_);
        in_flight_.erase(sig);
        insert(sig, entry, events);
        mine.set_value(entry);
      }
      for (auto& e : events) telemetry::emit(e);
    }
    if (entry->eager) return run_eager(inputs, trace, out_structure);
    out_structure = entry->out_structure;
    const std::shared_ptr<const compiler::Program> program = entry->program->acquire();
    (program->tier == compiler::Tier::Fused ? fused_calls_ : interpreter_calls_)++;
    if (telemetry::enabled())
      telemetry::emit({"compile.call", 0.0, {{"function", name_}, {"tier", compiler::tier_name(program->tier)}}});
    if (program->shapeless) return compiler::replay_shapeless(program->tape, *program->shapeless, inputs, name_);
    if (program->graph)
      if (auto outs = program->graph->run(program->tape, inputs)) return std::move(*outs);
    return compiler::replay_tape(program->tape, inputs);
  }

  CompileStats stats() const {
    std::lock_guard lock(mutex_);
    CompileStats s = stats_;
    s.interpreter_calls = interpreter_calls_.load();
    s.fused_calls = fused_calls_.load();
    return s;
  }

 private:
  CallKey make_signature(const std::vector<Array>& inputs, const std::string& structure) const {
    CallKey s;
    s.structure = structure;
    for (auto& a : inputs)
      if (!a.valid()) throw InvalidArgument(name_ + ": an input array is an empty handle (default-constructed)");
    s.device = default_device();
    for (auto& a : inputs) {
      s.devices.push_back(a.device());
      s.dtypes.push_back(a.dtype());
      bool ranks = options_.shapeless && !has_zero_axis(a.shape());
      s.shapes.push_back(ranks ? Shape(a.ndim(), -1) : a.shape());
    }
    return s;
  }

  // The component of `sig` that differs from the closest cached key, for the miss reason.
  std::string explain_miss(const CallKey& sig) const {
    if (evicted_.count(sig.hash()))
      return "evicted earlier (cache capacity " + std::to_string(options_.cache_capacity) + ")";
    if (lru_.empty()) return "first call";
    std::string best;
    size_t best_diffs = SIZE_MAX;
    for (auto& e : lru_) {
      const CallKey& o = e->signature;
      std::vector<std::string> diffs;
      if (o.structure != sig.structure) diffs.push_back("static arguments or tree structure changed");
      if (!(o.device == sig.device)) diffs.push_back("default device " + o.device.str() + " -> " + sig.device.str());
      if (o.dtypes.size() != sig.dtypes.size()) {
        diffs.push_back("number of inputs " + std::to_string(o.dtypes.size()) + " -> " + std::to_string(sig.dtypes.size()));
      } else {
        for (size_t i = 0; i < sig.dtypes.size(); ++i) {
          if (!(o.devices[i] == sig.devices[i]))
            diffs.push_back("input " + std::to_string(i) + ": device " + o.devices[i].str() + " -> " +
                            sig.devices[i].str());
          if (o.dtypes[i] != sig.dtypes[i])
            diffs.push_back("input " + std::to_string(i) + ": dtype " + dtype_name(o.dtypes[i]) + " -> " +
                            dtype_name(sig.dtypes[i]));
          if (o.shapes[i] == sig.shapes[i]) continue;
          auto key_str = [](const Shape& k) {
            return rank_only(k) ? "rank " + std::to_string(k.size()) : "shape " + shape_to_string(k);
          };
          if (options_.shapeless && rank_only(o.shapes[i]) && rank_only(sig.shapes[i]))
            diffs.push_back("input " + std::to_string(i) + ": rank " + std::to_string(o.shapes[i].size()) + " -> " +
                            std::to_string(sig.shapes[i].size()));
          else if (options_.shapeless)
            diffs.push_back("input " + std::to_string(i) + ": " + key_str(o.shapes[i]) + " -> " + key_str(sig.shapes[i]));
          else
            diffs.push_back("input " + std::to_string(i) + ": shape " + shape_to_string(o.shapes[i]) + " -> " +
                            shape_to_string(sig.shapes[i]));
        }
      }
      if (diffs.size() < best_diffs) {
        best_diffs = diffs.size();
        best = diffs.empty() ? "evicted earlier" : diffs[0];
        for (size_t i = 1; i < diffs.size(); ++i) best += "; " + diffs[i];
      }
    }
    return best;
  }

  std::shared_ptr<Entry> trace_entry(const CallKey& sig, const std::vector<Array>& inputs, const TraceFn& trace,
                                     const std::string& reason) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<Array> placeholders;
    for (auto& a : inputs) {
      auto n = std::make_shared<Node>();
      n->shape = a.shape();
      n->dtype = a.dtype();
      n->device = a.device();
      n->id = next_node_id();
      n->tracer = true;
      placeholders.emplace_back(std::move(n));
    }
    auto entry = std::make_shared<Entry>();
    entry->signature = sig;
    try {
      std::vector<Array> outs = trace(placeholders, entry->out_structure);
      compiler::Tape tape = compiler::build_tape(placeholders, outs, sig.device);
      {
        std::lock_guard lock(mutex_);
        stats_.traces++;
      }
      g_traces++;
      double trace_ms = ms_since(t0);
      if (telemetry::enabled())
        telemetry::emit({"compile.trace", trace_ms,
                         {{"function", name_}, {"reason", reason}, {"steps", std::to_string(tape.steps.size())}}});
      // Shapeless entries are checked on the traced tape first, so that an error names the op
      // the user wrote, then planned again on the optimized tape that replays.
      const bool shapeless =
          options_.shapeless && std::all_of(sig.shapes.begin(), sig.shapes.end(),
                                            [](const Shape& k) { return k.empty() || rank_only(k); });
      if (shapeless) compiler::prepare_shapeless(tape, name_);
      compiler::PassOptions po{options_.disabled_passes, options_.fuse, options_.dump, name_};
      po.shapeless = shapeless;
      // Each tier's tape gets its own plan (the fused one when the entry switches).
      auto plan = [shapeless, name = name_](compiler::Program& p) {
        if (shapeless) p.shapeless = compiler::plan_shapeless(p.tape, name);
        // Fixed shapes only: a captured graph bakes in every launch's shape.
        else p.graph = compiler::make_graph_replay(p.tape, name);
      };
      entry->program = std::make_unique<compiler::TieredProgram>(std::move(tape), std::move(po),
                                                                 compiler::tiered_enabled(options_.tiered), plan);
    } catch (const UnknownValueError& e) {
      return fallback_or_throw(sig, e.what());
    } catch (const UnsupportedError& e) {
      return fallback_or_throw(sig, e.what());
    }
    warn_retraces();
    return entry;
  }

  std::shared_ptr<Entry> fallback_or_throw(const CallKey& sig, const std::string& what) {
    if (options_.fallback == CompileFallback::Raise) throw;
    {
      std::lock_guard lock(mutex_);
      stats_.fallbacks++;
    }
    if (telemetry::enabled()) telemetry::emit({"compile.fallback", 0.0, {{"function", name_}, {"reason", what}}});
    auto entry = std::make_shared<Entry>();
    entry->signature = sig;
    entry->eager = true;
    return entry;
  }

  std::vector<Array> run_eager(const std::vector<Array>& inputs, const TraceFn& trace, std::string& out_structure) {
    return trace(inputs, out_structure);
  }

  void insert(const CallKey& sig, std::shared_ptr<Entry> entry, std::vector<telemetry::Event>& events) {
    lru_.push_front(std::move(entry));
    index_[sig] = lru_.begin();
    while (lru_.size() > std::max<size_t>(options_.cache_capacity, 1)) {
      auto& victim = lru_.back();
      if (telemetry::enabled())
        events.push_back({"compile.cache.evict", 0.0, {{"function", name_}, {"reason", "capacity " + std::to_string(options_.cache_capacity)}}});
      index_.erase(victim->signature);
      // Remembered (by hash, bounded) so that its next miss says it was evicted.
      if (evicted_.size() >= 16 * std::max<size_t>(options_.cache_capacity, 1)) evicted_.clear();
      evicted_.insert(victim->signature.hash());
      lru_.pop_back();
      stats_.evictions++;
    }
  }

  void warn_retraces() {
    std::string msg;
    {
      std::lock_guard lock(mutex_);
      if (warned_ || options_.retrace_warning <= 0 || stats_.traces <= static_cast<uint64_t>(options_.retrace_warning))
        return;
      warned_ = true;
      msg = "smelt: compiled function '" + name_ + "' has been traced " + std::to_string(stats_.traces) +
            " times; its inputs change shape, dtype or static values on most calls. Consider "
            "shapeless=true or fewer distinct static arguments.";
    }
    std::cerr << msg << "\n";
    if (telemetry::enabled()) telemetry::emit({"compile.retrace_warning", 0.0, {{"function", name_}, {"message", msg}}});
  }

  CompileOptions options_;
  std::string name_;
  mutable std::mutex mutex_;
  std::list<std::shared_ptr<Entry>> lru_;
  std::unordered_map<CallKey, std::list<std::shared_ptr<Entry>>::iterator, CallKeyHash> index_;
  std::unordered_set<size_t> evicted_;  // hashes of evicted keys
  // Signatures being traced now, so that concurrent calls with one signature trace it once.
  std::unordered_map<CallKey, std::shared_future<std::shared_ptr<Entry>>, CallKeyHash> in_flight_;
  CompileStats stats_;
  // Calls by tier (CompileStats): counted outside the lock, which a hit has released by then.
  std::atomic<uint64_t> interpreter_calls_{0};
  std::atomic<uint64_t> fused_calls_{0};
  bool warned_ = false;
};

std::shared_ptr<CompileEngine> make_engine(CompileOptions options, std::string name) {
  return std::make_shared<CompileEngine>(std::move(options), std::move(name));
}

std::vector<Array> engine_call(CompileEngine& engine, const std::vector<Array>& inputs, const std::string& structure,
                               const TraceFn& trace, std::string& out_structure) {
  return engine.call(inputs, structure, trace, out_structure);
}

CompileStats engine_stats(const CompileEngine& engine) { return engine.stats(); }

}  // namespace detail
}  // namespace smelt
