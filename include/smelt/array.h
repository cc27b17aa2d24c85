// smelt::Array: a cheap handle to a node of the lazy graph (shape, dtype, device, data once evaluated).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "smelt/device.h"
#include "smelt/dtype.h"

namespace smelt {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;  // in elements, may be zero (broadcast) or negative (flip)

namespace detail {
struct Node;
}

/// A lazily evaluated n-dimensional array. Copying an Array copies the handle, not the data.
/// Operations build graph nodes; `eval`, `item`, `to_vector` or a data read run the graph.
class Array {
 public:
  /// An empty handle; using it in an op raises InvalidArgument.
  Array() = default;

  /// 0-d arrays from C++ scalars: bool, int32, int64, uint32, uint64, float32, float64, halves.
  Array(bool v);
  Array(int v);
  Array(long v);
  Array(long long v);
  Array(unsigned v);
  Array(unsigned long v);
  Array(unsigned long long v);
  Array(float v);
  Array(double v);
  Array(float16_t v);
  Array(bfloat16_t v);

  /// A 1-d array from a list, or an array of `shape` filled from `data` in row-major order.
  template <class T>
  Array(std::initializer_list<T> data)
      : Array(data.begin(), Shape{static_cast<int64_t>(data.size())}, dtype_of<T>()) {}
  template <class T>
  Array(std::initializer_list<T> data, Shape shape)
      : Array(data.begin(), std::move(shape), dtype_of<T>(), static_cast<int64_t>(data.size())) {}
  template <class T>
  Array(const std::vector<T>& data, Shape shape)
      : Array(data.data(), std::move(shape), dtype_of<T>(), static_cast<int64_t>(data.size())) {}
  /// Copies `shape`-many elements of `dtype` from `data` (row-major). `count`, when given,
  /// is checked against the shape.
  Array(const void* data, Shape shape, Dtype dtype, int64_t count = -1);

  /// Internal: wraps a graph node.
  explicit Array(std::shared_ptr<detail::Node> node) : node_(std::move(node)) {}

  bool valid() const { return node_ != nullptr; }
  const Shape& shape() const;
  /// The size of one axis; negative axes count from the end.
  int64_t shape(int axis) const;
  int ndim() const;
  int64_t size() const;
  size_t itemsize() const;
  size_t nbytes() const;
  Dtype dtype() const;
  Device device() const;

  /// Runs the graph that produces this array (no-op once evaluated).
  void eval() const;
  bool is_evaluated() const;

  /// Element strides of the evaluated data (evaluates first).
  const Strides& strides() const;
  /// True when the evaluated data is row-major contiguous (evaluates first).
  bool is_contiguous() const;
  /// Pointer to the first element of the evaluated data (evaluates first; CPU arrays only).
  const void* data() const;
  template <class T>
  const T* data() const {
    check_element_type(dtype_of<T>(), "Array::data");
    return static_cast<const T*>(data());
  }

  /// The single element converted to T with astype's rules (evaluates; size must be 1).
  template <class T>
  T item() const {
    T out;
    copy_converted(&out, dtype_of<T>(), 1, "item");
    return out;
  }
  /// All elements in row-major order converted to T with astype's rules (evaluates).
  template <class T>
  std::vector<T> to_vector() const {
    std::vector<T> out(static_cast<size_t>(size()));
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<uint8_t> tmp(out.size());
      copy_converted(tmp.data(), Dtype::Bool, size(), "to_vector");
      for (size_t i = 0; i < tmp.size(); ++i) out[i] = tmp[i] != 0;
    } else {
      copy_converted(out.data(), dtype_of<T>(), size(), "to_vector");
    }
    return out;
  }

  /// NumPy's repr, one row per line: `array([[1, 2],\n       [3, 4]], dtype=int32)`. Evaluates.
  /// smelt/print.h has to_string(a, PrintOptions) for precision, summarization and line width.
  std::string to_string() const;

  /// A process-unique id of the node (stable while the handle lives).
  uint64_t id() const;
  detail::Node& node() const;
  const std::shared_ptr<detail::Node>& node_ptr() const { return node_; }

 private:
  void copy_converted(void* out, Dtype out_dtype, int64_t count, const char* what) const;
  void check_element_type(Dtype requested, const char* what) const;
  std::shared_ptr<detail::Node> node_;
};

/// Writes a.to_string().
std::ostream& operator<<(std::ostream& os, Array a);
std::string shape_to_string(const Shape& shape);

/// Evaluates several arrays in one pass over their joint graph.
void eval(std::vector<Array> arrays);

}  // namespace smelt
