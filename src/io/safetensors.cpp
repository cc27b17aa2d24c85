// Reading and writing .safetensors files: an 8-byte header length, a JSON header, raw data.
//
// The format (github.com/huggingface/safetensors, "Format"): a little-endian uint64 N, N bytes of
// UTF-8 JSON (an object mapping tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
// plus an optional "__metadata__" object of strings; writers pad it with spaces to a multiple of
// 8), then the byte buffer. Offsets are relative to the buffer, and the tensors must cover it
// exactly: no gaps, no overlaps. Files come from anywhere, so the reader checks every length,
// offset, dtype and shape against the file before it touches the data.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "smelt/errors.h"
#include "smelt/io.h"
#include "smelt/ops.h"

static_assert(std::endian::native == std::endian::little, "safetensors data is little endian; so is every supported host");

namespace smelt {

namespace {

// The reference implementation refuses headers above 100 MB: no real model needs more, and it
// bounds what a hostile length can make the reader allocate.
constexpr uint64_t kMaxHeader = 100'000'000;

struct DtypeName {
  Dtype dtype;
  const char* name;
};
constexpr DtypeName kDtypes[] = {
    {Dtype::Bool, "BOOL"},   {Dtype::UInt8, "U8"},    {Dtype::Int8, "I8"},     {Dtype::Int16, "I16"},
    {Dtype::UInt16, "U16"},  {Dtype::Float16, "F16"}, {Dtype::BFloat16, "BF16"}, {Dtype::Int32, "I32"},
    {Dtype::UInt32, "U32"},  {Dtype::Float32, "F32"}, {Dtype::Float64, "F64"}, {Dtype::Int64, "I64"},
    {Dtype::UInt64, "U64"},
};

const char* safetensors_name(Dtype d) {
  for (const auto& e : kDtypes)
    if (e.dtype == d) return e.name;
  throw DtypeError(std::string("save_safetensors: no safetensors dtype for ") + dtype_name(d));
}

// ---- Writing ----------------------------------------------------------------------------------

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// ---- Reading: a JSON parser for exactly what a header may hold --------------------------------

/// A parsed tensor entry.
struct Entry {
  std::string name;
  Dtype dtype = Dtype::Float32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string path) : s_(text), path_(std::move(path)) {}

