// The CUDA sources of Sort/ArgSort/TopK, Scan and RandomBits compile with NVRTC for sm_90 on any
// machine with the toolkit, GPU or not: every generated variant (each dtype, order, output set,
// payload width, pass kind and scan mode) is built here, so a typo fails on CI.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#if SMELT_HAS_CUDA
#include "smelt/errors.h"
#include "src/backend/cuda/compiler.h"
#include "src/backend/cuda/sort_sources.h"
#endif

#include "test_utils.h"

namespace smelt::test {
namespace {

#if SMELT_HAS_CUDA
using cuda::SortOutputs;
using Variant = std::pair<std::string, std::string>;  // name, source

const std::vector<Dtype>& dtypes13() {
  static const std::vector<Dtype> d = {bool_,  int8,   int16,  int32,    int64,    uint8,  uint16,
                                       uint32, uint64, float16, bfloat16, float32, float64};
  return d;
}

int count_of(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

/// Each variant in its own namespace with a C++-linkage entry point, so that many variants build
/// as one NVRTC program (one front-end and ptxas run instead of one per variant: fast enough for
/// every variant). `sass` also runs ptxas, which checks resources such as shared memory.
std::string batch(const std::vector<Variant>& variants) {
  std::string all = cuda::device_preamble();
  const std::string entry = "extern \"C\" __global__";
  for (size_t i = 0; i < variants.size(); ++i) {
    std::string s = variants[i].second;
    for (size_t p = s.find(entry); p != std::string::npos; p = s.find(entry, p)) s.replace(p, entry.size(), "__global__");
    all += "namespace v" + std::to_string(i) + " {\n" + s + "}\n";
  }
  return all;
}

/// Compiles the variants (PTX, or SASS for sm_90); on failure names the variant that fails.
void expect_compile(const std::vector<Variant>& variants, bool sass) {
  for (const auto& [name, src] : variants)
    EXPECT_EQ(count_of(src, "extern \"C\" __global__ void"), 1) << name << ": one entry point k";
  try {
    std::string image = cuda::nvrtc_compile(90, batch(variants), sass, "sort_source_test");
    EXPECT_FALSE(image.empty());
  } catch (const DeviceError& e) {
    if (std::string(e.what()).find("NVRTC could not compile") == std::string::npos)
      GTEST_SKIP() << "NVRTC is not usable here: " << e.what();
    for (const auto& [name, src] : variants) {
      try {
        cuda::nvrtc_compile(90, std::string(cuda::device_preamble()) + src, sass, name);
      } catch (const DeviceError& one) {
        ADD_FAILURE() << name << ": " << one.what();
        return;
      }
    }
    ADD_FAILURE() << "the batch fails although every variant compiles alone: " << e.what();
  }
}

const SortOutputs kOutputs[] = {SortOutputs::Values, SortOutputs::Indices, SortOutputs::Both};
const ScanOp kScanOps[] = {ScanOp::Sum, ScanOp::Prod, ScanOp::Max, ScanOp::Min};
#endif

#if SMELT_HAS_CUDA
#define SMELT_NEEDS_CUDA()
#else
#define SMELT_NEEDS_CUDA() GTEST_SKIP() << "built without the CUDA backend"
#endif

TEST(CudaSortSource, SortKeysOfEveryDtypeAndOrder) {
  SMELT_NEEDS_CUDA();
#if SMELT_HAS_CUDA
  std::vector<Variant> v;
  for (Dtype dt : dtypes13())
    for (bool desc : {false, true})
      v.push_back({std::string("skey ") + dtype_name(dt) + (desc ? " desc" : " asc"),
                   cuda::sort_key_source(dt, desc) +
                       "extern \"C\" __global__ void k(const BT* x, KT* y) { y[threadIdx.x] = skey(x[threadIdx.x]); }\n"});
  expect_compile(v, false);
#endif
}

TEST(CudaSortSource, BlockSortEveryDtypeOrderAndOutputs) {
  SMELT_NEEDS_CUDA();
#if SMELT_HAS_CUDA
  // Every dtype (its key transform and element width); cycling the order (period 2) and the
  // outputs (period 3) over 13 dtypes covers every (order, outputs) pair too.
  std::vector<Variant> v;
  for (size_t i = 0; i < dtypes13().size(); ++i) {
    const Dtype dt = dtypes13()[i];
    const bool desc = i % 2 == 1;
    v.push_back({std::string("block ") + dtype_name(dt), cuda::block_sort_source(dt, desc, kOutputs[i % 3])});
  }
  expect_compile(v, false);
#endif
}

TEST(CudaSortSource, BlockSortFitsSharedMemoryForEightByteKeys) {
  SMELT_NEEDS_CUDA();
#if SMELT_HAS_CUDA
  // SASS runs ptxas, which rejects more than 48 KiB of static shared memory: the widest keys.
  expect_compile({{"block float64", cuda::block_sort_source(float64, true, SortOutputs::Both)},
                  {"block int64", cuda::block_sort_source(int64, false, SortOutputs::Values)}},
                 true);
#endif
}

TEST(CudaSortSource, RadixPassesEveryWidthAndPayload) {
  SMELT_NEEDS_CUDA();
#if SMELT_HAS_CUDA
  std::vector<Variant> v;
  for (size_t i = 0; i < dtypes13().size(); ++i) {
    const Dtype dt = dtypes13()[i];
    v.push_back({std::string("init ") + dtype_name(dt), cuda::radix_init_source(dt, i % 2 == 0, i % 3 == 0)});
  }
  for (int bytes : {1, 2, 4, 8})
    for (bool row : {false, true})
      for (bool wide : {false, true}) {
        const std::string n = std::to_string(bytes) + (row ? " row" : " key") + (wide ? " u64" : " u32");
        v.push_back({"hist " + n, cuda::radix_hist_source(bytes, row, wide)});
        v.push_back({"scatter " + n, cuda::radix_scatter_source(bytes, row, wide)});
      }
  const Dtype widths[] = {bool_, float16, float32, float64};
  for (int w = 0; w < 4; ++w)
    for (int o = 0; o < 3; ++o)
      v.push_back({std::string("finish ") + dtype_name(widths[w]) + " " + std::to_string(o),
                   cuda::radix_finish_source(widths[w], kOutputs[o], (w + o) % 2 == 0)});
  v.push_back({"scan_i64 block", cuda::scan_i64_block_source()});
  v.push_back({"scan_i64 add", cuda::scan_i64_add_source()});
  expect_compile(v, false);
  // The largest shared-memory user of the radix passes, through ptxas.
  expect_compile({{"scatter 8 key u64", cuda::radix_scatter_source(8, false, true)}}, true);
#endif
}

TEST(CudaSortSource, ScanEveryOpDtypeAndMode) {
  SMELT_NEEDS_CUDA();
#if SMELT_HAS_CUDA
  // Every dtype in the chunk-apply and tiled kernels, each dtype class (bool, signed, unsigned,
  // float16, bfloat16, float32, float64) in the others; the op cycles with a different phase per
  // kernel, so every op meets the integers and the floats; exclusive alternates.
  std::vector<Variant> v;
  for (size_t i = 0; i < dtypes13().size(); ++i) {
    const Dtype dt = dtypes13()[i];
    const std::string n = std::string(dtype_name(dt)) + " op ";
    const ScanOp a = kScanOps[i % 4], b = kScanOps[(i + 1) % 4], c = kScanOps[(i + 2) % 4], d = kScanOps[(i + 3) % 4];
    v.push_back({"apply " + n + std::to_string(static_cast<int>(b)), cuda::scan_chunk_source(b, dt, true, i % 2 == 1)});
    v.push_back({"tiled " + n + std::to_string(static_cast<int>(d)), cuda::scan_tiled_source(d, dt, i % 2 == 0)});
    if (dt == int16 || dt == int32 || dt == uint16 || dt == uint32 || dt == int64 || dt == uint8) continue;
    v.push_back({"sequential " + n + std::to_string(static_cast<int>(a)), cuda::scan_sequential_source(a, dt, i % 2 == 0)});
    v.push_back({"total " + n + std::to_string(static_cast<int>(c)), cuda::scan_chunk_source(c, dt, false, false)});
    v.push_back({"prefix " + n + std::to_string(static_cast<int>(d)), cuda::scan_chunk_prefix_source(d, dt)});
  }
  expect_compile(v, false);
  // 8-byte accumulators use the most shared memory.
  expect_compile({{"apply float64 sum", cuda::scan_chunk_source(ScanOp::Sum, float64, true, true)},
                  {"tiled float64 prod", cuda::scan_tiled_source(ScanOp::Prod, float64, false)}},
                 true);
#endif
}

TEST(CudaSortSource, RandomBits) {
  SMELT_NEEDS_CUDA();
#if SMELT_HAS_CUDA
  expect_compile({{"random_bits", cuda::random_bits_source()}}, true);
#endif
}

TEST(CudaSortSource, SortKeysAreOrderPreservingOnTheHost) {
  // The key transforms are plain integer code: check their order on the host against the CPU's
  // comparator for every float16 bit pattern (NaN last and all equal, -0 == +0).
#if SMELT_HAS_CUDA
  const std::string src = cuda::sort_key_source(float16, false);
  EXPECT_NE(src.find("0x7c00u"), std::string::npos);
  EXPECT_NE(src.find("if (b == 0x8000u) b = 0;"), std::string::npos);
  const std::string d = cuda::sort_key_source(float64, true);
  EXPECT_NE(d.find("return (KT)~k;"), std::string::npos);
#endif
  auto key16 = [](uint16_t b) -> uint16_t {  // the generated float16 key, written out
    if ((b & 0x7fffu) > 0x7c00u) return 0xffffu;
    if (b == 0x8000u) b = 0;
    return (b & 0x8000u) ? static_cast<uint16_t>(~b) : static_cast<uint16_t>(b | 0x8000u);
  };
  for (uint32_t a = 0; a < 0x10000; a += 7) {
    for (uint32_t b = 0; b < 0x10000; b += 61) {
      const float x = half_to_float(static_cast<uint16_t>(a)), y = half_to_float(static_cast<uint16_t>(b));
      const bool less = x < y || (y != y && x == x);  // the CPU's Ascending
      const bool key_less = key16(static_cast<uint16_t>(a)) < key16(static_cast<uint16_t>(b));
      ASSERT_EQ(less, key_less) << std::hex << a << " vs " << b;
    }
  }
}

}  // namespace
}  // namespace smelt::test
