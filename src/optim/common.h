// Shared steps of the optimizers: construction, the step counter and the scheduled rate.
#pragma once

#include <string>

#include "smelt/ops.h"
#include "smelt/optim.h"

namespace smelt::optim::detail {

/// A fresh step counter (0 updates done) on the default device, where the parameters a model
/// makes go: host scalars would be copied to the GPU on every step.
inline Array initial_step() { return zeros({}, int32); }

/// The initial rate array of a schedule (update 0), on the default device.
inline Array initial_lr(const Schedule& s) { return s.at(initial_step()); }

/// Counts the update and sets the scheduled rate (a constant schedule keeps `lr`, which the user
/// may have replaced).
inline void advance(Array& step, Array& lr, const Schedule& schedule, const char* op) {
  if (!step.valid() || !lr.valid())
    throw InvalidArgument(std::string(op) + ": the optimizer is default-constructed; construct it with a learning rate "
                          "or a schedule");
  step = step + 1;
  if (schedule.kind != Schedule::Kind::Constant) lr = schedule.at(step);
}

/// Checks that per-parameter state exists for `n` parameters, creating it (zeros) when empty.
inline void ensure_state(std::vector<Array>& state, const std::vector<Array*>& params, const char* op, const char* what) {
  if (state.empty()) {
    for (Array* p : params) state.push_back(zeros_like(*p));
    return;
  }
  if (state.size() != params.size())
    throw InvalidArgument(std::string(op) + ": the optimizer holds " + what + " for " + std::to_string(state.size()) +
                          " parameters but the model has " + std::to_string(params.size()) +
                          " trainable ones; call init(model) again after freezing or unfreezing");
  for (size_t i = 0; i < params.size(); ++i)
    if (state[i].shape() != params[i]->shape())
      throw ShapeError(std::string(op) + ": " + what + " " + std::to_string(i) + " is " + shape_to_string(state[i].shape()) +
                       " but its parameter " + shape_to_string(params[i]->shape()) + "; call init(model) again");
}

inline void check_hyper(double v, double lo, double hi, const char* op, const char* name) {
  if (!(v >= lo && v < hi))
    throw InvalidArgument(std::string(op) + ": " + name + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                          "), got " + std::to_string(v));
}

}  // namespace smelt::optim::detail
