// `smelt run MODEL`: runs an ONNX model eagerly on given or random inputs, prints and saves outputs, times runs.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "smelt/errors.h"
#include "tools/smelt/commands.h"
#ifdef SMELT_ONNX
#include "smelt/io.h"
#include "smelt/memory.h"
#include "smelt/onnx.h"
#include "smelt/random.h"
#include "smelt/smelt.h"
#endif

namespace fs = std::filesystem;

namespace smelt::cli {

namespace {

constexpr const char* kUsage =
    "usage: smelt run MODEL [--input NAME=FILE.npy | NAME=random[:D0xD1...]]... [--dim SYMBOL=N]...\n"
    "                 [--output-dir DIR] [--repeat N] [--threads N] [--seed S] [--json FILE]";

constexpr const char* kHelp =
    "\n"
    "Runs an ONNX model eagerly, prints each output's dtype, shape and leading values and the time of the\n"
    "first run; with --repeat N also the median and min time of N more runs.\n"
    "\n"
    "  --input NAME=FILE.npy     feed a .npy file (its dtype and rank must match the declared input)\n"
    "  --input NAME=random:2x16  random values of that shape (NAME=random: the declared shape; 'random:' alone: 0-d)\n"
    "  --dim SYMBOL=N            size of a symbolic dim (defaults: batch-like symbols such as batch, N, B = 1;\n"
    "                            sequence-like symbols such as seq, seq_len, length, T = 32; others must be given)\n"
    "  --output-dir DIR          write each tensor output to DIR/NAME.npy (characters outside [A-Za-z0-9._-] become _)\n"
    "  --repeat N                time N more runs after the first\n"
    "  --threads N               CPU threads (default: SMELT_NUM_THREADS or all cores)\n"
    "  --seed S                  seed of the random inputs (default 0)\n"
    "  --json FILE               write the shapes and timings as JSON\n"
    "\n"
    "Inputs not given are random: floats uniform in [-1, 1); bool with p = 0.5; integers whose name has the\n"
    "word mask are ones, the word id(s)/index/indices/idx/token(s)/position(s) uniform in [0, 100), others in\n"
    "[0, 10). Names split into words at anything but letters and digits (input_ids: input, ids); symbols too\n"
    "(batch_size: batch, size). Inputs backed by an initializer keep its value unless given.\n";

[[noreturn]] void usage_error(const std::string& message) { throw UsageError(message + "\n" + kUsage); }

/// How one input is given on the command line.
struct InputSpec {
  std::string name;
  std::string file;                     // NAME=FILE.npy
  bool random = false;                  // NAME=random or NAME=random:D0xD1...
  std::optional<std::vector<int64_t>> shape;  // the dims after "random:" (empty: a 0-d scalar)
};

struct RunOptions {
  std::string model;
  std::vector<InputSpec> inputs;
  std::map<std::string, int64_t> dims;
  std::string output_dir;
  std::string json;
  int repeat = 0;
  int threads = 0;
  uint64_t seed = 0;
  bool help = false;
};

/// A non-negative decimal integer, or nullopt.
std::optional<int64_t> parse_count(const std::string& s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

InputSpec parse_input(const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    usage_error("--input '" + text + "' is not NAME=FILE.npy or NAME=random:D0xD1...");
  InputSpec spec;
  spec.name = text.substr(0, eq);
  std::string value = text.substr(eq + 1);
  if (value == "random") {
    spec.random = true;
  } else if (value.rfind("random:", 0) == 0) {
    spec.random = true;
    std::string dims = value.substr(7);
    std::vector<int64_t> shape;
    size_t start = 0;
    while (!dims.empty() && start <= dims.size()) {
      size_t x = dims.find('x', start);
      std::string part = dims.substr(start, x == std::string::npos ? std::string::npos : x - start);
      auto d = parse_count(part);
      if (!d)
        usage_error("--input '" + text + "': the shape after 'random:' is dims joined by 'x' (2x16); '" + part +
                    "' is not a size");
      shape.push_back(*d);
      if (x == std::string::npos) break;
      start = x + 1;
    }
    spec.shape = shape;
  } else {
    spec.file = value;
  }
  return spec;
}

RunOptions parse_args(const std::vector<std::string>& args) {
  RunOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) usage_error(a + " needs a value");
      return args[++i];
    };
    auto positive = [&](const std::string& v) -> int64_t {
      auto n = parse_count(v);
      if (!n || *n < 1 || *n > 1000000) usage_error(a + " needs a positive integer, got '" + v + "'");
      return *n;
    };
    if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (a == "--input" || a == "-i") {
      o.inputs.push_back(parse_input(value()));
    } else if (a == "--dim") {
      std::string v = value();
      auto eq = v.find('=');
      auto n = eq == std::string::npos ? std::nullopt : parse_count(v.substr(eq + 1));
      if (eq == std::string::npos || eq == 0 || !n) usage_error("--dim '" + v + "' is not SYMBOL=N (batch=4)");
      o.dims[v.substr(0, eq)] = *n;
    } else if (a == "--output-dir" || a == "-o") {
      o.output_dir = value();
    } else if (a == "--json") {
      o.json = value();
    } else if (a == "--repeat") {
      o.repeat = static_cast<int>(positive(value()));
    } else if (a == "--threads") {
      o.threads = static_cast<int>(positive(value()));
    } else if (a == "--seed") {
      std::string v = value();
      auto n = parse_count(v);
      if (!n) usage_error("--seed needs a non-negative integer, got '" + v + "'");
      o.seed = static_cast<uint64_t>(*n);
    } else if (!a.empty() && a[0] == '-') {
      usage_error("unknown option '" + a + "'");
    } else if (o.model.empty()) {
      o.model = a;
    } else {
      usage_error("more than one model given ('" + o.model + "' and '" + a + "')");
    }
  }
  if (o.help) return o;
  if (o.model.empty()) usage_error("no model given");
  std::set<std::string> seen;
  for (const auto& in : o.inputs)
    if (!seen.insert(in.name).second) usage_error("input '" + in.name + "' given twice");
  return o;
}

