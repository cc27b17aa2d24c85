// `smelt view`: the device its overlay is compiled for (--device), as `smelt run --device` takes it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "smelt/device.h"
#include "tools/cli_test_utils.h"

namespace smelt::test {
namespace {

namespace fs = std::filesystem;

#ifdef SMELT_ONNX

class CliView : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("smelt_cli_view_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  CliResult run(const std::vector<std::string>& args) { return run_cli(args, dir_); }
  fs::path dir_;
};

/// `message` without its leading "smelt CMD: ".
std::string without_command(const std::string& message) {
  const size_t colon = message.find(": ");
  return message.rfind("smelt ", 0) == 0 && colon != std::string::npos ? message.substr(colon + 2) : message;
}

TEST_F(CliView, DeviceCpuDrawsTheSegmentsCompiledForTheCpu) {
  const std::string out = (dir_ / "v.html").string();
  CliResult r = run({"view", model("tiny_cnn"), "--compile", "--device", "cpu", "--dim", "N=2", "-o", out});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, out + "\n");
  EXPECT_TRUE(has(r.err, "segments compiled for cpu")) << r.err;
  const std::string html = read_text(out);
  EXPECT_TRUE(has(html, "compiled for <b>cpu</b>"));
  EXPECT_TRUE(has(html, "<li class=\"seg\">"));
}

TEST_F(CliView, DeviceCudaGivesTheSameErrorAsRunWithoutAGpu) {
  for (const std::string device : {"cuda", "cuda:1"}) {
    if (device == "cuda" ? cuda_available() : cuda_device_count() > 1) {
      // A machine with the GPU: the overlay is that of the model compiled for it.
      const std::string out = (dir_ / "gpu.html").string();
      CliResult r = run({"view", model("tiny_cnn"), "--compile", "--device", device, "--dim", "N=2", "-o", out});
      ASSERT_EQ(r.status, 0) << r.err;
      const std::string name = device == "cuda" ? "cuda:0" : device;
      EXPECT_TRUE(has(read_text(out), "compiled for <b>" + name + "</b>")) << device;
      continue;
    }
    CliResult ran = run({"run", model("tiny_cnn"), "--device", device});
    CliResult viewed = run({"view", model("tiny_cnn"), "--compile", "--device", device, "-o", (dir_ / "v.html").string()});
    EXPECT_EQ(ran.status, 1) << ran.err;
    EXPECT_EQ(viewed.status, 1) << viewed.err;
    EXPECT_EQ(viewed.out, "");
    EXPECT_FALSE(fs::exists(dir_ / "v.html"));
    EXPECT_TRUE(has(viewed.err, "smelt view: --device")) << viewed.err;
    EXPECT_TRUE(has(viewed.err, "is not available")) << viewed.err;
    EXPECT_EQ(without_command(viewed.err), without_command(ran.err.substr(ran.err.find("smelt run: "))));
  }
}

TEST_F(CliView, DeviceUsageErrors) {
  CliResult bad = run({"view", model("tiny_cnn"), "--compile", "--device", "gpu"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_TRUE(has(bad.err, "unknown value 'gpu'; accepted values: cpu, cuda, cuda:N")) << bad.err;
  EXPECT_TRUE(has(bad.err, "usage: smelt view")) << bad.err;
  CliResult alone = run({"view", model("tiny_cnn"), "--device", "cpu"});
  EXPECT_EQ(alone.status, 2);
  EXPECT_TRUE(has(alone.err, "--seed and --device choose the compiled run: add --compile")) << alone.err;
  CliResult help = run({"help", "view"});
  EXPECT_TRUE(has(help.out, "--device D")) << help.out;
  EXPECT_TRUE(has(help.out, "[--device cpu|cuda[:N]]")) << help.out;
}

#endif  // SMELT_ONNX

}  // namespace
}  // namespace smelt::test
