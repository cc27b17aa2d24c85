// smelt::compile: trace a function over trees of arrays once per signature, optimize, and replay.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "smelt/array.h"
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
};

struct CompileStats {
  uint64_t traces = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t fallbacks = 0;
};

/// Globally disables compile: compiled functions then call the function eagerly.
/// Also set by the environment variable SMELT_DISABLE_COMPILE=1.
void disable_compile();
void enable_compile();
bool compile_enabled();
/// Traces made by every compiled function of the process.
uint64_t global_trace_count();

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

/// A compiled stateful step `Out f(State&, const In&)` (compile_mut): the state's array leaves
/// are traced inputs and outputs, so a replay reads the current state and the caller's state is
/// rebuilt from the step's results after the call.
template <class State, class In, class Out>
class CompiledMut {
 public:
  CompiledMut(std::function<Out(State&, const In&)> f, CompileOptions options, std::string name)
      : f_(std::move(f)), engine_(detail::make_engine(std::move(options), std::move(name))) {}

  /// Runs one step. On an exception `state` is unchanged.
  Out operator()(State& state, const In& in) const {
    FlatTree flat = flatten_tree(std::tuple<State, In>(state, in));
    bool nested = false;
    for (const auto& a : flat.leaves) nested = nested || detail::is_tracer(a);
    if (nested || !compile_enabled()) {
      State next = state;  // the caller's state changes only once the step has succeeded
      Out out = f_(next, in);
      state = std::move(next);
      return out;
    }
    detail::TraceFn trace = [&](const std::vector<Array>& placeholders, std::string& out_structure) {
      auto traced = unflatten_tree<std::tuple<State, In>>(placeholders, flat.structure);
      Out out = f_(std::get<0>(traced), std::get<1>(traced));
      FlatTree result = flatten_tree(std::pair<Out, State>(std::move(out), std::move(std::get<0>(traced))));
      out_structure = std::move(result.structure);
      return std::move(result.leaves);
    };
    std::string out_structure;
    std::vector<Array> outs = detail::engine_call(*engine_, flat.leaves, flat.structure, trace, out_structure);
    auto [out, next] = unflatten_tree<std::pair<Out, State>>(outs, out_structure);
    state = std::move(next);
    return std::move(out);
  }

  CompileStats stats() const { return detail::engine_stats(*engine_); }

 private:
  std::function<Out(State&, const In&)> f_;
  std::shared_ptr<detail::CompileEngine> engine_;
};

/// Compiles a stateful step `Out f(State& state, const In& input)` (a training step over model
/// and optimizer state). State, In and Out are trees. The state's array leaves are inputs and
/// outputs of the trace: `f` assigns new arrays to them (`s.m = b1 * s.m + ...`) and after each
/// call the caller's state holds the new values. Static leaves of the state (numbers, strings)
/// are part of the key, so keep counters that change every step as arrays. Random keys are
/// explicit in smelt: keep the key in the state and replace it inside `f` with one split from it
/// (random::split), so every step draws new values.
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
