// The transformation rules of the primitive catalogue: each kind's vjp, jvp and batching rule, or
// that it has none.
#pragma once

#include <cstdint>
#include <vector>

#include "smelt/array.h"
#include "src/primitives/primitive.h"

namespace smelt::transforms {

/// What a primitive kind declares for one mode of differentiation.
enum class Rule : uint8_t {
  Full,     // every float output/input pair has a rule
  Partial,  // some parameter values have no rule (the rule raises UnsupportedError naming them);
            // for batching: some operand combinations fall back to a per-example loop
  Loop,     // batching only: one unbatched node per example, stacked (exact, but b nodes)
  Zero,     // the output carries no gradient (integer or bool output, or a piecewise-constant op)
  NoInputs, // nothing to differentiate (constants)
  None,     // no rule: a gradient that must flow through raises UnsupportedError
};

struct RuleInfo {
  Rule vjp;
  Rule jvp;
  const char* note;  // what the rule does, or why there is none (docs/transforms.md repeats it)
  // A row that names only vjp and jvp declares no batching rule.
  Rule batch = Rule::None;
  const char* batch_note = "no batching rule declared";  // what the batching rule does, or why there is none
};

/// The rules table, keyed by primitive kind (a switch without `default:`).
RuleInfo rule_info(PrimKind kind);
const char* rule_name(Rule rule);

/// Cotangents of the inputs of `out`'s node given the cotangent `ct` of `out` (same shape and
/// dtype). One entry per input; an empty handle means no cotangent (an integer input, the
/// condition of a select, indices, ...).
std::vector<Array> vjp_rule(const Array& out, const Array& ct);

/// The tangent of `out` given the tangents of its node's inputs (an empty handle is a zero
/// tangent; at least one is non-empty). An empty result is a zero tangent.
Array jvp_rule(const Array& out, const std::vector<Array>& tangents);

/// The batched outputs of `out`'s node (all its sibling outputs, in order), given its inputs with a
/// leading batch axis of size `b` (`batched[i]`), or empty where input i is the same for every
/// example. Each result has the batch axis in front: [b, ...the output's shape].
std::vector<Array> batch_rule(const Array& out, const std::vector<Array>& batched, int64_t b);

/// ScatterND/GatherND indices [b, ..., k] with each row's position along the first axis prepended
/// as a coordinate ([b, ..., 1 + k]), so one scatter over an array with a leading axis of b writes
/// each row into its own slice (the writes of one row keep their order, so duplicates resolve as
/// they would row by row).
Array with_batch_coordinate(const Array& indices);

/// `g` summed over the axes that broadcasting added or stretched, giving `shape`.
Array unbroadcast(const Array& g, const Shape& shape);

}  // namespace smelt::transforms
