// to_string(Array, PrintOptions) and operator<< for arrays and dtypes: NumPy's repr (element formats, alignment, line wrapping, summarization).
//
// Follows numpy/core/arrayprint.py (NumPy >= 1.14, floatmode "maxprec") so that a printed smelt
// array reads like the NumPy array of the same values: one format per array, chosen from the
// elements that are shown; floats print the fewest digits that read back as the same value of
// their dtype (at most `precision` after the point), in scientific notation when the magnitudes
// call for it; rows wrap at `linewidth`. The dtype is always written (NumPy leaves out float64,
// int64 and bool; in C++ `Array(2)` is int32 and `Array(2.0)` float64, so smelt always says).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "smelt/array.h"
#include "smelt/errors.h"
#include "smelt/ops.h"
#include "smelt/print.h"
#include "src/core/dispatch.h"
#include "src/core/node.h"

namespace smelt {

namespace {

// ---- Floats ----------------------------------------------------------------------------------

/// The decimal digits and exponent of the shortest scientific form that reads back as `v` in
/// its own type T (float16/bfloat16 included), e.g. 0.1f -> {"1", -1}.
struct Decimal {
  std::string digits;  // no sign, no point, no trailing zeros (except "0" for zero)
  int exponent = 0;    // of the first digit
  bool negative = false;
};

Decimal split_scientific(const char* text) {
  // text: [-]d[.ddd]e[+-]xx as printf's %e writes it
  Decimal d;
  const char* p = text;
  if (*p == '-') {
    d.negative = true;
    ++p;
  }
  for (; *p && *p != 'e'; ++p)
    if (*p != '.') d.digits += *p;
  d.exponent = std::atoi(p + 1);
  while (d.digits.size() > 1 && d.digits.back() == '0') d.digits.pop_back();
  return d;
}

template <class T>
Decimal shortest_decimal(double v) {
  char buf[64];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*e", p - 1, v);
    double back = std::strtod(buf, nullptr);
    bool same;
    if constexpr (std::is_same_v<T, double>) same = back == v;
    else same = static_cast<double>(static_cast<compute_t<T>>(T(static_cast<float>(back)))) == v;
    if (same) return split_scientific(buf);
  }
  std::snprintf(buf, sizeof buf, "%.16e", v);
  return split_scientific(buf);
}

/// The value in positional notation, "int.frac" (the point always written, "2." for 2).
std::string positional(const Decimal& d) {
  std::string int_part, frac;
  const int n = static_cast<int>(d.digits.size());
  if (d.exponent >= 0) {
    int_part = d.digits.substr(0, std::min(n, d.exponent + 1));
    if (d.exponent + 1 > n) int_part.append(static_cast<size_t>(d.exponent + 1 - n), '0');
    if (d.exponent + 1 < n) frac = d.digits.substr(static_cast<size_t>(d.exponent + 1));
  } else {
    int_part = "0";
    frac = std::string(static_cast<size_t>(-d.exponent - 1), '0') + d.digits;
  }
  if (frac.find_first_not_of('0') == std::string::npos) frac.clear();
  return (d.negative ? "-" : "") + int_part + "." + frac;
}

/// Positional text of v with the shortest digits, cut to `precision` fractional digits
/// (rounding the value) when it needs more; trailing zeros trimmed, the point kept.
template <class T>
std::string fixed_text(double v, int precision) {
  std::string s = positional(shortest_decimal<T>(v));
  size_t point = s.find('.');
  if (static_cast<int>(s.size() - point - 1) <= precision) return s;
  char buf[400];
  std::snprintf(buf, sizeof buf, "%.*f", precision, v);
  s = buf;
  if (s.find('.') == std::string::npos) s += ".";
  while (s.back() == '0') s.pop_back();
  return s;
}

/// Scientific text split into mantissa ("1.5", "-2.") and exponent: the shortest digits, cut to
/// `precision` fractional digits when they need more; with `digits` >= 0, exactly that many
/// fractional digits of the value (NumPy pads with the value's own digits: float16 6e-08 next to
/// 6.55e+04 prints as 5.96e-08, not 6.00e-08).
template <class T>
std::pair<std::string, int> scientific_text(double v, int precision, int digits = -1) {
  Decimal d = shortest_decimal<T>(v);
  if (digits >= 0 || static_cast<int>(d.digits.size()) - 1 > precision) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*e", digits >= 0 ? digits : precision, v);
    d = split_scientific(buf);
    if (digits >= 0) d.digits.resize(static_cast<size_t>(digits) + 1, '0');  // keep trailing zeros
  }
  std::string m = (d.negative ? "-" : "") + d.digits.substr(0, 1) + "." + d.digits.substr(1);
  return {m, d.exponent};
}

