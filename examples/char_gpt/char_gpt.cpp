// char_gpt: trains a small character-level GPT on a public-domain text, eagerly or as one compiled step.
//
//   char_gpt [--mode compiled|eager] [--steps N] [--batch B] [--lr LR] [--device cpu|cuda]
//            [--dropout P] [--target-loss L] [--text PATH] [--sample N] [--save PATH]
//
// Prints the loss every 10 steps with the elapsed time; with --target-loss, exits with status 0
// once the mean loss of the last 10 steps is below L and 1 when the steps run out first.
#include "char_gpt.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>

#ifndef CHAR_GPT_TEXT
#define CHAR_GPT_TEXT "alice_ch1.txt"
#endif

int main(int argc, char** argv) {
  using namespace char_gpt;
  std::string mode = "compiled", device = "cpu", text = CHAR_GPT_TEXT, save_path;
  int64_t steps = 300, batch = 16, sample = 200;
  double lr = 3e-3, target = -1.0, dropout = 0.0;
  for (int i = 1; i < argc; ++i) {
    auto arg = [&](const char* name) { return std::strcmp(argv[i], name) == 0 && i + 1 < argc; };
    if (arg("--mode")) mode = argv[++i];
    else if (arg("--steps")) steps = std::stoll(argv[++i]);
    else if (arg("--batch")) batch = std::stoll(argv[++i]);
    else if (arg("--lr")) lr = std::stod(argv[++i]);
    else if (arg("--device")) device = argv[++i];
    else if (arg("--dropout")) dropout = std::stod(argv[++i]);
    else if (arg("--target-loss")) target = std::stod(argv[++i]);
    else if (arg("--text")) text = argv[++i];
    else if (arg("--sample")) sample = std::stoll(argv[++i]);
    else if (arg("--save")) save_path = argv[++i];
    else {
      std::cerr << "usage: char_gpt [--mode compiled|eager] [--steps N] [--batch B] [--lr LR] [--device cpu|cuda]\n"
                   "                [--dropout P] [--target-loss L] [--text PATH] [--sample N] [--save PATH]\n";
      return 2;
    }
  }
  if (mode != "compiled" && mode != "eager") {
    std::cerr << "char_gpt: --mode must be compiled or eager\n";
    return 2;
  }
  smelt::DefaultDeviceScope scope(device == "cuda" ? smelt::Device::cuda(0) : smelt::Device::cpu());
  smelt::random::seed(0);
  Corpus corpus = Corpus::from_file(text);
  Config cfg;
  cfg.vocab = static_cast<int64_t>(corpus.vocab.size());
  cfg.dropout = dropout;
  // Linear warmup over the first 10% of the steps, then cosine decay to a tenth of the peak.
  auto schedule = optim::Schedule::warmup_cosine(lr, std::max<int64_t>(steps / 10, 1), steps, lr / 10);
  TrainState state = make_state(cfg, 1, schedule);
  std::cout << "char_gpt: " << corpus.tokens.size() << " bytes of " << text << ", vocabulary " << cfg.vocab << ", "
            << nn::num_parameters(state.model) << " parameters, " << mode << " steps on " << device << ", batch "
            << batch << " x " << cfg.context << "\n";
  Batches batches(corpus, batch, cfg.context, 1234);
  auto compiled = smelt::compile_mut(train_step, {}, "char_gpt_step");
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<float> recent;
  bool reached = false;
  for (int64_t step = 1; step <= steps; ++step) {
    auto xy = batches.next();
    Array loss = mode == "compiled" ? compiled(state, xy) : train_step(state, xy);
    float l = loss.item<float>();  // waits for the step, as a training loop that logs would
    recent.push_back(l);
    if (recent.size() > 10) recent.erase(recent.begin());
    float mean = 0;
    for (float v : recent) mean += v / static_cast<float>(recent.size());
    if (step % 10 == 0 || step == 1) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("step %4lld  loss %.4f  mean(10) %.4f  lr %.2e  %.1f s\n", static_cast<long long>(step), l, mean,
                  state.opt.lr.item<float>(), s);
      std::fflush(stdout);
    }
    if (target > 0 && recent.size() == 10 && mean < target) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("reached mean loss %.4f < %.2f at step %lld after %.1f s\n", mean, target,
                  static_cast<long long>(step), s);
      reached = true;
      break;
    }
  }
  if (mode == "compiled") std::cout << "traces: " << compiled.stats().traces << "\n";
  if (!save_path.empty()) nn::save(state.model, save_path);
  if (sample > 0) {
    // Sampling from the trained model, one byte at a time over the last `context` bytes.
    nn::eval_mode(state.model);
    std::vector<int32_t> ctx = {corpus.tokens[0]};
    std::string out(1, static_cast<char>(corpus.vocab[static_cast<size_t>(ctx[0])]));
    for (int64_t i = 0; i < sample; ++i) {
      std::vector<int32_t> window(ctx.end() - std::min<ptrdiff_t>(cfg.context, static_cast<ptrdiff_t>(ctx.size())), ctx.end());
      const int64_t t = static_cast<int64_t>(window.size());
      Array logits = state.model(Array(window, {1, t}));
      Array last = smelt::reshape(smelt::slice(logits, {0, t - 1, 0}, {1, t, cfg.vocab}), {cfg.vocab});
      int32_t next = smelt::random::categorical(smelt::random::next_key(), last).item<int32_t>();
      ctx.push_back(next);
      out += static_cast<char>(corpus.vocab[static_cast<size_t>(next)]);
    }
    std::cout << "sample:\n" << out << "\n";
  }
  if (target > 0) return reached ? 0 : 1;
  return 0;
}
