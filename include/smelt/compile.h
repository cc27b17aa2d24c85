// smelt::compile: trace a function over trees of arrays once per signature, optimize, and replay.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "smelt/array.h"
#include "smelt/random.h"
#include "smelt/tree.h"

namespace smelt {

/// What a compiled function does with a function it cannot trace or lower.
enum class CompileFallback : uint8_t {
  Eager,  // run it as plain eager code and emit one `compile.fallback` event naming the op
  Raise,  // throw (tests use this to prove a function compiles fully)
};

struct CompileOptions {
  /// Entries kept per compiled function; the least recently used is evicted past it.
  size_t cache_capacity = 64;
  /// Key on dtypes and ranks only: one trace serves every shape of the traced ranks, and each
  /// replay recomputes the shapes from the real inputs. Tracing raises ShapeError (whatever
  /// `fallback` says) for ops whose parameters fix a shape that would depend on the inputs
  /// (reshape to another fixed shape, broadcast_to, slice, random draws). Inputs with a
  /// zero-size axis keep their exact shape in the key. See docs/compile.md.
  bool shapeless = false;
  /// Fuse element-wise chains into generated kernels.
  bool fuse = true;
  CompileFallback fallback = CompileFallback::Eager;
  /// Warn once (stderr and a `compile.retrace_warning` event) past this many traces.
  int retrace_warning = 32;
  /// Names of passes to skip ("simplify", "cse", "fuse", ...).
  std::vector<std::string> disabled_passes;
  /// When set, each pass's output tape is passed here as text (name, dump).
  std::function<void(const std::string&, const std::string&)> dump;
  /// Tiered execution: a new entry whose fused kernels this process has not loaded yet runs its
  /// tape unfused, through the eager primitives (the same bits), while a background thread
  /// loads them from the disk cache or builds them, then switches to the fused tape. False:
  /// the first call loads or builds every kernel before it runs. SMELT_TIERED=0 or 1 overrides this for
  /// the whole process. See docs/compile.md, "Tiered execution".
  bool tiered = true;
};

struct CompileStats {
  uint64_t traces = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t fallbacks = 0;
  /// Calls of a traced entry by tier: replayed unfused while its kernels were loading or building
  /// (tiered execution), or with every kernel it has (an entry without kernels counts here).
  uint64_t interpreter_calls = 0;
  uint64_t fused_calls = 0;
};

/// Globally disables compile: compiled functions then call the function eagerly.
/// Also set by the environment variable SMELT_DISABLE_COMPILE=1.
void disable_compile();
void enable_compile();
bool compile_enabled();
/// Traces made by every compiled function of the process.
uint64_t global_trace_count();
/// Blocks until every fused kernel queued for the background builder so far is built (or has
/// failed), and every GPU kernel prebuild (SMELT_CUDA_PREBUILD) has finished; a compiled
/// function's or model's next call then runs on the fused tier. For
/// benchmarks and tests that want the steady state; calls never need it.
void wait_for_kernel_builds();

namespace detail {

/// The untyped engine behind every compiled function: works on flat lists of arrays.
class CompileEngine;

/// Traces `fn` on placeholders of the inputs' signature; fn fills the output structure.
using TraceFn = std::function<std::vector<Array>(const std::vector<Array>& inputs, std::string& out_structure)>;

std::shared_ptr<CompileEngine> make_engine(CompileOptions options, std::string name);
/// Runs one call: returns the outputs and the output structure of the entry that served it.
std::vector<Array> engine_call(CompileEngine& engine, const std::vector<Array>& inputs,
                               const std::string& structure, const TraceFn& trace,
                               std::string& out_structure);
CompileStats engine_stats(const CompileEngine& engine);
/// True when an array is a placeholder or depends on one (inside a trace).
bool is_tracer(const Array& a);

template <class F>
struct Signature;
template <class R, class... Args>
struct Signature<std::function<R(Args...)>> {
  using Result = R;
  using ArgsTuple = std::tuple<std::decay_t<Args>...>;
};

}  // namespace detail

/// A compiled function with the signature R(Args...).
template <class R, class... Args>
class Compiled {
 public:
  Compiled(std::function<R(Args...)> f, CompileOptions options, std::string name)
      : f_(std::move(f)), engine_(detail::make_engine(std::move(options), std::move(name))) {}

