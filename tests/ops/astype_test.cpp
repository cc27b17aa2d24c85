// Tests for astype: every pair of the 13 dtypes, on ordinary and special values (NaN, ±inf, -0,
// out of range, negative to unsigned), against an independent reference of the documented rules.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/elementwise_helpers.h"
#include "src/core/node.h"

namespace smelt {
namespace {

using namespace smelt::test;

// ---- Reference conversions, written from the rules in ops.h / convert.h -----------------------

/// Every finite value of a 16-bit float format, ascending, with its bits (for nearest search).
struct HalfTable {
  std::vector<std::pair<long double, uint16_t>> values;  // finite, non-negative
  long double max_value;
  long double overflow_at;  // max + half an ulp: at or above rounds to inf
};

HalfTable make_table(bool bf16) {
  HalfTable t;
  for (uint32_t b = 0; b < 0x8000u; ++b) {
    uint16_t bits = static_cast<uint16_t>(b);
    float f = bf16 ? static_cast<float>(bfloat16_t::from_bits(bits)) : static_cast<float>(float16_t::from_bits(bits));
    if (!std::isfinite(f)) continue;
    t.values.push_back({f, bits});
  }
  std::sort(t.values.begin(), t.values.end());
  t.max_value = t.values.back().first;
  long double ulp = t.max_value - t.values[t.values.size() - 2].first;
  t.overflow_at = t.max_value + ulp / 2;
  return t;
}

/// Round to nearest, ties to the even bit pattern, overflow to inf: the bits of the result.
uint16_t round_to_16(long double v, bool bf16) {
  static const HalfTable half = make_table(false), bf = make_table(true);
  const HalfTable& t = bf16 ? bf : half;
  uint16_t sign = std::signbit(v) ? 0x8000u : 0;
  if (std::isnan(v)) return bf16 ? 0x7fc0u : 0x7e00u;  // quiet NaN (sign and payload not checked)
  long double a = std::fabs(v);
  uint16_t inf_bits = bf16 ? 0x7f80u : 0x7c00u;
  if (a >= t.overflow_at) return sign | inf_bits;
  auto it = std::lower_bound(t.values.begin(), t.values.end(), std::make_pair(a, uint16_t{0}));
  if (it == t.values.end()) return sign | t.values.back().second;
  if (it->first == a || it == t.values.begin()) return sign | it->second;
  auto lo = it - 1;
  long double dl = a - lo->first, dh = it->first - a;
  if (dl < dh) return sign | lo->second;
  if (dh < dl) return sign | it->second;
  return sign | ((lo->second & 1) ? it->second : lo->second);
}

/// Float to integer: truncation; NaN and out-of-range give the documented x86 values.
template <class To>
To float_to_int(long double v) {
  const long double two63 = 9223372036854775808.0L;
  auto to_i64 = [&](long double x) -> int64_t {
    if (!(x >= -two63 && x < two63)) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(std::trunc(x));
  };
  auto to_i32 = [&](long double x) -> int32_t {
    if (!(x > -2147483649.0L && x < 2147483648.0L)) return std::numeric_limits<int32_t>::min();
    return static_cast<int32_t>(std::trunc(x));
  };
  if constexpr (std::is_same_v<To, int64_t>) return to_i64(v);
  else if constexpr (std::is_same_v<To, int32_t>) return to_i32(v);
  else if constexpr (std::is_same_v<To, uint64_t>) {
    if (v >= two63 && v < 2 * two63) return static_cast<uint64_t>(std::trunc(v));
    return static_cast<uint64_t>(to_i64(v));
  } else if constexpr (std::is_same_v<To, uint32_t>) {
    return static_cast<uint32_t>(static_cast<uint64_t>(to_i64(v)));
  } else {
    return static_cast<To>(static_cast<uint32_t>(to_i32(v)));  // int8/16, uint8/16 wrap int32
  }
}

/// The expected element of `to` for the exact source value `v` (integral when `integral`).
template <class To>
To expected(long double v, bool integral) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != 0 || std::isnan(v);
  } else if constexpr (std::is_same_v<To, float16_t>) {
    return float16_t::from_bits(round_to_16(v, false));
  } else if constexpr (std::is_same_v<To, bfloat16_t>) {
    return bfloat16_t::from_bits(round_to_16(v, true));
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(v);  // v is exact; one rounding
  } else if (integral) {
    // Integer to integer wraps modulo 2^bits.
    __int128 x = v < 0 ? -static_cast<__int128>(static_cast<uint64_t>(-v)) : static_cast<__int128>(static_cast<uint64_t>(v));
    return wrap<To>(x);
  } else {
    return float_to_int<To>(v);
  }
}

