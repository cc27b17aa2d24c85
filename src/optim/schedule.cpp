// smelt::optim learning-rate schedules and gradient clipping by global norm.
#include <cmath>
#include <numbers>
#include <string>

#include "smelt/ops.h"
#include "smelt/optim.h"

namespace smelt::optim {

Schedule Schedule::constant(double lr) {
  Schedule s;
  s.lr = lr;
  return s;
}

Schedule Schedule::warmup_cosine(double lr, int64_t warmup_steps, int64_t total_steps, double final_lr) {
  if (warmup_steps < 0 || total_steps < warmup_steps)
    throw InvalidArgument("optim::Schedule::warmup_cosine: need 0 <= warmup_steps <= total_steps, got warmup_steps " +
                          std::to_string(warmup_steps) + " and total_steps " + std::to_string(total_steps));
  Schedule s;
  s.kind = Kind::WarmupCosine;
  s.lr = lr;
  s.warmup_steps = warmup_steps;
  s.total_steps = total_steps;
  s.final_lr = final_lr;
  return s;
}

Array Schedule::at(const Array& step) const {
  switch (kind) {
    case Kind::Constant: return full({}, Array(static_cast<float>(lr)), float32);  // on the default device
    case Kind::WarmupCosine: {
      Array t = astype(step, float64);
      const double warm = static_cast<double>(warmup_steps);
      const double span = static_cast<double>(std::max<int64_t>(total_steps - warmup_steps, 1));
      Array progress = clip((t - warm) / span, Array(0.0), Array(1.0));
      Array cosine = final_lr + (lr - final_lr) * 0.5 * (1.0 + cos(progress * std::numbers::pi));
      Array rate = warmup_steps > 0 ? where(t <= warm, t * (lr / warm), cosine) : cosine;
      return astype(rate, float32);
    }
  }
  throw InvalidArgument("optim::Schedule::at: unknown kind " + std::to_string(static_cast<int>(kind)));
}

std::pair<std::vector<Array>, Array> clip_by_global_norm(const std::vector<Array>& grads, double max_norm) {
  if (!(max_norm > 0.0))
    throw InvalidArgument("optim::clip_grad_norm: max_norm must be positive, got " + std::to_string(max_norm));
  Dtype acc = float32;
  for (const Array& g : grads) {
    if (!g.valid()) continue;
    if (!is_floating(g.dtype()))
      throw DtypeError(std::string("optim::clip_grad_norm: gradients must be floating point, got ") +
                       dtype_name(g.dtype()) + shape_to_string(g.shape()));
    if (g.dtype() == float64) acc = float64;
  }
  // Summed leaf by leaf in tree order: the same order on every device and thread count.
  Array total = zeros({}, acc);
  for (const Array& g : grads)
    if (g.valid()) total = total + sum(square(astype(g, acc)));
  Array norm = sqrt(total);
  Array scale = minimum(weak_scalar(1.0, acc), max_norm / (norm + 1e-6));
  std::vector<Array> out;
  for (const Array& g : grads) out.push_back(g.valid() ? g * astype(scale, g.dtype()) : g);
  return {std::move(out), norm};
}

namespace detail {

void check_grads(const std::vector<Array*>& params, const std::vector<Array>& grads, const char* op) {
  if (params.size() != grads.size())
    throw InvalidArgument(std::string(op) + ": the model has " + std::to_string(params.size()) +
                          " trainable parameters but the gradient tree " + std::to_string(grads.size()));
  for (size_t i = 0; i < params.size(); ++i) {
    const Array& p = *params[i];
    const Array& g = grads[i];
    if (!g.valid())
      throw InvalidArgument(std::string(op) + ": trainable parameter " + std::to_string(i) +
                            " has no gradient (was it frozen when the gradient was taken?)");
    if (g.shape() != p.shape())
      throw ShapeError(std::string(op) + ": parameter " + std::to_string(i) + " is " + dtype_name(p.dtype()) +
                       shape_to_string(p.shape()) + " but its gradient " + dtype_name(g.dtype()) + shape_to_string(g.shape()));
  }
}

}  // namespace detail

}  // namespace smelt::optim
