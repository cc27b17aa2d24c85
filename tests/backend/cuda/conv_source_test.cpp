// Conv/ConvTranspose/Pool kernels without a GPU: every source variant compiles with NVRTC for sm_90,
// the same sources compiled for the host and run thread by thread match the CPU backend, cuDNN's
// declarations match its headers, and the ConvTranspose-through-cuDNN layout reproduces the CPU.
#include <gtest/gtest.h>

#include "backend/cuda/nvrtc_test_utils.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#if SMELT_HAS_CUDA
#include <dlfcn.h>
#include <unistd.h>

#include "smelt/errors.h"
#include "src/backend/cuda/channels_last.h"
#include "src/backend/cuda/compiler.h"
#include "src/backend/cuda/conv_sources.h"
#include "src/backend/cuda/cudnn.h"
#include "src/core/node.h"
#if __has_include(<cudnn.h>)
#include <cudnn.h>
#define SMELT_TEST_HAS_CUDNN_H 1
#endif
#endif

#include "test_utils.h"
#include "tests/backend/cuda/cuda_test_utils.h"

namespace smelt::test {
namespace {

#if SMELT_HAS_CUDA

const std::vector<Dtype>& non_bool_dtypes() {
  static const std::vector<Dtype> d = {int8,   int16,   int32,    int64,   uint8,  uint16,
                                       uint32, uint64, float16, bfloat16, float32, float64};
  return d;
}

/// Empty when NVRTC can compile here, else why not (the source tests skip).
std::string nvrtc_unusable() {
  try {
    cuda::nvrtc_compile(90, std::string(cuda::device_preamble()) + "extern \"C\" __global__ void k() {}\n", true,
                        "probe");
    return {};
  } catch (const DeviceError& e) {
    return e.what();
  }
}

/// Compiles `body` after the preamble for sm_90: to SASS (as get_kernel does), or only to PTX
/// (NVRTC's whole front end, which finds every source error, in less than half the time; the

/// `source` with its entry point `extern "C" __global__ void k(` made a plain kernel, so that many
/// fit in one translation unit (each in a namespace): NVRTC parses the preamble once for all.
std::string in_namespace(const std::string& name, std::string source) {
  const std::string entry = "extern \"C\" __global__ void k(";
  const size_t pos = source.find(entry);
  EXPECT_NE(pos, std::string::npos) << name << " has no entry point";
  if (pos != std::string::npos) source.replace(pos, entry.size(), "__global__ void k(");
  return "namespace " + name + " {\n" + source + "}  // namespace " + name + "\n";
}

#define SMELT_REQUIRE_NVRTC()                                                     \
  if (const std::string why = nvrtc_unusable(); !why.empty()) GTEST_SKIP() << why

#endif

// ---- NVRTC: every variant compiles -------------------------------------------------------------

TEST(CudaConvSource, DirectConvolutionCompilesForEveryDtype) {
#if SMELT_HAS_CUDA
  SMELT_REQUIRE_NVRTC();
  expect_compiles(cuda::conv_direct_source(float32, false), "conv float32");  // as built, to SASS
  expect_compiles(cuda::conv_direct_source(uint8, true), "conv_transpose uint8");
  std::string all;
  for (Dtype dt : non_bool_dtypes())
    for (bool transpose : {false, true})
      all += in_namespace(std::string(transpose ? "convt_" : "conv_") + dtype_name(dt),
                          cuda::conv_direct_source(dt, transpose));
  expect_compiles(all, "every direct convolution", false);
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaConvSource, PoolCompilesForEveryDtypeAndMode) {
#if SMELT_HAS_CUDA
  SMELT_REQUIRE_NVRTC();
  expect_compiles(cuda::pool_source(float16, PoolKind::Avg, true), "avg_pool float16");  // as built, to SASS
  expect_compiles(cuda::pool_source(int64, PoolKind::Max, false), "max_pool int64");
  for (Dtype dt : {float16, bfloat16, float32})
    for (bool channels_last : {false, true})
      expect_compiles(cuda::max_pool2d_source(dt, channels_last),
                      std::string("2-D max_pool ") + dtype_name(dt) + (channels_last ? " channels-last" : ""));  // to SASS
  std::string all;
  for (Dtype dt : non_bool_dtypes()) {
    all += in_namespace(std::string("max_") + dtype_name(dt), cuda::pool_source(dt, PoolKind::Max, false));
    all += in_namespace(std::string("avg_") + dtype_name(dt), cuda::pool_source(dt, PoolKind::Avg, false));
    all += in_namespace(std::string("avgpad_") + dtype_name(dt), cuda::pool_source(dt, PoolKind::Avg, true));
  }
  expect_compiles(all, "every pooling", false);
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaConvSource, WindowCopyCompilesForEveryItemSize) {
#if SMELT_HAS_CUDA
  SMELT_REQUIRE_NVRTC();
  for (size_t isz : {1, 2, 4, 8}) expect_compiles(cuda::window_copy_source(isz), "window copy " + std::to_string(isz));
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaConvSource, ChannelsTransposeCompilesForEveryItemSize) {
#if SMELT_HAS_CUDA
  SMELT_REQUIRE_NVRTC();
  for (size_t isz : {1, 2, 4, 8})
    expect_compiles(cuda::channels_transpose_source(isz), "channels transpose " + std::to_string(isz));
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaConvSource, BoolHasNoKernel) {
#if SMELT_HAS_CUDA
  EXPECT_THROW_MSG(cuda::conv_direct_source(bool_, false), DtypeError, "conv: bool is not supported");
  EXPECT_THROW_MSG(cuda::pool_source(bool_, PoolKind::Max, false), DtypeError, "pool: bool is not supported");
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

// ---- cuDNN: declarations, loading, the switch --------------------------------------------------

#if SMELT_TEST_HAS_CUDNN_H
// cuDNN marks its legacy convolution API deprecated; naming it here is the point.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static_assert(CUDNN_MAJOR == 9, "cudnn.h declares cuDNN 9's legacy API; check the declarations for another major");

/// The type smelt declares for cuDNN's type T (enums and perf structs mapped, the rest kept).
template <class T>
struct Mine {
  using type = T;
};
#define SMELT_MAP(real, mine) \
  template <>                 \
  struct Mine<real> {         \
    using type = mine;        \
  };
SMELT_MAP(::cudnnStatus_t, cuda::dnn::Status)
SMELT_MAP(::cudnnDataType_t, cuda::dnn::DataType)
SMELT_MAP(::cudnnMathType_t, cuda::dnn::MathType)
SMELT_MAP(::cudnnTensorFormat_t, cuda::dnn::TensorFormat)
SMELT_MAP(::cudnnConvolutionMode_t, cuda::dnn::ConvolutionMode)
SMELT_MAP(::cudnnDeterminism_t, cuda::dnn::Determinism)
SMELT_MAP(::cudnnConvolutionFwdAlgo_t, cuda::dnn::FwdAlgo)
SMELT_MAP(::cudnnConvolutionBwdDataAlgo_t, cuda::dnn::BwdDataAlgo)
SMELT_MAP(::cudnnConvolutionFwdAlgoPerfStruct, cuda::dnn::FwdAlgoPerf)
SMELT_MAP(::cudnnConvolutionBwdDataAlgoPerfStruct, cuda::dnn::BwdDataAlgoPerf)
#undef SMELT_MAP
template <class T>
struct Mine<T*> {
  using type = typename Mine<T>::type*;
};
template <class T>
struct Mine<const T> {
  using type = const typename Mine<T>::type;
};
template <class R, class... A>
struct Mine<R (*)(A...)> {
  using type = typename Mine<R>::type (*)(typename Mine<A>::type...);
};

// Every function smelt loads has cuDNN's signature (with smelt's enums in place of cuDNN's).
#define X(name, ret, params)                                                                        \
  static_assert(std::is_same_v<Mine<decltype(&::name)>::type, cuda::CudnnApi::name##_fn>, #name \
                " is declared with another signature than cuDNN's");
SMELT_CUDNN_FNS(X)
#undef X

// Handles and descriptors are cuDNN's own types.
static_assert(std::is_same_v<cuda::dnn::Handle, ::cudnnHandle_t>);
static_assert(std::is_same_v<cuda::dnn::TensorDesc, ::cudnnTensorDescriptor_t>);
static_assert(std::is_same_v<cuda::dnn::FilterDesc, ::cudnnFilterDescriptor_t>);
static_assert(std::is_same_v<cuda::dnn::ConvDesc, ::cudnnConvolutionDescriptor_t>);

// Enum values and underlying types.
#define SMELT_SAME_ENUM(real, mine) \
  static_assert(std::is_same_v<std::underlying_type_t<real>, std::underlying_type_t<mine>>, #real);
SMELT_SAME_ENUM(::cudnnStatus_t, cuda::dnn::Status)
SMELT_SAME_ENUM(::cudnnDataType_t, cuda::dnn::DataType)
SMELT_SAME_ENUM(::cudnnMathType_t, cuda::dnn::MathType)
SMELT_SAME_ENUM(::cudnnTensorFormat_t, cuda::dnn::TensorFormat)
SMELT_SAME_ENUM(::cudnnConvolutionMode_t, cuda::dnn::ConvolutionMode)
SMELT_SAME_ENUM(::cudnnDeterminism_t, cuda::dnn::Determinism)
SMELT_SAME_ENUM(::cudnnConvolutionFwdAlgo_t, cuda::dnn::FwdAlgo)
SMELT_SAME_ENUM(::cudnnConvolutionBwdDataAlgo_t, cuda::dnn::BwdDataAlgo)
#undef SMELT_SAME_ENUM
#define SMELT_SAME_VALUE(name) \
  static_assert(static_cast<long long>(::name) == static_cast<long long>(cuda::dnn::name), #name);
SMELT_SAME_VALUE(CUDNN_STATUS_SUCCESS)
SMELT_SAME_VALUE(CUDNN_STATUS_BAD_PARAM)
SMELT_SAME_VALUE(CUDNN_STATUS_NOT_SUPPORTED)
SMELT_SAME_VALUE(CUDNN_STATUS_INTERNAL_ERROR)
SMELT_SAME_VALUE(CUDNN_STATUS_EXECUTION_FAILED)
SMELT_SAME_VALUE(CUDNN_DATA_FLOAT)
SMELT_SAME_VALUE(CUDNN_DATA_DOUBLE)
SMELT_SAME_VALUE(CUDNN_DATA_HALF)
SMELT_SAME_VALUE(CUDNN_DATA_BFLOAT16)
SMELT_SAME_VALUE(CUDNN_DEFAULT_MATH)
SMELT_SAME_VALUE(CUDNN_TENSOR_OP_MATH)
SMELT_SAME_VALUE(CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
SMELT_SAME_VALUE(CUDNN_FMA_MATH)
SMELT_SAME_VALUE(CUDNN_TENSOR_NCHW)
SMELT_SAME_VALUE(CUDNN_TENSOR_NHWC)
SMELT_SAME_VALUE(CUDNN_CONVOLUTION)
SMELT_SAME_VALUE(CUDNN_CROSS_CORRELATION)
SMELT_SAME_VALUE(CUDNN_NON_DETERMINISTIC)
SMELT_SAME_VALUE(CUDNN_DETERMINISTIC)
SMELT_SAME_VALUE(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM)
SMELT_SAME_VALUE(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
SMELT_SAME_VALUE(CUDNN_CONVOLUTION_FWD_ALGO_GEMM)
SMELT_SAME_VALUE(CUDNN_CONVOLUTION_FWD_ALGO_DIRECT)
SMELT_SAME_VALUE(CUDNN_CONVOLUTION_FWD_ALGO_FFT)
SMELT_SAME_VALUE(CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING)
SMELT_SAME_VALUE(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD)
SMELT_SAME_VALUE(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED)
SMELT_SAME_VALUE(CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
SMELT_SAME_VALUE(CUDNN_CONVOLUTION_BWD_DATA_ALGO_0)
SMELT_SAME_VALUE(CUDNN_CONVOLUTION_BWD_DATA_ALGO_1)
SMELT_SAME_VALUE(CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT)
SMELT_SAME_VALUE(CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING)
SMELT_SAME_VALUE(CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD)
SMELT_SAME_VALUE(CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED)
SMELT_SAME_VALUE(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT)
#undef SMELT_SAME_VALUE

// The perf structs have cuDNN's layout.
#define SMELT_SAME_FIELD(real, mine, field) \
  static_assert(offsetof(real, field) == offsetof(mine, field), #real "::" #field);
#define SMELT_SAME_PERF(real, mine)                                           \
  static_assert(sizeof(real) == sizeof(mine) && alignof(real) == alignof(mine), #real); \
  SMELT_SAME_FIELD(real, mine, algo)                                          \
  SMELT_SAME_FIELD(real, mine, status)                                        \
  SMELT_SAME_FIELD(real, mine, time)                                          \
  SMELT_SAME_FIELD(real, mine, memory)                                        \
  SMELT_SAME_FIELD(real, mine, determinism)                                   \
  SMELT_SAME_FIELD(real, mine, mathType)                                      \
  SMELT_SAME_FIELD(real, mine, reserved)
SMELT_SAME_PERF(::cudnnConvolutionFwdAlgoPerfStruct, cuda::dnn::FwdAlgoPerf)
SMELT_SAME_PERF(::cudnnConvolutionBwdDataAlgoPerfStruct, cuda::dnn::BwdDataAlgoPerf)
#undef SMELT_SAME_PERF
#undef SMELT_SAME_FIELD

#pragma GCC diagnostic pop
#endif  // SMELT_TEST_HAS_CUDNN_H

TEST(CudaCudnn, DeclarationsMatchTheInstalledHeaders) {
#if SMELT_TEST_HAS_CUDNN_H
  SUCCEED() << "checked at compile time against cuDNN " << CUDNN_MAJOR << "." << CUDNN_MINOR;
#else
  GTEST_SKIP() << "no cudnn.h on this machine: the declarations are checked where it is installed";
#endif
}

TEST(CudaCudnn, LoadsWithoutAGpuWhenInstalled) {
#if SMELT_HAS_CUDA
  std::string why;
  const cuda::CudnnApi* api = cuda::cudnn(&why);
  if (!api) {
    EXPECT_NE(why.find("cuDNN"), std::string::npos) << why;
    GTEST_SKIP() << why;
  }
  EXPECT_TRUE(why.empty()) << why;
  EXPECT_GE(api->cudnnGetVersion(), 90000u);
  const std::string msg = cuda::cudnn_error(*api, cuda::dnn::CUDNN_STATUS_NOT_SUPPORTED, "cudnnX", "conv");
  EXPECT_EQ(msg.rfind("conv: cudnnX failed: ", 0), 0u) << msg;
  EXPECT_GT(msg.size(), std::string("conv: cudnnX failed: ").size()) << msg;
  EXPECT_EQ(cuda::cudnn(), api);  // loaded once
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaCudnn, SwitchTurnsItOffAndOn) {
#if SMELT_HAS_CUDA
  const bool saved = cuda::cudnn_enabled();
  cuda::set_cudnn_enabled(false);
  EXPECT_FALSE(cuda::cudnn_enabled());
  cuda::set_cudnn_enabled(true);
  EXPECT_TRUE(cuda::cudnn_enabled());
  cuda::set_cudnn_enabled(saved);
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

// ---- ConvTranspose as cuDNN's backward data: the layout, checked with the CPU ------------------

#if SMELT_HAS_CUDA
/// out[n, c, j] = r[n, c, j + off] (zero outside r), row-major int32 data.
std::vector<int32_t> crop(const std::vector<int32_t>& r, const Shape& rs, const Shape& os,
                          const std::vector<int64_t>& off) {
  std::vector<int32_t> out(static_cast<size_t>(shape_size(os)), 0);
  const Strides rst = row_major_strides(rs);
  for (int64_t i = 0; i < shape_size(os); ++i) {
    int64_t rem = i, src = 0;
    bool inside = true;
    for (size_t d = os.size(); d-- > 0;) {
      int64_t c = rem % os[d];
      rem /= os[d];
      if (d >= 2) c += off[d - 2];
      if (c < 0 || c >= rs[d]) inside = false;
      src += c * rst[d];
    }
    if (inside) out[static_cast<size_t>(i)] = r[static_cast<size_t>(src)];
  }
  return out;
}
#endif

TEST(CudaConvSource, TransposeLayoutThroughCudnnReproducesTheCpu) {
#if SMELT_HAS_CUDA
  // Every combination of small sizes, strides, dilations, paddings and output paddings, in 1-D
  // (and a sample in 2-D): cuDNN's symmetric-padding result cropped at the offset must be the
  // transposed convolution with the real (asymmetric) padding.
  int checked = 0, in_place = 0;
  uint32_t seed = 1;
  for (int64_t in : {1, 2, 4})
    for (int64_t kk : {1, 2, 3})
      for (int64_t s : {1, 2, 3})
        for (int64_t d : {1, 2})
          for (int64_t lo : {0, 1, 2, 3})
            for (int64_t hi : {0, 1, 3})
              for (int64_t op : {0, 1, 2, 4}) {
                ConvTransposeOptions o{{s}, {lo}, {hi}, {d}, {op}, 1};
                const int64_t out_len = (in - 1) * s - lo - hi + d * (kk - 1) + op + 1;
                if (out_len < 1) continue;
                Array x = random_array({2, 3, in}, int32, -5, 5, ++seed), w = random_array({3, 2, kk}, int32, -5, 5, ++seed);
                Array ref = conv_transpose(x, w, o);
                ConvTransposeParams p{{s}, {lo}, {hi}, {d}, {op}, 1};
                const cuda::TransposeLayout l = cuda::cudnn_transpose_layout(x.shape(), w.shape(), ref.shape(), p);
                SCOPED_TRACE("in " + std::to_string(in) + " k " + std::to_string(kk) + " s " + std::to_string(s) +
                             " d " + std::to_string(d) + " pad " + std::to_string(lo) + "+" + std::to_string(hi) +
                             " outpad " + std::to_string(op));
                ASSERT_EQ(l.pad.size(), 1u);
                EXPECT_GE(l.offset[0], 0);
                EXPECT_LE(l.pad[0], std::min(lo, hi));
                // cuDNN's forward convolution of the result must give back the input's length.
                const int64_t eff = d * (kk - 1) + 1;
                EXPECT_EQ((l.result[2] + 2 * l.pad[0] - eff) / s + 1, in);
                const int64_t e = l.result[2] - ((in - 1) * s + eff - 2 * l.pad[0]);
                ASSERT_GE(e, 0);
                ASSERT_LT(e, s);
                // What cuDNN computes: the transposed convolution with symmetric padding q and
                // output padding e.
                Array r = conv_transpose(x, w, {{s}, {l.pad[0]}, {l.pad[0]}, {d}, {e}, 1});
                ASSERT_EQ(r.shape(), l.result);
                auto rv = r.to_vector<int32_t>();
                EXPECT_EQ(crop(rv, l.result, ref.shape(), l.offset), ref.to_vector<int32_t>());
                if (l.in_place) {
                  EXPECT_EQ(rv, ref.to_vector<int32_t>());
                  ++in_place;
                }
                ++checked;
              }
  EXPECT_GT(checked, 500);
  EXPECT_GT(in_place, 50);
  // 2-D and 3-D with groups and different parameters per axis.
  for (auto [lo, hi, op] : {std::tuple<int64_t, int64_t, int64_t>{0, 0, 0}, {2, 1, 1}, {1, 3, 2}, {3, 0, 4}}) {
    ConvTransposeOptions o{{2, 3}, {lo, hi}, {hi, lo}, {1, 2}, {op, 0}, 2};
    Array x = random_array({2, 4, 3, 4}, int32, -5, 5, 7), w = random_array({4, 3, 2, 3}, int32, -5, 5, 8);
    Array ref = conv_transpose(x, w, o);
    ConvTransposeParams p{{2, 3}, {lo, hi}, {hi, lo}, {1, 2}, {op, 0}, 2};
    const cuda::TransposeLayout l = cuda::cudnn_transpose_layout(x.shape(), w.shape(), ref.shape(), p);
    std::vector<int64_t> e(2);
    for (size_t i = 0; i < 2; ++i)
      e[i] = l.result[i + 2] - ((x.shape()[i + 2] - 1) * p.strides[i] + p.dilations[i] * (w.shape()[i + 2] - 1) + 1 -
                                2 * l.pad[i]);
    Array r = conv_transpose(x, w, {p.strides, l.pad, l.pad, p.dilations, e, 2});
    ASSERT_EQ(r.shape(), l.result);
    EXPECT_EQ(crop(r.to_vector<int32_t>(), l.result, ref.shape(), l.offset), ref.to_vector<int32_t>());
  }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

// ---- The kernels compiled for the host: same source, run thread by thread ----------------------

#if SMELT_HAS_CUDA
/// Just enough CUDA for the preamble and the kernels to compile as host C++ (-ffp-contract=off:
/// the GPU's --fmad=false), with a loop over blocks and threads standing in for a launch. Should
/// the preamble one day use something this shim lacks, the host tests skip with the compiler's
/// log (the NVRTC tests above still check every source).
const char* kHostShim = R"(
#include <math.h>
#include <string.h>
// The preamble's device branches (the device's 16-bit float types), with the host's standard
// library in place of device_std.h's NVRTC names.
#define __CUDACC_RTC__ 1
#define SMELT_DEVICE_STD_FROM_HOST 1
#define __device__
#define __global__
#define __noinline__ __attribute__((noinline))
#define __expf(x) expf(x)
#define __fdividef(a, b) ((a) / (b))
struct smelt_dim3 { unsigned x, y, z; };
static smelt_dim3 blockIdx, threadIdx, blockDim, gridDim;
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }
static inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
static inline int min(int a, int b) { return a < b ? a : b; }
)";

struct HostKernel {
  std::string name, source, args;  // args: the device struct's name
};

using HostRun = void (*)(const void* args, unsigned long long grid, unsigned block);

/// Compiles every kernel into one host shared object (once per process).
class HostKernels {
 public:
  explicit HostKernels(const std::vector<HostKernel>& kernels) {
    const char* cxx_env = std::getenv("SMELT_CXX");
    const std::string cxx = cxx_env && *cxx_env ? cxx_env : "c++";
    char dir_template[] = "/tmp/smelt_conv_host_XXXXXX";
    if (!mkdtemp(dir_template)) {
      error_ = "cannot create a temporary folder";
      return;
    }
    dir_ = dir_template;
    std::string tu = std::string(kHostShim) + cuda::device_preamble();
    for (const auto& k : kernels) {
      std::string src = k.source;
      const std::string entry = "extern \"C\" __global__ void k(";
      const size_t pos = src.find(entry);
      if (pos == std::string::npos) {
        error_ = k.name + ": no entry point";
        remove_dir();
        return;
      }
      src.replace(pos, entry.size(), "void k(");
      tu += "namespace " + k.name + " {\n" + src + "}\n";
      tu += "extern \"C\" void run_" + k.name + "(const void* a, unsigned long long grid, unsigned block) {\n"
            "  blockDim.x = block; gridDim.x = (unsigned)grid; gridDim.y = 1; blockIdx.y = 0;\n"
            "  for (unsigned long long b = 0; b < grid; ++b) {\n"
            "    blockIdx.x = (unsigned)b;\n"
            "    for (unsigned t = 0; t < block; ++t) { threadIdx.x = t; " +
            k.name + "::k(*(const " + k.name + "::" + k.args + "*)a); }\n  }\n}\n";
    }
    const std::string cpp = dir_ + "/kernels.cpp", so = dir_ + "/kernels.so", log = dir_ + "/log.txt";
    std::ofstream(cpp) << tu;
    const std::string cmd = cxx + " -std=c++17 -O1 -fPIC -shared -ffp-contract=off -fno-fast-math -w -o " + so + " " +
                            cpp + " > " + log + " 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream f(log);
      std::stringstream ss;
      ss << f.rdbuf();
      error_ = "the host compiler (" + cxx + ") could not build the kernels:\n" + ss.str().substr(0, 4000);
      remove_dir();
      return;
    }
    lib_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib_) error_ = std::string("dlopen: ") + dlerror();
    remove_dir();  // the loaded object stays mapped
  }
  ~HostKernels() { remove_dir(); }
  void remove_dir() {
    for (const char* f : {"/kernels.cpp", "/kernels.so", "/log.txt"}) std::remove((dir_ + f).c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
  }
  const std::string& error() const { return error_; }
  HostRun find(const std::string& name) const {
    return lib_ ? reinterpret_cast<HostRun>(dlsym(lib_, ("run_" + name).c_str())) : nullptr;
  }

 private:
  std::string dir_, error_;
  void* lib_ = nullptr;  // kept open until exit
};

std::string ident(Dtype dt) { return dtype_name(dt); }

const std::vector<Dtype>& emulated_conv_dtypes() {
  static const std::vector<Dtype> d = {int8, uint16, int32, int64, uint64, float16, bfloat16, float32, float64};
  return d;
}
const std::vector<Dtype>& emulated_pool_dtypes() {
  static const std::vector<Dtype> d = {int8, uint8, int16, uint32, int64, float16, bfloat16, float32, float64};
  return d;
}

const HostKernels& host_kernels() {
  static const HostKernels* h = [] {
    std::vector<HostKernel> ks;
    for (Dtype dt : emulated_conv_dtypes()) {
      ks.push_back({"conv_" + ident(dt), cuda::conv_direct_source(dt, false), "ConvArgs"});
      ks.push_back({"convt_" + ident(dt), cuda::conv_direct_source(dt, true), "ConvArgs"});
    }
    for (Dtype dt : emulated_pool_dtypes()) {
      ks.push_back({"max_" + ident(dt), cuda::pool_source(dt, PoolKind::Max, false), "PoolArgs"});
      ks.push_back({"avg_" + ident(dt), cuda::pool_source(dt, PoolKind::Avg, false), "PoolArgs"});
      ks.push_back({"avgpad_" + ident(dt), cuda::pool_source(dt, PoolKind::Avg, true), "PoolArgs"});
    }
    for (Dtype dt : {float16, bfloat16, float32}) {
      ks.push_back({"max2d_" + ident(dt), cuda::max_pool2d_source(dt), "Pool2Args"});
      ks.push_back({"max2d_nhwc_" + ident(dt), cuda::max_pool2d_source(dt, true), "Pool2Args"});
    }
    for (size_t isz : {2, 4}) ks.push_back({"win" + std::to_string(isz), cuda::window_copy_source(isz), "WinArgs"});
    return new HostKernels(ks);
  }();
  return *h;
}

#define SMELT_REQUIRE_HOST_KERNELS()                                                           \
  if (!host_kernels().error().empty()) GTEST_SKIP() << host_kernels().error()

/// Launches a host-emulated kernel over `total` threads in blocks of 256, as on the GPU.
void run_host(const std::string& name, const void* args, int64_t total) {
  HostRun run = host_kernels().find(name);
  ASSERT_NE(run, nullptr) << name;
  run(args, cuda::blocks_for(total, 256), 256);
}

uint64_t host_addr(const Array& a) { return a.size() > 0 ? reinterpret_cast<uint64_t>(a.data()) : 0; }

/// Runs the host-emulated direct kernel (Conv or ConvTranspose) on CPU arrays of any strides.
Array emulate_conv(const Array& x, const Array& w, const Shape& out_shape, const std::vector<int64_t>& strides,
                   const std::vector<int64_t>& lo, const std::vector<int64_t>& dil, int64_t groups, bool transpose) {
  x.eval();
  w.eval();
  cuda::ConvKernelArgs a =
      cuda::conv_kernel_args(x.shape(), x.strides(), w.shape(), w.strides(), out_shape, strides, lo, dil, groups);
  std::vector<uint8_t> y(static_cast<size_t>(shape_size(out_shape)) * size_of(x.dtype()) + 1, 0xAB);
  a.x = host_addr(x);
  a.w = host_addr(w);
  a.y = reinterpret_cast<uint64_t>(y.data());
  run_host((transpose ? "convt_" : "conv_") + ident(x.dtype()), &a, a.total);
  EXPECT_EQ(y.back(), 0xAB) << "the kernel wrote past the output";
  return Array(y.data(), out_shape, x.dtype());
}


double rel_for(Dtype dt) {
  return dt == float16 ? 2e-3 : dt == bfloat16 ? 1e-2 : dt == float32 ? 1e-5 : 1e-12;
}

struct ConvCase {
  Shape x, w;
  ConvOptions o;
};

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> c = {
      {{2, 4, 9}, {6, 4, 3}, {}},                                           // 1-D, batch 2
      {{1, 4, 11}, {4, 2, 3}, {{2}, {1}, {2}, {2}, 2}},                     // groups, stride, dilation, asymmetric
      {{2, 3, 7, 6}, {5, 3, 3, 2}, {{1, 2}, {1, 0}, {2, 1}, {1, 1}, 1}},    // 2-D asymmetric padding
      {{1, 6, 8, 7}, {6, 1, 3, 3}, {{2, 1}, {1, 1}, {1, 1}, {2, 1}, 6}},    // depthwise 2-D
      {{2, 4, 4, 5, 3}, {4, 2, 2, 3, 2}, {{1, 2, 1}, {1, 0, 1}, {0, 2, 1}, {1, 1, 2}, 2}},  // 3-D groups
      {{1, 2, 3, 3}, {3, 2, 3, 3}, {{1, 1}, {3, 3}, {3, 3}, {1, 1}, 1}},    // windows of only padding
  };
  return c;
}
#endif

TEST(CudaConvHost, DirectConvolutionMatchesTheCpu) {
#if SMELT_HAS_CUDA
  SMELT_REQUIRE_HOST_KERNELS();
  uint32_t seed = 100;
  for (Dtype dt : emulated_conv_dtypes()) {
    for (const auto& c : conv_cases()) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " x " + shape_to_string(c.x) + " w " + shape_to_string(c.w));
      const bool flt = is_floating(dt);
      Array x = random_array(c.x, dt, flt ? -1 : -100, flt ? 1 : 100, ++seed);
      Array w = random_array(c.w, dt, flt ? -1 : -100, flt ? 1 : 100, ++seed);
      Array ref = conv(x, w, c.o);
      ref.eval();
      const size_t k = c.x.size() - 2;
      auto opt = [&](const std::vector<int64_t>& v, int64_t def) { return v.empty() ? std::vector<int64_t>(k, def) : v; };
      Array got = emulate_conv(x, w, ref.shape(), opt(c.o.strides, 1), opt(c.o.padding_lo, 0), opt(c.o.dilations, 1),
                               c.o.groups, false);
      // Integers wrap exactly; with one channel per group the direct kernel sums in the order of
      // smelt's own CPU kernel, but float32 convolutions may run through oneDNN on the CPU
      // (docs/cpu-kernels.md: its own order, FMA), so float32 is held to the bound.
      if (!flt || (c.w[1] == 1 && dt != float32)) {
        EXPECT_TRUE(bit_equal(got, ref));
      } else {
        Array bound = conv(abs(astype(x, float64)), abs(astype(w, float64)), c.o);
        EXPECT_TRUE(within_window_bound(got, ref, bound, rel_for(dt)));
      }
    }
  }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaConvHost, DirectConvolutionReadsStridedOperands) {
#if SMELT_HAS_CUDA
  SMELT_REQUIRE_HOST_KERNELS();
  // A transposed input, a weight sliced with a negative step, a broadcast weight.
  Array xb = random_array({2, 9, 3, 5}, int32, -50, 50, 1);
  Array x = transpose(xb, {0, 2, 3, 1});  // [2, 3, 5, 9]
  Array wb = random_array({4, 6, 2, 3}, int32, -50, 50, 2);
  Array w = slice(wb, {0, 5, 0, 0}, {4, -7, 2, 3}, {1, -2, 1, 1});  // [4, 3, 2, 3], channels reversed
  ASSERT_EQ(w.shape(), (Shape{4, 3, 2, 3}));
  ConvOptions o{{1, 2}, {1, 0}, {0, 1}, {2, 1}, 1};
  Array ref = conv(x, w, o);
  Array got = emulate_conv(x, w, ref.shape(), o.strides, o.padding_lo, o.dilations, 1, false);
  EXPECT_TRUE(bit_equal(got, ref));
  Array wbc = broadcast_to(random_array({1, 3, 2, 3}, int32, -50, 50, 3), {4, 3, 2, 3});
  Array ref2 = conv(x, wbc, o);
  EXPECT_TRUE(bit_equal(emulate_conv(x, wbc, ref2.shape(), o.strides, o.padding_lo, o.dilations, 1, false), ref2));
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaConvHost, DirectTransposedConvolutionMatchesTheCpu) {
#if SMELT_HAS_CUDA
  SMELT_REQUIRE_HOST_KERNELS();
  struct Case {
    Shape x, w;
    ConvTransposeOptions o;
  };
  const std::vector<Case> cases = {
      {{2, 4, 5}, {4, 3, 3}, {}},
      {{1, 4, 6}, {4, 2, 3}, {{2}, {1}, {2}, {2}, {1}, 2}},
      {{2, 3, 4, 3}, {3, 2, 3, 2}, {{2, 3}, {1, 0}, {0, 2}, {1, 2}, {1, 4}, 1}},
      {{1, 4, 3, 4}, {4, 1, 2, 3}, {{2, 1}, {0, 1}, {1, 0}, {1, 1}, {0, 0}, 4}},  // depthwise
      {{1, 4, 2, 3, 2}, {4, 2, 2, 2, 3}, {{2, 1, 2}, {0, 1, 1}, {1, 0, 2}, {1, 2, 1}, {1, 0, 2}, 2}},
  };
  uint32_t seed = 300;
  for (Dtype dt : emulated_conv_dtypes()) {
    for (const auto& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " x " + shape_to_string(c.x) + " w " + shape_to_string(c.w));
      const bool flt = is_floating(dt);
      Array x = random_array(c.x, dt, flt ? -1 : -100, flt ? 1 : 100, ++seed);
      Array w = random_array(c.w, dt, flt ? -1 : -100, flt ? 1 : 100, ++seed);
      Array ref = conv_transpose(x, w, c.o);
      ref.eval();
      const size_t k = c.x.size() - 2;
      auto opt = [&](const std::vector<int64_t>& v, int64_t def) { return v.empty() ? std::vector<int64_t>(k, def) : v; };
      Array got = emulate_conv(x, w, ref.shape(), opt(c.o.strides, 1), opt(c.o.padding_lo, 0), opt(c.o.dilations, 1),
                               c.o.groups, true);
      if (!flt || c.x[1] / c.o.groups == 1) {
        EXPECT_TRUE(bit_equal(got, ref));
      } else {
        Array bound = conv_transpose(abs(astype(x, float64)), abs(astype(w, float64)), c.o);
        EXPECT_TRUE(within_window_bound(got, ref, bound, rel_for(dt)));
      }
    }
  }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

#if SMELT_HAS_CUDA
int max_pool2d_runs = 0;  // emulate_pool's runs of the 2-D max pool kernel
int channels_last_pool_runs = 0;  // and of its channels-last variant

Array emulate_pool(const Array& x, const Shape& out_shape, const PoolOptions& o, PoolKind kind) {
  x.eval();
  const size_t k = x.ndim() - 2;
  auto opt = [&](const std::vector<int64_t>& v, int64_t def) { return v.empty() ? std::vector<int64_t>(k, def) : v; };
  PoolParams p{kind,  o.kernel, opt(o.strides, 1), opt(o.padding_lo, 0), opt(o.padding_hi, 0), opt(o.dilations, 1),
               kind == PoolKind::Avg && o.count_include_pad, o.ceil_mode};
  cuda::PoolKernelArgs a = cuda::pool_kernel_args(x.shape(), x.strides(), out_shape, p);
  std::vector<uint8_t> y(static_cast<size_t>(shape_size(out_shape)) * size_of(x.dtype()) + 1, 0xAB);
  a.x = host_addr(x);
  a.y = reinterpret_cast<uint64_t>(y.data());
  const std::string name = (kind == PoolKind::Max ? "max_" : p.count_include_pad ? "avgpad_" : "avg_") + ident(x.dtype());
  run_host(name, &a, a.total);
  EXPECT_EQ(y.back(), 0xAB) << "the kernel wrote past the output";
  Array general(y.data(), out_shape, x.dtype());
  // The 2-D max pool, where it applies, gives the general kernel's bits.
  if (kind == PoolKind::Max)
    if (auto m = cuda::max_pool2d_args(a, x.shape(), x.dtype())) {
      std::vector<uint8_t> y2(y.size(), 0xAB);
      m->x = host_addr(x);
      m->y = reinterpret_cast<uint64_t>(y2.data());
      run_host("max2d_" + ident(x.dtype()), &*m, a.total);
      EXPECT_EQ(y2.back(), 0xAB) << "the 2-D kernel wrote past the output";
      EXPECT_TRUE(bit_equal(Array(y2.data(), out_shape, x.dtype()), general)) << "2-D max pool";
      ++max_pool2d_runs;
    }
  // The channels-last variant (PoolParams::block = C) on an NHWC copy, where it applies: the same
  // bits, numbered channels-last.
  if (kind == PoolKind::Max && x.ndim() == 4 && cuda::pool_runs_channels_last(x.dtype(), x.shape(), p)) {
    const Shape& xs = x.shape();
    Array nhwc = copy(transpose(x, {0, 2, 3, 1}));
    nhwc.eval();
    const Strides st{xs[1] * xs[2] * xs[3], 1, xs[3] * xs[1], xs[1]};
    cuda::PoolKernelArgs b = cuda::pool_kernel_args(xs, st, out_shape, p);
    auto m = cuda::max_pool2d_args(b, xs, x.dtype());
    EXPECT_TRUE(m.has_value()) << "pool_runs_channels_last promised the 32-bit kernel";
    if (m) {
      std::vector<uint8_t> y3(y.size(), 0xAB);
      m->x = host_addr(nhwc);
      m->y = reinterpret_cast<uint64_t>(y3.data());
      run_host("max2d_nhwc_" + ident(x.dtype()), &*m, b.total);
      EXPECT_EQ(y3.back(), 0xAB) << "the channels-last kernel wrote past the output";
      const Array got(y3.data(), {out_shape[0], out_shape[2], out_shape[3], out_shape[1]}, x.dtype());
      EXPECT_TRUE(bit_equal(copy(transpose(got, {0, 3, 1, 2})), general)) << "channels-last 2-D max pool";
      ++channels_last_pool_runs;
    }
  }
  return general;
}

/// Random values with NaN, ±inf and ±0 sprinkled in for floats (integers: whole numbers).
Array pool_input(const Shape& shape, Dtype dt, uint32_t seed) {
  auto v = random_values(static_cast<size_t>(shape_size(shape)), -100, 100, seed);
  if (is_floating(dt)) {
    const double sp[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0};
    for (size_t i = 5; i < v.size(); i += 11) v[i] = sp[(i / 11) % 5];
  } else {
    for (auto& e : v) e = std::floor(e);
  }
  return astype(Array(v, shape), dt);
}
#endif

TEST(CudaConvHost, PoolIsBitExactWithTheCpu) {
#if SMELT_HAS_CUDA
  SMELT_REQUIRE_HOST_KERNELS();
  const std::vector<std::pair<Shape, PoolOptions>> cases = {
      {{2, 3, 10}, {{3}, {2}, {1}, {0}, {1}, false, false}},
      {{2, 3, 10}, {{3}, {2}, {1}, {2}, {1}, true, true}},                       // ceil_mode overhang
      {{1, 2, 7, 8}, {{3, 2}, {2, 3}, {1, 0}, {0, 1}, {1, 2}, true, false}},     // asymmetric, dilation
      {{1, 2, 7, 8}, {{3, 3}, {2, 2}, {1, 1}, {2, 2}, {2, 1}, true, true}},
      {{2, 2, 4, 5, 3}, {{2, 3, 2}, {1, 2, 2}, {1, 1, 0}, {0, 1, 1}, {2, 1, 1}, true, true}},
      {{1, 1, 3, 3}, {{2, 2}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, false}},     // a window of only padding
      {{2, 3, 9, 11}, {{3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false, false}},    // ResNet's stem pool
      {{1, 2, 6, 7}, {{2, 3}, {1, 2}, {0, 1}, {1, 2}, {1, 1}, true, false}},     // ceil_mode, wide padding
  };
  uint32_t seed = 500;
  for (Dtype dt : emulated_pool_dtypes())
    for (const auto& [shape, o] : cases)
      for (PoolKind kind : {PoolKind::Max, PoolKind::Avg})
        for (bool include_pad : {false, true}) {
          if (kind == PoolKind::Max && include_pad) continue;
          PoolOptions oo = o;
          oo.count_include_pad = include_pad;
          SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_to_string(shape) +
                       (kind == PoolKind::Max ? " max" : include_pad ? " avg incl. pad" : " avg"));
          Array x = pool_input(shape, dt, ++seed);
          Array ref = kind == PoolKind::Max ? max_pool(x, oo) : avg_pool(x, oo);
          ref.eval();
          EXPECT_TRUE(bit_equal(emulate_pool(x, ref.shape(), oo, kind), ref));
          // The same through a transposed (non-contiguous) view.
          Shape perm_shape = shape;
          std::swap(perm_shape[0], perm_shape[1]);
          std::vector<int> perm(shape.size());
          for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int>(i);
          std::swap(perm[0], perm[1]);
          Array xt = transpose(pool_input(perm_shape, dt, seed + 1000), perm);
          Array ref_t = kind == PoolKind::Max ? max_pool(xt, oo) : avg_pool(xt, oo);
          EXPECT_TRUE(bit_equal(emulate_pool(xt, ref_t.shape(), oo, kind), ref_t));
        }
  EXPECT_GT(max_pool2d_runs, 20);  // the 2-D kernel was checked on the cases it takes
  EXPECT_GT(channels_last_pool_runs, 10);
  // An empty input whose windows are only padding: -inf / lowest for max, NaN / 0 / the count for avg.
  for (Dtype dt : {float32, int16}) {
    Array x = zeros({2, 2, 0}, dt);
    PoolOptions o{{2}, {1}, {1}, {1}, {}, false, false};
    for (PoolKind kind : {PoolKind::Max, PoolKind::Avg})
      for (bool include_pad : {false, true}) {
        if (kind == PoolKind::Max && include_pad) continue;
        o.count_include_pad = include_pad;
        Array ref = kind == PoolKind::Max ? max_pool(x, o) : avg_pool(x, o);
        EXPECT_TRUE(bit_equal(emulate_pool(x, ref.shape(), o, kind), ref));
      }
  }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaConvHost, WindowCopyPadsCropsAndMakesContiguous) {
#if SMELT_HAS_CUDA
  SMELT_REQUIRE_HOST_KERNELS();
  for (Dtype dt : {float32, float16}) {
    Array base = random_array({3, 2, 5, 6}, dt, -1, 1, 9);
    Array src = transpose(base, {1, 0, 3, 2});  // [2, 3, 6, 5], strided
    src.eval();
    for (auto [dshape, off] : {std::pair<Shape, std::vector<int64_t>>{{2, 3, 8, 9}, {-1, -3}},
                               {{2, 3, 3, 2}, {2, 1}}, {{2, 3, 6, 5}, {0, 0}}}) {
      cuda::WindowCopyArgs a = cuda::window_copy_args(src.shape(), src.strides(), dshape, off);
      std::vector<uint8_t> y(static_cast<size_t>(shape_size(dshape)) * size_of(dt));
      a.src = host_addr(src);
      a.dst = reinterpret_cast<uint64_t>(y.data());
      run_host("win" + std::to_string(size_of(dt)), &a, a.total);
      // The reference: pad (zeros) then slice, with the CPU's ops.
      Array ref = zeros(dshape, dt);
      const auto sv = as_doubles(src);
      std::vector<double> expect(static_cast<size_t>(shape_size(dshape)), 0.0);
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t c = 0; c < 3; ++c)
          for (int64_t i = 0; i < dshape[2]; ++i)
            for (int64_t j = 0; j < dshape[3]; ++j) {
              const int64_t si = i + off[0], sj = j + off[1];
              if (si < 0 || si >= 6 || sj < 0 || sj >= 5) continue;
              expect[static_cast<size_t>(((n * 3 + c) * dshape[2] + i) * dshape[3] + j)] =
                  sv[static_cast<size_t>(((n * 3 + c) * 6 + si) * 5 + sj)];
            }
      EXPECT_TRUE(bit_equal(Array(y.data(), dshape, dt), astype(Array(expect, dshape), dt)));
    }
  }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

}  // namespace
}  // namespace smelt::test
