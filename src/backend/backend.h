// The interface every device backend implements: evaluating one primitive, and the eager ops.
#pragma once

#include <vector>

#include "smelt/array.h"
#include "src/primitives/primitive.h"

namespace smelt {

class Backend {
 public:
  virtual ~Backend() = default;
  /// Computes `outputs` (unevaluated nodes of this device) from evaluated `inputs`. Sets each
  /// output's buffer, strides and offset.
  virtual void eval(const Primitive& prim, const std::vector<Array>& inputs,
                    std::vector<Array>& outputs) = 0;
  /// Coordinates of non-zero elements [ndim, count] (int64) of an evaluated array.
  virtual Array nonzero(const Array& a) = 0;
};

Backend& backend_for(Device device);

}  // namespace smelt
