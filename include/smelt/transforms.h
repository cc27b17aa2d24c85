// Function transforms: reverse-mode (vjp, grad, value_and_grad) and forward-mode (jvp) autodiff,
// vmap (batching) and checkpoint (recompute in the backward pass).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "smelt/array.h"
#include "smelt/errors.h"
#include "smelt/tree.h"

namespace smelt {

/// A function over a flat list of arrays, the form the core transforms work on.
using ArrayFn = std::function<std::vector<Array>(const std::vector<Array>&)>;

/// Reverse mode: runs `f` on `primals` and pulls `cotangents` (one per output, of the output's
/// shape and dtype) back through the graph f built. Returns f's outputs and one cotangent per
/// primal (zeros for a primal the outputs do not depend on). The backward graph is made of
/// ordinary ops, so it can be compiled and differentiated again. Only floating-point arrays carry
/// gradients. Raises UnsupportedError naming the primitive when a gradient must flow through an op
/// that has none (docs/transforms.md lists them).
std::pair<std::vector<Array>, std::vector<Array>> vjp(const ArrayFn& f, const std::vector<Array>& primals,
                                                      const std::vector<Array>& cotangents);

/// Forward mode: runs `f` on `primals` and pushes `tangents` (one per primal, of its shape) forward.
/// Returns f's outputs and their tangents (J·t).
std::pair<std::vector<Array>, std::vector<Array>> jvp(const ArrayFn& f, const std::vector<Array>& primals,
                                                      const std::vector<Array>& tangents);

/// `a` itself as far as values go; transforms treat it as a constant (no gradient flows into `a`
/// through it).
Array stop_gradient(const Array& a);

/// Which arguments grad and value_and_grad differentiate: `smelt::argnums<0, 2>`.
template <int... I>
struct Argnums {};
template <int... I>
inline constexpr Argnums<I...> argnums{};
/// value_and_grad's tag for a function that returns `std::pair<Array, Aux>`: the loss and an
/// auxiliary tree that is returned as is and not differentiated.
struct HasAux {};
inline constexpr HasAux has_aux{};

/// vmap's axis for an argument that is the same for every example.
inline constexpr std::nullopt_t not_mapped = std::nullopt;

namespace detail {

/// The flat core of vmap: one axis per input leaf (nullopt: not mapped); out_axes has one entry for
/// every output leaf or one per output leaf.
std::vector<Array> vmap_flat(const ArrayFn& f, const std::vector<Array>& inputs,
                             const std::vector<std::optional<int>>& in_axes, const std::vector<int>& out_axes);
/// The flat core of checkpoint: runs f on inputs and marks its outputs, so that reverse mode pulls
/// the call back by running f again (f is kept and called later: it must own what it captures).
std::vector<Array> checkpoint_flat(const ArrayFn& f, const std::vector<Array>& inputs);

/// True while a transform runs the user's function on this thread: compiled functions called then
/// run their function directly (as on tracers), so the transform sees the ops they make.
bool in_transform();

template <class F>
struct FnTraits;
template <class R, class... Args>
struct FnTraits<std::function<R(Args...)>> {
  using Result = R;
  using ArgsTuple = std::tuple<std::decay_t<Args>...>;
};

/// The scalar loss of a function result (an Array, or with has_aux the first of a pair).
inline const Array& loss_of(const Array& a) { return a; }
template <class A>
const Array& loss_of(const std::pair<Array, A>& p) {
  return p.first;
}

/// vjp of a function with one output that must be a one-element floating-point array (a loss),
/// seeded with ones; `op` names the transform in errors.
std::pair<std::vector<Array>, std::vector<Array>> grad_vjp(const ArrayFn& f, const std::vector<Array>& primals,
                                                           const char* op);
/// Checks the leaves to differentiate have floating-point dtypes.
void check_differentiable(const std::vector<Array>& leaves, int argnum, const char* op);

/// The core of grad/value_and_grad over tree arguments.
template <bool Aux, int... I, class R, class Tuple>
auto value_and_grad_impl(const std::function<R(const Tuple&)>& call, const Tuple& args, const char* op) {
  constexpr size_t n = sizeof...(I);
  static_assert(n > 0, "smelt: argnums must name at least one argument");
  constexpr int nums[] = {I...};
  std::vector<FlatTree> flats;
  std::vector<Array> primals;
  std::vector<size_t> starts;
  for (size_t k = 0; k < n; ++k) {
    FlatTree t;
    [&]<size_t... J>(std::index_sequence<J...>) {
      ((J == static_cast<size_t>(nums[k]) ? (tree_flatten(std::get<J>(args), t), 0) : 0), ...);
    }(std::make_index_sequence<std::tuple_size_v<Tuple>>{});
    check_differentiable(t.leaves, nums[k], op);
    starts.push_back(primals.size());
    primals.insert(primals.end(), t.leaves.begin(), t.leaves.end());
    flats.push_back(std::move(t));
  }
  starts.push_back(primals.size());
  R result{};
  ArrayFn flat_fn = [&](const std::vector<Array>& leaves) {
    Tuple traced = args;
    for (size_t k = 0; k < n; ++k) {
      std::vector<Array> sub(leaves.begin() + static_cast<std::ptrdiff_t>(starts[k]),
                             leaves.begin() + static_cast<std::ptrdiff_t>(starts[k + 1]));
      [&]<size_t... J>(std::index_sequence<J...>) {
        ((J == static_cast<size_t>(nums[k])
              ? (std::get<J>(traced) = unflatten_tree<std::tuple_element_t<J, Tuple>>(sub, flats[k].structure), 0)
              : 0),
         ...);
      }(std::make_index_sequence<std::tuple_size_v<Tuple>>{});
    }
    result = call(traced);
    return std::vector<Array>{loss_of(result)};
  };
  auto [outs, grads] = grad_vjp(flat_fn, primals, op);
  auto unflat = [&]<size_t K>(std::integral_constant<size_t, K>) {
    using G = std::tuple_element_t<static_cast<size_t>(nums[K]), Tuple>;
    std::vector<Array> sub(grads.begin() + static_cast<std::ptrdiff_t>(starts[K]),
                           grads.begin() + static_cast<std::ptrdiff_t>(starts[K + 1]));
    return unflatten_tree<G>(sub, flats[K].structure);
  };
  auto gradient = [&]<size_t... K>(std::index_sequence<K...>) {
    if constexpr (n == 1)
      return unflat(std::integral_constant<size_t, 0>{});
    else
      return std::tuple{unflat(std::integral_constant<size_t, K>{})...};
  }(std::make_index_sequence<n>{});
  return std::pair<R, decltype(gradient)>{std::move(result), std::move(gradient)};
}

template <bool Aux, bool WithValue, int... I, class F>
auto make_grad(F f, const char* op) {
  using Fn = decltype(std::function{f});
  return [&]<class R, class... Args>(std::function<R(Args...)>*) {
    using Tuple = std::tuple<std::decay_t<Args>...>;
    static_assert(((I >= 0 && I < static_cast<int>(sizeof...(Args))) && ...), "smelt: argnum out of range");
    if constexpr (Aux)
      static_assert(std::is_same_v<std::decay_t<decltype(std::declval<R>().first)>, Array>,
                    "smelt: with has_aux the function returns std::pair<Array, Aux>");
    else
      static_assert(std::is_same_v<std::decay_t<R>, Array>, "smelt: grad needs a function returning an Array");
    std::function<R(const Tuple&)> call = [f = Fn(std::move(f))](const Tuple& t) {
      return std::apply([&](const auto&... a) { return f(a...); }, t);
    };
    return [call, op](Args... args) {
      Tuple t{args...};
      auto [value, gradient] = value_and_grad_impl<Aux, I...>(call, t, op);
      if constexpr (WithValue)
        return std::pair<R, decltype(gradient)>{std::move(value), std::move(gradient)};
      else
        return gradient;
    };
  }(static_cast<Fn*>(nullptr));
}

}  // namespace detail

/// The gradient of a scalar-valued function: `grad(f)(x)` has x's type (a tree of the same
/// structure). `grad(f, argnums<0, 1>)` returns a std::tuple of the gradients of those arguments.
/// f's output must be a one-element floating-point array; only floating-point leaves are
/// differentiated (others raise DtypeError). The result is a function with f's parameter types,
/// so it can itself be compiled or differentiated.
template <class F, int... I>
auto grad(F f, Argnums<I...> = {}) {
  if constexpr (sizeof...(I) == 0)
    return detail::make_grad<false, false, 0>(std::move(f), "grad");
  else
    return detail::make_grad<false, false, I...>(std::move(f), "grad");
}

/// As grad, returning `std::pair{f(args...), gradient}`. With `has_aux`, f returns
/// `std::pair<Array, Aux>` and the value is that pair (the aux tree is not differentiated).
template <class F, int... I>
auto value_and_grad(F f, Argnums<I...> = {}) {
  if constexpr (sizeof...(I) == 0)
    return detail::make_grad<false, true, 0>(std::move(f), "value_and_grad");
  else
    return detail::make_grad<false, true, I...>(std::move(f), "value_and_grad");
}
template <class F, int... I>
auto value_and_grad(F f, Argnums<I...>, HasAux) {
  if constexpr (sizeof...(I) == 0)
    return detail::make_grad<true, true, 0>(std::move(f), "value_and_grad");
  else
    return detail::make_grad<true, true, I...>(std::move(f), "value_and_grad");
}
template <class F>
auto value_and_grad(F f, HasAux) {
  return detail::make_grad<true, true, 0>(std::move(f), "value_and_grad");
}

/// Vectorizing map: `vmap(f)(xs...)` is f applied to each example of its arguments along their
/// mapped axes, the results stacked along `out_axes`, computed as one batched graph (no loop), with
/// exactly the bits of the loop of unbatched calls. `in_axes` has one entry per argument (or one
/// for all), each an axis or `not_mapped`; it applies to every array leaf of that argument's tree
/// (static leaves are copied). `out_axes` has one axis for every output leaf or one per output
/// leaf. Mapped axes must agree in size. An output that does not depend on a mapped argument is
/// broadcast to every example. vmap nests, and composes with grad, jvp, vjp, checkpoint and
/// compile. Evaluating a value that depends on a mapped argument inside f raises
/// UnknownValueError; a primitive without a batching rule raises UnsupportedError naming it.
template <class F>
auto vmap(F f, std::vector<std::optional<int>> in_axes = {0}, std::vector<int> out_axes = {0}) {
  using Fn = decltype(std::function{f});
  return [&]<class R, class... Args>(std::function<R(Args...)>*) {
    return [f = Fn(std::move(f)), in_axes = std::move(in_axes), out_axes = std::move(out_axes)](Args... args) -> R {
      using Tuple = std::tuple<std::decay_t<Args>...>;
      constexpr size_t n = sizeof...(Args);
      if (in_axes.size() != 1 && in_axes.size() != n)
        throw InvalidArgument("vmap: in_axes has " + std::to_string(in_axes.size()) + " entries for " +
                              std::to_string(n) + " arguments (give one, or one per argument)");
      Tuple t{args...};
      std::vector<FlatTree> flats(n);
      [&]<size_t... J>(std::index_sequence<J...>) {
        (tree_flatten(std::get<J>(t), flats[J]), ...);
      }(std::make_index_sequence<n>{});
      std::vector<Array> leaves;
      std::vector<std::optional<int>> axes;
      std::vector<size_t> starts;
      for (size_t k = 0; k < n; ++k) {
        starts.push_back(leaves.size());
        leaves.insert(leaves.end(), flats[k].leaves.begin(), flats[k].leaves.end());
        axes.insert(axes.end(), flats[k].leaves.size(), in_axes[in_axes.size() == 1 ? 0 : k]);
      }
      starts.push_back(leaves.size());
      std::string out_structure;
      ArrayFn flat_fn = [&](const std::vector<Array>& ls) {
        Tuple traced = t;
        [&]<size_t... J>(std::index_sequence<J...>) {
          ((std::get<J>(traced) = unflatten_tree<std::tuple_element_t<J, Tuple>>(
                std::vector<Array>(ls.begin() + static_cast<std::ptrdiff_t>(starts[J]),
                                   ls.begin() + static_cast<std::ptrdiff_t>(starts[J + 1])),
                flats[J].structure)),
           ...);
        }(std::make_index_sequence<n>{});
        FlatTree out = flatten_tree(std::apply(f, traced));
        out_structure = std::move(out.structure);
        return std::move(out.leaves);
      };
      std::vector<Array> outs = detail::vmap_flat(flat_fn, leaves, axes, out_axes);
      return unflatten_tree<R>(outs, out_structure);
    };
  }(static_cast<Fn*>(nullptr));
}

/// Gradient checkpointing: `checkpoint(f)` computes what f computes, but reverse mode does not keep
/// the values made inside f for the backward pass: it runs f again there, from f's inputs. Memory
/// for time, for blocks of a deep model. Gradients equal those of f bit for bit. f is called again
/// after the call returns, so it must own what it captures. Compiled, the backward pass recomputes
/// too (docs/transforms.md).
template <class F>
auto checkpoint(F f) {
  using Fn = decltype(std::function{f});
  return [&]<class R, class... Args>(std::function<R(Args...)>*) {
    return [f = Fn(std::move(f))](Args... args) -> R {
      using Tuple = std::tuple<std::decay_t<Args>...>;
      FlatTree in = flatten_tree(Tuple{args...});
      auto out_structure = std::make_shared<std::string>();
      ArrayFn flat_fn = [f, structure = in.structure, out_structure](const std::vector<Array>& ls) {
        FlatTree out = flatten_tree(std::apply(f, unflatten_tree<Tuple>(ls, structure)));
        if (out_structure->empty()) *out_structure = std::move(out.structure);  // the first call sets it
        return std::move(out.leaves);
      };
      std::vector<Array> outs = detail::checkpoint_flat(flat_fn, in.leaves);
      return unflatten_tree<R>(outs, *out_structure);
    };
  }(static_cast<Fn*>(nullptr));
}

}  // namespace smelt
