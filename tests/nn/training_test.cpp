// Compiled training steps over (model, optimizer) trees: the char-GPT example's step with dropout
// traces once and matches the uncompiled step bit for bit (draws included), switching dropout off
// retraces once, and a few eager steps of the example on its text lower the loss.
#include <gtest/gtest.h>

#include "examples/char_gpt/char_gpt.h"
#include "test_utils.h"

namespace smelt {
namespace {

using test::bit_equal;

const std::string kText = std::string(__FILE__).substr(0, std::string(__FILE__).rfind("tests/nn/")) +
                          "examples/char_gpt/alice_ch1.txt";

char_gpt::Config tiny(int64_t vocab, double dropout) {
  char_gpt::Config c;
  c.vocab = vocab;
  c.d_model = 16;
  c.heads = 2;
  c.layers = 1;
  c.context = 8;
  c.dropout = dropout;
  return c;
}

void expect_same_model(const char_gpt::GPT& a, const char_gpt::GPT& b) {
  auto pa = nn::parameters(a), pb = nn::parameters(b);
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(bit_equal(pa[i].second, pb[i].second)) << pa[i].first;
}

TEST(Training, ACompiledStepWithDropoutMatchesTheUncompiledStepAndTracesOnce) {
  auto corpus = char_gpt::Corpus::from_file(kText);
  auto cfg = tiny(static_cast<int64_t>(corpus.vocab.size()), 0.2);
  auto schedule = optim::Schedule::warmup_cosine(1e-2, 2, 10);
  auto step = compile_mut(char_gpt::train_step);
  char_gpt::TrainState c = char_gpt::make_state(cfg, 3, schedule), e = char_gpt::make_state(cfg, 3, schedule);
  char_gpt::Batches bc(corpus, 4, cfg.context, 7), be(corpus, 4, cfg.context, 7);
  random::seed(42);
  std::vector<Array> lc;
  for (int i = 0; i < 3; ++i) lc.push_back(step(c, bc.next()));
  Array key_c = random::thread_key();
  random::seed(42);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(bit_equal(lc[static_cast<size_t>(i)], char_gpt::train_step(e, be.next()))) << i;
  EXPECT_TRUE(bit_equal(key_c, random::thread_key()));  // both drew the same masks in the same order
  expect_same_model(c.model, e.model);
  EXPECT_TRUE(bit_equal(c.opt.lr, e.opt.lr));
  EXPECT_EQ(c.opt.step.item<int>(), 3);
  EXPECT_EQ(step.stats().traces, 1u);
}

TEST(Training, SwitchingDropoutOffRetracesOnce) {
  auto corpus = char_gpt::Corpus::from_file(kText);
  auto cfg = tiny(static_cast<int64_t>(corpus.vocab.size()), 0.2);
  // Only the key matters here: without fusion no kernels are built, which keeps the test short.
  CompileOptions o;
  o.fuse = false;
  auto step = compile_mut(char_gpt::train_step, o);
  char_gpt::TrainState s = char_gpt::make_state(cfg, 3, optim::Schedule::constant(1e-2));
  char_gpt::Batches batches(corpus, 4, cfg.context, 7);
  step(s, batches.next());
  // Dropout's mode is a static field: evaluation mode retraces once, then replays.
  nn::train(s.model, false);
  EXPECT_FALSE(s.model.blocks[0].drop.training);
  step(s, batches.next());
  step(s, batches.next());
  EXPECT_EQ(step.stats().traces, 2u);
}

TEST(Training, EagerStepsOfTheExampleLowerTheLoss) {
  auto corpus = char_gpt::Corpus::from_file(kText);
  char_gpt::Config cfg;  // the example's model: 2 layers, d_model 128, 4 heads, context 64
  cfg.vocab = static_cast<int64_t>(corpus.vocab.size());
  char_gpt::TrainState s = char_gpt::make_state(cfg, 1, optim::Schedule::warmup_cosine(3e-3, 2, 1000));
  char_gpt::Batches batches(corpus, 4, cfg.context, 9);
  std::vector<float> losses;
  for (int i = 0; i < 25; ++i) losses.push_back(char_gpt::train_step(s, batches.next()).item<float>());
  // The initial loss is about ln(vocab) (uniform predictions, ~4.2 nats); 25 AdamW steps learn
  // the byte frequencies at least, which is worth well over half a nat on English text.
  float last = 0;
  for (int i = 20; i < 25; ++i) last += losses[static_cast<size_t>(i)] / 5;
  EXPECT_GT(losses[0], 3.8f);
  EXPECT_LT(last, losses[0] - 0.6f) << "first " << losses[0] << ", last five " << last;
}

}  // namespace
}  // namespace smelt
