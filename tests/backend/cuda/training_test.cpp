// Training on the GPU: the char-GPT example's step (dropout included) compiled equals uncompiled
// bit for bit, draws the same dropout masks as the CPU, and its loss matches the CPU's.
#include "examples/char_gpt/char_gpt.h"
#include "tests/backend/cuda/cuda_test_utils.h"

namespace smelt {
namespace {

using namespace smelt::test;

const std::string kText = std::string(__FILE__).substr(0, std::string(__FILE__).rfind("tests/backend/")) +
                          "examples/char_gpt/alice_ch1.txt";

char_gpt::Config tiny(int64_t vocab) {
  char_gpt::Config c;
  c.vocab = vocab;
  c.d_model = 32;
  c.heads = 4;
  c.layers = 2;
  c.context = 16;
  c.dropout = 0.1;
  return c;
}

/// Three steps on `device` from the same initial state and batches; returns the losses and the
/// final parameters, on the CPU.
std::pair<std::vector<Array>, std::vector<Array>> run(Device device, bool compiled) {
  auto corpus = char_gpt::Corpus::from_file(kText);
  DefaultDeviceScope scope(device);
  auto cfg = tiny(static_cast<int64_t>(corpus.vocab.size()));
  char_gpt::TrainState s = char_gpt::make_state(cfg, 3, optim::Schedule::warmup_cosine(1e-2, 1, 10));
  char_gpt::Batches batches(corpus, 4, cfg.context, 7);
  auto step = compile_mut(char_gpt::train_step);
  random::seed(5);
  std::vector<Array> losses, params;
  for (int i = 0; i < 3; ++i) {
    auto xy = batches.next();
    losses.push_back(on_cpu(compiled ? step(s, xy) : char_gpt::train_step(s, xy)));
  }
  if (compiled) {
    EXPECT_EQ(step.stats().traces, 1u);
  }
  EXPECT_EQ(s.opt.lr.device(), device);
  EXPECT_EQ(s.opt.step.device(), device);
  for (auto& [name, a] : nn::parameters(s.model)) {
    EXPECT_EQ(a.device(), device) << name;
    params.push_back(on_cpu(a));
  }
  return {losses, params};
}

TEST(CudaTraining, CompiledStepsEqualUncompiledStepsBitForBit) {
  SMELT_REQUIRE_GPU();
  auto [lc, pc] = run(gpu(), true);
  auto [le, pe] = run(gpu(), false);
  for (size_t i = 0; i < lc.size(); ++i) EXPECT_TRUE(bit_equal(lc[i], le[i])) << i;
  for (size_t i = 0; i < pc.size(); ++i) EXPECT_TRUE(bit_equal(pc[i], pe[i])) << i;
}

TEST(CudaTraining, LossesMatchTheCpu) {
  SMELT_REQUIRE_GPU();
  auto [lg, pg] = run(gpu(), true);
  auto [lc, pc] = run(Device::cpu(), true);
  // The dropout masks are the same on both devices (counter-based keys); the float32 forward and
  // backward passes round differently (GPU matmuls and libdevice math, a few ulps per op over a
  // few hundred ops on O(1) values), and three AdamW steps of lr <= 1e-2 move the loss by less
  // than that difference times the steps: 1e-4 relative bounds it with room.
  for (size_t i = 0; i < lg.size(); ++i)
    EXPECT_NEAR(lg[i].item<float>(), lc[i].item<float>(), 1e-4 * std::abs(lc[i].item<float>())) << i;
}

}  // namespace
}  // namespace smelt