/// One format for all shown elements of a float array (NumPy's FloatingFormat).
template <class T>
class FloatFormat {
 public:
  FloatFormat(const std::vector<double>& shown, const PrintOptions& o) : precision_(o.precision) {
    std::vector<double> finite;
    for (double v : shown)
      if (std::isfinite(v)) finite.push_back(v);
    double max_abs = 0.0, min_abs = 0.0;
    bool any_nonzero = false;
    for (double v : finite) {
      if (v == 0.0) continue;
      double a = std::fabs(v);
      max_abs = any_nonzero ? std::max(max_abs, a) : a;
      min_abs = any_nonzero ? std::min(min_abs, a) : a;
      any_nonzero = true;
    }
    exp_ = any_nonzero && (max_abs >= 1e8 || (!o.suppress && (min_abs < 1e-4 || max_abs / min_abs > 1e3)));
    if (finite.empty()) {
      pad_left_ = pad_right_ = 0;
    } else if (exp_) {
      size_t frac = 0;
      int max_exp_digits = 2;
      for (double v : finite) {
        auto [m, e] = scientific_text<T>(v, precision_);
        frac = std::max(frac, m.size() - m.find('.') - 1);
        pad_left_ = std::max(pad_left_, static_cast<int>(m.find('.')));
        max_exp_digits = std::max(max_exp_digits, static_cast<int>(std::to_string(std::abs(e)).size()));
      }
      exp_digits_ = max_exp_digits;
      exp_precision_ = static_cast<int>(frac);
      pad_right_ = exp_digits_ + 2 + exp_precision_;
    } else {
      for (double v : finite) {
        std::string s = fixed_text<T>(v, precision_);
        size_t point = s.find('.');
        pad_left_ = std::max(pad_left_, static_cast<int>(point));
        pad_right_ = std::max(pad_right_, static_cast<int>(s.size() - point - 1));
      }
    }
    if (finite.size() != shown.size()) {  // room for nan / inf / -inf
      bool neg_inf = std::any_of(shown.begin(), shown.end(), [](double v) { return std::isinf(v) && v < 0; });
      int offset = pad_right_ + 1;
      pad_left_ = std::max({pad_left_, 3 - offset, 3 + (neg_inf ? 1 : 0) - offset});
    }
  }

  std::string operator()(double v) const {
    if (!std::isfinite(v)) {
      std::string s = std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
      int width = pad_left_ + pad_right_ + 1;
      return std::string(static_cast<size_t>(std::max(0, width - static_cast<int>(s.size()))), ' ') + s;
    }
    std::string int_part, rest;
    if (exp_) {
      auto [m, e] = scientific_text<T>(v, precision_, exp_precision_);
      size_t point = m.find('.');
      int_part = m.substr(0, point);
      std::string frac = m.substr(point + 1);
      std::string digits = std::to_string(std::abs(e));
      digits.insert(0, static_cast<size_t>(std::max(0, exp_digits_ - static_cast<int>(digits.size()))), '0');
      rest = "." + frac + "e" + (e < 0 ? "-" : "+") + digits;
    } else {
      std::string s = fixed_text<T>(v, precision_);
      size_t point = s.find('.');
      int_part = s.substr(0, point);
      rest = s.substr(point);
      rest.append(static_cast<size_t>(std::max(0, pad_right_ + 1 - static_cast<int>(rest.size()))), ' ');
    }
    return std::string(static_cast<size_t>(std::max(0, pad_left_ - static_cast<int>(int_part.size()))), ' ') +
           int_part + rest;
  }

 private:
  int precision_;
  bool exp_ = false;
  int pad_left_ = 0, pad_right_ = 0;
  int exp_digits_ = 2, exp_precision_ = 0;
};

// ---- Layout ----------------------------------------------------------------------------------

struct Layout {
  const Shape& shape;
  const Strides& strides;  // row-major, of the contiguous copy
  bool summarize;
  int64_t edge;
  std::function<std::string(int64_t)> element;  // formatted element at a flat index
  std::string separator = ", ";

  /// Indices shown along an axis of size n: all, or `edge` at each end around a "..." (-1).
  std::vector<int64_t> shown(int64_t n) const {
    std::vector<int64_t> out;
    if (summarize && n > 2 * edge) {
      for (int64_t i = 0; i < edge; ++i) out.push_back(i);
      out.push_back(-1);
      for (int64_t i = n - edge; i < n; ++i) out.push_back(i);
    } else {
      for (int64_t i = 0; i < n; ++i) out.push_back(i);
    }
    return out;
  }

  /// Every shown flat index in order (the formats are chosen from these elements only).
  void collect(int axis, int64_t base, std::vector<int64_t>& out) const {
    if (axis == static_cast<int>(shape.size())) {
      out.push_back(base);
      return;
    }
    for (int64_t i : shown(shape[axis]))
      if (i >= 0) collect(axis + 1, base + i * strides[axis], out);
  }

  static void extend_line(std::string& s, std::string& line, const std::string& word, int width,
                          const std::string& next_line_prefix) {
    bool wrap = static_cast<int>(line.size() + word.size()) > width;
    if (line.size() <= next_line_prefix.size()) wrap = false;  // wrapping would not help
    if (wrap) {
      while (!line.empty() && line.back() == ' ') line.pop_back();
      s += line + "\n";
      line = next_line_prefix;
    }
    line += word;
  }

