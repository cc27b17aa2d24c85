// The node behind an Array: its metadata, the primitive that produces it, and its data.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "smelt/array.h"
#include "src/core/buffer.h"
#include "src/primitives/primitive.h"

namespace smelt::detail {

struct Node;

/// The outputs of one multi-output primitive. Members hold it strongly and it holds them
/// weakly, so dropping an unread output costs nothing; eval makes a stand-in for a dropped one.
struct OutputGroup {
  std::vector<std::weak_ptr<Node>> nodes;
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
};

struct Node {
  // Metadata, fixed at construction.
  Shape shape;
  Dtype dtype = Dtype::Float32;
  Device device;
  uint64_t id = 0;

  // How it is produced (cleared once evaluated, which frees the graph above it).
  Primitive prim;
  std::vector<Array> inputs;
  std::shared_ptr<OutputGroup> group;  // null for single-output primitives
  int output_index = 0;

  // Data, set by eval.
  BufferPtr buffer;
  Strides strides;
  int64_t offset = 0;  // in elements from buffer->ptr
  bool evaluated = false;

  // Set on placeholders made by tracing (compile); eval of a tracer raises UnknownValueError.
  bool tracer = false;

  /// Releases the inputs with a worklist: a long unevaluated chain would otherwise be freed
  /// by one recursive destructor call per node and overflow the stack.
  ~Node();

  size_t itemsize() const { return size_of(dtype); }
  int64_t size() const;
  void* data_ptr() const {
    return static_cast<char*>(buffer->ptr) + offset * static_cast<int64_t>(itemsize());
  }
};

uint64_t next_node_id();

/// An empty vector of arrays, from this thread's spares when it has one. A compiled replay
/// builds a node per step and eval runs it: the step's input list and eval's output list were
/// two heap allocations and two frees per step (hundreds per call of a small model). eval gives
/// the vectors it is done with back with recycle_arrays, and the replay takes its input lists
/// here; both on the calling thread, so no lock.
std::vector<Array> spare_arrays();
/// Clears `v` (its arrays are released here) and keeps its memory for spare_arrays when it is
/// small and this thread keeps few.
void recycle_arrays(std::vector<Array>&& v);

/// A node computed by `prim` from `inputs`.
std::shared_ptr<Node> make_node(Shape shape, Dtype dtype, Device device, Primitive prim,
                                std::vector<Array> inputs);
/// Several sibling outputs of one multi-output primitive.
std::vector<Array> make_multi_output(std::vector<Shape> shapes, std::vector<Dtype> dtypes,
                                     Device device, Primitive prim, std::vector<Array> inputs);
/// Runs `prim` on `device` over evaluated `inputs` into `outputs`, unevaluated nodes of `device`
/// without inputs that nothing else holds yet (make_node with an empty primitive), and marks them
/// evaluated: what eval does for one node, without a graph, for replaying a compiled tape step by
/// step (compiler::run_tape). A kernel may donate an input's buffer that only `inputs` holds.
void run_primitive(const Primitive& prim, Device device, const std::vector<Array>& inputs, std::vector<Array>& outputs);
/// An evaluated leaf over `buffer`.
Array make_leaf(Shape shape, Dtype dtype, Device device, BufferPtr buffer, Strides strides,
                int64_t offset = 0);

}  // namespace smelt::detail

namespace smelt {

/// Building an array node (used by ops).
inline Array make_array(Shape shape, Dtype dtype, Device device, Primitive prim,
                        std::vector<Array> inputs) {
  return Array(detail::make_node(std::move(shape), dtype, device, std::move(prim), std::move(inputs)));
}

/// Row-major strides of a shape.
Strides row_major_strides(const Shape& shape);
int64_t shape_size(const Shape& shape);
/// True when `strides` walk `shape` in row-major order without gaps (size-1 axes ignored).
bool is_row_contiguous(const Shape& shape, const Strides& strides);
/// Strides that view `old_shape`/`old_strides` as `new_shape` without moving data, when such
/// strides exist (NumPy's attempt_nocopy_reshape); false when the reshape needs a copy. Every
/// backend's Reshape uses it, so views are the same on every device.
bool reshape_view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& new_shape, Strides& out);

/// The strides of the region [start::step] of an array with strides `strides` (a SliceUpdate's
/// target), and in `offset` the element offset of its first element.
inline Strides slice_region(const Strides& strides, const std::vector<int64_t>& start, const std::vector<int64_t>& step,
                            int64_t& offset) {
  Strides region(strides.size());
  offset = 0;
  for (size_t i = 0; i < strides.size(); ++i) {
    region[i] = strides[i] * step[i];
    offset += start[i] * strides[i];
  }
  return region;
}

}  // namespace smelt
