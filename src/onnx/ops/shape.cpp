// ONNX shape and indexing operators: Reshape, Transpose, Slice, Gather, Concat, Split, Pad, ...
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "smelt/compile.h"
#include "src/onnx/ops/op_helpers.h"

namespace smelt::onnx {

namespace {

int64_t product(const Shape& s, size_t from, size_t to) {
  return element_count(Shape(s.begin() + static_cast<std::ptrdiff_t>(from), s.begin() + static_cast<std::ptrdiff_t>(to)),
                       "product of dimensions");
}

std::vector<Value> op_reshape(OpContext& c) {
  const Array& x = c.tensor(0);
  std::vector<int64_t> shape = c.ints(1);
  bool allowzero = c.attr_int("allowzero", 0) != 0;
  int inferred = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= x.shape().size()) c.fail("shape entry 0 at position " + std::to_string(i) + " has no input dimension to copy");
      shape[i] = x.shape()[i];
    } else if (shape[i] == -1) {
      if (inferred >= 0) c.fail("shape " + shape_str(shape) + " has more than one -1");
      inferred = static_cast<int>(i);
    } else if (shape[i] < 0) {
      c.fail("shape " + shape_str(shape) + " has a negative entry");
    }
  }
  return {tv(reshape(x, shape))};
}

std::vector<Value> op_transpose(OpContext& c) {
  const Array& x = c.tensor(0);
  std::vector<int64_t> perm = c.attr_ints("perm");
  Axes axes;
  if (c.has_attr("perm")) {
    // ONNX's perm is a permutation of [0, rank): checked here, in int64, before any narrowing.
    const int64_t rank = x.ndim();
    if (static_cast<int64_t>(perm.size()) != rank)
      c.fail("perm " + shape_str(perm) + " has " + std::to_string(perm.size()) + " entries for a rank-" +
             std::to_string(rank) + " input " + c.input(0).describe());
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (auto p : perm) {
      if (p < 0 || p >= rank)
        c.fail("perm " + shape_str(perm) + " has entry " + std::to_string(p) + ", out of range for rank " +
               std::to_string(rank));
      if (seen[static_cast<size_t>(p)]) c.fail("perm " + shape_str(perm) + " repeats axis " + std::to_string(p));
      seen[static_cast<size_t>(p)] = true;
      axes.push_back(static_cast<int>(p));
    }
  }
  return {tv(transpose(x, axes))};
}

std::vector<int64_t> axes_arg(OpContext& c, size_t input, bool from_input) {
  if (from_input) return c.has(input) ? c.ints(input) : std::vector<int64_t>{};
  return c.attr_ints("axes");
}

std::vector<Value> squeeze_impl(OpContext& c, bool from_input) {
  const Array& x = c.tensor(0);
  auto axes = axes_arg(c, 1, from_input);
  if (axes.empty()) return {tv(squeeze(x))};
  Axes ax;
  for (auto a : axes) ax.push_back(onnx_axis(c, a, x.ndim()));
  for (int a : ax)
    if (x.shape()[a] != 1) c.fail("cannot squeeze axis " + std::to_string(a) + " of shape " + shape_str(x.shape()));
  return {tv(squeeze(x, ax))};
}
std::vector<Value> op_squeeze_1(OpContext& c) { return squeeze_impl(c, false); }
std::vector<Value> op_squeeze_13(OpContext& c) { return squeeze_impl(c, true); }

std::vector<Value> unsqueeze_impl(OpContext& c, bool from_input) {
  const Array& x = c.tensor(0);
  auto axes = axes_arg(c, 1, from_input);
  int64_t out_rank = x.ndim() + static_cast<int64_t>(axes.size());
  Axes ax;
  for (auto a : axes) ax.push_back(onnx_axis(c, a, out_rank));
  std::sort(ax.begin(), ax.end());
  if (std::adjacent_find(ax.begin(), ax.end()) != ax.end()) c.fail("axes " + shape_str(axes) + " repeat an axis");
  return {tv(expand_dims(x, ax))};
}
std::vector<Value> op_unsqueeze_1(OpContext& c) { return unsqueeze_impl(c, false); }
std::vector<Value> op_unsqueeze_13(OpContext& c) { return unsqueeze_impl(c, true); }