#ifdef SMELT_ONNX

using onnx::ElemType;
using onnx::TypeInfo;
using onnx::Value;

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// The lower-case words of a name, split at anything but letters and digits ("input_ids" ->
/// input, ids), so that "width" does not read as an id nor "runtime" as a time.
std::set<std::string> words_of(const std::string& name) {
  std::set<std::string> words;
  std::string w;
  for (char c : lower(name) + " ") {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      w += c;
    } else if (!w.empty()) {
      words.insert(w);
      w.clear();
    }
  }
  return words;
}

bool has_word(const std::string& name, std::initializer_list<const char*> candidates) {
  auto words = words_of(name);
  for (const char* c : candidates)
    if (words.count(c)) return true;
  return false;
}

// Default sizes for symbolic dims the user did not set with --dim: batch-like symbols are 1 and
// sequence-like symbols are 32; any other symbol must be given.
constexpr int64_t kDefaultBatch = 1;
constexpr int64_t kDefaultSequence = 32;

std::optional<int64_t> default_dim(const std::string& symbol) {
  std::string s = lower(symbol);
  if (s == "n" || s == "b" || s == "bs" || has_word(s, {"batch", "batches", "batchsize", "bs"})) return kDefaultBatch;
  if (s == "s" || s == "t" || s == "l" ||
      has_word(s, {"seq", "seqlen", "sequence", "len", "length", "time", "timesteps", "steps", "token", "tokens"}))
    return kDefaultSequence;
  return std::nullopt;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

/// The dtype and shape of a .npy array, the way messages show them.
std::string array_text(const Array& a) { return std::string(dtype_name(a.dtype())) + shape_text(a.shape()); }

/// One input as it will be fed, with the line the summary prints.
struct BoundInput {
  std::string name;
  Value value;
  std::string source;  // "file x.npy", "random uniform [-1, 1)", ...
  std::string notes;   // the defaults used for symbolic dims
};

/// Binds symbolic dims to sizes: --dim first, then sizes read from input files, then defaults.
class DimTable {
 public:
  explicit DimTable(const std::map<std::string, int64_t>& given) : given_(given) {}

  /// Records that `symbol` is `size` in input `input` (from a file); conflicting sizes are errors.
  void bind_from_file(const std::string& symbol, int64_t size, const std::string& input) {
    if (auto it = given_.find(symbol); it != given_.end() && it->second != size)
      throw InvalidArgument("--dim " + symbol + "=" + std::to_string(it->second) + " but input '" + input +
                            "' has " + symbol + " = " + std::to_string(size));
    auto [it, inserted] = from_files_.emplace(symbol, std::make_pair(size, input));
    if (!inserted && it->second.first != size)
      throw InvalidArgument("dim '" + symbol + "' is " + std::to_string(it->second.first) + " in input '" +
                            it->second.second + "' but " + std::to_string(size) + " in input '" + input + "'");
  }

  /// The size of `symbol` for input `input`; `note` gets "symbol=N (default)" when a default is used.
  int64_t size(const std::string& symbol, const std::string& input, size_t axis, std::string& note) {
    if (auto it = given_.find(symbol); it != given_.end()) return it->second;
    if (auto it = from_files_.find(symbol); it != from_files_.end()) return it->second.first;
    if (auto d = default_dim(symbol)) {
      note += (note.empty() ? "" : ", ") + symbol + "=" + std::to_string(*d) + " (default)";
      used_defaults_.insert(symbol);
      return *d;
    }
    throw InvalidArgument("input '" + input + "' dim " + std::to_string(axis) + " is the symbol '" + symbol +
                          "', which has no size: pass --dim " + symbol + "=N");
  }

  /// --dim symbols that no input declares (most likely a typo).
  std::vector<std::string> unused(const std::set<std::string>& declared) const {
    std::vector<std::string> out;
    for (const auto& [symbol, size] : given_)
      if (!declared.count(symbol)) out.push_back(symbol);
    return out;
  }

 private:
  std::map<std::string, int64_t> given_;
  std::map<std::string, std::pair<int64_t, std::string>> from_files_;
  std::set<std::string> used_defaults_;
};

/// Reads NAME=FILE.npy and checks it against the declaration: element type, rank, fixed dims.
Value input_from_file(const onnx::ValueInfo& info, const std::string& file, DimTable& dims) {
  if (!fs::exists(file)) throw InvalidArgument("input '" + info.name + "': cannot open '" + file + "'");
  Array a;
  try {
    a = load(file);
  } catch (const Error& e) {
    throw InvalidArgument("input '" + info.name + "': cannot read '" + file + "': " + e.what());
  }
  const TypeInfo& t = info.type;
  auto expected = [&] {
    return "input '" + info.name + "' from '" + file + "': expected " + t.to_string() + ", got " + array_text(a);
  };
  if (t.kind != TypeInfo::Kind::Tensor && t.kind != TypeInfo::Kind::Unknown)
    throw InvalidArgument(expected() + " (only tensor inputs can be read from .npy files)");
  ElemType elem = onnx::elem_type_of(a.dtype());
  if (t.kind == TypeInfo::Kind::Tensor && t.elem_type != ElemType::Undefined && t.elem_type != elem) {
    // A storage element type (float8, int4, ...) arrives as its storage dtype's bits.
    auto storage = onnx::storage_dtype(t.elem_type);
    if (!(onnx::is_storage_type(t.elem_type) && storage && *storage == a.dtype()))
      throw InvalidArgument(expected() + " (the element type differs)");
    elem = t.elem_type;
  }
  if (t.shape) {
    if (t.shape->size() != a.shape().size()) throw InvalidArgument(expected() + " (the rank differs)");
    for (size_t i = 0; i < t.shape->size(); ++i) {
      const onnx::Dim& d = (*t.shape)[i];
      if (d.value >= 0 && d.value != a.shape()[i])
        throw InvalidArgument(expected() + " (dim " + std::to_string(i) + " differs)");
      if (d.value < 0 && !d.param.empty()) dims.bind_from_file(d.param, a.shape()[i], info.name);
    }
  }
  return elem == onnx::elem_type_of(a.dtype()) ? Value::tensor(a) : Value::tensor(a, elem);
}

/// Random values of `dtype` and `shape` for input `name`; `source` says what was drawn.
Array random_input(const std::string& name, Dtype dtype, const Shape& shape, const Array& key, std::string& source) {
  switch (kind_of(dtype)) {
    case DtypeKind::Float:
      source = "random uniform [-1, 1)";
      return random::uniform(key, shape, -1.0, 1.0, dtype);
    case DtypeKind::Bool:
      source = "random bool (p = 0.5)";
      return random::bernoulli(key, Array(0.5f), shape);
    case DtypeKind::SignedInt:
    case DtypeKind::UnsignedInt:
      // Masks are all ones (a random mask can hide a whole row); ids and indices index small
      // tables; other integers stay small and non-negative so that they are valid for any type.
      if (has_word(name, {"mask", "masks"})) {
        source = "ones (a mask)";
        return ones(shape, dtype);
      }
      if (has_word(name, {"id", "ids", "index", "indices", "idx", "token", "tokens", "position", "positions"})) {
        source = "random integers [0, 100) (ids/indices)";
        return random::randint(key, 0, 100, shape, dtype);
      }
      source = "random integers [0, 10)";
      return random::randint(key, 0, 10, shape, dtype);
  }
  return Array();
}

/// A random input shaped from --input NAME=random:D0x..., or from the declaration and --dim.
Value random_value(const onnx::ValueInfo& info, const std::optional<std::vector<int64_t>>& explicit_shape,
                   DimTable& dims, const Array& key, BoundInput& bound) {
  const TypeInfo& t = info.type;
  if (t.kind != TypeInfo::Kind::Tensor)
    throw UnsupportedError("input '" + info.name + "' is " + t.to_string() +
                           ": random values are made for tensors only; give it as a .npy file");
  if (t.elem_type == ElemType::String)
    throw UnsupportedError("input '" + info.name + "' is a string tensor: random strings are not made");
  auto dtype = onnx::storage_dtype(t.elem_type);
  if (!dtype || onnx::is_storage_type(t.elem_type))
    throw UnsupportedError("input '" + info.name + "' has element type " + onnx::elem_type_name(t.elem_type) +
                           ": random values are not made for it; give it as a .npy file");
  Shape shape;
  if (explicit_shape) {
    shape = *explicit_shape;
    if (t.shape && t.shape->size() != shape.size())
      throw InvalidArgument("input '" + info.name + "': expected " + t.to_string() + ", got random:" +
                            shape_text(shape) + " (the rank differs)");
  } else {
    if (!t.shape)
      throw InvalidArgument("input '" + info.name + "' (" + t.to_string() +
                            ") has no declared rank: give its shape with --input " + info.name + "=random:D0xD1...");
    for (size_t i = 0; i < t.shape->size(); ++i) {
      const onnx::Dim& d = (*t.shape)[i];
      if (d.value >= 0) shape.push_back(d.value);
      else if (!d.param.empty()) shape.push_back(dims.size(d.param, info.name, i, bound.notes));
      else
        throw InvalidArgument("input '" + info.name + "' (" + t.to_string() + ") dim " + std::to_string(i) +
                              " has no size or symbol: give the shape with --input " + info.name + "=random:D0xD1...");
    }
  }
  Array a = random_input(info.name, *dtype, shape, key, bound.source);
  return Value::tensor(a);
}

/// The leading values of an array, compactly: "[0.1234, -1.5, 3, ...]".
std::string leading_values(const Array& a, size_t count) {
  if (a.size() == 0) return "[]";
  size_t n = std::min<size_t>(count, static_cast<size_t>(a.size()));
  Array head = slice(reshape(a, {-1}), {0}, {static_cast<int64_t>(n)});
  std::string s = "[";
  char buf[64];
  switch (kind_of(a.dtype())) {
    case DtypeKind::Float:
      for (double v : copy(head).to_vector<double>()) {
        std::snprintf(buf, sizeof buf, "%.4g", v);
        s += (s.size() > 1 ? ", " : "") + std::string(buf);
      }
      break;
    case DtypeKind::SignedInt:
      for (int64_t v : copy(head).to_vector<int64_t>()) s += (s.size() > 1 ? ", " : "") + std::to_string(v);
      break;
    case DtypeKind::UnsignedInt:
      for (uint64_t v : copy(head).to_vector<uint64_t>()) s += (s.size() > 1 ? ", " : "") + std::to_string(v);
      break;
    case DtypeKind::Bool:
      for (bool v : copy(head).to_vector<bool>()) s += (s.size() > 1 ? ", " : "") + std::string(v ? "true" : "false");
      break;
  }
  if (n < static_cast<size_t>(a.size())) s += ", ...";
  return s + "]";
}

std::string describe_output(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Tensor: {
      std::string s = std::string(dtype_name(v.array().dtype())) + shape_text(v.shape());
      if (onnx::is_storage_type(v.elem_type())) s = onnx::elem_type_name(v.elem_type()) + shape_text(v.shape());
      return s;
    }
    case Value::Kind::Strings: return "string" + shape_text(v.shape());
    case Value::Kind::None:
    case Value::Kind::Sequence:
    case Value::Kind::Map:
    case Value::Kind::Optional: return v.describe();
  }
  return v.describe();
}

