// CUDA scaled_dot_product_attention (the flash kernel for head_dim 64/128, the composed path
// otherwise) against the CPU's composed path: dtypes, masks, causal variants, GQA, softcap.
#include <cmath>

#include "smelt/attention.h"
#include "smelt/compile.h"
#include "tests/backend/cuda/cuda_test_utils.h"

namespace smelt {
namespace {

using namespace smelt::test;

/// Bound on |GPU - CPU| for inputs in [-1, 1]: both accumulate in float32 (the flash kernels in
/// tiles of keys with an online softmax, the CPU's fused kernel in blocks of 256 keys), each within
/// 4(D² + 2T + 8)·2⁻²⁴ of the exact value (tests/ops/attention_test.cpp); the inputs are the same
/// bfloat16/float16 values on both sides; the outputs are rounded to the dtype, so the two roundings
/// may differ by one ulp of the output (u = 2⁻⁸ for bfloat16, 2⁻¹¹ for float16, relative to
/// |out| <= 1). The tensor-core kernel (float16, bfloat16) also rounds the softmax weights p_j to
/// the dtype before they multiply v (the denominator sums them unrounded): each weight moves by at
/// most u·p_j, so the output by at most u·Σ p_j|v_j| / Σ p_j <= u.
double bound(Dtype dt, int64_t d, int64_t t) {
  const double acc = 2 * 4 * (static_cast<double>(d * d) + 2.0 * static_cast<double>(t) + 8) * 0x1p-24;
  switch (dt) {
    case Dtype::BFloat16: return acc + 2 * 0x1p-8;
    case Dtype::Float16: return acc + 2 * 0x1p-11;
    default: return acc;
  }
}

double max_abs_diff(const Array& gpu_out, const Array& cpu_out) {
  auto g = as_doubles(on_cpu(gpu_out)), c = as_doubles(cpu_out);
  double m = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (std::isnan(g[i]) != std::isnan(c[i])) return INFINITY;
    if (!std::isnan(c[i])) m = std::max(m, std::abs(g[i] - c[i]));
  }
  return m;
}

struct Case {
  int64_t b, hq, hkv, s, t, d;
};

void check(const Case& n, Dtype dt, const AttentionOptions& o, uint32_t seed) {
  Array q = random_array({n.b, n.hq, n.s, n.d}, dt, -1, 1, seed);
  Array k = random_array({n.b, n.hkv, n.t, n.d}, dt, -1, 1, seed + 1);
  Array v = random_array({n.b, n.hkv, n.t, n.d}, dt, -1, 1, seed + 2);
  Array want = scaled_dot_product_attention(q, k, v, o);
  AttentionOptions og = o;
  if (o.mask.valid()) og.mask = on_gpu(o.mask);
  Array got = scaled_dot_product_attention(on_gpu(q), on_gpu(k), on_gpu(v), og);
  ASSERT_EQ(got.device(), gpu());
  EXPECT_LE(max_abs_diff(got, want), bound(dt, n.d, n.t))
      << dtype_name(dt) << " d=" << n.d << " s=" << n.s << " t=" << n.t;
}

TEST(CudaAttention, FlashKernelMatchesCpu) {
  SMELT_REQUIRE_GPU();
  uint32_t seed = 1;
  for (Dtype dt : {bfloat16, float16, float32})
    for (int64_t d : {64, 128}) {
      check({2, 4, 4, 77, 77, d}, dt, {}, seed += 3);
      check({1, 8, 2, 33, 130, d}, dt, {.causal = CausalMask::LowerRight}, seed += 3);  // GQA
      check({2, 4, 1, 65, 40, d}, dt, {.causal = CausalMask::UpperLeft}, seed += 3);    // MQA, S > T
      check({1, 2, 2, 1, 300, d}, dt, {.scale = 0.2, .softcap = 3.0}, seed += 3);      // decoding: one query
    }
}

// Several query and key tiles of the tensor-core kernel (64 x 64), causal, q, k, v read in place
// as views of one packed [B, S, 3, H, D] projection (rows 3·H·D apart, as a GPT block splits its
// qkv matmul), and views whose rows are not 16-byte aligned (a row stride of D + 1 elements: the
// kernel loads those k and v tiles without cp.async).
TEST(CudaAttention, TensorCoreTilesAndPackedQkvViews) {
  SMELT_REQUIRE_GPU();
  uint32_t seed = 41;
  for (Dtype dt : {bfloat16, float16})
    for (int64_t d : {64, 128}) {
      check({1, 3, 3, 200, 300, d}, dt, {}, seed += 3);
      check({2, 2, 2, 130, 130, d}, dt, {.causal = CausalMask::UpperLeft}, seed += 3);
      const int64_t b = 2, s = 70, h = 3;
      Array qkv = random_array({b, s, 3, h, d}, dt, -1, 1, seed += 3);
      auto part = [&](const Array& x, int64_t i) {  // [B, H, S, D] view of q, k or v
        return transpose(squeeze(slice(x, {0, 0, i, 0, 0}, {b, s, i + 1, h, d}), {2}), {0, 2, 1, 3});
      };
      Array want = scaled_dot_product_attention(part(qkv, 0), part(qkv, 1), part(qkv, 2), {.causal = CausalMask::UpperLeft});
      Array g = on_gpu(qkv);
      Array got = scaled_dot_product_attention(part(g, 0), part(g, 1), part(g, 2), {.causal = CausalMask::UpperLeft});
      ASSERT_EQ(got.device(), gpu());
      EXPECT_LE(max_abs_diff(got, want), bound(dt, d, s)) << dtype_name(dt) << " d=" << d << " packed qkv";
      const int64_t t = 90;
      Array wide = random_array({1, 2, t, d + 1}, dt, -1, 1, seed += 3);
      auto inner = [&](const Array& x) { return slice(x, {0, 0, 0, 1}, {1, 2, t, d + 1}); };
      const AttentionOptions causal{.causal = CausalMask::UpperLeft};
      Array want_odd = scaled_dot_product_attention(inner(wide), inner(wide), inner(wide), causal);
      Array gw = on_gpu(wide);
      Array got_odd = scaled_dot_product_attention(inner(gw), inner(gw), inner(gw), causal);
      ASSERT_EQ(got_odd.device(), gpu());
      EXPECT_LE(max_abs_diff(got_odd, want_odd), bound(dt, d, t)) << dtype_name(dt) << " d=" << d << " unaligned rows";
    }
}

TEST(CudaAttention, MasksOnTheGpu) {
  SMELT_REQUIRE_GPU();
  const Case n{2, 4, 2, 50, 70, 64};
  check(n, bfloat16, {.mask = random_array({50, 70}, float32, -3, 0, 7)}, 11);
  check(n, float16, {.mask = random_array({2, 1, 1, 70}, float16, -3, 0, 8), .causal = CausalMask::UpperLeft}, 12);
  Array keep = greater(random_array({2, 4, 50, 70}, float32, -1, 1, 9), Array(-0.3f));
  check(n, float32, {.mask = keep}, 13);
  // Rows with every key masked give zeros on both devices.
  Array none = less(random_array({50, 70}, float32, 0, 1, 10), Array(-1.0f));
  check(n, bfloat16, {.mask = none}, 14);
  check({1, 2, 2, 9, 4, 128}, float32, {.causal = CausalMask::LowerRight}, 15);
}

TEST(CudaAttention, OtherCasesTakeTheComposedPath) {
  SMELT_REQUIRE_GPU();
  check({1, 2, 1, 10, 12, 32}, float32, {.causal = CausalMask::UpperLeft}, 21);  // head_dim 32
  check({1, 2, 2, 10, 12, 64}, float64, {}, 22);                                // float64
  // Non-unit stride along head_dim (a transposed view).
  Array q = random_array({1, 2, 64, 16}, bfloat16, -1, 1, 23);
  Array qt = swapaxes(q, 2, 3);  // [1, 2, 16, 64], head_dim stride 16
  Array k = random_array({1, 2, 20, 64}, bfloat16, -1, 1, 24);
  Array want = scaled_dot_product_attention(qt, k, k);
  Array got = scaled_dot_product_attention(swapaxes(on_gpu(q), 2, 3), on_gpu(k), on_gpu(k));
  EXPECT_LE(max_abs_diff(got, want), bound(bfloat16, 64, 20));
}

TEST(CudaAttention, CompiledEqualsEagerBitForBit) {
  SMELT_REQUIRE_GPU();
  Array q = on_gpu(random_array({2, 4, 40, 128}, bfloat16, -1, 1, 31));
  Array k = on_gpu(random_array({2, 2, 50, 128}, bfloat16, -1, 1, 32));
  auto f = [](const Array& q, const Array& k) {
    return scaled_dot_product_attention(q, k, k, {.causal = CausalMask::LowerRight});
  };
  EXPECT_TRUE(bit_equal(compile(f)(q, k), f(q, k)));
}

TEST(CudaAttention, CausalFlagAndAnEqualBoolMaskGiveTheSameBits) {
  // compile turns a constant boolean mask equal to the causal mask into the causal flag
  // (tests/ops/attention_test.cpp): on the GPU too the two are bit for bit the same (masked keys
  // add exactly nothing; tiles past the diagonal are skipped), in every flash kernel, over several
  // key and query tiles and ragged edges.
  SMELT_REQUIRE_GPU();
  for (Dtype dt : {bfloat16, float16, float32})
    for (auto [s, t] : {std::pair<int64_t, int64_t>{150, 150}, {70, 200}, {1, 77}}) {
      Array q = on_gpu(random_array({2, 4, s, 64}, dt, -1, 1, 41)), k = on_gpu(random_array({2, 2, t, 64}, dt, -1, 1, 42));
      Array v = on_gpu(random_array({2, 2, t, 64}, dt, -1, 1, 43));
      std::vector<uint8_t> bits(static_cast<size_t>(s * t));
      for (int64_t i = 0; i < s; ++i)
        for (int64_t j = 0; j < t; ++j) bits[static_cast<size_t>(i * t + j)] = j <= i + t - s;
      Array mask = on_gpu(astype(Array(bits, {1, 1, s, t}), bool_));
      Array flag = scaled_dot_product_attention(q, k, v, {.causal = CausalMask::LowerRight});
      Array masked = scaled_dot_product_attention(q, k, v, {.mask = mask});
      EXPECT_TRUE(bit_equal(flag, masked)) << dtype_name(dt) << " " << s << "x" << t;
      auto f = [mask](const Array& q, const Array& k, const Array& v) {
        return scaled_dot_product_attention(q, k, v, {.mask = mask});
      };
      EXPECT_TRUE(bit_equal(compile(f)(q, k, v), masked)) << dtype_name(dt) << " " << s << "x" << t;
    }
}

}  // namespace
}  // namespace smelt