std::vector<Value> op_concat(OpContext& c) {
  if (c.num_inputs() == 0) c.fail("needs at least one input");
  if (c.input(0).is_strings()) {
    // String tensors: concatenate on the host.
    int64_t axis_in = c.attr_int("axis", 0);
    const auto& first = c.input(0).string_tensor();
    int axis = onnx_axis(c, axis_in, static_cast<int64_t>(first.shape.size()));
    Shape out_shape = first.shape;
    out_shape[axis] = 0;
    // Every input is a string tensor of the first one's rank and sizes off the axis (an input of
    // another rank was indexed at the axis; found by the fuzzer under UBSan).
    for (size_t i = 0; i < c.num_inputs(); ++i) {
      c.require_same_type(0, i);
      const Shape& si = c.input(i).string_tensor().shape;
      bool fits = si.size() == first.shape.size();
      for (size_t d = 0; fits && d < si.size(); ++d) fits = static_cast<int>(d) == axis || si[d] == first.shape[d];
      if (!fits)
        c.fail("input " + std::to_string(i) + " " + c.input(i).describe() + " must have the shape of input 0 " +
               c.input(0).describe() + " except on axis " + std::to_string(axis));
      out_shape[axis] = add_size(c, out_shape[axis], si[axis]);
    }
    int64_t outer = product(first.shape, 0, axis);
    std::vector<std::string> data;
    for (int64_t o = 0; o < outer; ++o)
      for (size_t i = 0; i < c.num_inputs(); ++i) {
        const auto& s = c.input(i).string_tensor();
        int64_t chunk = product(s.shape, axis, s.shape.size());
        for (int64_t k = 0; k < chunk; ++k) data.push_back(s.data[static_cast<size_t>(o * chunk + k)]);
      }
    return {Value::strings(StringTensor{out_shape, data})};
  }
  std::vector<Array> parts;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    c.require_same_type(0, i);
    parts.push_back(c.tensor(i));
  }
  int axis = onnx_axis(c, c.attr_int("axis", 0), parts[0].ndim());
  return {tv(concatenate(parts, axis))};
}

std::vector<Value> slice_with(OpContext& c, std::vector<int64_t> starts, std::vector<int64_t> ends,
                              std::vector<int64_t> axes, std::vector<int64_t> steps) {
  const Array& x = c.tensor(0);
  int64_t rank = x.ndim();
  if (starts.size() != ends.size()) c.fail("starts and ends have different lengths");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    c.fail("starts, ends, axes and steps must have the same length");
  Axes ax;
  for (size_t i = 0; i < axes.size(); ++i) {
    ax.push_back(onnx_axis(c, axes[i], rank));
    if (steps[i] == 0) c.fail("step 0 on axis " + std::to_string(axes[i]));
  }
  return {tv(slice(x, ax, starts, ends, steps))};
}

std::vector<Value> op_slice_1(OpContext& c) {
  return slice_with(c, c.attr_ints("starts"), c.attr_ints("ends"), c.attr_ints("axes"), {});
}

std::vector<Value> op_slice_10(OpContext& c) {
  return slice_with(c, c.ints(1), c.ints(2), c.has(3) ? c.ints(3) : std::vector<int64_t>{},
                    c.has(4) ? c.ints(4) : std::vector<int64_t>{});
}

/// Negative indices count from the end of `dim`; checks the range on the host.
Array wrap_indices(OpContext& c, const Array& idx, int64_t dim) {
  if (!is_integral(idx.dtype())) c.fail("indices must be int32 or int64, got " + std::string(dtype_name(idx.dtype())));
  // Traced indices (a compiled model's segment): the gather kernel wraps negative indices and
  // checks the range when the segment runs, so the values need not be known on the host.
  if (smelt::detail::is_tracer(idx)) return idx;
  Array i64 = astype(idx, int64);
  auto values = i64.to_vector<int64_t>();
  for (auto v : values)
    if (v < -dim || v >= dim) c.fail("index " + std::to_string(v) + " is out of range for a dimension of size " + std::to_string(dim));
  return where(less(i64, Array(int64_t{0})), add(i64, Array(dim)), i64);
}

