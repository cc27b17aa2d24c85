// Where a node came from, for gradient errors: layers that build graphs from their own units (an
// ONNX node, a module) name the unit, and a missing vjp rule then says which one it was.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "smelt/array.h"

namespace smelt::transforms {

/// A mark to pass to set_origin: nodes made after this call have greater ids.
uint64_t origin_mark();
/// Records `origin` ("ONNX node Gather 'g1'") for the nodes of `outputs` and above them that were
/// made since `mark` (the walk stops at older nodes, evaluated ones and ones that already have an
/// origin, so it never leaves what the unit built). Entries are held by process-unique node id
/// and dropped with their nodes.
void set_origin(const std::vector<Array>& outputs, uint64_t mark, const std::string& origin);
/// The recorded origin of `a`'s node, or "".
std::string origin_of(const Array& a);
/// transforms::vjp_rule(a, g), with a missing rule's UnsupportedError prefixed by `a`'s origin
/// ("vjp: ONNX node ScatterElements 'se': Scatter(...) has no vjp rule ..."). The backward pass
/// pulls every node back through it.
std::vector<Array> vjp_rule_naming_origin(const Array& a, const Array& g);

}  // namespace smelt::transforms
