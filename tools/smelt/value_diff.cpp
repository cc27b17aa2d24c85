// Bit-for-bit comparison of two ONNX values (eager against compiled), shared by `smelt run` and `smelt check`.
#ifdef SMELT_ONNX
#include "tools/smelt/value_diff.h"

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "smelt/ops.h"

namespace smelt::cli {

using onnx::Value;

/// One element of a flat array as text, for a mismatch message: "0.1234567 (bits 0x3dfcd6e9)".
namespace {

std::string element_text(const Array& flat, size_t i) {
  char buf[96];
  switch (kind_of(flat.dtype())) {
    case DtypeKind::Float: {
      double v = flat.to_vector<double>()[i];
      uint64_t bits = 0;
      const auto* p = static_cast<const unsigned char*>(flat.data()) + i * flat.itemsize();
      std::memcpy(&bits, p, flat.itemsize());  // little-endian: the low bytes hold the element
      std::snprintf(buf, sizeof buf, "%.9g (bits 0x%llx)", v, static_cast<unsigned long long>(bits));
      return buf;
    }
    case DtypeKind::SignedInt: return std::to_string(flat.to_vector<int64_t>()[i]);
    case DtypeKind::UnsignedInt: return std::to_string(flat.to_vector<uint64_t>()[i]);
    case DtypeKind::Bool: return flat.to_vector<bool>()[i] ? "true" : "false";
  }
  return "?";
}

}  // namespace

/// The first difference between an eager and a compiled value, bit for bit (NaNs compare by
/// their bits), or "" when they are equal. Walks sequences, optionals and maps with a worklist.
std::string first_difference(const Value& eager, const Value& compiled) {
  std::vector<std::tuple<std::string, const Value*, const Value*>> work{{"", &eager, &compiled}};
  while (!work.empty()) {
    auto [where, a, b] = work.back();
    work.pop_back();
    const std::string at = where.empty() ? "" : where + ": ";
    if (a->kind() != b->kind() || a->describe() != b->describe())
      return at + "eager gives " + a->describe() + ", compiled gives " + b->describe();
    switch (a->kind()) {
      case Value::Kind::None: break;
      case Value::Kind::Tensor: {
        // Compared on the host (GPU values too), row-major.
        Array x = copy(to_device(a->array(), Device::cpu()));
        Array y = copy(to_device(b->array(), Device::cpu()));
        if (x.dtype() != y.dtype() || x.shape() != y.shape())
          return at + "eager gives " + dtype_name(x.dtype()) + shape_to_string(x.shape()) + ", compiled gives " +
                 dtype_name(y.dtype()) + shape_to_string(y.shape());
        if (x.size() == 0 || std::memcmp(x.data(), y.data(), x.nbytes()) == 0) break;
        const auto* px = static_cast<const unsigned char*>(x.data());
        const auto* py = static_cast<const unsigned char*>(y.data());
        size_t item = x.itemsize(), i = 0, differing = 0;
        for (size_t k = 0; k < static_cast<size_t>(x.size()); ++k) {
          if (std::memcmp(px + k * item, py + k * item, item) == 0) continue;
          if (differing++ == 0) i = k;
        }
        return at + std::to_string(differing) + " of " + std::to_string(x.size()) +
               " elements differ; first at flat index " + std::to_string(i) + ": eager " + element_text(x, i) +
               ", compiled " + element_text(y, i);
      }
      case Value::Kind::Strings: {
        const auto& da = a->string_tensor().data;
        const auto& db = b->string_tensor().data;
        for (size_t i = 0; i < da.size(); ++i)
          if (da[i] != db[i])
            return at + "string " + std::to_string(i) + ": eager \"" + da[i] + "\", compiled \"" + db[i] + "\"";
        break;
      }
      case Value::Kind::Sequence:
        if (a->items().size() != b->items().size())
          return at + "eager gives " + std::to_string(a->items().size()) + " items, compiled " +
                 std::to_string(b->items().size());
        for (size_t i = 0; i < a->items().size(); ++i)
          work.emplace_back(where + "[" + std::to_string(i) + "]", &a->items()[i], &b->items()[i]);
        break;
      case Value::Kind::Optional:
        if (a->content().has_value() != b->content().has_value())
          return at + (a->content() ? "eager gives a value, compiled gives none"
                                    : "eager gives none, compiled gives a value");
        if (a->content()) work.emplace_back(where + "(content)", &*a->content(), &*b->content());
        break;
      case Value::Kind::Map:
        if (a->map_int_keys() != b->map_int_keys() || a->map_string_keys() != b->map_string_keys())
          return at + "the map keys differ";
        work.emplace_back(where + "(values)", &a->map_values(), &b->map_values());
        break;
    }
  }
  return "";
}

}  // namespace smelt::cli
#endif  // SMELT_ONNX
