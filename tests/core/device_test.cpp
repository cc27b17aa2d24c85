// The default device: SMELT_DEFAULT_DEVICE (each value checked in a child process of this binary),
// scopes per thread, host data on the CPU, and the errors for missing GPUs.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "smelt/random.h"
#include "test_utils.h"
#include "env_test_utils.h"

namespace smelt {
namespace {

const char* kAccepted = "accepted values: cpu, cuda, cuda:N (a GPU index), auto";

// The child side: run by DeviceEnvironment tests below with SMELT_DEFAULT_DEVICE set and
// SMELT_TEST_EXPECT naming the outcome: "device:<name>" or "error:<message part>". Skipped in
// a normal run.
TEST(DeviceEnvironmentChild, Check) {
  const char* expect = std::getenv("SMELT_TEST_EXPECT");
  if (!expect) GTEST_SKIP() << "helper of the DeviceEnvironment tests";
  const std::string e = expect;
  if (e.rfind("device:", 0) == 0) {
    EXPECT_EQ(default_device().str(), e.substr(7));
    EXPECT_EQ(zeros({2}).device().str(), e.substr(7));
    return;
  }
  ASSERT_EQ(e.rfind("error:", 0), 0u) << e;
  const std::string part = e.substr(6);
  // Every use raises, not only the first, whatever makes the array.
  EXPECT_THROW_MSG(default_device(), Error, part);
  EXPECT_THROW_MSG(zeros({2}), Error, part);
  EXPECT_THROW_MSG(random::key(1), Error, part);
  // An explicit choice replaces the variable.
  set_default_device(Device::cpu());
  EXPECT_EQ(default_device(), Device::cpu());
  EXPECT_EQ(ones({2}).device(), Device::cpu());
}

using test::ScopedEnv;

/// Runs the child test with SMELT_DEFAULT_DEVICE=`value` (unset when null); true when it passed.
::testing::AssertionResult child_passes(const char* value, const std::string& expect) {
  default_device();  // this process has read its own value before the variable changes
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string log = (std::filesystem::temp_directory_path() /
                           ("smelt-device-test-" + std::to_string(::getpid()) + ".log"))
                              .string();
  int rc = 0;
  {
    // Through the environment, not the command line: the values hold quotes and spaces.
    ScopedEnv device("SMELT_DEFAULT_DEVICE", value);
    ScopedEnv expectation("SMELT_TEST_EXPECT", expect.c_str());
    rc = std::system(("'" + self + "' --gtest_filter=DeviceEnvironmentChild.Check >'" + log + "' 2>&1").c_str());
  }
  std::ifstream f(log);
  std::stringstream out;
  out << f.rdbuf();
  std::filesystem::remove(log);
  if (rc == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "SMELT_DEFAULT_DEVICE=" << (value ? value : "(unset)") << ", expecting "
                                       << expect << ":\n"
                                       << out.str();
}

std::string first_gpu_or_cpu() { return cuda_available() ? "cuda:0" : "cpu"; }

TEST(DeviceEnvironment, AcceptedValues) {
  EXPECT_TRUE(child_passes("cpu", "device:cpu"));
  EXPECT_TRUE(child_passes("auto", "device:" + first_gpu_or_cpu()));
  EXPECT_TRUE(child_passes("", "device:" + first_gpu_or_cpu()));
  EXPECT_TRUE(child_passes(nullptr, "device:" + first_gpu_or_cpu()));
  if (cuda_available()) {
    EXPECT_TRUE(child_passes("cuda", "device:cuda:0"));
    EXPECT_TRUE(child_passes("cuda:0", "device:cuda:0"));
  }
}

TEST(DeviceEnvironment, UnknownValuesListTheAcceptedOnes) {
  for (const char* bad : {"gpu", "CPU", "cuda:", "cuda:x", "cuda:-1", "cpu:0", " cpu"}) {
    SCOPED_TRACE(bad);
    EXPECT_TRUE(child_passes(bad, std::string("error:SMELT_DEFAULT_DEVICE: unknown value '") + bad + "'; " + kAccepted));
  }
}

TEST(DeviceEnvironment, AGpuThatIsNotThereIsAnError) {
  EXPECT_TRUE(child_passes("cuda:999", "error:SMELT_DEFAULT_DEVICE=cuda:999: cuda:999 is not available"));
  if (!cuda_available()) {
    EXPECT_TRUE(child_passes("cuda", "error:SMELT_DEFAULT_DEVICE=cuda: cuda:0 is not available (0 GPUs visible"));
  }
}

TEST(DefaultDevice, ScopesNestRestoreAndBelongToTheirThread) {
  const Device before = default_device();
  {
    DefaultDeviceScope outer(Device::cpu());
    EXPECT_EQ(default_device(), Device::cpu());
    {
      DefaultDeviceScope inner(Device::cpu());
      EXPECT_EQ(arange(0.0, 3.0, 1.0).device(), Device::cpu());
    }
    EXPECT_EQ(default_device(), Device::cpu());
    // Another thread sees the process default, not this thread's scope.
    Device seen;
    std::thread([&] { seen = default_device(); }).join();
    EXPECT_EQ(seen, before);
  }
  EXPECT_EQ(default_device(), before);
}

TEST(DefaultDevice, MissingGpusAreErrorsNamingTheCaller) {
  const Device missing = Device::cuda(cuda_device_count());  // one past the last GPU
  const std::string name = missing.str() + " is not available";
  EXPECT_THROW_MSG(DefaultDeviceScope{missing}, DeviceError, "DefaultDeviceScope: " + name);
  EXPECT_THROW_MSG(set_default_device(missing), DeviceError, "set_default_device: " + name);
  EXPECT_THROW_MSG(DefaultDeviceScope{Device::cuda(-1)}, DeviceError, "DefaultDeviceScope: cuda:-1 is not available");
  EXPECT_THROW_MSG(to_device(Array(std::vector<float>{1, 2}, {2}), missing), DeviceError, "to_device: " + name);
}

TEST(HostData, StaysOnTheCpuUntilMoved) {
  const std::vector<float> v{1.5f, -2.0f, 3.25f, 0.0f};
  EXPECT_EQ(Array(v, {4}).device(), Device::cpu());
  EXPECT_EQ(Array({1, 2, 3}).device(), Device::cpu());
  EXPECT_EQ(Array(2.5f).device(), Device::cpu());
  // to_device right after puts it on the default device (the rule's way to ask for one).
  Array a = to_device(Array(v, {2, 2}), default_device());
  EXPECT_EQ(a.device(), default_device());
  EXPECT_TRUE(test::bit_equal(to_device(a, Device::cpu()), Array(v, {2, 2})));
}

}  // namespace
}  // namespace smelt
