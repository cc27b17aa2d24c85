// Trees of arrays: flattening a value into its array leaves plus a text that records its structure.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "smelt/array.h"
#include "smelt/errors.h"

namespace smelt {

/// A flattened tree: its array leaves in order and the structure text (node kinds, sizes, map
/// keys, and the exact bytes of every static leaf). Equal structures mean equal trees up to the
/// arrays' contents.
struct FlatTree {
  std::vector<Array> leaves;
  std::string structure;
};

/// How a type flattens. Specialized for Array, static leaves (arithmetic types, enums,
/// std::string), std::vector, std::array, std::tuple, std::pair, std::optional,
/// std::map<std::string, T>, and structs declared with SMELT_TREE.
template <class T, class Enable = void>
struct TreeTraits {
  static_assert(sizeof(T) == 0,
                "smelt: this type is not a tree; declare it with SMELT_TREE(Type, fields...)");
};

namespace tree_detail {

/// Reads a structure text back.
struct Reader {
  std::string_view text;
  size_t pos = 0;
  const std::vector<Array>* leaves = nullptr;
  size_t leaf = 0;

  char next() {
    if (pos >= text.size()) throw Error("tree: structure text ended early");
    return text[pos++];
  }
  void expect(char c) {
    char got = next();
    if (got != c)
      throw Error(std::string("tree: structure mismatch: expected '") + c + "', found '" + got + "'");
  }
  uint64_t number() {
    uint64_t v = 0;
    bool any = false;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      v = v * 10 + static_cast<uint64_t>(text[pos++] - '0');
      any = true;
    }
    if (!any) throw Error("tree: structure mismatch: expected a number");
    expect(':');
    return v;
  }
  std::string_view bytes(size_t n) {
    if (pos + n > text.size()) throw Error("tree: structure text ended early");
    auto s = text.substr(pos, n);
    pos += n;
    return s;
  }
};

inline void write_number(std::string& out, uint64_t v) {
  out += std::to_string(v);
  out += ':';
}

}  // namespace tree_detail

template <class T>
void tree_flatten(const T& value, FlatTree& out) {
  TreeTraits<T>::flatten(value, out);
}

template <class T>
T tree_unflatten(tree_detail::Reader& r) {
  return TreeTraits<T>::unflatten(r);
}

/// Flattens a value.
template <class T>
FlatTree flatten_tree(const T& value) {
  FlatTree t;
  tree_flatten(value, t);
  return t;
}

/// Rebuilds a value of type T from leaves and a structure made by flatten_tree of a T.
template <class T>
T unflatten_tree(const std::vector<Array>& leaves, std::string_view structure) {
  tree_detail::Reader r{structure, 0, &leaves, 0};
  T v = tree_unflatten<T>(r);
  if (r.pos != structure.size() || r.leaf != leaves.size())
    throw Error("tree: structure mismatch: " + std::to_string(leaves.size() - r.leaf) +
                " leaves or text left over");
  return v;
}

template <>
struct TreeTraits<Array> {
  static void flatten(const Array& a, FlatTree& out) {
    out.leaves.push_back(a);
    out.structure += 'A';
  }
  static Array unflatten(tree_detail::Reader& r) {
    r.expect('A');
    if (r.leaf >= r.leaves->size()) throw Error("tree: structure mismatch: not enough array leaves");
    return (*r.leaves)[r.leaf++];
  }
};

/// Static leaves: numbers and enums are part of the structure, by their exact bytes.
template <class T>
struct TreeTraits<T, std::enable_if_t<std::is_arithmetic_v<T> || std::is_enum_v<T>>> {
  static void flatten(const T& v, FlatTree& out) {
    out.structure += 's';
    out.structure += static_cast<char>('0' + sizeof(T));
    char buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));
    out.structure.append(buf, sizeof(T));
  }
  static T unflatten(tree_detail::Reader& r) {
    r.expect('s');
    r.expect(static_cast<char>('0' + sizeof(T)));
    auto b = r.bytes(sizeof(T));
    T v;
    std::memcpy(&v, b.data(), sizeof(T));
    return v;
  }
};

