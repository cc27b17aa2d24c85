// Printing: NumPy's repr of arrays (formats, alignment, wrapping, summarization, options) and dtypes.
#include <limits>
#include <sstream>

#include "test_utils.h"

namespace smelt {
namespace {

// Expected texts are NumPy 2.4's repr of the same values and dtype (NumPy leaves out the dtype of
// float64, int64 and bool arrays; smelt always writes it).
TEST(Print, ToStringFormats) {
  EXPECT_EQ(Array(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3}).to_string(),
            "array([[1, 2, 3],\n       [4, 5, 6]], dtype=int32)");
  EXPECT_EQ(Array(5).to_string(), "array(5, dtype=int32)");
  EXPECT_EQ(Array(2.0).to_string(), "array(2., dtype=float64)");
  EXPECT_EQ(Array(true).to_string(), "array(True, dtype=bool)");
  EXPECT_EQ(Array({true, false}).to_string(), "array([ True, False], dtype=bool)");
  EXPECT_EQ(Array(std::vector<float>{}, {0}).to_string(), "array([], dtype=float32)");
  EXPECT_EQ(Array(std::vector<float>{}, {2, 0}).to_string(), "array([], shape=(2, 0), dtype=float32)");
  EXPECT_EQ(Array(std::vector<int8_t>{-128, 127}, {2, 1, 1}).to_string(),
            "array([[[-128]],\n\n       [[ 127]]], dtype=int8)");
  EXPECT_EQ(Array(std::numeric_limits<uint64_t>::max()).to_string(), "array(18446744073709551615, dtype=uint64)");
  EXPECT_EQ(Array(std::vector<uint8_t>{1, 2, 3}, {3}).to_string(), "array([1, 2, 3], dtype=uint8)");
  // Non-contiguous arrays print in logical order.
  EXPECT_EQ(transpose(Array(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3})).to_string(),
            "array([[1, 4],\n       [2, 5],\n       [3, 6]], dtype=int32)");
  std::ostringstream os;
  os << Array{1, 2};
  EXPECT_EQ(os.str(), "array([1, 2], dtype=int32)");
}

TEST(Print, ToStringFloats) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // The fewest digits that read back as the same float32, aligned on the point.
  EXPECT_EQ(Array({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2}).to_string(), "array([[1., 2.],\n       [3., 4.]], dtype=float32)");
  EXPECT_EQ(Array({1.5f, 2.25f, -0.125f}).to_string(), "array([ 1.5  ,  2.25 , -0.125], dtype=float32)");
  EXPECT_EQ(Array({0.1f, 1.0f / 3.0f}).to_string(), "array([0.1       , 0.33333334], dtype=float32)");
  EXPECT_EQ(Array(-0.0f).to_string(), "array(-0., dtype=float32)");
  EXPECT_EQ(Array({nan, 1.0f}).to_string(), "array([nan,  1.], dtype=float32)");
  // Scientific notation when the magnitudes ask for it (>= 1e8, < 1e-4, or a ratio > 1000).
  EXPECT_EQ(Array({1.5f, -2.0f, nan, inf, -inf, 1e-7f, 123456789.0f}).to_string(),
            "array([ 1.5000000e+00, -2.0000000e+00,            nan,            inf,\n"
            "                 -inf,  1.0000000e-07,  1.2345679e+08], dtype=float32)");
  EXPECT_EQ(Array({1e10f, 2e10f}).to_string(), "array([1.e+10, 2.e+10], dtype=float32)");
  EXPECT_EQ(Array({-inf, 1e-7f}).to_string(), "array([  -inf, 1.e-07], dtype=float32)");
  EXPECT_EQ(Array({nan, 1e9f, 0.5f, -1.0f}, {2, 2}).to_string(),
            "array([[    nan,  1.e+09],\n       [ 5.e-01, -1.e+00]], dtype=float32)");
  // float64 digits are float64's; halves print the digits that identify the half.
  EXPECT_EQ(Array(std::vector<double>{1.0 / 3, 2e-5}, {2}).to_string(),
            "array([3.33333333e-01, 2.00000000e-05], dtype=float64)");
  EXPECT_EQ(Array(std::vector<double>{123456.789, 0.001}, {2}).to_string(),
            "array([1.23456789e+05, 1.00000000e-03], dtype=float64)");
  EXPECT_EQ(Array(float16_t(0.333f)).to_string(), "array(0.333, dtype=float16)");
  EXPECT_EQ(Array({float16_t(0.1f), float16_t(0.2f), float16_t(0.3f)}).to_string(),
            "array([0.1, 0.2, 0.3], dtype=float16)");
  EXPECT_EQ(Array({float16_t(65504.0f), float16_t(-0.0f), float16_t(6e-8f)}).to_string(),
            "array([ 6.55e+04, -0.00e+00,  5.96e-08], dtype=float16)");
  EXPECT_EQ(Array(bfloat16_t(-3.0f)).to_string(), "array(-3., dtype=bfloat16)");
  // bfloat16 keeps 8 significant bits: 0.1 is 0.10009765625, and "0.1" already reads back as it;
  // 1/3 is 0.333984375, and 0.333 would read back as its neighbour 0.33203125.
  EXPECT_EQ(Array({bfloat16_t(0.1f), bfloat16_t(1.0f / 3.0f)}).to_string(), "array([0.1  , 0.334], dtype=bfloat16)");
}

