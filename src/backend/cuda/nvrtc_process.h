// NVRTC compiles in the smelt-nvrtc helper process: finding the helper, running it, reading back.
#pragma once

#include <optional>
#include <string>

#include "src/backend/cuda/nvrtc_program.h"

namespace smelt::cuda {

/// Which helper compiles run in, from $SMELT_CUDA_NVRTC_HELPER (read on every call): unset or
/// "auto", the helper found next to the loaded libsmelt (the build tree), else in the install
/// tree's <libdir>/<libexecdir relative to it>/smelt/smelt-nvrtc or
/// <libdir>/../libexec/smelt/smelt-nvrtc (searched once), used for the compiles that start while
/// another compile of the process runs (`always` false: a lone compile runs in-process, which
/// spares the helper's start, 20 ms of NVRTC's own set-up); "1", that helper for every compile;
/// a path, that program for every compile; "0", none. "" when none is used; `why` then says why.
std::string nvrtc_helper_path(std::string& why, bool& always);

/// The file the process loaded NVRTC from (dladdr on `api`'s entry point), or "" when unknown.
std::string nvrtc_library_path(const NvrtcApi& api);

/// Compiles `source` in a `helper` process (posix_spawn; source and result through files in a
/// private temporary folder) with the NVRTC at `nvrtc_library` ("": the helper's own search).
/// Returns the outcome (Compiled or Rejected), or nullopt when the mechanism itself failed (no
/// helper, spawn failure, crash, unreadable output): `why` says what, and the caller compiles
/// in-process instead.
std::optional<NvrtcOutcome> compile_in_helper(const std::string& helper, const std::string& nvrtc_library,
                                              int compute_capability, const std::string& source, bool sass,
                                              std::string& why);

}  // namespace smelt::cuda
