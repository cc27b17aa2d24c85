// oneDNN matrix products (src/backend/cpu/dnnl.h, DnnlProduct) and the Matmul kernel's use of them:
// which shapes take them, the float32 rounding bound, the same bits at any thread count and for
// any storage of B (row-major, transposed, strided, packed at another thread count), the bias
// post-op against the separate add, batches shared out over threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "smelt/memory.h"
#include "src/backend/cpu/dnnl.h"
#include "src/backend/cpu/kernels.h"
#include "compile/compile_helpers.h"
#include "test_utils.h"

namespace smelt {
namespace {

using cpu::DnnlProduct;

/// Skips a test where this CPU has no brgemm matmul (below AVX-512 the sgemm tiles run).
#define SKIP_WITHOUT_PRODUCTS()                                                                       \
  if (!cpu::dnnl_product_taken(128, 256, 256)) GTEST_SKIP() << "no oneDNN brgemm product on this CPU " \
                                                                "or build (gemm.cpp's tiles run)"

std::vector<float> values(const Array& a) {
  Array c = copy(a);
  c.eval();
  const float* p = static_cast<const float*>(c.node().data_ptr());
  return std::vector<float>(p, p + c.size());
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Shapes around the kernels' blocks: rows and columns off the 16/32/64 blocks, K below, at and
/// past a block, transformer projections (BERT-small, ViT-small, Whisper-small).
struct Shape3 {
  int64_t m, n, k;
};
std::vector<Shape3> shapes() {
  return {{16, 64, 64}, {17, 33, 129}, {40, 48, 300}, {128, 256, 256}, {197, 192, 192}, {130, 1024, 96}, {500, 384, 64}};
}

class ThreadsScope {
 public:
  ThreadsScope() : saved_(cpu_threads()) {}
  ~ThreadsScope() { set_cpu_threads(saved_); }

 private:
  int saved_;
};

TEST(DnnlProduct, TakesShapesOfSixteenRowsAndMore) {
  SKIP_WITHOUT_PRODUCTS();
  EXPECT_FALSE(cpu::dnnl_product_taken(1, 1024, 256));  // a decode step's vector-matrix product
  EXPECT_FALSE(cpu::dnnl_product_taken(15, 1024, 256));
  EXPECT_FALSE(cpu::dnnl_product_taken(16, 16, 16));  // too little work for a call's set-up
  EXPECT_FALSE(cpu::dnnl_product_taken(16, 0, 16));
  EXPECT_FALSE(cpu::dnnl_product_taken(128, 50257, 768));  // a tied embedding: B past 64 MiB
  EXPECT_TRUE(cpu::dnnl_product_taken(16, 64, 64));
  EXPECT_TRUE(cpu::dnnl_product_taken(500, 1536, 384));
  DnnlProduct p;
  p.m = 128;
  p.n = 256;
  p.k = 256;
  p.ldb = 256;
  EXPECT_EQ(cpu::dnnl_product_impl(p).rfind("brg", 0), 0u) << cpu::dnnl_product_impl(p);
}

// Each element within the bound of a float32 dot product of length K, whatever the order of the
// sum and with or without fused multiply-adds (Higham 3.1): |c - exact| <= gamma_K sum |a||b|,
// gamma_K = K u / (1 - K u), u = 2^-24; the exact sum in long double. Through the public matmul.
TEST(DnnlProduct, WithinTheFloat32RoundingBound) {
  SKIP_WITHOUT_PRODUCTS();
  const double u = std::ldexp(1.0, -24);
  uint32_t seed = 1;
  for (const Shape3& s : shapes()) {
    SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k));
    ASSERT_TRUE(cpu::dnnl_product_taken(s.m, s.n, s.k));
    const Array a = test::random_array({s.m, s.k}, float32, -2, 2, seed++);
    const Array b = test::random_array({s.k, s.n}, float32, -2, 2, seed++);
    const std::vector<float> c = values(matmul(a, b)), va = values(a), vb = values(b);
    const double gamma = s.k * u / (1 - s.k * u);
    int bad = 0;
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        long double exact = 0, mag = 0;
        for (int64_t p = 0; p < s.k; ++p) {
          const long double t = static_cast<long double>(va[i * s.k + p]) * vb[p * s.n + j];
          exact += t;
          mag += std::fabs(t);
        }
        const double err = std::fabs(static_cast<double>(c[i * s.n + j] - exact));
        if (err > gamma * static_cast<double>(mag) && bad++ < 3)
          ADD_FAILURE() << "c[" << i << "," << j << "] = " << c[i * s.n + j] << ", exact " << static_cast<double>(exact)
                        << ", error " << err << " > bound " << gamma * static_cast<double>(mag);
      }
  }
}