std::vector<Value> op_gather(OpContext& c) {
  const Array& x = c.tensor(0);
  int axis = onnx_axis(c, c.attr_int("axis", 0), x.ndim());
  Array idx = wrap_indices(c, c.tensor(1), x.shape()[axis]);
  return {tv(take(x, idx, axis))};
}

std::vector<Value> op_gather_elements(OpContext& c) {
  const Array& x = c.tensor(0);
  int axis = onnx_axis(c, c.attr_int("axis", 0), x.ndim());
  Array idx = wrap_indices(c, c.tensor(1), x.shape()[axis]);
  return {tv(take_along_axis(x, idx, axis))};
}

std::vector<Value> op_gather_nd(OpContext& c) {
  const Array& x = c.tensor(0);
  const Array& idx = c.tensor(1);
  const int64_t batch_dims = c.attr_int("batch_dims", 0);
  // ONNX: 0 <= batch_dims < min(rank(data), rank(indices)); checked before narrowing to int.
  if (batch_dims < 0 || (batch_dims > 0 && batch_dims >= std::min<int64_t>(x.ndim(), idx.ndim())))
    c.fail("batch_dims " + std::to_string(batch_dims) + " must be in [0, " +
           std::to_string(std::min<int64_t>(x.ndim(), idx.ndim())) + ") for data " + c.input(0).describe() +
           " and indices " + c.input(1).describe());
  int batch = static_cast<int>(batch_dims);
  // Negative indices wrap per addressed axis.
  if (idx.ndim() >= 1) {
    int64_t k = idx.shape().back();
    if (batch + k > x.ndim()) c.fail("indices address " + std::to_string(k) + " axes past batch_dims of a rank-" + std::to_string(x.ndim()) + " input");
    std::vector<int64_t> dims;
    for (int64_t j = 0; j < k; ++j) dims.push_back(x.shape()[batch + j]);
    Shape bshape(static_cast<size_t>(idx.ndim()), 1);
    bshape.back() = k;
    Array dim_arr = reshape(int64_array(dims), bshape);
    Array i64 = astype(idx, int64);
    Array wrapped = where(less(i64, Array(int64_t{0})), add(i64, dim_arr), i64);
    return {tv(gather_nd(x, wrapped, batch))};
  }
  return {tv(gather_nd(x, idx, batch))};
}

std::vector<Value> op_shape(OpContext& c) {
  const Shape& s = c.input(0).shape();
  int64_t rank = static_cast<int64_t>(s.size());
  int64_t start = c.attr_int("start", 0), end = c.attr_int("end", rank);
  auto clampi = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  start = clampi(start);
  end = clampi(end);
  std::vector<int64_t> out;
  for (int64_t i = start; i < end; ++i) out.push_back(s[static_cast<size_t>(i)]);
  return {tv(int64_array(out))};
}

std::vector<Value> op_size(OpContext& c) {
  return {tv(Array(element_count(c.input(0).shape(), c.node().label())))};
}

std::vector<Value> op_expand(OpContext& c) {
  const Array& x = c.tensor(0);
  std::vector<int64_t> shape = c.ints(1);
  for (auto d : shape)
    if (d < 0) c.fail("shape " + shape_str(shape) + " has a negative entry");
  Shape out;
  try {
    out = broadcast_shapes(x.shape(), shape);
  } catch (const Error&) {
    c.fail("cannot expand " + shape_str(x.shape()) + " to " + shape_str(shape));
  }
  return {tv(broadcast_to(x, out))};
}

std::vector<Value> op_flatten(OpContext& c) {
  const Array& x = c.tensor(0);
  int64_t rank = x.ndim();
  int64_t axis = c.attr_int("axis", 1);
  if (axis < -rank || axis > rank) c.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  if (axis < 0) axis += rank;
  return {tv(reshape(x, {product(x.shape(), 0, static_cast<size_t>(axis)),
                         product(x.shape(), static_cast<size_t>(axis), x.shape().size())}))};
}

