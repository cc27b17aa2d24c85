// smelt::nn: neural-network modules as trees, named parameters, freezing, gradients and saving.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "smelt/array.h"
#include "smelt/errors.h"
#include "smelt/io.h"
#include "smelt/ops.h"
#include "smelt/transforms.h"
#include "smelt/tree.h"

namespace smelt::nn {

// ---------------------------------------------------------------------------------------------
// Named traversal. Modules are trees (SMELT_TREE) whose array leaves are their parameters; the
// traversal below gives each leaf a dotted name ("blocks.0.attn.in_proj.weight", PyTorch's
// state_dict names) and says whether it is frozen. A module is declared with SMELT_MODULE
// (which also declares it a tree); a module with a `bool frozen` field freezes its own
// parameters and those of every module inside it.
// ---------------------------------------------------------------------------------------------

/// How a type is walked with names. Specialized for Array, static leaves, the standard
/// containers that trees allow, and the types declared with SMELT_MODULE.
template <class T, class Enable = void>
struct NamedTraits {
  static_assert(sizeof(T) == 0, "smelt::nn: this type has no parameter names; declare it with SMELT_MODULE(Type, fields...)");
};

namespace detail {

inline std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

template <class M>
bool frozen_flag(const M& m) {
  if constexpr (requires { m.frozen; })
    return static_cast<bool>(m.frozen);
  else
    return false;
}

/// Calls fn(name, x, frozen) for every module (x a module) and every array leaf (x an Array).
template <class T, class Fn>
void visit(T& value, const std::string& prefix, bool frozen, Fn& fn) {
  NamedTraits<std::remove_const_t<T>>::visit(value, prefix, frozen, fn);
}

}  // namespace detail

template <>
struct NamedTraits<Array> {
  template <class V, class Fn>
  static void visit(V& a, const std::string& name, bool frozen, Fn& fn) {
    fn(name, a, frozen);
  }
};

template <class T>
struct NamedTraits<T, std::enable_if_t<std::is_arithmetic_v<T> || std::is_enum_v<T>>> {
  template <class V, class Fn>
  static void visit(V&, const std::string&, bool, Fn&) {}
};

template <>
struct NamedTraits<std::string> {
  template <class V, class Fn>
  static void visit(V&, const std::string&, bool, Fn&) {}
};

template <class T>
struct NamedTraits<std::vector<T>> {
  template <class V, class Fn>
  static void visit(V& v, const std::string& prefix, bool frozen, Fn& fn) {
    for (size_t i = 0; i < v.size(); ++i) detail::visit(v[i], detail::join(prefix, std::to_string(i)), frozen, fn);
  }
};

template <class T, size_t N>
struct NamedTraits<std::array<T, N>> {
  template <class V, class Fn>
  static void visit(V& v, const std::string& prefix, bool frozen, Fn& fn) {
    for (size_t i = 0; i < N; ++i) detail::visit(v[i], detail::join(prefix, std::to_string(i)), frozen, fn);
  }
};

template <class... Ts>
struct NamedTraits<std::tuple<Ts...>> {
  template <class V, class Fn>
  static void visit(V& v, const std::string& prefix, bool frozen, Fn& fn) {
    [&]<size_t... I>(std::index_sequence<I...>) {
      (detail::visit(std::get<I>(v), detail::join(prefix, std::to_string(I)), frozen, fn), ...);
    }(std::index_sequence_for<Ts...>{});
  }
};

template <class A, class B>
struct NamedTraits<std::pair<A, B>> {
  template <class V, class Fn>
  static void visit(V& v, const std::string& prefix, bool frozen, Fn& fn) {
    detail::visit(v.first, detail::join(prefix, "0"), frozen, fn);
    detail::visit(v.second, detail::join(prefix, "1"), frozen, fn);
  }
};

template <class T>
struct NamedTraits<std::optional<T>> {
  template <class V, class Fn>
  static void visit(V& v, const std::string& prefix, bool frozen, Fn& fn) {
    if (v) detail::visit(*v, prefix, frozen, fn);
  }
};

template <class T>
struct NamedTraits<std::map<std::string, T>> {
  template <class V, class Fn>
  static void visit(V& v, const std::string& prefix, bool frozen, Fn& fn) {
    for (auto& [k, x] : v) detail::visit(x, detail::join(prefix, k), frozen, fn);
  }
};

}  // namespace smelt::nn

