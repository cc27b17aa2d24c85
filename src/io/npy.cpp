// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0) for every smelt dtype.
#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "smelt/errors.h"
#include "smelt/io.h"
#include "smelt/ops.h"
#include "src/core/allocator.h"
#include "src/core/node.h"
#include "src/ops/op_utils.h"

namespace smelt {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;  // NumPy aligns the data start to 64 bytes
// NumPy leaves room for the growth axis to reach this many digits, so a header can be rewritten
// in place; writing the same spaces keeps our headers byte-identical to NumPy's.
constexpr size_t kGrowthAxisMaxDigits = 21;
// NumPy refuses headers past 10,000 bytes by default; a legitimate header (even at the highest
// rank) stays far below this, and the cap keeps a corrupt length from allocating much.
constexpr uint64_t kMaxHeaderLen = uint64_t{1} << 20;

struct FileCloser {
  void operator()(FILE* f) const {
    if (f) std::fclose(f);
  }
};
using File = std::unique_ptr<FILE, FileCloser>;

// ---- dtype <-> descr ------------------------------------------------------------------------

// The descr NumPy writes for each dtype ('|' where byte order does not apply).
const char* descr_of(Dtype d) {
  switch (d) {
    case Dtype::Bool: return "|b1";
    case Dtype::Int8: return "|i1";
    case Dtype::Int16: return "<i2";
    case Dtype::Int32: return "<i4";
    case Dtype::Int64: return "<i8";
    case Dtype::UInt8: return "|u1";
    case Dtype::UInt16: return "<u2";
    case Dtype::UInt32: return "<u4";
    case Dtype::UInt64: return "<u8";
    case Dtype::Float16: return "<f2";
    case Dtype::BFloat16: return "<V2";  // plus 'smelt_dtype': 'bfloat16'
    case Dtype::Float32: return "<f4";
    case Dtype::Float64: return "<f8";
  }
  return "?";
}

struct ParsedDescr {
  Dtype dtype;
  bool big_endian;
};

// Maps a descr string to a dtype; nullopt when smelt has no such dtype.
std::optional<ParsedDescr> parse_descr(const std::string& descr, const std::optional<std::string>& smelt_dtype) {
  if (descr.size() < 3) return std::nullopt;
  char order = descr[0];
  if (order != '<' && order != '>' && order != '|' && order != '=') return std::nullopt;
  std::string body = descr.substr(1);
  bool big = order == '>';
  std::optional<Dtype> d;
  if (body == "b1") d = Dtype::Bool;
  else if (body == "i1") d = Dtype::Int8;
  else if (body == "i2") d = Dtype::Int16;
  else if (body == "i4") d = Dtype::Int32;
  else if (body == "i8") d = Dtype::Int64;
  else if (body == "u1") d = Dtype::UInt8;
  else if (body == "u2") d = Dtype::UInt16;
  else if (body == "u4") d = Dtype::UInt32;
  else if (body == "u8") d = Dtype::UInt64;
  else if (body == "f2") d = Dtype::Float16;
  else if (body == "f4") d = Dtype::Float32;
  else if (body == "f8") d = Dtype::Float64;
  else if (body == "V2" && smelt_dtype && *smelt_dtype == "bfloat16") d = Dtype::BFloat16;
  if (!d) return std::nullopt;
  // '|' (not applicable) only makes sense for one-byte types, but NumPy itself is lenient.
  return ParsedDescr{*d, big && size_of(*d) > 1};
}

// ---- header writing -------------------------------------------------------------------------

std::string shape_repr(const Shape& shape) {
  // Python's tuple repr: (), (5,), (2, 3).
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

// The full preamble (magic, version, length, header dict, padding, newline), exactly as NumPy's
// format.write_array writes it.
std::string make_header(Dtype dtype, const Shape& shape) {
  std::string dict = "{'descr': '";
  dict += descr_of(dtype);
  dict += "', 'fortran_order': False, 'shape': " + shape_repr(shape) + ", ";
  if (dtype == Dtype::BFloat16) dict += "'smelt_dtype': 'bfloat16', ";
  dict += "}";
  if (!shape.empty()) {
    size_t digits = std::to_string(shape[0]).size();
    if (digits < kGrowthAxisMaxDigits) dict.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  // Version 1.0 has a 16-bit length; 2.0 (32-bit) only when the header needs it.
  for (int version = 1; version <= 2; ++version) {
    size_t len_bytes = version == 1 ? 2 : 4;
    size_t hlen = dict.size() + 1;  // + '\n'
    size_t pad = kAlign - (kMagicLen + 2 + len_bytes + hlen) % kAlign;
    size_t total = hlen + pad;
    if (version == 1 && total > 0xffff) continue;
    std::string out(kMagic, kMagicLen);
    out += static_cast<char>(version);
    out += '\0';
    for (size_t i = 0; i < len_bytes; ++i) out += static_cast<char>((total >> (8 * i)) & 0xff);
    out += dict;
    out.append(pad, ' ');
    out += '\n';
    return out;
  }
  throw InvalidArgument("save: the .npy header is too long");
}

// ---- header parsing -------------------------------------------------------------------------

struct Header {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<Shape> shape;
  std::optional<std::string> smelt_dtype;
};

// A parser for the Python dict literal NumPy writes: string keys; values are strings, True/False
// or tuples of integers. Anything else is reported, never evaluated.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, std::string where) : s_(text), where_(std::move(where)) {}

  Header parse() {
    Header h;
    skip_ws();
    expect('{', "the header is not a Python dict");
    skip_ws();
    while (peek() != '}') {
      std::string key = parse_string("a dict key");
      skip_ws();
      expect(':', "expected ':' after key '" + key + "'");
      skip_ws();
      if (key == "descr") {
        if (peek() == '[')
          throw UnsupportedError(where_ + "structured dtypes (a descr list) are not supported");
        h.descr = parse_string("the descr value");
      } else if (key == "fortran_order") {
        h.fortran_order = parse_bool();
      } else if (key == "shape") {
        h.shape = parse_shape();
      } else if (key == "smelt_dtype") {
        h.smelt_dtype = parse_string("the smelt_dtype value");
      } else {
        throw InvalidArgument(where_ + "unexpected key '" + key + "' in the header");
      }
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        skip_ws();
      } else if (peek() != '}') {
        fail("expected ',' or '}' after the value of '" + key + "'");
      }
    }
    ++pos_;
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected text after the header dict");
    return h;
  }

 private:
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument(where_ + "malformed header: " + what + " at offset " + std::to_string(pos_) +
                          " of \"" + printable(s_) + "\"");
  }
  void expect(char c, const std::string& what) {
    if (peek() != c) fail(what);
    ++pos_;
  }
  static std::string printable(const std::string& s) {
    std::string out;
    for (char c : s.substr(0, 200)) out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
    if (s.size() > 200) out += "...";
    return out;
  }

