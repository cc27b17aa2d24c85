// Where a node came from, for gradient errors: layers that build graphs from their own units (an
// ONNX node, a module) name the unit, and a missing vjp rule then says which one it was.
#pragma once

#include <string>

#include "smelt/array.h"

namespace smelt::transforms {

/// Records `origin` ("ONNX node Gather 'g1'") for `out` and every node above it made since
/// `inputs` (the walk stops at them, at evaluated nodes and at nodes that already have an
/// origin). Entries are held by process-unique node id and dropped with their nodes.
void set_origin(const std::vector<Array>& outputs, const std::vector<Array>& inputs, const std::string& origin);
/// The recorded origin of `a`'s node, or "".
std::string origin_of(const Array& a);

}  // namespace smelt::transforms
