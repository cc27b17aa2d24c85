// The catalogue of primitives: kinds, typed parameters with hash/equality, and names.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "smelt/array.h"
#include "smelt/attention.h"
#include "smelt/ops.h"
#include "src/primitives/reduce_op.h"
#include "src/primitives/scalar.h"

namespace smelt {

namespace codegen {
struct FusedKernel;
}

// Element-wise operators carried by the Unary and Binary primitives. Switches over them have no
// `default:` so that adding one lists every kernel that must handle it.
#define SMELT_UNARY_OPS(X)                                                                       \
  X(Abs) X(Negative) X(Sign) X(Square) X(Reciprocal) X(Sqrt) X(Rsqrt) X(Exp) X(Exp2) X(Expm1)   \
  X(Log) X(Log2) X(Log10) X(Log1p) X(Sin) X(Cos) X(Tan) X(Asin) X(Acos) X(Atan) X(Sinh) X(Cosh) \
  X(Tanh) X(Asinh) X(Acosh) X(Atanh) X(Erf) X(ErfInv) X(Sigmoid) X(Relu) X(Floor) X(Ceil)       \
  X(Round) X(IsNan) X(IsInf) X(IsFinite) X(LogicalNot) X(BitwiseNot)

#define SMELT_BINARY_OPS(X)                                                                    \
  X(Add) X(Subtract) X(Multiply) X(Divide) X(FloorDivide) X(Remainder) X(Fmod) X(Power)       \
  X(Maximum) X(Minimum) X(Atan2) X(Equal) X(NotEqual) X(Less) X(LessEqual) X(Greater)         \
  X(GreaterEqual) X(LogicalAnd) X(LogicalOr) X(LogicalXor) X(BitwiseAnd) X(BitwiseOr)         \
  X(BitwiseXor) X(LeftShift) X(RightShift)

enum class UnaryOp : uint8_t {
#define X(name) name,
  SMELT_UNARY_OPS(X)
#undef X
};
enum class BinaryOp : uint8_t {
#define X(name) name,
  SMELT_BINARY_OPS(X)
#undef X
};
enum class ArgReduceOp : uint8_t { ArgMax, ArgMin };
enum class ScanOp : uint8_t { Sum, Prod, Max, Min };
enum class PoolKind : uint8_t { Max, Avg };

const char* unary_op_name(UnaryOp op);
const char* binary_op_name(BinaryOp op);
/// The op's function in scalar_math.h ("exp", "floor_divide", ...), which the CPU and CUDA code
/// generators call by name.
const char* scalar_fn_name(UnaryOp op);
const char* scalar_fn_name(BinaryOp op);
const char* reduce_op_name(ReduceOp op);
/// True for the comparisons and logical ops, whose output is bool.
bool binary_op_returns_bool(BinaryOp op);
/// True for isnan/isinf/isfinite/logical_not, whose output is bool.
bool unary_op_returns_bool(UnaryOp op);

// ---- Parameters. Each is a plain struct with defaulted equality and a hash. -------------------

struct NoParams {
  bool operator==(const NoParams&) const = default;
};
struct UnaryParams {
  UnaryOp op;
  bool operator==(const UnaryParams&) const = default;
};
struct BinaryParams {
  BinaryOp op;
  bool operator==(const BinaryParams&) const = default;
};
struct CastParams {
  Dtype to;
  bool operator==(const CastParams&) const = default;
};
struct FullParams {
  Scalar value;  // already of the output dtype
  bool operator==(const FullParams&) const = default;
};
struct ArangeParams {
  double start;
  double step;
  bool operator==(const ArangeParams&) const = default;
};
struct ShapeParams {
  Shape shape;
  bool operator==(const ShapeParams&) const = default;
};
struct PermParams {
  std::vector<int> perm;
  bool operator==(const PermParams&) const = default;
};
struct SliceParams {
  // Normalized per axis: start in range, step != 0, output length in the node's shape.
  std::vector<int64_t> start;
  std::vector<int64_t> step;
  bool operator==(const SliceParams&) const = default;
};
struct AxisParams {
  int axis;
  bool operator==(const AxisParams&) const = default;
};
struct PadParams {
  std::vector<int64_t> low;
  std::vector<int64_t> high;
  PadMode mode;
  Scalar value;  // constant mode
  bool operator==(const PadParams&) const = default;
};
struct ReduceParams {
  ReduceOp op;
  std::vector<int> axes;  // sorted, non-negative; the output keeps them as size 1
  int64_t ddof = 0;       // Mean only: the divisor is max(count - ddof, 0) (var, std)
  bool operator==(const ReduceParams&) const = default;
};
struct ArgReduceParams {
  ArgReduceOp op;
  int axis;   // output keeps it as size 1
  bool last;  // last occurrence on ties
  bool operator==(const ArgReduceParams&) const = default;
};
struct ScanParams {
  ScanOp op;
  int axis;
  bool reverse;
  bool exclusive;
  bool operator==(const ScanParams&) const = default;
};
struct GatherNDParams {
  int batch_dims;
  bool operator==(const GatherNDParams&) const = default;
};
struct ScatterParams {
  int axis;  // unused by ScatterND
  ScatterReduce reduce;
  bool operator==(const ScatterParams&) const = default;
};
struct SortParams {
  int axis;
  bool descending;
  bool operator==(const SortParams&) const = default;
};
struct TopKParams {
  int64_t k;
  int axis;
  bool largest;
  bool operator==(const TopKParams&) const = default;
};
/// A float32 addition fused into a Conv's result (ConvParams::adds): a per-channel operand of
/// C elements (a bias) or one with the output's shape (a residual).
enum class ConvAdd : uint8_t { Channel, Tensor };
struct ConvParams {
  std::vector<int64_t> strides, padding_lo, padding_hi, dilations;
  int64_t groups;
  /// Additions applied in order to the float32 result, one more input each (after input and
  /// weight), each one IEEE addition: bit-identical to the separate adds it replaces. Only the
  /// CPU compile pass conv_epilogue (src/compile/conv_epilogue.cpp) makes them; ops never do.
  std::vector<ConvAdd> adds = {};
  /// Non-empty when the weight input is already in the layout of the device's library (the
  /// compile pass conv_prepack, src/compile/conv_prepack.cpp): the weight's logical shape
  /// [O, C/groups, K...]. On the CPU oneDNN's layout, `packed_threads` the thread count whose
  /// plan chose it; on a GPU OHWI ([O, KH, KW, C] row-major) for a Conv that runs channels-last.
  std::vector<int64_t> packed_weight = {};
  int64_t packed_threads = 0;
  /// Channel blocks of the input and of the output (and of a residual add's operand): 0 for
  /// row-major [N, C, spatial...]; b > 0 for oneDNN's layout nC(d)(h)w{b}c, held as the
  /// row-major array [N, C/b, spatial..., b] (C a multiple of b; b = C is channels-last). Only
  /// the compile pass conv_layout (src/compile/conv_layout.cpp) sets them: on CPU convolutions
  /// oneDNN takes, and b = C on GPU convolutions that run channels-last.
  int64_t src_block = 0, dst_block = 0;
  bool operator==(const ConvParams&) const = default;
};
/// A per-column vector added to a Matmul's result ([..., M, N] + [N], each one IEEE addition
/// after the product's whole reduction, in the operand order of the Add it replaces): bit-identical
/// to the separate add. Only the CPU compile pass matmul_bias (src/compile/matmul_bias.cpp) sets
/// it (the bias is then a third input); ops never do.
enum class MatmulBias : uint8_t { None, After, Before };  // product + bias, bias + product
struct MatmulParams {
  MatmulBias bias = MatmulBias::None;
  /// Non-empty when the second input is a constant B already in oneDNN's layout for this product
  /// (the CPU compile pass matmul_pack, src/compile/matmul_prepack.cpp): B's logical shape
  /// [..., K, N], every batch matrix the same; `packed_threads` the thread count whose plan chose
  /// the layout (cpu::dnnl_pack_product_weights).
  std::vector<int64_t> packed_b = {};
  int64_t packed_threads = 0;
  /// With packed_b: > 0 when B is instead in the column panels of smelt's own tiles for a
  /// product of few rows (cpu::gemm_b_panels), this many columns each.
  int64_t panel_n = 0;
  bool operator==(const MatmulParams&) const = default;
};
struct ConvTransposeParams {
  std::vector<int64_t> strides, padding_lo, padding_hi, dilations, output_padding;
  int64_t groups;
  bool operator==(const ConvTransposeParams&) const = default;
};
enum class PoolEpilogueAdd : uint8_t { None, AddAfter, AddBefore };
struct PoolParams {
  PoolKind kind;
  std::vector<int64_t> kernel, strides, padding_lo, padding_hi, dilations;
  bool count_include_pad;
  bool ceil_mode = false;  // output sizes round up (the kernel reads them from the node's shape)
  /// 0: row-major input and output; b > 0: both in the blocked layout [N, C/b, spatial..., b]
  /// (ConvParams::src_block; only the compile pass conv_layout sets it: float32 on the CPU, and
  /// b = C for a 2-D max pool on a GPU).
  int64_t block = 0;
  /// Set by the CPU compile pass pool_epilogue (blocked float32 poolings): each pooled value v
  /// becomes v + c (AddAfter) or c + v (AddBefore: the operands in the Add's order), c its
  /// channel's entry of the second input (one per channel or one for all, in the blocked layout's
  /// rank), then relu of that with `relu`: the steps the pass took, in their order and bits.
  PoolEpilogueAdd epilogue_add = PoolEpilogueAdd::None;
  bool epilogue_relu = false;
  bool operator==(const PoolParams&) const = default;
};

/// What the optional fourth input of Attention is (already broadcast to [batch, q_heads, S, T]).
enum class AttentionMaskKind : uint8_t { None, Additive, Boolean };
struct AttentionParams {
  std::optional<double> scale;  // none: 1/sqrt(head_dim) of the inputs (follows a shapeless replay)
  double softcap = 0.0;         // 0: none
  CausalMask causal = CausalMask::None;
  AttentionMaskKind mask = AttentionMaskKind::None;
  bool operator==(const AttentionParams&) const = default;
};

/// A generated kernel for a group of element-wise steps (made by compile's fuse pass). Equal when
/// the programs are equal; every output has the node's shape, inputs broadcast to it.
struct FusedParams {
  std::shared_ptr<const codegen::FusedKernel> kernel;
  bool operator==(const FusedParams& o) const;
  size_t hash() const;
  std::string str() const;
};

// ---- The registry. X(Name, Params, outputs): every primitive, once. ---------------------------
// Inputs by primitive:
//   Full, Arange: none                Unary, Cast, Copy, views, Reduce, ...: one
//   Binary: two                       Select: condition, x, y
//   SliceUpdate: a, update            Concatenate: n
//   Gather/GatherElements/GatherND: a, indices      Scatter/ScatterND: a, indices, updates
//   Matmul: a [..., M, K], b [..., K, N] with equal batch shapes
//   Conv, ConvTranspose: input, weight (Conv: then one operand per fused add)
//   RandomBits: key (uint32 [2])
//   TopK: two outputs (values, int64 indices)
//   Attention: q [B, Hq, S, D], k [B, Hkv, T, D], v [B, Hkv, T, Dv][, mask [B, Hq, S, T]]
//   Fused: any number of inputs and outputs (0 in the table means variadic)
// Every primitive, with its properties in one place (passes ask these instead of listing kinds):
//   X(name, params type, outputs (0: variadic), fuse role, fixes shape, view)
//   - fuse role: what the step contributes to a fused element-wise kernel: Compute (an
//     element-wise operation), Broadcast (an index map), Constant (a scalar fill), None (ends a
//     group);
//   - fixes shape: the parameters fix the output shape (it cannot follow new input shapes in a
//     shapeless replay);
//   - view: the output aliases the input's buffer (metadata only).
#define SMELT_PRIMITIVES(X) \
  X(Full, FullParams, 1, Constant, true, false)                 \
  X(Arange, ArangeParams, 1, None, true, false)                 \
  X(Unary, UnaryParams, 1, Compute, false, false)               \
  X(Binary, BinaryParams, 1, Compute, false, false)             \
  X(Select, NoParams, 1, Compute, false, false)                 \
  X(Cast, CastParams, 1, Compute, false, false)                 \
  X(Copy, NoParams, 1, None, false, false)                      \
  X(Reshape, ShapeParams, 1, None, true, true)                  \
  X(Transpose, PermParams, 1, None, false, true)                \
  X(Broadcast, ShapeParams, 1, Broadcast, true, true)           \
  X(Slice, SliceParams, 1, None, true, true)                    \
  X(SliceUpdate, SliceParams, 1, None, false, false)            \
  X(Concatenate, AxisParams, 1, None, false, false)             \
  X(Pad, PadParams, 1, None, false, false)                      \
  X(Reduce, ReduceParams, 1, None, false, false)                \
  X(ArgReduce, ArgReduceParams, 1, None, false, false)          \
  X(Scan, ScanParams, 1, None, false, false)                    \
  X(Matmul, MatmulParams, 1, None, false, false)                \
  X(Gather, AxisParams, 1, None, false, false)                  \
  X(GatherElements, AxisParams, 1, None, false, false)          \
  X(GatherND, GatherNDParams, 1, None, false, false)            \
  X(Scatter, ScatterParams, 1, None, false, false)              \
  X(ScatterND, ScatterParams, 1, None, false, false)            \
  X(Sort, SortParams, 1, None, false, false)                    \
  X(ArgSort, SortParams, 1, None, false, false)                 \
  X(TopK, TopKParams, 2, None, false, false)                    \
  X(Conv, ConvParams, 1, None, false, false)                    \
  X(ConvTranspose, ConvTransposeParams, 1, None, false, false)  \
  X(Pool, PoolParams, 1, None, false, false)                    \
  X(RandomBits, NoParams, 1, None, true, false)                 \
  X(Attention, AttentionParams, 1, None, false, false)          \
  X(Fused, FusedParams, 0, None, false, false)                 

enum class PrimKind : uint8_t {
  None,  // a leaf: data given, or already evaluated
#define X(name, params, outputs, fuse, fixes_shape, view) name,
  SMELT_PRIMITIVES(X)
#undef X
};

using PrimParams = std::variant<NoParams, UnaryParams, BinaryParams, CastParams, FullParams,
                                ArangeParams, ShapeParams, PermParams, SliceParams, AxisParams,
                                PadParams, ReduceParams, ArgReduceParams, ScanParams,
                                GatherNDParams, ScatterParams, SortParams, TopKParams, ConvParams,
                                MatmulParams, ConvTransposeParams, PoolParams, AttentionParams, FusedParams>;

/// A primitive with its parameters: what a node computes from its inputs.
struct Primitive {
  PrimKind kind = PrimKind::None;
  PrimParams params = NoParams{};

