// smelt::nn losses: cross entropy over class logits and mean squared error.
#include <string>

#include "smelt/nn.h"

namespace smelt::nn {

namespace {
std::string desc(const Array& a) { return std::string(dtype_name(a.dtype())) + shape_to_string(a.shape()); }
}  // namespace

Array cross_entropy(const Array& logits, const Array& targets) {
  if (!is_floating(logits.dtype())) throw DtypeError("nn::cross_entropy: logits must be floating point, got " + desc(logits));
  if (!is_integral(targets.dtype()))
    throw DtypeError("nn::cross_entropy: targets must be integer class indices, got " + desc(targets));
  Shape batch(logits.shape().begin(), logits.shape().end() - (logits.ndim() > 0 ? 1 : 0));
  if (logits.ndim() == 0 || targets.shape() != batch)
    throw ShapeError("nn::cross_entropy: logits " + desc(logits) + " must be [..., classes] over targets " + desc(targets) +
                     " of shape [...]");
  Array picked = take_along_axis(log_softmax(logits, {-1}), expand_dims(targets, -1), -1);
  return -mean(picked);
}

Array mse_loss(const Array& prediction, const Array& target) { return mean(square(prediction - target)); }

}  // namespace smelt::nn
