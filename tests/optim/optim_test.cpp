// smelt::optim: SGD, Adam and AdamW against hand-computed float64 updates, schedules, clipping by
// global norm, compiled steps bit for bit equal to eager steps, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "smelt/compile.h"
#include "smelt/nn.h"
#include "smelt/optim.h"
#include "smelt/random.h"
#include "test_utils.h"

namespace smelt {
namespace {

using test::as_doubles;
using test::bit_equal;
using test::random_array;

// float64 updates: the references below repeat each formula in double, so the only differences
// are the order of a few roundings: 1e-13 relative (a few hundred float64 ulps) bounds them.
constexpr double kRel = 1e-13;

nn::Linear model64() { return nn::Linear(3, 2, true, random::key(21), float64); }

// The gradient tree for step i (fixed values, independent of the parameters).
nn::Linear grads64(const nn::Linear& m, int i) {
  nn::Linear g = m;
  g.weight = random_array({2, 3}, float64, -1, 1, 100 + i);
  g.bias = random_array({2}, float64, -1, 1, 200 + i);
  return g;
}

std::vector<std::vector<double>> flat(const nn::Linear& m) { return {as_doubles(m.weight), as_doubles(*m.bias)}; }

void expect_close(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& ref) {
  for (size_t a = 0; a < ref.size(); ++a)
    for (size_t i = 0; i < ref[a].size(); ++i)
      EXPECT_NEAR(got[a][i], ref[a][i], kRel * std::max(1.0, std::abs(ref[a][i]))) << a << "," << i;
}

double f32(double v) { return static_cast<double>(static_cast<float>(v)); }  // the lr array is float32

TEST(OptimSGD, PlainMomentumAndNesterovMatchFloat64References) {
  struct Case {
    double momentum;
    bool nesterov;
    double wd;
  };
  for (Case c : {Case{0.0, false, 0.0}, Case{0.9, false, 0.01}, Case{0.9, true, 0.0}}) {
    SCOPED_TRACE("momentum " + std::to_string(c.momentum) + (c.nesterov ? " nesterov" : ""));
    nn::Linear m = model64();
    optim::SGD opt(0.1, c.momentum, c.nesterov, c.wd);
    opt.init(m);
    auto p = flat(m);
    std::vector<std::vector<double>> buf = {std::vector<double>(6, 0.0), std::vector<double>(2, 0.0)};
    for (int s = 0; s < 3; ++s) {
      nn::Linear g = grads64(m, s);
      auto gs = flat(g);
      opt.update(m, g);
      for (size_t a = 0; a < p.size(); ++a)
        for (size_t i = 0; i < p[a].size(); ++i) {
          double gi = gs[a][i] + c.wd * p[a][i];
          if (c.momentum != 0.0) {
            buf[a][i] = c.momentum * buf[a][i] + gi;
            gi = c.nesterov ? gi + c.momentum * buf[a][i] : buf[a][i];
          }
          p[a][i] -= f32(0.1) * gi;
        }
      expect_close(flat(m), p);
    }
    EXPECT_EQ(opt.step.item<int>(), 3);
  }
}

void adam_reference(bool decoupled, double wd) {
  const double lr = 1e-2, b1 = 0.8, b2 = 0.95, eps = 1e-6;
  nn::Linear m = model64();
  auto run = [&](auto opt) {
    opt.init(m);
    auto p = flat(m);
    std::vector<std::vector<double>> mm = {std::vector<double>(6, 0.0), std::vector<double>(2, 0.0)}, vv = mm;
    for (int s = 1; s <= 4; ++s) {
      nn::Linear g = grads64(m, s);
      auto gs = flat(g);
      opt.update(m, g);
      for (size_t a = 0; a < p.size(); ++a)
        for (size_t i = 0; i < p[a].size(); ++i) {
          double gi = gs[a][i];
          if (decoupled) p[a][i] *= 1.0 - f32(lr) * wd;
          else gi += wd * p[a][i];
          mm[a][i] = b1 * mm[a][i] + (1 - b1) * gi;
          vv[a][i] = b2 * vv[a][i] + (1 - b2) * gi * gi;
          double mhat = mm[a][i] / (1 - std::pow(b1, s)), vhat = vv[a][i] / (1 - std::pow(b2, s));
          p[a][i] -= f32(lr) * mhat / (std::sqrt(vhat) + eps);
        }
      expect_close(flat(m), p);
    }
    EXPECT_EQ(opt.m.size(), 2u);
    EXPECT_EQ(opt.v[0].dtype(), float64);
  };
  if (decoupled) run(optim::AdamW(lr, b1, b2, eps, wd));
  else run(optim::Adam(lr, b1, b2, eps, wd));
}

TEST(OptimAdam, MatchesAFloat64Reference) { adam_reference(false, 0.0); }
TEST(OptimAdam, WithL2WeightDecayMatchesAFloat64Reference) { adam_reference(false, 0.1); }
TEST(OptimAdamW, DecoupledWeightDecayMatchesAFloat64Reference) { adam_reference(true, 0.1); }

TEST(OptimSchedule, WarmupCosineMatchesItsFormula) {
  auto s = optim::Schedule::warmup_cosine(1e-3, 10, 110, 1e-5);
  for (int t : {0, 1, 5, 10, 11, 60, 109, 110, 200}) {
    double ref;
    if (t <= 10) ref = 1e-3 * t / 10.0;
    else ref = 1e-5 + (1e-3 - 1e-5) * 0.5 * (1 + std::cos(std::numbers::pi * std::min(1.0, (t - 10) / 100.0)));
    // Computed in float64 and rounded once to float32: within one float32 rounding of the formula.
    EXPECT_NEAR(s.at(Array(t)).item<double>(), ref, 0x1p-24 * ref + 1e-30) << t;
  }
  EXPECT_EQ(s.at(Array(3)).dtype(), float32);
  EXPECT_FLOAT_EQ(optim::Schedule::constant(0.5).at(Array(7)).item<float>(), 0.5f);
  EXPECT_THROW_MSG(optim::Schedule::warmup_cosine(1e-3, 10, 5), InvalidArgument,
                   "optim::Schedule::warmup_cosine: need 0 <= warmup_steps <= total_steps, got warmup_steps 10 and total_steps 5");
}

TEST(OptimSchedule, TheOptimizersRateFollowsTheScheduleWithoutRetracing) {
  auto sched = optim::Schedule::warmup_cosine(0.1, 2, 6);
  std::pair<nn::Linear, optim::SGD> state{nn::Linear(3, 2, true, random::key(5)), optim::SGD(sched)};
  auto step = compile_mut([](std::pair<nn::Linear, optim::SGD>& s, const nn::Linear& g) {
    s.second.update(s.first, g);
    return s.second.lr;
  });
  nn::Linear g = state.first;
  for (int t = 1; t <= 5; ++t) {
    Array lr = step(state, g);
    EXPECT_EQ(lr.item<float>(), sched.at(Array(t)).item<float>()) << t;
  }
  EXPECT_EQ(step.stats().traces, 1u);
}

TEST(OptimClip, ScalesByTheGlobalNormOnlyAboveTheMaximum) {
  std::vector<Array> g = {Array({3.0f, 0.0f}), Array({4.0f}), Array()};
  auto [clipped, norm] = optim::clip_grad_norm(g, 1.0);
  EXPECT_FLOAT_EQ(norm.item<float>(), 5.0f);
  const double scale = 1.0 / (5.0 + 1e-6);
  EXPECT_NEAR(clipped[0].to_vector<float>()[0], 3.0 * scale, 3.0 * 0x1p-22);
  EXPECT_NEAR(clipped[1].item<float>(), 4.0 * scale, 4.0 * 0x1p-22);
  EXPECT_FALSE(clipped[2].valid());
  auto [same, n2] = optim::clip_grad_norm(g, 10.0);
  EXPECT_TRUE(bit_equal(same[0], g[0]));
  EXPECT_THROW_MSG(optim::clip_grad_norm(g, 0.0), InvalidArgument, "optim::clip_grad_norm: max_norm must be positive, got 0");
}

// ---- Compiled training steps ---------------------------------------------------------------------

struct TrainState {
  nn::MLP model;
  optim::AdamW opt;
};

}  // namespace
}  // namespace smelt

