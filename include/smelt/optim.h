// smelt::optim: optimizers (SGD, Adam, AdamW) and learning-rate schedules as trees of arrays.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "smelt/array.h"
#include "smelt/nn.h"
#include "smelt/tree.h"

namespace smelt::optim {

/// A learning-rate schedule: a static description (part of a compiled step's key) that gives the
/// rate of update t (t = 1, 2, ...) as an array computed from the optimizer's step counter, so a
/// compiled step never retraces for a new rate.
struct Schedule {
  enum class Kind : uint8_t {
    Constant,      // the optimizer's `lr` array as it is (set it between steps freely)
    WarmupCosine,  // linear warmup to `lr` over warmup_steps, then cosine decay to final_lr
  };
  Kind kind = Kind::Constant;
  double lr = 1e-3;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // the cosine reaches final_lr here and stays there
  double final_lr = 0.0;

  static Schedule constant(double lr);
  /// t <= warmup: lr·t/warmup; then final + (lr - final)·(1 + cos(π·p))/2 with
  /// p = min(1, (t - warmup)/(total - warmup)).
  static Schedule warmup_cosine(double lr, int64_t warmup_steps, int64_t total_steps, double final_lr = 0.0);
  /// The float32 rate of update `step` (an integer array), computed in float64 and rounded once.
  Array at(const Array& step) const;
};

/// Clips a gradient tree by its global L2 norm (PyTorch's clip_grad_norm_): every gradient is
/// scaled by min(1, max_norm / (norm + 1e-6)). Returns the clipped tree and the norm (float32,
/// float64 when any gradient is float64). Empty handles (frozen parameters) are skipped.
std::pair<std::vector<Array>, Array> clip_by_global_norm(const std::vector<Array>& grads, double max_norm);
template <class G>
std::pair<G, Array> clip_grad_norm(const G& grads, double max_norm) {
  FlatTree flat = flatten_tree(grads);
  auto [clipped, norm] = clip_by_global_norm(flat.leaves, max_norm);
  return {unflatten_tree<G>(clipped, flat.structure), norm};
}

namespace detail {

void check_grads(const std::vector<Array*>& params, const std::vector<Array>& grads, const char* op);

/// The trainable parameters of `model` (pointers, to be replaced) and their gradients from
/// `grads` (a tree of the model's type), checked to match; `op` names the caller in errors.
template <class M>
std::pair<std::vector<Array*>, std::vector<Array>> params_and_grads(M& model, const M& grads, const char* op) {
  std::vector<Array*> params = nn::detail::leaf_slots(model, true);
  std::vector<Array> gs;
  auto fn = [&](const std::string&, const auto& x, bool frozen) {
    if constexpr (std::is_same_v<std::decay_t<decltype(x)>, Array>)
      if (!frozen) gs.push_back(x);
  };
  nn::detail::visit(grads, "", false, fn);
  check_grads(params, gs, op);
  return {std::move(params), std::move(gs)};
}
template <class M>
std::vector<Array> trainable_arrays(const M& model) {
  std::vector<Array> out;
  for (auto& [name, a] : nn::trainable_parameters(model)) out.push_back(a);
  return out;
}

/// init(model) and update(model, grads) of every optimizer, over its init_arrays and
/// update_arrays (CRTP: `Opt` derives from ModelSteps<Opt> and names itself in kUpdate).
template <class Opt>
struct ModelSteps {
  /// Creates the per-parameter state for `model`'s trainable parameters (zeros). Call it before
  /// the training loop: update() creates it on first use too, which changes the state's
  /// structure (a compiled step then traces once more).
  template <class M>
  void init(const M& model) {
    static_cast<Opt*>(this)->init_arrays(trainable_arrays(model));
  }
  /// One update of the trainable parameters of `model` from `grads` (nn::value_and_grad's).
  template <class M>
  void update(M& model, const M& grads) {
    auto [params, gs] = params_and_grads(model, grads, Opt::kUpdate);
    static_cast<Opt*>(this)->update_arrays(params, gs);
  }
};

}  // namespace detail

/// Stochastic gradient descent as PyTorch's SGD (dampening 0): with weight decay g += wd·p; with
/// momentum b = μ·b + g and the step uses b (or g + μ·b with Nesterov); p -= lr·step.
/// `lr` (float32) and `step` (int32, updates done) are arrays, so compiled steps trace once.
struct SGD : detail::ModelSteps<SGD> {
  static constexpr const char* kUpdate = "optim::SGD::update";
  Array lr, step;
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
  Schedule schedule;
  std::vector<Array> velocity;  // one per trainable parameter when momentum != 0

  SGD() = default;
  explicit SGD(double lr, double momentum = 0.0, bool nesterov = false, double weight_decay = 0.0);
  explicit SGD(Schedule schedule, double momentum = 0.0, bool nesterov = false, double weight_decay = 0.0);

  void init_arrays(const std::vector<Array>& params);
  void update_arrays(const std::vector<Array*>& params, const std::vector<Array>& grads);
};

/// Adam (Kingma & Ba, PyTorch's form): with weight decay g += wd·p (L2); m = β1·m + (1-β1)·g,
/// v = β2·v + (1-β2)·g², p -= lr·m̂/(√v̂ + ε) with m̂ = m/(1-β1ᵗ), v̂ = v/(1-β2ᵗ). Moments have the
/// parameters' dtypes; the bias corrections are computed in the parameter's dtype.
struct Adam : detail::ModelSteps<Adam> {
  static constexpr const char* kUpdate = "optim::Adam::update";
  Array lr, step;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  Schedule schedule;
  std::vector<Array> m, v;

  Adam() = default;
  explicit Adam(double lr, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8, double weight_decay = 0.0);
  explicit Adam(Schedule schedule, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
                double weight_decay = 0.0);

  void init_arrays(const std::vector<Array>& params);
  void update_arrays(const std::vector<Array*>& params, const std::vector<Array>& grads);
};

/// AdamW (Loshchilov & Hutter, PyTorch's form): Adam without L2, and decoupled weight decay
/// p *= 1 - lr·wd before the update.
struct AdamW : detail::ModelSteps<AdamW> {
  static constexpr const char* kUpdate = "optim::AdamW::update";
  Array lr, step;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
  Schedule schedule;
  std::vector<Array> m, v;

  AdamW() = default;
  explicit AdamW(double lr, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8, double weight_decay = 0.01);
  explicit AdamW(Schedule schedule, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
                 double weight_decay = 0.01);

  void init_arrays(const std::vector<Array>& params);
  void update_arrays(const std::vector<Array*>& params, const std::vector<Array>& grads);
};

}  // namespace smelt::optim

SMELT_TREE(smelt::optim::Schedule, kind, lr, warmup_steps, total_steps, final_lr)
SMELT_TREE(smelt::optim::SGD, lr, step, momentum, nesterov, weight_decay, schedule, velocity)
SMELT_TREE(smelt::optim::Adam, lr, step, beta1, beta2, eps, weight_decay, schedule, m, v)
SMELT_TREE(smelt::optim::AdamW, lr, step, beta1, beta2, eps, weight_decay, schedule, m, v)
