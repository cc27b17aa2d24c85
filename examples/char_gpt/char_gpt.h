// The char-GPT example's model, data and training step, shared by the program, its test and the benchmarks.
#pragma once

#include <smelt/compile.h>
#include <smelt/nn.h>
#include <smelt/optim.h>
#include <smelt/random.h>
#include <smelt/smelt.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace char_gpt {

using smelt::Array;
namespace nn = smelt::nn;
namespace optim = smelt::optim;

struct Config {
  int64_t vocab = 0;
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t layers = 2;
  int64_t context = 64;
  double dropout = 0.0;
};

/// A pre-norm transformer block: x + attn(ln1(x)), then x + mlp(ln2(x)) (GPT-2's layout).
struct Block {
  nn::LayerNorm ln1, ln2;
  nn::MultiHeadAttention attn;
  nn::MLP mlp;
  nn::Dropout drop;
  bool frozen = false;

  Array operator()(const Array& x) const {
    Array h = x + drop(attn(ln1(x)));
    return h + drop(mlp(ln2(h)));
  }
};

struct GPT {
  nn::Embedding tok, pos;
  std::vector<Block> blocks;
  nn::LayerNorm ln_f;
  nn::Linear head;
  bool frozen = false;

  /// Logits [B, T, vocab] of token ids [B, T] (T <= context).
  Array operator()(const Array& ids) const {
    const int64_t t = ids.shape(1);
    Array x = tok(ids) + pos(smelt::arange(t, smelt::int32));
    for (const Block& b : blocks) x = b(x);
    return head(ln_f(x));
  }
};

/// The step's state: model and optimizer, one tree, so compile_mut traces the whole step once.
struct TrainState {
  GPT model;
  optim::AdamW opt;
};

}  // namespace char_gpt

SMELT_MODULE(char_gpt::Block, ln1, ln2, attn, mlp, drop, frozen)
SMELT_MODULE(char_gpt::GPT, tok, pos, blocks, ln_f, head, frozen)
SMELT_TREE(char_gpt::TrainState, model, opt)

namespace char_gpt {

inline GPT make_gpt(const Config& c, uint64_t seed) {
  Array keys = smelt::random::split(smelt::random::key(seed), 3 + 2 * c.layers);
  auto key = [&](int64_t i) { return smelt::reshape(smelt::slice(keys, {i, 0}, {i + 1, 2}), {2}); };
  GPT g;
  // GPT-2 initializes embeddings with N(0, 0.02); nn::Embedding draws N(0, 1), so scale it.
  g.tok = nn::Embedding(c.vocab, c.d_model, key(0));
  g.tok.weight = g.tok.weight * 0.02f;
  g.pos = nn::Embedding(c.context, c.d_model, key(1));
  g.pos.weight = g.pos.weight * 0.02f;
  for (int64_t l = 0; l < c.layers; ++l) {
    Block b;
    b.ln1 = nn::LayerNorm(c.d_model);
    b.ln2 = nn::LayerNorm(c.d_model);
    b.attn = nn::MultiHeadAttention(c.d_model, c.heads, /*causal=*/true, true, key(2 + 2 * l));
    b.mlp = nn::MLP(c.d_model, 4 * c.d_model, c.d_model, nn::Activation::Gelu, true, key(3 + 2 * l));
    b.drop = nn::Dropout(c.dropout);
    g.blocks.push_back(std::move(b));
  }
  g.ln_f = nn::LayerNorm(c.d_model);
  g.head = nn::Linear(c.d_model, c.vocab, true, key(2 + 2 * c.layers));
  // Materialize the parameters once, so every step starts from evaluated arrays.
  std::vector<Array> params;
  for (auto& [name, a] : nn::parameters(g)) params.push_back(a);
  smelt::eval(params);
  return g;
}

/// The text as byte tokens over the bytes it uses (a character-level vocabulary of UTF-8 bytes).
struct Corpus {
  std::vector<int32_t> tokens;
  std::vector<unsigned char> vocab;  // token id -> byte

  static Corpus from_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("char_gpt: cannot read " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    Corpus c;
    int id_of[256];
    std::fill(std::begin(id_of), std::end(id_of), -1);
    bool used[256] = {};
    for (unsigned char ch : text) used[ch] = true;
    for (int b = 0; b < 256; ++b)
      if (used[b]) {
        id_of[b] = static_cast<int>(c.vocab.size());
        c.vocab.push_back(static_cast<unsigned char>(b));
      }
    for (unsigned char ch : text) c.tokens.push_back(id_of[ch]);
    return c;
  }
};

/// Random windows of the corpus: inputs [B, T] and next-token targets [B, T] (int32).
class Batches {
 public:
  Batches(const Corpus& c, int64_t batch, int64_t context, uint32_t seed)
      : corpus_(c), batch_(batch), context_(context), rng_(seed) {}
  std::pair<Array, Array> next() {
    std::uniform_int_distribution<size_t> pick(0, corpus_.tokens.size() - static_cast<size_t>(context_) - 2);
    std::vector<int32_t> x(static_cast<size_t>(batch_ * context_)), y(x.size());
    for (int64_t b = 0; b < batch_; ++b) {
      size_t start = pick(rng_);
      for (int64_t t = 0; t < context_; ++t) {
        x[static_cast<size_t>(b * context_ + t)] = corpus_.tokens[start + static_cast<size_t>(t)];
        y[static_cast<size_t>(b * context_ + t)] = corpus_.tokens[start + static_cast<size_t>(t) + 1];
      }
    }
    return {Array(x, {batch_, context_}), Array(y, {batch_, context_})};
  }

 private:
  const Corpus& corpus_;
  int64_t batch_, context_;
  std::mt19937 rng_;
};

/// One training step: loss, gradients of the trainable parameters, clipping at norm 1, AdamW.
inline Array train_step(TrainState& s, const std::pair<Array, Array>& batch) {
  auto loss_fn = [](const GPT& m, const Array& x, const Array& y) { return nn::cross_entropy(m(x), y); };
  auto [loss, grads] = nn::value_and_grad(loss_fn)(s.model, batch.first, batch.second);
  grads = optim::clip_grad_norm(grads, 1.0).first;
  s.opt.update(s.model, grads);
  return loss;
}

inline TrainState make_state(const Config& c, uint64_t seed, optim::Schedule schedule) {
  TrainState s{make_gpt(c, seed), optim::AdamW(schedule, 0.9, 0.99, 1e-8, 0.01)};
  s.opt.init(s.model);  // before the loop: the compiled step then keeps one state structure
  return s;
}

}  // namespace char_gpt
