// The indexing kernels' CUDA sources compile with NVRTC for sm_90 on any machine with the toolkit
// (CI, no GPU): every variant the backend can build (element sizes and dtypes, index dtypes,
// scatter reductions and modes, pad modes, the scans), so a typo fails here and not on the GPU.
#include <gtest/gtest.h>

#include "backend/cuda/nvrtc_test_utils.h"

#include <string>
#include <vector>

#if SMELT_HAS_CUDA
#include "smelt/errors.h"
#include "src/backend/cuda/compiler.h"
#include "src/backend/cuda/index_sources.h"
#include "src/backend/cuda/scan_util.h"
#endif

#include "test_utils.h"

namespace smelt::test {
namespace {

#if SMELT_HAS_CUDA
const std::vector<Dtype>& all_dtypes() {
  static const std::vector<Dtype> d = {bool_,  int8,   int16,   int32,    int64,   uint8,  uint16,
                                       uint32, uint64, float16, bfloat16, float32, float64};
  return d;
}
const std::vector<Dtype>& index_dtypes() {
  static const std::vector<Dtype> d = {int8, int16, int32, int64, uint8, uint16, uint32, uint64};
  return d;
}
/// One dtype per element size: the data-moving kernels depend on the size only.
const std::vector<Dtype>& size_dtypes() {
  static const std::vector<Dtype> d = {uint8, float16, float32, float64};
  return d;
}

/// Compiles the preamble and `body` for sm_90 (to SASS, or to PTX only: the batches below, where

/// Many kernel sources in one translation unit (one NVRTC run instead of one each): each in its
/// own namespace, its entry point renamed k<i>. Names do not leak between sources, so a source
/// that relies on another's declarations still fails.
struct Batch {
  std::string body;
  int count = 0;
  void add(const std::string& source) {
    std::string s = source;
    const std::string entry = "extern \"C\" __global__ void k(";
    const size_t pos = s.find(entry);
    ASSERT_NE(pos, std::string::npos) << "no entry point k in:\n" << source;
    ASSERT_EQ(s.find(entry, pos + 1), std::string::npos) << "two entry points in:\n" << source;
    s.replace(pos, entry.size(), "extern \"C\" __global__ void k" + std::to_string(count) + "(");
    body += "namespace v" + std::to_string(count) + " {\n" + s + "}\n";
    ++count;
  }
};
#endif

#if SMELT_HAS_CUDA
#define SMELT_NEEDS_CUDA()
#else
#define SMELT_NEEDS_CUDA() GTEST_SKIP() << "built without the CUDA backend"
#endif

TEST(CudaIndexSource, GathersForEveryElementSizeAndIndexDtype) {
  SMELT_NEEDS_CUDA();
#if SMELT_HAS_CUDA
  Batch b;
  for (Dtype d : size_dtypes())
    for (Dtype i : index_dtypes()) b.add(cuda::gather_source(d, i));
  for (Dtype i : index_dtypes()) b.add(cuda::index_check_source(i));
  EXPECT_EQ(b.count, 40);
  expect_compiles(b.body, "gathers", false);
#endif
}

TEST(CudaIndexSource, ScatterTargetsForEveryIndexDtypeAndBucketKind) {
  SMELT_NEEDS_CUDA();
#if SMELT_HAS_CUDA
  Batch b;
  for (Dtype i : index_dtypes())
    for (bool assign : {false, true})
      for (bool hashed : {false, true}) b.add(cuda::scatter_targets_source(i, assign, hashed));
  EXPECT_EQ(b.count, 32);
  expect_compiles(b.body, "scatter targets", false);
#endif
}

TEST(CudaIndexSource, ScatterApplyForEveryDtypeReductionAndMode) {
  SMELT_NEEDS_CUDA();
#if SMELT_HAS_CUDA
  for (ScatterReduce r : {ScatterReduce::Assign, ScatterReduce::Add, ScatterReduce::Mul, ScatterReduce::Max,
                          ScatterReduce::Min}) {
    SCOPED_TRACE(cuda::scatter_reduce_name(r));
    Batch b;
    for (Dtype d : all_dtypes())
      for (bool hashed : {false, true}) {
        if (r == ScatterReduce::Assign) {
          b.add(cuda::scatter_apply_source(d, r, cuda::ScatterApply::Winner, hashed));
          continue;
        }
        b.add(cuda::scatter_apply_source(d, r, cuda::ScatterApply::Direct, hashed));
        b.add(cuda::scatter_apply_source(d, r, cuda::ScatterApply::Bucket, hashed));
      }
    expect_compiles(b.body, std::string("scatter apply ") + cuda::scatter_reduce_name(r), false);
  }
#endif
}

TEST(CudaIndexSource, BucketsScansCopiesPadsAndNonzero) {
  SMELT_NEEDS_CUDA();
#if SMELT_HAS_CUDA
  Batch b;
  b.add(cuda::scatter_fill_source());
  b.add(cuda::bucket_sort_small_source());
  b.add(cuda::bucket_sort_large_source());
  b.add(cuda::scan_block_kernel_source());
  b.add(cuda::scan_add_kernel_source());
  for (Dtype d : size_dtypes()) {
    b.add(cuda::copy_into_source(d));
    for (PadMode m : {PadMode::Constant, PadMode::Reflect, PadMode::Edge}) b.add(cuda::pad_source(d, m));
  }
  for (Dtype d : all_dtypes()) {
    b.add(cuda::nonzero_count_source(d, cuda::scan_device_source()));
    b.add(cuda::nonzero_write_source(d, cuda::scan_device_source()));
  }
  EXPECT_EQ(b.count, 5 + 16 + 26);
  expect_compiles(b.body, "buckets, scans, copies, pads, nonzero", false);
#endif
}

TEST(CudaIndexSource, EachFamilyCompilesExactlyAsBuilt) {
  SMELT_NEEDS_CUDA();
#if SMELT_HAS_CUDA
  // The batches rename the entry point; these are the sources get_kernel really builds.
  expect_compiles(cuda::gather_source(bfloat16, int32), "gather");
  expect_compiles(cuda::index_check_source(uint64), "index check");
  expect_compiles(cuda::scatter_targets_source(int64, false, true), "scatter targets");
  expect_compiles(cuda::scatter_apply_source(float16, ScatterReduce::Add, cuda::ScatterApply::Bucket, true),
                  "scatter apply");
  expect_compiles(cuda::bucket_sort_large_source(), "bucket sort");
  expect_compiles(cuda::scan_block_kernel_source(), "scan");
  expect_compiles(cuda::nonzero_write_source(bool_, cuda::scan_device_source()), "nonzero");
  expect_compiles(cuda::pad_source(float64, PadMode::Reflect), "pad");
  expect_compiles(cuda::copy_into_source(int16), "copy");
#endif
}

TEST(CudaIndexSource, KernelsDependOnlyOnWhatTheirKeysName) {
  SMELT_NEEDS_CUDA();
#if SMELT_HAS_CUDA
  // Keys name element sizes for the data-moving kernels: same size, same source.
  EXPECT_EQ(cuda::gather_source(float32, int64), cuda::gather_source(int32, int64));
  EXPECT_EQ(cuda::gather_source(bool_, int64), cuda::gather_source(uint8, int64));
  EXPECT_EQ(cuda::pad_source(float16, PadMode::Edge), cuda::pad_source(bfloat16, PadMode::Edge));
  EXPECT_EQ(cuda::scatter_apply_source(float32, ScatterReduce::Assign, cuda::ScatterApply::Winner, false),
            cuda::scatter_apply_source(uint32, ScatterReduce::Assign, cuda::ScatterApply::Winner, false));
  // ... and the arithmetic ones the dtype.
  EXPECT_NE(cuda::scatter_apply_source(float32, ScatterReduce::Add, cuda::ScatterApply::Direct, false),
            cuda::scatter_apply_source(int32, ScatterReduce::Add, cuda::ScatterApply::Direct, false));
  EXPECT_NE(cuda::gather_source(float32, int64), cuda::gather_source(float32, int32));
  EXPECT_NE(cuda::scatter_targets_source(int64, false, false), cuda::scatter_targets_source(int64, false, true));
#endif
}

}  // namespace
}  // namespace smelt::test