SMELT_TREE(smelt::TrainState, model, opt)

namespace smelt {
namespace {

Array train_step(TrainState& s, const std::pair<Array, Array>& xy) {
  auto loss = [](const nn::MLP& m, const Array& x, const Array& y) { return nn::mse_loss(m(x), y); };
  auto [l, g] = nn::value_and_grad(loss)(s.model, xy.first, xy.second);
  g = optim::clip_grad_norm(g, 0.5).first;
  s.opt.update(s.model, g);
  return l;
}

TrainState fresh() {
  TrainState s{nn::MLP(4, 16, 2, nn::Activation::Gelu, true, random::key(31)), optim::AdamW(1e-2)};
  s.opt.init(s.model);
  return s;
}

TEST(OptimCompiled, AdamWStepsAreBitExactWithEagerStepsAndTraceOnce) {
  auto step = compile_mut(train_step);
  TrainState c = fresh(), e = fresh();
  for (int i = 0; i < 4; ++i) {
    std::pair<Array, Array> xy{random_array({8, 4}, float32, -1, 1, 40 + i), random_array({8, 2}, float32, -1, 1, 50 + i)};
    EXPECT_TRUE(bit_equal(step(c, xy), train_step(e, xy))) << i;
  }
  auto pc = nn::parameters(c.model), pe = nn::parameters(e.model);
  for (size_t i = 0; i < pc.size(); ++i) EXPECT_TRUE(bit_equal(pc[i].second, pe[i].second)) << pc[i].first;
  for (size_t i = 0; i < c.opt.m.size(); ++i) {
    EXPECT_TRUE(bit_equal(c.opt.m[i], e.opt.m[i]));
    EXPECT_TRUE(bit_equal(c.opt.v[i], e.opt.v[i]));
  }
  EXPECT_EQ(c.opt.step.item<int>(), 4);
  EXPECT_EQ(step.stats().traces, 1u);
}

TEST(OptimCompiled, AnOptimizerInitializedInsideTheFirstStepRetracesOnce) {
  auto step = compile_mut(train_step);
  TrainState s{nn::MLP(4, 8, 2, nn::Activation::Relu, true, random::key(32)), optim::AdamW(1e-2)};
  std::pair<Array, Array> xy{random_array({8, 4}, float32, -1, 1, 60), random_array({8, 2}, float32, -1, 1, 61)};
  for (int i = 0; i < 3; ++i) step(s, xy);
  EXPECT_EQ(s.opt.m.size(), 4u);
  EXPECT_EQ(step.stats().traces, 2u);
}

TEST(OptimCompiled, FreezingBetweenStepsRetracesAndLeavesFrozenParametersAlone) {
  auto step = compile_mut(train_step);
  TrainState s = fresh();
  std::pair<Array, Array> xy{random_array({8, 4}, float32, -1, 1, 62), random_array({8, 2}, float32, -1, 1, 63)};
  step(s, xy);
  nn::freeze(s.model, "fc1");
  s.opt.init(s.model);
  Array w1 = s.model.fc1.weight, w2 = s.model.fc2.weight;
  step(s, xy);
  step(s, xy);
  EXPECT_TRUE(bit_equal(s.model.fc1.weight, w1));
  EXPECT_FALSE(bit_equal(s.model.fc2.weight, w2));
  EXPECT_EQ(step.stats().traces, 2u);
}

// ---- Errors ------------------------------------------------------------------------------------

TEST(OptimErrors, MessagesNameTheOptimizer) {
  EXPECT_THROW_MSG(optim::SGD(0.1, 1.5), InvalidArgument, "optim::SGD: momentum must be in [0.000000, 1.000000), got 1.5");
  EXPECT_THROW_MSG(optim::SGD(0.1, 0.0, true), InvalidArgument, "optim::SGD: Nesterov momentum needs momentum > 0");
  EXPECT_THROW_MSG(optim::Adam(0.1, 0.9, 1.0), InvalidArgument, "optim::Adam: beta2 must be in");
  nn::Linear m(3, 2, true, random::key(1));
  optim::AdamW unset;
  EXPECT_THROW_MSG(unset.update(m, m), InvalidArgument,
                   "optim::AdamW::update: the optimizer is default-constructed; construct it with a learning rate");
  optim::Adam adam(0.1);
  adam.init(m);
  nn::MLP other(3, 4, 2, nn::Activation::Relu, true, random::key(2));
  nn::MLP other_grads = other;
  EXPECT_THROW_MSG(adam.update(other, other_grads), InvalidArgument,
                   "optim::Adam::update: the optimizer holds first moments for 2 parameters but the model has 4 "
                   "trainable ones; call init(model) again");
  nn::Linear no_grad = m;
  no_grad.bias = Array();
  EXPECT_THROW_MSG(adam.update(m, no_grad), InvalidArgument, "optim::Adam::update: trainable parameter 1 has no gradient");
  nn::Linear wider(5, 2, true, random::key(3));
  EXPECT_THROW_MSG(adam.update(wider, wider), ShapeError,
                   "optim::Adam::update: first moments 0 is [2,3] but its parameter [2,5]; call init(model) again");
  std::vector<nn::Linear> two = {m, m}, one = {m};
  EXPECT_THROW_MSG(optim::SGD(0.1).update(two, one), InvalidArgument,
                   "optim::SGD::update: the model has 4 trainable parameters but the gradient tree 2");
  EXPECT_THROW_MSG(optim::AdamW(0.1, 0.9, 0.999, 1e-8, -1.0), InvalidArgument, "optim::AdamW: weight_decay must be in");
  EXPECT_THROW_MSG(optim::clip_grad_norm(std::vector<Array>{Array({1, 2})}, 1.0), DtypeError,
                   "optim::clip_grad_norm: gradients must be floating point, got int32[2]");
  nn::Linear wrong = m;
  wrong.bias = zeros({3});
  EXPECT_THROW_MSG(adam.update(m, wrong), ShapeError,
                   "optim::Adam::update: parameter 1 is float32[2] but its gradient float32[3]");
}

}  // namespace
}  // namespace smelt
