// ONNX Cast and CastLike, including the storage element types (float8, float4, int4, int2) and strings.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <limits>

#include "src/onnx/ops/op_helpers.h"

namespace smelt::onnx {

namespace {

/// A small float format: sign, `ebits` exponent bits, `mbits` mantissa bits.
struct MiniFloat {
  int ebits, mbits, bias;
  bool has_inf;   // E5M2: exponent all ones with mantissa 0 is inf
  bool fnuz;      // NaN is 0x80, no negative zero, exponent all ones is a normal number
  bool fn;        // E4M3FN: only exponent and mantissa all ones is NaN
  bool has_nan;   // float4 has none
  double max;
};

const MiniFloat kE4M3FN{4, 3, 7, false, false, true, true, 448.0};
const MiniFloat kE4M3FNUZ{4, 3, 8, false, true, false, true, 240.0};
const MiniFloat kE5M2{5, 2, 15, true, false, false, true, 57344.0};
const MiniFloat kE5M2FNUZ{5, 2, 16, false, true, false, true, 57344.0};
const MiniFloat kE2M1{2, 1, 1, false, false, false, false, 6.0};

const MiniFloat* format_of(ElemType t) {
  switch (t) {
    case ElemType::Float8E4M3FN: return &kE4M3FN;
    case ElemType::Float8E4M3FNUZ: return &kE4M3FNUZ;
    case ElemType::Float8E5M2: return &kE5M2;
    case ElemType::Float8E5M2FNUZ: return &kE5M2FNUZ;
    case ElemType::Float4E2M1: return &kE2M1;
    default: return nullptr;
  }
}

double decode(uint8_t bits, const MiniFloat& f) {
  const int total = 1 + f.ebits + f.mbits;
  const unsigned emask = (1u << f.ebits) - 1, mmask = (1u << f.mbits) - 1;
  bool neg = (bits >> (total - 1)) & 1;
  unsigned e = (bits >> f.mbits) & emask, m = bits & mmask;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (f.fnuz && bits == 0x80) return nan;
  if (f.fn && e == emask && m == mmask) return nan;
  if (f.has_inf && e == emask) return m ? nan : (neg ? -1.0 : 1.0) * std::numeric_limits<double>::infinity();
  double v = e == 0 ? std::ldexp(m, 1 - f.bias - f.mbits)
                    : std::ldexp(1.0 + std::ldexp(m, -f.mbits), static_cast<int>(e) - f.bias);
  return neg ? -v : v;
}

uint8_t nan_bits(const MiniFloat& f) {
  if (f.fnuz) return 0x80;
  if (f.fn) return 0x7F;
  if (f.has_inf) return 0x7F;
  return 0x8;  // float4 has no NaN: ONNX maps it to -0
}

/// Rounds to the nearest representable value (ties to even), then applies ONNX's overflow rules.
uint8_t encode(double x, const MiniFloat& f, bool saturate) {
  const int total = 1 + f.ebits + f.mbits;
  const uint8_t sign_bit = static_cast<uint8_t>(1u << (total - 1));
  if (std::isnan(x)) return nan_bits(f);
  bool neg = std::signbit(x);
  double a = std::fabs(x);
  auto with_sign = [&](uint8_t mag) -> uint8_t {
    if (mag == 0 && f.fnuz) return 0;
    return neg ? static_cast<uint8_t>(mag | sign_bit) : mag;
  };
  const int emin = 1 - f.bias;
  auto encode_mag = [&](double v) -> uint8_t {
    if (v == 0) return 0;
    int e = std::ilogb(v);
    if (e < emin) return static_cast<uint8_t>(std::lround(std::ldexp(v, f.mbits - emin)));
    unsigned m = static_cast<unsigned>(std::lround(std::ldexp(v, f.mbits - e))) - (1u << f.mbits);
    return static_cast<uint8_t>(((e + f.bias) << f.mbits) | m);
  };
  auto overflow = [&]() -> uint8_t {
    if (saturate || !f.has_nan) return with_sign(encode_mag(f.max));
    if (f.has_inf) return with_sign(static_cast<uint8_t>(((1u << f.ebits) - 1) << f.mbits));
    return nan_bits(f);
  };
  if (std::isinf(a)) {
    if (f.fnuz) return saturate ? with_sign(encode_mag(f.max)) : nan_bits(f);
    if (f.has_inf && saturate) return with_sign(encode_mag(f.max));
    return overflow();
  }
  int e = a == 0 ? emin : std::max(std::ilogb(a), emin);
  double q = std::ldexp(a, f.mbits - e);
  double r = std::nearbyint(q);  // the default rounding mode is to nearest, ties to even
  double v = std::ldexp(r, e - f.mbits);
  if (v > f.max) return overflow();
  return with_sign(encode_mag(v));
}

/// Reads any numeric tensor value as doubles (storage floats decoded).
std::vector<double> read_doubles(const Value& v) {
  if (const MiniFloat* f = format_of(v.elem_type())) {
    auto bits = v.array().to_vector<uint8_t>();
    std::vector<double> out(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) out[i] = decode(bits[i], *f);
    return out;
  }
  if (v.elem_type() == ElemType::Float8E8M0) {
    auto bits = v.array().to_vector<uint8_t>();
    std::vector<double> out(bits.size());
    for (size_t i = 0; i < bits.size(); ++i)
      out[i] = bits[i] == 0xFF ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, bits[i] - 127);
    return out;
  }
  return v.array().to_vector<double>();
}

std::string number_text(double d, ElemType from) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "INF" : "-INF";
  char buf[64];
  if (from == ElemType::Float || from == ElemType::Float16 || from == ElemType::BFloat16)
    std::snprintf(buf, sizeof buf, "%.9g", d);
  else if (from == ElemType::Double)
    std::snprintf(buf, sizeof buf, "%.17g", d);
  else
    std::snprintf(buf, sizeof buf, "%.0f", d);
  return buf;
}

}  // namespace