  R operator()(Args... args) const {
    using ArgsTuple = std::tuple<std::decay_t<Args>...>;
    FlatTree in = flatten_tree(ArgsTuple(args...));
    // Inside another trace (nested compile or a transform), run f so the traces merge.
    bool nested = false;
    for (const auto& a : in.leaves) nested = nested || detail::is_tracer(a);
    if (nested || !compile_enabled()) return f_(std::forward<Args>(args)...);
    detail::TraceFn trace = [&](const std::vector<Array>& placeholders, std::string& out_structure) {
      ArgsTuple traced = unflatten_tree<ArgsTuple>(placeholders, in.structure);
      FlatTree out = flatten_tree(std::apply(f_, traced));
      out_structure = std::move(out.structure);
      return std::move(out.leaves);
    };
    std::string out_structure;
    std::vector<Array> outs = detail::engine_call(*engine_, in.leaves, in.structure, trace, out_structure);
    return unflatten_tree<R>(outs, out_structure);
  }

  CompileStats stats() const { return detail::engine_stats(*engine_); }

 private:
  std::function<R(Args...)> f_;
  std::shared_ptr<detail::CompileEngine> engine_;
};

/// Compiles `f` (any callable over trees). Non-array leaves of the arguments (numbers, strings,
/// enums) are static: each new value is traced anew.
template <class F>
auto compile(F f, CompileOptions options = {}, std::string name = "compiled") {
  using Fn = decltype(std::function{f});
  return [&]<class R, class... Args>(std::function<R(Args...)>*) {
    return Compiled<R, Args...>(std::function<R(Args...)>(std::move(f)), std::move(options), std::move(name));
  }(static_cast<Fn*>(nullptr));
}

namespace detail {

/// True when two flattened states differ in what the cache key sees: the tree structure (and
/// static leaves) or any leaf's dtype or shape. A step that returns such a state makes the next
/// call retrace.
inline bool state_changed(const FlatTree& before, const FlatTree& after) {
  if (before.structure != after.structure || before.leaves.size() != after.leaves.size()) return true;
  for (size_t i = 0; i < before.leaves.size(); ++i)
    if (before.leaves[i].dtype() != after.leaves[i].dtype() || before.leaves[i].shape() != after.leaves[i].shape())
      return true;
  return false;
}

/// The first difference between two states, for the error message.
std::string describe_state_change(const FlatTree& before, const FlatTree& after);

}  // namespace detail

/// A compiled stateful step `Out f(State&, const In&)` (compile_mut): the state's array leaves
/// and the thread's random key (random::thread_key) are traced inputs and outputs, so a replay
/// reads the current state and key, and the caller's state and the thread's key are set from the
/// step's results after the call.
template <class State, class In, class Out>
class CompiledMut {
 public:
  CompiledMut(std::function<Out(State&, const In&)> f, CompileOptions options, std::string name)
      : f_(std::move(f)), name_(name), engine_(detail::make_engine(std::move(options), std::move(name))) {}

