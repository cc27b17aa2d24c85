// CUDA element-wise kernels against the CPU: every unary and binary operator of tests/op_cases.h on
// every dtype it accepts (within the case's device bound), select, casts between all dtype pairs, full, arange and copies, on random inputs with
// NaN, ±inf and ±0, contiguous, strided, broadcast and empty layouts.
#include <functional>

#include "smelt/telemetry.h"
#include "tests/backend/cuda/cuda_test_utils.h"

namespace smelt {
namespace {

using namespace smelt::test;

/// Runs `f` on the CPU; true when the op accepts these inputs (else it must fail on the GPU too).
bool cpu_accepts(const std::function<Array()>& f, Array* out) {
  try {
    *out = f();
    out->eval();
    return true;
  } catch (const Error&) {
    return false;
  }
}

TEST(CudaElementwise, UnaryEveryOpEveryDtype) {
  SMELT_REQUIRE_GPU();
  int checked = 0;
  for (Dtype dt : all_dtypes()) {
    Array x = special_array({1000}, dt, -3.0, 3.0, 11);
    if (dt == float16 || dt == bfloat16 || dt == float32 || dt == float64)
      x = concatenate({x, special_array({200}, dt, -0.999, 0.999, 12)}, 0);  // erfinv's, arctanh's domain
    Array g = on_gpu(x);
    for (const OpCase* c : op_cases_of_arity(1)) {
      SCOPED_TRACE(std::string(c->name) + " " + dtype_name(dt));
      Array expected;
      if (!cpu_accepts([&] { return c->unary(x); }, &expected)) {
        EXPECT_THROW(c->unary(g).eval(), Error);
        continue;
      }
      EXPECT_TRUE(same_as_cpu(c->unary(g), expected, c->device_ulps));
      ++checked;
    }
  }
  EXPECT_GT(checked, 200);
}

TEST(CudaElementwise, UnaryNonContiguousAndEmpty) {
  SMELT_REQUIRE_GPU();
  Array x = special_array({40, 30}, float32);
  Array g = on_gpu(x);
  EXPECT_TRUE(same_as_cpu(exp(transpose(g)), exp(transpose(x)), kMathUlps));
  EXPECT_TRUE(same_as_cpu(negative(slice(g, {39, 29}, {-41, -31}, {-3, -2})),
                          negative(slice(x, {39, 29}, {-41, -31}, {-3, -2}))));
  EXPECT_TRUE(same_as_cpu(abs(broadcast_to(slice(g, {0, 0}, {1, 30}), {5, 30})),
                          abs(broadcast_to(slice(x, {0, 0}, {1, 30}), {5, 30}))));
  Array e = on_gpu(zeros({0, 3}, float32));
  EXPECT_EQ(sqrt(e).shape(), (Shape{0, 3}));
  EXPECT_TRUE(same_as_cpu(sqrt(e), sqrt(zeros({0, 3}, float32))));
  EXPECT_TRUE(same_as_cpu(sqrt(on_gpu(Array(2.0f))), sqrt(Array(2.0f))));
}

TEST(CudaElementwise, BinaryEveryOpEveryDtype) {
  SMELT_REQUIRE_GPU();
  int checked = 0;
  for (Dtype dt : all_dtypes()) {
    // Integers include zero divisors, negative and over-wide shift counts, and wraparound.
    const double lo = is_floating(dt) ? -5.0 : (is_unsigned_integral(dt) ? 0.0 : -70.0);
    const double hi = is_floating(dt) ? 5.0 : 70.0;
    Array x = special_array({777}, dt, lo, hi, 21), y = special_array({777}, dt, lo, hi, 22);
    Array gx = on_gpu(x), gy = on_gpu(y);
    for (const OpCase* c : op_cases_of_arity(2)) {
      SCOPED_TRACE(std::string(c->name) + " " + dtype_name(dt));
      Array expected;
      if (!cpu_accepts([&] { return c->binary(x, y); }, &expected)) {
        EXPECT_THROW(c->binary(gx, gy).eval(), Error);
        continue;
      }
      EXPECT_TRUE(same_as_cpu(c->binary(gx, gy), expected, c->device_ulps));
      ++checked;
    }
  }
  EXPECT_GT(checked, 200);
}

TEST(CudaElementwise, BinaryBroadcastStridedAndScalars) {
  SMELT_REQUIRE_GPU();
  for (Dtype dt : {int32, float16, float32, float64}) {
    SCOPED_TRACE(dtype_name(dt));
    Array a = special_array({17, 1, 9}, dt, -4, 4, 31), b = special_array({5, 9}, dt, -4, 4, 32);
    Array ga = on_gpu(a), gb = on_gpu(b);
    EXPECT_TRUE(same_as_cpu(add(ga, gb), add(a, b)));
    EXPECT_TRUE(same_as_cpu(multiply(transpose(gb), reshape(slice(gb, {0, 8}, {1, -10}, {1, -1}), {9, 1})),
                            multiply(transpose(b), reshape(slice(b, {0, 8}, {1, -10}, {1, -1}), {9, 1}))));
    EXPECT_TRUE(same_as_cpu(subtract(ga, 2), subtract(a, 2)));
    EXPECT_TRUE(same_as_cpu(maximum(3.5, gb), maximum(3.5, b)));
  }
  Array big = random_array({1 << 20}, float32, -1, 1, 33);  // several blocks, a partial last one
  Array gbig = on_gpu(big);
  EXPECT_TRUE(same_as_cpu(add(multiply(gbig, gbig), 1.0f), add(multiply(big, big), 1.0f)));
  EXPECT_TRUE(same_as_cpu(add(on_gpu(zeros({4, 0}, int8)), on_gpu(zeros({1, 0}, int8))),
                          add(zeros({4, 0}, int8), zeros({1, 0}, int8))));
}

// Eager element-wise ops run through the fused kernels' flat layouts: a row broadcast over rows
// (a bias), a column broadcast over columns, 16-byte vectors when the rows are whole vectors and
// element by element when not (odd lengths, misaligned views): bit for bit against the CPU.
TEST(CudaElementwise, BroadcastRowsAndColumnsTakeTheFlatLayouts) {
  SMELT_REQUIRE_GPU();
  std::vector<std::string> built;
  telemetry::Subscription sub("compile.kernel.build", [&](const telemetry::Event& e) { built.push_back(e.field("program")); });
  for (Dtype dt : {float32, bfloat16, int32, uint8}) {
    for (int64_t n : {64, 67}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n));
      Array x = special_array({33, n}, dt, -9, 9, 61), row = special_array({n + 1}, dt, -9, 9, 62);
      Array col = special_array({33, 1}, dt, -9, 9, 63);
      Array gx = on_gpu(x), grow = on_gpu(row), gcol = on_gpu(col);
      for (int64_t offset : {0, 1}) {
        Array r = slice(row, {offset}, {offset + n}), gr = slice(grow, {offset}, {offset + n});
        EXPECT_TRUE(same_as_cpu(add(gx, gr), add(x, r)));
        EXPECT_TRUE(same_as_cpu(multiply(gcol, gx), multiply(col, x)));
        EXPECT_TRUE(same_as_cpu(maximum(gx, gcol), maximum(x, col)));
        EXPECT_TRUE(same_as_cpu(where(greater(gx, gr), gr, gcol), where(greater(x, r), r, col)));
      }
    }
  }
  auto has = [&](const std::string& suffix) {
    for (const auto& name : built)
      if (name.rfind("fused|", 0) == 0 && name.size() >= suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        return true;
    return false;
  };
  EXPECT_TRUE(has("|cr|v")) << "no vectorized row-broadcast kernel";
  EXPECT_TRUE(has("|qc|v")) << "no vectorized column-broadcast kernel";
  EXPECT_TRUE(has("|cr")) << "no element-wise row-broadcast kernel";
}

TEST(CudaElementwise, IntegerWraparoundAndDivisionByZero) {
  SMELT_REQUIRE_GPU();
  Array a = Array({int8_t{127}, int8_t{-128}, int8_t{-128}, int8_t{7}, int8_t{-7}});
  Array b = Array({int8_t{1}, int8_t{-1}, int8_t{0}, int8_t{0}, int8_t{2}});
  for (const OpCase* c : op_cases_of_arity(2)) {
    SCOPED_TRACE(c->name);
    Array expected;
    if (!cpu_accepts([&] { return c->binary(a, b); }, &expected)) continue;
    EXPECT_TRUE(same_as_cpu(c->binary(on_gpu(a), on_gpu(b)), expected));
  }
}

TEST(CudaElementwise, Select) {
  SMELT_REQUIRE_GPU();
  for (Dtype dt : all_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    Array c = greater(random_array({6, 7}, float32, -1, 1, 41), 0.0f);
    Array x = special_array({6, 7}, dt, -9, 9, 42), y = special_array({1, 7}, dt, -9, 9, 43);
    EXPECT_TRUE(same_as_cpu(where(on_gpu(c), on_gpu(x), on_gpu(y)), where(c, x, y)));
    EXPECT_TRUE(same_as_cpu(where(on_gpu(transpose(reshape(c, {7, 6}))), on_gpu(x), y),
                            where(transpose(reshape(c, {7, 6})), x, y)));
  }
}

TEST(CudaElementwise, CastEveryPair) {
  SMELT_REQUIRE_GPU();
  for (Dtype from : all_dtypes()) {
    // Values past every integer range and NaN/inf: astype's wrap and x86 rules must match.
    Array x = concatenate({special_array({300}, from, -3.0e5, 3.0e5, 51), special_array({300}, from, -300, 300, 52)}, 0);
    Array g = on_gpu(x);
    for (Dtype to : all_dtypes()) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to));
      EXPECT_TRUE(same_as_cpu(astype(g, to), astype(x, to)));
    }
    EXPECT_TRUE(same_as_cpu(astype(transpose(on_gpu(reshape(x, {20, 30}))), float16),
                            astype(transpose(reshape(x, {20, 30})), float16)));
  }
}

