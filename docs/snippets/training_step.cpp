// docs/training.md: a model and an optimizer as one tree, trained by one compiled step.
// snippet-begin
#include <smelt/compile.h>
#include <smelt/nn.h>
#include <smelt/optim.h>
using namespace smelt;

struct Net {
  nn::Linear fc1, fc2;
  nn::Dropout drop{0.1};
  bool frozen = false;
  Array operator()(const Array& x) const { return fc2(drop(relu(fc1(x)))); }
};
SMELT_MODULE(Net, fc1, fc2, drop, frozen)   // a tree whose parameters are named by field

struct State { Net model; optim::AdamW opt; };
SMELT_TREE(State, model, opt)
// snippet-end

int main() {
  std::vector<std::pair<Array, Array>> batches;
  for (int i = 0; i < 3; ++i)
    batches.push_back({random::normal(random::key(i), {8, 784}), random::randint(random::key(100 + i), 0, 10, {8})});
  // snippet-begin
  State s{Net{nn::Linear(784, 256), nn::Linear(256, 10)}, optim::AdamW(1e-3)};
  s.opt.init(s.model);                         // before the loop (see "State structure" below)
  auto step = compile_mut([](State& s, const std::pair<Array, Array>& xy) {
    auto loss = [](const Net& m, const Array& x, const Array& y) { return nn::cross_entropy(m(x), y); };
    auto [l, grads] = nn::value_and_grad(loss)(s.model, xy.first, xy.second);
    grads = optim::clip_grad_norm(grads, 1.0).first;
    s.opt.update(s.model, grads);
    return l;
  });
  for (auto& batch : batches) step(s, batch);  // traced on the first call, replayed after
  // snippet-end
}
