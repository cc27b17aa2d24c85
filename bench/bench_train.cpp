// Training-step benchmark: the char-GPT example's step (examples/char_gpt), eager and compiled,
// in steps per second on the CPU (run.sh sets the thread count, 2 on the developers' machines).
//
// One iteration is one AdamW step on a fresh batch of 16 windows of 64 bytes, waited for (the
// loss is read back, as a logging loop does). Warm-up steps come first, so tracing and kernel
// builds stay out of the numbers.
#include <benchmark/benchmark.h>

#include "examples/char_gpt/char_gpt.h"

#ifndef CHAR_GPT_TEXT
#error "CHAR_GPT_TEXT must name the example's text"
#endif

namespace {

using namespace char_gpt;

void train_steps(benchmark::State& st, bool compiled) {
  static const Corpus corpus = Corpus::from_file(CHAR_GPT_TEXT);
  Config cfg;
  cfg.vocab = static_cast<int64_t>(corpus.vocab.size());
  TrainState s = make_state(cfg, 1, smelt::optim::Schedule::constant(1e-3));
  Batches batches(corpus, 16, cfg.context, 5);
  auto step = smelt::compile_mut(train_step, {}, "bench_char_gpt");
  auto run = [&] {
    auto xy = batches.next();
    Array loss = compiled ? step(s, xy) : train_step(s, xy);
    return loss.item<float>();
  };
  for (int i = 0; i < 3; ++i) run();
  for (auto _ : st) benchmark::DoNotOptimize(run());
  st.counters["steps_per_s"] = benchmark::Counter(static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
}

void eager(benchmark::State& st) { train_steps(st, false); }
void compiled(benchmark::State& st) { train_steps(st, true); }

}  // namespace

// Names are work/system, as report.py reads them.
BENCHMARK(eager)->Name("char_gpt_train_step_b16/smelt")->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(compiled)->Name("char_gpt_train_step_b16/smelt_compile")->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

BENCHMARK_MAIN();
