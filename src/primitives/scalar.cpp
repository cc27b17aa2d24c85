// Scalar: typed constants with bit-exact equality.
#include "src/primitives/scalar.h"

#include <cstdio>
#include <functional>

#include "smelt/errors.h"
#include "src/core/dispatch.h"

namespace smelt {

Scalar Scalar::of_float(double v, Dtype dtype) {
  Scalar s;
  s.dtype = dtype;
  s.f = v;
  return s;
}
Scalar Scalar::of_int(int64_t v, Dtype dtype) {
  Scalar s;
  s.dtype = dtype;
  s.i = v;
  return s;
}
Scalar Scalar::of_uint(uint64_t v, Dtype dtype) {
  Scalar s;
  s.dtype = dtype;
  s.u = v;
  return s;
}
Scalar Scalar::of_bool(bool v) {
  Scalar s;
  s.dtype = Dtype::Bool;
  s.u = v ? 1 : 0;
  return s;
}

void Scalar::store(void* out) const {
  dispatch_all(dtype, [&]<class T>() {
    T v{};
    switch (kind_of(dtype)) {
      case DtypeKind::Float: v = convert<T, double>(f); break;
      case DtypeKind::SignedInt: v = convert<T, int64_t>(i); break;
      case DtypeKind::UnsignedInt: v = convert<T, uint64_t>(u); break;
      case DtypeKind::Bool: v = convert<T, bool>(u != 0); break;
    }
    std::memcpy(out, &v, sizeof(T));
  });
}

Scalar Scalar::load(const void* in, Dtype dtype) {
  Scalar s;
  s.dtype = dtype;
  dispatch_all(dtype, [&]<class T>() {
    T v;
    std::memcpy(&v, in, sizeof(T));
    switch (kind_of(dtype)) {
      case DtypeKind::Float: s.f = convert<double, T>(v); break;
      case DtypeKind::SignedInt: s.i = convert<int64_t, T>(v); break;
      case DtypeKind::UnsignedInt: s.u = convert<uint64_t, T>(v); break;
      case DtypeKind::Bool: s.u = convert<bool>(v) ? 1 : 0; break;
    }
  });
  return s;
}

Scalar Scalar::cast(Dtype to) const {
  alignas(8) unsigned char src[8];
  store(src);
  alignas(8) unsigned char dst[8];
  dispatch_all(dtype, [&]<class From>() {
    From v;
    std::memcpy(&v, src, sizeof(From));
    dispatch_all(to, [&]<class To>() {
      To w = convert<To, From>(v);
      std::memcpy(dst, &w, sizeof(To));
    });
  });
  return load(dst, to);
}

double Scalar::as_double() const {
  switch (kind_of(dtype)) {
    case DtypeKind::Float: return f;
    case DtypeKind::SignedInt: return static_cast<double>(i);
    case DtypeKind::UnsignedInt:
    case DtypeKind::Bool: return static_cast<double>(u);
  }
  return 0.0;
}

int64_t Scalar::as_int() const {
  switch (kind_of(dtype)) {
    case DtypeKind::Float: return convert<int64_t, double>(f);
    case DtypeKind::SignedInt: return i;
    case DtypeKind::UnsignedInt:
    case DtypeKind::Bool: return static_cast<int64_t>(u);
  }
  return 0;
}

bool Scalar::operator==(const Scalar& o) const { return dtype == o.dtype && u == o.u; }

size_t Scalar::hash() const {
  return std::hash<uint64_t>()(u) * 31 + static_cast<size_t>(dtype);
}

std::string Scalar::str() const {
  char buf[64];
  switch (kind_of(dtype)) {
    case DtypeKind::Float: std::snprintf(buf, sizeof buf, "%.17g", f); break;
    case DtypeKind::SignedInt: std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(i)); break;
    case DtypeKind::UnsignedInt:
      std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(u));
      break;
    case DtypeKind::Bool: return u ? "true" : "false";
  }
  return buf;
}

}  // namespace smelt
