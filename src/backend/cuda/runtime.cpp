// The CUDA runtime layer: dlopen of the driver, NVRTC and cuBLASLt, error messages, device state.
//
// Nothing here is linked against a CUDA library: a build with CUDA must load on machines without a
// GPU, a driver or the toolkit's libraries. A missing driver means "no GPU"; a missing NVRTC or
// cuBLASLt is an error only when a kernel needs it.
#include "src/backend/cuda/runtime.h"

#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include <memory>
#include <mutex>
#include <vector>

#include "smelt/errors.h"
#include "smelt/telemetry.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/nvrtc_program.h"
#include "src/core/stream_state.h"

#ifndef SMELT_CUDA_MAJOR
#define SMELT_CUDA_MAJOR 13
#endif

namespace smelt::cuda {

namespace {

#define SMELT_STR2(x) #x
#define SMELT_STR(x) SMELT_STR2(x)

/// dlopen of the first name that loads (toolkit_library_names' order).
void* open_first(const std::vector<std::string>& names) {
  for (const auto& n : names)
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  return nullptr;
}

struct DriverHolder {
  std::unique_ptr<DriverApi> api;  // null: no usable driver
  std::string why;                 // why not, for DeviceError messages
};

DriverHolder load_driver() {
  DriverHolder h;
  void* lib = open_first({"libcuda.so.1"});
  if (!lib) {
    h.why = "the CUDA driver (libcuda.so.1) could not be loaded";
    return h;
  }
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
  if (!get) {
    h.why = "the CUDA driver is too old (no cuGetProcAddress_v2)";
    return h;
  }
  auto api = std::make_unique<DriverApi>();
  std::string missing;
#define X(name)                                                                              \
  {                                                                                          \
    void* p = nullptr;                                                                       \
    CUdriverProcAddressQueryResult q{};                                                      \
    if (get(#name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS || !p) \
      missing += std::string(missing.empty() ? "" : ", ") + #name;                           \
    api->name = reinterpret_cast<decltype(api->name)>(p);                                    \
  }
  SMELT_CU_FNS(X)
#undef X
  if (!missing.empty()) {
    h.why = "the CUDA driver lacks " + missing + " (driver older than CUDA " SMELT_STR(SMELT_CUDA_MAJOR) "?)";
    return h;
  }
  // The graph functions by their header's (versioned) symbol: SMELT_XSTR expands the name first.
#define SMELT_XSTR(x) SMELT_STR(x)
#define X(name)                                                                                         \
  api->name = reinterpret_cast<decltype(api->name)>(dlsym(lib, SMELT_XSTR(name)));                      \
  if (!api->name) api->graphs_missing += std::string(api->graphs_missing.empty() ? "" : ", ") + SMELT_XSTR(name);
  SMELT_CU_GRAPH_FNS(X)
#undef X
#undef SMELT_XSTR
  if (!api->graphs_missing.empty()) api->graphs_missing = "the CUDA driver lacks " + api->graphs_missing;
  if (CUresult r = api->cuInit(0); r != CUDA_SUCCESS) {
    const char* name = nullptr;
    api->cuGetErrorName(r, &name);
    h.why = std::string("cuInit failed: ") + (name ? name : "unknown error");
    return h;
  }
  h.api = std::move(api);
  return h;
}

DriverHolder& driver_holder() {
  static DriverHolder* h = new DriverHolder(load_driver());  // never destroyed (used at exit)
  return *h;
}

template <class Api>
std::unique_ptr<Api> load_library(const std::vector<std::string>& names, const char* label,
                                  void (*fill)(void*, Api&, std::string&), std::string& why) {
  const auto t0 = std::chrono::steady_clock::now();
  void* lib = open_first(names);
  // Loading is part of a first call's time (cuBLASLt's 500 MB take 70 ms or more): say so.
  if (telemetry::enabled())
    telemetry::emit({"cuda.library.load",
                     std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                     {{"library", label}, {"loaded", lib ? "true" : "false"}}});
  if (!lib) {
    why = std::string(label) + " could not be loaded (tried " + names.front() + ")";
    return nullptr;
  }
  auto api = std::make_unique<Api>();
  std::string missing;
  fill(lib, *api, missing);
  if (!missing.empty()) {
    why = std::string(label) + " lacks " + missing;
    return nullptr;
  }
  return api;
}

void fill_cublaslt(void* lib, CublasLtApi& api, std::string& missing) {
#define X(name)                                                         \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(lib, #name));   \
  if (!api.name) missing += std::string(missing.empty() ? "" : ", ") + #name;
  SMELT_CUBLASLT_FNS(X)
#undef X
}

}  // namespace

const DriverApi* driver() { return driver_holder().api.get(); }

const DriverApi& require_driver(const char* what) {
  auto& h = driver_holder();
  if (!h.api) throw DeviceError(std::string(what) + ": no CUDA GPU is usable: " + h.why);
  return *h.api;
}

const NvrtcApi& nvrtc() {
  static std::string why;
  static std::unique_ptr<NvrtcApi> api = load_library<NvrtcApi>(toolkit_library_names("libnvrtc"), "NVRTC", fill_nvrtc_api, why);
  if (!api) throw DeviceError("cuda kernel build: " + why);
  return *api;
}

const CublasLtApi& cublaslt() {
  static std::string why;
  static std::unique_ptr<CublasLtApi> api =
      load_library<CublasLtApi>(toolkit_library_names("libcublasLt"), "cuBLASLt", fill_cublaslt, why);
  if (!api) throw DeviceError("matmul: " + why);
  return *api;
}

void check(CUresult r, const char* call, const std::string& what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* desc = nullptr;
  if (const DriverApi* d = driver()) {
    d->cuGetErrorName(r, &name);
    d->cuGetErrorString(r, &desc);
  }
  std::string msg = what + ": " + call + " failed: " + (name ? name : "CUDA error " + std::to_string(r)) +
                    (desc ? std::string(" (") + desc + ")" : "");
  if (r == CUDA_ERROR_OUT_OF_MEMORY) throw OutOfMemory(msg);
  throw DeviceError(msg);
}

void check_nvrtc(nvrtcResult r, const char* call, const std::string& what) {
  if (r == NVRTC_SUCCESS) return;
  throw DeviceError(what + ": " + call + " failed: " + nvrtc().nvrtcGetErrorString(r));
}

void check_cublas(cublasStatus_t r, const char* call, const std::string& what) {
  if (r == CUBLAS_STATUS_SUCCESS) return;
  throw DeviceError(what + ": " + call + " failed: " + cublaslt().cublasLtGetStatusString(r));
}

int device_count() {
  const DriverApi* d = driver();
  if (!d) return 0;
  int n = 0;
  if (d->cuDeviceGetCount(&n) != CUDA_SUCCESS) return 0;
  return n;
}

namespace {

/// The thread that maps NVRTC and cuBLASLt while the program goes on (a compiled function's
/// first call would otherwise wait for them: cuBLASLt alone takes 70 ms or more, seconds from a
/// cold disk). It only calls dlopen (the first use's own dlopen then finds the library loaded)
/// and touches nothing of smelt's. A process that exits meanwhile joins it first (an atexit
/// handler registered with it runs before the destructors of everything made earlier), so no
/// library is still initializing while the process tears down; a forked child, which does not
/// have the thread, does not join. SMELT_CUDA_PRELOAD=0: each loads at first use.
void start_preload() {
  static std::thread* thread = nullptr;
  static pid_t owner = 0;
  if (thread) return;
  owner = ::getpid();
  thread = new std::thread([names = std::vector<std::vector<std::string>>{toolkit_library_names("libnvrtc"), toolkit_library_names("libcublasLt")}] {
    for (const auto& candidates : names) open_first(candidates);
  });
  std::atexit([] {
    if (::getpid() == owner && thread->joinable()) thread->join();
  });
}

}  // namespace

namespace {
/// The device this thread used last: device_state runs several times for each eager op (the
/// allocator, the launch, the stream), and its slow path (a lock, a device count, a context
/// switch) cost about a microsecond of each op's host time on the H200.
thread_local DeviceState* t_last_device = nullptr;
}  // namespace

DeviceState& device_state(int index) {
  // Fast path: the thread's last device, whose context is still current on it (other code on
  // the thread, a user's or a library's, may have made another one current).
  if (DeviceState* last = t_last_device; last && last->index == index) {
    CUcontext current = nullptr;
    if (driver()->cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == last->ctx) return *last;
  }
  static std::mutex m;
  static std::vector<std::unique_ptr<DeviceState>>* states = new std::vector<std::unique_ptr<DeviceState>>();
  const std::string what = "cuda:" + std::to_string(index);
  const DriverApi& d = require_driver(what.c_str());
  DeviceState* s = nullptr;
  {
    std::lock_guard lock(m);
    const int n = device_count();
    if (index < 0 || index >= n)
      throw DeviceError(what + ": no such GPU (" + std::to_string(n) + " visible)");
    if (states->empty()) states->resize(static_cast<size_t>(n));
    auto& slot = (*states)[static_cast<size_t>(index)];
    if (!slot) {
      auto st = std::make_unique<DeviceState>();
      st->index = index;
      check(d.cuDeviceGet(&st->dev, index), "cuDeviceGet", what);
      check(d.cuDevicePrimaryCtxRetain(&st->ctx, st->dev), "cuDevicePrimaryCtxRetain", what);
      check(d.cuCtxSetCurrent(st->ctx), "cuCtxSetCurrent", what);
      check(d.cuStreamCreate(&st->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", what);
      check(d.cuDeviceGetAttribute(&st->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, st->dev),
            "cuDeviceGetAttribute", what);
      check(d.cuDeviceGetAttribute(&st->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, st->dev),
            "cuDeviceGetAttribute", what);
      check(d.cuDeviceGetAttribute(&st->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, st->dev),
            "cuDeviceGetAttribute", what);
      check(d.cuDeviceGetAttribute(&st->smem_per_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, st->dev),
            "cuDeviceGetAttribute", what);
      check(d.cuDeviceGetAttribute(&st->smem_per_block_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                   st->dev),
            "cuDeviceGetAttribute", what);
      char name[256] = {};
      check(d.cuDeviceGetName(name, sizeof name, st->dev), "cuDeviceGetName", what);
      st->name = name;
      slot = std::move(st);
      if (const char* preload = std::getenv("SMELT_CUDA_PRELOAD"); !preload || std::string(preload) != "0") start_preload();
    }
    s = slot.get();
  }
  // Contexts are current per thread: make it current on this one.
  check(d.cuCtxSetCurrent(s->ctx), "cuCtxSetCurrent", what);
  t_last_device = s;
  return *s;
}

CUstream stream_handle(const DeviceState& s, uint64_t id) {
  if (id == 0) return s.stream;
  std::lock_guard lock(s.streams_mutex);
  SMELT_ASSERT(id <= s.streams.size(), "cuda: stream " + std::to_string(id) + " of cuda:" + std::to_string(s.index) +
                                            " was never created");
  return s.streams[id - 1];
}

namespace {
thread_local const ThreadCapture* t_capture = nullptr;
}  // namespace

const ThreadCapture* thread_capture() { return t_capture; }

bool defer_index_check(int device, const BufferPtr& status) {
  const ThreadCapture* c = t_capture;
  if (!c || c->device != device || !c->index_checks) return false;
  c->index_checks->push_back(status);
  return true;
}
void set_thread_capture(const ThreadCapture* capture) { t_capture = capture; }

CUstream current_stream(const DeviceState& s) {
  if (t_capture && t_capture->device == s.index) return t_capture->stream;
  return stream_handle(s, smelt::detail::current_stream_id(Device::cuda(s.index)));
}

namespace {
// Set (before the device's own flag) when any GPU gets its first stream.
std::atomic<bool> any_streams{false};
}  // namespace

void finish_node(Device device, const char* what) {
  if (!any_streams.load()) return;
  if (t_capture && t_capture->device == device.index) return;  // the graph's launch waits instead
  const DeviceState& s = device_state(device.index);
  if (!s.multi_stream.load()) return;
  check(driver()->cuStreamSynchronize(current_stream(s)), "cuStreamSynchronize", what);
}

uint64_t create_stream(int device) {
  DeviceState& s = device_state(device);
  const DriverApi& d = *driver();
  const std::string what = "Stream::create(cuda:" + std::to_string(device) + ")";
  CUstream st = nullptr;
  check(d.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING), "cuStreamCreate", what);
  uint64_t id;
  {
    std::lock_guard lock(s.streams_mutex);
    s.streams.push_back(st);
    id = s.streams.size();
  }
  // Work queued before the first stream existed did not wait for itself at the end of its node:
  // set the flag first, then wait for everything queued so far. A node that launched after this
  // wait sees the flag at its end and waits for its own stream.
  any_streams.store(true);
  if (!s.multi_stream.exchange(true)) synchronize_all_streams(s, what.c_str());
  return id;
}

void synchronize_all_streams(const DeviceState& s, const char* what) {
  // Stream by stream, not cuCtxSynchronize: CUDA 13's cuGetProcAddress hands out
  // cuCtxSynchronize_v2(CUcontext) for that name, which takes the context as an argument.
  const DriverApi& d = *driver();
  std::vector<CUstream> streams{s.stream};
  {
    std::lock_guard lock(s.streams_mutex);
    streams.insert(streams.end(), s.streams.begin(), s.streams.end());
  }
  for (CUstream st : streams) check(d.cuStreamSynchronize(st), "cuStreamSynchronize", what);
}

void synchronize_stream(int device, uint64_t id) {
  DeviceState& s = device_state(device);
  check(driver()->cuStreamSynchronize(stream_handle(s, id)), "cuStreamSynchronize", "synchronize");
}

}  // namespace smelt::cuda
