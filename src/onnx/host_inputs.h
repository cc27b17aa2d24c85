// Which inputs of an ONNX operator are read on the host (shapes, counts, bounds): what makes a node a graph break.
#pragma once

#include <vector>

#include "smelt/onnx.h"

namespace smelt::onnx::detail {

/// The formal names of the inputs `n` reads on the host, by input index (nullptr for inputs it
/// computes on); nullptr for operators without such inputs. Break reasons name these formal
/// names ("needs the values of input 'shape' on the host").
const std::vector<const char*>* host_input_names(const Node& n);

}  // namespace smelt::onnx::detail
