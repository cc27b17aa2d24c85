// Fused CUDA kernels (compile on GPU inputs): compiled results equal the unfused GPU kernels bit
// for bit, on random inputs with NaN and ±inf, broadcast and non-contiguous inputs, several dtypes.
#include <bit>

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

// Outputs that cast float32 to bfloat16 or float16 convert two elements at a time (f2bf2/f2h2),
// with NaN pairs through the one-at-a-time path: the exact bits of the unfused cast kernel,
// NaN payloads and signs included (compared as bytes: same_as_cpu lets any NaN match any NaN).
// The values pass a select, which moves bits, so the payloads reach the cast; ties to even,
// subnormals, overflow and the float16 limits are among them, in both halves of a pair.
TEST(CudaFused, PairedHalfCastsKeepEveryBit) {
  SMELT_REQUIRE_GPU();
  const std::vector<uint32_t> special = {0x7fc00001u, 0xffc12345u, 0x7f800001u, 0xff812345u, 0x7f800000u, 0xff800000u,
                                         0x3f808000u, 0x3f818000u, 0x3f808001u, 0x00000001u, 0x80012345u, 0x477ff000u,
                                         0x477fefffu, 0x387fc000u, 0x33000000u, 0x33000001u, 0x7f7fffffu, 0x80000000u};
  const int64_t n = 4099;
  auto noise = random_values(static_cast<size_t>(n), -70000.0, 70000.0, 241);
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = i % 3 == 0 ? std::bit_cast<float>(special[(i / 3) % special.size()]) : static_cast<float>(noise[i]);
  v[1] = std::bit_cast<float>(0x7fc0beefu);  // a NaN in the high half of the first pair only
  auto fn = [](const Array& x, const Array& y) {
    Array s = where(greater(y, 0.0f), x, y);
    return std::make_tuple(astype(s, bfloat16), astype(s, float16));
  };
  auto f = compile(fn, strict(), "cuda_paired_casts");
  Array x = on_gpu(Array(v, {n})), y = on_gpu(ones({n}, float32));
  for (int64_t offset : {0, 1}) {  // vectors, then the element-by-element layout of a misaligned view
    SCOPED_TRACE(offset);
    Array xs = slice(x, {offset}, {n}), ys = slice(y, {offset}, {n});
    auto [b, h] = f(xs, ys);
    auto [eb, eh] = fn(xs, ys);
    EXPECT_EQ(raw_bytes(on_cpu(b)), raw_bytes(on_cpu(eb)));
    EXPECT_EQ(raw_bytes(on_cpu(h)), raw_bytes(on_cpu(eh)));
  }
  // A row kernel's epilogue (RMSNorm of bfloat16 rows, the last with NaN and infinities), as bytes.
  auto rms = [](const Array& a, const Array& w) { return rms_norm(a, w, 1e-6); };
  auto frms = compile(rms, strict(), "cuda_paired_rms");
  Array a = on_gpu(concatenate({random_array({63, 4096}, bfloat16, -3, 3, 242), special_array({1, 4096}, bfloat16, -3, 3, 244)}));
  Array w = on_gpu(random_array({4096}, bfloat16, 0.5, 2, 243));
  EXPECT_EQ(raw_bytes(on_cpu(frms(a, w))), raw_bytes(on_cpu(rms(a, w))));
}

