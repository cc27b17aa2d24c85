// The C++ source emitter for fused CPU kernels.
#pragma once

#include <string>

#include "src/codegen/fused_program.h"

namespace smelt::codegen {

/// The entry point every generated CPU kernel exports.
inline constexpr const char* kCpuKernelSymbol = "smelt_fused_kernel";

/// The signature of that entry point. Arguments are the inputs then the outputs; `strides`
/// holds ndim element strides per argument (outputs are row-major). When `contiguous` is set,
/// every argument is a dense row-major array of the output's size and [begin, end) are flat
/// element indices; otherwise they are row-major positions in the output's index space.
using CpuKernelFn = void (*)(int64_t begin, int64_t end, int ndim, const int64_t* shape, char* const* args,
                             const int64_t* strides, int contiguous);

}  // namespace smelt::codegen
namespace smelt::reduce_order {
struct RowArgs;
}
namespace smelt::codegen {

/// The entry point's signature for a row program (FusedProgram::reduced_axes > 0): rows
/// [row_begin, row_end) of the index space that `args` describes (see reduce_order.h).
using CpuRowKernelFn = void (*)(int64_t row_begin, int64_t row_end, const reduce_order::RowArgs* args);

/// The C++ name of a dtype's element type in generated code.
const char* cpp_type(Dtype dtype);
/// An exact C++ literal for a scalar (hex floats; bit patterns for NaN and ±inf; 16-bit floats
/// by their bits).
std::string cpp_literal(const Scalar& value);
/// The full, self-contained source of the kernel (the shared scalar math pasted in front).
std::string emit_cpu_kernel(const FusedProgram& program);

}  // namespace smelt::codegen