std::string output_values(const Value& v) {
  constexpr size_t kShown = 6;
  switch (v.kind()) {
    case Value::Kind::Tensor: return leading_values(v.array(), kShown);
    case Value::Kind::Strings: {
      const auto& data = v.string_tensor().data;
      std::string s = "[";
      for (size_t i = 0; i < std::min(kShown, data.size()); ++i) s += (i ? ", \"" : "\"") + data[i] + "\"";
      return s + (data.size() > kShown ? ", ...]" : "]");
    }
    case Value::Kind::None:
    case Value::Kind::Sequence:
    case Value::Kind::Map:
    case Value::Kind::Optional: return "";
  }
  return "";
}

/// A file name from an output name: characters other than letters, digits, '.', '-' and '_'
/// become '_'; names that are empty or only dots become output_K.
std::string sanitize(const std::string& name, size_t index) {
  std::string s = name;
  for (auto& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  if (s.find_first_not_of('.') == std::string::npos) s = "output_" + std::to_string(index);
  return s;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += std::string("\\") + c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else out += c;
  }
  return out;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms < 10 ? "%.3f ms" : "%.2f ms", ms);
  return buf;
}

#endif  // SMELT_ONNX

}  // namespace

int run_model(const std::vector<std::string>& args) {
  RunOptions o = parse_args(args);
  if (o.help) {
    std::printf("%s\n%s", kUsage, kHelp);
    return 0;
  }
#ifndef SMELT_ONNX
  throw UnsupportedError("this smelt was built without ONNX support (configure with -DSMELT_ONNX=ON)");
#else
  if (o.threads > 0) set_cpu_threads(o.threads);
  auto t_load = std::chrono::steady_clock::now();
  onnx::Model model = onnx::load(o.model);
  double load_ms = ms_since(t_load);
  const onnx::Graph& g = *model.graph;

  std::set<std::string> initializer_names;
  for (const auto& [name, v] : g.initializers) initializer_names.insert(name);
  std::set<std::string> declared_symbols;
  for (const auto& in : g.inputs)
    if (in.type.shape)
      for (const auto& d : *in.type.shape)
        if (d.value < 0 && !d.param.empty()) declared_symbols.insert(d.param);

  // Every --input names a graph input.
  std::map<std::string, const InputSpec*> specs;
  for (const auto& spec : o.inputs) {
    bool known = false;
    for (const auto& in : g.inputs) known = known || in.name == spec.name;
    if (!known) {
      std::string names;
      for (const auto& in : g.inputs)
        if (!initializer_names.count(in.name)) names += (names.empty() ? "" : ", ") + in.name;
      throw InvalidArgument("unknown input '" + spec.name + "' (the model's inputs are: " + names + ")");
    }
    specs[spec.name] = &spec;
  }
  DimTable dims(o.dims);
  for (const auto& sym : dims.unused(declared_symbols))
    throw InvalidArgument("--dim " + sym + ": no input of the model has a dim named '" + sym + "'");

  // Files first, so that their sizes bind the symbols that random inputs then share.
  std::vector<BoundInput> bound(g.inputs.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const auto& in = g.inputs[i];
    bound[i].name = in.name;
    auto it = specs.find(in.name);
    if (it == specs.end() || it->second->file.empty()) continue;
    bound[i].value = input_from_file(in, it->second->file, dims);
    bound[i].source = "file " + it->second->file;
  }
  Array keys = random::split(random::key(o.seed), static_cast<int>(std::max<size_t>(g.inputs.size(), 1)));
  std::map<std::string, Value> feed;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const auto& in = g.inputs[i];
    auto it = specs.find(in.name);
    if (it != specs.end() && !it->second->file.empty()) {
      feed[in.name] = bound[i].value;
      continue;
    }
    // Inputs that initializers back keep their weights; omitted optional inputs stay empty.
    if (it == specs.end() && initializer_names.count(in.name)) continue;
    if (it == specs.end() && in.type.kind == TypeInfo::Kind::Optional) {
      bound[i].source = "omitted (optional)";
      continue;
    }
    Array key = reshape(slice(keys, {static_cast<int64_t>(i), 0}, {static_cast<int64_t>(i) + 1, 2}), {2});
    std::optional<std::vector<int64_t>> shape = it != specs.end() ? it->second->shape : std::nullopt;
    bound[i].value = random_value(in, shape, dims, key, bound[i]);
    feed[in.name] = bound[i].value;
  }
  // The inputs exist before the clock starts: random draws are not part of the run.
  std::vector<Array> input_arrays;
  for (const auto& [name, v] : feed)
    if (v.is_tensor()) input_arrays.push_back(v.array());
  eval(input_arrays);

  std::printf("model    %s (ir %lld, %s, %zu nodes, loaded in %s)\n", o.model.c_str(),
              static_cast<long long>(model.ir_version),
              ("opset " + std::to_string(model.opset(""))).c_str(), g.nodes.size(), ms_text(load_ms).c_str());
  std::printf("threads  %d\n", cpu_threads());
  std::printf("inputs   (seed %llu)\n", static_cast<unsigned long long>(o.seed));
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const BoundInput& b = bound[i];
    if (b.source.empty()) continue;  // backed by an initializer
    std::string type = b.value.is_none() ? g.inputs[i].type.to_string() : describe_output(b.value);
    std::printf("  %-20s %-22s %s%s\n", b.name.c_str(), type.c_str(), b.source.c_str(),
                b.notes.empty() ? "" : ("; " + b.notes).c_str());
  }

  auto t_first = std::chrono::steady_clock::now();
  std::map<std::string, Value> outputs = onnx::run_named(model, feed);
  double first_ms = ms_since(t_first);
  std::vector<double> times;
  for (int r = 0; r < o.repeat; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    auto again = onnx::run_named(model, feed);
    times.push_back(ms_since(t0));
  }

  std::printf("outputs\n");
  for (const auto& out : g.outputs) {
    const Value& v = outputs.at(out.name);
    std::printf("  %-20s %-22s %s\n", out.name.c_str(), describe_output(v).c_str(), output_values(v).c_str());
  }
  std::printf("time     first run %s", ms_text(first_ms).c_str());
  double median = 0, min = 0;
  if (!times.empty()) {
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    size_t n = sorted.size();
    median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    min = sorted[0];
    std::printf("; %zu more runs: median %s, min %s", n, ms_text(median).c_str(), ms_text(min).c_str());
  }
  std::printf("\n");

  if (!o.output_dir.empty()) {
    std::error_code ec;
    fs::create_directories(o.output_dir, ec);
    if (ec || !fs::is_directory(o.output_dir))
      throw InvalidArgument("cannot create the output folder '" + o.output_dir + "'");
    std::set<std::string> used;
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      const std::string& name = g.outputs[k].name;
      const Value& v = outputs.at(name);
      if (!v.is_tensor()) {
        std::printf("skipped  %s: %s is not a tensor\n", name.c_str(), v.describe().c_str());
        continue;
      }
      std::string file = sanitize(name, k);
      while (!used.insert(file).second) file += "_" + std::to_string(k);
      fs::path path = fs::path(o.output_dir) / (file + ".npy");
      save(path.string(), v.array());
      std::printf("wrote    %s%s\n", path.string().c_str(),
                  file == name ? "" : (" (output '" + name + "', name sanitized for the file system)").c_str());
    }
  }

  if (!o.json.empty()) {
    std::ofstream f(o.json);
    if (!f) throw InvalidArgument("cannot write '" + o.json + "'");
    f << "{\n  \"model\": \"" << json_escape(o.model) << "\",\n  \"threads\": " << cpu_threads()
      << ",\n  \"seed\": " << o.seed << ",\n  \"load_ms\": " << load_ms << ",\n  \"inputs\": {";
    bool first = true;
    for (const auto& b : bound) {
      if (b.source.empty() || b.value.is_none()) continue;
      f << (first ? "\n" : ",\n") << "    \"" << json_escape(b.name) << "\": \"" << json_escape(describe_output(b.value))
        << "\"";
      first = false;
    }
    f << "\n  },\n  \"outputs\": {";
    first = true;
    for (const auto& out : g.outputs) {
      f << (first ? "\n" : ",\n") << "    \"" << json_escape(out.name) << "\": \""
        << json_escape(describe_output(outputs.at(out.name))) << "\"";
      first = false;
    }
    f << "\n  },\n  \"first_ms\": " << first_ms << ",\n  \"runs_ms\": [";
    for (size_t i = 0; i < times.size(); ++i) f << (i ? ", " : "") << times[i];
    f << "],\n  \"median_ms\": " << median << ",\n  \"min_ms\": " << min << "\n}\n";
    if (!f) throw InvalidArgument("cannot write '" + o.json + "'");
  }
  return 0;
#endif
}

}  // namespace smelt::cli
