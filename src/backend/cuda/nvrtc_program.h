// One NVRTC compile with smelt's options: shared by libsmelt and the smelt-nvrtc helper process.
#pragma once

#include <string>
#include <vector>

#include "src/backend/cuda/runtime.h"

// This file and nvrtc_program.cpp are compiled into both libsmelt and tools/smelt-nvrtc (which
// links nothing else of smelt, to start fast): the options and the calls cannot drift apart, so a
// kernel compiled in the helper is byte for byte the one compiled in the process. Nothing here
// throws smelt's errors or emits telemetry; callers turn the outcome into those.
namespace smelt::cuda {

/// The names dlopen tries for the toolkit library `stem` ("libnvrtc"): plain names first (the
/// loader's path), then the toolkit's library folder seen at build time.
std::vector<std::string> toolkit_library_names(const std::string& stem);

/// Resolves NVRTC's entry points in the dlopen'ed `lib`; the names not found are added to
/// `missing` (comma-separated).
void fill_nvrtc_api(void* lib, NvrtcApi& api, std::string& missing);

/// "<major>.<minor>" of `api`'s NVRTC, or "unavailable" when it does not say.
std::string nvrtc_version_of(const NvrtcApi& api);

/// smelt's NVRTC options for compute capability `compute_capability` (90: sm_90), SASS (`sass`)
/// or PTX, for NVRTC `nvrtc_version` ("13.0").
std::vector<std::string> nvrtc_options(int compute_capability, bool sass, const std::string& nvrtc_version);

/// What one compile gave.
struct NvrtcOutcome {
  enum Status {
    Compiled,  // `image` is the cubin or PTX
    Rejected,  // nvrtcCompileProgram failed: `error` is its nvrtcGetErrorString, `log` NVRTC's log
    Failed,    // another NVRTC call failed: `call` names it, `error` is its nvrtcGetErrorString
  };
  Status status = Failed;
  std::string image, error, log, call;
};

/// Compiles `source` (the whole translation unit) as "smelt_kernel.cu" with nvrtc_options.
NvrtcOutcome run_nvrtc(const NvrtcApi& api, int compute_capability, const std::string& source, bool sass,
                       const std::string& nvrtc_version);

}  // namespace smelt::cuda
