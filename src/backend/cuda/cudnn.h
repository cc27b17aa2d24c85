// cuDNN for the CUDA convolutions: the subset of cuDNN 9's legacy API that smelt calls, opened with dlopen.
//
// GPU machines may have libcudnn.so.9 but no cuDNN headers, so the types, enum values and function
// signatures used here are declared below, copied from cudnn_graph.h, cudnn_ops.h and cudnn_cnn.h
// (cuDNN 9.19). tests/backend/cuda/conv_source_test.cpp checks them against the real headers
// wherever those are installed (enum values, struct layouts, every function pointer type).
#pragma once

#include <cstddef>
#include <string>

// The opaque structs of the real headers (declared there at global scope, as here, so that
// handles and descriptors have one type whichever header a file includes).
struct cudnnContext;
struct cudnnTensorStruct;
struct cudnnFilterStruct;
struct cudnnConvolutionStruct;
struct CUstream_st;

namespace smelt::cuda {

namespace dnn {

using Handle = cudnnContext*;
using TensorDesc = cudnnTensorStruct*;
using FilterDesc = cudnnFilterStruct*;
using ConvDesc = cudnnConvolutionStruct*;

// Plain enums as in the C headers (the same underlying type); the values are cuDNN's.
enum Status {
  CUDNN_STATUS_SUCCESS = 0,
  CUDNN_STATUS_BAD_PARAM = 2000,
  CUDNN_STATUS_NOT_SUPPORTED = 3000,
  CUDNN_STATUS_INTERNAL_ERROR = 4000,
  CUDNN_STATUS_EXECUTION_FAILED = 5000,
};
enum DataType {
  CUDNN_DATA_FLOAT = 0,
  CUDNN_DATA_DOUBLE = 1,
  CUDNN_DATA_HALF = 2,
  CUDNN_DATA_BFLOAT16 = 9,
};
enum MathType {
  CUDNN_DEFAULT_MATH = 0,
  CUDNN_TENSOR_OP_MATH = 1,
  CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2,
  CUDNN_FMA_MATH = 3,
};
enum TensorFormat { CUDNN_TENSOR_NCHW = 0, CUDNN_TENSOR_NHWC = 1 };
enum ConvolutionMode { CUDNN_CONVOLUTION = 0, CUDNN_CROSS_CORRELATION = 1 };
enum Determinism { CUDNN_NON_DETERMINISTIC = 0, CUDNN_DETERMINISTIC = 1 };
enum FwdAlgo {
  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM = 0,
  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM = 1,
  CUDNN_CONVOLUTION_FWD_ALGO_GEMM = 2,
  CUDNN_CONVOLUTION_FWD_ALGO_DIRECT = 3,
  CUDNN_CONVOLUTION_FWD_ALGO_FFT = 4,
  CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING = 5,
  CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD = 6,
  CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED = 7,
  CUDNN_CONVOLUTION_FWD_ALGO_COUNT = 8,
};
enum BwdDataAlgo {
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 = 0,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 = 1,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT = 2,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING = 3,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD = 4,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED = 5,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT = 6,
};

/// cudnnConvolutionFwdAlgoPerf_t.
struct FwdAlgoPerf {
  FwdAlgo algo;
  Status status;
  float time;
  size_t memory;
  Determinism determinism;
  MathType mathType;
  int reserved[3];
};
/// cudnnConvolutionBwdDataAlgoPerf_t.
struct BwdDataAlgoPerf {
  BwdDataAlgo algo;
  Status status;
  float time;
  size_t memory;
  Determinism determinism;
  MathType mathType;
  int reserved[3];
};

}  // namespace dnn

// X(name, return type, parameter list): the functions smelt calls, with cuDNN's signatures.
#define SMELT_CUDNN_FNS(X)                                                                                        \
  X(cudnnGetVersion, size_t, (void))                                                                              \
  X(cudnnGetErrorString, const char*, (dnn::Status))                                                              \
  X(cudnnCreate, dnn::Status, (dnn::Handle*))                                                                     \
  X(cudnnSetStream, dnn::Status, (dnn::Handle, CUstream_st*))                                                     \
  X(cudnnCreateTensorDescriptor, dnn::Status, (dnn::TensorDesc*))                                                 \
  X(cudnnSetTensorNdDescriptor, dnn::Status, (dnn::TensorDesc, dnn::DataType, int, const int*, const int*))       \
  X(cudnnDestroyTensorDescriptor, dnn::Status, (dnn::TensorDesc))                                                 \
  X(cudnnCreateFilterDescriptor, dnn::Status, (dnn::FilterDesc*))                                                 \
  X(cudnnSetFilterNdDescriptor, dnn::Status, (dnn::FilterDesc, dnn::DataType, dnn::TensorFormat, int, const int*)) \
  X(cudnnDestroyFilterDescriptor, dnn::Status, (dnn::FilterDesc))                                                 \
  X(cudnnCreateConvolutionDescriptor, dnn::Status, (dnn::ConvDesc*))                                              \
  X(cudnnSetConvolutionNdDescriptor, dnn::Status,                                                                 \
    (dnn::ConvDesc, int, const int*, const int*, const int*, dnn::ConvolutionMode, dnn::DataType))                \
  X(cudnnSetConvolutionGroupCount, dnn::Status, (dnn::ConvDesc, int))                                             \
  X(cudnnSetConvolutionMathType, dnn::Status, (dnn::ConvDesc, dnn::MathType))                                     \
  X(cudnnDestroyConvolutionDescriptor, dnn::Status, (dnn::ConvDesc))                                              \
  X(cudnnGetConvolutionForwardAlgorithmMaxCount, dnn::Status, (dnn::Handle, int*))                                \
  X(cudnnGetConvolutionForwardAlgorithm_v7, dnn::Status,                                                          \
    (dnn::Handle, dnn::TensorDesc, dnn::FilterDesc, dnn::ConvDesc, dnn::TensorDesc, int, int*, dnn::FwdAlgoPerf*)) \
  X(cudnnGetConvolutionForwardWorkspaceSize, dnn::Status,                                                         \
    (dnn::Handle, dnn::TensorDesc, dnn::FilterDesc, dnn::ConvDesc, dnn::TensorDesc, dnn::FwdAlgo, size_t*))       \
  X(cudnnConvolutionForward, dnn::Status,                                                                         \
    (dnn::Handle, const void*, dnn::TensorDesc, const void*, dnn::FilterDesc, const void*, dnn::ConvDesc,         \
     dnn::FwdAlgo, void*, size_t, const void*, dnn::TensorDesc, void*))                                           \
  X(cudnnGetConvolutionBackwardDataAlgorithmMaxCount, dnn::Status, (dnn::Handle, int*))                           \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7, dnn::Status,                                                     \
    (dnn::Handle, dnn::FilterDesc, dnn::TensorDesc, dnn::ConvDesc, dnn::TensorDesc, int, int*,                    \
     dnn::BwdDataAlgoPerf*))                                                                                      \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize, dnn::Status,                                                    \
    (dnn::Handle, dnn::FilterDesc, dnn::TensorDesc, dnn::ConvDesc, dnn::TensorDesc, dnn::BwdDataAlgo, size_t*))   \
  X(cudnnConvolutionBackwardData, dnn::Status,                                                                    \
    (dnn::Handle, const void*, dnn::FilterDesc, const void*, dnn::TensorDesc, const void*, dnn::ConvDesc,         \
     dnn::BwdDataAlgo, void*, size_t, const void*, dnn::TensorDesc, void*))

/// cuDNN's entry points; `<name>_fn` is each one's pointer type.
struct CudnnApi {
#define X(name, ret, params) \
  using name##_fn = ret(*) params; \
  name##_fn name = nullptr;
  SMELT_CUDNN_FNS(X)
#undef X
};

/// cuDNN, opened on first use ("libcudnn.so.9", then "libcudnn.so"); null when it cannot be
/// loaded or lacks a function (`why` says which). Never throws: callers fall back to their own
/// kernels.
const CudnnApi* cudnn(std::string* why = nullptr);

/// Whether convolutions may use cuDNN (they also need cudnn() to load): the environment variable
/// SMELT_CUDNN=0 turns it off (read once); set_cudnn_enabled overrides it.
bool cudnn_enabled();
/// Turns cuDNN on or off for the whole process (tests run both paths) until called again.
void set_cudnn_enabled(bool enabled);

/// "<what>: <call> failed: <cuDNN's error string>".
std::string cudnn_error(const CudnnApi& api, dnn::Status status, const char* call, const std::string& what);

}  // namespace smelt::cuda
