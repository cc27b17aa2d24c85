// Fused CUDA kernels (compile on GPU inputs): compiled results equal the unfused GPU kernels bit
// for bit, on random inputs with NaN and ±inf, broadcast and non-contiguous inputs, several dtypes.
#include "smelt/compile.h"
#include "smelt/telemetry.h"
#include "tests/backend/cuda/cuda_test_utils.h"

namespace smelt {
namespace {

using namespace smelt::test;

// W3's chain with its scalars as a 0-d argument (captured C++ scalars work too: the vectorized
// test below uses them).
Array chain16(const Array& x, const Array& y, const Array& c) {
  Array t = add(multiply(x, c), y);
  t = exp(negative(multiply(t, t)));
  t = subtract(multiply(t, y), c);
  t = add(sin(t), cos(x));
  t = add(abs(t), c);
  t = multiply(log(t), c);
  t = sqrt(add(t, c));
  t = maximum(t, y);
  return divide(t, add(multiply(x, x), c));
}

CompileOptions strict() {
  CompileOptions o;
  o.fallback = CompileFallback::Raise;
  return o;
}

TEST(CudaFused, CompiledEqualsEagerBitForBit) {
  SMELT_REQUIRE_GPU();
  int fused_builds = 0;
  telemetry::Subscription sub("compile.kernel.build", [&](const telemetry::Event& e) {
    if (e.field("program").rfind("fused|", 0) == 0) ++fused_builds;
  });
  auto f = compile([](const Array& x, const Array& y, const Array& c) { return chain16(x, y, c); }, strict(),
                   "cuda_chain16");
  for (Dtype dt : {float32, float16, bfloat16, float64}) {
    SCOPED_TRACE(dtype_name(dt));
    Array x = on_gpu(special_array({3000}, dt, -3, 3, 201)), y = on_gpu(special_array({3000}, dt, 0.5, 2, 202));
    Array c = on_gpu(astype(Array(1.5), dt));
    Array expected = chain16(x, y, c);
    Array got = f(x, y, c);
    EXPECT_EQ(got.device(), gpu());
    EXPECT_TRUE(same_as_cpu(got, on_cpu(expected)));  // the eager GPU result as the reference, 0 ulps
  }
  EXPECT_GE(fused_builds, 1);
}

TEST(CudaFused, BroadcastStridedAndIntegerPrograms) {
  SMELT_REQUIRE_GPU();
  auto f = compile([](const Array& a, const Array& b) { return where(greater(a, b), multiply(a, b), subtract(b, a)); },
                   strict(), "cuda_where");
  for (Dtype dt : {int32, uint8, int64, float32}) {
    SCOPED_TRACE(dtype_name(dt));
    Array a = on_gpu(special_array({33, 17}, dt, -50, 50, 211));
    Array b = on_gpu(special_array({17}, dt, -50, 50, 212));
    EXPECT_TRUE(same_as_cpu(f(a, b), on_cpu(where(greater(a, b), multiply(a, b), subtract(b, a)))));
    Array at = transpose(on_gpu(special_array({17, 33}, dt, -50, 50, 213)));  // non-contiguous
    EXPECT_TRUE(same_as_cpu(f(at, b), on_cpu(where(greater(at, b), multiply(at, b), subtract(b, at)))));
  }
  // Empty arrays run no kernel and keep their shape.
  Array e = on_gpu(zeros({0, 4}, float32));
  EXPECT_EQ(f(e, e).shape(), (Shape{0, 4}));
}

// The vectorized layout (16-byte vectors of every operand, elements packed in 32-bit words):
// every dtype as input and output, several outputs of different widths, lengths with and
// without a tail, and a view whose offset breaks the alignment (the unvectorized flat layout).
TEST(CudaFused, VectorizedLayoutEveryDtypeTailsAndMisalignedViews) {
  SMELT_REQUIRE_GPU();
  auto fn = [](const Array& a, const Array& b) {
    return std::make_tuple(where(greater(a, b), a, b), greater(a, b), multiply(astype(a, float32), 2.0f));
  };
  auto f = compile(fn, strict(), "cuda_vectorized");
  for (Dtype dt : all_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    for (int64_t n : {1, 7, 16, 33, 4099}) {
      SCOPED_TRACE(n);
      Array a = on_gpu(special_array({n + 1}, dt, -50, 50, 221)), b = on_gpu(special_array({n + 1}, dt, -50, 50, 222));
      for (int64_t offset : {0, 1}) {
        Array as = slice(a, {offset}, {offset + n}), bs = slice(b, {offset}, {offset + n});
        auto [m, g, d] = f(as, bs);
        auto [em, eg, ed] = fn(as, bs);
        EXPECT_TRUE(same_as_cpu(m, on_cpu(em)));
        EXPECT_TRUE(same_as_cpu(g, on_cpu(eg)));
        EXPECT_TRUE(same_as_cpu(d, on_cpu(ed)));
      }
    }
  }
}

}  // namespace
}  // namespace smelt
