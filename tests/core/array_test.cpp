// Tests for array construction, metadata, views, element reads, printing, errors and deep graphs.
#include <limits>
#include <numeric>
#include <sstream>

#include "src/core/convert.h"
#include "src/core/node.h"
#include "test_utils.h"

namespace smelt {
namespace {

using test::random_array;

const Dtype kAllDtypes[] = {bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                            float16, bfloat16, float32, float64};

TEST(Array, FromVectorRoundTrips) {
  Array a(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.dtype(), float32);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(Array, TransposeIsAView) {
  Array a(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  Array t = transpose(a);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{1, 4, 2, 5, 3, 6}));
  t.eval();
  EXPECT_EQ(t.node().buffer, a.node().buffer);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.strides(), (Strides{1, 3}));
  EXPECT_TRUE(a.is_contiguous());
  EXPECT_EQ(a.strides(), (Strides{3, 1}));
}

// ---- construction ---------------------------------------------------------------------------

template <class T>
void check_typed_construction(Dtype d) {
  SCOPED_TRACE(dtype_name(d));
  auto vals = test::random_values(12, -50, 50, static_cast<uint32_t>(d));
  std::vector<T> host;
  for (double v : vals) host.push_back(convert<T, double>(std::floor(v)));
  Array a(host, {3, 4});
  EXPECT_EQ(a.dtype(), d);
  EXPECT_EQ(a.shape(), (Shape{3, 4}));
  EXPECT_EQ(a.ndim(), 2);
  EXPECT_EQ(a.size(), 12);
  EXPECT_EQ(a.itemsize(), sizeof(T));
  EXPECT_EQ(a.nbytes(), 12 * sizeof(T));
  EXPECT_EQ(a.device(), Device::cpu());
  EXPECT_TRUE(a.is_evaluated());
  EXPECT_TRUE(a.is_contiguous());
  std::vector<T> back = a.to_vector<T>();
  EXPECT_EQ(std::memcmp(back.data(), host.data(), host.size() * sizeof(T)), 0);
  EXPECT_EQ(std::memcmp(a.data<T>(), host.data(), host.size() * sizeof(T)), 0);
  // Through the untyped constructor, with and without the element count.
  Array b(host.data(), {2, 6}, d, 12);
  Array c(host.data(), {12}, d);
  EXPECT_EQ(test::raw_bytes(b), test::raw_bytes(a));
  EXPECT_EQ(test::raw_bytes(c), test::raw_bytes(a));
}

TEST(Array, ConstructionForEveryDtype) {
  check_typed_construction<int8_t>(int8);
  check_typed_construction<int16_t>(int16);
  check_typed_construction<int32_t>(int32);
  check_typed_construction<int64_t>(int64);
  check_typed_construction<uint8_t>(uint8);
  check_typed_construction<uint16_t>(uint16);
  check_typed_construction<uint32_t>(uint32);
  check_typed_construction<uint64_t>(uint64);
  check_typed_construction<float16_t>(float16);
  check_typed_construction<bfloat16_t>(bfloat16);
  check_typed_construction<float>(float32);
  check_typed_construction<double>(float64);
  // bool: from an initializer list, and raw bytes other than 0/1 normalize to 1.
  Array b({true, false, true});
  EXPECT_EQ(b.dtype(), bool_);
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, false, true}));
  const uint8_t raw[] = {0, 2, 255, 1};
  Array nb(raw, {2, 2}, bool_);
  EXPECT_EQ(test::raw_bytes(nb), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(nb.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 1, 1}));
}

TEST(Array, InitializerLists) {
  Array a{1, 2, 3};
  EXPECT_EQ(a.dtype(), int32);
  EXPECT_EQ(a.shape(), (Shape{3}));
  Array b({1.5f, 2.5f, 3.5f, 4.5f}, {2, 2});
  EXPECT_EQ(b.dtype(), float32);
  EXPECT_EQ(b.shape(), (Shape{2, 2}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1.5f, 2.5f, 3.5f, 4.5f}));
  Array c({1.0, 2.0}, {2, 1, 1});
  EXPECT_EQ(c.dtype(), float64);
  EXPECT_EQ(c.shape(), (Shape{2, 1, 1}));
}

