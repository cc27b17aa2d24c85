// oneDNN on the CPU (SMELT_DNNL): float32 convolutions with add post-ops, products through its matmul, single-threaded GEMM tiles.
//
// Why oneDNN: on the same shapes and 2 threads its convolutions ran 3-10x faster than smelt's
// im2col + OpenBLAS path and its sgemm 5-10x faster than Debian's OpenBLAS (docs/cpu-kernels.md
// has the measurements and the comparison with XNNPACK). The header keeps oneDNN's own headers
// out of the rest of smelt; without SMELT_DNNL every function here reports "not taken" and the
// callers keep smelt's own kernels.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "src/primitives/primitive.h"

namespace smelt::cpu {

/// True when this build runs float32 convolutions and GEMM tiles through oneDNN.
bool dnnl_enabled();

/// A float32 convolution over row-major N C (D) (H) W data, weights [O, C/groups, K...].
/// Spatial arrays hold `spatial` (1 to 3) entries; dilations are smelt's (1 = dense).
struct DnnlConv {
  int spatial = 2;
  int64_t batch = 0, in_ch = 0, out_ch = 0, groups = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, pad_lo[3] = {0, 0, 0}, pad_hi[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
  /// Layouts of x and of y (and of a Tensor add's operand), held as [N, C/b, spatial..., b]
  /// (ConvParams::src_block, dst_block): 0 row-major, b = C channels-last (n(d)(h)wc), b in
  /// {4, 8, 16} dividing C oneDNN's nC(d)(h)w{b}c.
  int64_t src_block = 0, dst_block = 0;
};

/// Whether `c` is a 1x1 convolution of a 1x1 image, ungrouped: a matrix-vector product per image
/// (a squeeze-and-excitation block's two layers), y[n, o] = Σ_c w[o, c] x[n, c]. oneDNN declines
/// it (its per-call set-up and blocked reorders: MobileNetV3's 576 -> 144 layer took 16 us, 2
/// threads, AMD EPYC) and smelt's dot products run it (conv.cpp, conv_matrix_vector).
inline bool is_matrix_vector(const DnnlConv& c) {
  if (c.groups != 1) return false;
  for (int i = 0; i < 3; ++i)
    if (c.in[i] != 1 || c.out[i] != 1 || c.k[i] != 1 || c.stride[i] != 1 || c.pad_lo[i] != 0 || c.pad_hi[i] != 0)
      return false;
  return true;
}

/// An addition applied to the float32 result of each output element after its whole reduction,
/// in order: `y = ((conv + a0) + a1) ...`, each a single IEEE float32 addition, so the result is
/// bit-identical to the convolution followed by separate adds (tests/backend/cpu/dnnl_test.cpp).
enum class DnnlAddKind : uint8_t {
  Channel,  // operand float[out_ch], broadcast over batch and space (a bias)
  Tensor,   // operand with the output's shape, row-major (a residual); at most one per call
};
struct DnnlAdd {
  DnnlAddKind kind;
  const float* operand;
};

/// y = conv(x, w) followed by `adds`, on smelt's thread count (one thread inside a parallel_for).
/// Returns false, having written nothing, when oneDNN is not built in or does not take the
/// geometry (smelt's kernel runs instead). The result depends on the shapes and the CPU's
/// instruction set only, never on the thread count.
/// With adds, false also when the post-ops would make oneDNN pick another implementation than
/// for the plain convolution (the adds would then not be bit-identical to separate adds).
/// `packed_threads` > 0: `w` is already in the layout that dnnl_pack_conv_weights chose at that
/// thread count; it is reordered only if this call's primitive wants another.
bool dnnl_conv_f32(const DnnlConv& c, const float* x, const float* w, float* y, const std::vector<DnnlAdd>& adds = {},
                   int packed_threads = 0);

/// Whether the primitive running `c` at the current thread count takes a first Channel add (a
/// bias) as its own bias argument, which costs nothing (false: a binary post-op, which slows the
/// convolution, or no oneDNN plan). The compile pass conv_epilogue then absorbs every bias.
bool dnnl_conv_bias_free(const DnnlConv& c);

/// Writes the weights `w` of `c` in the layout that oneDNN's primitive for `c` without adds at the
/// current thread count wants into the buffer `alloc(n)` returns for their n float32 words, and
/// sets that thread count; false (alloc not called) when oneDNN does not take the convolution. A
/// call with adds whose primitive wants another layout reorders them.
bool dnnl_pack_conv_weights(const DnnlConv& c, const float* w, const std::function<float*(size_t)>& alloc, int* threads);

/// The geometry of a Conv step: input, logical weight and output shapes with its parameters
/// (src/backend/cpu/conv.cpp, so that compile passes plan exactly what the kernel runs).
DnnlConv dnnl_conv_geometry(const Shape& x, const Shape& w, const Shape& y, const ConvParams& p);

/// Row-major C[m,n] = op(A) op(B) (alpha 1, beta 0) on the calling thread alone. Returns false
/// without oneDNN.
bool dnnl_sgemm_1thread(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                        const float* b, int64_t ldb, float* c, int64_t ldc);

/// A float32 product C[m, n] = A[m, k] B[k, n] (+ a bias row after it) through oneDNN's matmul
/// primitive with its brgemm kernels (AVX-512): with B packed once in the primitive's layout it
/// ran transformer projections 10-25% faster than sgemm tiles that repack B on every call
/// (docs/cpu-kernels.md). A and C are row-major and dense (leading dimensions k and n).
struct DnnlProduct {
  int64_t m = 0, n = 0, k = 0;
  /// B's storage: row-major [K, N] with row stride ldb, or (b_transposed) the transpose of a
  /// row-major [N, K] with row stride ldb. Ignored when packed_threads > 0.
  bool b_transposed = false;
  int64_t ldb = 0;
  /// A bias row [N] added to each row of the result as a post-op: one float32 addition after the
  /// whole reduction with the bias as its first operand (oneDNN's binary post-op computes
  /// src1 + dst), bit-identical to the separate `bias + product`, NaN payloads included (x86 keeps
  /// the first operand's; tests/compile/matmul_bias_test.cpp).
  bool bias = false;
  /// > 0: B was packed by dnnl_pack_product_weights at this thread count.
  int packed_threads = 0;
};

/// Whether products of this shape run through dnnl_product_f32: the 1-thread plan is oneDNN's
/// brgemm matmul. Depends on the shape and the CPU only (never the thread count), so a product's
/// path, and its bits, are the same at any thread count, eager or compiled.
bool dnnl_product_taken(int64_t m, int64_t n, int64_t k);

/// Runs the product on smelt's thread count (one thread inside a parallel_for); false (nothing
/// written) when oneDNN does not take it. The bits depend on the shape and the instruction set
/// only, never on the thread count or on how B is stored or packed.
bool dnnl_product_f32(const DnnlProduct& p, const float* a, const float* b, float* c, const float* bias = nullptr);

/// Writes B in the layout the product's plan at the current thread count wants into alloc(n)'s n
/// float32 words and sets that thread count; false when oneDNN does not take the product.
bool dnnl_pack_product_weights(const DnnlProduct& p, const float* b, const std::function<float*(size_t)>& alloc,
                               int* threads);

/// oneDNN's name of the implementation that runs `p` at the current thread count ("" when none).
std::string dnnl_product_impl(const DnnlProduct& p);

/// The channel blocks (as DnnlConv::src_block: C for channels-last, 4, 8 or 16) of the source and
/// destination layouts that the primitive running `c` with adds of `kinds` at the current thread
/// count wants (the plain primitive's where the adds are declined as post-ops: they then follow
/// it), 0 where it wants another layout (row-major, or a block that does not divide the
/// channels). False, with both 0, when oneDNN does not take `c`. The compile pass conv_layout
/// keeps activations in these layouts.
bool dnnl_conv_blocks(const DnnlConv& c, const std::vector<DnnlAddKind>& kinds, int64_t* src_block,
                      int64_t* dst_block);

/// Activation reorders (an input into the primitive's layout, a result or a residual between
/// layouts) that convolutions have run so far: tests count those a compiled chain saves.
int64_t dnnl_activation_reorders();

/// Number of convolution primitives created so far (tests check that a shape is planned once).
int64_t dnnl_conv_primitives_created();

/// oneDNN's name of the implementation that runs `c` at the current thread count ("" when none):
/// tests check that it does not change with the thread count.
std::string dnnl_conv_impl(const DnnlConv& c, const std::vector<DnnlAdd>& adds = {});

}  // namespace smelt::cpu
