// Function transforms: reverse-mode (vjp, grad, value_and_grad) and forward-mode (jvp) autodiff.
#pragma once

#include <cstddef>
#include <functional>
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

namespace detail {

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

}  // namespace smelt