TEST(Array, ScalarConstructorsAndTheirDtypes) {
  struct Case {
    Array a;
    Dtype d;
    double v;
  };
  const Case cases[] = {
      {Array(true), bool_, 1},
      {Array(-7), int32, -7},
      {Array(-7L), int64, -7},
      {Array(-7LL), int64, -7},
      {Array(7u), uint32, 7},
      {Array(7ul), uint64, 7},
      {Array(7ull), uint64, 7},
      {Array(2.5f), float32, 2.5},
      {Array(2.5), float64, 2.5},
      {Array(float16_t(2.5f)), float16, 2.5},
      {Array(bfloat16_t(2.5f)), bfloat16, 2.5},
  };
  for (const auto& c : cases) {
    Array a = c.a;
    SCOPED_TRACE(dtype_name(c.d));
    EXPECT_EQ(a.dtype(), c.d);
    EXPECT_EQ(a.ndim(), 0);
    EXPECT_EQ(a.shape(), Shape{});
    EXPECT_EQ(a.size(), 1);
    EXPECT_EQ(a.item<double>(), c.v);
    EXPECT_TRUE(a.is_evaluated());
  }
  EXPECT_EQ(Array(std::numeric_limits<int64_t>::min()).item<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Array(std::numeric_limits<uint64_t>::max()).item<uint64_t>(), std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(std::isnan(Array(std::numeric_limits<float>::quiet_NaN()).item<float>()));
}

TEST(Array, ZeroSizedAndZeroDimensional) {
  Array e(std::vector<float>{}, {0, 3});
  EXPECT_EQ(e.size(), 0);
  EXPECT_EQ(e.nbytes(), 0u);
  EXPECT_TRUE(e.to_vector<float>().empty());
  EXPECT_TRUE(e.is_contiguous());
  Array e2(nullptr, {4, 0}, int8);  // no data needed for zero elements
  EXPECT_EQ(e2.shape(), (Shape{4, 0}));
  Array s(std::vector<int16_t>{-3}, {});
  EXPECT_EQ(s.ndim(), 0);
  EXPECT_EQ(s.item<int16_t>(), -3);
  EXPECT_EQ(s.to_vector<int16_t>(), (std::vector<int16_t>{-3}));
}

TEST(Array, IdsAreUniqueAndStable) {
  Array a(1.0f), b(1.0f);
  EXPECT_NE(a.id(), b.id());
  Array c = a;
  EXPECT_EQ(c.id(), a.id());
  Array t = transpose(reshape(a, {1, 1}));
  uint64_t id = t.id();
  t.eval();
  EXPECT_EQ(t.id(), id);
}

// ---- reads with conversion ------------------------------------------------------------------

TEST(Array, ItemAndToVectorConvert) {
  Array f(std::vector<float>{-2.75f, 3.5f, 1e10f, std::numeric_limits<float>::quiet_NaN()}, {4});
  EXPECT_EQ(f.to_vector<int32_t>(), (std::vector<int32_t>{-2, 3, std::numeric_limits<int32_t>::min(),
                                                           std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ(f.to_vector<bool>(), (std::vector<bool>{true, true, true, true}));
  auto h = f.to_vector<float16_t>();
  EXPECT_EQ(h[0].bits, float_to_half(-2.75f));
  EXPECT_EQ(h[2].bits, 0x7c00);  // 1e10 overflows to inf
  auto d = f.to_vector<double>();
  EXPECT_EQ(d[1], 3.5);
  EXPECT_TRUE(std::isnan(d[3]));
  EXPECT_EQ(Array(-1).item<uint8_t>(), 255);  // integer narrowing wraps
  EXPECT_EQ(Array(300).item<int8_t>(), 44);
  EXPECT_EQ(Array(0.0).item<bool>(), false);
  EXPECT_EQ(Array(-0.5).item<bool>(), true);
  EXPECT_EQ(Array(true).item<float>(), 1.0f);
  EXPECT_EQ(Array(int64_t{1} << 53).item<double>(), 9007199254740992.0);
  EXPECT_EQ(Array(2.5).item<bfloat16_t>().bits, 0x4020);
  // Strided and broadcast data read in row-major order.
  Array m(std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  EXPECT_EQ(slice(m, {2, 3}, {-4, -5}, {-2, -2}).to_vector<int64_t>(), (std::vector<int64_t>{11, 9, 3, 1}));
  EXPECT_EQ(broadcast_to(Array{7, 8}, {2, 2}).to_vector<double>(), (std::vector<double>{7, 8, 7, 8}));
  EXPECT_EQ(reshape(slice(m, {0, 1}, {3, 4}), {-1}).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 2, 3, 5, 6, 7, 9, 10, 11}));
  // A one-element array of any rank has an item.
  EXPECT_EQ(reshape(Array(5), {1, 1, 1}).item<int64_t>(), 5);
}

// ---- errors ---------------------------------------------------------------------------------

TEST(ArrayErrors, ItemNeedsOneElement) {
  EXPECT_THROW_MSG(Array({1, 2, 3, 4, 5, 6}, {2, 3}).item<int>(), ShapeError,
                   "item: the array has 6 elements (shape [2,3]); item needs exactly one");
  EXPECT_THROW_MSG(Array(std::vector<float>{}, {0}).item<float>(), ShapeError, "item: the array has 0 elements (shape [0])");
}

TEST(ArrayErrors, ConstructionChecks) {
  std::vector<float> five(5, 1.0f);
  EXPECT_THROW_MSG(Array(five, {2, 3}), ShapeError, "array: 5 elements given for shape [2,3] (6 elements)");
  EXPECT_THROW_MSG(Array({1, 2}, {3}), ShapeError, "array: 2 elements given for shape [3] (3 elements)");
  EXPECT_THROW_MSG(Array(five.data(), {2, -1}, float32), InvalidArgument, "array: negative dimension in shape [2,-1]");
  EXPECT_THROW_MSG(Array(five.data(), {int64_t{1} << 40, int64_t{1} << 40}, float32), InvalidArgument,
                   "array: shape [1099511627776,1099511627776] of float32 has more bytes than memory can address");
  EXPECT_THROW_MSG(Array(five.data(), {int64_t{1} << 62, 2}, int8), InvalidArgument, "more bytes than memory can address");
  EXPECT_THROW_MSG(Array(nullptr, {2}, float32), InvalidArgument, "array: null data pointer for shape [2]");
}

TEST(ArrayErrors, WrongElementTypeForData) {
  Array a{1, 2, 3};
  EXPECT_THROW_MSG(a.data<float>(), DtypeError, "Array::data: requested float32 data of a int32 array");
  EXPECT_EQ(a.data<int32_t>()[2], 3);
}

TEST(ArrayErrors, AxisOutOfRange) {
  Array a = zeros({2, 3, 4});
  EXPECT_EQ(a.shape(0), 2);
  EXPECT_EQ(a.shape(-1), 4);
  EXPECT_EQ(a.shape(-3), 2);
  EXPECT_THROW_MSG(a.shape(3), InvalidArgument, "shape: axis 3 is out of range for an array of rank 3");
  EXPECT_THROW_MSG(a.shape(-4), InvalidArgument, "shape: axis -4 is out of range for an array of rank 3");
  EXPECT_THROW_MSG(Array(1).shape(0), InvalidArgument, "shape: axis 0 is out of range for an array of rank 0");
}

TEST(ArrayErrors, EmptyHandleInEveryAccessor) {
  Array e;
  const std::string msg = "the array is an empty handle (default-constructed)";
  EXPECT_FALSE(e.valid());
  EXPECT_FALSE(e.is_evaluated());
  EXPECT_EQ(e.node_ptr(), nullptr);
  EXPECT_THROW_MSG(e.shape(), InvalidArgument, "shape: " + msg);
  EXPECT_THROW_MSG(e.shape(0), InvalidArgument, "shape: " + msg);
  EXPECT_THROW_MSG(e.ndim(), InvalidArgument, "shape: " + msg);
  EXPECT_THROW_MSG(e.size(), InvalidArgument, "shape: " + msg);
  EXPECT_THROW_MSG(e.itemsize(), InvalidArgument, "dtype: " + msg);
  EXPECT_THROW_MSG(e.nbytes(), InvalidArgument, "shape: " + msg);
  EXPECT_THROW_MSG(e.dtype(), InvalidArgument, "dtype: " + msg);
  EXPECT_THROW_MSG(e.device(), InvalidArgument, "device: " + msg);
  EXPECT_THROW_MSG(e.id(), InvalidArgument, "id: " + msg);
  EXPECT_THROW_MSG(e.node(), InvalidArgument, "node: " + msg);
  EXPECT_THROW_MSG(e.eval(), InvalidArgument, "eval: " + msg);
  EXPECT_THROW_MSG(e.strides(), InvalidArgument, "eval: " + msg);
  EXPECT_THROW_MSG(e.is_contiguous(), InvalidArgument, "eval: " + msg);
  EXPECT_THROW_MSG(e.data(), InvalidArgument, "eval: " + msg);
  EXPECT_THROW_MSG(e.data<float>(), InvalidArgument, "dtype: " + msg);
  EXPECT_THROW_MSG(e.item<float>(), InvalidArgument, "item: " + msg);
  EXPECT_THROW_MSG(e.to_vector<float>(), InvalidArgument, msg);
  EXPECT_THROW_MSG(e.to_string(), InvalidArgument, "to_string: " + msg);
  std::ostringstream os;
  EXPECT_THROW_MSG(os << e, InvalidArgument, "to_string: " + msg);
  EXPECT_THROW_MSG(eval({Array(1), e}), InvalidArgument, "eval: an array is an empty handle (default-constructed)");
  EXPECT_THROW_MSG(reshape(e, {1}), InvalidArgument, "reshape");
}

TEST(ArrayErrors, EvaluatingATracerNamesTheOperation) {
  Array x = reshape(Array({1, 2, 3, 4}), {2, 2});
  x.node().tracer = true;  // what compile's tracing marks
  EXPECT_THROW_MSG(x.eval(), UnknownValueError,
                   "eval: Reshape([2,2]) (shape [2,2], int32) is a traced value whose data is only known when "
                   "the compiled function runs");
}

TEST(ArrayErrors, InternalAssertionsThrow) {
  EXPECT_THROW_MSG(SMELT_ASSERT(1 + 1 == 3, "arithmetic broke"), Error, "internal error: arithmetic broke (1 + 1 == 3 at ");
}

// ---- devices --------------------------------------------------------------------------------

TEST(Devices, CpuOnlyBuild) {
  EXPECT_EQ(Device::cpu().str(), "cpu");
  EXPECT_EQ(Device::cuda(1).str(), "cuda:1");
  EXPECT_NE(Device::cpu(), Device::cuda(0));
  if (!cuda_available()) {
    EXPECT_EQ(default_device(), Device::cpu());
    EXPECT_THROW_MSG(set_default_device(Device::cuda(0)), DeviceError, "set_default_device: cuda:0 is not available");
    EXPECT_EQ(default_device(), Device::cpu());
  }
  set_default_device(Device::cpu());
  EXPECT_EQ(zeros({2}).device(), Device::cpu());
}

// ---- graphs ---------------------------------------------------------------------------------

TEST(Graph, EvalOfSeveralArraysSharesWork) {
  Array base = random_array({4, 6}, float32, -1, 1, 3);
  Array shared = transpose(base);
  Array a = reshape(shared, {24});
  Array b = slice(shared, {0, 0}, {6, 2});
  eval({a, b, a});
  EXPECT_TRUE(a.is_evaluated());
  EXPECT_TRUE(b.is_evaluated());
  EXPECT_TRUE(shared.is_evaluated());
  EXPECT_EQ(b.node().buffer, base.node().buffer);  // views all the way down
  auto bv = base.to_vector<float>();
  auto av = a.to_vector<float>();
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(av[i * 4 + j], bv[j * 6 + i]);
  eval({});  // nothing to do
  eval({a});  // already evaluated
}

TEST(Graph, EvaluatedNodesDropTheirInputs) {
  Array x = random_array({8}, float32);
  Array y = reshape(x, {2, 4});
  EXPECT_EQ(y.node().inputs.size(), 1u);
  y.eval();
  EXPECT_TRUE(y.node().inputs.empty());  // the graph above an evaluated node is freed
  EXPECT_EQ(y.node().prim.kind, PrimKind::None);
}

TEST(Graph, MultiOutputSiblingsEvaluateTogether) {
  Array a(std::vector<float>{3, 1, 4, 1, 5, 9, 2, 6}, {2, 4});
  auto [v, i] = topk(a, 2);
  EXPECT_EQ(v.dtype(), float32);
  EXPECT_EQ(i.dtype(), int64);
  EXPECT_EQ(v.shape(), (Shape{2, 2}));
  EXPECT_FALSE(i.is_evaluated());
  v.eval();
  EXPECT_TRUE(i.is_evaluated());  // one kernel run fills both
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{4, 3, 9, 6}));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 1, 3}));
  // An output whose sibling was dropped before eval still evaluates.
  Array only_indices = topk(a, 1).second;
  EXPECT_EQ(only_indices.to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));
  Array only_values = topk(a, 1).first;
  EXPECT_EQ(only_values.to_vector<float>(), (std::vector<float>{4, 9}));
  // Both outputs feeding one later op, evaluated with eval({...}).
  auto [v2, i2] = topk(a, 2);
  Array both = add(astype(i2, float32), v2);
  Array other = multiply(v2, 2.0f);
  eval({both, other});
  EXPECT_EQ(both.to_vector<float>(), (std::vector<float>{6, 3, 10, 9}));
  EXPECT_EQ(other.to_vector<float>(), (std::vector<float>{8, 6, 18, 12}));
}