/// Converts a tensor value to element type `to` (ONNX Cast semantics).
Value cast_value(const Value& v, ElemType to, bool saturate, const OpContext* ctx) {
  auto fail = [&](const std::string& m) -> Value {
    if (ctx) ctx->fail(m);
    throw OnnxError("Cast: " + m);
  };
  ElemType from = v.is_strings() ? ElemType::String : v.elem_type();
  if (from == to) return v;
  if (to == ElemType::String) {
    auto values = read_doubles(v);
    std::vector<std::string> out;
    if (from == ElemType::Int64 || from == ElemType::UInt64) {
      if (from == ElemType::Int64) {
        for (auto x : v.array().to_vector<int64_t>()) out.push_back(std::to_string(x));
      } else {
        for (auto x : v.array().to_vector<uint64_t>()) out.push_back(std::to_string(x));
      }
    } else if (from == ElemType::Bool) {
      for (auto x : values) out.push_back(x != 0 ? "1" : "0");
    } else {
      for (auto x : values) out.push_back(number_text(x, from));
    }
    return Value::strings(StringTensor{v.shape(), out});
  }
  if (from == ElemType::String) {
    const auto& s = v.string_tensor();
    std::vector<double> values;
    for (const auto& text : s.data) {
      std::string t = text;
      for (auto& ch : t) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (t == "inf" || t == "+inf" || t == "infinity" || t == "+infinity") values.push_back(INFINITY);
      else if (t == "-inf" || t == "-infinity") values.push_back(-INFINITY);
      else if (t == "nan") values.push_back(NAN);
      else values.push_back(std::strtod(text.c_str(), nullptr));
    }
    Value d = tv(Array(values, s.shape));
    return cast_value(d, to, saturate, ctx);
  }
  if (from == ElemType::Complex64 || to == ElemType::Complex64 || to == ElemType::Complex128 ||
      to == ElemType::Undefined)
    return fail("cannot cast " + elem_type_name(from) + " to " + elem_type_name(to));
  const Shape& shape = v.shape();
  if (const MiniFloat* f = format_of(to)) {
    auto values = read_doubles(v);
    std::vector<uint8_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = encode(values[i], *f, saturate);
    return Value::tensor(Array(bits.data(), shape, uint8), to);
  }
  if (to == ElemType::Float8E8M0) {
    // Only the exponent is kept; the sign is dropped. round_mode picks the power of two.
    std::string mode = ctx ? ctx->attr_string("round_mode", "up") : "up";
    if (mode != "up" && mode != "down" && mode != "nearest")
      return fail("round_mode must be up, down or nearest, got \"" + mode + "\"");
    auto values = read_doubles(v);
    std::vector<uint8_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      double x = std::fabs(values[i]);
      if (std::isnan(x)) {
        bits[i] = 0xFF;
        continue;
      }
      if (std::isinf(x)) {
        bits[i] = saturate ? 0xFE : 0xFF;
        continue;
      }
      if (x == 0) {
        bits[i] = 0;
        continue;
      }
      int e = std::ilogb(x);
      double low = std::ldexp(1.0, e);
      if (low < x) {
        if (mode == "up") ++e;
        else if (mode == "nearest" && x - low >= low) ++e;  // halfway (1.5 * 2^e) rounds up
      }
      int code = e + 127;
      if (code > 254) code = saturate ? 254 : 255;
      bits[i] = static_cast<uint8_t>(std::max(code, 0));
    }
    return Value::tensor(Array(bits.data(), shape, uint8), to);
  }
  if (to == ElemType::Int4 || to == ElemType::UInt4 || to == ElemType::Int2 || to == ElemType::UInt2) {
    auto values = read_doubles(v);
    // Like integer narrowing, the low bits are kept (wrap-around), then sign-extended.
    const int bits = to == ElemType::Int4 || to == ElemType::UInt4 ? 4 : 2;
    const bool is_signed = to == ElemType::Int4 || to == ElemType::Int2;
    const unsigned mask = (1u << bits) - 1;
    std::vector<uint8_t> out(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      double t = std::trunc(values[i]);
      int64_t w = std::isfinite(t) && std::fabs(t) < 9.2e18 ? static_cast<int64_t>(t) : 0;
      unsigned u = static_cast<unsigned>(static_cast<uint64_t>(w) & mask);
      if (is_signed && (u >> (bits - 1))) u |= ~mask;
      out[i] = static_cast<uint8_t>(u);
    }
    Array a(out.data(), shape, is_signed ? int8 : uint8);
    return Value::tensor(a, to);
  }
  Dtype target = *storage_dtype(to);
  if (is_storage_type(from)) {
    auto values = read_doubles(v);
    Dtype wide = is_floating(target) ? float32 : float64;
    return tv(astype(astype(Array(values, shape), wide), target));
  }
  return tv(astype(v.array(), target));
}

namespace {

std::vector<Value> op_cast(OpContext& c) {
  // An unknown code would otherwise fall through to some conversion; known types smelt cannot
  // produce (complex) are refused by cast_value, naming both types.
  if (!c.has_attr("to")) c.fail("attribute 'to' is required");
  const int64_t code = c.attr_int("to", 0);
  const auto to = static_cast<ElemType>(code);
  if (code < INT32_MIN || code > INT32_MAX || to == ElemType::Undefined || elem_type_name(to).rfind("unknown", 0) == 0)
    c.fail("attribute 'to' is " + std::to_string(code) + ", not a known element type");
  return {cast_value(c.input(0), to, c.attr_int("saturate", 1) != 0, &c)};
}

std::vector<Value> op_cast_like(OpContext& c) {
  ElemType to = c.elem_type(1);
  return {cast_value(c.input(0), to, c.attr_int("saturate", 1) != 0, &c)};
}

}  // namespace

Value cast(const Value& v, ElemType to, bool saturate) { return cast_value(v, to, saturate); }

void register_cast_ops(OpRegistry& r) {
  r.add("", "Cast", 6, op_cast);
  r.add("", "CastLike", 15, op_cast_like);
}

}  // namespace smelt::onnx