  std::string parse_string(const std::string& what) {
    char q = peek();
    if (q != '\'' && q != '"') fail("expected a string for " + what);
    ++pos_;
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\') fail("escapes in strings are not supported");
      out += s_[pos_++];
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    ++pos_;
    return out;
  }

  bool parse_bool() {
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    fail("expected True or False for fortran_order");
  }

  Shape parse_shape() {
    bool paren = peek() == '(';
    if (!paren && peek() != '[') fail("expected a tuple for the shape");
    char close = paren ? ')' : ']';
    ++pos_;
    Shape shape;
    bool negative_seen = false;
    skip_ws();
    while (peek() != close) {
      bool neg = false;
      if (peek() == '-') {
        neg = true;
        ++pos_;
      }
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("expected an integer in the shape");
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        int digit = peek() - '0';
        if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) fail("a dimension does not fit in 64 bits");
        v = v * 10 + digit;
        ++pos_;
      }
      if (peek() == 'L') ++pos_;  // Python 2 long literals in old files
      if (neg && v != 0) negative_seen = true;
      shape.push_back(neg ? -v : v);
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        skip_ws();
      } else if (peek() != close) {
        fail("expected ',' or ')' in the shape");
      }
    }
    ++pos_;
    if (negative_seen)
      throw InvalidArgument(where_ + "negative dimension in shape " + shape_to_string(shape));
    return shape;
  }

  const std::string& s_;
  std::string where_;
  size_t pos_ = 0;
};

uint64_t read_le(const unsigned char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

void byteswap(void* data, int64_t count, size_t itemsize) {
  auto* p = static_cast<unsigned char*>(data);
  for (int64_t i = 0; i < count; ++i, p += itemsize)
    for (size_t a = 0, b = itemsize - 1; a < b; ++a, --b) std::swap(p[a], p[b]);
}

}  // namespace

void save(const std::string& path, Array a) {
  if (!a.valid()) throw InvalidArgument("save: " + path + ": the array is an empty handle (default-constructed)");
  // Row-major data in one block; any other layout (views, broadcasts) goes through a copy.
  Array c = to_device(a, Device::cpu());
  c.eval();
  if (!c.is_contiguous()) {
    c = copy(c);
    c.eval();
  }
  std::string header = make_header(c.dtype(), c.shape());
  File f(std::fopen(path.c_str(), "wb"));
  if (!f) throw InvalidArgument("save: " + path + ": cannot open for writing (" + std::strerror(errno) + ")");
  bool ok = std::fwrite(header.data(), 1, header.size(), f.get()) == header.size();
  size_t nbytes = c.nbytes();
  if (ok && nbytes) ok = std::fwrite(c.data(), 1, nbytes, f.get()) == nbytes;
  FILE* raw = f.release();
  if (std::fclose(raw) != 0) ok = false;
  if (!ok) {
    std::string reason = std::strerror(errno);
    // No truncated file that a later load would reject (devices such as /dev/full stay).
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) std::remove(path.c_str());
    throw InvalidArgument("save: " + path + ": write failed (" + reason + ")");
  }
}

