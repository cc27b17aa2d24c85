// smelt::nn modules against float64 references, parameter names, freezing, nn::value_and_grad,
// save/load through .safetensors, and the errors users can hit.
#include <gtest/gtest.h>

#include <cmath>
#include <unistd.h>

#include "smelt/compile.h"
#include "smelt/nn.h"
#include "smelt/random.h"
#include "test_utils.h"

namespace smelt::nn_test {

struct Net {
  nn::Linear l1;
  nn::MLP mlp;
  nn::LayerNorm ln;
  nn::Sequential<nn::Linear, nn::RMSNorm> seq;
  std::vector<nn::Linear> layers;
  bool frozen = false;
};

}  // namespace smelt::nn_test

SMELT_MODULE(smelt::nn_test::Net, l1, mlp, ln, seq, layers, frozen)

namespace smelt::nn_test {
namespace {

using test::as_doubles;
using test::bit_equal;
using test::random_array;

constexpr double kU32 = 0x1p-24;  // float32 unit roundoff

Net make_net() {
  Array k = random::key(1);
  Array ks = random::split(k, 6);
  auto row = [&](int64_t i) { return reshape(slice(ks, {i, 0}, {i + 1, 2}), {2}); };
  Net n;
  n.l1 = nn::Linear(3, 4, true, row(0));
  n.mlp = nn::MLP(4, 8, 4, nn::Activation::Gelu, true, row(1));
  n.ln = nn::LayerNorm(4);
  n.seq = nn::Sequential<nn::Linear, nn::RMSNorm>(nn::Linear(4, 4, false, row(2)), nn::RMSNorm(4));
  n.layers = {nn::Linear(4, 2, true, row(3))};
  return n;
}

Array net_forward(const Net& n, const Array& x) { return n.layers[0](n.seq(n.ln(n.mlp(n.l1(x))))); }

// ---- Layers against float64 references ---------------------------------------------------------

TEST(NnLinear, MatchesAFloat64ReferenceWithinTheDotProductBound) {
  nn::Linear lin(5, 3, true, random::key(2));
  Array x = random_array({4, 5}, float32, -2, 2, 3);
  auto xs = as_doubles(x), w = as_doubles(lin.weight), b = as_doubles(*lin.bias);
  auto y = as_doubles(lin(x));
  ASSERT_EQ(lin(x).shape(), (Shape{4, 3}));
  for (int i = 0; i < 4; ++i)
    for (int o = 0; o < 3; ++o) {
      double ref = b[o], mag = std::abs(b[o]);
      for (int k = 0; k < 5; ++k) {
        ref += xs[i * 5 + k] * w[o * 5 + k];
        mag += std::abs(xs[i * 5 + k] * w[o * 5 + k]);
      }
      // A float32 dot product of n terms plus a bias: |error| <= (n + 1)·u·Σ|terms| (Higham 3.1).
      EXPECT_NEAR(y[i * 3 + o], ref, 6 * kU32 * mag + 1e-30) << i << "," << o;
    }
  // The PyTorch initialization bound 1/√in.
  for (double v : w) EXPECT_LE(std::abs(v), 1.0 / std::sqrt(5.0));
}

TEST(NnEmbedding, PicksRowsExactly) {
  nn::Embedding emb(10, 4, random::key(4));
  Array idx = Array({3, 0, 9, 3}, Shape{2, 2});
  Array out = emb(idx);
  ASSERT_EQ(out.shape(), (Shape{2, 2, 4}));
  auto w = as_doubles(emb.weight), o = as_doubles(out);
  const int rows[] = {3, 0, 9, 3};
  for (int i = 0; i < 4; ++i)
    for (int d = 0; d < 4; ++d) EXPECT_EQ(o[i * 4 + d], w[rows[i] * 4 + d]);
}

TEST(NnNorms, LayerNormAndRmsNormMatchFloat64References) {
  nn::LayerNorm ln(6);
  nn::RMSNorm rms(6);
  Array x = random_array({3, 6}, float32, -3, 3, 5);
  auto xs = as_doubles(x), l = as_doubles(ln(x)), r = as_doubles(rms(x));
  for (int i = 0; i < 3; ++i) {
    double mean = 0, sq = 0, var = 0;
    for (int d = 0; d < 6; ++d) mean += xs[i * 6 + d] / 6, sq += xs[i * 6 + d] * xs[i * 6 + d] / 6;
    for (int d = 0; d < 6; ++d) var += (xs[i * 6 + d] - mean) * (xs[i * 6 + d] - mean) / 6;
    for (int d = 0; d < 6; ++d) {
      // A few dozen float32 operations on O(1) normalized values: within 64 ulps of 1.
      EXPECT_NEAR(l[i * 6 + d], (xs[i * 6 + d] - mean) / std::sqrt(var + 1e-5), 64 * kU32 * 4);
      EXPECT_NEAR(r[i * 6 + d], xs[i * 6 + d] / std::sqrt(sq + 1e-5), 64 * kU32 * 4);
    }
  }
}

TEST(NnConv, Conv1dMatchesAFloat64Reference) {
  nn::Conv1d conv(2, 3, 3, /*stride=*/1, /*padding=*/1, 1, 1, true, random::key(6));
  Array x = random_array({1, 2, 5}, float32, -1, 1, 7);
  auto xs = as_doubles(x), w = as_doubles(conv.weight), b = as_doubles(*conv.bias), y = as_doubles(conv(x));
  ASSERT_EQ(conv(x).shape(), (Shape{1, 3, 5}));
  for (int o = 0; o < 3; ++o)
    for (int t = 0; t < 5; ++t) {
      double ref = b[o], mag = std::abs(b[o]);
      for (int c = 0; c < 2; ++c)
        for (int k = 0; k < 3; ++k) {
          int src = t + k - 1;
          if (src < 0 || src >= 5) continue;
          ref += xs[c * 5 + src] * w[(o * 2 + c) * 3 + k];
          mag += std::abs(xs[c * 5 + src] * w[(o * 2 + c) * 3 + k]);
        }
      EXPECT_NEAR(y[o * 5 + t], ref, 8 * kU32 * mag + 1e-30);
    }
}

TEST(NnConv, Conv2dAddsItsBiasPerChannel) {
  nn::Conv2d conv(3, 4, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, random::key(8));
  Array x = random_array({2, 3, 6, 6}, float32, -1, 1, 9);
  Array expected = conv2d(x, conv.weight, {1, 1}, {1, 1}) + reshape(*conv.bias, {1, 4, 1, 1});
  EXPECT_TRUE(bit_equal(conv(x), expected));
}

TEST(NnDropout, DropsAboutPAndScalesTheRestInTrainingAndIsTheIdentityInEval) {
  nn::Dropout d(0.25);
  Array x = random_array({10000}, float32, 1, 2, 10);
  random::seed(12);
  Array y = d(x);
  auto xs = x.to_vector<float>(), ys = y.to_vector<float>();
  int zeros_n = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (ys[i] == 0.0f) {
      ++zeros_n;
      continue;
    }
    EXPECT_EQ(ys[i], xs[i] * static_cast<float>(1.0 / 0.75));
  }
  // Binomial(10000, 0.25): mean 2500, standard deviation 43.3; 6 deviations is 260.
  EXPECT_NEAR(zeros_n, 2500, 260);
  // Another call draws another mask; reseeding repeats it.
  EXPECT_FALSE(bit_equal(d(x), y));
  random::seed(12);
  EXPECT_TRUE(bit_equal(d(x), y));
  nn::eval_mode(d);
  EXPECT_FALSE(d.training);
  EXPECT_TRUE(bit_equal(d(x), x));
}

// softmax(q kᵀ/√d) v per head in float64, with the causal mask.
std::vector<double> reference_mha(const nn::MultiHeadAttention& m, const Array& x, int64_t t, int64_t dim) {
  auto xs = as_doubles(x), wi = as_doubles(m.in_proj.weight), bi = as_doubles(*m.in_proj.bias);
  auto wo = as_doubles(m.out_proj.weight), bo = as_doubles(*m.out_proj.bias);
  const int64_t h = m.num_heads, hd = dim / h;
  std::vector<double> qkv(t * 3 * dim), att(t * dim), out(t * dim);
  for (int64_t i = 0; i < t; ++i)
    for (int64_t o = 0; o < 3 * dim; ++o) {
      double s = bi[o];
      for (int64_t k = 0; k < dim; ++k) s += xs[i * dim + k] * wi[o * dim + k];
      qkv[i * 3 * dim + o] = s;
    }
  for (int64_t head = 0; head < h; ++head)
    for (int64_t i = 0; i < t; ++i) {
      std::vector<double> p(t, 0.0);
      double mx = -INFINITY, z = 0;
      for (int64_t j = 0; j <= i; ++j) {
        double s = 0;
        for (int64_t d = 0; d < hd; ++d) s += qkv[i * 3 * dim + head * hd + d] * qkv[j * 3 * dim + dim + head * hd + d];
        p[j] = s / std::sqrt(static_cast<double>(hd));
        mx = std::max(mx, p[j]);
      }
      for (int64_t j = 0; j <= i; ++j) z += (p[j] = std::exp(p[j] - mx));
      for (int64_t d = 0; d < hd; ++d) {
        double s = 0;
        for (int64_t j = 0; j <= i; ++j) s += p[j] / z * qkv[j * 3 * dim + 2 * dim + head * hd + d];
        att[i * dim + head * hd + d] = s;
      }
    }
  for (int64_t i = 0; i < t; ++i)
    for (int64_t o = 0; o < dim; ++o) {
      double s = bo[o];
      for (int64_t k = 0; k < dim; ++k) s += att[i * dim + k] * wo[o * dim + k];
      out[i * dim + o] = s;
    }
  return out;
}

TEST(NnAttention, CausalMultiHeadAttentionMatchesAFloat64Reference) {
  const int64_t t = 5, dim = 8;
  nn::MultiHeadAttention mha(dim, 2, /*causal=*/true, true, random::key(13));
  Array x = random_array({1, t, dim}, float32, -1, 1, 14);
  auto got = as_doubles(mha(x));
  auto ref = reference_mha(mha, x, t, dim);
  // Inputs in [-1, 1] and weights below 1/√8 keep every intermediate O(1); the float32 path is
  // four dot products of at most 8 terms, a softmax (exp, sum, divide) and the scaling: a
  // first-order bound of 64·u on O(1) values covers it with room.
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(got[i], ref[i], 64 * kU32) << i;
  // Causal: the first position does not see later ones.
  Array x2 = slice_update(x, random_array({1, t - 1, dim}, float32, -1, 1, 15), {0, 1, 0}, {1, t, dim});
  EXPECT_TRUE(bit_equal(slice(mha(x2), {0, 0, 0}, {1, 1, dim}), slice(mha(x), {0, 0, 0}, {1, 1, dim})));
}

TEST(NnAttention, AnExplicitLowerTriangularMaskEqualsCausal) {
  const int64_t t = 4, dim = 8;
  nn::MultiHeadAttention causal(dim, 2, true, true, random::key(19));
  nn::MultiHeadAttention plain = causal;
  plain.causal = false;
  Array x = random_array({2, t, dim}, float32, -1, 1, 20);
  Array i = arange(t, int32);
  Array mask = greater_equal(reshape(i, {t, 1}), reshape(i, {1, t}));
  EXPECT_TRUE(bit_equal(plain(x, mask), causal(x)));
  EXPECT_FALSE(bit_equal(plain(x), causal(x)));
}

TEST(NnSequential, AppliesInOrderAndFreezesAsOneModule) {
  nn::Sequential<nn::Linear, nn::MLP> seq(nn::Linear(3, 4, true, random::key(21)),
                                          nn::MLP(4, 8, 2, nn::Activation::Silu, true, random::key(22)));
  Array x = random_array({5, 3}, float32, -1, 1, 23);
  EXPECT_TRUE(bit_equal(seq(x), std::get<1>(seq.layers)(std::get<0>(seq.layers)(x))));
  EXPECT_EQ(nn::trainable_parameters(seq).size(), 6u);
  nn::freeze(seq);
  EXPECT_TRUE(nn::trainable_parameters(seq).empty());
  EXPECT_TRUE(seq.frozen);
  nn::unfreeze(seq, "1");
  EXPECT_TRUE(nn::trainable_parameters(seq).empty());  // the Sequential above it is still frozen
  seq.frozen = false;
  EXPECT_EQ(nn::trainable_parameters(seq).size(), 4u);  // "0" stays frozen
}

TEST(NnLoss, CrossEntropyMatchesAFloat64Reference) {
  Array logits = random_array({4, 5}, float32, -3, 3, 16);
  Array targets = Array({0, 4, 2, 2});
  auto l = as_doubles(logits);
  const int tg[] = {0, 4, 2, 2};
  double ref = 0;
  for (int i = 0; i < 4; ++i) {
    double mx = -INFINITY, z = 0;
    for (int c = 0; c < 5; ++c) mx = std::max(mx, l[i * 5 + c]);
    for (int c = 0; c < 5; ++c) z += std::exp(l[i * 5 + c] - mx);
    ref += -(l[i * 5 + tg[i]] - mx - std::log(z)) / 4;
  }
  EXPECT_NEAR(nn::cross_entropy(logits, targets).item<double>(), ref, 64 * kU32 * std::abs(ref));
  EXPECT_NEAR(nn::mse_loss(Array({1.0f, 3.0f}), Array({0.0f, 1.0f})).item<float>(), 2.5f, 0.0f);
}

// ---- Parameters, freezing, gradients -----------------------------------------------------------

TEST(NnParameters, AreNamedByFieldsAndPositionsInTreeOrder) {
  Net n = make_net();
  std::vector<std::string> names;
  for (auto& [name, a] : nn::parameters(n)) names.push_back(name);
  const std::vector<std::string> expected = {"l1.weight",     "l1.bias",     "mlp.fc1.weight", "mlp.fc1.bias",
                                             "mlp.fc2.weight", "mlp.fc2.bias", "ln.weight",      "ln.bias",
                                             "seq.0.weight",  "seq.1.weight", "layers.0.weight", "layers.0.bias"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(nn::num_parameters(n), 3 * 4 + 4 + 4 * 8 + 8 + 8 * 4 + 4 + 4 + 4 + 16 + 4 + 8 + 2);
}

TEST(NnFreeze, FrozenLeavesGetNoGradientAndTheOthersMatchTheFullGradient) {
  Net n = make_net();
  nn::freeze(n, "mlp");
  nn::freeze(n, "seq.1");
  std::vector<std::string> trainable;
  for (auto& [name, a] : nn::trainable_parameters(n)) trainable.push_back(name);
  EXPECT_EQ(trainable, (std::vector<std::string>{"l1.weight", "l1.bias", "ln.weight", "ln.bias", "seq.0.weight",
                                                 "layers.0.weight", "layers.0.bias"}));
  Array x = random_array({6, 3}, float32, -1, 1, 17);
  auto loss = [](const Net& m, const Array& x) { return sum(square(net_forward(m, x))); };
  auto [l, g] = nn::value_and_grad(loss)(n, x);
  EXPECT_TRUE(bit_equal(l, loss(n, x)));
  EXPECT_FALSE(g.mlp.fc1.weight.valid());
  EXPECT_FALSE(std::get<1>(g.seq.layers).weight->valid());
  // The trainable gradients equal smelt::grad over the whole tree (same graph, same bits).
  Net full = smelt::grad([&](const Net& m) { return loss(m, x); })(n);
  EXPECT_TRUE(bit_equal(g.l1.weight, full.l1.weight));
  EXPECT_TRUE(bit_equal(g.ln.bias.value(), full.ln.bias.value()));
  EXPECT_TRUE(bit_equal(std::get<0>(g.seq.layers).weight, std::get<0>(full.seq.layers).weight));
  EXPECT_TRUE(bit_equal(g.layers[0].bias.value(), full.layers[0].bias.value()));
  // Unfreezing the module gives it gradients again.
  nn::unfreeze(n, "mlp");
  EXPECT_TRUE(nn::value_and_grad(loss)(n, x).second.mlp.fc1.weight.valid());
}

TEST(NnFreeze, FrozenIsPartOfTheCompileKey) {
  auto f = compile([](const Net& m, const Array& x) { return sum(net_forward(m, x)); });
  Net n = make_net();
  Array x = random_array({2, 3}, float32, -1, 1, 18);
  f(n, x);
  f(n, x);
  nn::freeze(n);
  f(n, x);
  EXPECT_EQ(f.stats().traces, 2u);
  nn::train(n, false);  // no Dropout in Net: nothing changes
  f(n, x);
  EXPECT_EQ(f.stats().traces, 2u);
}

// ---- Save and load -----------------------------------------------------------------------------

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "smelt_nn_" + std::to_string(::getpid()) + "_" + name;
}

TEST(NnSaveLoad, RoundTripsEveryParameter) {
  Net a = make_net();
  const std::string path = temp_path("net.safetensors");
  nn::save(a, path);
  Net b = make_net();
  b.l1 = nn::Linear(3, 4, true, random::key(99));
  nn::load(b, path);
  auto pa = nn::parameters(a), pb = nn::parameters(b);
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(bit_equal(pb[i].second, pa[i].second)) << pa[i].first;
  EXPECT_EQ(load_safetensors(path).count("mlp.fc2.bias"), 1u);
  std::remove(path.c_str());
}

TEST(NnSaveLoad, MismatchesAreErrorsAndLeaveTheModelUnchanged) {
  const std::string path = temp_path("small.safetensors");
  nn::Linear small(3, 4, true, random::key(1));
  nn::save(small, path);
  nn::Linear wide(5, 4, true, random::key(2));
  Array before = wide.weight;
  EXPECT_THROW_MSG(nn::load(wide, path), ShapeError,
                   "nn::load: " + path + ": tensor 'weight' is float32[4,3], the model's parameter is float32[4,5]");
  EXPECT_TRUE(bit_equal(wide.weight, before));
  nn::MLP mlp(3, 4, 4, nn::Activation::Relu, true, random::key(3));
  EXPECT_THROW_MSG(nn::load(mlp, path), InvalidArgument,
                   "has no tensor for the parameters fc1.weight, fc1.bias, fc2.weight, fc2.bias");
  nn::Linear nobias(3, 4, false, random::key(4));
  EXPECT_THROW_MSG(nn::load(nobias, path), InvalidArgument, "has tensors the model has no parameter for: bias");
  nn::load(nobias, path, /*strict=*/false);
  EXPECT_TRUE(bit_equal(nobias.weight, small.weight));
  std::remove(path.c_str());
}

// ---- Errors ------------------------------------------------------------------------------------

TEST(NnErrors, MessagesNameTheModuleAndShapes) {
  nn::Linear lin(3, 2, true, random::key(1));
  EXPECT_THROW_MSG(lin(zeros({4, 5})), ShapeError,
                   "nn::Linear: the input float32[4,5] must end in 3 features (weight float32[2,3])");
  EXPECT_THROW_MSG(nn::Linear(0, 2), InvalidArgument, "nn::Linear: in_features must be positive, got 0");
  EXPECT_THROW_MSG(nn::Linear(2, 2, true, std::nullopt, int32), DtypeError,
                   "nn::Linear: parameters must have a floating-point dtype, got int32");
  nn::Embedding emb(4, 2, random::key(2));
  EXPECT_THROW_MSG(emb(zeros({3})), DtypeError, "nn::Embedding: indices must have an integer dtype, got float32[3]");
  EXPECT_THROW_MSG(nn::MultiHeadAttention(6, 4), InvalidArgument,
                   "nn::MultiHeadAttention: dim 6 must be a positive multiple of num_heads 4");
  nn::MultiHeadAttention mha(4, 2, false, true, random::key(3));
  EXPECT_THROW_MSG(mha(zeros({2, 4})), ShapeError, "nn::MultiHeadAttention: the input float32[2,4] must be [batch, time, 4]");
  EXPECT_THROW_MSG(nn::attention(zeros({2, 3}), zeros({2, 4}), zeros({2, 4})), ShapeError, "nn::attention: q float32[2,3]");
  EXPECT_THROW_MSG(nn::attention(zeros({2, 3}), zeros({2, 3}), zeros({2, 3}), zeros({2, 2})), DtypeError,
                   "nn::attention: the mask must be bool");
  EXPECT_THROW_MSG(nn::Dropout(1.5), InvalidArgument, "nn::Dropout: p must be in [0, 1], got 1.5");
  EXPECT_THROW_MSG(nn::Dropout(0.5)(Array({1, 2})), DtypeError, "nn::Dropout: the input must be floating point, got int32[2]");
  EXPECT_THROW_MSG(nn::LayerNorm(0), InvalidArgument, "nn::LayerNorm: dim must be positive, got 0");
  EXPECT_THROW_MSG(nn::RMSNorm(-1), InvalidArgument, "nn::RMSNorm: dim must be positive, got -1");
  EXPECT_THROW_MSG(nn::Embedding(0, 2), InvalidArgument, "nn::Embedding: num_embeddings must be positive, got 0");
  EXPECT_THROW_MSG(nn::Conv2d(4, 6, {3, 0}), InvalidArgument, "nn::Conv2d: kernel width must be positive, got 0");
  EXPECT_THROW_MSG(nn::Conv2d(4, 6, {3, 3}, {1, 1}, {0, 0}, {1, 1}, 4), InvalidArgument,
                   "nn::Conv2d: in_channels 4 and out_channels 6 must be divisible by groups 4");
  EXPECT_THROW_MSG(nn::Conv1d(3, 4, 3, 1, 0, 1, 2), InvalidArgument,
                   "nn::Conv1d: in_channels 3 and out_channels 4 must be divisible by groups 2");
  EXPECT_THROW_MSG(nn::cross_entropy(zeros({2, 3}), zeros({2})), DtypeError,
                   "nn::cross_entropy: targets must be integer class indices, got float32[2]");
  EXPECT_THROW_MSG(nn::cross_entropy(zeros({2, 3}), Array({1, 2, 0})), ShapeError,
                   "nn::cross_entropy: logits float32[2,3] must be [..., classes] over targets int32[3]");
  nn::Embedding e2(3, 2, random::key(4));
  auto bad = [](const nn::Embedding& m) { return sum(m.weight); };
  nn::Embedding as_int = e2;
  as_int.weight = Array({1, 2});
  EXPECT_THROW_MSG(nn::value_and_grad(bad)(as_int), DtypeError,
                   "nn::value_and_grad: argument 0 leaf 0 is int32[2]; only floating-point arrays can be differentiated");
}

}  // namespace
}  // namespace smelt::nn_test
