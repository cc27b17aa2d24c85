// ONNX recurrent layers RNN, GRU and LSTM: a time loop of smelt ops per direction.
#include <algorithm>
#include <cmath>

#include "src/onnx/ops/op_helpers.h"

namespace smelt::onnx {

namespace {

enum class Cell { Rnn, Gru, Lstm };

struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

Array apply_activation(const OpContext& c, const Activation& a, const Array& x) {
  Dtype dt = x.dtype();
  auto s = [&](double v) { return full({}, Array(v), dt); };
  const std::string& n = a.name;
  if (n == "Tanh") return tanh(x);
  if (n == "Sigmoid") return sigmoid(x);
  if (n == "Relu") return maximum(x, s(0));
  if (n == "Affine") return add(multiply(s(a.alpha), x), s(a.beta));
  if (n == "LeakyRelu") return where(less(x, s(0)), multiply(s(a.alpha), x), x);
  if (n == "ThresholdedRelu") return where(greater(x, s(a.alpha)), x, s(0));
  if (n == "ScaledTanh") return multiply(s(a.alpha), tanh(multiply(s(a.beta), x)));
  if (n == "HardSigmoid") return clip(add(multiply(s(a.alpha), x), s(a.beta)), s(0), s(1));
  if (n == "Elu") return where(less(x, s(0)), multiply(s(a.alpha), expm1(x)), x);
  if (n == "Softsign") return divide(x, add(abs(x), s(1)));
  if (n == "Softplus") return log1p(exp(x));
  c.fail("unknown activation \"" + n + "\"");
}

/// Default alpha/beta of the activations that take them, when the node gives none.
Activation activation_with_defaults(const std::string& name) {
  Activation a{name};
  if (name == "LeakyRelu") a.alpha = 0.01;
  else if (name == "ThresholdedRelu") a.alpha = 1.0;
  else if (name == "HardSigmoid") { a.alpha = 0.2; a.beta = 0.5; }
  else if (name == "Elu") a.alpha = 1.0;
  else if (name == "Affine") { a.alpha = 1.0; a.beta = 0.0; }
  else if (name == "ScaledTanh") { a.alpha = 1.0; a.beta = 1.0; }
  return a;
}

/// Reverses each batch element's first len[b] steps along axis 0 of [seq, batch, ...].
Array reverse_in_length(const Array& x, const std::vector<int64_t>& lens) {
  int64_t seq = x.shape()[0], batch = x.shape()[1];
  std::vector<int64_t> idx(static_cast<size_t>(seq * batch));
  for (int64_t t = 0; t < seq; ++t)
    for (int64_t b = 0; b < batch; ++b) {
      int64_t len = lens[static_cast<size_t>(b)];
      idx[static_cast<size_t>(t * batch + b)] = t < len ? len - 1 - t : t;
    }
  Shape s(static_cast<size_t>(x.ndim()), 1);
  s[0] = seq;
  s[1] = batch;
  return take_along_axis(x, broadcast_to(reshape(int64_array(idx), s), x.shape()), 0);
}

template <Cell K>
std::vector<Value> recurrent(OpContext& c) {
  const int gates = K == Cell::Rnn ? 1 : K == Cell::Gru ? 3 : 4;
  const int acts_per_dir = K == Cell::Rnn ? 1 : K == Cell::Gru ? 2 : 3;
  Array x = c.tensor(0);
  const Dtype dt = x.dtype();
  const bool batch_first = c.attr_int("layout", 0) != 0;
  if (x.ndim() != 3) c.fail("X must be 3-d, got " + c.input(0).describe());
  if (batch_first) x = transpose(x, {1, 0, 2});  // -> [seq, batch, input]
  const int64_t seq = x.shape()[0], batch = x.shape()[1];
  const Array& w_all = c.tensor(1);
  const Array& r_all = c.tensor(2);
  // Found by the fuzzer: a 0-d R was read at shape().back().
  if (r_all.ndim() != 3) c.fail("R must be [directions, gates * hidden, hidden], got " + c.input(2).describe());
  const int64_t hidden = c.attr_int("hidden_size", r_all.shape().back());
  if (hidden < 1 || hidden > (int64_t{1} << 32)) c.fail("hidden_size must be in [1, 2^32], got " + std::to_string(hidden));
  std::string direction = c.attr_string("direction", "forward");
  int dirs = direction == "bidirectional" ? 2 : 1;
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    c.fail("direction must be forward, reverse or bidirectional, got \"" + direction + "\"");
  if (w_all.ndim() != 3 || w_all.shape()[0] != dirs || w_all.shape()[1] != gates * hidden)
    c.fail("W must be [" + std::to_string(dirs) + ", " + std::to_string(gates * hidden) + ", input], got " + c.input(1).describe());
  std::vector<int64_t> lens(static_cast<size_t>(batch), seq);
  bool has_lens = c.has(4);
  if (has_lens) lens = c.ints(4);
  if (static_cast<int64_t>(lens.size()) != batch)
    c.fail("sequence_lens has " + std::to_string(lens.size()) + " values for a batch of " + std::to_string(batch));
  // Activations: the node's list, or each cell's defaults, per direction.
  std::vector<std::string> names = c.attr_strings("activations");
  std::vector<float> alphas = c.attr_floats("activation_alpha"), betas = c.attr_floats("activation_beta");
  std::vector<Activation> acts;
  size_t ai = 0, bi = 0;
  for (int d = 0; d < dirs; ++d)
    for (int k = 0; k < acts_per_dir; ++k) {
      std::string name;
      if (!names.empty()) name = names[static_cast<size_t>(d * acts_per_dir + k) % names.size()];
      else name = K == Cell::Rnn ? "Tanh" : k == 0 ? "Sigmoid" : "Tanh";
      Activation a = activation_with_defaults(name);
      bool takes_alpha = name == "LeakyRelu" || name == "ThresholdedRelu" || name == "HardSigmoid" || name == "Elu" ||
                         name == "Affine" || name == "ScaledTanh";
      bool takes_beta = name == "HardSigmoid" || name == "Affine" || name == "ScaledTanh";
      if (takes_alpha && ai < alphas.size()) a.alpha = alphas[ai++];
      if (takes_beta && bi < betas.size()) a.beta = betas[bi++];
      acts.push_back(a);
    }
  const double clip_v = c.attr_float("clip", 0.0f);
  auto clipped = [&](const Array& v) {
    if (clip_v <= 0) return v;
    return clip(v, full({}, Array(-clip_v), dt), full({}, Array(clip_v), dt));
  };
  const bool linear_before_reset = c.attr_int("linear_before_reset", 0) != 0;
  const bool input_forget = c.attr_int("input_forget", 0) != 0;
  // Valid-step masks [seq, batch, 1] for sequence_lens.
  std::vector<uint8_t> valid(static_cast<size_t>(seq * batch));
  for (int64_t t = 0; t < seq; ++t)
    for (int64_t b = 0; b < batch; ++b) valid[static_cast<size_t>(t * batch + b)] = t < lens[static_cast<size_t>(b)];
  Array valid_mask = reshape(Array(valid.data(), Shape{seq, batch}, bool_), {seq, batch, 1});

  std::vector<Array> ys, hs, cs;
  for (int d = 0; d < dirs; ++d) {
    bool reverse = direction == "reverse" || d == 1;
    Array w = squeeze(slice(w_all, Axes{0}, {d}, {d + 1}, {1}), Axes{0});  // [G*H, I]
    Array r = squeeze(slice(r_all, Axes{0}, {d}, {d + 1}, {1}), Axes{0});  // [G*H, H]
    Array wb = zeros({gates * hidden}, dt), rb = zeros({gates * hidden}, dt);
    if (c.has(3)) {
      Array b = squeeze(slice(c.tensor(3), Axes{0}, {d}, {d + 1}, {1}), Axes{0});
      wb = slice(b, {0}, {gates * hidden});
      rb = slice(b, {gates * hidden}, {2 * gates * hidden});
    }
    auto initial = [&](size_t input) {
      if (!c.has(input)) return zeros({batch, hidden}, dt);
      Array v = c.tensor(input);
      return batch_first ? squeeze(slice(v, Axes{1}, {d}, {d + 1}, {1}), Axes{1})
                         : squeeze(slice(v, Axes{0}, {d}, {d + 1}, {1}), Axes{0});
    };
    Array h = initial(5);
    Array cell = K == Cell::Lstm ? initial(6) : Array();
    Array p_i, p_o, p_f;
    if (K == Cell::Lstm && c.has(7)) {
      Array p = squeeze(slice(c.tensor(7), Axes{0}, {d}, {d + 1}, {1}), Axes{0});
      p_i = slice(p, {0}, {hidden});
      p_o = slice(p, {hidden}, {2 * hidden});
      p_f = slice(p, {2 * hidden}, {3 * hidden});
    }
    Array xs = reverse ? reverse_in_length(x, lens) : x;
    // Input projections for every step at once: [seq, batch, G*H].
    Array xw = add(matmul(xs, transpose(w)), wb);
    Array rt = transpose(r);
    auto gate = [&](const Array& all, int g) { return slice(all, Axes{all.ndim() - 1}, {g * hidden}, {(g + 1) * hidden}, {1}); };
    const Activation* act = &acts[static_cast<size_t>(d * acts_per_dir)];
    std::vector<Array> steps;
    for (int64_t t = 0; t < seq; ++t) {
      Array xt = squeeze(slice(xw, Axes{0}, {t}, {t + 1}, {1}), Axes{0});
      Array hr = matmul(h, rt);
      Array h_new, c_new;
      if (K == Cell::Rnn) {
        h_new = apply_activation(c, act[0], clipped(add(add(xt, hr), rb)));
      } else if (K == Cell::Gru) {
        Array z = apply_activation(c, act[0], clipped(add(add(gate(xt, 0), gate(hr, 0)), gate(rb, 0))));
        Array rg = apply_activation(c, act[0], clipped(add(add(gate(xt, 1), gate(hr, 1)), gate(rb, 1))));
        Array cand;
        if (linear_before_reset) {
          cand = add(gate(xt, 2), multiply(rg, add(gate(hr, 2), gate(rb, 2))));
        } else {
          Array rh = matmul(multiply(rg, h), slice(rt, Axes{1}, {2 * hidden}, {3 * hidden}, {1}));
          cand = add(add(gate(xt, 2), rh), gate(rb, 2));
        }
        Array hh = apply_activation(c, act[1], clipped(cand));
        h_new = add(multiply(subtract(full({}, Array(1.0), dt), z), hh), multiply(z, h));
      } else {
        Array pre = add(add(xt, hr), rb);
        Array ig = gate(pre, 0), og = gate(pre, 1), fg = gate(pre, 2), cg = gate(pre, 3);
        if (p_i.valid()) {
          ig = add(ig, multiply(p_i, cell));
          fg = add(fg, multiply(p_f, cell));
        }
        Array i_t = apply_activation(c, act[0], clipped(ig));
        Array f_t = input_forget ? subtract(full({}, Array(1.0), dt), i_t) : apply_activation(c, act[0], clipped(fg));
        Array c_t = apply_activation(c, act[1], clipped(cg));
        c_new = add(multiply(f_t, cell), multiply(i_t, c_t));
        if (p_o.valid()) og = add(og, multiply(p_o, c_new));
        Array o_t = apply_activation(c, act[0], clipped(og));
        h_new = multiply(o_t, apply_activation(c, act[2], c_new));
      }
      if (has_lens) {
        Array m = squeeze(slice(valid_mask, Axes{0}, {t}, {t + 1}, {1}), Axes{0});
        h = where(m, h_new, h);
        if (K == Cell::Lstm) cell = where(m, c_new, cell);
        steps.push_back(where(m, h_new, zeros({}, dt)));
      } else {
        h = h_new;
        if (K == Cell::Lstm) cell = c_new;
        steps.push_back(h_new);
      }
      eval({h});
    }
    Array y = stack(steps, 0);  // [seq, batch, H]
    if (reverse) y = reverse_in_length(y, lens);
    ys.push_back(y);
    hs.push_back(h);
    if (K == Cell::Lstm) cs.push_back(cell);
  }
  Array y = stack(ys, 1);     // [seq, dirs, batch, H]
  Array y_h = stack(hs, 0);   // [dirs, batch, H]
  if (batch_first) {
    y = transpose(y, {2, 0, 1, 3});
    y_h = transpose(y_h, {1, 0, 2});
  }
  std::vector<Value> out{tv(y), tv(y_h)};
  if (K == Cell::Lstm) {
    Array y_c = stack(cs, 0);
    if (batch_first) y_c = transpose(y_c, {1, 0, 2});
    out.push_back(tv(y_c));
  }
  return out;
}

}  // namespace

void register_rnn_ops(OpRegistry& r) {
  r.add("", "RNN", 7, recurrent<Cell::Rnn>);
  r.add("", "GRU", 7, recurrent<Cell::Gru>);
  r.add("", "LSTM", 7, recurrent<Cell::Lstm>);
}

}  // namespace smelt::onnx
