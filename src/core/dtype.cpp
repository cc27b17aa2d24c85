// Dtype sizes, names, promotion, and the float16/bfloat16 conversions (round to nearest even).
#include "smelt/dtype.h"

#include <cmath>

namespace smelt {

size_t size_of(Dtype d) {
  switch (d) {
    case Dtype::Bool:
    case Dtype::Int8:
    case Dtype::UInt8:
      return 1;
    case Dtype::Int16:
    case Dtype::UInt16:
    case Dtype::Float16:
    case Dtype::BFloat16:
      return 2;
    case Dtype::Int32:
    case Dtype::UInt32:
    case Dtype::Float32:
      return 4;
    case Dtype::Int64:
    case Dtype::UInt64:
    case Dtype::Float64:
      return 8;
  }
  return 0;
}

const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::Bool: return "bool";
    case Dtype::Int8: return "int8";
    case Dtype::Int16: return "int16";
    case Dtype::Int32: return "int32";
    case Dtype::Int64: return "int64";
    case Dtype::UInt8: return "uint8";
    case Dtype::UInt16: return "uint16";
    case Dtype::UInt32: return "uint32";
    case Dtype::UInt64: return "uint64";
    case Dtype::Float16: return "float16";
    case Dtype::BFloat16: return "bfloat16";
    case Dtype::Float32: return "float32";
    case Dtype::Float64: return "float64";
  }
  return "?";
}

std::string to_string(Dtype d) { return dtype_name(d); }

DtypeKind kind_of(Dtype d) {
  switch (d) {
    case Dtype::Bool: return DtypeKind::Bool;
    case Dtype::Int8:
    case Dtype::Int16:
    case Dtype::Int32:
    case Dtype::Int64: return DtypeKind::SignedInt;
    case Dtype::UInt8:
    case Dtype::UInt16:
    case Dtype::UInt32:
    case Dtype::UInt64: return DtypeKind::UnsignedInt;
    case Dtype::Float16:
    case Dtype::BFloat16:
    case Dtype::Float32:
    case Dtype::Float64: return DtypeKind::Float;
  }
  return DtypeKind::Bool;
}

namespace {

Dtype signed_of_size(size_t bytes) {
  switch (bytes) {
    case 1: return Dtype::Int8;
    case 2: return Dtype::Int16;
    case 4: return Dtype::Int32;
    default: return Dtype::Int64;
  }
}

}  // namespace

Dtype promote_types(Dtype a, Dtype b) {
  if (a == b) return a;
  DtypeKind ka = kind_of(a), kb = kind_of(b);
  if (ka == DtypeKind::Bool) return b;
  if (kb == DtypeKind::Bool) return a;
  if (ka == DtypeKind::Float && kb == DtypeKind::Float) {
    // float16 and bfloat16 have no common 16-bit type.
    if ((a == Dtype::Float16 && b == Dtype::BFloat16) || (a == Dtype::BFloat16 && b == Dtype::Float16))
      return Dtype::Float32;
    return size_of(a) >= size_of(b) ? a : b;
  }
  // Integer with float: the float's dtype (as MLX, JAX and PyTorch; NumPy would widen).
  if (ka == DtypeKind::Float) return a;
  if (kb == DtypeKind::Float) return b;
  if (ka == kb) return size_of(a) >= size_of(b) ? a : b;
  // Mixed signedness: a signed type that holds both, float64 when none does.
  Dtype s = ka == DtypeKind::SignedInt ? a : b;
  Dtype u = ka == DtypeKind::SignedInt ? b : a;
  if (size_of(s) > size_of(u)) return s;
  if (size_of(u) >= 8) return Dtype::Float64;
  return signed_of_size(size_of(u) * 2);
}

// ---- 16-bit floats ---------------------------------------------------------------------------

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or NaN (NaN stays NaN and quiet)
    if (absx > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((absx >> 13) & 0x3ffu);
    return sign | 0x7c00u;
  }
  if (absx >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: overflow to inf
  if (absx < 0x38800000u) {                       // below the smallest normal half: subnormal
    if (absx < 0x33000000u) return sign;           // below half of the smallest subnormal
    uint32_t e = absx >> 23;
    uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;  // 113 - e + 13
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
    return sign | static_cast<uint16_t>(q);
  }
  uint32_t q = (absx - 0x38000000u) >> 13;  // rebias exponent 127 -> 15
  uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;
  return sign | static_cast<uint16_t>(q);
}

namespace {

// Rounds a double to a float with `mant_bits` stored mantissa bits and the float32/float16
// exponent range, once (round to nearest even), by scaling with the spacing of the target.
template <class Encode>
uint16_t round_double_via(double d, double min_normal, int mant_bits, Encode encode) {
  if (std::isnan(d) || std::isinf(d)) return encode(static_cast<float>(d));
  double a = std::fabs(d);
  if (a == 0.0) return encode(static_cast<float>(d));
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp_floor = e - 1;
  int min_exp = std::ilogb(min_normal);
  if (exp_floor < min_exp) exp_floor = min_exp;  // subnormal spacing
  double ulp = std::ldexp(1.0, exp_floor - mant_bits);
  double r = std::nearbyint(d / ulp) * ulp;  // exact: default rounding mode is to nearest even
  return encode(static_cast<float>(r));      // r is representable (or overflows to inf)
}

}  // namespace

uint16_t double_to_half(double d) {
  return round_double_via(d, 6.103515625e-05, 10, float_to_half);
}

uint16_t double_to_bfloat16(double d) {
  return round_double_via(d, 1.1754943508222875e-38, 7, float_to_bfloat16);
}

}  // namespace smelt
