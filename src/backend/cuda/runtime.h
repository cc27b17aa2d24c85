// The CUDA runtime layer: the driver, NVRTC and cuBLASLt opened with dlopen, devices, streams.
#pragma once

#include <cuda.h>
#include <cublasLt.h>
#include <nvrtc.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "smelt/device.h"

namespace smelt {
class Allocator;
struct Buffer;
using BufferPtr = std::shared_ptr<Buffer>;
}

namespace smelt::cuda {

/// Driver entry points, resolved through cuGetProcAddress for the header's CUDA version.
/// cuGetProcAddress hands out the newest variant of a name up to that version, whose signature may
/// differ from the unversioned declaration decltype sees (CUDA 13: cuCtxSynchronize is
/// cuCtxSynchronize_v2(CUcontext)): check cudaTypedefs.h's PFN_<name>_v<version> list before adding
/// a name (cuFuncGetAttribute and cuFuncSetAttribute have one variant each).
struct DriverApi {
#define SMELT_CU_FNS(X)                                                                            \
  X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute)          \
  X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuGetErrorString)           \
  X(cuGetErrorName) X(cuStreamCreate) X(cuStreamSynchronize) X(cuMemAlloc) X(cuMemFree)            \
  X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemsetD8Async)                \
  X(cuMemsetD16Async) X(cuMemsetD32Async) X(cuModuleLoadData) X(cuModuleGetFunction)               \
  X(cuLaunchKernel) X(cuMemGetInfo) X(cuOccupancyMaxPotentialBlockSize) X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuDriverGetVersion)          \
  X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuModuleUnload) X(cuEventCreate) X(cuEventRecord)       \
  X(cuEventQuery) X(cuEventDestroy) X(cuEventSynchronize) X(cuEventElapsedTime)
#define X(name) decltype(&::name) name = nullptr;
  SMELT_CU_FNS(X)
#undef X

  // CUDA graphs (graph.cpp). Optional: a driver without them runs compiled entries without graphs
  // (`graphs_missing` says why). Resolved with dlsym of the exact symbol the header maps each
  // name to (cuStreamBeginCapture_v2, cuGraphInstantiateWithFlags, cuGraphKernelNodeGetParams_v2,
  // ...), not through cuGetProcAddress: for some names that returns a newer version with another
  // signature than the header declares (as it did for cuCtxSynchronize under CUDA 13).
#define SMELT_CU_GRAPH_FNS(X)                                                                   \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate)      \
  X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuGraphGetNodes) X(cuGraphNodeGetType) \
  X(cuGraphKernelNodeGetParams) X(cuGraphExecKernelNodeSetParams) X(cuFuncGetParamInfo)            \
  X(cuGraphMemsetNodeGetParams) X(cuGraphExecMemsetNodeSetParams) X(cuGraphMemcpyNodeGetParams)       \
  X(cuGraphExecMemcpyNodeSetParams) X(cuPointerGetAttribute) X(cuGraphCreate) X(cuGraphAddKernelNode)
#define X(name) decltype(&::name) name = nullptr;
  SMELT_CU_GRAPH_FNS(X)
#undef X
  std::string graphs_missing;  // empty: every graph function above was found
};

struct NvrtcApi {
#define SMELT_NVRTC_FNS(X)                                                                       \
  X(nvrtcCreateProgram) X(nvrtcDestroyProgram) X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) \
  X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcGetPTXSize) X(nvrtcGetPTX)  \
  X(nvrtcGetErrorString) X(nvrtcVersion)
#define X(name) decltype(&::name) name = nullptr;
  SMELT_NVRTC_FNS(X)
#undef X
};

struct CublasLtApi {
#define SMELT_CUBLASLT_FNS(X)                                                                         \
  X(cublasLtCreate) X(cublasLtMatmul) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy)        \
  X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)      \
  X(cublasLtMatrixLayoutSetAttribute) X(cublasLtMatmulPreferenceCreate)                               \
  X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)                          \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtGetStatusString)
