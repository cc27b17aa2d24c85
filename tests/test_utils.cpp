// Shared test helpers.
#include "test_utils.h"

#include <cstring>
#include <sstream>

namespace smelt::test {

std::vector<double> random_values(size_t n, double lo, double hi, uint32_t seed) {
  std::mt19937_64 rng(seed * 7919u + 17u);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

Array random_array(const Shape& shape, Dtype dtype, double lo, double hi, uint32_t seed) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  auto v = random_values(static_cast<size_t>(n), lo, hi, seed);
  if (!is_floating(dtype))
    for (auto& x : v) x = std::floor(x);
  Array a(v, shape);
  return astype(a, dtype);
}

std::vector<double> as_doubles(Array a) { return to_device(a, Device::cpu()).to_vector<double>(); }

std::vector<uint8_t> raw_bytes(Array a) {
  // Row-major host bytes whatever the device: GPU results compare with CPU ones bit for bit.
  Array c = copy(to_device(a, Device::cpu()));
  c.eval();
  std::vector<uint8_t> out(c.nbytes());
  if (!out.empty()) std::memcpy(out.data(), c.data(), out.size());
  return out;
}

::testing::AssertionResult all_close(Array actual, const std::vector<double>& expected, double rtol, double atol) {
  auto got = as_doubles(actual);
  if (got.size() != expected.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != expected " << expected.size();
  int bad = 0;
  std::ostringstream os;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], e = expected[i];
    bool ok;
    if (std::isnan(e)) ok = std::isnan(g);
    else if (std::isinf(e)) ok = g == e;
    else ok = std::fabs(g - e) <= atol + rtol * std::fabs(e);
    if (!ok && bad++ < 8) os << "\n  [" << i << "] got " << g << " expected " << e;
  }
  if (bad) return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements differ:" << os.str();
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult bit_equal(Array actual, Array expected) {
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << "shape " << shape_to_string(actual.shape()) << " != "
                                         << shape_to_string(expected.shape());
  if (actual.dtype() != expected.dtype())
    return ::testing::AssertionFailure() << "dtype " << dtype_name(actual.dtype()) << " != "
                                         << dtype_name(expected.dtype());
  auto a = raw_bytes(actual), b = raw_bytes(expected);
  if (a != b) {
    size_t isz = size_of(actual.dtype());
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i])
        return ::testing::AssertionFailure() << "element " << i / isz << " differs in its bits";
  }
  return ::testing::AssertionSuccess();
}

double tolerance_for(Dtype dtype) {
  switch (dtype) {
    case Dtype::Float16: return 2e-3;
    case Dtype::BFloat16: return 1.6e-2;
    case Dtype::Float32: return 2e-6;
    case Dtype::Float64: return 1e-13;
    default: return 0.0;
  }
}

}  // namespace smelt::test