  void parse(std::vector<Entry>& entries, std::map<std::string, std::string>& metadata) {
    skip_ws();
    expect('{');
    skip_ws();
    std::map<std::string, int> seen;
    if (peek() == '}') {
      ++pos_;
    } else {
      while (true) {
        skip_ws();
        std::string key = string();
        if (seen.count(key)) fail("the key '" + key + "' appears twice");
        seen[key] = 1;
        skip_ws();
        expect(':');
        skip_ws();
        if (key == "__metadata__")
          metadata = string_map();
        else
          entries.push_back(tensor(key));
        skip_ws();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        expect('}');
        break;
      }
    }
    skip_ws();  // writers pad with spaces
    if (pos_ != s_.size()) fail("unexpected text after the header object at byte " + std::to_string(pos_));
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument("load_safetensors: " + path_ + ": malformed header: " + what);
  }
  char peek() const {
    if (pos_ >= s_.size()) fail("it ends early");
    return s_[pos_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "' at byte " + std::to_string(pos_) + ", found '" + s_[pos_] + "'");
    ++pos_;
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }

  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      char c = peek();
      ++pos_;
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("a control character inside a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      char e = peek();
      ++pos_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': append_utf8(out, code_point()); break;
        default: fail(std::string("an unknown escape '\\") + e + "'");
      }
    }
  }

  uint32_t hex4() {
    if (pos_ + 4 > s_.size()) fail("a \\u escape ends early");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else fail("a \\u escape with a non-hex digit");
    }
    return v;
  }

  uint32_t code_point() {
    uint32_t v = hex4();
    if (v >= 0xD800 && v < 0xDC00) {  // a surrogate pair
      if (pos_ + 2 > s_.size() || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') fail("an unpaired surrogate");
      pos_ += 2;
      uint32_t lo = hex4();
      if (lo < 0xDC00 || lo >= 0xE000) fail("an unpaired surrogate");
      v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
    } else if (v >= 0xDC00 && v < 0xE000) {
      fail("an unpaired surrogate");
    }
    return v;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  /// A non-negative integer that fits in uint64 (offsets and dimensions).
  uint64_t integer(const std::string& what) {
    if (peek() < '0' || peek() > '9') fail(what + " must be a non-negative integer");
    uint64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      uint64_t d = static_cast<uint64_t>(s_[pos_++] - '0');
      if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) fail(what + " overflows 64 bits");
      v = v * 10 + d;
    }
    if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E'))
      fail(what + " must be an integer");
    return v;
  }

  std::vector<uint64_t> integer_list(const std::string& what) {
    expect('[');
    std::vector<uint64_t> out;
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return out;
    }
    while (true) {
      skip_ws();
      out.push_back(integer(what));
      if (out.size() > 64) fail(what + " has more than 64 entries");
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect(']');
      return out;
    }
  }

  std::map<std::string, std::string> string_map() {
    std::map<std::string, std::string> out;
    expect('{');
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return out;
    }
    while (true) {
      skip_ws();
      std::string k = string();
      skip_ws();
      expect(':');
      skip_ws();
      if (peek() != '"') fail("__metadata__ values must be strings ('" + k + "')");
      out[k] = string();
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      return out;
    }
  }

  Entry tensor(const std::string& name) {
    Entry e;
    e.name = name;
    bool has_dtype = false, has_shape = false, has_offsets = false;
    expect('{');
    while (true) {
      skip_ws();
      std::string field = string();
      skip_ws();
      expect(':');
      skip_ws();
      if (field == "dtype") {
        if (has_dtype) fail("tensor '" + name + "' has two dtypes");
        std::string d = string();
        auto it = std::find_if(std::begin(kDtypes), std::end(kDtypes), [&](const DtypeName& x) { return d == x.name; });
        if (it == std::end(kDtypes))
          throw DtypeError("load_safetensors: " + path_ + ": tensor '" + name + "' has the dtype '" + d +
                           "', which smelt does not support (BOOL, U8-U64, I8-I64, F16, BF16, F32, F64)");
        e.dtype = it->dtype;
        has_dtype = true;
      } else if (field == "shape") {
        if (has_shape) fail("tensor '" + name + "' has two shapes");
        for (uint64_t d : integer_list("tensor '" + name + "' shape entries")) {
          if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            fail("tensor '" + name + "' has a dimension too large");
          e.shape.push_back(static_cast<int64_t>(d));
        }
        has_shape = true;
      } else if (field == "data_offsets") {
        if (has_offsets) fail("tensor '" + name + "' has two data_offsets");
        auto o = integer_list("tensor '" + name + "' data_offsets");
        if (o.size() != 2) fail("tensor '" + name + "' data_offsets must be [begin, end]");
        e.begin = o[0];
        e.end = o[1];
        has_offsets = true;
      } else {
        fail("tensor '" + name + "' has the unknown field '" + field + "'");
      }
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      break;
    }
    if (!has_dtype || !has_shape || !has_offsets)
      fail("tensor '" + name + "' needs dtype, shape and data_offsets");
    return e;
  }

  std::string_view s_;
  std::string path_;
  size_t pos_ = 0;
};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InvalidArgument("load_safetensors: " + path + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Parses and checks the header of the file's bytes; returns the data buffer's offset.
size_t parse_file(const std::string& bytes, const std::string& path, std::vector<Entry>& entries,
                  std::map<std::string, std::string>& metadata) {
  if (bytes.size() < 8)
    throw InvalidArgument("load_safetensors: " + path + ": the file has " + std::to_string(bytes.size()) +
                          " bytes, fewer than the 8-byte header length");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxHeader || n > bytes.size() - 8)
    throw InvalidArgument("load_safetensors: " + path + ": the header length " + std::to_string(n) +
                          " exceeds the file (" + std::to_string(bytes.size()) + " bytes) or the 100 MB limit");
  HeaderParser(std::string_view(bytes).substr(8, n), path).parse(entries, metadata);
  const uint64_t data_size = bytes.size() - 8 - n;
  // Each tensor's byte count must match its shape, and the tensors must tile the buffer.
  for (const Entry& e : entries) {
    uint64_t count = 1;
    for (int64_t d : e.shape) {
      if (d != 0 && count > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d))
        throw InvalidArgument("load_safetensors: " + path + ": tensor '" + e.name + "' shape " + shape_to_string(e.shape) +
                              " overflows");
      count *= static_cast<uint64_t>(d);
    }
    const uint64_t size = size_of(e.dtype);
    if (count > std::numeric_limits<uint64_t>::max() / size || e.end < e.begin || e.end - e.begin != count * size)
      throw InvalidArgument("load_safetensors: " + path + ": tensor '" + e.name + "' (" + dtype_name(e.dtype) +
                            shape_to_string(e.shape) + ") has data_offsets [" + std::to_string(e.begin) + ", " +
                            std::to_string(e.end) + "], which do not hold its " + std::to_string(count) + " elements");
    if (e.end > data_size)
      throw InvalidArgument("load_safetensors: " + path + ": tensor '" + e.name + "' data_offsets [" +
                            std::to_string(e.begin) + ", " + std::to_string(e.end) + "] run past the data (" +
                            std::to_string(data_size) + " bytes)");
  }
  std::vector<const Entry*> order;
  for (const Entry& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  for (const Entry* e : order) {
    if (e->begin != covered)
      throw InvalidArgument("load_safetensors: " + path + ": tensor '" + e->name + "' starts at byte " +
                            std::to_string(e->begin) + " of the data, expected " + std::to_string(covered) +
                            (e->begin < covered ? " (it overlaps another tensor)" : " (a gap)"));
    covered = e->end;
  }
  if (covered != data_size)
    throw InvalidArgument("load_safetensors: " + path + ": the tensors cover " + std::to_string(covered) + " of the " +
                          std::to_string(data_size) + " data bytes");
  return 8 + n;
}

}  // namespace

