// The flash-attention kernel compiles with NVRTC for sm_90 for every dtype, head_dim, mask kind,
// causal and softcap variant, on any machine with the toolkit (no GPU needed).
#include <gtest/gtest.h>

#include "backend/cuda/nvrtc_test_utils.h"

#include <set>
#include <string>

#if SMELT_HAS_CUDA
#include "smelt/errors.h"
#include "src/backend/cuda/attention_sources.h"
#include "src/backend/cuda/compiler.h"
#endif

namespace smelt::test {
namespace {

TEST(CudaAttentionSource, EveryVariantCompilesForSm90) {
#if SMELT_HAS_CUDA
  using cuda::FlashAttentionConfig;
  std::vector<FlashAttentionConfig> configs;
  for (Dtype dt : {float32, float16, bfloat16})
    for (int d : {64, 128}) configs.push_back({dt, d, AttentionMaskKind::None, false, false});
  for (auto mask : {AttentionMaskKind::Additive, AttentionMaskKind::Boolean})
    configs.push_back({bfloat16, 128, mask, true, false});
  configs.push_back({float16, 64, AttentionMaskKind::Additive, false, true});
  configs.push_back({float32, 128, AttentionMaskKind::Boolean, true, true});
  std::set<std::string> keys;
  for (const auto& c : configs) {
    const std::string key = cuda::attention_kernel_key(c);
    SCOPED_TRACE(key);
    EXPECT_TRUE(keys.insert(key).second) << "two configurations share a cache key";
    expect_compiles(cuda::attention_source(c), key);
  }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

TEST(CudaAttentionSource, SupportedCases) {
#if SMELT_HAS_CUDA
  EXPECT_TRUE(cuda::flash_attention_supports(bfloat16, 128, 128));
  EXPECT_TRUE(cuda::flash_attention_supports(float32, 64, 64));
  EXPECT_FALSE(cuda::flash_attention_supports(float64, 64, 64));
  EXPECT_FALSE(cuda::flash_attention_supports(float16, 64, 32));
  EXPECT_FALSE(cuda::flash_attention_supports(float16, 96, 96));
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

}  // namespace
}  // namespace smelt::test