// Programs on 16-bit floats compute each thread's elements with the hardware conversions alone
// (NaN bits not the CPU's) and again exactly when an output is NaN: the outputs equal the unfused
// kernels' as bytes, NaN signs and payloads included, whether a NaN comes in (payloads of both
// signs, sparse, so most threads stay on the fast pass) or is made inside (inf - inf), and also
// where a NaN meets only NaN-blind operations (a comparison, a select). Vectors, the elements of
// a misaligned view, and a transposed input (the strided layout).
TEST(CudaFused, NanOptimisticPassKeepsEveryNanBit) {
  SMELT_REQUIRE_GPU();
  const std::vector<uint32_t> specials = {0x7fc00001u, 0xffc12345u, 0x7fd0beefu, 0xffe00000u, 0x7f800000u, 0xff800000u};
  const int64_t rows = 67, cols = 129;
  const int64_t n = rows * cols;
  auto noise = random_values(static_cast<size_t>(n), -4.0, 4.0, 251);
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = i % 97 == 5 ? std::bit_cast<float>(specials[(i / 97) % specials.size()]) : static_cast<float>(noise[i]);
  auto fn = [](const Array& x, const Array& y) {
    Array g = gelu(add(x, y), false);
    Array d = subtract(multiply(x, y), multiply(y, x));  // inf * y - y * inf: NaN made inside
    Array s = where(greater(x, y), y, g);                  // x's NaN only reaches a comparison
    return std::make_tuple(g, add(d, s), astype(g, float32), less(g, y));
  };
  auto f = compile(fn, strict(), "cuda_nan_optimistic");
  for (Dtype dt : {float16, bfloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    Array x = on_gpu(astype(Array(v, {rows, cols}), dt));
    Array y = on_gpu(random_array({rows, cols}, dt, -2, 2, 252));
    const std::vector<std::pair<Array, Array>> cases = {
        {x, y},
        {slice(x, {0, 1}, {rows, cols}), slice(y, {0, 1}, {rows, cols})},
        {transpose(x, {1, 0}), transpose(y, {1, 0})}};
    for (size_t c = 0; c < cases.size(); ++c) {
      SCOPED_TRACE(c);
      auto got = f(cases[c].first, cases[c].second);
      auto want = fn(cases[c].first, cases[c].second);
      EXPECT_EQ(raw_bytes(on_cpu(std::get<0>(got))), raw_bytes(on_cpu(std::get<0>(want))));
      EXPECT_EQ(raw_bytes(on_cpu(std::get<1>(got))), raw_bytes(on_cpu(std::get<1>(want))));
      EXPECT_EQ(raw_bytes(on_cpu(std::get<2>(got))), raw_bytes(on_cpu(std::get<2>(want))));
      EXPECT_EQ(raw_bytes(on_cpu(std::get<3>(got))), raw_bytes(on_cpu(std::get<3>(want))));
    }
  }
}

// A bias over rows ('r': element i % n) and a per-row value over columns ('q': element i / n) are
// read in the flat layout, as 16-byte vectors when the row length is a multiple of the vector
// width (else element by element): GELU(x + bias) and (x - column) * scale, bit-equal to the
// unfused GPU kernels, for row lengths with and without a whole number of vectors and for a
// misaligned view.
TEST(CudaFused, RowAndColumnBroadcastsReadTheFlatLayout) {
  SMELT_REQUIRE_GPU();
  std::vector<std::string> layouts;
  telemetry::Subscription sub("compile.kernel.build", [&](const telemetry::Event& e) {
    if (e.field("program").rfind("fused|", 0) == 0) layouts.push_back(e.field("program"));
  });
  auto bias_gelu = [](const Array& x, const Array& b) { return gelu(add(x, b), true); };
  auto centre = [](const Array& x, const Array& c, const Array& w) { return multiply(subtract(x, c), w); };
  auto f = compile(bias_gelu, strict(), "cuda_bias_gelu");
  auto g = compile(centre, strict(), "cuda_centre");
  for (Dtype dt : {float32, bfloat16, float16}) {
    SCOPED_TRACE(dtype_name(dt));
    for (int64_t n : {17, 64, 3072}) {
      SCOPED_TRACE(n);
      Array x = on_gpu(special_array({9, n + 1}, dt, -4, 4, 231));
      Array b = on_gpu(special_array({n + 1}, dt, -1, 1, 232));
      Array c = on_gpu(special_array({9, 1}, dt, -1, 1, 233));
      Array w = on_gpu(special_array({n}, dt, 0.5, 2, 234));
      Array xs = slice(x, {0, 0}, {9, n});  // rows n + 1 apart: the strided layout
      Array xc = copy(xs);                  // contiguous
      for (int64_t offset : {0, 1}) {       // a bias at an odd offset cannot move as vectors
        Array bs = slice(b, {offset}, {offset + n});
        for (const Array& in : {xc, xs}) {
          EXPECT_TRUE(same_as_cpu(f(in, bs), on_cpu(bias_gelu(in, bs))));
          EXPECT_TRUE(same_as_cpu(g(in, c, w), on_cpu(centre(in, c, w))));
        }
      }
    }
  }
  // The contiguous inputs took the flat layouts ('r' for the bias and the weight, 'q' for the
  // column), as vectors for the whole rows and element by element for n = 17 and the misaligned
  // bias. Kernel names are "fused|<hash>|<layout>[|v]"; the order of the letters is the fused
  // program's input order.
  auto built = [&](char letter, int vectorized) {  // vectorized: 1 yes, 0 no, -1 either
    for (const auto& name : layouts) {
      const size_t a = name.find('|', 6);
      if (a == std::string::npos) continue;
      const size_t b = name.find('|', a + 1);
      const std::string layout = name.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
      const bool v = b != std::string::npos && name.compare(b, std::string::npos, "|v") == 0;
      if (layout == "strided" || layout.find(letter) == std::string::npos) continue;
      if (vectorized < 0 || v == (vectorized == 1)) return true;
    }
    return false;
  };
  EXPECT_TRUE(built('r', 1)) << "no vectorized kernel reading a row broadcast";
  EXPECT_TRUE(built('r', 0)) << "no element-wise kernel reading a row broadcast";
  EXPECT_TRUE(built('q', -1)) << "no kernel reading a column broadcast";
}

// A per-channel scale and shift over [N, C, H, W] (a batch norm folded to an affine, then ReLU,
// as ResNet's) reads its channel values in the flat 'm' layout: as vectors when H * W holds whole
// vectors, element by element when not, bit-equal to the CPU.
TEST(CudaFused, PerChannelOperandsReadTheMiddleLayout) {
  SMELT_REQUIRE_GPU();
  std::vector<std::string> layouts;
  telemetry::Subscription sub("compile.kernel.build", [&](const telemetry::Event& e) {
    if (e.field("program").rfind("fused|", 0) == 0) layouts.push_back(e.field("program"));
  });
  auto affine_relu = [](const Array& x, const Array& s, const Array& b) { return relu(add(multiply(x, s), b)); };
  auto f = compile(affine_relu, strict(), "cuda_channel_affine");
  for (Dtype dt : {float32, float16, bfloat16}) {
    for (int64_t hw : {7, 16}) {  // 49 and 256 elements a channel
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::to_string(hw));
      Array x = on_gpu(special_array({3, 5, hw, hw}, dt, -4, 4, 241));
      Array s = on_gpu(special_array({5, 1, 1}, dt, -2, 2, 242)), b = on_gpu(special_array({5, 1, 1}, dt, -1, 1, 243));
      EXPECT_TRUE(same_as_cpu(f(x, s, b), on_cpu(affine_relu(x, s, b))));
    }
  }
  bool middle = false, middle_vectors = false;
  for (const auto& name : layouts) {
    const size_t a = name.find('|', 6);
    if (a == std::string::npos || name.find('m', a) == std::string::npos || name.find("strided", a) != std::string::npos)
      continue;
    middle = true;
    middle_vectors = middle_vectors || name.compare(name.size() - 2, 2, "|v") == 0;
  }
  EXPECT_TRUE(middle) << "no kernel read the per-channel operands in the 'm' layout";
  EXPECT_TRUE(middle_vectors) << "no vectorized 'm' kernel";
}

}  // namespace
}  // namespace smelt