// The flat order of a [2,3] array after reshape to [3,2] and transpose back: a fixed permutation.
std::vector<int32_t> permute_once(const std::vector<int32_t>& v) {
  std::vector<int32_t> out(6);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) out[i * 3 + j] = v[j * 2 + i];
  return out;
}

TEST(Graph, HundredThousandDeepChainEvaluates) {
  const int depth = 100000;
  std::vector<int32_t> start{0, 1, 2, 3, 4, 5};
  Array x(start, {2, 3});
  for (int i = 0; i < depth / 2; ++i) x = transpose(reshape(x, {3, 2}));
  std::vector<int32_t> expected = start;
  for (int i = 0; i < depth / 2; ++i) expected = permute_once(expected);
  EXPECT_EQ(x.to_vector<int32_t>(), expected);
  // Keeping a node in the middle alive does not change the result.
  Array y(start, {2, 3});
  Array middle;
  for (int i = 0; i < depth / 2; ++i) {
    y = transpose(reshape(y, {3, 2}));
    if (i == depth / 4) middle = y;
  }
  EXPECT_EQ(y.to_vector<int32_t>(), expected);
  EXPECT_TRUE(middle.is_evaluated());
}

TEST(Graph, HundredThousandDeepChainCanBeDroppedUnevaluated) {
  MemoryInfo before = memory_info();
  {
    Array x = zeros({2, 3}, float32);
    for (int i = 0; i < 100000; ++i) x = transpose(reshape(x, {3, 2}));
    // Dropped here without eval: freeing must not recurse once per node.
  }
  {
    // A deep chain with a shared input and branches.
    Array root = zeros({2, 3}, float32);
    Array x = root, z = root;
    for (int i = 0; i < 50000; ++i) {
      x = transpose(reshape(x, {3, 2}));
      z = i % 2 ? transpose(z) : transpose(x);
    }
  }
  EXPECT_EQ(memory_info().active_bytes, before.active_bytes);
}