#define X(name) decltype(&::name) name = nullptr;
  SMELT_CUBLASLT_FNS(X)
#undef X
};

/// The driver, or null when libcuda.so.1 is missing or cuInit fails (no GPU: not an error).
const DriverApi* driver();
/// The driver; throws DeviceError when there is none.
const DriverApi& require_driver(const char* what);
/// NVRTC; throws DeviceError naming the library when it cannot be loaded.
const NvrtcApi& nvrtc();
/// cuBLASLt; throws DeviceError naming the library when it cannot be loaded.
const CublasLtApi& cublaslt();

/// Throws DeviceError "<what>: <call> failed: <CUDA_ERROR_NAME> (<description>)" unless CUDA_SUCCESS.
void check(CUresult r, const char* call, const std::string& what);
void check_nvrtc(nvrtcResult r, const char* call, const std::string& what);
void check_cublas(cublasStatus_t r, const char* call, const std::string& what);

/// Per-GPU state: the primary context (made current on the calling thread by `activate`), the
/// default stream on which every kernel and copy of the device runs in order unless the thread
/// holds a StreamScope, the streams made by Stream::create, and the device's properties.
struct DeviceState {
  int index = 0;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;  // the default stream (id 0)
  // Streams with id 1, 2, ... (never destroyed: Stream handles may outlive any owner).
  mutable std::mutex streams_mutex;
  std::vector<CUstream> streams;
  // Set for good when the first stream is made: from then on every node waits for its stream
  // at its end, so an array is complete whichever stream reads or frees it next.
  std::atomic<bool> multi_stream{false};
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  // Shared memory a block may use: without opting in (48 KiB), and after a kernel opts in
  // through CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (227 KiB on sm_90).
  int smem_per_block = 48 * 1024, smem_per_block_optin = 48 * 1024;
  std::string name;
};

/// The state of GPU `index`, initialized on first use and made current on this thread.
DeviceState& device_state(int index);

/// The CUstream of stream `id` of the device (0: the default stream).
CUstream stream_handle(const DeviceState& s, uint64_t id);
/// The calling thread's current stream of the device: every launch, copy, memset, cuBLASLt and
/// cuDNN call goes there.
CUstream current_stream(const DeviceState& s);
/// Called at the end of each node evaluated on the device: once several streams exist, waits for
/// the thread's current stream, so that the node's outputs are complete for any other stream
/// (cross-stream ordering) and the buffers it read may be freed by any thread.
/// Cheap while no stream exists (one atomic load, no device lookup): the default path.
void finish_node(Device device, const char* what);

/// Waits for every stream of the device (its default stream and those Stream::create made).
void synchronize_all_streams(const DeviceState& s, const char* what);

/// A stream capture in progress on the calling thread (graph.cpp): while set, every launch of
/// `device` from this thread goes to `stream` (current_stream returns it), finish_node does not
/// wait (a capture cannot synchronize; the graph's launch waits once instead), and
/// allocator(device) returns `allocator`, which keeps every block the captured work uses, and
/// each launch adds its kernel's module to `kernels`, so that the graph keeps them loaded.
/// Index kernels that validate their indices (gathers, scatters) cannot read their status word
/// back during a capture: they add it to `index_checks` (defer_index_check) and the graph reads
/// every such word after each launch (~0: every index was in range).
struct ThreadCapture {
  int device = -1;
  CUstream stream = nullptr;
  Allocator* allocator = nullptr;
  std::vector<std::shared_ptr<const void>>* kernels = nullptr;
  std::vector<BufferPtr>* index_checks = nullptr;
};
/// The calling thread's capture, or null.
const ThreadCapture* thread_capture();
/// Sets (or, with null, clears) the calling thread's capture.
void set_thread_capture(const ThreadCapture* capture);
/// Whether a validation word (8 bytes at the start of `status`: the first bad index position, ~0
/// when none) is checked after the graph launch instead of now: true while `device` is being
/// captured by this thread (the word is then kept in the capture's index_checks).
bool defer_index_check(int device, const BufferPtr& status);

}  // namespace smelt::cuda
