// Opens cuDNN with dlopen at first use (like the driver, NVRTC and cuBLASLt in runtime.cpp).
//
// cuDNN is optional: a missing or unusable library only means that the convolutions run on
// smelt's own kernels, so nothing here throws.
#include "src/backend/cuda/cudnn.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#ifndef SMELT_CUDA_LIB_DIR
#define SMELT_CUDA_LIB_DIR "/usr/local/cuda/lib64"
#endif

namespace smelt::cuda {

namespace {

struct CudnnHolder {
  std::unique_ptr<CudnnApi> api;  // null: unusable
  std::string why;
};

CudnnHolder load_cudnn() {
  CudnnHolder h;
  // cuDNN 9's libcudnn.so.9 is a shim that exports the whole API and opens its sub-libraries
  // (libcudnn_cnn, libcudnn_ops, ...) itself, on demand.
  const std::vector<std::string> names = {"libcudnn.so.9", std::string(SMELT_CUDA_LIB_DIR) + "/libcudnn.so.9",
                                          "libcudnn.so"};
  void* lib = nullptr;
  for (const auto& n : names)
    if ((lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
  if (!lib) {
    h.why = "cuDNN could not be loaded (tried libcudnn.so.9, libcudnn.so)";
    return h;
  }
  auto api = std::make_unique<CudnnApi>();
  std::string missing;
#define X(name, ret, params)                                                 \
  api->name = reinterpret_cast<CudnnApi::name##_fn>(dlsym(lib, #name));      \
  if (!api->name) missing += std::string(missing.empty() ? "" : ", ") + #name;
  SMELT_CUDNN_FNS(X)
#undef X
  if (!missing.empty()) {
    h.why = "cuDNN lacks " + missing;
    return h;
  }
  // The legacy API kept its signatures through cuDNN 9; an older major has other ones.
  if (api->cudnnGetVersion() < 90000) {
    h.why = "cuDNN " + std::to_string(api->cudnnGetVersion()) + " is older than 9";
    return h;
  }
  h.api = std::move(api);
  return h;
}

const CudnnHolder& holder() {
  static CudnnHolder* h = new CudnnHolder(load_cudnn());  // never destroyed (used at exit)
  return *h;
}

// -1: follow SMELT_CUDNN; 0/1: set by set_cudnn_enabled.
std::atomic<int> g_override{-1};

}  // namespace

const CudnnApi* cudnn(std::string* why) {
  const CudnnHolder& h = holder();
  if (why) *why = h.why;
  return h.api.get();
}

bool cudnn_enabled() {
  const int o = g_override.load(std::memory_order_relaxed);
  if (o >= 0) return o == 1;
  static const bool from_env = [] {
    const char* v = std::getenv("SMELT_CUDNN");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return from_env;
}

void set_cudnn_enabled(bool enabled) { g_override.store(enabled ? 1 : 0, std::memory_order_relaxed); }

std::string cudnn_error(const CudnnApi& api, dnn::Status status, const char* call, const std::string& what) {
  const char* text = api.cudnnGetErrorString(status);
  return what + ": " + call + " failed: " + (text ? text : "cuDNN status " + std::to_string(static_cast<int>(status)));
}

}  // namespace smelt::cuda