  /// NumPy's _formatArray recurser. The recursion depth is the rank, not the graph.
  std::string format(int axis, int64_t base, const std::string& hanging, int width) const {
    const int axes_left = static_cast<int>(shape.size()) - axis;
    if (axes_left == 0) return element(base);
    const std::string next_hanging = hanging + " ";
    const int next_width = width - 1;  // the closing ']'
    std::vector<int64_t> idx = shown(shape[axis]);
    std::string s;
    if (axes_left == 1) {
      const int elem_width = width - 1;  // max(len(','), len(']'))
      std::string line = hanging;
      for (size_t k = 0; k < idx.size(); ++k) {
        bool last = k + 1 == idx.size();
        std::string word = idx[k] < 0 ? "..." : format(axis + 1, base + idx[k] * strides[axis], next_hanging, next_width);
        extend_line(s, line, word, last ? width : elem_width, hanging);
        if (!last) line += separator;
      }
      s += line;
    } else {
      std::string line_sep = "," + std::string(static_cast<size_t>(axes_left - 1), '\n');
      for (size_t k = 0; k < idx.size(); ++k) {
        std::string nested = idx[k] < 0 ? "..." : format(axis + 1, base + idx[k] * strides[axis], next_hanging, next_width);
        s += hanging + nested;
        if (k + 1 < idx.size()) s += line_sep;
      }
    }
    return "[" + s.substr(hanging.size()) + "]";
  }
};

std::string shape_tuple(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

void check_options(const PrintOptions& o) {
  auto bad = [](const char* field, long long v, const char* need) {
    throw InvalidArgument(std::string("to_string: PrintOptions::") + field + " must be " + need + ", got " +
                          std::to_string(v));
  };
  if (o.precision < 0 || o.precision > 17) bad("precision", o.precision, "in [0, 17]");
  if (o.threshold < 0) bad("threshold", o.threshold, "non-negative");
  if (o.edgeitems < 0) bad("edgeitems", o.edgeitems, "non-negative");
  if (o.linewidth < 1) bad("linewidth", o.linewidth, "positive");
}

}  // namespace

std::string to_string(const Array& a, const PrintOptions& options) {
  if (!a.valid()) throw InvalidArgument("to_string: the array is an empty handle (default-constructed)");
  check_options(options);
  Array c = a.device().type == Device::Type::Cpu ? a : to_device(a, Device::cpu());
  c.eval();
  if (!c.is_contiguous()) {
    c = copy(c);
    c.eval();
  }
  const Dtype dt = a.dtype();
  const Shape& s = a.shape();
  const std::string prefix = "array(";
  std::string body;
  const bool summarize = c.size() > options.threshold;
  if (c.size() == 0) {
    body = "[]";
  } else {
    const char* base = static_cast<const char*>(c.data());
    Strides strides = row_major_strides(s);
    Layout layout{s, strides, summarize, options.edgeitems, {}};
    std::vector<int64_t> shown;
    layout.collect(0, 0, shown);
    body = dispatch_all(dt, [&]<class T>() {
      auto value = [&](int64_t i) {
        T v;
        std::memcpy(&v, base + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
        return v;
      };
      if constexpr (std::is_same_v<T, bool>) {
        const bool pad = !s.empty();  // " True" lines up with "False", except alone in a 0-d array
        layout.element = [&, pad](int64_t i) { return std::string(value(i) ? (pad ? " True" : "True") : "False"); };
      } else if constexpr (std::is_integral_v<T>) {
        size_t width = 0;
        for (int64_t i : shown) width = std::max(width, std::to_string(value(i)).size());
        layout.element = [&, width](int64_t i) {
          std::string t = std::to_string(value(i));
          return std::string(width - t.size(), ' ') + t;
        };
      } else {
        std::vector<double> values;
        for (int64_t i : shown) values.push_back(static_cast<double>(static_cast<compute_t<T>>(value(i))));
        auto format = std::make_shared<FloatFormat<T>>(values, options);
        layout.element = [&, format](int64_t i) {
          return (*format)(static_cast<double>(static_cast<compute_t<T>>(value(i))));
        };
      }
      // The suffix "," after the elements counts against the width (NumPy's linewidth -= 1).
      return layout.format(0, 0, std::string(prefix.size() + 1, ' '), options.linewidth - 1);
    });
  }
  // As NumPy 2: the shape is written when the elements do not show it (empty or summarized).
  std::string out = prefix + body + ",";
  std::string extras;
  if ((c.size() == 0 && s.size() != 1) || summarize) extras = "shape=" + shape_tuple(s) + ", ";
  extras += std::string("dtype=") + dtype_name(dt) + ")";
  const size_t last_line = out.size() - (out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
  if (static_cast<int>(last_line + extras.size() + 1) > options.linewidth)
    out += "\n" + std::string(prefix.size(), ' ');
  else
    out += " ";
  return out + extras;
}

std::string Array::to_string() const { return smelt::to_string(*this, PrintOptions{}); }

std::ostream& operator<<(std::ostream& os, Array a) { return os << a.to_string(); }

std::ostream& operator<<(std::ostream& os, Dtype dtype) { return os << dtype_name(dtype); }

}  // namespace smelt
