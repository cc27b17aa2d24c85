// smelt::optim::SGD: plain, momentum and Nesterov updates, with L2 weight decay.
#include <limits>

#include "src/optim/common.h"

namespace smelt::optim {

SGD::SGD(double lr_, double momentum_, bool nesterov_, double weight_decay_)
    : SGD(Schedule::constant(lr_), momentum_, nesterov_, weight_decay_) {}

SGD::SGD(Schedule s, double momentum_, bool nesterov_, double weight_decay_)
    : momentum(momentum_), nesterov(nesterov_), weight_decay(weight_decay_), schedule(s) {
  detail::check_hyper(momentum, 0.0, 1.0, "optim::SGD", "momentum");
  detail::check_hyper(weight_decay, 0.0, std::numeric_limits<double>::infinity(), "optim::SGD", "weight_decay");
  if (nesterov && momentum == 0.0) throw InvalidArgument("optim::SGD: Nesterov momentum needs momentum > 0");
  lr = detail::initial_lr(schedule);
  step = detail::initial_step();
}

void SGD::init_arrays(const std::vector<Array>& params) {
  velocity.clear();
  if (momentum == 0.0) return;
  for (const Array& p : params) velocity.push_back(zeros_like(p));
}

void SGD::update_arrays(const std::vector<Array*>& params, const std::vector<Array>& grads) {
  const char* op = "optim::SGD::update";
  detail::advance(step, lr, schedule, op);
  if (momentum != 0.0) detail::ensure_state(velocity, params, op, "velocity");
  for (size_t i = 0; i < params.size(); ++i) {
    Array& p = *params[i];
    Array g = grads[i];
    if (weight_decay != 0.0) g = g + p * weight_decay;
    if (momentum != 0.0) {
      velocity[i] = velocity[i] * momentum + g;
      g = nesterov ? g + velocity[i] * momentum : velocity[i];
    }
    p = p - astype(lr, p.dtype()) * g;
  }
}

}  // namespace smelt::optim