/// Source values per dtype: special and boundary values plus random ones, as long doubles
/// that the source dtype holds exactly.
std::vector<long double> source_values(Dtype d) {
  std::vector<long double> v;
  const long double two63 = 9223372036854775808.0L;
  switch (kind_of(d)) {
    case DtypeKind::Bool:
      return {0, 1};
    case DtypeKind::SignedInt:
    case DtypeKind::UnsignedInt: {
      long double lo = 0, hi = 0;
      switch (d) {
        case Dtype::Int8: lo = -128, hi = 127; break;
        case Dtype::Int16: lo = -32768, hi = 32767; break;
        case Dtype::Int32: lo = -2147483648.0L, hi = 2147483647.0L; break;
        case Dtype::Int64: lo = -two63, hi = two63 - 1; break;
        case Dtype::UInt8: hi = 255; break;
        case Dtype::UInt16: hi = 65535; break;
        case Dtype::UInt32: hi = 4294967295.0L; break;
        case Dtype::UInt64: hi = 2 * two63 - 1; break;
        case Dtype::Bool:
        case Dtype::Float16:
        case Dtype::BFloat16:
        case Dtype::Float32:
        case Dtype::Float64: break;
      }
      v = {lo, lo + 1, -1, 0, 1, 2, 127, 128, 255, 256, 300, -129, 65504, 65520, 70000, 16777217,
           2147483647.0L, 2147483648.0L, 4294967296.0L + 5, 9007199254740993.0L, hi - 1, hi};
      for (double r : random_values(40, -1, 1, 3)) v.push_back(std::trunc(r * (r > 0 ? hi : -lo)));
      std::vector<long double> kept;
      for (long double x : v)
        if (x >= lo && x <= hi) kept.push_back(x);
      return kept;
    }
    case DtypeKind::Float: {
      v = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 0.5, -0.5, 0.99, -0.99, 1.5, -1.5, 2.5, 127.9, 128, -128.5, -129,
           255.5, 256, -1, 32767.5, 65504, 65519, 65520, 1e5, -1e5, 2147483520.0L, 2147483648.0L, -2147483648.0L,
           -2147483904.0L, 4294967296.0L, 1e10, -1e10, two63, -two63, 2 * two63, 1e20, -1e20, 3e38, 1e-8, -1e-8,
           6e-8, 1e-40, 1e-300, std::ldexp(1.0L, -1074)};
      for (double r : random_values(40, -300, 300, 4)) v.push_back(r);
      // Round to the source dtype through the library, then read back the exact value.
      Array a = astype(Array(std::vector<double>(v.begin(), v.end()), {static_cast<int64_t>(v.size())}), d);
      auto exact = as_doubles(a);
      return std::vector<long double>(exact.begin(), exact.end());
    }
  }
  return v;
}

template <class From>
Array source_array(const std::vector<long double>& v) {
  std::vector<From> data;
  for (long double x : v) {
    if constexpr (std::is_same_v<From, bool>) data.push_back(x != 0);
    else if constexpr (std::is_same_v<From, float16_t> || std::is_same_v<From, bfloat16_t>)
      data.push_back(From(static_cast<float>(x)));  // exact: x came from this dtype
    else if constexpr (std::is_floating_point_v<From>) data.push_back(static_cast<From>(x));
    else if constexpr (std::is_signed_v<From>) data.push_back(static_cast<From>(static_cast<int64_t>(x)));
    else data.push_back(static_cast<From>(static_cast<uint64_t>(x)));
  }
  return array_of(data);
}

template <class T>
bool same_element(T got, T want) {
  if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
    float g = got, w = want;
    if (std::isnan(w)) return std::isnan(g);
    return got.bits == want.bits;
  } else if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(want)) return std::isnan(got);
    return std::memcmp(&got, &want, sizeof(T)) == 0;
  } else {
    return got == want;
  }
}

template <class T>
std::string show(T x) {
  if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>)
    return std::to_string(static_cast<float>(x)) + " (bits " + std::to_string(x.bits) + ")";
  else if constexpr (std::is_floating_point_v<T>) return std::to_string(x);
  else return std::to_string(static_cast<long long>(x)) + "/" + std::to_string(static_cast<unsigned long long>(x));
}

#define SMELT_ALL_TYPES \
  bool, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, float16_t, bfloat16_t, float, double

TEST(Astype, EveryPairOfDtypesMatchesTheDocumentedRules) {
  for_types<SMELT_ALL_TYPES>([]<class From>() {
    const Dtype from = dtype_of<From>();
    auto src = source_values(from);
    Array a = source_array<From>(src);
    for_types<SMELT_ALL_TYPES>([&]<class To>() {
      const Dtype to = dtype_of<To>();
      Array out = astype(a, to);
      EXPECT_EQ(out.dtype(), to);
      EXPECT_EQ(out.shape(), a.shape());
      out.eval();
      const To* got = out.data<To>();
      int bad = 0;
      for (size_t i = 0; i < src.size(); ++i) {
        To want = expected<To>(src[i], !is_floating(from));
        if (!same_element(got[i], want) && bad++ < 5)
          ADD_FAILURE() << dtype_name(from) << " -> " << dtype_name(to) << ": "
                        << static_cast<double>(src[i]) << " gave " << show(got[i]) << ", expected " << show(want);
      }
    });
  });
}

