// ONNX sequence and optional operators: SequenceConstruct/At/Insert/Erase/Length, Optional*, ...
#include <algorithm>

#include "src/onnx/ops/op_helpers.h"

namespace smelt::onnx {

namespace {

TypeInfo tensor_type(ElemType t) {
  TypeInfo info;
  info.kind = TypeInfo::Kind::Tensor;
  info.elem_type = t;
  return info;
}

const Value& sequence_input(OpContext& c, size_t i) {
  const Value& v = c.input(i);
  if (!v.is_sequence()) c.fail("input " + std::to_string(i) + " must be a sequence, got " + v.describe());
  return v;
}

/// A position in [-n, n) (or [-n, n] when inserting) made non-negative.
size_t position(OpContext& c, int64_t pos, size_t n, bool insert) {
  int64_t size = static_cast<int64_t>(n);
  int64_t hi = insert ? size : size - 1;
  if (pos < -size || pos > hi)
    c.fail("position " + std::to_string(pos) + " is out of range for a sequence of " + std::to_string(n));
  return static_cast<size_t>(pos < 0 ? pos + size : pos);
}

std::vector<Value> op_sequence_empty(OpContext& c) {
  return {Value::sequence({}, tensor_type(elem_type_attr(c, "dtype", 1, /*allow_string=*/true)))};
}

std::vector<Value> op_sequence_construct(OpContext& c) {
  std::vector<Value> items;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    c.require_same_type(0, i);
    items.push_back(c.input(i));
  }
  return {Value::sequence(items, tensor_type(c.elem_type(0)))};
}

std::vector<Value> op_sequence_at(OpContext& c) {
  const auto& items = sequence_input(c, 0).items();
  return {items[position(c, c.scalar_int(1), items.size(), false)]};
}

std::vector<Value> op_sequence_insert(OpContext& c) {
  const Value& seq = sequence_input(c, 0);
  std::vector<Value> items = seq.items();
  size_t at = c.has(2) ? position(c, c.scalar_int(2), items.size(), true) : items.size();
  items.insert(items.begin() + static_cast<long>(at), c.input(1));
  TypeInfo elem = seq.element_type();
  if (elem.kind == TypeInfo::Kind::Unknown || elem.elem_type == ElemType::Undefined) elem = tensor_type(c.elem_type(1));
  return {Value::sequence(items, elem)};
}

std::vector<Value> op_sequence_erase(OpContext& c) {
  const Value& seq = sequence_input(c, 0);
  std::vector<Value> items = seq.items();
  if (items.empty()) c.fail("cannot erase from an empty sequence");
  size_t at = c.has(1) ? position(c, c.scalar_int(1), items.size(), false) : items.size() - 1;
  items.erase(items.begin() + static_cast<long>(at));
  return {Value::sequence(items, seq.element_type())};
}

std::vector<Value> op_sequence_length(OpContext& c) {
  return {tv(Array(static_cast<int64_t>(sequence_input(c, 0).items().size())))};
}

std::vector<Value> op_concat_from_sequence(OpContext& c) {
  const auto& items = sequence_input(c, 0).items();
  if (items.empty()) c.fail("cannot concatenate an empty sequence");
  std::vector<Array> parts;
  for (const auto& v : items) {
    if (!v.is_tensor()) c.fail("sequence elements must be numeric tensors, got " + v.describe());
    parts.push_back(v.array());
  }
  bool new_axis = c.attr_int("new_axis", 0) != 0;
  int64_t rank = parts[0].ndim() + (new_axis ? 1 : 0);
  int axis = onnx_axis(c, c.attr_int("axis", 0), rank);
  return {tv(new_axis ? stack(parts, axis) : concatenate(parts, axis))};
}

std::vector<Value> op_split_to_sequence(OpContext& c) {
  const Array& x = c.tensor(0);
  int axis = onnx_axis(c, c.attr_int("axis", 0), x.ndim());
  int64_t dim = x.shape()[axis];
  std::vector<int64_t> sizes;
  bool keepdims = c.attr_int("keepdims", 1) != 0;
  bool squeeze_out = false;
  if (c.has(1)) {
    auto split = c.ints(1);
    if (c.tensor(1).ndim() == 0) {
      int64_t chunk = split[0];
      if (chunk <= 0) c.fail("split must be positive");
      for (int64_t at = 0; at < dim; at += chunk) sizes.push_back(std::min(chunk, dim - at));
    } else {
      sizes = split;
    }
  } else {
    sizes.assign(static_cast<size_t>(dim), 1);
    squeeze_out = !keepdims;
  }
  // As in Split: sizes are non-negative and their sum is checked (INT64_MIN entries overflowed
  // it; found by the fuzzer under UBSan).
  int64_t total = 0;
  for (auto s : sizes) {
    if (s < 0) c.fail("split sizes " + shape_str(sizes) + " have a negative entry " + std::to_string(s));
    total = add_size(c, total, s);
  }
  if (total != dim) c.fail("split sizes " + shape_str(sizes) + " do not add up to " + std::to_string(dim));
  std::vector<Value> items;
  int64_t at = 0;
  for (auto s : sizes) {
    Array part = slice(x, Axes{axis}, {at}, {at + s}, {1});
    items.push_back(tv(squeeze_out ? squeeze(part, Axes{axis}) : part));
    at += s;
  }
  return {Value::sequence(items, tensor_type(c.elem_type(0)))};
}

std::vector<Value> op_optional(OpContext& c) {
  if (c.has(0)) return {Value::optional(c.input(0), c.input(0).type())};
  TypeInfo elem;
  if (const Attribute* a = c.node().attribute("type")) elem = a->tp;
  return {Value::optional(std::nullopt, elem)};
}

std::vector<Value> op_optional_has_element(OpContext& c) {
  if (!c.has(0)) return {tv(Array(false))};
  const Value& v = c.input(0);
  bool has = v.is_optional() ? v.content().has_value() : true;
  return {tv(Array(has))};
}

std::vector<Value> op_optional_get_element(OpContext& c) {
  const Value& v = c.input(0);
  if (!v.is_optional()) return {v};
  if (!v.content()) c.fail("the optional input is empty");
  return {*v.content()};
}

}  // namespace

void register_sequence_ops(OpRegistry& r) {
  r.add("", "SequenceEmpty", 11, op_sequence_empty);
  r.add("", "SequenceConstruct", 11, op_sequence_construct);
  r.add("", "SequenceAt", 11, op_sequence_at);
  r.add("", "SequenceInsert", 11, op_sequence_insert);
  r.add("", "SequenceErase", 11, op_sequence_erase);
  r.add("", "SequenceLength", 11, op_sequence_length);
  r.add("", "ConcatFromSequence", 11, op_concat_from_sequence);
  r.add("", "SplitToSequence", 11, op_split_to_sequence);
  r.add("", "Optional", 15, op_optional);
  r.add("", "OptionalHasElement", 15, op_optional_has_element);
  r.add("", "OptionalGetElement", 15, op_optional_get_element);
}

}  // namespace smelt::onnx