void save_safetensors(const std::string& path, const std::map<std::string, Array>& arrays,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<Array> data;
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      header += (first ? "" : ",") + json_string(k) + ":" + json_string(v);
      first = false;
    }
    header += "}";
  }
  uint64_t offset = 0;
  for (const auto& [name, a] : arrays) {
    if (name == "__metadata__") throw InvalidArgument("save_safetensors: " + path + ": '__metadata__' cannot name a tensor");
    if (!a.valid()) throw InvalidArgument("save_safetensors: " + path + ": tensor '" + name + "' is an empty handle");
    Array c = to_device(a, Device::cpu());
    c.eval();
    if (!c.is_contiguous()) {
      c = copy(c);
      c.eval();
    }
    std::string shape;
    for (int64_t d : c.shape()) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    if (header.size() > 1) header += ",";
    header += json_string(name) + ":{\"dtype\":\"" + safetensors_name(c.dtype()) + "\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + c.nbytes()) + "]}";
    offset += c.nbytes();
    data.push_back(c);
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // data starts 8-byte aligned, as writers do
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) throw InvalidArgument("save_safetensors: " + path + ": cannot open for writing (" + std::strerror(errno) + ")");
  const uint64_t n = header.size();
  bool ok = std::fwrite(&n, 1, 8, f.get()) == 8 && std::fwrite(header.data(), 1, header.size(), f.get()) == header.size();
  for (const Array& c : data)
    if (ok && c.nbytes()) ok = std::fwrite(c.data(), 1, c.nbytes(), f.get()) == c.nbytes();
  if (std::fclose(f.release()) != 0) ok = false;
  if (!ok) {
    std::string reason = std::strerror(errno);
    std::remove(path.c_str());  // no truncated file that a later load would reject
    throw InvalidArgument("save_safetensors: " + path + ": write failed (" + reason + ")");
  }
}

std::map<std::string, Array> load_safetensors(const std::string& path) {
  const std::string bytes = read_file(path);
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
  const size_t base = parse_file(bytes, path, entries, metadata);
  std::map<std::string, Array> out;
  for (const Entry& e : entries) {
    const char* p = bytes.data() + base + e.begin;
    if (e.dtype == Dtype::Bool)
      for (uint64_t i = 0; i < e.end - e.begin; ++i)
        if (static_cast<unsigned char>(p[i]) > 1)
          throw InvalidArgument("load_safetensors: " + path + ": tensor '" + e.name + "' (BOOL) holds the byte " +
                                std::to_string(static_cast<unsigned char>(p[i])) + " at element " + std::to_string(i) +
                                "; booleans are 0 or 1");
    out.emplace(e.name, Array(p, e.shape, e.dtype));
  }
  return out;
}

std::map<std::string, std::string> safetensors_metadata(const std::string& path) {
  const std::string bytes = read_file(path);
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
  parse_file(bytes, path, entries, metadata);
  return metadata;
}

}  // namespace smelt
