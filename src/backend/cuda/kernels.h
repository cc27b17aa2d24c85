// The CUDA kernels by family (one eval_<Primitive> each) and the helpers they share.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "smelt/array.h"
#include "src/backend/cuda/compiler.h"
#include "src/codegen/fused_kernel.h"
#include "src/codegen/fused_program.h"
#include "src/core/node.h"
#include "src/primitives/primitive.h"

namespace smelt::cuda {

inline constexpr int kMaxDims = 10;

/// Mirrors the device struct `Layout` (all fields 8 bytes: identical layout on both sides).
struct Layout {
  int64_t nd = 0;
  int64_t shape[kMaxDims] = {};
  int64_t st[4][kMaxDims] = {};
};

/// Device type name of a dtype in kernel source ("float", "f16", "i64", ...).
const char* device_type(Dtype dtype);
/// Unsigned type name of a dtype's size ("u8" ... "u64"): data moved without arithmetic.
const char* bits_type(Dtype dtype);

/// The device state of an array's GPU.
DeviceState& state_of(const Array& a);
/// Gives `out` a fresh row-major device buffer.
void alloc_output(Array& out);
/// Device address of an evaluated array's first element.
inline uint64_t dptr(const Array& a) { return reinterpret_cast<uint64_t>(a.node().data_ptr()); }

/// Axes of `shape` merged where every operand's strides allow (size-1 axes dropped). Throws
/// UnsupportedError naming `what` when more than kMaxDims axes remain.
Layout collapse_layout(const Shape& shape, const std::vector<const Strides*>& strides, const std::string& what);

/// out = expr(v0, v1, v2) element-wise over equal-shaped inputs of any strides into `out`
/// (row-major, the inputs' size, any shape; allocated here unless `out` already has a buffer).
/// `key` names op and types.
void run_elementwise(const std::string& key, const std::vector<Array>& inputs, Array& out, const std::string& expr,
                     const std::string& what);

/// Copies `in` (any strides) into `out`'s row-major device buffer (same dtype, same device).
void copy_to_contiguous(const Array& in, Array& out);

/// Fills `out` (allocated, row-major) with one element's bits (the low size_of(dtype) bytes).
void fill_bits(Array& out, uint64_t bits);

/// Builds, on a prebuild thread (prebuild_kernel), the kernel eval_fused will launch for
/// `kernel` on inputs of `input_shapes` in fresh buffers (row-major, aligned: the layout a
/// compiled replay gives its intermediates), so that a compiled program's kernels build side by
/// side before its first call reaches them. Inputs laid out otherwise launch another kernel,
/// built then.
void prebuild_fused(const std::shared_ptr<const codegen::FusedKernel>& kernel, const std::vector<Shape>& input_shapes);

void eval_full(const FullParams& p, Array& out);
void eval_arange(const ArangeParams& p, Array& out);
void eval_unary(const UnaryParams& p, const std::vector<Array>& inputs, Array& out);
void eval_binary(const BinaryParams& p, const std::vector<Array>& inputs, Array& out);
void eval_select(const std::vector<Array>& inputs, Array& out);
void eval_cast(const CastParams& p, const std::vector<Array>& inputs, Array& out);
void eval_copy(const std::vector<Array>& inputs, Array& out);
void eval_reshape(const ShapeParams& p, const std::vector<Array>& inputs, Array& out);
void eval_reduce(const ReduceParams& p, const std::vector<Array>& inputs, Array& out);
void eval_argreduce(const ArgReduceParams& p, const std::vector<Array>& inputs, Array& out);
void eval_matmul(const std::vector<Array>& inputs, Array& out);
void eval_fused(const FusedParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs);
/// Runs `program` (element-wise, one output) through the fused kernels' flat layouts (16-byte
/// vectors when aligned, broadcast rows and columns included) when every input allows one;
/// returns false, having done nothing, when an input needs the strided layout. The eager
/// element-wise primitives use it: the same emitter as compiled code, so the same bits.
bool run_flat_instruction(codegen::FusedProgram program, const std::vector<Array>& inputs, Array& out,
                          const std::string& what);

// Sorting, scans and random bits (sort.cpp, scan.cpp, random.cpp).
void eval_sort(const SortParams& p, const std::vector<Array>& inputs, Array& out);
void eval_argsort(const SortParams& p, const std::vector<Array>& inputs, Array& out);
void eval_topk(const TopKParams& p, const std::vector<Array>& inputs, std::vector<Array>& outputs);
void eval_scan(const ScanParams& p, const std::vector<Array>& inputs, Array& out);
void eval_random_bits(const std::vector<Array>& inputs, Array& out);

// Convolution and pooling (conv.cpp: cuDNN or a direct kernel; pool.cpp)
void eval_conv(const ConvParams& p, const std::vector<Array>& inputs, Array& out);
void eval_conv_transpose(const ConvTransposeParams& p, const std::vector<Array>& inputs, Array& out);
void eval_pool(const PoolParams& p, const std::vector<Array>& inputs, Array& out);

// Indexing and data movement (index.cpp; scan_util.h has the shared device int64 scan).
void eval_gather(const AxisParams& p, const std::vector<Array>& inputs, Array& out);
void eval_gather_elements(const AxisParams& p, const std::vector<Array>& inputs, Array& out);
void eval_gather_nd(const GatherNDParams& p, const std::vector<Array>& inputs, Array& out);
void eval_scatter(const ScatterParams& p, const std::vector<Array>& inputs, Array& out);
void eval_scatter_nd(const ScatterParams& p, const std::vector<Array>& inputs, Array& out);
void eval_concatenate(const AxisParams& p, const std::vector<Array>& inputs, Array& out);
void eval_slice_update(const SliceParams& p, const std::vector<Array>& inputs, Array& out);
void eval_pad(const PadParams& p, const std::vector<Array>& inputs, Array& out);
/// Coordinates [ndim, count] (int64, on a's GPU) of the non-zero elements of evaluated `a`.
Array eval_nonzero(const Array& a);

}  // namespace smelt::cuda