#define SMELT_NN_VISIT_FIELD(field) ::smelt::nn::detail::visit(v.field, ::smelt::nn::detail::join(prefix, #field), frozen, fn);

/// Declares a module: a tree over the listed fields (SMELT_TREE) whose array leaves are named
/// by field (`SMELT_MODULE(Block, attn, mlp, ln1, ln2)`), at global namespace scope.
#define SMELT_MODULE(Type, ...)                                                      \
  SMELT_TREE(Type, __VA_ARGS__)                                                      \
  template <>                                                                        \
  struct smelt::nn::NamedTraits<Type> {                                              \
    template <class V, class Fn>                                                     \
    static void visit(V& v, const std::string& prefix, bool frozen, Fn& fn) {        \
      fn(prefix, v, frozen);                                                         \
      frozen = frozen || ::smelt::nn::detail::frozen_flag(v);                        \
      SMELT_TREE_FOR_EACH(SMELT_NN_VISIT_FIELD, __VA_ARGS__)                         \
    }                                                                                \
  };

namespace smelt::nn {

/// Every parameter (array leaf) with its dotted name, frozen ones included, in tree order.
template <class M>
std::vector<std::pair<std::string, Array>> parameters(const M& model) {
  std::vector<std::pair<std::string, Array>> out;
  auto fn = [&](const std::string& name, const auto& x, bool) {
    if constexpr (std::is_same_v<std::decay_t<decltype(x)>, Array>) out.emplace_back(name, x);
  };
  detail::visit(model, "", false, fn);
  return out;
}

/// The parameters that are not frozen: those value_and_grad differentiates and optimizers update.
template <class M>
std::vector<std::pair<std::string, Array>> trainable_parameters(const M& model) {
  std::vector<std::pair<std::string, Array>> out;
  auto fn = [&](const std::string& name, const auto& x, bool frozen) {
    if constexpr (std::is_same_v<std::decay_t<decltype(x)>, Array>)
      if (!frozen) out.emplace_back(name, x);
  };
  detail::visit(model, "", false, fn);
  return out;
}

/// The number of elements over all parameters.
template <class M>
int64_t num_parameters(const M& model) {
  int64_t n = 0;
  for (auto& [name, a] : parameters(model)) n += a.size();
  return n;
}

namespace detail {

/// Pointers to the array leaves of `model` (all, or only the trainable ones), in tree order.
template <class M>
std::vector<Array*> leaf_slots(M& model, bool trainable_only) {
  std::vector<Array*> out;
  auto fn = [&](const std::string&, auto& x, bool frozen) {
    if constexpr (std::is_same_v<std::decay_t<decltype(x)>, Array>)
      if (!trainable_only || !frozen) out.push_back(&x);
  };
  visit(model, "", false, fn);
  return out;
}

/// Sets `field` on every module named `prefix` or inside it (all modules for an empty prefix).
template <class M, class Set>
void set_modules(M& model, const std::string& prefix, Set set) {
  auto fn = [&](const std::string& name, auto& x, bool) {
    if constexpr (!std::is_same_v<std::decay_t<decltype(x)>, Array>) {
      const bool inside = prefix.empty() || name == prefix || name.rfind(prefix + ".", 0) == 0;
      if (inside) set(x);
    }
  };
  visit(model, "", false, fn);
}

}  // namespace detail

/// Freezes the modules named `prefix` and inside it (the whole model when empty): their
/// parameters get no gradient from nn::value_and_grad and optimizers leave them as they are.
/// `frozen` is a static field of each module, so it is part of a compiled step's key (freezing
/// between steps retraces once).
template <class M>
void freeze(M& model, const std::string& prefix = "") {
  detail::set_modules(model, prefix, [](auto& m) {
    if constexpr (requires { m.frozen; }) m.frozen = true;
  });
}
/// Clears the frozen flag of the modules named `prefix` and inside it (a parameter stays frozen
/// while a module above it is frozen).
template <class M>
void unfreeze(M& model, const std::string& prefix = "") {
  detail::set_modules(model, prefix, [](auto& m) {
    if constexpr (requires { m.frozen; }) m.frozen = false;
  });
}

/// Sets the training mode (Dropout's static `training` field) of every module.
template <class M>
void train(M& model, bool training = true) {
  detail::set_modules(model, "", [training](auto& m) {
    if constexpr (requires { m.training; }) m.training = training;
  });
}
/// train(model, false): dropout becomes the identity.
template <class M>
void eval_mode(M& model) {
  train(model, false);
}

/// value_and_grad over a model's trainable parameters: `nn::value_and_grad(loss)(model, args...)`
/// returns `std::pair{loss(model, args...), grads}`, where grads has the model's type, holds the
/// gradient of each trainable parameter, and an empty handle (no gradient) for each frozen one.
/// The loss must be a one-element floating-point array; trainable parameters must be floating
/// point (freeze integer buffers).
template <class F>
auto value_and_grad(F loss) {
  return [loss = std::move(loss)]<class M, class... Args>(const M& model, const Args&... args) {
    M probe = model;
    std::vector<Array> primals;
    for (Array* slot : detail::leaf_slots(probe, true)) primals.push_back(*slot);
    smelt::detail::check_differentiable(primals, 0, "nn::value_and_grad");
    ArrayFn flat = [&](const std::vector<Array>& xs) {
      M m = model;
      auto slots = detail::leaf_slots(m, true);
      for (size_t i = 0; i < slots.size(); ++i) *slots[i] = xs[i];
      return std::vector<Array>{loss(std::as_const(m), args...)};
    };
    auto [outs, grads] = smelt::detail::grad_vjp(flat, primals, "nn::value_and_grad");
    M g = model;
    for (Array* slot : detail::leaf_slots(g, false)) *slot = Array();
    auto slots = detail::leaf_slots(g, true);
    for (size_t i = 0; i < slots.size(); ++i) *slots[i] = grads[i];
    return std::pair<Array, M>{outs[0], std::move(g)};
  };
}

// ---------------------------------------------------------------------------------------------
// Saving and loading parameters (.safetensors)
// ---------------------------------------------------------------------------------------------

namespace detail {
/// Checks `loaded` against the model's parameters (names, shapes, dtypes) and returns each
/// parameter's new array in `names` order (moved to the device of the array it replaces).
std::vector<Array> match_loaded(const std::vector<std::pair<std::string, Array>>& params,
                                const std::map<std::string, Array>& loaded, const std::string& path, bool strict);
}  // namespace detail

/// Writes every parameter (frozen ones included) to a .safetensors file under its dotted name.
template <class M>
void save(const M& model, const std::string& path) {
  std::map<std::string, Array> named;
  for (auto& [name, a] : parameters(model)) named.emplace(name, a);
  save_safetensors(path, named);
}
/// Reads parameters from a .safetensors file into `model` (the model's structure decides the
/// names; each must be in the file with the same shape and dtype). With `strict`, tensors of the
/// file that the model has no parameter for are an error too. On error the model is unchanged.
template <class M>
void load(M& model, const std::string& path, bool strict = true) {
  std::vector<Array> values = detail::match_loaded(parameters(model), load_safetensors(path), path, strict);
  auto slots = detail::leaf_slots(model, false);
  for (size_t i = 0; i < slots.size(); ++i) *slots[i] = std::move(values[i]);
}

// ---------------------------------------------------------------------------------------------
// Modules. Constructors draw their initial parameters from an explicit key, or from the thread's
// key sequence (random::next_key) when none is given. Parameters are float32 unless a dtype is
// given. Weights use PyTorch's layouts and initializations, so PyTorch state dicts load.
// ---------------------------------------------------------------------------------------------

/// y = x Wᵀ + b, W [out, in] and b [out], both U(-1/√in, 1/√in).
struct Linear {
  Array weight;
  std::optional<Array> bias;
  bool frozen = false;

