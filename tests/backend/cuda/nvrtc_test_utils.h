// Kernel-source tests: compile generated CUDA source with NVRTC for sm_90 (no GPU needed).
#pragma once

#include <gtest/gtest.h>

#include <string>

#if SMELT_HAS_CUDA
#include "smelt/errors.h"
#include "src/backend/cuda/compiler.h"

namespace smelt::test {

/// Compiles `body` after the device preamble for sm_90 (SASS, or PTX with `sass` false). A source
/// NVRTC rejects fails the test; a machine where NVRTC cannot be opened skips it.
inline void expect_compiles(const std::string& body, const std::string& what = "test", bool sass = true) {
  try {
    std::string image = cuda::nvrtc_compile(90, std::string(cuda::device_preamble()) + body, sass, what);
    EXPECT_FALSE(image.empty()) << what;
  } catch (const DeviceError& e) {
    if (std::string(e.what()).find("NVRTC could not compile") != std::string::npos) FAIL() << e.what();
    GTEST_SKIP() << "NVRTC is not usable here: " << e.what();
  }
}

}  // namespace smelt::test
#endif
