// Tape helpers of the compile tests: a function traced as the engine traces it, its steps, the passes run on it.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "smelt/array.h"
#include "src/compile/passes.h"
#include "src/compile/tape.h"
#include "src/core/node.h"

namespace smelt::test {

/// A traced tape of `fn` over placeholders shaped like `examples`, built as the engine builds
/// it, so that passes can be run and inspected one at a time.
inline compiler::Tape trace_tape(const std::function<std::vector<Array>(const std::vector<Array>&)>& fn,
                                 const std::vector<Array>& examples) {
  std::vector<Array> placeholders;
  for (auto& a : examples) {
    auto n = std::make_shared<detail::Node>();
    n->shape = a.shape();
    n->dtype = a.dtype();
    n->device = a.device();
    n->id = detail::next_node_id();
    n->tracer = true;
    placeholders.emplace_back(std::move(n));
  }
  std::vector<Array> outs = fn(placeholders);
  return compiler::build_tape(placeholders, outs, Device::cpu());
}

/// Steps of `kind` on a tape.
inline std::vector<const compiler::Step*> steps_of(const compiler::Tape& tape, PrimKind kind) {
  std::vector<const compiler::Step*> out;
  for (auto& s : tape.steps)
    if (s.prim.kind == kind) out.push_back(&s);
  return out;
}

/// A traced tape after the pass pipeline (fusion included unless `options` turn it off).
inline compiler::Tape optimized_tape(const std::function<std::vector<Array>(const std::vector<Array>&)>& fn,
                                     const std::vector<Array>& examples, compiler::PassOptions options = {}) {
  compiler::Tape tape = trace_tape(fn, examples);
  compiler::run_passes(tape, options);
  return tape;
}

}  // namespace smelt::test