TEST(CudaElementwise, FullArangeCopy) {
  SMELT_REQUIRE_GPU();
  set_default_device(gpu());
  for (Dtype dt : all_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    Array f = full({3, 5}, Array(-2.5), dt);
    EXPECT_EQ(f.device(), gpu());
    set_default_device(Device::cpu());
    Array fc = full({3, 5}, Array(-2.5), dt);
    set_default_device(gpu());
    EXPECT_TRUE(same_as_cpu(f, fc));
    if (dt != bool_) {
      Array r = arange(-3.0, 40.0, 1.0, dt);
      Array r2 = arange(0.5, 9.0, 0.75, dt);
      set_default_device(Device::cpu());
      Array rc = arange(-3.0, 40.0, 1.0, dt), rc2 = arange(0.5, 9.0, 0.75, dt);
      set_default_device(gpu());
      EXPECT_TRUE(same_as_cpu(r, rc));
      EXPECT_TRUE(same_as_cpu(r2, rc2));
    }
    Array x = special_array({4, 6, 5}, dt);
    Array g = on_gpu(x);
    EXPECT_TRUE(same_as_cpu(copy(transpose(g, {2, 0, 1})), copy(transpose(x, {2, 0, 1}))));
    EXPECT_TRUE(same_as_cpu(copy(slice(g, {3, 5, 4}, {-5, -7, -6}, {-1, -2, -3})),
                            copy(slice(x, {3, 5, 4}, {-5, -7, -6}, {-1, -2, -3}))));
    EXPECT_TRUE(same_as_cpu(copy(broadcast_to(slice(g, {0, 0, 0}, {4, 1, 5}), {4, 6, 5})),
                            copy(broadcast_to(slice(x, {0, 0, 0}, {4, 1, 5}), {4, 6, 5}))));
    EXPECT_TRUE(same_as_cpu(reshape(transpose(g), {5, 24}), reshape(transpose(x), {5, 24})));
  }
  set_default_device(Device::cpu());
}

}  // namespace
}  // namespace smelt