TEST(Print, ToStringWrapsRows) {
  // Rows wrap at 75 characters; the dtype moves to its own line when it would not fit.
  EXPECT_EQ(divide(arange(30, float32), Array(7.0f)).to_string(),
            "array([0.        , 0.14285715, 0.2857143 , 0.42857143, 0.5714286 ,\n"
            "       0.71428573, 0.85714287, 1.        , 1.1428572 , 1.2857143 ,\n"
            "       1.4285715 , 1.5714285 , 1.7142857 , 1.8571428 , 2.        ,\n"
            "       2.142857  , 2.2857144 , 2.4285715 , 2.5714285 , 2.7142856 ,\n"
            "       2.857143  , 3.        , 3.142857  , 3.2857144 , 3.4285715 ,\n"
            "       3.5714285 , 3.7142856 , 3.857143  , 4.        , 4.142857  ],\n"
            "      dtype=float32)");
}

TEST(Print, ToStringOptions) {
  EXPECT_EQ(to_string(Array({0.1f, 1.0f / 3.0f}), {.precision = 3}), "array([0.1  , 0.333], dtype=float32)");
  EXPECT_EQ(to_string(Array({1e-5f, 1.0f}), {.suppress = true}), "array([0.00001, 1.     ], dtype=float32)");
  EXPECT_EQ(to_string(arange(10), {.threshold = 5, .edgeitems = 2}),
            "array([0, 1, ..., 8, 9], shape=(10,), dtype=int32)");
  EXPECT_EQ(to_string(arange(12), {.linewidth = 20}),
            "array([ 0,  1,  2,\n        3,  4,  5,\n        6,  7,  8,\n        9, 10, 11],\n      dtype=int32)");
  EXPECT_THROW_MSG(to_string(arange(3), {.precision = -1}), InvalidArgument,
                   "to_string: PrintOptions::precision must be in [0, 17], got -1");
  EXPECT_THROW_MSG(to_string(arange(3), {.edgeitems = -2}), InvalidArgument,
                   "to_string: PrintOptions::edgeitems must be non-negative, got -2");
  EXPECT_THROW_MSG(to_string(arange(3), {.linewidth = 0}), InvalidArgument,
                   "to_string: PrintOptions::linewidth must be positive, got 0");
  EXPECT_THROW_MSG(Array().to_string(), InvalidArgument, "to_string: the array is an empty handle");
}

TEST(Print, ToStringElidesOnlyLargeArrays) {
  // Up to 1000 elements everything prints (NumPy's threshold); past it, the shape is written.
  std::string ten = arange(10).to_string();
  EXPECT_EQ(ten, "array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], dtype=int32)");
  EXPECT_EQ(arange(1000).to_string().find("..."), std::string::npos);
  EXPECT_EQ(arange(2000).to_string(), "array([   0,    1,    2, ..., 1997, 1998, 1999],\n      shape=(2000,), dtype=int32)");
  EXPECT_EQ(reshape(arange(10000), {100, 100}).to_string(),
            "array([[   0,    1,    2, ...,   97,   98,   99],\n"
            "       [ 100,  101,  102, ...,  197,  198,  199],\n"
            "       [ 200,  201,  202, ...,  297,  298,  299],\n"
            "       ...,\n"
            "       [9700, 9701, 9702, ..., 9797, 9798, 9799],\n"
            "       [9800, 9801, 9802, ..., 9897, 9898, 9899],\n"
            "       [9900, 9901, 9902, ..., 9997, 9998, 9999]],\n"
            "      shape=(100, 100), dtype=int32)");
  // Short axes of a large array are not elided.
  EXPECT_EQ(reshape(arange(3000), {1000, 3}).to_string(),
            "array([[   0,    1,    2],\n       [   3,    4,    5],\n       [   6,    7,    8],\n       ...,\n"
            "       [2991, 2992, 2993],\n       [2994, 2995, 2996],\n       [2997, 2998, 2999]], shape=(1000, 3), dtype=int32)");
  // Nested rows wrap inside their brackets.
  EXPECT_EQ(reshape(arange(2400, float32), {2, 3, 400}).to_string(),
            "array([[[0.000e+00, 1.000e+00, 2.000e+00, ..., 3.970e+02, 3.980e+02,\n"
            "         3.990e+02],\n"
            "        [4.000e+02, 4.010e+02, 4.020e+02, ..., 7.970e+02, 7.980e+02,\n"
            "         7.990e+02],\n"
            "        [8.000e+02, 8.010e+02, 8.020e+02, ..., 1.197e+03, 1.198e+03,\n"
            "         1.199e+03]],\n\n"
            "       [[1.200e+03, 1.201e+03, 1.202e+03, ..., 1.597e+03, 1.598e+03,\n"
            "         1.599e+03],\n"
            "        [1.600e+03, 1.601e+03, 1.602e+03, ..., 1.997e+03, 1.998e+03,\n"
            "         1.999e+03],\n"
            "        [2.000e+03, 2.001e+03, 2.002e+03, ..., 2.397e+03, 2.398e+03,\n"
            "         2.399e+03]]], shape=(2, 3, 400), dtype=float32)");
  // A huge array prints quickly (only the shown elements are formatted).
  EXPECT_EQ(zeros({1 << 22}, uint8).to_string(), "array([0, 0, 0, ..., 0, 0, 0], shape=(4194304,), dtype=uint8)");
}

TEST(Print, Dtypes) {
  std::ostringstream os;
  os << float32 << " " << bfloat16 << " " << float16 << " " << bool_ << " " << uint64 << " "
     << Array(2.5).dtype();
  EXPECT_EQ(os.str(), "float32 bfloat16 float16 bool uint64 float64");
}

TEST(Print, ArraysOnEveryDevice) {
  // A GPU array prints from a host copy, with the same text.
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  Array a = reshape(arange(6, float32), {2, 3}) / 4.0f;
  EXPECT_EQ(to_device(a, Device::cuda(0)).to_string(), a.to_string());
}

}  // namespace
}  // namespace smelt