  Linear() = default;
  Linear(int64_t in_features, int64_t out_features, bool bias = true, std::optional<Array> key = std::nullopt,
         Dtype dtype = float32);
  Array operator()(const Array& x) const;
};

/// Rows of `weight` [num, dim] (N(0, 1)) at integer indices: out shape = indices.shape + [dim].
struct Embedding {
  Array weight;
  bool frozen = false;

  Embedding() = default;
  Embedding(int64_t num_embeddings, int64_t dim, std::optional<Array> key = std::nullopt, Dtype dtype = float32);
  Array operator()(const Array& indices) const;
};

/// layer_norm over the last axis with weight (ones) and bias (zeros).
struct LayerNorm {
  std::optional<Array> weight, bias;
  double eps = 1e-5;
  bool frozen = false;

  LayerNorm() = default;
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool affine = true, Dtype dtype = float32);
  Array operator()(const Array& x) const;
};

/// rms_norm over the last axis with weight (ones).
struct RMSNorm {
  std::optional<Array> weight;
  double eps = 1e-5;
  bool frozen = false;

  RMSNorm() = default;
  explicit RMSNorm(int64_t dim, double eps = 1e-5, bool affine = true, Dtype dtype = float32);
  Array operator()(const Array& x) const;
};

/// conv1d over [N, C, W]: weight [out, in/groups, k] and bias [out], U(-1/√(in/groups·k), ·).
struct Conv1d {
  Array weight;
  std::optional<Array> bias;
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
  bool frozen = false;

