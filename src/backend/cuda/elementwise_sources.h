// CUDA source of the element-wise kernels (pure: no GPU), compiled for sm_90 by the kernel-source
// tests on machines without a GPU.
#pragma once

#include <string>
#include <vector>

#include "smelt/dtype.h"
#include "src/primitives/primitive.h"

namespace smelt::cuda {

/// True when the CUDA backend has an element-wise kernel for `op` over `dt` (the shared scalar
/// function `smelt::scalar::<scalar_fn_name(op)><T>` is defined for it); the same dtypes as the
/// CPU's. Pure, so source tests instantiate every accepted pair without a GPU.
bool unary_has_kernel(UnaryOp op, Dtype dt);
bool binary_has_kernel(BinaryOp op, Dtype dt);

/// One element-wise kernel: y = expr(v0, v1, v2) over inputs of device types `in_types`, in the
/// layout `mode` ("rows", "strided", or flat: one letter per input, 'c' contiguous or 's' one
/// broadcast value). source() is its body, from these fields alone; cuda::get_kernel keys it by
/// the whole struct (codegen/kernel_params.h). `label` ("unary_exp") only names it.
struct EwKernelParams {
  std::string label;
  std::string expr;
  std::vector<std::string> in_types;
  std::string out_type;
  std::string mode;

  bool operator==(const EwKernelParams&) const = default;
  size_t hash() const;
  std::string name() const;
  std::string source() const;
};

/// The kernel `k(EwArgs)` computing y = expr(v0, v1, v2) over a collapsed two-axis layout: a
/// block of 256 threads takes 1024 elements of one row (4 a thread, loads before stores).
/// `types` are the inputs' device types.
std::string elementwise_rows_source(const std::vector<std::string>& types, const std::string& out_type,
                                    const std::string& expr);

}  // namespace smelt::cuda