// oneDNN plans a product for the thread count it is created under; the bits (and the
// implementation) must not change with it. 32 x 192 products get another weights layout at 3
// threads than at 1 (those run on one thread, ProductPlan::serial).
TEST(DnnlProduct, SameBitsAtAnyThreadCount) {
  SKIP_WITHOUT_PRODUCTS();
  ThreadsScope restore;
  auto all = shapes();
  all.push_back({32, 192, 768});
  uint32_t seed = 40;
  for (const Shape3& s : all) {
    SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k));
    const Array a = test::random_array({s.m, s.k}, float32, -1, 1, seed++);
    const Array b = test::random_array({s.k, s.n}, float32, -1, 1, seed++);
    set_cpu_threads(1);
    const std::vector<float> one = values(matmul(a, b));
    for (int threads : {2, 3}) {
      set_cpu_threads(threads);
      EXPECT_TRUE(same_bits(values(matmul(a, b)), one)) << threads << " threads";
    }
  }
}

// B's storage never changes the bits: row-major, the transpose of a row-major [N, K] (a
// Linear layer's weight), rows with a padded stride (a slice), a batch-broadcast B against its
// materialized copies, and B packed by dnnl_pack_product_weights at 2 threads but used at 1 and
// 3 (where the plan may want another layout: a reorder from the packed one).
TEST(DnnlProduct, TheStorageOfBDoesNotChangeTheBits) {
  SKIP_WITHOUT_PRODUCTS();
  ThreadsScope restore;
  uint32_t seed = 70;
  for (const Shape3& s : shapes()) {
    SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k));
    const Array a = test::random_array({s.m, s.k}, float32, -1, 1, seed++);
    const Array wide = test::random_array({s.k, s.n + 5}, float32, -1, 1, seed++);
    const Array b = copy(slice(wide, {0, 0}, {s.k, s.n}));
    const std::vector<float> want = values(matmul(a, b));
    EXPECT_TRUE(same_bits(values(matmul(a, slice(wide, {0, 0}, {s.k, s.n}))), want)) << "strided rows";
    EXPECT_TRUE(same_bits(values(matmul(a, swapaxes(copy(swapaxes(b, 0, 1)), 0, 1))), want)) << "transposed";
    // Batches: B broadcast over 5 matrices and materialized, 5 >= 2 threads' matrices shared out.
    const Array a3 = test::random_array({5, s.m, s.k}, float32, -1, 1, seed++);
    const std::vector<float> bcast = values(matmul(a3, b));
    EXPECT_TRUE(same_bits(values(matmul(a3, copy(broadcast_to(b, {5, s.k, s.n})))), bcast)) << "materialized batch";
    const std::vector<float> first = values(matmul(slice(a3, {0, 0, 0}, {1, s.m, s.k}), b));
    EXPECT_TRUE(same_bits(std::vector<float>(bcast.begin(), bcast.begin() + s.m * s.n), first)) << "batch of one";
    // Packed at 2 threads, run at 1, 2 and 3.
    set_cpu_threads(2);
    DnnlProduct p;
    p.m = s.m;
    p.n = s.n;
    p.k = s.k;
    p.ldb = s.n;
    const std::vector<float> vb = values(b), va = values(a);
    std::vector<float> packed;
    int threads = 0;
    ASSERT_TRUE(cpu::dnnl_pack_product_weights(
        p,
        vb.data(),
        [&](size_t count) {
          packed.resize(count);
          return packed.data();
        },
        &threads));
    p.packed_threads = threads;
    for (int t : {1, 2, 3}) {
      set_cpu_threads(t);
      std::vector<float> c(static_cast<size_t>(s.m * s.n), -1.0f);
      ASSERT_TRUE(cpu::dnnl_product_f32(p, va.data(), packed.data(), c.data()));
      EXPECT_TRUE(same_bits(c, want)) << "packed at " << threads << " threads, run at " << t;
    }
  }
}

// The bias post-op computes bias + product, one float32 addition after the reduction: bit for bit
// the separate add with the bias first, NaN payloads, infinities and signed zeros included.
TEST(DnnlProduct, TheBiasPostOpIsTheSeparateAddWithTheBiasFirst) {
  SKIP_WITHOUT_PRODUCTS();
  const Shape3 s{40, 96, 64};
  const std::vector<float> a = values(test::special_array(float32, s.m * s.k, 3, {s.m, s.k}));
  const std::vector<float> b = values(test::random_array({s.k, s.n}, float32, -1, 1, 4));
  const std::vector<float> bias = values(test::special_array(float32, s.n, 5, {s.n}));
  DnnlProduct p;
  p.m = s.m;
  p.n = s.n;
  p.k = s.k;
  p.ldb = s.n;
  std::vector<float> plain(static_cast<size_t>(s.m * s.n)), fused(plain.size());
  ASSERT_TRUE(cpu::dnnl_product_f32(p, a.data(), b.data(), plain.data()));
  for (int64_t i = 0; i < s.m; ++i) cpu::add_f32_run(&plain[i * s.n], bias.data(), &plain[i * s.n], s.n, true);
  p.bias = true;
  ASSERT_TRUE(cpu::dnnl_product_f32(p, a.data(), b.data(), fused.data(), bias.data()));
  EXPECT_TRUE(same_bits(fused, plain));
}

}  // namespace
}  // namespace smelt
