// Kernel-source tests: compile generated CUDA source with NVRTC for sm_90 (no GPU needed).
#pragma once

#include <gtest/gtest.h>

#include <string>

#if SMELT_HAS_CUDA
#include "smelt/errors.h"
#include "src/backend/cuda/compiler.h"
#include "src/codegen/fused_program.h"

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

/// y0 = exp(float(in0) + in1) (in0 of `narrow` dtype), y1 = cast of y0 to `narrow`.
inline codegen::FusedProgram mixed_program(Dtype narrow) {
  using codegen::Instr;
  using codegen::InstrKind;
  codegen::FusedProgram p;
  p.input_dtypes = {narrow, float32};
  Instr in0{InstrKind::Input, narrow, {}, 0};
  Instr in1{InstrKind::Input, float32, {}, 1};
  Instr cast{InstrKind::Cast, float32, {0}};
  Instr add{InstrKind::Binary, float32, {2, 1}};
  add.binary = BinaryOp::Add;
  Instr ex{InstrKind::Unary, float32, {3}};
  ex.unary = UnaryOp::Exp;
  Instr back{InstrKind::Cast, narrow, {4}};
  p.instrs = {in0, in1, cast, add, ex, back};
  p.outputs = {4, 5};
  return p;
}

}  // namespace smelt::test
#endif
