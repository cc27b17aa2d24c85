// Running models on a device: onnx::run with RunOptions::device and onnx::compile with
// CompileModelOptions::device (their devices and errors), initializers uploaded once, RunStats.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>

#include "onnx/model_builder.h"
#include "smelt/errors.h"
#include "smelt/memory.h"
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

// Shape constants stay on the host whatever the run's device (the shape arithmetic they enter stays
// there): no GPU is touched for them, so this holds on any machine.
TEST(RunDevice, SmallIntegerInitializersStayOnTheHost) {
  GraphBuilder b;
  b.int64s("shape", {2, -1});
  b.constant("flag", Array(true));
  for (const auto& [name, host] : b.graph()->initializers) {
    onnx::Value v = onnx::detail::initializer_on(*b.graph(), name, host, Device::cuda(0));
    EXPECT_EQ(v.array().node_ptr(), host.array().node_ptr()) << name;
  }
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

// CompileModelOptions::device unset follows the default-device rule when compile is called
// (ctest pins SMELT_DEFAULT_DEVICE=cpu; a DefaultDeviceScope picks it the same way).
TEST(CompileDevice, UnsetFollowsTheDefaultDevice) {
  onnx::Model m = onnx::load(model_path("tiny_transformer"));
  EXPECT_EQ(onnx::compile(m).stats().device, default_device());
  DefaultDeviceScope scope(Device::cpu());
  EXPECT_EQ(onnx::compile(m).stats().device, Device::cpu());
}

// Compiled on the CPU asked for explicitly: the eager outputs bit for bit, on the CPU.
TEST(CompileDevice, CpuCompiledEqualsEager) {
  onnx::Model m = onnx::load(model_path("tiny_transformer"));
  const onnx::Value ids = token_ids();
  onnx::CompileModelOptions o;
  o.device = Device::cpu();
  auto cm = onnx::compile(m, {}, o);
  auto eager = onnx::run(m, {ids});
  auto compiled = cm({ids});
  ASSERT_EQ(eager.size(), compiled.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    EXPECT_EQ(compiled[i].array().device(), Device::cpu());
    EXPECT_TRUE(bit_equal(eager[i].array(), compiled[i].array())) << "output " << i;
  }
}

TEST(CompileDevice, UnavailableGpuIsAnError) {
  onnx::Model m = onnx::load(model_path("tiny_transformer"));
  onnx::CompileModelOptions o;
  o.device = Device::cuda(7);
  try {
    onnx::compile(m, {}, o);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("compile: CompileModelOptions::device: cuda:7 is not available"),
              std::string::npos)
        << e.what();
  }
}

// A call cannot ask for another device than the model was compiled for (its traces hold
// constants on that device); the error says so before anything runs.
TEST(CompileDevice, CallOnAnotherDeviceIsAnError) {
  onnx::Model m = onnx::load(model_path("tiny_transformer"));
  onnx::CompileModelOptions o;
  o.device = Device::cpu();
  auto cm = onnx::compile(m, {}, o);
  try {
    cm({token_ids()}, {.device = Device::cuda(0)});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "compiled model: RunOptions::device is cuda:0 but the model was compiled for cpu "
              "(CompileModelOptions::device); compile it again for cuda:0");
  }
  EXPECT_EQ(cm.stats().calls, 0u);
}


// On the CPU a run copies nothing between devices and computes nothing "on the host" for lack of a
// GPU kernel: RunStats is all zero, for eager runs and compiled calls, and written over.
TEST(RunStats, CpuRunsCountNoTransfers) {
  onnx::Model m = nms_model();
  const onnx::Value boxes = onnx::Value::tensor(Array(std::vector<float>{0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 5, 5, 6, 6}, {3, 4}));
  const onnx::Value scores = onnx::Value::tensor(Array(std::vector<float>{0.9f, 0.8f, 0.7f}, {3}));
  onnx::RunStats stats;
  stats.device_to_host_copies = stats.device_to_host_bytes = stats.host_to_device_copies = 99;
  stats.host_computed = {"stale"};
  auto out = onnx::run(m, {boxes, scores}, {.device = Device::cpu(), .stats = &stats});
  EXPECT_EQ(out[0].array().to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0, 0, 2}));
  EXPECT_EQ(stats.device_to_host_copies, 0u);
  EXPECT_EQ(stats.device_to_host_bytes, 0u);
  EXPECT_EQ(stats.host_to_device_copies, 0u);
  EXPECT_EQ(stats.host_to_device_bytes, 0u);
  EXPECT_TRUE(stats.host_computed.empty());
  onnx::CompileModelOptions o;
  o.device = Device::cpu();
  auto cm = onnx::compile(m, {}, o);
  stats.device_to_host_copies = 99;
  auto again = cm({boxes, scores}, {.stats = &stats});
  EXPECT_TRUE(bit_equal(out[0].array(), again[0].array()));
  EXPECT_EQ(stats.device_to_host_copies, 0u);
  EXPECT_EQ(cm.stats().device_to_host_copies, 0u);
}

// The stats are written when the run raises too (here: a missing input).
TEST(RunStats, WrittenWhenTheRunRaises) {
  onnx::RunStats stats;
  stats.device_to_host_copies = 99;
  EXPECT_THROW(onnx::run(nms_model(), {}, {.stats = &stats}), OnnxError);
  EXPECT_EQ(stats.device_to_host_copies, 0u);
}

// A thread's transfer counters only see that thread's copies: CPU work copies nothing.
TEST(RunStats, ThreadCountersStartAtZero) {
  TransferCounts seen;
  std::thread t([&] {
    Array a = add(Array(std::vector<float>{1, 2}, {2}), Array(1.0f));
    a.eval();
    seen = thread_transfer_counts();
  });
  t.join();
  EXPECT_EQ(seen.device_to_host_copies, 0u);
  EXPECT_EQ(seen.host_to_device_copies, 0u);
}

// On the CPU a tensor's host array is the array itself; other kinds have none.
TEST(ValueHostArray, CpuTensorIsItself) {
  const onnx::Value v = onnx::Value::tensor(Array(std::vector<int64_t>{2, 3}, {2}));
  EXPECT_EQ(v.host_array().node_ptr(), v.array().node_ptr());
  const onnx::Value kept = onnx::detail::with_host_copy(v, Array(std::vector<int64_t>{7}, {1}));
  EXPECT_EQ(kept.host_array().node_ptr(), v.array().node_ptr());  // a host value keeps its own values
  try {
    (void)onnx::Value().host_array();
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), "onnx::Value: host_array() asked of a none");
  }
}

}  // namespace
}  // namespace smelt::test