  Conv1d() = default;
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1, int64_t padding = 0,
         int64_t dilation = 1, int64_t groups = 1, bool bias = true, std::optional<Array> key = std::nullopt,
         Dtype dtype = float32);
  Array operator()(const Array& x) const;
};

/// conv2d over [N, C, H, W]: weight [out, in/groups, kh, kw] and bias [out].
struct Conv2d {
  Array weight;
  std::optional<Array> bias;
  std::pair<int64_t, int64_t> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
  bool frozen = false;

  Conv2d() = default;
  Conv2d(int64_t in_channels, int64_t out_channels, std::pair<int64_t, int64_t> kernel,
         std::pair<int64_t, int64_t> stride = {1, 1}, std::pair<int64_t, int64_t> padding = {0, 0},
         std::pair<int64_t, int64_t> dilation = {1, 1}, int64_t groups = 1, bool bias = true,
         std::optional<Array> key = std::nullopt, Dtype dtype = float32);
  Array operator()(const Array& x) const;
};

/// Zeroes each element with probability p and scales the others by 1/(1-p) while `training`
/// (a static field: switching retraces a compiled step once); the identity otherwise. The mask
/// draws from the thread's key sequence (random::next_key), which compile_mut threads through
/// compiled steps.
struct Dropout {
  double p = 0.0;
  bool training = true;

  Dropout() = default;
  explicit Dropout(double p);
  Array operator()(const Array& x) const;
};

/// Multi-head self-attention over [B, T, D] with PyTorch's nn.MultiheadAttention layout: one
/// input projection in_proj [3D, D] (q, k, v stacked) and out_proj [D, D]. `causal` masks
/// future positions; a bool mask (true = attend) broadcast to [B, H, T, T] may be added.
struct MultiHeadAttention {
  Linear in_proj, out_proj;
  int64_t num_heads = 1;
  bool causal = false;
  bool frozen = false;

  MultiHeadAttention() = default;
  MultiHeadAttention(int64_t dim, int64_t num_heads, bool causal = false, bool bias = true,
                     std::optional<Array> key = std::nullopt, Dtype dtype = float32);
  Array operator()(const Array& x, const std::optional<Array>& mask = std::nullopt) const;
};

