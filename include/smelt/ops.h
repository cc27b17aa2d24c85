// The public operations on arrays. Each checks its arguments, infers shape and dtype, and builds a node.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "smelt/array.h"

namespace smelt {

using Axes = std::vector<int>;

// ---------------------------------------------------------------------------------------------
// Creation
// ---------------------------------------------------------------------------------------------

/// An array of `shape` filled with `value` converted to `dtype`.
Array full(Shape shape, Array value, Dtype dtype);
/// An array of `shape` filled with `value`, keeping the value's dtype.
Array full(Shape shape, Array value);
Array zeros(Shape shape, Dtype dtype = float32);
Array ones(Shape shape, Dtype dtype = float32);
Array zeros_like(const Array& a);
Array ones_like(const Array& a);
/// Values start, start+step, ... below stop (NumPy's arange; the count is ceil((stop-start)/step)).
Array arange(double start, double stop, double step, Dtype dtype);
Array arange(double start, double stop, double step = 1.0);  // float32
Array arange(int64_t stop, Dtype dtype = int32);
/// `num` evenly spaced values from start to stop (stop included when `endpoint`).
Array linspace(double start, double stop, int64_t num, Dtype dtype = float32, bool endpoint = true);
/// An n×m matrix with ones on diagonal k.
Array eye(int64_t n, std::optional<int64_t> m = std::nullopt, int64_t k = 0, Dtype dtype = float32);
Array identity(int64_t n, Dtype dtype = float32);
/// Lower / upper triangle of the last two axes (elements above / below diagonal k zeroed).
Array tril(const Array& a, int64_t k = 0);
Array triu(const Array& a, int64_t k = 0);

// ---------------------------------------------------------------------------------------------
// Element-wise unary
// ---------------------------------------------------------------------------------------------

Array abs(const Array& a);
Array negative(const Array& a);
Array sign(const Array& a);
Array square(const Array& a);
Array reciprocal(const Array& a);
Array sqrt(const Array& a);
Array rsqrt(const Array& a);
Array exp(const Array& a);
Array exp2(const Array& a);
Array expm1(const Array& a);
Array log(const Array& a);
Array log2(const Array& a);
Array log10(const Array& a);
Array log1p(const Array& a);
Array sin(const Array& a);
Array cos(const Array& a);
Array tan(const Array& a);
Array arcsin(const Array& a);
Array arccos(const Array& a);
Array arctan(const Array& a);
Array sinh(const Array& a);
Array cosh(const Array& a);
Array tanh(const Array& a);
Array arcsinh(const Array& a);
Array arccosh(const Array& a);
Array arctanh(const Array& a);
Array erf(const Array& a);
Array erfinv(const Array& a);
Array sigmoid(const Array& a);
Array relu(const Array& a);
Array floor(const Array& a);
Array ceil(const Array& a);
/// Rounds half to even (NumPy's round with decimals=0).
Array round(const Array& a);
Array isnan(const Array& a);
Array isinf(const Array& a);
Array isfinite(const Array& a);
Array logical_not(const Array& a);
Array bitwise_not(const Array& a);

// ---------------------------------------------------------------------------------------------
// Element-wise binary (NumPy broadcasting and type promotion)
// ---------------------------------------------------------------------------------------------

Array add(const Array& a, const Array& b);
Array subtract(const Array& a, const Array& b);
Array multiply(const Array& a, const Array& b);
/// True division: integer inputs give float32 (as MLX does).
Array divide(const Array& a, const Array& b);
/// Floor of the quotient (Python's //); integer division by zero gives 0.
Array floor_divide(const Array& a, const Array& b);
/// Remainder with the sign of the divisor (Python's %); integer x % 0 gives 0.
Array remainder(const Array& a, const Array& b);
/// Remainder with the sign of the dividend (C's fmod); integer x fmod 0 gives 0.
Array fmod(const Array& a, const Array& b);
Array power(const Array& a, const Array& b);
/// Maximum / minimum; NaN propagates.
Array maximum(const Array& a, const Array& b);
Array minimum(const Array& a, const Array& b);
Array arctan2(const Array& a, const Array& b);
Array equal(const Array& a, const Array& b);
Array not_equal(const Array& a, const Array& b);
Array less(const Array& a, const Array& b);
Array less_equal(const Array& a, const Array& b);
Array greater(const Array& a, const Array& b);
Array greater_equal(const Array& a, const Array& b);
Array logical_and(const Array& a, const Array& b);
Array logical_or(const Array& a, const Array& b);
Array logical_xor(const Array& a, const Array& b);
Array bitwise_and(const Array& a, const Array& b);
Array bitwise_or(const Array& a, const Array& b);
Array bitwise_xor(const Array& a, const Array& b);
/// Shifts by a count at or past the bit width give 0 (left) or the sign fill (right).
Array left_shift(const Array& a, const Array& b);
Array right_shift(const Array& a, const Array& b);

/// Elements of `x` where `condition` is true, else of `y` (all three broadcast).
Array where(const Array& condition, const Array& x, const Array& y);
/// Clamps to [lo, hi]; either bound may be absent. NaN propagates.
Array clip(const Array& a, const std::optional<Array>& lo, const std::optional<Array>& hi);
/// Converts to `dtype`. Float to integer truncates toward zero; NaN, ±inf and out-of-range
/// values give the integer type's minimum for signed targets and 0 for unsigned ones (the
/// values x86 produces; C++ leaves them undefined). Integer narrowing wraps. To bool: x != 0.
Array astype(const Array& a, Dtype dtype);
/// A contiguous copy.
Array copy(const Array& a);
/// `a` on `device`: `a` itself when it is already there, else a contiguous copy made there when
/// evaluated (host<->GPU transfers). Ops combine host arrays with arrays of any device, so
/// moving the inputs of a computation is enough. Raises DeviceError for a device this build or
/// machine does not have.
Array to_device(const Array& a, Device device);

// Operators. A C++ scalar operand is weakly typed: it takes the array's dtype when its kind
// (bool < integer < float) is not above the array's, else float32 / int32.
Array operator-(const Array& a);
Array operator!(const Array& a);
Array operator~(const Array& a);
Array operator+(const Array& a, const Array& b);
Array operator-(const Array& a, const Array& b);
Array operator*(const Array& a, const Array& b);
Array operator/(const Array& a, const Array& b);
Array operator%(const Array& a, const Array& b);
Array operator==(const Array& a, const Array& b);
Array operator!=(const Array& a, const Array& b);
Array operator<(const Array& a, const Array& b);
Array operator<=(const Array& a, const Array& b);
Array operator>(const Array& a, const Array& b);
Array operator>=(const Array& a, const Array& b);
Array operator&&(const Array& a, const Array& b);
Array operator||(const Array& a, const Array& b);
Array operator&(const Array& a, const Array& b);
Array operator|(const Array& a, const Array& b);
Array operator^(const Array& a, const Array& b);
Array operator<<(const Array& a, const Array& b);
Array operator>>(const Array& a, const Array& b);

/// A 0-d array holding `value` with the weak-scalar dtype rule against `like`.
Array weak_scalar(double value, Dtype like);
Array weak_scalar(int64_t value, Dtype like);
Array weak_scalar(bool value, Dtype like);

#define SMELT_SCALAR_OPERATOR(OP)                                                     \
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>               \
  Array operator OP(const Array& a, T b) {                                            \
    if constexpr (std::is_same_v<T, bool>) return a OP weak_scalar(b, a.dtype());     \
    else if constexpr (std::is_integral_v<T>)                                         \
      return a OP weak_scalar(static_cast<int64_t>(b), a.dtype());                    \
    else return a OP weak_scalar(static_cast<double>(b), a.dtype());                  \
  }                                                                                   \
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>               \
  Array operator OP(T a, const Array& b) {                                            \
    if constexpr (std::is_same_v<T, bool>) return weak_scalar(a, b.dtype()) OP b;     \
    else if constexpr (std::is_integral_v<T>)                                         \
      return weak_scalar(static_cast<int64_t>(a), b.dtype()) OP b;                    \
    else return weak_scalar(static_cast<double>(a), b.dtype()) OP b;                  \
  }
SMELT_SCALAR_OPERATOR(+)
SMELT_SCALAR_OPERATOR(-)
SMELT_SCALAR_OPERATOR(*)
SMELT_SCALAR_OPERATOR(/)
SMELT_SCALAR_OPERATOR(%)
SMELT_SCALAR_OPERATOR(==)
SMELT_SCALAR_OPERATOR(!=)
SMELT_SCALAR_OPERATOR(<)
SMELT_SCALAR_OPERATOR(<=)
SMELT_SCALAR_OPERATOR(>)
SMELT_SCALAR_OPERATOR(>=)
SMELT_SCALAR_OPERATOR(&)
SMELT_SCALAR_OPERATOR(|)
SMELT_SCALAR_OPERATOR(^)
#undef SMELT_SCALAR_OPERATOR

// ---------------------------------------------------------------------------------------------
// Reductions (over the given axes, all axes when empty; negative axes count from the end)
// ---------------------------------------------------------------------------------------------

/// Sum. Dtype (NumPy): bool and signed integers narrower than 64 bits give int64, unsigned
/// integers narrower than 64 bits give uint64, int64/uint64 keep their dtype, and integer sums
/// wrap on overflow. Floats keep their dtype; float sums are pairwise, and float16/bfloat16
/// accumulate in float32 and round once. An empty sum is 0. prod, cumsum and cumprod follow the
/// same dtype rules (an empty product is 1).
Array sum(const Array& a, const Axes& axes = {}, bool keepdims = false);
/// Mean. Integers and bool give float32, floats keep their dtype (float16/bfloat16 compute in
/// float32 and round once). An empty mean is NaN.
Array mean(const Array& a, const Axes& axes = {}, bool keepdims = false);
Array prod(const Array& a, const Axes& axes = {}, bool keepdims = false);
/// Max / min keep the dtype; NaN propagates. A zero-size reduced axis raises InvalidArgument.
Array max(const Array& a, const Axes& axes = {}, bool keepdims = false);
Array min(const Array& a, const Axes& axes = {}, bool keepdims = false);
/// Bool results; NaN is true. Empty: all is true, any is false.
Array all(const Array& a, const Axes& axes = {}, bool keepdims = false);
Array any(const Array& a, const Axes& axes = {}, bool keepdims = false);
/// log(sum(exp(a))), shifted by the max for stability. Dtypes as mean; an empty one is -inf.
Array logsumexp(const Array& a, const Axes& axes = {}, bool keepdims = false);
/// Variance with `ddof` delta degrees of freedom, dividing by max(n - ddof, 0) as NumPy does
/// (too few elements give inf or NaN). Dtypes as mean; std is its square root.
Array var(const Array& a, const Axes& axes = {}, bool keepdims = false, int ddof = 0);
Array std(const Array& a, const Axes& axes = {}, bool keepdims = false, int ddof = 0);
/// Index of the max / min along `axis` (int64); `last` picks the last occurrence on ties. NaN
/// counts as the extreme value: the first NaN wins (NumPy), or the last one with `last`. A
/// zero-size axis raises InvalidArgument.
Array argmax(const Array& a, int axis, bool keepdims = false, bool last = false);
Array argmin(const Array& a, int axis, bool keepdims = false, bool last = false);
/// Over the flattened array.
Array argmax(const Array& a, bool keepdims = false);
Array argmin(const Array& a, bool keepdims = false);
/// Cumulative sum / product along `axis` (dtypes as sum). `reverse` accumulates from the end;
/// `exclusive` leaves each element out of its own result (the first is 0 / 1). cummax/cummin
/// keep the dtype and propagate NaN.
Array cumsum(const Array& a, int axis, bool reverse = false, bool exclusive = false);
Array cumprod(const Array& a, int axis, bool reverse = false, bool exclusive = false);
Array cummax(const Array& a, int axis, bool reverse = false);
Array cummin(const Array& a, int axis, bool reverse = false);

// ---------------------------------------------------------------------------------------------
// Linear algebra
// ---------------------------------------------------------------------------------------------

/// NumPy matmul: 1-d operands are promoted and squeezed, batch axes broadcast.
Array matmul(const Array& a, const Array& b);

// ---------------------------------------------------------------------------------------------
// Shape and indexing
// ---------------------------------------------------------------------------------------------

/// One entry may be -1 (inferred). A view when the data allows, else a copy.
Array reshape(const Array& a, Shape shape);
Array flatten(const Array& a, int start_axis = 0, int end_axis = -1);
Array squeeze(const Array& a, const Axes& axes);
Array squeeze(const Array& a);
Array expand_dims(const Array& a, const Axes& axes);
Array expand_dims(const Array& a, int axis);
/// Reverses the axes when `perm` is empty.
Array transpose(const Array& a, const Axes& perm = {});
Array swapaxes(const Array& a, int axis1, int axis2);
Array moveaxis(const Array& a, int source, int destination);
Array broadcast_to(const Array& a, const Shape& shape);
std::vector<Array> broadcast_arrays(const std::vector<Array>& arrays);
Shape broadcast_shapes(const Shape& a, const Shape& b);
Array concatenate(const std::vector<Array>& arrays, int axis = 0);
Array stack(const std::vector<Array>& arrays, int axis = 0);
/// Into `sections` equal parts along axis.
std::vector<Array> split(const Array& a, int sections, int axis = 0);
/// At the given indices along axis (NumPy's array_split with indices).
std::vector<Array> split(const Array& a, const std::vector<int64_t>& indices, int axis = 0);
/// NumPy basic slicing with Python clamping: start/stop/step per axis (missing axes are whole).
/// Negative steps walk backwards. Always a view.
Array slice(const Array& a, const std::vector<int64_t>& start, const std::vector<int64_t>& stop,
            const std::vector<int64_t>& step = {});
/// Slices along the given axes only.
Array slice(const Array& a, const Axes& axes, const std::vector<int64_t>& start,
            const std::vector<int64_t>& stop, const std::vector<int64_t>& step);
/// `a` with the slice [start:stop:step] replaced by `update` (broadcast to the slice's shape).
Array slice_update(const Array& a, const Array& update, const std::vector<int64_t>& start,
                   const std::vector<int64_t>& stop, const std::vector<int64_t>& step = {});
enum class PadMode : uint8_t { Constant, Reflect, Edge };
/// Pads each axis by (before, after); `pad_width` has one pair per axis, or one pair for all.
Array pad(const Array& a, const std::vector<std::pair<int64_t, int64_t>>& pad_width,
          PadMode mode = PadMode::Constant, const Array& value = Array(0));
Array tile(const Array& a, const std::vector<int64_t>& reps);
Array repeat(const Array& a, int64_t repeats, int axis);
Array repeat(const Array& a, int64_t repeats);  // flattened
Array flip(const Array& a, const Axes& axes = {});
/// Elements at `indices` (any integer dtype, negative wrap) along `axis`:
/// out shape = a.shape[:axis] + indices.shape + a.shape[axis+1:].
Array take(const Array& a, const Array& indices, int axis);
/// Over the flattened array.
Array take(const Array& a, const Array& indices);
/// NumPy take_along_axis: indices have a's rank and broadcast against it except on `axis`.
Array take_along_axis(const Array& a, const Array& indices, int axis);
/// ONNX GatherND: the last axis of indices indexes the leading axes of a after `batch_dims`.
Array gather_nd(const Array& a, const Array& indices, int batch_dims = 0);
enum class ScatterReduce : uint8_t { Assign, Add, Mul, Max, Min };
/// ONNX ScatterElements: out = a; out[..., indices[i], ...] (op)= updates[i] along `axis`.
Array scatter(const Array& a, const Array& indices, const Array& updates, int axis,
              ScatterReduce reduce = ScatterReduce::Assign);
/// ONNX ScatterND: indices[..., k] address the first k axes of a.
Array scatter_nd(const Array& a, const Array& indices, const Array& updates,
                 ScatterReduce reduce = ScatterReduce::Assign);
/// One-hot along a new last axis: (indices[..., None] == arange(depth)) as `dtype`.
Array one_hot(const Array& indices, int64_t depth, Dtype dtype = float32);
/// Coordinates of the non-zero elements, shape [ndim, count] (int64) like ONNX NonZero.
/// The output shape depends on the values: this evaluates `a` (a graph break under compile).
Array nonzero(const Array& a);

// ---------------------------------------------------------------------------------------------
// Sorting
// ---------------------------------------------------------------------------------------------

/// Ascending; NaN sorts last. Stable: -0/+0 (equal) keep their input order.
Array sort(const Array& a, int axis = -1);
/// Stable ascending indices (int64). `descending` is the reverse order (NaN first, as the
/// largest value) with equal elements still in their original order.
Array argsort(const Array& a, int axis = -1, bool descending = false);
/// The k largest (or smallest) along axis: {values, int64 indices}; ties keep the lower index.
/// NaN counts as the largest value. k outside [0, axis size] raises InvalidArgument. The result
/// is always in order (best first), which `sorted = false` also allows.
std::pair<Array, Array> topk(const Array& a, int64_t k, int axis = -1, bool largest = true,
                             bool sorted = true);
struct UniqueResult {
  Array values;          // sorted unique values (flattened input) or unique slices along axis
  Array indices;         // first occurrence of each unique value (int64)
  Array inverse;         // index into values for each input element (int64): a's shape without
                         // axis (NumPy 2), [a.shape[axis]] with one
  Array counts;          // occurrences of each unique value (int64)
};
/// Unique values of the flattened array, or unique slices along `axis` (compared
/// lexicographically). NaNs collapse into one value (NumPy >= 1.21); `sorted = false` keeps the
/// order of first occurrence. Evaluates `a`.
UniqueResult unique(const Array& a, std::optional<int> axis = std::nullopt, bool sorted = true);

// ---------------------------------------------------------------------------------------------
// Convolution and pooling (channels first: input [N, C, D...], weight [O, C/groups, K...])
// ---------------------------------------------------------------------------------------------

struct ConvOptions {
  std::vector<int64_t> strides;      // default 1
  std::vector<int64_t> padding_lo;   // default 0
  std::vector<int64_t> padding_hi;   // default 0
  std::vector<int64_t> dilations;    // default 1
  int64_t groups = 1;
};
/// N-d convolution (cross-correlation, no kernel flip) for 1 to 3 spatial axes. Option vectors
/// have one entry per spatial axis or are empty (defaults). Output size per axis:
/// floor((in + lo + hi - dilation*(k-1) - 1) / stride) + 1, which must be >= 1. Input and weight
/// are promoted (promote_types); float16/bfloat16 accumulate in float32 and round once; integers
/// are exact and wrap on overflow; bool raises DtypeError.
Array conv(const Array& input, const Array& weight, const ConvOptions& options = {});
/// conv over input [N, C, W] / [N, C, H, W] with symmetric padding.
Array conv1d(const Array& input, const Array& weight, int64_t stride = 1, int64_t padding = 0,
             int64_t dilation = 1, int64_t groups = 1);
Array conv2d(const Array& input, const Array& weight, std::pair<int64_t, int64_t> stride = {1, 1},
             std::pair<int64_t, int64_t> padding = {0, 0},
             std::pair<int64_t, int64_t> dilation = {1, 1}, int64_t groups = 1);
struct ConvTransposeOptions {
  std::vector<int64_t> strides;
  std::vector<int64_t> padding_lo;
  std::vector<int64_t> padding_hi;
  std::vector<int64_t> dilations;
  std::vector<int64_t> output_padding;
  int64_t groups = 1;
};
/// Weight [C, O/groups, K...] as in ONNX ConvTranspose and PyTorch (the adjoint of conv). Output
/// size per axis: (in-1)*stride - lo - hi + dilation*(k-1) + output_padding + 1, which must be
/// >= 1; output_padding only needs to be non-negative. Dtypes as conv.
Array conv_transpose(const Array& input, const Array& weight, const ConvTransposeOptions& options = {});
struct PoolOptions {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;     // default = 1
  std::vector<int64_t> padding_lo;
  std::vector<int64_t> padding_hi;
  std::vector<int64_t> dilations;
  bool ceil_mode = false;
  bool count_include_pad = false;  // average pooling only
};
/// Pooling over input [N, C, D...] (1 to 3 spatial axes; `kernel` has one entry per axis). With
/// ceil_mode the output size rounds up, but the last window must start inside the input or the
/// left padding (PyTorch/ONNX). Padded positions are skipped: they never win a max and average
/// only counts them with count_include_pad (up to the right padding, never beyond it). The
/// dtype is kept (bool raises DtypeError). max propagates NaN; a window that holds only padding
/// gives -inf (the lowest value for integers). avg sums in double (or 64-bit integers) and
/// divides once; integer averages round toward zero; an empty window gives NaN (0 for integers).
Array max_pool(const Array& input, const PoolOptions& options);
Array avg_pool(const Array& input, const PoolOptions& options);

// ---------------------------------------------------------------------------------------------
// Compositions
// ---------------------------------------------------------------------------------------------

// The compositions compute in float32 (float64 for float64) and round once to the result
// dtype; integer and bool inputs give float32.

/// Softmax over `axes` (all axes when empty), shifted by the max for stability. A slice of only
/// -inf gives NaN.
Array softmax(const Array& a, const Axes& axes = {-1});
Array log_softmax(const Array& a, const Axes& axes = {-1});
/// Normalizes over the last axis (biased variance); weight and bias optional, each 1-d with the
/// size of that axis. The result dtype promotes x's float dtype with the parameters'.
Array layer_norm(const Array& x, const std::optional<Array>& weight, const std::optional<Array>& bias,
                 double eps = 1e-5);
/// x / sqrt(mean(x^2, last axis) + eps) * weight.
Array rms_norm(const Array& x, const std::optional<Array>& weight, double eps = 1e-5);
/// GELU, erf form 0.5x(1+erf(x/√2)), or tanh form when `approximate`:
/// 0.5x(1+tanh(√(2/π)(x+0.044715x³))).
Array gelu(const Array& x, bool approximate = false);
/// x * sigmoid(x).
Array silu(const Array& x);

}  // namespace smelt