template <>
struct TreeTraits<std::string> {
  static void flatten(const std::string& v, FlatTree& out) {
    out.structure += 'S';
    tree_detail::write_number(out.structure, v.size());
    out.structure += v;
  }
  static std::string unflatten(tree_detail::Reader& r) {
    r.expect('S');
    return std::string(r.bytes(r.number()));
  }
};

template <class T>
struct TreeTraits<std::vector<T>> {
  static void flatten(const std::vector<T>& v, FlatTree& out) {
    out.structure += 'V';
    tree_detail::write_number(out.structure, v.size());
    for (const auto& x : v) tree_flatten(x, out);
  }
  static std::vector<T> unflatten(tree_detail::Reader& r) {
    r.expect('V');
    size_t n = r.number();
    std::vector<T> v;
    v.reserve(n);
    for (size_t i = 0; i < n; ++i) v.push_back(tree_unflatten<T>(r));
    return v;
  }
};

template <class T, size_t N>
struct TreeTraits<std::array<T, N>> {
  static void flatten(const std::array<T, N>& v, FlatTree& out) {
    out.structure += 'R';
    for (const auto& x : v) tree_flatten(x, out);
  }
  static std::array<T, N> unflatten(tree_detail::Reader& r) {
    r.expect('R');
    return unflatten_each(r, std::make_index_sequence<N>{});
  }

 private:
  template <size_t... I>
  static std::array<T, N> unflatten_each(tree_detail::Reader& r, std::index_sequence<I...>) {
    // Braced initialization evaluates in order.
    return std::array<T, N>{((void)I, tree_unflatten<T>(r))...};
  }
};

template <class... Ts>
struct TreeTraits<std::tuple<Ts...>> {
  static void flatten(const std::tuple<Ts...>& v, FlatTree& out) {
    out.structure += 'T';
    std::apply([&](const auto&... x) { (tree_flatten(x, out), ...); }, v);
  }
  static std::tuple<Ts...> unflatten(tree_detail::Reader& r) {
    r.expect('T');
    return std::tuple<Ts...>{tree_unflatten<Ts>(r)...};  // braced: left to right
  }
};

template <class A, class B>
struct TreeTraits<std::pair<A, B>> {
  static void flatten(const std::pair<A, B>& v, FlatTree& out) {
    out.structure += 'P';
    tree_flatten(v.first, out);
    tree_flatten(v.second, out);
  }
  static std::pair<A, B> unflatten(tree_detail::Reader& r) {
    r.expect('P');
    A a = tree_unflatten<A>(r);
    B b = tree_unflatten<B>(r);
    return {std::move(a), std::move(b)};
  }
};

template <class T>
struct TreeTraits<std::optional<T>> {
  static void flatten(const std::optional<T>& v, FlatTree& out) {
    out.structure += v ? 'O' : 'o';
    if (v) tree_flatten(*v, out);
  }
  static std::optional<T> unflatten(tree_detail::Reader& r) {
    char c = r.next();
    if (c == 'o') return std::nullopt;
    if (c != 'O') throw Error("tree: structure mismatch: expected an optional");
    return tree_unflatten<T>(r);
  }
};

template <class T>
struct TreeTraits<std::map<std::string, T>> {
  static void flatten(const std::map<std::string, T>& v, FlatTree& out) {
    out.structure += 'M';
    tree_detail::write_number(out.structure, v.size());
    for (const auto& [k, x] : v) {
      tree_detail::write_number(out.structure, k.size());
      out.structure += k;
      tree_flatten(x, out);
    }
  }
  static std::map<std::string, T> unflatten(tree_detail::Reader& r) {
    r.expect('M');
    size_t n = r.number();
    std::map<std::string, T> m;
    for (size_t i = 0; i < n; ++i) {
      std::string k(r.bytes(r.number()));
      m.emplace(std::move(k), tree_unflatten<T>(r));
    }
    return m;
  }
};

}  // namespace smelt