std::vector<Value> split_impl(OpContext& c, std::vector<int64_t> sizes) {
  const Array& x = c.tensor(0);
  int axis = onnx_axis(c, c.attr_int("axis", 0), x.ndim());
  int64_t dim = x.shape()[axis];
  size_t n = c.num_outputs();
  if (sizes.empty()) {
    int64_t parts = c.has_attr("num_outputs") ? c.attr_int("num_outputs", 1) : static_cast<int64_t>(n);
    if (parts <= 0) c.fail("num_outputs must be positive, got " + std::to_string(parts));
    if (parts != static_cast<int64_t>(n))
      c.fail("num_outputs is " + std::to_string(parts) + " but the node has " + std::to_string(n) + " outputs");
    if (!c.has_attr("num_outputs") && dim % parts != 0)
      c.fail("cannot split an axis of size " + std::to_string(dim) + " into " + std::to_string(parts) + " equal parts");
    int64_t chunk = (dim + parts - 1) / parts;
    for (int64_t i = 0; i < parts; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  }
  int64_t total = 0;
  for (auto s : sizes) {
    if (s < 0) c.fail("split sizes " + shape_str(sizes) + " have a negative entry " + std::to_string(s));
    total = add_size(c, total, s);
  }
  if (total != dim) c.fail("split sizes " + shape_str(sizes) + " do not add up to the axis size " + std::to_string(dim));
  if (sizes.size() != n)
    c.fail("split " + shape_str(sizes) + " has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(n) +
           " outputs");
  std::vector<Value> out;
  int64_t at = 0;
  for (auto s : sizes) {
    out.push_back(tv(slice(x, Axes{axis}, {at}, {at + s}, {1})));
    at += s;
  }
  return out;
}
std::vector<Value> op_split_2(OpContext& c) { return split_impl(c, c.attr_ints("split")); }
std::vector<Value> op_split_13(OpContext& c) {
  return split_impl(c, c.has(1) ? c.ints(1) : std::vector<int64_t>{});
}

std::vector<Value> op_tile(OpContext& c) {
  const Array& x = c.tensor(0);
  auto reps = c.ints(1);
  if (static_cast<int64_t>(reps.size()) != x.ndim())
    c.fail("repeats has " + std::to_string(reps.size()) + " entries for a rank-" + std::to_string(x.ndim()) + " input");
  for (size_t i = 0; i < reps.size(); ++i) {
    size_arg(c, reps[i], "repeats " + shape_str(reps) + " entry " + std::to_string(i));
    mul_size(c, x.shape()[i], reps[i]);
  }
  return {tv(tile(x, reps))};
}

/// Wrap padding (ONNX Pad mode "wrap"): output position i reads input (i - lo) mod dim, one
/// gather whose index count is the (already checked) output size, however large lo and hi are.
Array wrap_pad(const Array& x, int axis, int64_t lo, int64_t hi) {
  int64_t dim = x.shape()[axis];
  int64_t out = dim + lo + hi;  // checked by pad_impl
  std::vector<int64_t> idx(static_cast<size_t>(out));
  for (int64_t i = 0; i < out; ++i) idx[static_cast<size_t>(i)] = (((i - lo) % dim) + dim) % dim;
  return take(x, int64_array(idx), axis);
}

std::vector<Value> pad_impl(OpContext& c, std::vector<int64_t> pads, const Array* value, std::vector<int64_t> axes,
                            const std::string& mode) {
  Array x = c.tensor(0);
  int64_t rank = x.ndim();
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  size_t k = axes.size();
  if (pads.size() != 2 * k)
    c.fail("pads has " + std::to_string(pads.size()) + " entries; " + std::to_string(2 * k) + " expected");
  std::vector<std::pair<int64_t, int64_t>> width(static_cast<size_t>(rank), {0, 0});
  for (size_t i = 0; i < k; ++i) {
    int a = onnx_axis(c, axes[i], rank);
    width[a] = {pads[i], pads[i + k]};
  }
  // The output size of each axis, checked before anything is built: dim + lo + hi must fit and
  // may not be negative (negative pads crop at most the whole axis).
  Shape out_shape = x.shape();
  for (int64_t a = 0; a < rank; ++a) {
    auto [lo, hi] = width[a];
    int64_t d = add_size(c, add_size(c, x.shape()[a], lo), hi);
    if (d < 0)
      throw InvalidArgument(c.node().label() + ": pads (" + std::to_string(lo) + ", " + std::to_string(hi) +
                            ") on axis " + std::to_string(a) + " crop more than its " + std::to_string(x.shape()[a]) +
                            " elements");
    if (mode == "wrap" && x.shape()[a] == 0 && d > 0)
      c.fail("wrap padding cannot extend the empty axis " + std::to_string(a));
    out_shape[a] = d;
  }
  array_bytes(out_shape, x.dtype(), c.node().label());
  // Negative pads crop.
  std::vector<int64_t> s(rank, 0), e(x.shape().begin(), x.shape().end());
  bool crop = false;
  for (int64_t a = 0; a < rank; ++a) {
    auto& [lo, hi] = width[a];
    if (lo < 0) { s[a] = -lo; lo = 0; crop = true; }
    if (hi < 0) { e[a] += hi; hi = 0; crop = true; }
  }
  if (crop) x = slice(x, s, e);
  if (mode == "constant") {
    Array v = value ? astype(*value, x.dtype()) : zeros({}, x.dtype());
    return {tv(pad(x, width, PadMode::Constant, reshape(v, {})))};
  }
  if (mode == "reflect") return {tv(pad(x, width, PadMode::Reflect))};
  if (mode == "edge") return {tv(pad(x, width, PadMode::Edge))};
  if (mode == "wrap") {
    for (int64_t a = 0; a < rank; ++a)
      if (width[a].first || width[a].second) {
        if (x.shape()[a] == 0) c.fail("wrap padding cannot extend axis " + std::to_string(a) + ", empty after cropping");
        x = wrap_pad(x, static_cast<int>(a), width[a].first, width[a].second);
      }
    return {tv(x)};
  }
  c.fail("mode must be constant, reflect, edge or wrap, got \"" + mode + "\"");
}

std::vector<Value> op_pad_2(OpContext& c) {
  Array v = full({}, Array(c.attr_float("value", 0.0f)), c.tensor(0).dtype());
  return pad_impl(c, c.attr_ints("pads"), &v, {}, c.attr_string("mode", "constant"));
}

std::vector<Value> op_pad_11(OpContext& c) {
  std::optional<Array> v;
  if (c.has(2)) v = c.tensor(2);
  return pad_impl(c, c.ints(1), v ? &*v : nullptr, c.has(3) ? c.ints(3) : std::vector<int64_t>{},
                  c.attr_string("mode", "constant"));
}

std::vector<Value> op_constant_of_shape(OpContext& c) {
  std::vector<int64_t> shape = c.has(0) ? c.ints(0) : std::vector<int64_t>{};
  for (auto d : shape)
    if (d < 0) c.fail("shape " + shape_str(shape) + " has a negative entry");
  if (!c.has_attr("value")) return {tv(zeros(shape, float32))};
  const Value& v = c.attr_tensor("value");
  if (!v.is_tensor() || v.array().size() != 1) c.fail("value must be a one-element tensor, got " + v.describe());
  Array fill = broadcast_to(reshape(v.array(), {}), shape);
  Array out = copy(fill);
  return {is_storage_type(v.elem_type()) ? Value::tensor(out, v.elem_type()) : tv(out)};
}

std::vector<Value> op_range(OpContext& c) {
  c.require_same_type(0, 1);
  c.require_same_type(0, 2);
  Dtype dt = c.tensor(0).dtype();
  if (is_integral(dt)) {
    int64_t start = c.scalar_int(0), limit = c.scalar_int(1), delta = c.scalar_int(2);
    if (delta == 0) c.fail("delta must not be 0");
    // ceil((limit - start) / delta) in 128 bits: the difference of two int64 can overflow int64.
    __int128 span = static_cast<__int128>(limit) - start;
    __int128 count = span / delta + ((span % delta != 0 && ((span < 0) == (delta < 0))) ? 1 : 0);
    if (count > (__int128{1} << 62))
      throw ShapeError(c.node().label() + ": Range(" + std::to_string(start) + ", " + std::to_string(limit) + ", " +
                       std::to_string(delta) + ") has more elements than an array can hold");
    int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
    array_bytes({n}, dt, c.node().label());
    // The count comes from the model's values: refused before the host buffer is filled when it
    // cannot fit the run's budget (found by the fuzzer: 2^31 values took 16 GB and the machine).
    c.check_room(mul_size(c, n, 8), "Range(" + std::to_string(start) + ", " + std::to_string(limit) + ", " +
                                        std::to_string(delta) + ") of " + std::to_string(n) + " values");
    std::vector<int64_t> v(static_cast<size_t>(n));
    // Stepping from start: every value lies between start and limit, so none overflows, where
    // i * delta can (found by the fuzzer under UBSan: Range(INT64_MIN + 1, 2, 2^62)).
    int64_t value = start;
    for (int64_t i = 0; i < n; ++i) {
      v[static_cast<size_t>(i)] = value;
      if (i + 1 < n) value += delta;
    }
    return {tv(astype(int64_array(v), dt))};
  }
  double start = c.scalar(0), limit = c.scalar(1), delta = c.scalar(2);
  if (delta == 0) c.fail("delta must not be 0");
  double count = std::ceil((limit - start) / delta);
  if (std::isnan(count) || count > 0x1p62)
    throw ShapeError(c.node().label() + ": Range(" + std::to_string(start) + ", " + std::to_string(limit) + ", " +
                     std::to_string(delta) + ") has " + (std::isnan(count) ? "an undefined" : "too large an") +
                     " element count");
  int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;  // -inf and negative counts: empty
  array_bytes({n}, dt, c.node().label());
  c.check_room(mul_size(c, n, 8), "Range(" + std::to_string(start) + ", " + std::to_string(limit) + ", " +
                                      std::to_string(delta) + ") of " + std::to_string(n) + " values");
  // ONNX's reference adds delta repeatedly in T; start + i*delta in double then rounded is as close.
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<double>(i) * delta;
  return {tv(astype(Array(v, Shape{n}), dt))};
}

std::vector<Value> op_constant(OpContext& c) {
  const Node& n = c.node();
  if (n.attributes.size() != 1) c.fail("needs exactly one value attribute");
  const Attribute& a = n.attributes[0];
  if (a.name == "value" || a.name == "sparse_value") return {a.t};
  if (a.name == "value_float") return {tv(Array(a.f))};
  if (a.name == "value_floats") return {tv(Array(a.floats, Shape{static_cast<int64_t>(a.floats.size())}))};
  if (a.name == "value_int") return {tv(Array(static_cast<int64_t>(a.i)))};
  if (a.name == "value_ints") return {tv(int64_array(a.ints))};
  if (a.name == "value_string") return {Value::strings(StringTensor{{}, {a.s}})};
  if (a.name == "value_strings")
    return {Value::strings(StringTensor{{static_cast<int64_t>(a.strings.size())}, a.strings})};
  c.fail("unknown attribute '" + a.name + "'");
}

std::vector<Value> op_trilu(OpContext& c) {
  const Array& x = c.tensor(0);
  if (x.ndim() < 2) c.fail("input must have rank >= 2, got " + c.input(0).describe());
  int64_t k = c.has(1) ? c.scalar_int(1) : 0;
  bool upper = c.attr_int("upper", 1) != 0;
  return {tv(upper ? triu(x, k) : tril(x, k))};
}

ScatterReduce reduction_of(OpContext& c) {
  std::string r = c.attr_string("reduction", "none");
  if (r == "none") return ScatterReduce::Assign;
  if (r == "add") return ScatterReduce::Add;
  if (r == "mul") return ScatterReduce::Mul;
  if (r == "max") return ScatterReduce::Max;
  if (r == "min") return ScatterReduce::Min;
  c.fail("reduction must be none, add, mul, max or min, got \"" + r + "\"");
}

std::vector<Value> op_scatter_elements(OpContext& c) {
  const Array& x = c.tensor(0);
  int axis = onnx_axis(c, c.attr_int("axis", 0), x.ndim());
  Array idx = wrap_indices(c, c.tensor(1), x.shape()[axis]);
  c.require_same_type(0, 2);
  return {tv(scatter(x, idx, c.tensor(2), axis, reduction_of(c)))};
}

std::vector<Value> op_scatter_nd(OpContext& c) {
  c.require_same_type(0, 2);
  return {tv(scatter_nd(c.tensor(0), astype(c.tensor(1), int64), c.tensor(2), reduction_of(c)))};
}

std::vector<Value> op_depth_to_space(OpContext& c) {
  const Array& x = c.tensor(0);
  if (x.ndim() != 4) c.fail("input must be 4-d, got " + c.input(0).describe());
  int64_t b = size_arg(c, c.attr_int("blocksize", 0), "blocksize", true);
  int64_t n = x.shape()[0], ch = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  const int64_t bb = mul_size(c, b, b);
  if (ch % bb)
    c.fail("channels " + std::to_string(ch) + " are not divisible by blocksize^2 (blocksize " + std::to_string(b) + ")");

  bool crd = c.attr_string("mode", "DCR") == "CRD";
  Array t = crd ? transpose(reshape(x, {n, ch / bb, b, b, h, w}), {0, 1, 4, 2, 5, 3})
                : transpose(reshape(x, {n, b, b, ch / bb, h, w}), {0, 3, 4, 1, 5, 2});
  return {tv(reshape(t, {n, ch / bb, mul_size(c, h, b), mul_size(c, w, b)}))};
}

std::vector<Value> op_space_to_depth(OpContext& c) {
  const Array& x = c.tensor(0);
  if (x.ndim() != 4) c.fail("input must be 4-d, got " + c.input(0).describe());
  int64_t b = size_arg(c, c.attr_int("blocksize", 0), "blocksize", true);
  int64_t n = x.shape()[0], ch = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  if (h % b || w % b)
    c.fail("spatial size " + std::to_string(h) + "x" + std::to_string(w) + " is not divisible by blocksize " +
           std::to_string(b));
  const int64_t out_ch = mul_size(c, ch, mul_size(c, b, b));
  Array t = transpose(reshape(x, {n, ch, h / b, b, w / b, b}), {0, 3, 5, 1, 2, 4});
  return {tv(reshape(t, {n, out_ch, h / b, w / b}))};
}

std::vector<Value> op_nonzero(OpContext& c) { return {tv(nonzero(c.tensor(0)))}; }

std::vector<Value> op_compress(OpContext& c) {
  const Array& x = c.tensor(0);
  c.require_types(1, {ElemType::Bool});
  auto cond = c.host_tensor(1).to_vector<bool>();
  std::vector<int64_t> keep;
  if (!c.has_attr("axis")) {
    for (size_t i = 0; i < cond.size() && static_cast<int64_t>(i) < x.size(); ++i)
      if (cond[i]) keep.push_back(static_cast<int64_t>(i));
    return {tv(take(reshape(x, {-1}), int64_array(keep), 0))};
  }
  int axis = onnx_axis(c, c.attr_int("axis", 0), x.ndim());
  for (size_t i = 0; i < cond.size() && static_cast<int64_t>(i) < x.shape()[axis]; ++i)
    if (cond[i]) keep.push_back(static_cast<int64_t>(i));
  return {tv(take(x, int64_array(keep), axis))};
}

std::vector<Value> op_eye_like(OpContext& c) {
  const Array& x = c.tensor(0);
  if (x.ndim() != 2) c.fail("input must be 2-d, got " + c.input(0).describe());
  Dtype dt = x.dtype();
  if (c.has_attr("dtype")) dt = *storage_dtype(elem_type_attr(c, "dtype", 1));
  return {tv(eye(x.shape()[0], x.shape()[1], c.attr_int("k", 0), dt))};
}

std::vector<Value> op_one_hot(OpContext& c) {
  const Array& indices = c.tensor(0);
  double depth_value = c.scalar(1);
  if (!(depth_value >= 1 && depth_value <= 0x1p62))
    throw InvalidArgument(c.node().label() + ": depth must be a positive count, got " + std::to_string(depth_value));
  int64_t depth = static_cast<int64_t>(depth_value);
  const Array& values = c.tensor(2);
  if (values.size() != 2) c.fail("values must hold [off, on], got " + c.input(2).describe());
  int64_t out_rank = indices.ndim() + 1;
  int axis = onnx_axis(c, c.attr_int("axis", -1), out_rank);
  // Negative indices count from depth; indices outside [-depth, depth) give an all-off row.
  Array idx = astype(indices, int64);
  idx = where(logical_and(less(idx, Array(int64_t{0})), greater_equal(idx, Array(-depth))), add(idx, Array(depth)), idx);
  idx = where(logical_or(less(idx, Array(int64_t{0})), greater_equal(idx, Array(depth))), Array(depth), idx);
  Array mask = one_hot(idx, depth, bool_);
  Array off = reshape(slice(values, {0}, {1}), {}), on = reshape(slice(values, {1}, {2}), {});
  Array out = where(mask, on, off);
  if (axis != out_rank - 1) out = moveaxis(out, static_cast<int>(out_rank - 1), axis);
  return {tv(out)};
}

std::vector<Value> op_cumsum(OpContext& c) {
  const Array& x = c.tensor(0);
  int axis = onnx_axis(c, c.scalar_int(1), x.ndim());
  bool exclusive = c.attr_int("exclusive", 0) != 0, reverse = c.attr_int("reverse", 0) != 0;
  return {tv(keep_dtype(cumsum(x, axis, reverse, exclusive), x.dtype()))};
}

std::vector<Value> op_cumprod(OpContext& c) {
  const Array& x = c.tensor(0);
  int axis = onnx_axis(c, c.scalar_int(1), x.ndim());
  bool exclusive = c.attr_int("exclusive", 0) != 0, reverse = c.attr_int("reverse", 0) != 0;
  return {tv(keep_dtype(cumprod(x, axis, reverse, exclusive), x.dtype()))};
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
  r.add("", "Reshape", 5, op_reshape);
  r.add("", "Transpose", 1, op_transpose);
  r.add("", "Squeeze", 1, op_squeeze_1);
  r.add("", "Squeeze", 13, op_squeeze_13);
  r.add("", "Unsqueeze", 1, op_unsqueeze_1);
  r.add("", "Unsqueeze", 13, op_unsqueeze_13);
  r.add("", "Concat", 4, op_concat);
  r.add("", "Slice", 1, op_slice_1);
  r.add("", "Slice", 10, op_slice_10);
  r.add("", "Gather", 1, op_gather);
  r.add("", "GatherElements", 11, op_gather_elements);
  r.add("", "GatherND", 11, op_gather_nd);
  r.add("", "Shape", 1, op_shape);
  r.add("", "Size", 1, op_size);
  r.add("", "Expand", 8, op_expand);
  r.add("", "Flatten", 1, op_flatten);
  r.add("", "Split", 2, op_split_2);
  r.add("", "Split", 13, op_split_13);
  r.add("", "Tile", 6, op_tile);
  r.add("", "Pad", 2, op_pad_2);
  r.add("", "Pad", 11, op_pad_11);
  r.add("", "ConstantOfShape", 9, op_constant_of_shape);
  r.add("", "Range", 11, op_range);
  r.add("", "Constant", 1, op_constant);
  r.add("", "Trilu", 14, op_trilu);
  r.add("", "Scatter", 9, op_scatter_elements);
  r.add("", "ScatterElements", 11, op_scatter_elements);
  r.add("", "ScatterND", 11, op_scatter_nd);
  r.add("", "DepthToSpace", 1, op_depth_to_space);
  r.add("", "SpaceToDepth", 1, op_space_to_depth);
  r.add("", "NonZero", 9, op_nonzero);
  r.add("", "Compress", 9, op_compress);
  r.add("", "EyeLike", 9, op_eye_like);
  r.add("", "OneHot", 9, op_one_hot);
  r.add("", "CumSum", 11, op_cumsum);
  r.add("", "CumProd", 26, op_cumprod);
}

}  // namespace smelt::onnx
