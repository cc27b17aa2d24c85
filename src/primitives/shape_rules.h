// Shape rules: the output shapes of every primitive from its parameters and its inputs' shapes.
#pragma once

#include <cstdint>
#include <vector>

#include "src/primitives/primitive.h"

namespace smelt {

/// Output length of a convolution window sweep along one spatial axis; < 1 when the (padded)
/// input is shorter than the dilated kernel.
int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_lo, int64_t pad_hi,
                         int64_t dilation);
/// As conv_output_size; with ceil_mode the last partial window counts when it starts inside the
/// input or the left padding (PyTorch/ONNX).
int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_lo, int64_t pad_hi,
                         int64_t dilation, bool ceil_mode);
int64_t conv_transpose_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_lo, int64_t pad_hi,
                                   int64_t dilation, int64_t output_padding);

/// The output shapes of `prim` applied to inputs of `input_shapes`. Primitives that fix their
/// shape (prim_fixes_shape) return `fixed` (their output shapes when built). Throws ShapeError
/// naming the primitive when the input shapes do not fit it (a matmul's inner dimensions, a
/// concatenation's other axes, a window larger than the input, ...).
std::vector<Shape> infer_output_shapes(const Primitive& prim, const std::vector<Shape>& input_shapes,
                                       const std::vector<Shape>& fixed);

/// The shape a Scatter or ScatterND step needs its updates in, from the array's and the indices'
/// shapes (the indices' shape; for ScatterND indices[:-1] + a[k:] with k = indices[-1]).
Shape scatter_updates_shape(PrimKind kind, const Shape& a, const Shape& indices);

/// The shape that `a` and `b` broadcast to (NumPy); ShapeError naming `what` otherwise.
Shape broadcast_shape_of(const Shape& a, const Shape& b, const std::string& what);
/// The same, naming `prim` (Primitive::str() formats through a string stream: it is built only for
/// the error, not on every check; shape rules run for every step a tape is verified with).
Shape broadcast_shape_of(const Shape& a, const Shape& b, const Primitive& prim);

}  // namespace smelt
