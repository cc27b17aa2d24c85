// Convolution and pooling ops: argument checks, output shapes and dtype promotion.
#include <string>

#include "src/core/shape_math.h"
#include "src/ops/op_utils.h"
#include "src/primitives/shape_rules.h"

namespace smelt {

namespace {

std::string list_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

/// `v` with `k` entries: `def` everywhere when empty; InvalidArgument naming the option otherwise.
std::vector<int64_t> option(const std::vector<int64_t>& v, size_t k, int64_t def, const std::string& op,
                            const char* name, const Array& input) {
  if (v.empty()) return std::vector<int64_t>(k, def);
  if (v.size() != k)
    throw InvalidArgument(op + ": " + name + " " + list_str(v) + " has " + std::to_string(v.size()) +
                          " entries but input " + describe(input) + " has " + std::to_string(k) + " spatial dimension" +
                          (k == 1 ? "" : "s"));
  return v;
}

void check_positive(const std::vector<int64_t>& v, const std::string& op, const char* name) {
  for (auto x : v)
    if (x < 1) throw InvalidArgument(op + ": " + name + " must be positive, got " + list_str(v));
}

void check_non_negative(const std::vector<int64_t>& v, const std::string& op, const char* name) {
  for (auto x : v)
    if (x < 0) throw InvalidArgument(op + ": " + name + " must be non-negative, got " + list_str(v));
}

/// Spatial rank of `input` (rank 3 to 5); `want` > 0 fixes it (conv1d, conv2d).
size_t spatial_rank(const Array& input, const std::string& op, int want) {
  int nd = input.ndim();
  if (want > 0 && nd != want + 2)
    throw ShapeError(op + ": input must have rank " + std::to_string(want + 2) + " ([N, C" +
                     (want == 1 ? ", W" : ", H, W") + "]), got " + describe(input));
  if (nd < 3 || nd > 5)
    throw ShapeError(op + ": input must have rank 3 to 5 ([N, C, D...] with 1 to 3 spatial dimensions), got " +
                     describe(input));
  return static_cast<size_t>(nd - 2);
}

/// The common dtype of input and weight; bool is refused.
Dtype conv_dtype(const Array& input, const Array& weight, const std::string& op) {
  if (input.dtype() == Dtype::Bool || weight.dtype() == Dtype::Bool)
    throw DtypeError(op + ": bool is not supported (input " + describe(input) + ", weight " + describe(weight) + ")");
  return promote_types(input.dtype(), weight.dtype());
}

void check_output_size(int64_t out, size_t axis, const std::string& op, const Array& input, const std::string& detail) {
  if (out < 1)
    throw ShapeError(op + ": output size " + std::to_string(out) + " < 1 on spatial axis " + std::to_string(axis) +
                     " for input " + describe(input) + " (" + detail + ")");
}

/// What convolution and transposed convolution check alike: valid handles, one device, the
/// ranks, the dtype, groups, and the per-axis options expanded to the spatial rank.
struct ConvSetup {
  Device device;
  size_t k = 0;  // spatial rank
  Dtype dtype;
  std::vector<int64_t> strides, lo, hi, dil;
};

template <class Options>
ConvSetup conv_setup(const Array& input, const Array& weight, const Options& o, const std::string& op, int want,
                     const char* weight_layout) {
  check_valid(input, op.c_str());
  check_valid(weight, op.c_str());
  ConvSetup c;
  c.device = common_device({input, weight}, op.c_str());
  c.k = spatial_rank(input, op, want);
  if (weight.ndim() != input.ndim())
    throw ShapeError(op + ": weight " + describe(weight) + " must have the rank of input " + describe(input) +
                     " (" + weight_layout + ")");
  c.dtype = conv_dtype(input, weight, op);
  if (o.groups < 1) throw InvalidArgument(op + ": groups must be positive, got " + std::to_string(o.groups));
  c.strides = option(o.strides, c.k, 1, op, "strides", input);
  c.lo = option(o.padding_lo, c.k, 0, op, "padding_lo", input);
  c.hi = option(o.padding_hi, c.k, 0, op, "padding_hi", input);
  c.dil = option(o.dilations, c.k, 1, op, "dilations", input);
  check_positive(c.strides, op, "strides");
  check_positive(c.dil, op, "dilations");
  check_non_negative(c.lo, op, "padding_lo");
  check_non_negative(c.hi, op, "padding_hi");
  return c;
}

Array conv_impl(const Array& input, const Array& weight, const ConvOptions& o, const std::string& op, int want) {
  auto [device, k, dtype, strides, lo, hi, dil] = conv_setup(input, weight, o, op, want, "[O, C/groups, K...]");

  const Shape& is = input.shape();
  const Shape& ws = weight.shape();
  const std::string g = std::to_string(o.groups);
  if (is[1] % o.groups != 0)
    throw ShapeError(op + ": input channels " + std::to_string(is[1]) + " of " + describe(input) +
                     " are not divisible by groups " + g);
  if (ws[0] % o.groups != 0)
    throw ShapeError(op + ": output channels " + std::to_string(ws[0]) + " of weight " + describe(weight) +
                     " are not divisible by groups " + g);
  if (checked_mul(ws[1], o.groups, op) != is[1])
    throw ShapeError(op + ": weight " + describe(weight) + " expects " + std::to_string(ws[1]) + " x " + g +
                     " groups = " + std::to_string(ws[1] * o.groups) + " input channels, input " + describe(input) +
                     " has " + std::to_string(is[1]));
  for (size_t i = 0; i < k; ++i)
    if (ws[i + 2] < 1) throw ShapeError(op + ": kernel sizes must be positive, weight is " + describe(weight));

  Shape out{is[0], ws[0]};
  for (size_t i = 0; i < k; ++i) {
    int64_t eff = checked_add(checked_mul(dil[i], ws[i + 2] - 1, op), 1, op);
    int64_t n = conv_output_size(is[i + 2], ws[i + 2], strides[i], lo[i], hi[i], dil[i]);
    check_output_size(n, i, op, input,
                      "kernel " + std::to_string(ws[i + 2]) + " dilated to " + std::to_string(eff) + ", padding " +
                          std::to_string(lo[i]) + "+" + std::to_string(hi[i]));
    out.push_back(n);
  }
  ConvParams p{strides, lo, hi, dil, o.groups, {}, {}, 0};
  // A host operand beside a GPU one moves to the GPU (as in matmul).
  return make_array(std::move(out), dtype, device, make_prim(PrimKind::Conv, std::move(p)),
                    {to_device(astype(input, dtype), device), to_device(astype(weight, dtype), device)});
}

Array pool_impl(const Array& input, const PoolOptions& o, PoolKind kind) {
  const std::string op = kind == PoolKind::Max ? "max_pool" : "avg_pool";
  check_valid(input, op.c_str());
  size_t k = spatial_rank(input, op, 0);
  if (input.dtype() == Dtype::Bool) throw DtypeError(op + ": bool is not supported (input " + describe(input) + ")");
  if (o.kernel.size() != k)
    throw InvalidArgument(op + ": kernel " + list_str(o.kernel) + " has " + std::to_string(o.kernel.size()) +
                          " entries but input " + describe(input) + " has " + std::to_string(k) + " spatial dimension" +
                          (k == 1 ? "" : "s"));
  check_positive(o.kernel, op, "kernel");
  auto strides = option(o.strides, k, 1, op, "strides", input);
  auto lo = option(o.padding_lo, k, 0, op, "padding_lo", input);
  auto hi = option(o.padding_hi, k, 0, op, "padding_hi", input);
  auto dil = option(o.dilations, k, 1, op, "dilations", input);
  check_positive(strides, op, "strides");
  check_positive(dil, op, "dilations");
  check_non_negative(lo, op, "padding_lo");
  check_non_negative(hi, op, "padding_hi");
  // An average divides by the positions of a window (up to the whole kernel with
  // count_include_pad), so their count must fit in int64 (kernel [2^62, 2] overflowed it; found
  // by the fuzzer under UBSan).
  int64_t window = 1;
  for (auto kd : o.kernel)
    if (__builtin_mul_overflow(window, kd, &window))
      throw ShapeError(op + ": kernel " + list_str(o.kernel) + " has more window positions than an int64 can count");

  const Shape& is = input.shape();
  Shape out{is[0], is[1]};
  for (size_t i = 0; i < k; ++i) {
    int64_t eff = checked_add(checked_mul(dil[i], o.kernel[i] - 1, op), 1, op);
    int64_t n = pool_output_size(is[i + 2], o.kernel[i], strides[i], lo[i], hi[i], dil[i], o.ceil_mode);
    check_output_size(n, i, op, input,
                      "kernel " + std::to_string(o.kernel[i]) + " dilated to " + std::to_string(eff) + ", padding " +
                          std::to_string(lo[i]) + "+" + std::to_string(hi[i]));
    out.push_back(n);
  }
  PoolParams p{kind, o.kernel, strides, lo, hi, dil, kind == PoolKind::Avg && o.count_include_pad, o.ceil_mode};
  return make_array(std::move(out), input.dtype(), input.device(), make_prim(PrimKind::Pool, std::move(p)), {input});
}

}  // namespace

Array conv(const Array& input, const Array& weight, const ConvOptions& options) {
  return conv_impl(input, weight, options, "conv", 0);
}

Array conv1d(const Array& input, const Array& weight, int64_t stride, int64_t padding, int64_t dilation,
             int64_t groups) {
  ConvOptions o{{stride}, {padding}, {padding}, {dilation}, groups};
  return conv_impl(input, weight, o, "conv1d", 1);
}

Array conv2d(const Array& input, const Array& weight, std::pair<int64_t, int64_t> stride,
             std::pair<int64_t, int64_t> padding, std::pair<int64_t, int64_t> dilation, int64_t groups) {
  ConvOptions o{{stride.first, stride.second},
                {padding.first, padding.second},
                {padding.first, padding.second},
                {dilation.first, dilation.second},
                groups};
  return conv_impl(input, weight, o, "conv2d", 2);
}

Array conv_transpose(const Array& input, const Array& weight, const ConvTransposeOptions& o) {
  const std::string op = "conv_transpose";
  auto [device, k, dtype, strides, lo, hi, dil] = conv_setup(input, weight, o, op, 0, "[C, O/groups, K...]");
  auto outpad = option(o.output_padding, k, 0, op, "output_padding", input);
  check_non_negative(outpad, op, "output_padding");

  const Shape& is = input.shape();
  const Shape& ws = weight.shape();
  const std::string g = std::to_string(o.groups);
  if (is[1] % o.groups != 0)
    throw ShapeError(op + ": input channels " + std::to_string(is[1]) + " of " + describe(input) +
                     " are not divisible by groups " + g);
  if (ws[0] != is[1])
    throw ShapeError(op + ": weight " + describe(weight) + " expects " + std::to_string(ws[0]) +
                     " input channels ([C, O/groups, K...]), input " + describe(input) + " has " +
                     std::to_string(is[1]));
  for (size_t i = 0; i < k; ++i)
    if (ws[i + 2] < 1) throw ShapeError(op + ": kernel sizes must be positive, weight is " + describe(weight));

  Shape out{is[0], checked_mul(ws[1], o.groups, op)};
  for (size_t i = 0; i < k; ++i) {
    int64_t n = conv_transpose_output_size(is[i + 2], ws[i + 2], strides[i], lo[i], hi[i], dil[i], outpad[i]);
    check_output_size(n, i, op, input,
                      "kernel " + std::to_string(ws[i + 2]) + ", stride " + std::to_string(strides[i]) + ", padding " +
                          std::to_string(lo[i]) + "+" + std::to_string(hi[i]) + ", output_padding " +
                          std::to_string(outpad[i]));
    out.push_back(n);
  }
  ConvTransposeParams p{strides, lo, hi, dil, outpad, o.groups};
  return make_array(std::move(out), dtype, device, make_prim(PrimKind::ConvTranspose, std::move(p)),
                    {to_device(astype(input, dtype), device), to_device(astype(weight, dtype), device)});
}

Array max_pool(const Array& input, const PoolOptions& options) { return pool_impl(input, options, PoolKind::Max); }

Array avg_pool(const Array& input, const PoolOptions& options) { return pool_impl(input, options, PoolKind::Avg); }

}  // namespace smelt