/// softmax(q kᵀ / √d [masked]) v over [..., T, d] (mask true = attend): [batch, heads, T, d] runs
/// scaled_dot_product_attention (a query row with every key masked gives zeros), other ranks the
/// composed form (NaN there).
Array attention(const Array& q, const Array& k, const Array& v, const std::optional<Array>& mask = std::nullopt);

enum class Activation : uint8_t { Relu, Gelu, GeluTanh, Silu, Tanh };
/// The activation function `a` applied to x.
Array activate(Activation a, const Array& x);

/// fc2(activation(fc1(x))).
struct MLP {
  Linear fc1, fc2;
  Activation activation = Activation::Gelu;
  bool frozen = false;

  MLP() = default;
  MLP(int64_t in_features, int64_t hidden, int64_t out_features, Activation activation = Activation::Gelu,
      bool bias = true, std::optional<Array> key = std::nullopt, Dtype dtype = float32);
  Array operator()(const Array& x) const;
};

/// Modules applied in order; parameters are named by position ("0.weight", as PyTorch does).
template <class... Ms>
struct Sequential {
  std::tuple<Ms...> layers;
  bool frozen = false;

  Sequential() = default;
  explicit Sequential(Ms... ms) : layers(std::move(ms)...) {}
  Array operator()(const Array& x) const {
    Array y = x;
    std::apply([&](const auto&... m) { ((y = m(y)), ...); }, layers);
    return y;
  }
};

// ---------------------------------------------------------------------------------------------
// Losses
// ---------------------------------------------------------------------------------------------

/// Mean cross entropy of logits [..., C] against integer class targets [...] (computed with
/// log_softmax, float32 for halves).
Array cross_entropy(const Array& logits, const Array& targets);
/// Mean squared error.
Array mse_loss(const Array& prediction, const Array& target);

}  // namespace smelt::nn

SMELT_MODULE(smelt::nn::Linear, weight, bias, frozen)
SMELT_MODULE(smelt::nn::Embedding, weight, frozen)
SMELT_MODULE(smelt::nn::LayerNorm, weight, bias, eps, frozen)
SMELT_MODULE(smelt::nn::RMSNorm, weight, eps, frozen)
SMELT_MODULE(smelt::nn::Conv1d, weight, bias, stride, padding, dilation, groups, frozen)
SMELT_MODULE(smelt::nn::Conv2d, weight, bias, stride, padding, dilation, groups, frozen)
SMELT_MODULE(smelt::nn::Dropout, p, training)
SMELT_MODULE(smelt::nn::MultiHeadAttention, in_proj, out_proj, num_heads, causal, frozen)
SMELT_MODULE(smelt::nn::MLP, fc1, fc2, activation, frozen)

// Sequential is a template: its tree and name traits are written out.
template <class... Ms>
struct smelt::TreeTraits<smelt::nn::Sequential<Ms...>> {
  static void flatten(const smelt::nn::Sequential<Ms...>& v, FlatTree& out) {
    out.structure += '{';
    tree_flatten(v.layers, out);
    tree_flatten(v.frozen, out);
    out.structure += '}';
  }
  static smelt::nn::Sequential<Ms...> unflatten(tree_detail::Reader& r) {
    r.expect('{');
    smelt::nn::Sequential<Ms...> v;
    v.layers = tree_unflatten<std::tuple<Ms...>>(r);
    v.frozen = tree_unflatten<bool>(r);
    r.expect('}');
    return v;
  }
};
template <class... Ms>
struct smelt::nn::NamedTraits<smelt::nn::Sequential<Ms...>> {
  template <class V, class Fn>
  static void visit(V& v, const std::string& prefix, bool frozen, Fn& fn) {
    fn(prefix, v, frozen);
    detail::visit(v.layers, prefix, frozen || v.frozen, fn);
  }
};
