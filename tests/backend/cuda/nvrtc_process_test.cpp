// NVRTC compiles in the smelt-nvrtc helper process: the same cubin and the same errors as
// in-process, a fallback when the helper fails, several at once. NVRTC only (no GPU needed).
#include <gtest/gtest.h>

#include <stdio.h>
#include <sys/wait.h>

#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/nvrtc_test_utils.h"
#include "env_test_utils.h"

#if SMELT_HAS_CUDA
#include "smelt/errors.h"
#include "src/backend/cuda/compiler.h"
#include "src/backend/cuda/nvrtc_process.h"
#include "src/codegen/cuda_emitter.h"
#endif

#include "test_utils.h"

namespace smelt::test {
namespace {

#if SMELT_HAS_CUDA
/// A fused kernel of codegen's (mixed_program: y = exp(float(x0) + x1), cast back to bfloat16),
/// `scale` folded in so that each value gives another source.
std::string fused_source(int scale = 1) {
  codegen::FusedProgram p = mixed_program(bfloat16);
  for (int i = 1; i < scale; ++i) {  // y0 += x1, scale - 1 times
    codegen::Instr more{codegen::InstrKind::Binary, float32, {static_cast<int>(p.instrs.size()) - (i == 1 ? 2 : 1), 1}};
    more.binary = BinaryOp::Add;
    p.instrs.push_back(more);
    p.outputs[0] = static_cast<int>(p.instrs.size()) - 1;
  }
  return std::string(cuda::device_preamble()) + codegen::emit_cuda_kernel(p, "cc", true);
}

/// Skips the test when NVRTC cannot be used here, or no helper was built next to libsmelt.
#define SKIP_WITHOUT_NVRTC_OR_HELPER()                                                              \
  do {                                                                                              \
    if (cuda::nvrtc_version() == "unavailable") GTEST_SKIP() << "NVRTC is not usable here";          \
    std::string why;                                                                                \
    bool always = false;                                                                            \
    ScopedEnv unset("SMELT_CUDA_NVRTC_HELPER", nullptr);                                            \
    if (cuda::nvrtc_helper_path(why, always).empty()) GTEST_SKIP() << "no smelt-nvrtc helper: " << why; \
  } while (0)

/// nvrtc_build with SMELT_CUDA_NVRTC_HELPER set to `helper` ("1": always the helper found next
/// to libsmelt; null: unset).
cuda::NvrtcBuild build_with(const char* helper, const std::string& source, const std::string& what = "test",
                            bool sass = true) {
  ScopedEnv env("SMELT_CUDA_NVRTC_HELPER", helper);
  return cuda::nvrtc_build(90, source, sass, what);
}

std::string error_of(const char* helper, const std::string& source, const std::string& what) {
  try {
    build_with(helper, source, what);
  } catch (const DeviceError& e) {
    return e.what();
  }
  return "(no error)";
}
#endif

TEST(CudaNvrtcProcess, TheHelpersCubinIsTheInProcessOne) {
#if SMELT_HAS_CUDA
  SKIP_WITHOUT_NVRTC_OR_HELPER();
  const std::string source = fused_source();
  const cuda::NvrtcBuild here = build_with("0", source);
  EXPECT_FALSE(here.in_helper);
  EXPECT_EQ(here.helper_problem, "SMELT_CUDA_NVRTC_HELPER=0");
  const cuda::NvrtcBuild there = build_with("1", source);
  EXPECT_TRUE(there.in_helper) << there.helper_problem;
  ASSERT_FALSE(here.image.empty());
  EXPECT_TRUE(here.image == there.image) << "cubins differ: " << here.image.size() << " and " << there.image.size()
                                         << " bytes";
  // PTX too (the build's fallback for an NVRTC older than the GPU).
  EXPECT_EQ(build_with("0", source, "test", false).image, build_with("1", source, "test", false).image);
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaNvrtcProcess, ALoneCompileRunsInProcessByDefault) {
#if SMELT_HAS_CUDA
  SKIP_WITHOUT_NVRTC_OR_HELPER();
  // Nothing else compiles: the process's own NVRTC is free, and spares the helper's start.
  const cuda::NvrtcBuild lone = build_with(nullptr, fused_source());
  EXPECT_FALSE(lone.in_helper);
  EXPECT_EQ(lone.helper_problem, "");
  EXPECT_EQ(lone.image, build_with("auto", fused_source()).image);
  std::string why;
  bool always = true;
  {
    ScopedEnv unset("SMELT_CUDA_NVRTC_HELPER", nullptr);
    EXPECT_NE(cuda::nvrtc_helper_path(why, always), "");
    EXPECT_FALSE(always);
  }
  {
    ScopedEnv path("SMELT_CUDA_NVRTC_HELPER", "/opt/my-smelt-nvrtc");
    EXPECT_EQ(cuda::nvrtc_helper_path(why, always), "/opt/my-smelt-nvrtc");
    EXPECT_TRUE(always);
  }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaNvrtcProcess, ACompileErrorGivesTheSameMessageEitherWay) {
#if SMELT_HAS_CUDA
  SKIP_WITHOUT_NVRTC_OR_HELPER();
  const std::string source = std::string(cuda::device_preamble()) + "extern \"C\" __global__ void k() { oops; }\n";
  const std::string here = error_of("0", source, "fused kernel 'add_exp'");
  const std::string there = error_of("1", source, "fused kernel 'add_exp'");
  EXPECT_EQ(here, there);
  EXPECT_EQ(there.rfind("fused kernel 'add_exp': NVRTC could not compile the kernel: NVRTC_ERROR_COMPILATION\n", 0), 0u)
      << there;
  EXPECT_NE(there.find("identifier \"oops\" is undefined"), std::string::npos) << there;
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaNvrtcProcess, ABrokenHelperFallsBackToCompilingInProcess) {
#if SMELT_HAS_CUDA
  SKIP_WITHOUT_NVRTC_OR_HELPER();
  const std::string source = std::string(cuda::device_preamble()) +
                             "extern \"C\" __global__ void k(float* o) { o[threadIdx.x] = 2.0f; }\n";
  const std::string reference = build_with("0", source).image;
  // Missing, and a program that exits with 1 and writes nothing (as a crash mid-way would).
  const cuda::NvrtcBuild missing = build_with("/nonexistent/smelt-nvrtc", source);
  EXPECT_FALSE(missing.in_helper);
  EXPECT_EQ(missing.helper_problem, "cannot start /nonexistent/smelt-nvrtc: No such file or directory");
  EXPECT_EQ(missing.image, reference);
  const cuda::NvrtcBuild silent = build_with("/bin/false", source);
  EXPECT_FALSE(silent.in_helper);
  EXPECT_EQ(silent.helper_problem.rfind("cannot read /bin/false's output ", 0), 0u) << silent.helper_problem;
  EXPECT_EQ(silent.image, reference);
  // A program that is not the helper: its complaint is the reason.
  const cuda::NvrtcBuild other = build_with("/bin/sh", source);
  EXPECT_FALSE(other.in_helper);
  EXPECT_EQ(other.helper_problem.rfind("/bin/sh exited with status ", 0), 0u) << other.helper_problem;
  EXPECT_EQ(other.image, reference);
  // The compile error is still NVRTC's, from the in-process compile.
  EXPECT_NE(error_of("/nonexistent/smelt-nvrtc", "extern \"C\" __global__ void k() { oops; }\n", "my_op")
                .find("my_op: NVRTC could not compile the kernel"),
            std::string::npos);
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaNvrtcProcess, FourThreadsCompileThroughHelpersAtOnce) {
#if SMELT_HAS_CUDA
  SKIP_WITHOUT_NVRTC_OR_HELPER();
  ScopedEnv env("SMELT_CUDA_NVRTC_HELPER", "1");  // set before the threads start
  std::vector<std::string> sources, expected;
  for (int i = 1; i <= 4; ++i) sources.push_back(fused_source(i));
  {
    ScopedEnv off("SMELT_CUDA_NVRTC_HELPER", "0");
    for (const auto& s : sources) expected.push_back(cuda::nvrtc_build(90, s, true, "test").image);
  }
  std::vector<cuda::NvrtcBuild> got(sources.size());
  std::vector<std::string> errors(sources.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < sources.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        got[i] = cuda::nvrtc_build(90, sources[i], true, "thread " + std::to_string(i));
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < sources.size(); ++i) {
    SCOPED_TRACE("thread " + std::to_string(i));
    EXPECT_EQ(errors[i], "");
    EXPECT_TRUE(got[i].in_helper) << got[i].helper_problem;
    EXPECT_TRUE(got[i].image == expected[i]);
    for (size_t j = 0; j < i; ++j) EXPECT_FALSE(expected[i] == expected[j]) << "sources " << i << " and " << j;
  }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaNvrtcProcess, TheHelpersUsageErrorsSayWhatIsWrong) {
#if SMELT_HAS_CUDA
  SKIP_WITHOUT_NVRTC_OR_HELPER();
  std::string why;
  bool always = false;
  const std::string helper = cuda::nvrtc_helper_path(why, always);
  auto run = [&](const std::string& args, int& status) {
    std::string out;
    FILE* p = ::popen(("'" + helper + "' " + args + " 2>&1").c_str(), "r");
    char buf[512];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    status = ::pclose(p);
    return out;
  };
  int status = 0;
  std::string out = run("", status);
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(out.find("usage: smelt-nvrtc --arch CC [--ptx] [--nvrtc LIBRARY] SOURCE OUTPUT"), std::string::npos) << out;
  EXPECT_NE(out.find("smelt-nvrtc: --arch, SOURCE and OUTPUT are required"), std::string::npos) << out;
  out = run("--arch nine a b", status);
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(out.find("smelt-nvrtc: --arch: not a compute capability: 'nine'"), std::string::npos) << out;
  out = run("--arch 90 --fast a b", status);
  EXPECT_NE(out.find("smelt-nvrtc: unknown or incomplete option '--fast'"), std::string::npos) << out;
  out = run("--arch 90 a b c", status);
  EXPECT_NE(out.find("smelt-nvrtc: too many arguments: 'c'"), std::string::npos) << out;
  out = run("--arch 90 /nonexistent/k.cu out", status);
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(out.find("smelt-nvrtc: cannot read /nonexistent/k.cu"), std::string::npos) << out;
  out = run("--arch 90 --nvrtc /nonexistent/libnvrtc.so /dev/null out", status);
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(out.find("smelt-nvrtc: cannot load /nonexistent/libnvrtc.so: "), std::string::npos) << out;
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

}  // namespace
}  // namespace smelt::test
