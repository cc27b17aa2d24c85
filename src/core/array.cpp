// Array handles and nodes: construction from host data, metadata and element reads (printing: print.cpp).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <ostream>
#include <sstream>

#include "smelt/array.h"
#include "smelt/errors.h"
#include "smelt/ops.h"
#include "src/core/allocator.h"
#include "src/core/dispatch.h"
#include "src/core/node.h"
#include "src/core/shape_math.h"
#include "src/core/node_state.h"

namespace smelt {

namespace detail {

uint64_t next_node_id() {
  static std::atomic<uint64_t> counter{1};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

int64_t Node::size() const { return shape_size(shape); }


Node::~Node() {
  if (inputs.empty()) return;
  std::vector<std::shared_ptr<Node>> pending;
  for (auto& in : inputs) pending.push_back(in.node_ptr());
  inputs.clear();
  while (!pending.empty()) {
    std::shared_ptr<Node> n = std::move(pending.back());
    pending.pop_back();
    // Only the last owner takes the inputs over, so that n's own destructor finds none. A
    // sibling can still be revived through its group's weak pointer by a thread evaluating the
    // group, which clears the inputs under the group's lock: take the same lock.
    if (n && n.use_count() == 1) {
      std::vector<Array> taken;
      {
        std::unique_lock<std::mutex> lock;
        if (n->group) lock = std::unique_lock(node_mutex(*n));
        taken.swap(n->inputs);
      }
      for (auto& in : taken) pending.push_back(in.node_ptr());
    }
  }
}

namespace {
// Bounds: a few tens of lists (a replay holds none for long: eval gives each back once it has
// run its node), none over 64 arrays long (a Concatenate's list is not worth keeping).
constexpr size_t kSpareLists = 64, kSpareCapacity = 64;
/// Set when this thread's spares are destroyed (thread exit): an eval in a later thread_local's
/// destructor then allocates as before. Trivially destructible, so it stays readable.
thread_local bool t_spares_gone = false;
struct SpareLists {
  std::vector<std::vector<Array>> lists;
  ~SpareLists() { t_spares_gone = true; }
};
thread_local SpareLists t_spares;
}  // namespace

std::vector<Array> spare_arrays() {
  if (t_spares_gone) return {};
  auto& spares = t_spares.lists;
  if (spares.empty()) return {};
  std::vector<Array> v = std::move(spares.back());
  spares.pop_back();
  return v;
}

void recycle_arrays(std::vector<Array>&& v) {
  v.clear();  // releases the arrays (and maybe their nodes) before the pool is touched
  if (t_spares_gone || v.capacity() == 0 || v.capacity() > kSpareCapacity) return;
  auto& spares = t_spares.lists;
  if (spares.size() < kSpareLists) spares.push_back(std::move(v));
}

std::shared_ptr<Node> make_node(Shape shape, Dtype dtype, Device device, Primitive prim,
                                std::vector<Array> inputs) {
  // Every op's output shape passes here: a negative dimension, an element count that overflows or
  // an array larger than memory can address is refused before any size is multiplied out.
  array_bytes(shape, dtype, prim_name(prim.kind));
  auto n = std::make_shared<Node>();
  n->shape = std::move(shape);
  n->dtype = dtype;
  n->device = device;
  n->id = next_node_id();
  n->prim = std::move(prim);
  n->inputs = std::move(inputs);
  for (auto& in : n->inputs) {
    SMELT_ASSERT(in.valid(), "make_node: an input of " + n->prim.str() + " is an empty handle");
    if (in.node().tracer) n->tracer = true;
  }
  return n;
}

std::vector<Array> make_multi_output(std::vector<Shape> shapes, std::vector<Dtype> dtypes,
                                     Device device, Primitive prim, std::vector<Array> inputs) {
  auto group = std::make_shared<OutputGroup>();
  group->shapes = shapes;
  group->dtypes = dtypes;
  std::vector<Array> outs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    auto n = make_node(shapes[i], dtypes[i], device, prim, inputs);
    n->group = group;
    n->output_index = static_cast<int>(i);
    group->nodes.push_back(n);
    outs.emplace_back(std::move(n));
  }
  return outs;
}

Array make_leaf(Shape shape, Dtype dtype, Device device, BufferPtr buffer, Strides strides,
                int64_t offset) {
  array_bytes(shape, dtype, "array");
  auto n = std::make_shared<Node>();
  n->shape = std::move(shape);
  n->dtype = dtype;
  n->device = device;
  n->id = next_node_id();
  n->buffer = std::move(buffer);
  n->strides = std::move(strides);
  n->offset = offset;
  n->evaluated = true;
  return Array(std::move(n));
}

}  // namespace detail

Strides row_major_strides(const Shape& shape) {
  Strides s(shape.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    if (__builtin_mul_overflow(acc, shape[i], &acc)) {
      // Overflow is undefined behaviour in plain arithmetic. An empty array ([0, 2^40, 2^40])
      // is fine: its strides never address memory. Anything else cannot exist.
      if (std::find(shape.begin(), shape.end(), 0) == shape.end())
        throw ShapeError("shape " + shape_to_string(shape) + " has more elements than an int64 can count");
      acc = 0;
    }
  }
  return s;
}

int64_t shape_size(const Shape& shape) {
  // Checked: callers pass target shapes (reshape, broadcast) that no node has validated yet.
  for (auto d : shape)
    if (d == 0) return 0;
  int64_t n = 1;
  for (auto d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      throw ShapeError("shape " + shape_to_string(shape) + " has more elements than an int64 can count");
  return n;
}

bool is_row_contiguous(const Shape& shape, const Strides& strides) {
  // An empty array has nothing to walk, whatever its strides say.
  for (auto d : shape)
    if (d == 0) return true;
  int64_t expected = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

// Strides that view `old_shape`/`old_strides` as `new_shape` without moving data, when such
// strides exist (NumPy's attempt_nocopy_reshape): groups of old and new axes with equal
// products map onto each other when each old group is itself one strided run.
bool reshape_view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& new_shape,
                          Strides& out) {
  Shape od;
  Strides ost;
  for (size_t i = 0; i < old_shape.size(); ++i) {
    if (old_shape[i] == 0) return false;  // empty arrays go through the contiguous path
    if (old_shape[i] != 1) {
      od.push_back(old_shape[i]);
      ost.push_back(old_strides[i]);
    }
  }
  const size_t on = od.size(), nn = new_shape.size();
  out.assign(nn, 1);
  size_t oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < nn && oi < on) {
    int64_t np = new_shape[ni], op = od[oi];
    while (np != op) {
      // Callers check with checked arithmetic that both shapes hold as many elements; were
      // they to differ, the walk would run past the end of a shape.
      SMELT_ASSERT(np < op ? nj < nn : oj < on,
                   "reshape_view_strides: " + shape_to_string(old_shape) + " and " + shape_to_string(new_shape) +
                       " hold different element counts");
      if (np < op) np *= new_shape[nj++];
      else op *= od[oj++];
    }
    for (size_t ok = oi; ok + 1 < oj; ++ok)
      if (ost[ok] != od[ok + 1] * ost[ok + 1]) return false;
    out[nj - 1] = ost[oj - 1];
    for (size_t nk = nj - 1; nk > ni; --nk) out[nk - 1] = out[nk] * new_shape[nk];
    ni = nj++;
    oi = oj++;
  }
  return true;  // trailing new axes have size 1; any stride serves
}

std::string shape_to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {

template <class T>
Array scalar_array(T v) {
  return Array(&v, Shape{}, dtype_of<T>(), 1);
}

}  // namespace

Array::Array(bool v) : Array(scalar_array<bool>(v)) {}
Array::Array(int v) : Array(scalar_array<int32_t>(v)) {}
Array::Array(long v) : Array(scalar_array<int64_t>(v)) {}
Array::Array(long long v) : Array(scalar_array<int64_t>(v)) {}
Array::Array(unsigned v) : Array(scalar_array<uint32_t>(v)) {}
Array::Array(unsigned long v) : Array(scalar_array<uint64_t>(v)) {}
Array::Array(unsigned long long v) : Array(scalar_array<uint64_t>(v)) {}
Array::Array(float v) : Array(scalar_array<float>(v)) {}
Array::Array(double v) : Array(scalar_array<double>(v)) {}
Array::Array(float16_t v) : Array(scalar_array<float16_t>(v)) {}
Array::Array(bfloat16_t v) : Array(scalar_array<bfloat16_t>(v)) {}

Array::Array(const void* data, Shape shape, Dtype dtype, int64_t count) {
  for (auto d : shape)
    if (d < 0)
      throw InvalidArgument("array: negative dimension in shape " + shape_to_string(shape));
  // The element count and byte size must fit before anything is multiplied out.
  int64_t n = 1;
  for (auto d : shape) {
    if (d == 0) {
      n = 0;
      break;
    }
    if (n > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(size_of(dtype)) / d)
      throw InvalidArgument("array: shape " + shape_to_string(shape) + " of " + dtype_name(dtype) +
                            " has more bytes than memory can address");
    n *= d;
  }
  if (count >= 0 && count != n)
    throw ShapeError("array: " + std::to_string(count) + " elements given for shape " +
                     shape_to_string(shape) + " (" + std::to_string(n) + " elements)");
  if (!data && n > 0)
    throw InvalidArgument("array: null data pointer for shape " + shape_to_string(shape));
  size_t bytes = static_cast<size_t>(n) * size_of(dtype);
  Device dev = Device::cpu();  // host data lands on the CPU (device.h, rule 2); ops or to_device move it
  auto buffer = cpu_allocator().allocate(bytes);
  if (bytes) std::memcpy(buffer->ptr, data, bytes);
  if (dtype == Dtype::Bool) {  // normalize bool bytes to 0/1
    auto* p = static_cast<uint8_t*>(buffer->ptr);
    for (int64_t i = 0; i < n; ++i) p[i] = p[i] != 0;
  }
  Strides strides = row_major_strides(shape);
  node_ = detail::make_leaf(std::move(shape), dtype, dev, std::move(buffer), std::move(strides)).node_ptr();
}

namespace {
void check_valid(const std::shared_ptr<detail::Node>& n, const char* what) {
  if (!n) throw InvalidArgument(std::string(what) + ": the array is an empty handle (default-constructed)");
}
}  // namespace

const Shape& Array::shape() const {
  check_valid(node_, "shape");
  return node_->shape;
}
int64_t Array::shape(int axis) const {
  check_valid(node_, "shape");
  int nd = ndim();
  int a = axis < 0 ? axis + nd : axis;
  if (a < 0 || a >= nd)
    throw InvalidArgument("shape: axis " + std::to_string(axis) + " is out of range for an array of rank " +
                          std::to_string(nd));
  return node_->shape[a];
}
int Array::ndim() const { return static_cast<int>(shape().size()); }
int64_t Array::size() const { return shape_size(shape()); }
size_t Array::itemsize() const { return size_of(dtype()); }
size_t Array::nbytes() const { return static_cast<size_t>(size()) * itemsize(); }
Dtype Array::dtype() const {
  check_valid(node_, "dtype");
  return node_->dtype;
}
Device Array::device() const {
  check_valid(node_, "device");
  return node_->device;
}
bool Array::is_evaluated() const { return node_ && detail::is_evaluated(*node_); }
uint64_t Array::id() const {
  check_valid(node_, "id");
  return node_->id;
}
detail::Node& Array::node() const {
  check_valid(node_, "node");
  return *node_;
}

void Array::eval() const {
  check_valid(node_, "eval");
  if (detail::is_evaluated(*node_)) return;
  smelt::eval({*this});
}

const Strides& Array::strides() const {
  eval();
  return node_->strides;
}

bool Array::is_contiguous() const {
  eval();
  return is_row_contiguous(node_->shape, node_->strides);
}

const void* Array::data() const {
  eval();
  if (node_->device.type != Device::Type::Cpu)
    throw UnsupportedError("data: the array lives on " + node_->device.str() +
                           "; copy it to the CPU first");
  return node_->buffer ? node_->data_ptr() : nullptr;
}

void Array::check_element_type(Dtype requested, const char* what) const {
  if (dtype() != requested)
    throw DtypeError(std::string(what) + ": requested " + dtype_name(requested) + " data of a " +
                     dtype_name(dtype()) + " array");
}

void Array::copy_converted(void* out, Dtype out_dtype, int64_t count, const char* what) const {
  check_valid(node_, what);
  if (std::string(what) == "item" && size() != 1)
    throw ShapeError("item: the array has " + std::to_string(size()) + " elements (shape " +
                     shape_to_string(shape()) + "); item needs exactly one");
  // A traced array: fail on it, so the error names its operation rather than the copy below.
  if (node_->tracer) eval();
  Array converted = copy(astype(*this, out_dtype));
  // Device arrays convert there, then come to the host.
  if (converted.device().type != Device::Type::Cpu) converted = to_device(converted, Device::cpu());
  converted.eval();
  if (count) std::memcpy(out, converted.data(), static_cast<size_t>(count) * size_of(out_dtype));
}


}  // namespace smelt
