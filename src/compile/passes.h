// The compile passes over a tape, each a named function, and the pipeline that runs them in order.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "src/compile/fuse.h"
#include "src/compile/tape.h"

namespace smelt::compiler {

// ---- What several passes read off a tape ----

/// True for a float32 value on the CPU (the values the CPU convolution and pooling passes rewrite).
inline bool is_cpu_f32(const ValueInfo& v) { return v.dtype == Dtype::Float32 && v.device.type == Device::Type::Cpu; }
/// The array of constant `v`, or null when `v` is not a constant of the tape.
const Array* find_constant(const Tape& tape, int v);
/// Who makes and who reads each value of a tape, as of when it was built.
struct ValueGraph {
  std::vector<int> producer;              // step index per value, -1 for inputs and constants
  std::vector<std::vector<int>> readers;  // step indices per value (a step once per input slot)
  std::vector<char> is_output, is_constant;
};
ValueGraph value_graph(const Tape& tape);
/// The constant `v` when it has shape `to` and its values vary along `axis` only (a broadcast of
/// a vector frozen when the tape was traced), else null.
const Array* axis_constant_array(const Tape& tape, int v, const Shape& to, size_t axis);
/// The to[axis] values of such a constant, added to the tape as a 1-D constant on its device and in
/// its dtype; -1 when `v` is not one.
int axis_constant(Tape& tape, int v, const Shape& to, size_t axis);
/// Drops the steps marked in `removed` (one flag per step), keeping the others in order.
void erase_steps(Tape& tape, const std::vector<char>& removed);

/// Removes identity views (reshape/broadcast to the same shape, identity transpose or slice) and
/// same-type casts by forwarding their input. Explicit copies stay.
void remove_identities(Tape& tape);
/// Merges equal scalar constants: captured 0-d arrays with the same dtype and bits.
void merge_scalar_constants(Tape& tape);
/// Common-subexpression elimination by (primitive, parameters, device, inputs, output types);
/// multi-output steps included. One hash lookup per step: linear in the tape.
void eliminate_common_subexpressions(Tape& tape);
/// Drops steps and constants that no output depends on.
void eliminate_dead_steps(Tape& tape);
/// With oneDNN (SMELT_DNNL): a float32 CPU Conv followed by adds of a per-channel operand (a
/// bias) and of at most one operand of its shape (a residual), each value read only by the next
/// add, becomes one Conv with ConvParams::adds, which oneDNN applies as post-ops on the final
/// accumulator: bit-identical to the adds it replaces. Activations stay with the fuse pass (its
/// kernel reads the Conv's output once): oneDNN's ReLU/clip turn NaN into 0 (vmaxps), and its
/// GELU/SiLU are other formulas, so they would break the compiled == eager contract.
void fuse_conv_epilogues(Tape& tape);
/// For the conv passes: the C values of a constant of shape `to` ([N, C, ...]) that repeats one
/// value per channel (a broadcast frozen when the tape was traced: the bias of a BatchNorm an
/// ONNX model folded into its Conv), added to the tape as a 1-D constant on the constant's device
/// and in its dtype; -1 when `v` is not such a constant.
int channel_constant(Tape& tape, int v, const Shape& to);
/// With oneDNN: the weight of a float32 CPU Conv that is a constant of the tape (an ONNX
/// initializer, a captured array) is reordered now into the layout oneDNN's primitive wants, and
/// the Conv reads that packed constant (ConvParams::packed_weight): calls skip the weight reorder.
/// The same primitive runs either way, so the bits do not change. On a GPU: the constant weight
/// of a Conv that runs channels-last is transposed now to OHWI, cuDNN's NHWC filter layout.
void prepack_conv_weights(Tape& tape);
/// A float32 CPU constant written by `pack`, which receives an allocator of n float32 words (from
/// the caching allocator, the constant's buffer); the new value's id, or -1 where `pack` declines
/// (returns false). The packing passes (conv_prepack, matmul_pack) keep weights so.
int add_packed_constant(Tape& tape, const std::function<bool(const std::function<float*(size_t)>&)>& pack);
/// With oneDNN: a float32 CPU Matmul operand that is a constant stored transposed (an ONNX
/// Transpose of an initializer, a tied embedding) is replaced by a row-major copy made now: the
/// kernel copied it to row-major on every call. The kernel computes on the same row-major values
/// either way, so the bits do not change.
void prepack_matmul_operands(Tape& tape);
/// With oneDNN's brgemm products (AVX-512; cpu::dnnl_product_taken): a float32 CPU Matmul whose
/// B is a constant, one matrix for the whole batch, reads B packed now in the layout of oneDNN's
/// plan for its shape (MatmulParams::packed_b), instead of a reorder per call. The same plan runs
/// either way, so the bits do not change. Not on shapeless tapes (the layout is planned for M).
void pack_matmul_weights(Tape& tape);
/// A per-column vector ([N], broadcast) added to a float32 CPU Matmul's [..., M, N] result, by an
/// Add nothing element-wise reads, becomes the Matmul's bias (MatmulParams; src/compile/matmul_bias.cpp).
void fuse_matmul_biases(Tape& tape);

/// With oneDNN: activations between float32 CPU convolutions stay in the channel-blocked layout
/// their primitives want ([N, C/b, spatial..., b]) through the element-wise steps, poolings, global
/// poolings and residual adds between them (ConvParams::src_block/dst_block, PoolParams::block), so
/// that reorders run only where a chain begins and ends. The same primitives run on the same
/// values: bit-identical to the row-major tape. See docs/cpu-kernels.md. On a GPU: float16 and
/// bfloat16 activations stay channels-last between the convolutions the CUDA Conv runs in NHWC
/// (src/backend/cuda/channels_last.h; docs/cuda.md).
void keep_blocked_layouts(Tape& tape);

/// A float32 CPU max pooling (no padding, no ceil mode) whose input is made by ReLUs and adds of
/// finite constants that do not vary over its windows (a convolution's bias and activation),
/// each value read only by the next step, runs first, on that chain's input, and the chain then
/// runs on the pooled values (a quarter of them for 2 x 2 windows): both steps are monotone, so
/// the values and their bits are the same (the argument is in pool_first.cpp).
void pool_before_monotone_steps(Tape& tape);

/// A blocked float32 CPU pooling whose output only an Add of a broadcast channel vector reads,
/// and/or whose result only a Relu reads, applies them itself (PoolParams::epilogue_add,
/// epilogue_relu) to each output row: the same scalar operations, so the same bits, without the
/// step of their own (and its pass over the pooled tensor) that the fuse pass would make.
void fuse_pool_epilogues(Tape& tape);

struct PassOptions {
  std::vector<std::string> disabled;
  bool fuse = true;
  std::function<void(const std::string&, const std::string&)> dump;
  /// The compiled function's name, for the events passes emit.
  std::string function;
  /// Tiered execution: when set, the fuse pass neither compiles nor reads the disk cache; groups
  /// whose kernels are not loaded yet stay unfused and their programs are appended here (see fuse_elementwise), and
  /// `unfused` (when set too) receives the tape as the fuse pass got it, to fuse again later.
  std::vector<codegen::FusedProgram>* unbuilt = nullptr;
  Tape* unfused = nullptr;
  /// The tape will replay for other shapes of its ranks: passes that bake shapes in skip.
  bool shapeless = false;
};

/// Runs the passes in order ("simplify" = identities, scalar constants, "cse", "dce",
/// "conv_epilogue", "conv_prepack", "conv_layout", "pool_first", "pool_epilogue", "matmul_bias" (none under shapeless), "matmul_prepack", then "fuse"), verifying the tape
/// after each.
void run_passes(Tape& tape, const PassOptions& options);

}  // namespace smelt::compiler