TEST(Astype, NamedSpecialCases) {
  Array f = Array(std::vector<double>{NAN, INFINITY, -INFINITY, 3e9, -3e9, -1.9, 1.9, 255.9, 256.0, -1.0}, {10});
  // Signed targets: NaN/inf/out of range give the minimum of int32/int64; narrow types wrap that.
  EXPECT_EQ(values<int32_t>(astype(f, int32)),
            (std::vector<int32_t>{INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, -1, 1, 255, 256, -1}));
  EXPECT_EQ(values<int64_t>(astype(f, int64)),
            (std::vector<int64_t>{INT64_MIN, INT64_MIN, INT64_MIN, 3000000000, -3000000000, -1, 1, 255, 256, -1}));
  EXPECT_EQ(values<int8_t>(astype(f, int8)), (std::vector<int8_t>{0, 0, 0, 0, 0, -1, 1, -1, 0, -1}));
  // Unsigned: negatives wrap through the signed result (-1 -> max); uint64 keeps 2^63..2^64.
  EXPECT_EQ(values<uint8_t>(astype(f, uint8)), (std::vector<uint8_t>{0, 0, 0, 0, 0, 255, 1, 255, 0, 255}));
  EXPECT_EQ(values<uint32_t>(astype(f, uint32)),
            (std::vector<uint32_t>{0, 0, 0, 3000000000u, static_cast<uint32_t>(-3000000000LL), 0xffffffffu, 1, 255,
                                   256, 0xffffffffu}));
  EXPECT_EQ(values<uint64_t>(astype(Array(std::vector<double>{1e19, 2e19, -1, NAN}, {4}), uint64)),
            (std::vector<uint64_t>{10000000000000000000ull, 1ull << 63, ~0ull, 1ull << 63}));
  // To bool: NaN is true, -0 is false.
  EXPECT_EQ(values<bool>(astype(Array(std::vector<double>{NAN, -0.0, 0.0, 1e-300}, {4}), bool_)),
            (std::vector<bool>{true, false, false, true}));
  // Float narrowing rounds to nearest even and overflows to inf; -0 keeps its sign.
  auto h = as_doubles(astype(Array(std::vector<double>{65504, 65519.99, 65520, -1e6, -0.0, 2049, 2051}, {7}), float16));
  EXPECT_EQ(h, (std::vector<double>{65504, 65504, INFINITY, -INFINITY, -0.0, 2048, 2052}));
  EXPECT_TRUE(std::signbit(h[4]));
  // float64 -> float16 rounds once (not through float32): 1 + 2^-11 + 2^-40 is just above the tie.
  double above_tie = 1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(as_doubles(astype(Array(above_tie), float16))[0], 1 + std::ldexp(1.0, -10));
  EXPECT_EQ(as_doubles(astype(Array(above_tie), bfloat16))[0], 1.0);
  // Integer narrowing wraps.
  EXPECT_EQ(values<int8_t>(astype(array_of<int32_t>({128, 255, 256, -129, 70000}), int8)),
            (std::vector<int8_t>{-128, -1, 0, 127, 112}));
  EXPECT_EQ(values<uint16_t>(astype(array_of<int64_t>({-1, 65536, -65537}), uint16)),
            (std::vector<uint16_t>{65535, 0, 65535}));
}

TEST(Astype, SameDtypeNonContiguousEmptyAndZeroD) {
  Array a = random_array({4, 5}, float32, -100, 100, 1);
  EXPECT_EQ(astype(a, float32).id(), a.id());
  auto av = as_doubles(a);
  Array t = astype(transpose(a), int16);
  std::vector<double> expected;
  for (int j = 0; j < 5; ++j)
    for (int i = 0; i < 4; ++i) expected.push_back(std::trunc(av[i * 5 + j]));
  EXPECT_TRUE(all_close(t, expected, 0));
  Array r = astype(slice(a, {3, 4}, {-5, -6}, {-1, -2}), float64);
  expected.clear();
  for (int i = 3; i >= 0; --i)
    for (int j = 4; j >= 0; j -= 2) expected.push_back(av[i * 5 + j]);
  EXPECT_TRUE(all_close(r, expected, 0));
  Array b = astype(broadcast_to(Array(2.5f), {3, 2}), int32);
  EXPECT_EQ(values<int32_t>(b), std::vector<int32_t>(6, 2));
  EXPECT_EQ(astype(zeros({0, 3}), uint8).shape(), (Shape{0, 3}));
  EXPECT_EQ(as_doubles(astype(zeros({0, 3}), uint8)).size(), 0u);
  EXPECT_EQ(astype(Array(-3.7), int8).item<int>(), -3);
}

TEST(Astype, DonatesAnUnreferencedInputOfTheSameItemSize) {
  Array a = random_array({100}, float32, -10, 10, 2);
  auto av = as_doubles(a);
  Array x = negative(a);
  x.eval();
  const void* p = x.data();
  Array y = astype(x, int32);
  x = Array();
  y.eval();
  EXPECT_EQ(y.data(), p);
  std::vector<double> expected;
  for (double v : av) expected.push_back(std::trunc(-v));
  EXPECT_TRUE(all_close(y, expected, 0));
}

TEST(Astype, Errors) {
  EXPECT_THROW_MSG(astype(Array(), float32), InvalidArgument, "astype: an input is an empty handle");
}

}  // namespace
}  // namespace smelt
