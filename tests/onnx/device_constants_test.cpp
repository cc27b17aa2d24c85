// onnx::run with RunOptions::device: the run's device, its errors, and initializers uploaded once.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "smelt/errors.h"
#include "smelt/onnx.h"
#include "smelt/smelt.h"
#include "src/onnx/device_constants.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

namespace fs = std::filesystem;

std::string model_path(const std::string& name) {
  return (fs::path(__FILE__).parent_path().parent_path().parent_path() / "models" / (name + ".onnx")).string();
}

onnx::Value token_ids() {
  return onnx::Value::tensor(astype(random::randint(random::key(3), 0, 1000, {2, 16}), int64));
}

// A run on the CPU asked for explicitly is the default run, bit for bit.
TEST(RunDevice, CpuIsTheDefaultRun) {
  onnx::Model m = onnx::load(model_path("tiny_transformer"));
  const onnx::Value ids = token_ids();
  auto plain = onnx::run(m, {ids});
  auto on_cpu = onnx::run(m, {ids}, {.device = Device::cpu()});
  ASSERT_EQ(plain.size(), on_cpu.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(on_cpu[i].array().device(), Device::cpu());
    EXPECT_TRUE(bit_equal(plain[i].array(), on_cpu[i].array())) << "output " << i;
  }
}

TEST(RunDevice, UnavailableGpuIsAnError) {
  onnx::Model m = onnx::load(model_path("tiny_transformer"));
  try {
    onnx::run(m, {token_ids()}, {.device = Device::cuda(7)});
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("run: RunOptions::device: cuda:7 is not available"), std::string::npos)
        << e.what();
  }
}

// Host values stay as they are on the CPU; the cache keeps one copy per initializer and device and
// notices a replaced initializer (a graph copy with new values under the same name).
TEST(RunDevice, InitializerCacheOnCpuIsTheHostValue) {
  onnx::Model m = onnx::load(model_path("tiny_transformer"));
  ASSERT_TRUE(m.graph->device_constants);
  const auto& [name, host] = m.graph->initializers.front();
  onnx::Value same = onnx::detail::initializer_on(*m.graph, name, host, Device::cpu());
  EXPECT_EQ(same.array().node_ptr(), host.array().node_ptr());
}

TEST(RunDevice, ParseDeviceNamesAndErrors) {
  EXPECT_EQ(parse_device("cpu", "--device"), Device::cpu());
  EXPECT_EQ(parse_device("cuda:3", "--device", false), Device::cuda(3));
  EXPECT_EQ(parse_device("cuda", "--device", false), Device::cuda(0));
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "CPU", "cuda:-1"}) {
    try {
      parse_device(bad, "--device");
      FAIL() << bad;
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()), std::string("--device: unknown value '") + bad +
                                           "'; accepted values: cpu, cuda, cuda:N (a GPU index), auto");
    }
  }
  if (!cuda_available()) {
    try {
      parse_device("cuda:0", "--device");
      FAIL() << "expected DeviceError";
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("--device=cuda:0: cuda:0 is not available"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace smelt::test
