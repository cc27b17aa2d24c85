// smelt::optim::Adam and AdamW: one moment update shared by both, as PyTorch computes it.
#include <limits>

#include "src/optim/common.h"

namespace smelt::optim {

namespace {

void check(double beta1, double beta2, double eps, double weight_decay, const char* op) {
  detail::check_hyper(beta1, 0.0, 1.0, op, "beta1");
  detail::check_hyper(beta2, 0.0, 1.0, op, "beta2");
  detail::check_hyper(eps, 0.0, std::numeric_limits<double>::infinity(), op, "eps");
  detail::check_hyper(weight_decay, 0.0, std::numeric_limits<double>::infinity(), op, "weight_decay");
}

/// One Adam update of every parameter. `decoupled`: AdamW's p *= 1 - lr·wd instead of L2.
void adam_update(const std::vector<Array*>& params, const std::vector<Array>& grads, std::vector<Array>& m,
                 std::vector<Array>& v, const Array& lr, const Array& step, double beta1, double beta2, double eps,
                 double weight_decay, bool decoupled) {
  for (size_t i = 0; i < params.size(); ++i) {
    Array& p = *params[i];
    const Dtype dt = p.dtype();
    Array g = grads[i];
    Array rate = astype(lr, dt);
    Array t = astype(step, dt);
    if (weight_decay != 0.0) {
      if (decoupled)
        p = p * (1.0 - rate * weight_decay);
      else
        g = g + p * weight_decay;
    }
    m[i] = m[i] * beta1 + g * (1.0 - beta1);
    v[i] = v[i] * beta2 + g * g * (1.0 - beta2);
    // PyTorch's arrangement: step_size = lr / (1 - β1ᵗ), denom = √v / √(1 - β2ᵗ) + ε.
    Array bc1 = 1.0 - power(weak_scalar(beta1, dt), t);
    Array bc2 = 1.0 - power(weak_scalar(beta2, dt), t);
    Array denom = sqrt(v[i]) / sqrt(bc2) + eps;
    p = p - (rate / bc1) * (m[i] / denom);
  }
}

/// Both moments of every parameter, zeros of its dtype and shape.
void zero_moments(const std::vector<Array>& params, std::vector<Array>& m, std::vector<Array>& v) {
  m.clear();
  v.clear();
  for (const Array& p : params) {
    m.push_back(zeros_like(p));
    v.push_back(zeros_like(p));
  }
}

}  // namespace

Adam::Adam(double lr_, double b1, double b2, double e, double wd) : Adam(Schedule::constant(lr_), b1, b2, e, wd) {}

Adam::Adam(Schedule s, double b1, double b2, double e, double wd)
    : beta1(b1), beta2(b2), eps(e), weight_decay(wd), schedule(s) {
  check(beta1, beta2, eps, weight_decay, "optim::Adam");
  lr = detail::initial_lr(schedule);
  step = detail::initial_step();
}

void Adam::init_arrays(const std::vector<Array>& params) { zero_moments(params, m, v); }

void Adam::update_arrays(const std::vector<Array*>& params, const std::vector<Array>& grads) {
  const char* op = "optim::Adam::update";
  detail::advance(step, lr, schedule, op);
  detail::ensure_state(m, params, op, "first moments");
  detail::ensure_state(v, params, op, "second moments");
  adam_update(params, grads, m, v, lr, step, beta1, beta2, eps, weight_decay, false);
}

AdamW::AdamW(double lr_, double b1, double b2, double e, double wd) : AdamW(Schedule::constant(lr_), b1, b2, e, wd) {}

AdamW::AdamW(Schedule s, double b1, double b2, double e, double wd)
    : beta1(b1), beta2(b2), eps(e), weight_decay(wd), schedule(s) {
  check(beta1, beta2, eps, weight_decay, "optim::AdamW");
  lr = detail::initial_lr(schedule);
  step = detail::initial_step();
}

void AdamW::init_arrays(const std::vector<Array>& params) { zero_moments(params, m, v); }

void AdamW::update_arrays(const std::vector<Array*>& params, const std::vector<Array>& grads) {
  const char* op = "optim::AdamW::update";
  detail::advance(step, lr, schedule, op);
  detail::ensure_state(m, params, op, "first moments");
  detail::ensure_state(v, params, op, "second moments");
  adam_update(params, grads, m, v, lr, step, beta1, beta2, eps, weight_decay, true);
}

}  // namespace smelt::optim