Array load(const std::string& path) {
  const std::string where = "load: " + path + ": ";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw InvalidArgument(where + "cannot open (" + std::strerror(errno) + ")");
  if (S_ISDIR(st.st_mode)) throw InvalidArgument(where + "is a directory, not a .npy file");
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) throw InvalidArgument(where + "cannot open (" + std::strerror(errno) + ")");
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);

  unsigned char pre[12];
  size_t got = std::fread(pre, 1, 10, f.get());
  if (got < kMagicLen || std::memcmp(pre, kMagic, kMagicLen) != 0)
    throw InvalidArgument(where + "not a .npy file (bad magic; expected \\x93NUMPY)");
  if (got < 8) throw InvalidArgument(where + "truncated header (the file ends inside the version)");
  int major = pre[6], minor = pre[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    throw UnsupportedError(where + "unsupported .npy format version " + std::to_string(major) + "." +
                           std::to_string(minor) + " (1.0, 2.0 and 3.0 are supported)");
  size_t len_bytes = major == 1 ? 2 : 4;
  if (major != 1) got += std::fread(pre + 10, 1, 2, f.get());
  if (got < 8 + len_bytes) throw InvalidArgument(where + "truncated header (the file ends inside the header length)");
  uint64_t header_len = read_le(pre + 8, len_bytes);
  uint64_t data_offset = 8 + len_bytes + header_len;
  if (data_offset > file_size)
    throw InvalidArgument(where + "truncated header: it claims " + std::to_string(header_len) +
                          " bytes but the file has " + std::to_string(file_size) + " bytes in all");
  if (header_len > kMaxHeaderLen)
    throw InvalidArgument(where + "the header claims " + std::to_string(header_len) + " bytes (at most " +
                          std::to_string(kMaxHeaderLen) + " are accepted)");
  std::string text(header_len, '\0');
  if (header_len && std::fread(text.data(), 1, header_len, f.get()) != header_len)
    throw InvalidArgument(where + "truncated header (read failed)");
  Header h = HeaderParser(text, where).parse();
  if (!h.descr) throw InvalidArgument(where + "the header has no 'descr'");
  if (!h.fortran_order) throw InvalidArgument(where + "the header has no 'fortran_order'");
  if (!h.shape) throw InvalidArgument(where + "the header has no 'shape'");
  if (h.smelt_dtype && *h.smelt_dtype != "bfloat16")
    throw UnsupportedError(where + "unknown smelt_dtype '" + *h.smelt_dtype + "'");
  auto pd = parse_descr(*h.descr, h.smelt_dtype);
  if (!pd) {
    std::string hint;
    if (h.descr->size() >= 2 && (*h.descr)[1] == 'V')
      hint = " (raw void data; smelt reads '<V2' as bfloat16 only with 'smelt_dtype': 'bfloat16')";
    throw UnsupportedError(where + "unsupported dtype descr '" + *h.descr + "'" + hint +
                           "; smelt reads bool, int8-64, uint8-64, float16, bfloat16, float32 and float64");
  }
  const Dtype dtype = pd->dtype;
  const Shape& shape = *h.shape;
  const size_t itemsize = size_of(dtype);

  // The element count, checked against the file before anything is allocated.
  const uint64_t available = file_size - data_offset;
  bool has_zero = false;
  for (int64_t d : shape) has_zero |= d == 0;
  uint64_t count = has_zero ? 0 : 1;
  bool too_big = false;
  for (int64_t d : shape) {
    if (has_zero || too_big) break;
    uint64_t ud = static_cast<uint64_t>(d);
    if (count > std::numeric_limits<uint64_t>::max() / itemsize / ud) too_big = true;
    else count *= ud;
  }
  const uint64_t need = too_big ? 0 : count * itemsize;
  if (too_big || need > available)
    throw InvalidArgument(where + "truncated data: shape " + shape_to_string(shape) + " of " + dtype_name(dtype) +
                          " needs " + (too_big ? std::string("more than 2^64") : std::to_string(need)) +
                          " bytes but the file holds " + std::to_string(available) + " after the header");
  if (need != available)
    throw InvalidArgument(where + "data size mismatch: shape " + shape_to_string(shape) + " of " +
                          dtype_name(dtype) + " needs " + std::to_string(need) + " bytes but the file holds " +
                          std::to_string(available) + " after the header");

  BufferPtr buffer = cpu_allocator().allocate(need);
  if (need && std::fread(buffer->ptr, 1, need, f.get()) != need)
    throw InvalidArgument(where + "truncated data (read failed)");
  const int64_t n = static_cast<int64_t>(count);
  if (pd->big_endian) byteswap(buffer->ptr, n, itemsize);
  if (dtype == Dtype::Bool) {  // smelt bools are 0/1 bytes
    auto* p = static_cast<uint8_t*>(buffer->ptr);
    for (int64_t i = 0; i < n; ++i) p[i] = p[i] != 0;
  }
  if (!*h.fortran_order) return detail::make_leaf(shape, dtype, Device::cpu(), std::move(buffer), row_major_strides(shape));
  // Fortran order: a column-major view of the data, copied into row-major order.
  Strides strides(shape.size());
  int64_t acc = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    strides[i] = acc;
    acc *= shape[i];
  }
  Array view = detail::make_leaf(shape, dtype, Device::cpu(), std::move(buffer), std::move(strides));
  Array out = copy(view);
  out.eval();
  return out;
}

}  // namespace smelt