#define SMELT_TREE_FLATTEN_FIELD(field) ::smelt::tree_flatten(v.field, out);
#define SMELT_TREE_UNFLATTEN_FIELD(field) \
  v.field = ::smelt::tree_unflatten<std::decay_t<decltype(v.field)>>(r);

#define SMELT_TREE_FOR_EACH_1(M, a) M(a)
#define SMELT_TREE_FOR_EACH_2(M, a, ...) M(a) SMELT_TREE_FOR_EACH_1(M, __VA_ARGS__)
#define SMELT_TREE_FOR_EACH_3(M, a, ...) M(a) SMELT_TREE_FOR_EACH_2(M, __VA_ARGS__)
#define SMELT_TREE_FOR_EACH_4(M, a, ...) M(a) SMELT_TREE_FOR_EACH_3(M, __VA_ARGS__)
#define SMELT_TREE_FOR_EACH_5(M, a, ...) M(a) SMELT_TREE_FOR_EACH_4(M, __VA_ARGS__)
#define SMELT_TREE_FOR_EACH_6(M, a, ...) M(a) SMELT_TREE_FOR_EACH_5(M, __VA_ARGS__)
#define SMELT_TREE_FOR_EACH_7(M, a, ...) M(a) SMELT_TREE_FOR_EACH_6(M, __VA_ARGS__)
#define SMELT_TREE_FOR_EACH_8(M, a, ...) M(a) SMELT_TREE_FOR_EACH_7(M, __VA_ARGS__)
#define SMELT_TREE_FOR_EACH_9(M, a, ...) M(a) SMELT_TREE_FOR_EACH_8(M, __VA_ARGS__)
#define SMELT_TREE_FOR_EACH_10(M, a, ...) M(a) SMELT_TREE_FOR_EACH_9(M, __VA_ARGS__)
#define SMELT_TREE_FOR_EACH_11(M, a, ...) M(a) SMELT_TREE_FOR_EACH_10(M, __VA_ARGS__)
#define SMELT_TREE_FOR_EACH_12(M, a, ...) M(a) SMELT_TREE_FOR_EACH_11(M, __VA_ARGS__)
#define SMELT_TREE_PICK(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, NAME, ...) NAME
#define SMELT_TREE_FOR_EACH(M, ...)                                                           \
  SMELT_TREE_PICK(__VA_ARGS__, SMELT_TREE_FOR_EACH_12, SMELT_TREE_FOR_EACH_11,                \
                  SMELT_TREE_FOR_EACH_10, SMELT_TREE_FOR_EACH_9, SMELT_TREE_FOR_EACH_8,       \
                  SMELT_TREE_FOR_EACH_7, SMELT_TREE_FOR_EACH_6, SMELT_TREE_FOR_EACH_5,        \
                  SMELT_TREE_FOR_EACH_4, SMELT_TREE_FOR_EACH_3, SMELT_TREE_FOR_EACH_2,        \
                  SMELT_TREE_FOR_EACH_1)(M, __VA_ARGS__)

/// Declares a struct as a tree over the listed fields (up to 12), at namespace scope:
/// `struct Params { Array w, b; float scale; }; SMELT_TREE(Params, w, b, scale)`.
#define SMELT_TREE(Type, ...)                                              \
  template <>                                                              \
  struct smelt::TreeTraits<Type> {                                         \
    static void flatten(const Type& v, ::smelt::FlatTree& out) {           \
      out.structure += '{';                                                \
      SMELT_TREE_FOR_EACH(SMELT_TREE_FLATTEN_FIELD, __VA_ARGS__)           \
      out.structure += '}';                                                \
    }                                                                      \
    static Type unflatten(::smelt::tree_detail::Reader& r) {               \
      r.expect('{');                                                       \
      Type v{};                                                            \
      SMELT_TREE_FOR_EACH(SMELT_TREE_UNFLATTEN_FIELD, __VA_ARGS__)         \
      r.expect('}');                                                       \
      return v;                                                            \
    }                                                                      \
  };
