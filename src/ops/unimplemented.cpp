// Placeholders for ops not written yet: weak definitions that the real ops override.
// Each family lands its ops elsewhere; this file goes once every op is written.
#include "smelt/errors.h"
#include "smelt/io.h"
#include "smelt/ops.h"
#include "smelt/random.h"

namespace smelt {

__attribute__((weak)) Array linspace(double start, double stop, int64_t num, Dtype dtype, bool endpoint) { throw UnsupportedError("linspace: not implemented yet"); }
__attribute__((weak)) Array eye(int64_t n, std::optional<int64_t> m, int64_t k, Dtype dtype) { throw UnsupportedError("eye: not implemented yet"); }
__attribute__((weak)) Array identity(int64_t n, Dtype dtype) { throw UnsupportedError("identity: not implemented yet"); }
__attribute__((weak)) Array tril(const Array& a, int64_t k) { throw UnsupportedError("tril: not implemented yet"); }
__attribute__((weak)) Array triu(const Array& a, int64_t k) { throw UnsupportedError("triu: not implemented yet"); }
__attribute__((weak)) Array abs(const Array& a) { throw UnsupportedError("abs: not implemented yet"); }
__attribute__((weak)) Array negative(const Array& a) { throw UnsupportedError("negative: not implemented yet"); }
__attribute__((weak)) Array sign(const Array& a) { throw UnsupportedError("sign: not implemented yet"); }
__attribute__((weak)) Array square(const Array& a) { throw UnsupportedError("square: not implemented yet"); }
__attribute__((weak)) Array reciprocal(const Array& a) { throw UnsupportedError("reciprocal: not implemented yet"); }
__attribute__((weak)) Array sqrt(const Array& a) { throw UnsupportedError("sqrt: not implemented yet"); }
__attribute__((weak)) Array rsqrt(const Array& a) { throw UnsupportedError("rsqrt: not implemented yet"); }
__attribute__((weak)) Array exp(const Array& a) { throw UnsupportedError("exp: not implemented yet"); }
__attribute__((weak)) Array exp2(const Array& a) { throw UnsupportedError("exp2: not implemented yet"); }
__attribute__((weak)) Array expm1(const Array& a) { throw UnsupportedError("expm1: not implemented yet"); }
__attribute__((weak)) Array log(const Array& a) { throw UnsupportedError("log: not implemented yet"); }
__attribute__((weak)) Array log2(const Array& a) { throw UnsupportedError("log2: not implemented yet"); }
__attribute__((weak)) Array log10(const Array& a) { throw UnsupportedError("log10: not implemented yet"); }
__attribute__((weak)) Array log1p(const Array& a) { throw UnsupportedError("log1p: not implemented yet"); }
__attribute__((weak)) Array sin(const Array& a) { throw UnsupportedError("sin: not implemented yet"); }
__attribute__((weak)) Array cos(const Array& a) { throw UnsupportedError("cos: not implemented yet"); }
__attribute__((weak)) Array tan(const Array& a) { throw UnsupportedError("tan: not implemented yet"); }
__attribute__((weak)) Array arcsin(const Array& a) { throw UnsupportedError("arcsin: not implemented yet"); }
__attribute__((weak)) Array arccos(const Array& a) { throw UnsupportedError("arccos: not implemented yet"); }
__attribute__((weak)) Array arctan(const Array& a) { throw UnsupportedError("arctan: not implemented yet"); }
__attribute__((weak)) Array sinh(const Array& a) { throw UnsupportedError("sinh: not implemented yet"); }
__attribute__((weak)) Array cosh(const Array& a) { throw UnsupportedError("cosh: not implemented yet"); }
__attribute__((weak)) Array tanh(const Array& a) { throw UnsupportedError("tanh: not implemented yet"); }
__attribute__((weak)) Array arcsinh(const Array& a) { throw UnsupportedError("arcsinh: not implemented yet"); }
__attribute__((weak)) Array arccosh(const Array& a) { throw UnsupportedError("arccosh: not implemented yet"); }
__attribute__((weak)) Array arctanh(const Array& a) { throw UnsupportedError("arctanh: not implemented yet"); }
__attribute__((weak)) Array erf(const Array& a) { throw UnsupportedError("erf: not implemented yet"); }
__attribute__((weak)) Array erfinv(const Array& a) { throw UnsupportedError("erfinv: not implemented yet"); }
__attribute__((weak)) Array sigmoid(const Array& a) { throw UnsupportedError("sigmoid: not implemented yet"); }
__attribute__((weak)) Array relu(const Array& a) { throw UnsupportedError("relu: not implemented yet"); }
__attribute__((weak)) Array floor(const Array& a) { throw UnsupportedError("floor: not implemented yet"); }
__attribute__((weak)) Array ceil(const Array& a) { throw UnsupportedError("ceil: not implemented yet"); }
__attribute__((weak)) Array round(const Array& a) { throw UnsupportedError("round: not implemented yet"); }
__attribute__((weak)) Array isnan(const Array& a) { throw UnsupportedError("isnan: not implemented yet"); }
__attribute__((weak)) Array isinf(const Array& a) { throw UnsupportedError("isinf: not implemented yet"); }
__attribute__((weak)) Array isfinite(const Array& a) { throw UnsupportedError("isfinite: not implemented yet"); }
__attribute__((weak)) Array logical_not(const Array& a) { throw UnsupportedError("logical_not: not implemented yet"); }
__attribute__((weak)) Array bitwise_not(const Array& a) { throw UnsupportedError("bitwise_not: not implemented yet"); }
__attribute__((weak)) Array add(const Array& a, const Array& b) { throw UnsupportedError("add: not implemented yet"); }
__attribute__((weak)) Array subtract(const Array& a, const Array& b) { throw UnsupportedError("subtract: not implemented yet"); }
__attribute__((weak)) Array multiply(const Array& a, const Array& b) { throw UnsupportedError("multiply: not implemented yet"); }
__attribute__((weak)) Array divide(const Array& a, const Array& b) { throw UnsupportedError("divide: not implemented yet"); }
__attribute__((weak)) Array floor_divide(const Array& a, const Array& b) { throw UnsupportedError("floor_divide: not implemented yet"); }
__attribute__((weak)) Array remainder(const Array& a, const Array& b) { throw UnsupportedError("remainder: not implemented yet"); }
__attribute__((weak)) Array fmod(const Array& a, const Array& b) { throw UnsupportedError("fmod: not implemented yet"); }
__attribute__((weak)) Array power(const Array& a, const Array& b) { throw UnsupportedError("power: not implemented yet"); }
__attribute__((weak)) Array maximum(const Array& a, const Array& b) { throw UnsupportedError("maximum: not implemented yet"); }
__attribute__((weak)) Array minimum(const Array& a, const Array& b) { throw UnsupportedError("minimum: not implemented yet"); }
__attribute__((weak)) Array arctan2(const Array& a, const Array& b) { throw UnsupportedError("arctan2: not implemented yet"); }
__attribute__((weak)) Array equal(const Array& a, const Array& b) { throw UnsupportedError("equal: not implemented yet"); }
__attribute__((weak)) Array not_equal(const Array& a, const Array& b) { throw UnsupportedError("not_equal: not implemented yet"); }
__attribute__((weak)) Array less(const Array& a, const Array& b) { throw UnsupportedError("less: not implemented yet"); }
__attribute__((weak)) Array less_equal(const Array& a, const Array& b) { throw UnsupportedError("less_equal: not implemented yet"); }
__attribute__((weak)) Array greater(const Array& a, const Array& b) { throw UnsupportedError("greater: not implemented yet"); }
__attribute__((weak)) Array greater_equal(const Array& a, const Array& b) { throw UnsupportedError("greater_equal: not implemented yet"); }
__attribute__((weak)) Array logical_and(const Array& a, const Array& b) { throw UnsupportedError("logical_and: not implemented yet"); }
__attribute__((weak)) Array logical_or(const Array& a, const Array& b) { throw UnsupportedError("logical_or: not implemented yet"); }
__attribute__((weak)) Array logical_xor(const Array& a, const Array& b) { throw UnsupportedError("logical_xor: not implemented yet"); }
__attribute__((weak)) Array bitwise_and(const Array& a, const Array& b) { throw UnsupportedError("bitwise_and: not implemented yet"); }
__attribute__((weak)) Array bitwise_or(const Array& a, const Array& b) { throw UnsupportedError("bitwise_or: not implemented yet"); }
__attribute__((weak)) Array bitwise_xor(const Array& a, const Array& b) { throw UnsupportedError("bitwise_xor: not implemented yet"); }
__attribute__((weak)) Array left_shift(const Array& a, const Array& b) { throw UnsupportedError("left_shift: not implemented yet"); }
__attribute__((weak)) Array right_shift(const Array& a, const Array& b) { throw UnsupportedError("right_shift: not implemented yet"); }
__attribute__((weak)) Array where(const Array& condition, const Array& x, const Array& y) { throw UnsupportedError("where: not implemented yet"); }
__attribute__((weak)) Array clip(const Array& a, const std::optional<Array>& lo, const std::optional<Array>& hi) { throw UnsupportedError("clip: not implemented yet"); }
__attribute__((weak)) Array operator-(const Array& a) { throw UnsupportedError("operator-: not implemented yet"); }
__attribute__((weak)) Array operator!(const Array& a) { throw UnsupportedError("operator!: not implemented yet"); }
__attribute__((weak)) Array operator~(const Array& a) { throw UnsupportedError("operator~: not implemented yet"); }
__attribute__((weak)) Array operator+(const Array& a, const Array& b) { throw UnsupportedError("operator+: not implemented yet"); }
__attribute__((weak)) Array operator-(const Array& a, const Array& b) { throw UnsupportedError("operator-: not implemented yet"); }
__attribute__((weak)) Array operator*(const Array& a, const Array& b) { throw UnsupportedError("operator*: not implemented yet"); }
__attribute__((weak)) Array operator/(const Array& a, const Array& b) { throw UnsupportedError("operator/: not implemented yet"); }
__attribute__((weak)) Array operator%(const Array& a, const Array& b) { throw UnsupportedError("operator%: not implemented yet"); }
__attribute__((weak)) Array operator==(const Array& a, const Array& b) { throw UnsupportedError("operator==: not implemented yet"); }
__attribute__((weak)) Array operator!=(const Array& a, const Array& b) { throw UnsupportedError("operator!=: not implemented yet"); }
__attribute__((weak)) Array operator<(const Array& a, const Array& b) { throw UnsupportedError("operator<: not implemented yet"); }
__attribute__((weak)) Array operator<=(const Array& a, const Array& b) { throw UnsupportedError("operator<=: not implemented yet"); }
__attribute__((weak)) Array operator>(const Array& a, const Array& b) { throw UnsupportedError("operator>: not implemented yet"); }
__attribute__((weak)) Array operator>=(const Array& a, const Array& b) { throw UnsupportedError("operator>=: not implemented yet"); }
__attribute__((weak)) Array operator&&(const Array& a, const Array& b) { throw UnsupportedError("operator&&: not implemented yet"); }
__attribute__((weak)) Array operator||(const Array& a, const Array& b) { throw UnsupportedError("operator||: not implemented yet"); }
__attribute__((weak)) Array operator&(const Array& a, const Array& b) { throw UnsupportedError("operator&: not implemented yet"); }
__attribute__((weak)) Array operator|(const Array& a, const Array& b) { throw UnsupportedError("operator|: not implemented yet"); }
__attribute__((weak)) Array operator^(const Array& a, const Array& b) { throw UnsupportedError("operator^: not implemented yet"); }
__attribute__((weak)) Array operator<<(const Array& a, const Array& b) { throw UnsupportedError("operator<<: not implemented yet"); }
__attribute__((weak)) Array operator>>(const Array& a, const Array& b) { throw UnsupportedError("operator>>: not implemented yet"); }
__attribute__((weak)) Array weak_scalar(double value, Dtype like) { throw UnsupportedError("weak_scalar: not implemented yet"); }
__attribute__((weak)) Array weak_scalar(int64_t value, Dtype like) { throw UnsupportedError("weak_scalar: not implemented yet"); }
__attribute__((weak)) Array weak_scalar(bool value, Dtype like) { throw UnsupportedError("weak_scalar: not implemented yet"); }
__attribute__((weak)) Array argmax(const Array& a, int axis, bool keepdims, bool last) { throw UnsupportedError("argmax: not implemented yet"); }
__attribute__((weak)) Array argmin(const Array& a, int axis, bool keepdims, bool last) { throw UnsupportedError("argmin: not implemented yet"); }
__attribute__((weak)) Array argmax(const Array& a, bool keepdims) { throw UnsupportedError("argmax: not implemented yet"); }
__attribute__((weak)) Array argmin(const Array& a, bool keepdims) { throw UnsupportedError("argmin: not implemented yet"); }
__attribute__((weak)) Array cumsum(const Array& a, int axis, bool reverse, bool exclusive) { throw UnsupportedError("cumsum: not implemented yet"); }
__attribute__((weak)) Array cumprod(const Array& a, int axis, bool reverse, bool exclusive) { throw UnsupportedError("cumprod: not implemented yet"); }
__attribute__((weak)) Array cummax(const Array& a, int axis, bool reverse) { throw UnsupportedError("cummax: not implemented yet"); }
__attribute__((weak)) Array cummin(const Array& a, int axis, bool reverse) { throw UnsupportedError("cummin: not implemented yet"); }
__attribute__((weak)) Array matmul(const Array& a, const Array& b) { throw UnsupportedError("matmul: not implemented yet"); }
__attribute__((weak)) Array concatenate(const std::vector<Array>& arrays, int axis) { throw UnsupportedError("concatenate: not implemented yet"); }
__attribute__((weak)) Array stack(const std::vector<Array>& arrays, int axis) { throw UnsupportedError("stack: not implemented yet"); }
__attribute__((weak)) std::vector<Array> split(const Array& a, int sections, int axis) { throw UnsupportedError("split: not implemented yet"); }
__attribute__((weak)) std::vector<Array> split(const Array& a, const std::vector<int64_t>& indices, int axis) { throw UnsupportedError("split: not implemented yet"); }
__attribute__((weak)) Array pad(const Array& a, const std::vector<std::pair<int64_t, int64_t>>& pad_width, PadMode mode, const Array& value) { throw UnsupportedError("pad: not implemented yet"); }
__attribute__((weak)) Array tile(const Array& a, const std::vector<int64_t>& reps) { throw UnsupportedError("tile: not implemented yet"); }
__attribute__((weak)) Array repeat(const Array& a, int64_t repeats, int axis) { throw UnsupportedError("repeat: not implemented yet"); }
__attribute__((weak)) Array repeat(const Array& a, int64_t repeats) { throw UnsupportedError("repeat: not implemented yet"); }
__attribute__((weak)) Array take(const Array& a, const Array& indices, int axis) { throw UnsupportedError("take: not implemented yet"); }
__attribute__((weak)) Array take(const Array& a, const Array& indices) { throw UnsupportedError("take: not implemented yet"); }
__attribute__((weak)) Array take_along_axis(const Array& a, const Array& indices, int axis) { throw UnsupportedError("take_along_axis: not implemented yet"); }
__attribute__((weak)) Array gather_nd(const Array& a, const Array& indices, int batch_dims) { throw UnsupportedError("gather_nd: not implemented yet"); }
__attribute__((weak)) Array scatter(const Array& a, const Array& indices, const Array& updates, int axis, ScatterReduce reduce) { throw UnsupportedError("scatter: not implemented yet"); }
__attribute__((weak)) Array scatter_nd(const Array& a, const Array& indices, const Array& updates, ScatterReduce reduce) { throw UnsupportedError("scatter_nd: not implemented yet"); }
__attribute__((weak)) Array one_hot(const Array& indices, int64_t depth, Dtype dtype) { throw UnsupportedError("one_hot: not implemented yet"); }
__attribute__((weak)) Array nonzero(const Array& a) { throw UnsupportedError("nonzero: not implemented yet"); }
__attribute__((weak)) Array sort(const Array& a, int axis) { throw UnsupportedError("sort: not implemented yet"); }
__attribute__((weak)) Array argsort(const Array& a, int axis, bool descending) { throw UnsupportedError("argsort: not implemented yet"); }
__attribute__((weak)) std::pair<Array, Array> topk(const Array& a, int64_t k, int axis, bool largest, bool sorted) { throw UnsupportedError("topk: not implemented yet"); }
__attribute__((weak)) UniqueResult unique(const Array& a, std::optional<int> axis, bool sorted) { throw UnsupportedError("unique: not implemented yet"); }
__attribute__((weak)) Array conv1d(const Array& input, const Array& weight, int64_t stride, int64_t padding, int64_t dilation, int64_t groups) { throw UnsupportedError("conv1d: not implemented yet"); }
__attribute__((weak)) Array max_pool(const Array& input, const PoolOptions& options) { throw UnsupportedError("max_pool: not implemented yet"); }
__attribute__((weak)) Array avg_pool(const Array& input, const PoolOptions& options) { throw UnsupportedError("avg_pool: not implemented yet"); }
__attribute__((weak)) Array layer_norm(const Array& x, const std::optional<Array>& weight, const std::optional<Array>& bias, double eps) { throw UnsupportedError("layer_norm: not implemented yet"); }
__attribute__((weak)) Array rms_norm(const Array& x, const std::optional<Array>& weight, double eps) { throw UnsupportedError("rms_norm: not implemented yet"); }
__attribute__((weak)) Array gelu(const Array& x, bool approximate) { throw UnsupportedError("gelu: not implemented yet"); }
__attribute__((weak)) Array silu(const Array& x) { throw UnsupportedError("silu: not implemented yet"); }
__attribute__((weak)) Array random::key(uint64_t seed) { throw UnsupportedError("key: not implemented yet"); }
__attribute__((weak)) Array random::split(const Array& key, int num) { throw UnsupportedError("split: not implemented yet"); }
__attribute__((weak)) Array random::bits(const Array& key, const Shape& shape) { throw UnsupportedError("bits: not implemented yet"); }
__attribute__((weak)) Array random::uniform(const Array& key, const Shape& shape, double low, double high, Dtype dtype) { throw UnsupportedError("uniform: not implemented yet"); }
__attribute__((weak)) Array random::normal(const Array& key, const Shape& shape, double mean, double stddev, Dtype dtype) { throw UnsupportedError("normal: not implemented yet"); }
__attribute__((weak)) Array random::bernoulli(const Array& key, const Array& p, const Shape& shape) { throw UnsupportedError("bernoulli: not implemented yet"); }
__attribute__((weak)) Array random::categorical(const Array& key, const Array& logits, int axis, std::optional<Shape> shape) { throw UnsupportedError("categorical: not implemented yet"); }
__attribute__((weak)) Array random::randint(const Array& key, int64_t low, int64_t high, const Shape& shape, Dtype dtype) { throw UnsupportedError("randint: not implemented yet"); }
__attribute__((weak)) void save(const std::string& path, Array a) { throw UnsupportedError("save: not implemented yet"); }
__attribute__((weak)) Array load(const std::string& path) { throw UnsupportedError("load: not implemented yet"); }

}  // namespace smelt
