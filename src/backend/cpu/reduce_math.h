// Each reduction operator's accumulator, identity and combine, one source for the CPU and CUDA kernels.
//
// Typed by smelt::ReduceOp (src/primitives/reduce_op.h): generated kernels of both devices name
// an operator as `smelt::scalar::Red<smelt::ReduceOp::Max, float>`. The order in which elements
// combine is each device's own (src/backend/cpu/reduce_order.h, codegen/gpu_row_order.h); what
// one step does is this header's. Embedded like scalar_math.h (and NVRTC-compatible the same way).
#pragma once

#ifndef __CUDACC_RTC__
#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "smelt/dtype.h"
#include "src/backend/cpu/scalar_math.h"
#include "src/core/convert.h"
#include "src/primitives/reduce_op.h"
#endif

namespace smelt::scalar {

namespace detail {

#ifndef __CUDACC_RTC__
/// float16 to float without branches (vectorizes), bit-identical to half_to_float: the
/// exponent is rebiased; subnormals go through an exact float subtraction; inf/NaN keep their
/// mantissa.
inline float half_bits_to_float(uint16_t h) {
  const uint32_t em = static_cast<uint32_t>(h & 0x7fffu) << 13;
  const uint32_t e = em & 0x0f800000u;
  const uint32_t normal = em + 0x38000000u;
  const uint32_t special = normal + 0x38000000u;
  const uint32_t sub =
      std::bit_cast<uint32_t>(std::bit_cast<float>(em + 0x38800000u) - std::bit_cast<float>(0x38800000u));
  // Masks rather than selects: GCC vectorizes the integer form.
  const uint32_t is_special = 0u - static_cast<uint32_t>(e == 0x0f800000u);
  const uint32_t is_sub = 0u - static_cast<uint32_t>(e == 0);
  const uint32_t r = (normal & ~(is_special | is_sub)) | (special & is_special) | (sub & is_sub);
  return std::bit_cast<float>(r | (static_cast<uint32_t>(h & 0x8000u) << 16));
}
#endif

/// astype's conversion (convert.h on the host, its device form cvt on the GPU).
template <class To, class From>
inline To convert_to(From v) {
#ifdef __CUDACC_RTC__
  return cvt<To, From>(v);
#else
  return convert<To, From>(v);
#endif
}

}  // namespace detail

/// An element in the type reductions compute with (halves as float); the same value as up().
template <class In>
inline calc_t<In> widen(In x) {
#ifndef __CUDACC_RTC__
  if constexpr (std::is_same_v<In, float16_t>) return detail::half_bits_to_float(x.bits);
#endif
  return up(x);
}

/// Accumulator, output, identity and step of a reduction of `In` by `Op`.
template <ReduceOp Op, class In>
struct Red {
  static_assert(Op != ReduceOp::Mean, "Mean reduces as Sum: the kernel divides by the count");
  static constexpr bool kSumLike = Op == ReduceOp::Sum || Op == ReduceOp::Prod;
  static constexpr bool kBoolOut = Op == ReduceOp::All || Op == ReduceOp::Any;
  // Integer sums and products wrap: they run in uint64 whatever the signedness.
  using Acc = std::conditional_t<kBoolOut, bool, std::conditional_t<kSumLike && !float_v<In>, uint64_t, calc_t<In>>>;
  using Out = std::conditional_t<
      kBoolOut, bool,
      std::conditional_t<!kSumLike || float_v<In>, In,
                         std::conditional_t<std::is_unsigned_v<In> && !std::is_same_v<In, bool>, uint64_t, int64_t>>>;
  // Float sums combine partial results pairwise for accuracy; the other operators are exact.
  static constexpr bool kPairwise = kSumLike && float_v<In>;
  static constexpr bool kIsMax = Op == ReduceOp::Max;
  static constexpr ReduceOp kOp = Op;
  static constexpr bool kVectorMinMax = (Op == ReduceOp::Max || Op == ReduceOp::Min) && std::is_floating_point_v<Acc>;

  /// The identity: 0, 1, true, false, or -inf/+inf (the lowest/highest integer) for max/min.
  static Acc init() {
    if constexpr (Op == ReduceOp::Sum) return Acc(0);
    else if constexpr (Op == ReduceOp::Prod) return Acc(1);
    else if constexpr (Op == ReduceOp::All) return true;
    else if constexpr (Op == ReduceOp::Any) return false;
    else if constexpr (std::is_same_v<Acc, bool>) return Op == ReduceOp::Min;
    else if constexpr (std::is_floating_point_v<Acc>)
      return Op == ReduceOp::Max ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::infinity();
    else return Op == ReduceOp::Max ? std::numeric_limits<Acc>::lowest() : std::numeric_limits<Acc>::max();
  }
  /// An element as an accumulator.
  static Acc load(In x) {
    if constexpr (kBoolOut) {
      return detail::truth(x);
    } else if constexpr (std::is_same_v<Acc, uint64_t> && std::is_signed_v<In>) {
      return static_cast<uint64_t>(static_cast<int64_t>(x));  // sign-extend, then wrap
    } else {
      return static_cast<Acc>(widen(x));
    }
  }
  /// The combine: a + x, a * x, and, or, or max/min with NaN propagating.
  static Acc step(Acc a, Acc x) {
    if constexpr (Op == ReduceOp::Sum) return static_cast<Acc>(a + x);
    else if constexpr (Op == ReduceOp::Prod) return static_cast<Acc>(a * x);
    else if constexpr (Op == ReduceOp::All) return a && x;
    else if constexpr (Op == ReduceOp::Any) return a || x;
    else if constexpr (std::is_same_v<Acc, bool>) return Op == ReduceOp::Max ? (a || x) : (a && x);
    else if constexpr (std::is_floating_point_v<Acc>) {
      // NaN propagates: once the accumulator is NaN no comparison replaces it. (Written as
      // nested selects, which GCC's loop vectorizer accepts.)
      if constexpr (Op == ReduceOp::Max) return x != x ? x : (x > a ? x : a);
      else return x != x ? x : (x < a ? x : a);
    } else {
      if constexpr (Op == ReduceOp::Max) return x > a ? x : a;
      else return x < a ? x : a;
    }
  }
  /// The accumulator as the output element (integer sums narrow by wrapping).
  static Out finish(Acc a) {
    if constexpr (std::is_same_v<Acc, uint64_t>) return static_cast<Out>(a);
    else return detail::convert_to<Out, Acc>(a);
  }
};

}  // namespace smelt::scalar
