// One NVRTC compile with smelt's options: shared by libsmelt and the smelt-nvrtc helper process.
#include "src/backend/cuda/nvrtc_program.h"

#include <dlfcn.h>

#include <cstdio>

#ifndef SMELT_CUDA_MAJOR
#define SMELT_CUDA_MAJOR 13
#endif
#ifndef SMELT_CUDA_LIB_DIR
#define SMELT_CUDA_LIB_DIR "/usr/local/cuda/lib64"
#endif

namespace smelt::cuda {

#define SMELT_NVRTC_STR2(x) #x
#define SMELT_NVRTC_STR(x) SMELT_NVRTC_STR2(x)

std::vector<std::string> toolkit_library_names(const std::string& stem) {
  const std::string major = SMELT_NVRTC_STR(SMELT_CUDA_MAJOR);
  return {stem + ".so." + major, std::string(SMELT_CUDA_LIB_DIR) + "/" + stem + ".so." + major,
          "/usr/local/cuda/lib64/" + stem + ".so." + major, stem + ".so"};
}

void fill_nvrtc_api(void* lib, NvrtcApi& api, std::string& missing) {
#define X(name)                                                       \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(lib, #name)); \
  if (!api.name) missing += std::string(missing.empty() ? "" : ", ") + #name;
  SMELT_NVRTC_FNS(X)
#undef X
}

std::string nvrtc_version_of(const NvrtcApi& api) {
  int major = 0, minor = 0;
  if (api.nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unavailable";
  return std::to_string(major) + "." + std::to_string(minor);
}

// Bit-exact IEEE arithmetic as on the CPU: no FMA contraction, IEEE division and square root,
// denormals kept. Matches the CPU build's -ffp-contract=off -fno-fast-math.
std::vector<std::string> nvrtc_options(int compute_capability, bool sass, const std::string& nvrtc_version) {
  const std::string cc = std::to_string(compute_capability);
  std::vector<std::string> options = {sass ? "--gpu-architecture=sm_" + cc : "--gpu-architecture=compute_" + cc,
                                      "--std=c++17", "--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false",
                                      "-default-device"};
  // -minimal (NVRTC 12.4 and later) leaves out the texture, device-runtime and runtime-API
  // declarations that no smelt kernel uses: the same cubin (checked on W4's and W6's row
  // kernels), about 5-10 ms less per build (the W9 block's first call builds seven).
  int major = 0, minor = 0;
  if (std::sscanf(nvrtc_version.c_str(), "%d.%d", &major, &minor) == 2 && (major > 12 || (major == 12 && minor >= 4)))
    options.push_back("-minimal");
  return options;
}

NvrtcOutcome run_nvrtc(const NvrtcApi& n, int compute_capability, const std::string& source, bool sass,
                       const std::string& nvrtc_version) {
  NvrtcOutcome out;
  auto failed = [&](nvrtcResult r, const char* call) {
    out.status = NvrtcOutcome::Failed;
    out.call = call;
    out.error = n.nvrtcGetErrorString(r);
    return out;
  };
  nvrtcProgram prog = nullptr;
  if (nvrtcResult r = n.nvrtcCreateProgram(&prog, source.c_str(), "smelt_kernel.cu", 0, nullptr, nullptr);
      r != NVRTC_SUCCESS)
    return failed(r, "nvrtcCreateProgram");
  struct Destroy {
    const NvrtcApi& n;
    nvrtcProgram* p;
    ~Destroy() { n.nvrtcDestroyProgram(p); }
  } destroy{n, &prog};
  const auto opts = nvrtc_options(compute_capability, sass, nvrtc_version);
  std::vector<const char*> argv;
  for (auto& o : opts) argv.push_back(o.c_str());
  if (nvrtcResult r = n.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data()); r != NVRTC_SUCCESS) {
    size_t log_size = 0;
    n.nvrtcGetProgramLogSize(prog, &log_size);
    std::string log(log_size, '\0');
    if (log_size) n.nvrtcGetProgramLog(prog, log.data());
    out.status = NvrtcOutcome::Rejected;
    out.error = n.nvrtcGetErrorString(r);
    out.log = std::move(log);
    return out;
  }
  size_t size = 0;
  if (sass) {
    if (nvrtcResult r = n.nvrtcGetCUBINSize(prog, &size); r != NVRTC_SUCCESS) return failed(r, "nvrtcGetCUBINSize");
    out.image.resize(size);
    if (nvrtcResult r = n.nvrtcGetCUBIN(prog, out.image.data()); r != NVRTC_SUCCESS) return failed(r, "nvrtcGetCUBIN");
  } else {
    if (nvrtcResult r = n.nvrtcGetPTXSize(prog, &size); r != NVRTC_SUCCESS) return failed(r, "nvrtcGetPTXSize");
    out.image.resize(size);
    if (nvrtcResult r = n.nvrtcGetPTX(prog, out.image.data()); r != NVRTC_SUCCESS) return failed(r, "nvrtcGetPTX");
  }
  out.status = NvrtcOutcome::Compiled;
  return out;
}

}  // namespace smelt::cuda
