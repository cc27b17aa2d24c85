// Replays the committed fuzz corpus (fuzz/corpus/onnx_model_fuzz: inputs that found bugs) through the fuzzer's load+run, in the release build.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/model_run.h"

namespace smelt::test {
namespace {

namespace fs = std::filesystem;

/// The repository root: this file lives in tests/fuzz/. CMake passes its absolute path, but ccache
/// with a base_dir rewrites it relative to the build folder (the test binary's parent's parent),
/// which is not where ctest runs the test.
fs::path repo_root() {
  fs::path file(__FILE__);
  if (file.is_relative()) file = fs::canonical("/proc/self/exe").parent_path().parent_path() / file;
  return fs::weakly_canonical(file).parent_path().parent_path().parent_path();
}

TEST(FuzzCorpusReplay, ModelCorpusLoadsAndRunsWithoutCrashing) {
  fs::path dir = repo_root() / "fuzz" / "corpus" / "onnx_model_fuzz";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty()) << "no corpus entries in " << dir;
  ASSERT_TRUE(fs::exists(dir / "regression-endless_loop.onnx")) << "not the committed corpus: " << dir;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Every outcome but a smelt::Error (returned as text) is a failure: another exception fails
    // the test here, a crash ends the process.
    std::string outcome;
    EXPECT_NO_THROW(outcome = fuzz::load_and_run(bytes.data(), bytes.size())) << f.filename();
    EXPECT_FALSE(outcome.empty()) << f.filename();
    // The hand-written regressions end the way their bug's fix says.
    const std::string name = f.filename().string();
    if (name == "regression-endless_loop.onnx") {
      EXPECT_EQ(outcome.rfind("run: Loop 'loop'", 0), 0u) << outcome;
    } else if (name == "regression-recursive_functions.onnx") {
      EXPECT_NE(outcome.find("load: functions call each other in a cycle (custom.A -> custom.B -> custom.A)"),
                std::string::npos)
          << outcome;
    } else if (name == "regression-regex_backtracking.onnx") {
      EXPECT_EQ(outcome, "ran: 2 outputs");
    }
  }
}

}  // namespace
}  // namespace smelt::test
