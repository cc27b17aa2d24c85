// The differentiation rules of the primitive catalogue: each kind's vjp and jvp, or that it has none.
#pragma once

#include <vector>

#include "smelt/array.h"
#include "src/primitives/primitive.h"

namespace smelt::transforms {

/// What a primitive kind declares for one mode of differentiation.
enum class Rule : uint8_t {
  Full,     // every float output/input pair has a rule
  Partial,  // some parameter values have no rule (the rule raises UnsupportedError naming them)
  Zero,     // the output carries no gradient (integer or bool output, or a piecewise-constant op)
  NoInputs, // nothing to differentiate (constants)
  None,     // no rule: a gradient that must flow through raises UnsupportedError
};

struct RuleInfo {
  Rule vjp;
  Rule jvp;
  const char* note;  // what the rule does, or why there is none (docs/transforms.md repeats it)
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

/// `g` summed over the axes that broadcasting added or stretched, giving `shape`.
Array unbroadcast(const Array& g, const Shape& shape);

}  // namespace smelt::transforms