  template <class P>
  const P& get() const {
    return std::get<P>(params);
  }
  bool operator==(const Primitive&) const = default;
  size_t hash() const;
  /// "Unary(exp)", "Reduce(sum, axes=[1])", ... for dumps and errors.
  std::string str() const;
};

const char* prim_name(PrimKind kind);
/// Number of outputs of the primitive (0: variadic, as for Fused).
int prim_num_outputs(PrimKind kind);
/// True for primitives whose output aliases the input's buffer (views).
bool prim_is_view(PrimKind kind);

/// What a step contributes to a fused element-wise kernel (the table's fuse role).
enum class FuseRole : uint8_t { None, Compute, Broadcast, Constant };
FuseRole prim_fuse_role(PrimKind kind);
/// True when the primitive's parameters fix its output shape (Full, Reshape, Slice, ...).
bool prim_fixes_shape(PrimKind kind);

/// The channel-blocked layout of ConvParams::src_block / dst_block and PoolParams::block:
/// [N, C, spatial...] held as [N, C/b, spatial..., b]. `blocked_shape` needs C % b == 0;
/// `unblocked_shape` gives back [N, C, spatial...]. b = 0 leaves the shape as it is.
Shape blocked_shape(const Shape& plain, int64_t b);
Shape unblocked_shape(const Shape& blocked, int64_t b);

template <class P>
Primitive make_prim(PrimKind kind, P params) {
  return Primitive{kind, PrimParams{std::move(params)}};
}

}  // namespace smelt
