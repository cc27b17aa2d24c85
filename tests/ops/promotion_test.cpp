// Tests for type promotion (the full 13x13 table) and the weak C++ scalar rules of the operators.
#include "ops/elementwise_helpers.h"

namespace smelt {
namespace {

using namespace smelt::test;

// NumPy's promotion table with smelt's documented exceptions (src/core/dtype.cpp): integer with
// float gives the float's dtype (NumPy widens, e.g. int16+float16 -> float32), and float16 with
// bfloat16 gives float32. Row and column order: the Dtype enum.
// b=bool i1..i8 u1..u8 f2=float16 bf=bfloat16 f4 f8
const char* const kTable[13][13] = {
    //  b      i1     i2     i4     i8     u1     u2     u4     u8     f2     bf     f4     f8
    {"b", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "bf", "f4", "f8"},      // bool
    {"i1", "i1", "i2", "i4", "i8", "i2", "i4", "i8", "f8", "f2", "bf", "f4", "f8"},     // int8
    {"i2", "i2", "i2", "i4", "i8", "i2", "i4", "i8", "f8", "f2", "bf", "f4", "f8"},     // int16
    {"i4", "i4", "i4", "i4", "i8", "i4", "i4", "i8", "f8", "f2", "bf", "f4", "f8"},     // int32
    {"i8", "i8", "i8", "i8", "i8", "i8", "i8", "i8", "f8", "f2", "bf", "f4", "f8"},     // int64
    {"u1", "i2", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "bf", "f4", "f8"},     // uint8
    {"u2", "i4", "i4", "i4", "i8", "u2", "u2", "u4", "u8", "f2", "bf", "f4", "f8"},     // uint16
    {"u4", "i8", "i8", "i8", "i8", "u4", "u4", "u4", "u8", "f2", "bf", "f4", "f8"},     // uint32
    {"u8", "f8", "f8", "f8", "f8", "u8", "u8", "u8", "u8", "f2", "bf", "f4", "f8"},     // uint64
    {"f2", "f2", "f2", "f2", "f2", "f2", "f2", "f2", "f2", "f2", "f4", "f4", "f8"},     // float16
    {"bf", "bf", "bf", "bf", "bf", "bf", "bf", "bf", "bf", "f4", "bf", "f4", "f8"},     // bfloat16
    {"f4", "f4", "f4", "f4", "f4", "f4", "f4", "f4", "f4", "f4", "f4", "f4", "f8"},     // float32
    {"f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8"},     // float64
};

Dtype from_code(const std::string& c) {
  static const std::vector<std::pair<std::string, Dtype>> codes = {
      {"b", bool_},   {"i1", int8},   {"i2", int16},   {"i4", int32},    {"i8", int64},
      {"u1", uint8},  {"u2", uint16}, {"u4", uint32},  {"u8", uint64},   {"f2", float16},
      {"bf", bfloat16}, {"f4", float32}, {"f8", float64}};
  for (auto& [k, d] : codes)
    if (k == c) return d;
  ADD_FAILURE() << "bad code " << c;
  return bool_;
}

TEST(Promotion, TableForEveryPair) {
  const auto& dts = all_dtypes();
  for (int i = 0; i < 13; ++i)
    for (int j = 0; j < 13; ++j) {
      Dtype want = from_code(kTable[i][j]);
      EXPECT_EQ(promote_types(dts[i], dts[j]), want) << dtype_name(dts[i]) << " + " << dtype_name(dts[j]);
      EXPECT_EQ(promote_types(dts[j], dts[i]), want) << "symmetry";
      // The binary ops follow the table (maximum accepts every dtype).
      Array r = maximum(zeros({2}, dts[i]), zeros({1}, dts[j]));
      EXPECT_EQ(r.dtype(), want) << dtype_name(dts[i]) << " , " << dtype_name(dts[j]);
      // Comparisons give bool whatever the operands.
      EXPECT_EQ(less(zeros({2}, dts[i]), zeros({2}, dts[j])).dtype(), bool_);
      EXPECT_EQ(logical_or(zeros({2}, dts[i]), zeros({2}, dts[j])).dtype(), bool_);
    }
}

TEST(Promotion, MixedPairsComputeWithoutLoss) {
  // Every pair of integer dtypes on values that fit both: the result equals the exact sum.
  const std::vector<Dtype> ints = {int8, int16, int32, int64, uint8, uint16, uint32, uint64};
  for (Dtype x : ints)
    for (Dtype y : ints) {
      Array a = astype(Array(std::vector<int64_t>{0, 1, 100, 127}, {4}), x);
      Array b = astype(Array(std::vector<int64_t>{127, 100, 1, 0}, {4}), y);
      EXPECT_TRUE(all_close(add(a, b), {127, 101, 101, 127}, 0)) << dtype_name(x) << "+" << dtype_name(y);
      EXPECT_EQ(values<bool>(less(a, b)), (std::vector<bool>{true, true, false, false}));
    }
  // Values past the narrower type's range.
  EXPECT_EQ(values<int32_t>(add(array_of<int16_t>({32767}), array_of<uint16_t>({65535}))),
            (std::vector<int32_t>{98302}));
  EXPECT_EQ(values<int64_t>(multiply(array_of<int32_t>({-2}), array_of<uint32_t>({4000000000u}))),
            (std::vector<int64_t>{-8000000000}));
}

TEST(WeakScalar, TakesTheArrayDtypeWhenItsKindIsNotHigher) {
  EXPECT_EQ((ones({3}, float16) * 2.0).dtype(), float16);
  EXPECT_EQ((ones({3}, bfloat16) + 1).dtype(), bfloat16);
  EXPECT_EQ((ones({3}, float64) - 1).dtype(), float64);
  EXPECT_EQ((ones({3}, int32) + 2.5).dtype(), float32);
  EXPECT_EQ((ones({3}, int64) * 0.5).dtype(), float32);
  EXPECT_EQ((ones({3}, uint8) + 1).dtype(), uint8);
  EXPECT_EQ((ones({3}, int8) + true).dtype(), int8);
  EXPECT_EQ((ones({3}, bool_) + 1).dtype(), int32);
  EXPECT_EQ((ones({3}, bool_) * 1.5f).dtype(), float32);
  EXPECT_EQ((ones({3}, bool_) & false).dtype(), bool_);
  EXPECT_EQ((ones({3}, float32) < 1).dtype(), bool_);
  // Values.
  Array h = astype(Array(std::vector<double>{1, 2.5, -3}, {3}), float16);
  EXPECT_TRUE(all_close(h * 2.0, {2, 5, -6}, 0));
  EXPECT_TRUE(all_close(3 - h, {2, 0.5, 6}, 0));
  EXPECT_EQ(values<uint8_t>(array_of<uint8_t>({0, 254, 255}) + 1), (std::vector<uint8_t>{1, 255, 0}));
  EXPECT_TRUE(all_close(array_of<int32_t>({1, -2}) + 2.5, {3.5, 0.5}, 0));
  EXPECT_EQ(values<int32_t>(array_of<bool>({true, false}) + 1), (std::vector<int32_t>{2, 1}));
  // The scalar is rounded to the array's float dtype, as NumPy 2 does.
  EXPECT_EQ((ones({1}, float16) * 0.1).item<float>(), static_cast<float>(float16_t(0.1)));
  EXPECT_EQ(as_doubles(ones({1}, float16) * 1e6)[0], INFINITY);
  EXPECT_EQ(as_doubles(ones({1}, float16) + 100000)[0], INFINITY);
}

TEST(WeakScalar, DirectCalls) {
  Array d = weak_scalar(2.5, float16);
  EXPECT_EQ(d.shape(), Shape{});
  EXPECT_EQ(d.dtype(), float16);
  EXPECT_EQ(d.item<double>(), 2.5);
  EXPECT_EQ(weak_scalar(2.5, int16).dtype(), float32);
  EXPECT_EQ(weak_scalar(2.5, bool_).dtype(), float32);
  EXPECT_EQ(weak_scalar(int64_t{7}, uint16).dtype(), uint16);
  EXPECT_EQ(weak_scalar(int64_t{7}, float64).dtype(), float64);
  EXPECT_EQ(weak_scalar(int64_t{7}, bool_).dtype(), int32);
  // An integer that int32 cannot hold becomes int64 rather than wrapping.
  Array big = weak_scalar(int64_t{1} << 40, bool_);
  EXPECT_EQ(big.dtype(), int64);
  EXPECT_EQ(big.item<int64_t>(), int64_t{1} << 40);
  EXPECT_EQ(weak_scalar(true, float32).dtype(), float32);
  EXPECT_EQ(weak_scalar(true, float32).item<float>(), 1.0f);
  EXPECT_EQ(weak_scalar(true, int8).dtype(), int8);
  EXPECT_EQ(weak_scalar(false, bool_).dtype(), bool_);
  EXPECT_EQ(weak_scalar(int64_t{-128}, int8).item<int>(), -128);
  EXPECT_EQ(weak_scalar(std::numeric_limits<int64_t>::max(), uint64).item<uint64_t>(),
            static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
}

TEST(WeakScalar, OutOfRangeIntegersAreErrors) {
  EXPECT_THROW_MSG(ones({3}, uint8) + 300, InvalidArgument,
                   "weak_scalar: the integer 300 is out of range for uint8, the dtype of the array it combines with");
  EXPECT_THROW_MSG(ones({3}, uint8) * -1, InvalidArgument, "weak_scalar: the integer -1 is out of range for uint8");
  EXPECT_THROW_MSG(weak_scalar(int64_t{128}, int8), InvalidArgument,
                   "weak_scalar: the integer 128 is out of range for int8");
  EXPECT_THROW_MSG(weak_scalar(int64_t{-129}, int8), InvalidArgument, "out of range for int8");
  EXPECT_THROW_MSG(weak_scalar(int64_t{1} << 31, int32), InvalidArgument, "out of range for int32");
  EXPECT_THROW_MSG(weak_scalar(int64_t{-1}, uint64), InvalidArgument, "out of range for uint64");
  EXPECT_THROW_MSG(weak_scalar(int64_t{70000}, uint16), InvalidArgument, "out of range for uint16");
}

}  // namespace
}  // namespace smelt