// ---- helpers of node.h ----------------------------------------------------------------------

TEST(ShapeHelpers, StridesSizesContiguity) {
  EXPECT_EQ(row_major_strides({2, 3, 4}), (Strides{12, 4, 1}));
  EXPECT_EQ(row_major_strides({}), Strides{});
  EXPECT_EQ(row_major_strides({5, 0, 2}), (Strides{0, 2, 1}));
  EXPECT_EQ(shape_size({}), 1);
  EXPECT_EQ(shape_size({2, 0, 5}), 0);
  EXPECT_EQ(shape_size({2, 3, 4}), 24);
  EXPECT_TRUE(is_row_contiguous({2, 3}, {3, 1}));
  EXPECT_FALSE(is_row_contiguous({2, 3}, {1, 2}));
  EXPECT_TRUE(is_row_contiguous({2, 1, 3}, {3, 99, 1}));  // size-1 axes do not matter
  EXPECT_TRUE(is_row_contiguous({2, 0, 3}, {7, 5, 3}));   // nothing to walk
  EXPECT_FALSE(is_row_contiguous({4}, {0}));              // a broadcast
  EXPECT_TRUE(is_row_contiguous({}, {}));
  EXPECT_EQ(shape_to_string({}), "[]");
  EXPECT_EQ(shape_to_string({2, 3}), "[2,3]");
}

// Shapes whose element count overflows int64: an error when the array would hold elements,
// harmless strides when it is empty (the fuzzer found the overflow through an ONNX tensor).
TEST(ShapeHelpers, StridesThatOverflowInt64) {
  const int64_t big = int64_t{1} << 40;
  EXPECT_THROW_MSG(row_major_strides({big, big}), ShapeError,
                   "shape [1099511627776,1099511627776] has more elements than an int64 can count");
  Strides s = row_major_strides({0, big, big});
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(s[2], 1);
  EXPECT_EQ(s[1], big);
}

}  // namespace
}  // namespace smelt