  /// Runs one step. On an exception `state` and the thread's key are unchanged.
  Out operator()(State& state, const In& in) const {
    const Array key = random::thread_key();
    using Traced = std::tuple<State, In, Array>;
    FlatTree flat = flatten_tree(Traced(state, in, key));
    bool nested = false;
    for (const auto& a : flat.leaves) nested = nested || detail::is_tracer(a);
    if (nested || !compile_enabled()) {
      State next = state;  // the caller's state changes only once the step has succeeded
      try {
        Out out = f_(next, in);
        state = std::move(next);
        return out;
      } catch (...) {
        random::set_thread_key(key);
        throw;
      }
    }
    detail::TraceFn trace = [&](const std::vector<Array>& placeholders, std::string& out_structure) {
      auto traced = unflatten_tree<Traced>(placeholders, flat.structure);
      // Draws inside f (nn::Dropout) split the traced key, so the key is an input of the tape
      // and the advanced key an output: replays draw new values, as uncompiled steps do.
      random::set_thread_key(std::get<2>(traced));
      Out out = f_(std::get<0>(traced), std::get<1>(traced));
      FlatTree result = flatten_tree(std::tuple<Out, State, Array>(std::move(out), std::move(std::get<0>(traced)),
                                                                   random::thread_key()));
      out_structure = std::move(result.structure);
      return std::move(result.leaves);
    };
    try {
      std::string out_structure;
      std::vector<Array> outs = detail::engine_call(*engine_, flat.leaves, flat.structure, trace, out_structure);
      auto [out, next, next_key] = unflatten_tree<std::tuple<Out, State, Array>>(outs, out_structure);
      check_state_change(flatten_tree(state), flatten_tree(next));
      state = std::move(next);
      random::set_thread_key(next_key);
      return std::move(out);
    } catch (...) {
      random::set_thread_key(key);
      throw;
    }
  }

  CompileStats stats() const { return detail::engine_stats(*engine_); }

 private:
  // A step may change the state's signature once (an optimizer that creates its moments on the
  // first step): the next call retraces for the new state. A change on two consecutive calls
  // would retrace on every step, so it is an error.
  void check_state_change(const FlatTree& before, const FlatTree& after) const {
    const bool changed = detail::state_changed(before, after);
    if (changed && changed_last_->load())
      throw InvalidArgument(name_ + ": the state's structure changed on two consecutive calls (" +
                            detail::describe_state_change(before, after) +
                            "), so every step would be traced again. Initialize the optimizer before the loop "
                            "(opt.init(model) for smelt::optim optimizers) and keep the state's structure, dtypes and shapes fixed.");
    changed_last_->store(changed);
  }

  std::function<Out(State&, const In&)> f_;
  std::string name_;
  std::shared_ptr<detail::CompileEngine> engine_;
  std::shared_ptr<std::atomic<bool>> changed_last_ = std::make_shared<std::atomic<bool>>(false);
};

/// Compiles a stateful step `Out f(State& state, const In& input)` (a training step over model
/// and optimizer state). State, In and Out are trees. The state's array leaves are inputs and
/// outputs of the trace: `f` assigns new arrays to them (`s.m = b1 * s.m + ...`) and after each
/// call the caller's state holds the new values. Static leaves of the state (numbers, strings)
/// are part of the key, so keep counters that change every step as arrays. Draws from the
/// thread's key sequence (random::next_key, nn::Dropout) advance it as the uncompiled step would;
/// a key kept in the state and split inside `f` works too. A step that returns a state of another
/// structure (or leaf dtypes or shapes) than it was given retraces on the next call; doing so on
/// two consecutive calls raises InvalidArgument (initialize optimizers before the loop).
template <class F>
auto compile_mut(F f, CompileOptions options = {}, std::string name = "compiled_mut") {
  using Fn = decltype(std::function{f});
  return [&]<class Out, class State, class In>(std::function<Out(State&, In)>*) {
    using InT = std::decay_t<In>;
    return CompiledMut<State, InT, Out>(std::function<Out(State&, const InT&)>(std::move(f)), std::move(options),
                                        std::move(name));
  }(static_cast<Fn*>(nullptr));
}

/// Compiles a function over a flat list of arrays.
inline Compiled<std::vector<Array>, const std::vector<Array>&> compile_flat(
    std::function<std::vector<Array>(const std::vector<Array>&)> f, CompileOptions options = {},
    std::string name = "compiled") {
  return Compiled<std::vector<Array>, const std::vector<Array>&>(std::move(f), std::move(options), std::move(name));
}

}  // namespace smelt
