// `smelt run MODEL`: runs an ONNX model eagerly (and with --compile, compiled) on given or random inputs, times runs.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "smelt/errors.h"
#include "tools/smelt/args.h"
#include "tools/smelt/commands.h"
#include "tools/smelt/model_file.h"
#include "tools/smelt/model_inputs.h"
#include "tools/smelt/progress.h"
#include "tools/smelt/value_diff.h"
#ifdef SMELT_ONNX
#include "smelt/io.h"
#include "smelt/memory.h"
#include "smelt/onnx.h"
#include "smelt/random.h"
#include "smelt/compile.h"
#include "smelt/smelt.h"
#include "smelt/telemetry.h"
#endif

namespace fs = std::filesystem;

namespace smelt::cli {

namespace {

constexpr const char* kUsage =
    "usage: smelt run MODEL [--input NAME=FILE.npy | NAME=random[:D0xD1...]]... [--dim SYMBOL=N]...\n"
    "                 [--output-dir|-O DIR] [--repeat N] [--threads N] [--seed S] [--json FILE]\n"
    "                 [--no-fuse] [--timeout SECONDS] [--device cpu|cuda[:N]]\n"
    "                 [--compile [--static NAME=FILE.npy | NAME=V0,V1,...]... [--eager-below N]]";

constexpr const char* kHelp =
    "\n"
    "Runs an ONNX model eagerly, prints each output's dtype, shape and leading values and the time of the\n"
    "first run; with --repeat N also the median and min time of N more runs.\n"
    "\n"
    "  -i, --input NAME=FILE.npy feed a .npy file (its dtype and rank must match the declared input)\n"
    "  --input NAME=random:2x16  random values of that shape (NAME=random: the declared shape; 'random:' alone: 0-d)\n"
    "  --dim SYMBOL=N            size of a symbolic dim (defaults: batch-like symbols such as batch, N, B = 1;\n"
    "                            sequence-like symbols such as seq, seq_len, length, T = 32; others must be given)\n"
    "  -O, --output-dir DIR      write each tensor output to DIR/NAME.npy (characters outside [A-Za-z0-9._-] become _;\n"
    "                            DIR is created when missing). -o is not an option of run: it names one output\n"
    "                            file in the commands that write one (smelt view -o FILE.html)\n"
    "  --repeat N                time N more runs after the first\n"
    "  --threads N               CPU threads (default: SMELT_NUM_THREADS or all cores)\n"
    "  --seed S                  seed of the random inputs (default 0)\n"
    "  --json FILE               write the shapes and timings as JSON\n"
    "  --no-fuse                 load without the load-time fusions (GELU, LayerNorm, Conv+BatchNormalization, attention)\n"
    "  --timeout SECONDS         stop any one run (eager or compiled) that takes longer than this (a decimal number);\n"
    "                            the error names the node it was running and the exit status is 1\n"
    "  --device D                where the model runs: cpu, cuda (GPU 0) or cuda:N (default: the first GPU when\n"
    "                            there is one, else the CPU; SMELT_DEFAULT_DEVICE changes it). Inputs are made on the\n"
    "                            host and moved there, initializers are uploaded once; times include waiting for the GPU\n"
    "  -h, --help                this text (also: smelt help run)\n"
    "\n"
    "  --compile                 also run the model compiled (smelt::onnx::compile): print its segments (where\n"
    "                            graph breaks split it, which run compiled, why each ends), check once that the\n"
    "                            compiled outputs equal the eager outputs bit for bit (exit status 1 if not);\n"
    "                            with --repeat N also time N compiled and N eager calls and print the compile\n"
    "                            cost and the call count after which compiling pays off\n"
    "  --static NAME=FILE.npy    with --compile: give input NAME by value at compile time; it is a constant of\n"
    "  --static NAME=V0,V1,...   every trace (an If on it traces only its branch, a Reshape to it folds). Values\n"
    "                            are in the input's declared element type (true/false or 1/0 for bool), row-major,\n"
    "                            as many as its declared shape holds (one symbolic dim without --dim is inferred)\n"
    "  --eager-below N           with --compile: a segment of fewer than N nodes next to a break runs eagerly\n"
    "                            (default 20; 0 compiles every segment)\n"
    "\n"
    "Inputs not given are random: floats uniform in [-1, 1); bool with p = 0.5; integers that are the indices of\n"
    "a Gather or GatherElements (directly or through Cast, Unsqueeze, Squeeze, Reshape, Flatten, Identity, Expand,\n"
    "Transpose) uniform in [0, S) where S is the smallest size of a gathered axis (when it is known: an\n"
    "initializer, a Constant or a declared shape), so that e.g. token_type_ids into a 2-row embedding are 0 or 1;\n"
    "other integers whose name has the word mask are ones, the word id(s)/index/indices/idx/token(s)/position(s)\n"
    "uniform in [0, 100), others in [0, 10). Names split into words at anything but letters and digits (input_ids: input, ids); symbols too\n"
    "(batch_size: batch, size). Inputs backed by an initializer keep its value unless given.\n";

[[noreturn]] void usage_error(const std::string& message) { throw UsageError(message + "\n" + kUsage); }

struct RunOptions {
  std::string model;
  std::vector<InputSpec> inputs;
  bool compile = false;
  std::vector<StaticSpec> statics;
  std::optional<int> eager_below;
  std::map<std::string, int64_t> dims;
  std::string output_dir;
  std::string json;
  int repeat = 0;
  int threads = 0;
  uint64_t seed = 0;
  bool help = false;
  bool no_fuse = false;
  double timeout_s = 0;  // 0: no limit
  std::string device;    // --device; empty: the default device
};

InputSpec parse_input(const std::string& text) {
  try {
    return parse_input_spec(text);
  } catch (const UsageError& e) {
    usage_error(e.what());
  }
}

StaticSpec parse_static(const std::string& text) {
  try {
    return parse_static_spec(text);
  } catch (const UsageError& e) {
    usage_error(e.what());
  }
}

RunOptions parse_args(const std::vector<std::string>& args) {
  static const std::vector<OptionSpec> kOptions = {
      {"--input", "-i", true},      {"--dim", nullptr, true},          {"--output-dir", "-O", true},
      {"--output", "-o", true},     {"--json", nullptr, true},         {"--repeat", nullptr, true},
      {"--threads", nullptr, true}, {"--compile", nullptr, false},     {"--no-fuse", nullptr, false},
      {"--timeout", nullptr, true}, {"--device", nullptr, true},       {"--static", nullptr, true},
      {"--eager-below", nullptr, true}, {"--seed", nullptr, true},
  };
  RunOptions o;
  ParsedArgs parsed = parse_command_line(args, kOptions, kUsage);
  o.help = parsed.help;
  if (o.help) return o;
  for (const auto& [a, v] : parsed.options) {
    auto positive = [&](const std::string& v) -> int64_t {
      auto n = parse_count(v);
      if (!n || *n < 1 || *n > 1000000) usage_error(a + " needs a positive integer, got '" + v + "'");
      return *n;
    };
    if (a == "--input") {
      o.inputs.push_back(parse_input(v));
    } else if (a == "--dim") {
      std::pair<std::string, int64_t> dim;
      try {
        dim = parse_dim_spec(v);
      } catch (const UsageError& e) {
        usage_error(e.what());
      }
      o.dims[dim.first] = dim.second;
    } else if (a == "--output-dir") {
      o.output_dir = v;
    } else if (a == "--output") {
      // -o names an output file in every command that has it (smelt view); run writes several
      // files, so it takes a folder under a name that says so, and -o is refused, not guessed.
      usage_error("-o/--output is not an option of smelt run (it names one output file, as in smelt view): "
                  "write the outputs as .npy files into a folder with --output-dir/-O DIR, or the report as "
                  "JSON with --json FILE");
    } else if (a == "--json") {
      o.json = v;
    } else if (a == "--repeat") {
      o.repeat = static_cast<int>(positive(v));
    } else if (a == "--threads") {
      o.threads = static_cast<int>(positive(v));
    } else if (a == "--compile") {
      o.compile = true;
    } else if (a == "--no-fuse") {
      o.no_fuse = true;
    } else if (a == "--timeout") {
      char* end = nullptr;
      double t = std::strtod(v.c_str(), &end);
      // At most a year: the value becomes milliseconds in an int64 and must not overflow.
      if (v.empty() || *end != '\0' || !(t > 0) || t > 365.0 * 24 * 3600)
        usage_error("--timeout needs a positive number of seconds, got '" + v + "'");
      o.timeout_s = t;
    } else if (a == "--device") {
      o.device = v;
      try {
        parse_device(o.device, "--device", false);
      } catch (const InvalidArgument& e) {
        usage_error(e.what());
      }
    } else if (a == "--static") {
      o.statics.push_back(parse_static(v));
    } else if (a == "--eager-below") {
      auto n = parse_count(v);
      if (!n || *n > 1000000) usage_error("--eager-below needs a non-negative integer, got '" + v + "'");
      o.eager_below = static_cast<int>(*n);
    } else if (a == "--seed") {
      auto n = parse_count(v);
      if (!n) usage_error("--seed needs a non-negative integer, got '" + v + "'");
      o.seed = static_cast<uint64_t>(*n);
    }
  }
  for (const auto& p : parsed.positionals) {
    if (o.model.empty()) o.model = p;
    else usage_error("more than one model given ('" + o.model + "' and '" + p + "')");
  }
  if (o.help) return o;
  if (o.model.empty()) usage_error("no model given");
  if (!o.compile && !o.statics.empty())
    usage_error("--static needs --compile (static inputs are constants of the compiled model; to run eagerly on "
                "given values use --input NAME=FILE.npy)");
  if (!o.compile && o.eager_below) usage_error("--eager-below needs --compile");
  std::set<std::string> seen;
  for (const auto& in : o.inputs)
    if (!seen.insert(in.name).second) usage_error("input '" + in.name + "' given twice");
  std::set<std::string> seen_static;
  for (const auto& st : o.statics) {
    if (seen.count(st.name)) usage_error("input '" + st.name + "' given with both --input and --static");
    if (!seen_static.insert(st.name).second) usage_error("input '" + st.name + "' given twice with --static");
  }
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

  /// The size of `symbol` when --dim or an input file gives it.
  std::optional<int64_t> known(const std::string& symbol) const {
    if (auto it = given_.find(symbol); it != given_.end()) return it->second;
    if (auto it = from_files_.find(symbol); it != from_files_.end()) return it->second.first;
    return std::nullopt;
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

/// The range an integer input must stay in because it indexes a table: the smallest size of a
/// gathered axis among the Gathers its values reach.
struct IndexBound {
  int64_t size = 0;
  std::string node;  // the Gather that sets it, as messages name it
};

/// For each graph input, the IndexBound of the Gathers (and GatherElements) whose indices it feeds
/// through value-preserving ops (Cast, Unsqueeze, Squeeze, Reshape, Flatten, Identity, Expand,
/// Transpose), when the gathered axis has a known size (an initializer, a Constant or a declared
/// shape): BERT's token_type_ids into a 2-row embedding are drawn from [0, 2).
std::map<std::string, IndexBound> index_bounds(const onnx::Graph& g) {
  std::map<std::string, std::vector<int64_t>> shapes;
  auto declared = [&](const onnx::ValueInfo& v) {
    if (v.type.kind != TypeInfo::Kind::Tensor || !v.type.shape) return;
    std::vector<int64_t> dims;
    for (const auto& d : *v.type.shape) dims.push_back(d.value);
    shapes[v.name] = dims;
  };
  for (const auto& v : g.inputs) declared(v);
  for (const auto& v : g.value_info) declared(v);
  for (const auto& [name, v] : g.initializers)
    if (v.is_tensor()) shapes[name] = v.shape();
  std::map<std::string, std::vector<std::pair<const onnx::Node*, size_t>>> consumers;
  for (const auto& n : g.nodes) {
    if (n.op_type == "Constant" && !n.outputs.empty())
      if (const onnx::Attribute* a = n.attribute("value"); a && a->t.is_tensor()) shapes[n.outputs[0]] = a->t.shape();
    for (size_t k = 0; k < n.inputs.size(); ++k)
      if (!n.inputs[k].empty()) consumers[n.inputs[k]].push_back({&n, k});
  }
  static const std::set<std::string> kPassThrough = {"Cast",     "Unsqueeze", "Squeeze",  "Reshape",
                                                     "Flatten", "Identity",  "Expand", "Transpose"};
  std::map<std::string, IndexBound> bounds;
  for (const auto& in : g.inputs) {
    std::vector<std::string> work{in.name};
    std::set<std::string> seen{in.name};
    while (!work.empty()) {
      std::string value = work.back();
      work.pop_back();
      for (const auto& [node, position] : consumers[value]) {
        const bool default_domain = node->domain.empty() || node->domain == "ai.onnx";
        if (!default_domain) continue;
        if (kPassThrough.count(node->op_type) && position == 0) {
          if (!node->outputs.empty() && !node->outputs[0].empty() && seen.insert(node->outputs[0]).second)
            work.push_back(node->outputs[0]);
          continue;
        }
        if ((node->op_type != "Gather" && node->op_type != "GatherElements") || position != 1) continue;
        auto data = shapes.find(node->inputs[0]);
        if (data == shapes.end() || data->second.empty()) continue;
        const onnx::Attribute* axis_attr = node->attribute("axis");
        int64_t rank = static_cast<int64_t>(data->second.size());
        int64_t axis = axis_attr ? axis_attr->i : 0;
        if (axis < 0) axis += rank;
        if (axis < 0 || axis >= rank) continue;
        int64_t size = data->second[static_cast<size_t>(axis)];
        if (size <= 0) continue;
        IndexBound& b = bounds[in.name];
        if (b.size == 0 || size < b.size)
          b = {size, node->label() + " dim " + std::to_string(axis) + " of '" + node->inputs[0] + "'"};
      }
    }
  }
  return bounds;
}

/// Random values of `dtype` and `shape` for input `name`; `source` says what was drawn. `bound`:
/// the input indexes a table of that many rows (index_bounds).
Array random_input(const std::string& name, Dtype dtype, const Shape& shape, const Array& key, std::string& source,
                   const IndexBound* bound) {
  switch (kind_of(dtype)) {
    case DtypeKind::Float:
      source = "random uniform [-1, 1)";
      return random::uniform(key, shape, -1.0, 1.0, dtype);
    case DtypeKind::Bool:
      source = "random bool (p = 0.5)";
      return random::bernoulli(key, Array(0.5f), shape);
    case DtypeKind::SignedInt:
    case DtypeKind::UnsignedInt:
      // Indices of a Gather stay inside the gathered axis, whatever the name says.
      if (bound) {
        source = "random integers [0, " + std::to_string(bound->size) + ") (indices of " + bound->node + ")";
        return random::randint(key, 0, bound->size, shape, dtype);
      }
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
                   DimTable& dims, const Array& key, BoundInput& bound, const IndexBound* index_bound) {
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
  Array a = random_input(info.name, *dtype, shape, key, bound.source, index_bound);
  return Value::tensor(a);
}

/// The shape of `count` values given with --static for `info`: the declared shape, its symbols
/// sized by --dim or input files; one symbolic or unknown dim left open is inferred from `count`
/// (and binds its symbol). `note` gets "length=8 (from the values)" then.
Shape static_shape(const onnx::ValueInfo& info, size_t count, DimTable& dims, std::string& note) {
  const TypeInfo& t = info.type;
  const std::string what = "--static " + info.name + ": input '" + info.name + "' is " + t.to_string();
  const auto n = static_cast<int64_t>(count);
  if (!t.shape) return {n};  // no declared rank: a 1-d list
  Shape shape;
  std::vector<size_t> open;
  int64_t known_product = 1;
  for (size_t i = 0; i < t.shape->size(); ++i) {
    const onnx::Dim& d = (*t.shape)[i];
    std::optional<int64_t> size = d.value >= 0 ? std::optional<int64_t>(d.value)
                                               : (d.param.empty() ? std::nullopt : dims.known(d.param));
    if (size) known_product *= *size;
    else open.push_back(i);
    shape.push_back(size.value_or(-1));
  }
  if (open.empty()) {
    bool symbolic = std::any_of(t.shape->begin(), t.shape->end(), [](const onnx::Dim& d) { return d.value < 0; });
    if (known_product != n)
      throw InvalidArgument(what + (symbolic ? " (" + shape_text(shape) + " here)" : "") + ", which holds " +
                            std::to_string(known_product) +
                            (known_product == 1 ? " value" : " values") + "; got " + std::to_string(n));
    return shape;
  }
  if (open.size() > 1) {
    std::string names;
    for (size_t i : open) {
      const onnx::Dim& d = (*t.shape)[i];
      names += (names.empty() ? "" : ", ") + (d.param.empty() ? "dim " + std::to_string(i) : d.param);
    }
    throw InvalidArgument(what + ": " + std::to_string(open.size()) + " dims have no size (" + names +
                          "): pass --dim SYMBOL=N for all but one, or give the values as a .npy file");
  }
  const onnx::Dim& d = (*t.shape)[open[0]];
  if (known_product == 0 || n % known_product != 0)
    throw InvalidArgument(what + ": " + std::to_string(n) + (n == 1 ? " value does" : " values do") +
                          " not fill it: the count must be a multiple of " + std::to_string(known_product) +
                          " (the size of its other dims)");
  int64_t size = n / known_product;
  shape[open[0]] = size;
  if (!d.param.empty()) {
    dims.bind_from_file(d.param, size, info.name);
    note = d.param + "=" + std::to_string(size) + " (from the values)";
  }
  return shape;
}

/// "V0,V1,..." split at commas, each trimmed of blanks.
std::vector<std::string> split_values(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t b = item.find_first_not_of(" \t");
    size_t e = item.find_last_not_of(" \t");
    items.push_back(b == std::string::npos ? "" : item.substr(b, e - b + 1));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

/// Parses a whole decimal integer with an optional sign into `x`: invalid_argument for text that
/// is not one, result_out_of_range for an integer T cannot hold (a negative one for unsigned T).
template <class T>
std::errc parse_integer(const std::string& s, T& x) {
  size_t start = !s.empty() && s[0] == '+' ? 1 : 0;
  bool negative = !s.empty() && s[0] == '-';
  size_t digits = start + (negative ? 1 : 0);
  if (digits >= s.size() || s.find_first_not_of("0123456789", digits) != std::string::npos)
    return std::errc::invalid_argument;
  if (negative && std::is_unsigned_v<T>) return std::errc::result_out_of_range;
  auto [end, ec] = std::from_chars(s.data() + start, s.data() + s.size(), x);
  (void)end;
  return ec;
}

/// Input `info` from --static NAME=V0,V1,...: values in its declared element type and shape.
Value static_from_values(const onnx::ValueInfo& info, const std::string& text, DimTable& dims, std::string& note) {
  const TypeInfo& t = info.type;
  const std::string what = "--static " + info.name;
  if (t.kind != TypeInfo::Kind::Tensor || t.elem_type == ElemType::Undefined)
    throw UnsupportedError(what + ": input '" + info.name + "' is " + t.to_string() +
                           ": values on the command line are read for tensors of a declared element type only");
  std::vector<std::string> items = split_values(text);
  Shape shape = static_shape(info, items.size(), dims, note);
  if (t.elem_type == ElemType::String) return Value::strings(onnx::StringTensor{shape, items});
  auto dtype = onnx::storage_dtype(t.elem_type);
  if (!dtype || onnx::is_storage_type(t.elem_type))
    throw UnsupportedError(what + ": input '" + info.name + "' has element type " + onnx::elem_type_name(t.elem_type) +
                           ": values on the command line are not read for it; give it as NAME=FILE.npy");
  const std::string type = dtype_name(*dtype);
  auto bad = [&](size_t i, const std::string& why) -> InvalidArgument {
    return InvalidArgument(what + ": '" + items[i] + "' (value " + std::to_string(i + 1) + " of " +
                           std::to_string(items.size()) + ") is not " +
                           (kind_of(*dtype) == DtypeKind::SignedInt ? "an " : "a ") + type + " value" + why);
  };
  const int bits = static_cast<int>(size_of(*dtype) * 8);
  switch (kind_of(*dtype)) {
    case DtypeKind::Bool: {
      std::vector<int64_t> v;
      for (size_t i = 0; i < items.size(); ++i) {
        std::string w = lower(items[i]);
        if (w == "true" || w == "1") v.push_back(1);
        else if (w == "false" || w == "0") v.push_back(0);
        else throw bad(i, " (true, false, 1 or 0)");
      }
      return Value::tensor(astype(Array(v, shape), Dtype::Bool));
    }
    case DtypeKind::SignedInt: {
      const int64_t hi = bits == 64 ? INT64_MAX : (int64_t{1} << (bits - 1)) - 1;
      const int64_t lo = -hi - 1;
      std::vector<int64_t> v;
      for (size_t i = 0; i < items.size(); ++i) {
        int64_t x = 0;
        auto ec = parse_integer(items[i], x);
        if (ec == std::errc::invalid_argument) throw bad(i, "");
        if (ec == std::errc::result_out_of_range || x < lo || x > hi)
          throw bad(i, " (" + type + " holds " + std::to_string(lo) + " to " + std::to_string(hi) + ")");
        v.push_back(x);
      }
      return Value::tensor(astype(Array(v, shape), *dtype));
    }
    case DtypeKind::UnsignedInt: {
      const uint64_t hi = bits == 64 ? UINT64_MAX : (uint64_t{1} << bits) - 1;
      std::vector<uint64_t> v;
      for (size_t i = 0; i < items.size(); ++i) {
        uint64_t x = 0;
        auto ec = parse_integer(items[i], x);
        if (ec == std::errc::invalid_argument) throw bad(i, "");
        if (ec == std::errc::result_out_of_range || x > hi)
          throw bad(i, " (" + type + " holds 0 to " + std::to_string(hi) + ")");
        v.push_back(x);
      }
      return Value::tensor(astype(Array(v, shape), *dtype));
    }
    case DtypeKind::Float: {
      std::vector<double> v;
      for (size_t i = 0; i < items.size(); ++i) {
        const std::string& s = items[i];
        char* end = nullptr;
        double x = s.empty() || std::isspace(static_cast<unsigned char>(s[0])) ? 0.0 : std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size()) throw bad(i, "");
        v.push_back(x);
      }
      Array a = astype(Array(v, shape), *dtype);
      // A finite value that rounds to infinity is out of the type's range, not a value of it.
      std::vector<double> back = a.to_vector<double>();
      for (size_t i = 0; i < v.size(); ++i)
        if (std::isfinite(v[i]) && !std::isfinite(back[i])) throw bad(i, " (out of its range)");
      return Value::tensor(a);
    }
  }
  return Value();
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

/// The median of `times` (not empty).
double median_of(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  size_t n = times.size();
  return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

/// What --compile measured.
struct CompileReport {
  onnx::Overlay overlay;         // the first call's path
  onnx::CompiledModelStats stats;  // after every call
  double first_ms = 0;           // the first compiled call, compiling included
  bool first_interpreter = false;  // the first call ran on the interpreter tier (kernels building)
  double kernels_wait_ms = 0;    // waited after the first call for the background kernel builds
  std::vector<double> times;     // the --repeat calls
  double trace_ms = 0;
  double build_ms = 0;
  uint64_t traces = 0;
  std::vector<std::string> mismatches;  // "output 'y': ..."
  // CUDA graphs (telemetry cuda.graph.*): captures, calls replayed kernel by kernel, and the
  // first reason a segment got no graph or a call ran without it.
  uint64_t graph_captures = 0;
  uint64_t graph_plain = 0;
  std::string graph_why;
};

/// Highest bytes held by live arrays on the run's device in each phase (memory_info().peak_bytes).
struct MemoryPeaks {
  size_t eager_first = 0;     // the first eager run (initializers uploaded then included)
  size_t compiled_first = 0;  // compile + the first compiled call
  size_t repeats = 0;         // the --repeat calls
};

const char* kind_name(onnx::SegmentKind k) {
  switch (k) {
    case onnx::SegmentKind::Compiled: return "compiled";
    case onnx::SegmentKind::EagerSmall: return "eager";
    case onnx::SegmentKind::Break: return "break";
  }
  return "?";
}

/// "positions 2-9  Add 'a' .. Mul 'b' (8 nodes)" or "position 1  NonZero 'nz'".
std::string segment_span(const onnx::OverlaySegment& s) {
  size_t nodes = s.stop - s.start;
  if (nodes == 1) return "position " + std::to_string(s.start) + "  " + s.start_node;
  return "positions " + std::to_string(s.start) + "-" + std::to_string(s.stop - 1) + "  " + s.start_node + " .. " +
         s.stop_node + " (" + std::to_string(nodes) + " nodes)";
}

/// A list for one line: the first `shown` items joined by ", ", then "... (N in all)".
std::string list_text(const std::vector<std::string>& items, size_t shown) {
  std::string s;
  for (size_t i = 0; i < items.size() && i < shown; ++i) s += (i ? ", " : "") + items[i];
  if (items.size() > shown) s += ", ... (" + std::to_string(items.size()) + " in all)";
  return s;
}

/// "Fused[Mul 'a', Add 'b']", past `shown` nodes "Fused[Mul 'a', ..., Erf 'e'] (9 nodes)".
std::string fused_text(const onnx::FusedGroup& g, size_t shown) {
  if (g.nodes.size() <= shown) return g.str();
  std::string s = "Fused[";
  for (size_t i = 0; i + 1 < shown; ++i) s += g.nodes[i] + ", ";
  return s + "..., " + g.nodes.back() + "] (" + std::to_string(g.nodes.size()) + " nodes)";
}

void print_segments(const CompileReport& c) {
  const auto& segs = c.overlay.segments;
  size_t count[3] = {0, 0, 0};
  for (const auto& s : segs) count[static_cast<int>(s.kind)]++;
  std::printf("segments %zu (%zu compiled, %zu eager, %zu break%s)\n", segs.size(), count[0], count[1], count[2],
              count[2] == 1 ? "" : "s");
  constexpr size_t kKernelsShown = 6;
  for (size_t k = 0; k < segs.size(); ++k) {
    const auto& s = segs[k];
    std::printf("  %-2zu %-9s %s\n", k, kind_name(s.kind), segment_span(s).c_str());
    // A break's reason starts with its node's label, which the line above shows.
    std::string reason = s.reason;
    if (s.kind == onnx::SegmentKind::Break && reason.rfind(s.start_node + ": ", 0) == 0)
      reason = reason.substr(s.start_node.size() + 2);
    if (!reason.empty()) std::printf("     reason   %s\n", reason.c_str());
    if (!s.host_values.empty()) std::printf("     host     %s\n", list_text(s.host_values, 8).c_str());
    for (size_t i = 0; i < s.fused.size() && i < kKernelsShown; ++i)
      std::printf("     fused    %s\n", fused_text(s.fused[i], 4).c_str());
    if (s.fused.size() > kKernelsShown)
      std::printf("     fused    ... (%zu kernels in all)\n", s.fused.size());
  }
  if (!c.overlay.host_folded.empty())
    std::printf("folded   %zu nodes known at trace time: %s\n", c.overlay.host_folded.size(),
                list_text(c.overlay.host_folded, 4).c_str());
}

void json_strings(std::ostream& f, const std::vector<std::string>& items) {
  f << "[";
  for (size_t i = 0; i < items.size(); ++i) f << (i ? ", " : "") << "\"" << json_escape(items[i]) << "\"";
  f << "]";
}

/// The calls after which compiling pays off (compile cost / per-call saving), or nullopt when
/// compiled calls are not faster.
std::optional<int64_t> pays_off_after(double compile_ms, double eager_ms, double compiled_ms) {
  if (!(compiled_ms < eager_ms)) return std::nullopt;
  return static_cast<int64_t>(std::ceil(compile_ms / (eager_ms - compiled_ms)));
}

/// "3 copies, 24 B" for the transfers line.
std::string copies_text(uint64_t copies, uint64_t bytes) {
  return std::to_string(copies) + (copies == 1 ? " copy, " : " copies, ") + std::to_string(bytes) + " B";
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
  if (!o.output_dir.empty()) {
    // Before the run: a wrong folder should not cost the model's run time first.
    std::error_code ec;
    if (fs::exists(o.output_dir, ec) && !fs::is_directory(o.output_dir, ec))
      throw InvalidArgument("--output-dir '" + o.output_dir + "' is a file, not a folder");
  }
  if (o.threads > 0) set_cpu_threads(o.threads);
  auto t_load = std::chrono::steady_clock::now();
  onnx::Model model = load_model_file(o.model, {.fuse = !o.no_fuse});
  double load_ms = ms_since(t_load);
  const onnx::Graph& g = *model.graph;

  const Device device = device_option(o.device);
  ModelInputs prepared = make_model_inputs(model, o.inputs, o.statics, o.dims, o.seed);
  const std::vector<BoundInput>& bound = prepared.bound;
  const std::map<std::string, Value>& statics = prepared.statics;
  // The inputs live where the model runs: made on the host, they are uploaded once, before the
  // runs, so that every run (eager or compiled, first or repeated) times the model and not a
  // copy of its inputs, as a serving loop that keeps its tensors on the GPU (a decoder's KV
  // cache) runs it and as the GPU peers are timed. Static inputs stay host values: compile folds
  // them. (A GPT-2 decode step's cache is 150 MB in bfloat16, which took most of each call.)
  std::map<std::string, Value> feed = prepared.feed;
  double upload_ms = 0;
  size_t upload_bytes = 0;
  if (device.type != Device::Type::Cpu) {
    auto t_up = std::chrono::steady_clock::now();
    std::vector<Array> uploaded;
    for (auto& [name, v] : feed) {
      if (statics.count(name) || !v.is_tensor() || v.array().device() == device) continue;
      v = to_device_value(v, device);
      uploaded.push_back(v.array());
      upload_bytes += static_cast<size_t>(v.array().size()) * v.array().itemsize();
    }
    eval(uploaded);
    synchronize(device);
    upload_ms = ms_since(t_up);
  }

  std::printf("model    %s (ir %lld, %s, %zu nodes, loaded in %s)\n", o.model.c_str(),
              static_cast<long long>(model.ir_version),
              ("opset " + std::to_string(model.opset(""))).c_str(), g.nodes.size(), ms_text(load_ms).c_str());
  std::printf("device   %s\n", device.str().c_str());
  if (upload_bytes > 0)
    std::printf("upload   inputs to %s once, before the runs: %zu B in %s\n", device.str().c_str(), upload_bytes,
                ms_text(upload_ms).c_str());
  std::printf("threads  %d\n", cpu_threads());
  std::printf("inputs   (seed %llu)\n", static_cast<unsigned long long>(o.seed));
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const BoundInput& b = bound[i];
    if (b.source.empty()) continue;  // backed by an initializer
    std::string type = b.value.is_none() ? g.inputs[i].type.to_string() : describe_output(b.value);
    std::printf("  %-20s %-22s %s%s\n", b.name.c_str(), type.c_str(), b.source.c_str(),
                b.notes.empty() ? "" : ("; " + b.notes).c_str());
  }

  // Each run (eager or compiled, first or repeated) gets the whole timeout.
  onnx::RunOptions run_options;
  run_options.device = device;
  if (o.timeout_s > 0)
    run_options.timeout = std::chrono::milliseconds(std::max<int64_t>(1, std::llround(o.timeout_s * 1000.0)));
  // Transfers of the first run, then of the last repeated one (compiled likewise).
  onnx::RunStats eager_stats, compiled_stats;
  onnx::RunOptions first_options = run_options;
  first_options.stats = &eager_stats;
  // Device memory peaks (smelt's caching allocator: bytes held by live arrays, the model's uploaded
  // initializers included), one window per phase, so that the JSON can say which phase needs most.
  MemoryPeaks peaks;
  reset_peak_memory(device);
  auto t_first = std::chrono::steady_clock::now();
  std::map<std::string, Value> outputs = onnx::run_named(model, feed, first_options);
  synchronize(device);  // a GPU run's outputs are queued when run returns: time the work too
  double first_ms = ms_since(t_first);
  peaks.eager_first = memory_info(device).peak_bytes;

  // --compile: the first compiled call compiles (no example inputs), on the inputs the eager run had.
  std::optional<onnx::CompiledModel> compiled;
  std::map<std::string, Value> dynamic_feed;
  CompileReport report;
  std::optional<telemetry::Subscription> graph_events;
  if (o.compile) {
    onnx::CompileModelOptions co;
    co.static_inputs = statics;
    co.device = device;
    if (o.eager_below) co.eager_below = *o.eager_below;
    // The same inputs as the eager runs (already on the device, above).
    for (const auto& [name, v] : feed)
      if (!statics.count(name)) dynamic_feed[name] = v;
    reset_peak_memory(device);
    // Whether the compiled segments run as CUDA graphs (one launch a call) and why not.
    graph_events.emplace("cuda.graph.*", [&report](const telemetry::Event& e) {
      if (e.name == "cuda.graph.capture") ++report.graph_captures;
      else if (e.name == "cuda.graph.plain" || e.name == "cuda.graph.fallback") ++report.graph_plain;
      if (e.name != "cuda.graph.capture" && report.graph_why.empty()) report.graph_why = e.field("reason");
    });
    auto t0 = std::chrono::steady_clock::now();
    compiled = onnx::compile(model, {}, co);
    std::map<std::string, Value> compiled_outputs;
    {
      KernelBuildProgress progress("run");  // the first call traces and builds the kernels
      onnx::RunOptions counted = run_options;
      counted.stats = &compiled_stats;
      compiled_outputs = compiled->run_named(dynamic_feed, counted);
      synchronize(device);
    }
    report.first_ms = ms_since(t0);
    peaks.compiled_first = memory_info(device).peak_bytes;
    report.first_interpreter = compiled->stats().interpreter_runs > 0;
    for (const auto& out : g.outputs) {
      std::string diff = first_difference(outputs.at(out.name), compiled_outputs.at(out.name));
      if (!diff.empty()) report.mismatches.push_back("output '" + out.name + "' (first call): " + diff);
    }
    if (report.first_interpreter) {
      // Tiered: the first call ran unfused while the kernels load or build in the background. Wait for
      // them, so that the check below covers the fused tier too and --repeat times the steady state.
      auto tw = std::chrono::steady_clock::now();
      {
        KernelBuildProgress progress("run");
        smelt::wait_for_kernel_builds();
      }
      report.kernels_wait_ms = ms_since(tw);
      compiled_outputs = compiled->run_named(dynamic_feed, run_options);
      synchronize(device);
      for (const auto& out : g.outputs) {
        std::string diff = first_difference(outputs.at(out.name), compiled_outputs.at(out.name));
        if (!diff.empty()) report.mismatches.push_back("output '" + out.name + "' (fused tier): " + diff);
      }
    }
    report.overlay = compiled->overlay();
  }

  // Eager and compiled calls alternate in runs of kTimedRun calls, so that drift (clock, caches,
  // other load) hits both alike while each side's calls follow one another as a served model's do
  // (and as a peer's are timed): one eager call between compiled calls evicted their weights and
  // intermediates from the caches (the bundled transformer's compiled calls: 5-8% slower). For the
  // same reason each run starts with an untimed call: the first call after a switch found the other
  // side's data in the caches (MobileNetV3 at 224 x 224: a run's first compiled call 1.3-1.5x its
  // others, its median 0.76-0.84 against 0.69-0.70 ms timed back to back).
  constexpr int kTimedRun = 10;
  std::vector<double> times;
  reset_peak_memory(device);
  for (int r0 = 0; r0 < o.repeat; r0 += kTimedRun) {
    const int n = std::min(kTimedRun, o.repeat - r0);
    onnx::RunOptions counted = run_options;
    counted.stats = &eager_stats;
    onnx::run_named(model, feed, run_options);  // untimed: the first call after the switch
    synchronize(device);
    for (int r = 0; r < n; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      auto again = onnx::run_named(model, feed, counted);
      synchronize(device);
      times.push_back(ms_since(t0));
    }
    if (!compiled) continue;
    counted.stats = &compiled_stats;
    compiled->run_named(dynamic_feed, run_options);  // untimed, as the eager run's first
    synchronize(device);
    for (int r = 0; r < n; ++r) {
      auto t1 = std::chrono::steady_clock::now();
      auto again_compiled = compiled->run_named(dynamic_feed, counted);
      synchronize(device);
      report.times.push_back(ms_since(t1));
    }
  }
  if (o.repeat > 0) peaks.repeats = memory_info(device).peak_bytes;
  if (compiled) {
    report.stats = compiled->stats();
    for (const auto& seg : report.stats.segments) {
      report.trace_ms += seg.trace_ms;
      report.build_ms += seg.build_ms;
      report.traces += seg.traces;
    }
    print_segments(report);
  }

  if (device.type != Device::Type::Cpu) {
    std::printf("transfers device->host per run: eager %s", copies_text(eager_stats.device_to_host_copies,
                                                                       eager_stats.device_to_host_bytes).c_str());
    if (compiled)
      std::printf("; compiled %s", copies_text(compiled_stats.device_to_host_copies,
                                               compiled_stats.device_to_host_bytes).c_str());
    std::printf("\n");
    for (const auto& h : eager_stats.host_computed) std::printf("host     %s\n", h.c_str());
  }
  std::printf("outputs\n");
  for (const auto& out : g.outputs) {
    const Value& v = outputs.at(out.name);
    std::printf("  %-20s %-22s %s\n", out.name.c_str(), describe_output(v).c_str(), output_values(v).c_str());
  }
  if (compiled) {
    if (report.mismatches.empty()) {
      std::printf("check    compiled outputs equal eager outputs bit for bit (%zu output%s)\n", g.outputs.size(),
                  g.outputs.size() == 1 ? "" : "s");
    } else {
      std::printf("check    compiled outputs DIFFER from eager outputs (%zu of %zu; see stderr)\n",
                  report.mismatches.size(), g.outputs.size());
      for (const auto& m : report.mismatches)
        std::fprintf(stderr, "smelt run: warning: compiled %s\n", m.c_str());
    }
  }
  double median = 0, min = 0;
  if (!times.empty()) {
    median = median_of(times);
    min = *std::min_element(times.begin(), times.end());
  }
  if (!compiled) {
    std::printf("time     first run %s", ms_text(first_ms).c_str());
    if (!times.empty())
      std::printf("; %zu more runs: median %s, min %s", times.size(), ms_text(median).c_str(), ms_text(min).c_str());
    std::printf("\n");
  }
  double compiled_median = 0, compiled_min = 0;
  std::optional<int64_t> payoff;
  if (compiled) {
    const double compile_ms = report.stats.compile_ms;
    std::printf("compile  %s (trace %s + build %s; %llu trace%s)\n", ms_text(compile_ms).c_str(),
                ms_text(report.trace_ms).c_str(), ms_text(report.build_ms).c_str(),
                static_cast<unsigned long long>(report.traces), report.traces == 1 ? "" : "s");
    std::printf("time     eager    first run %s", ms_text(first_ms).c_str());
    if (!times.empty())
      std::printf("; %zu more: median %s, min %s", times.size(), ms_text(median).c_str(), ms_text(min).c_str());
    std::printf("\n         compiled first call %s (compiling included)", ms_text(report.first_ms).c_str());
    if (!report.times.empty()) {
      compiled_median = median_of(report.times);
      compiled_min = *std::min_element(report.times.begin(), report.times.end());
      std::printf("; %zu more: median %s, min %s", report.times.size(), ms_text(compiled_median).c_str(),
                  ms_text(compiled_min).c_str());
    }
    std::printf("\n");
    // Which tier served the segment runs: the interpreter tier while kernels built in the
    // background (tiered execution), the fused tier after.
    std::printf("tiers    %llu segment run%s on the interpreter tier, %llu fused",
                static_cast<unsigned long long>(report.stats.interpreter_runs),
                report.stats.interpreter_runs == 1 ? "" : "s", static_cast<unsigned long long>(report.stats.fused_runs));
    if (report.first_interpreter)
      std::printf(" (the first call ran unfused; its kernels were ready %s after it, loaded from the disk cache or built in the background)",
                  ms_text(report.kernels_wait_ms).c_str());
    std::printf("\n");
    if (device.type == Device::Type::Cuda)
      std::printf("graphs   %llu captured, %llu call%s replayed kernel by kernel%s%s\n",
                  static_cast<unsigned long long>(report.graph_captures),
                  static_cast<unsigned long long>(report.graph_plain), report.graph_plain == 1 ? "" : "s",
                  report.graph_why.empty() ? "" : "; why: ", report.graph_why.c_str());
    if (!report.times.empty()) {
      payoff = pays_off_after(compile_ms, median, compiled_median);
      if (payoff)
        std::printf("payoff   after %lld calls: compile %s / (eager %s - compiled %s per call, medians)\n",
                    static_cast<long long>(*payoff), ms_text(compile_ms).c_str(), ms_text(median).c_str(),
                    ms_text(compiled_median).c_str());
      else
        std::printf("payoff   never: compiled %s per call is not faster than eager %s (medians)\n",
                    ms_text(compiled_median).c_str(), ms_text(median).c_str());
    }
  }

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
    f << "],\n  \"median_ms\": " << median << ",\n  \"min_ms\": " << min;
    // Peaks of the first eager run, the first compiled call (compiling included; the eager outputs
    // are still held) and the timed calls (eager and compiled alternating in runs of 10); peak_bytes: the highest.
    f << ",\n  \"memory\": {\"device\": \"" << json_escape(device.str()) << "\", \"peak_bytes\": "
      << std::max({peaks.eager_first, peaks.compiled_first, peaks.repeats})
      << ", \"eager_first_peak_bytes\": " << peaks.eager_first;
    if (compiled) f << ", \"compiled_first_peak_bytes\": " << peaks.compiled_first;
    if (o.repeat > 0) f << ", \"repeats_peak_bytes\": " << peaks.repeats;
    f << "}";
    if (compiled) {
      // The eager figures above; the compiled ones here (medians and pays_off_after only with --repeat).
      f << ",\n  \"compile\": {\n    \"static_inputs\": [";
      first = true;
      for (const auto& [name, v] : statics) {
        f << (first ? "" : ", ") << "\"" << json_escape(name) << "\"";
        first = false;
      }
      f << "],\n    \"segments\": [";
      for (size_t k = 0; k < report.overlay.segments.size(); ++k) {
        const auto& s = report.overlay.segments[k];
        f << (k ? ",\n" : "\n") << "      {\"start\": " << s.start << ", \"stop\": " << s.stop << ", \"start_node\": \""
          << json_escape(s.start_node) << "\", \"stop_node\": \"" << json_escape(s.stop_node)
          << "\", \"kind\": \"" << kind_name(s.kind) << "\", \"compiled\": " << (s.compiled ? "true" : "false")
          << ", \"reason\": \"" << json_escape(s.reason) << "\", \"host_values\": ";
        json_strings(f, s.host_values);
        f << ", \"fused\": [";
        for (size_t i = 0; i < s.fused.size(); ++i) {
          f << (i ? ", " : "") << "{\"nodes\": ";
          json_strings(f, s.fused[i].nodes);
          f << ", \"kernel\": \"" << json_escape(s.fused[i].kernel) << "\"}";
        }
        f << "]}";
      }
      f << (report.overlay.segments.empty() ? "" : "\n    ") << "],\n    \"host_folded\": ";
      json_strings(f, report.overlay.host_folded);
      f << ",\n    \"compile_ms\": " << report.stats.compile_ms << ",\n    \"trace_ms\": " << report.trace_ms
        << ",\n    \"build_ms\": " << report.build_ms << ",\n    \"traces\": " << report.traces
        << ",\n    \"first_call_ms\": " << report.first_ms
        << ",\n    \"first_call_tier\": \"" << (report.first_interpreter ? "interpreter" : "fused")
        << "\",\n    \"kernels_wait_ms\": " << report.kernels_wait_ms
        << ",\n    \"interpreter_runs\": " << report.stats.interpreter_runs
        << ",\n    \"fused_runs\": " << report.stats.fused_runs << ",\n    \"runs_ms\": [";
      for (size_t i = 0; i < report.times.size(); ++i) f << (i ? ", " : "") << report.times[i];
      f << "],\n    \"median_ms\": " << compiled_median << ",\n    \"min_ms\": " << compiled_min
        << ",\n    \"pays_off_after\": ";
      if (payoff) f << *payoff;
      else f << "null";
      f << ",\n    \"bit_equal\": " << (report.mismatches.empty() ? "true" : "false") << "\n  }";
    }
    f << "\n}\n";
    if (!f) throw InvalidArgument("cannot write '" + o.json + "'");
  }
  return report.mismatches.empty() ? 0 : 1;
#endif
}

// ---- model_inputs.h: shared with `smelt view` -------------------------------------------------

std::optional<int64_t> parse_count(const std::string& s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

InputSpec parse_input_spec(const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UsageError("--input '" + text + "' is not NAME=FILE.npy or NAME=random:D0xD1...");
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
        throw UsageError("--input '" + text + "': the shape after 'random:' is dims joined by 'x' (2x16); '" + part +
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

StaticSpec parse_static_spec(const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UsageError("--static '" + text + "' is not NAME=FILE.npy or NAME=V0,V1,...");
  StaticSpec spec;
  spec.name = text.substr(0, eq);
  std::string value = text.substr(eq + 1);
  if (value.size() > 4 && value.compare(value.size() - 4, 4, ".npy") == 0) spec.file = value;
  else spec.values = value;
  return spec;
}

std::pair<std::string, int64_t> parse_dim_spec(const std::string& v) {
  auto eq = v.find('=');
  auto n = eq == std::string::npos ? std::nullopt : parse_count(v.substr(eq + 1));
  if (eq == std::string::npos || eq == 0 || !n) throw UsageError("--dim '" + v + "' is not SYMBOL=N (batch=4)");
  return {v.substr(0, eq), *n};
}

#ifdef SMELT_ONNX
Value to_device_value(const Value& v, Device device) {
  if (!v.is_tensor() || v.array().device() == device) return v;
  return Value::tensor(to_device(v.array(), device), v.elem_type());
}

ModelInputs make_model_inputs(const onnx::Model& model, const std::vector<InputSpec>& inputs,
                              const std::vector<StaticSpec>& statics_given,
                              const std::map<std::string, int64_t>& dims_given, uint64_t seed) {
  // The CLI runs models on the CPU (onnx::run, and onnx::compile's default device): its random
  // keys, draws and masks are made there too, on machines with a GPU as without.
  DefaultDeviceScope on_cpu(Device::cpu());
  const onnx::Graph& g = *model.graph;
  std::set<std::string> initializer_names;
  for (const auto& [name, v] : g.initializers) initializer_names.insert(name);
  std::set<std::string> declared_symbols;
  for (const auto& in : g.inputs)
    if (in.type.shape)
      for (const auto& d : *in.type.shape)
        if (d.value < 0 && !d.param.empty()) declared_symbols.insert(d.param);

  // Every --input and --static names a graph input.
  auto input_names = [&] {
    std::string names;
    for (const auto& in : g.inputs)
      if (!initializer_names.count(in.name)) names += (names.empty() ? "" : ", ") + in.name;
    return names;
  };
  auto is_input = [&](const std::string& name) {
    return std::any_of(g.inputs.begin(), g.inputs.end(), [&](const onnx::ValueInfo& in) { return in.name == name; });
  };
  std::map<std::string, const InputSpec*> specs;
  for (const auto& spec : inputs) {
    if (!is_input(spec.name))
      throw InvalidArgument("unknown input '" + spec.name + "' (the model's inputs are: " + input_names() + ")");
    specs[spec.name] = &spec;
  }
  std::map<std::string, const StaticSpec*> static_specs;
  for (const auto& spec : statics_given) {
    if (!is_input(spec.name))
      throw InvalidArgument("--static " + spec.name + ": unknown input '" + spec.name +
                            "' (the model's inputs are: " + input_names() + ")");
    static_specs[spec.name] = &spec;
  }
  DimTable dims(dims_given);
  for (const auto& sym : dims.unused(declared_symbols))
    throw InvalidArgument("--dim " + sym + ": no input of the model has a dim named '" + sym + "'");

  // Files first, so that their sizes bind the symbols that static values and random inputs then share.
  std::vector<BoundInput> bound(g.inputs.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const auto& in = g.inputs[i];
    bound[i].name = in.name;
    if (auto it = specs.find(in.name); it != specs.end() && !it->second->file.empty()) {
      bound[i].value = input_from_file(in, it->second->file, dims);
      bound[i].source = "file " + it->second->file;
    }
    if (auto it = static_specs.find(in.name); it != static_specs.end() && !it->second->file.empty()) {
      bound[i].value = input_from_file(in, it->second->file, dims);
      bound[i].source = "static, file " + it->second->file;
    }
  }
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    auto it = static_specs.find(g.inputs[i].name);
    if (it == static_specs.end() || !it->second->file.empty()) continue;
    bound[i].value = static_from_values(g.inputs[i], it->second->values, dims, bound[i].notes);
    bound[i].source = "static " + output_values(bound[i].value);
  }
  const std::map<std::string, IndexBound> bounds = index_bounds(g);
  Array keys = random::split(random::key(seed), static_cast<int>(std::max<size_t>(g.inputs.size(), 1)));
  std::map<std::string, Value> feed;
  std::map<std::string, Value> statics;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const auto& in = g.inputs[i];
    if (static_specs.count(in.name)) {
      statics[in.name] = bound[i].value;
      feed[in.name] = bound[i].value;
      continue;
    }
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
    // Each input keeps its own key (by position), so making one input static leaves the others' values.
    Array key = reshape(slice(keys, {static_cast<int64_t>(i), 0}, {static_cast<int64_t>(i) + 1, 2}), {2});
    std::optional<std::vector<int64_t>> shape = it != specs.end() ? it->second->shape : std::nullopt;
    auto index_bound = bounds.find(in.name);
    bound[i].value = random_value(in, shape, dims, key, bound[i], index_bound == bounds.end() ? nullptr : &index_bound->second);
    feed[in.name] = bound[i].value;
  }
  // The inputs exist before the clock starts: random draws are not part of the run.
  std::vector<Array> input_arrays;
  for (const auto& [name, v] : feed)
    if (v.is_tensor()) input_arrays.push_back(v.array());
  eval(input_arrays);
  return {std::move(bound), std::move(feed), std::move(statics)};
}
#endif

}  // namespace smelt::cli
