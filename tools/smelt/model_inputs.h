// Model inputs from the command line, shared by `smelt run` and `smelt view --compile`:
// --input / --static / --dim parsing and the given, static or random values they make.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tools/smelt/commands.h"
#ifdef SMELT_ONNX
#include "smelt/onnx.h"
#endif

namespace smelt::cli {

/// How one input is given on the command line.
struct InputSpec {
  std::string name;
  std::string file;                     // NAME=FILE.npy
  bool random = false;                  // NAME=random or NAME=random:D0xD1...
  std::optional<std::vector<int64_t>> shape;  // the dims after "random:" (empty: a 0-d scalar)
};

/// How one static input is given: NAME=FILE.npy or NAME=V0,V1,...
struct StaticSpec {
  std::string name;
  std::string file;    // NAME=FILE.npy
  std::string values;  // the text after '=' otherwise
};

/// A non-negative decimal integer, or nullopt.
std::optional<int64_t> parse_count(const std::string& s);
/// --input NAME=FILE.npy | NAME=random[:D0xD1...]; malformed text raises UsageError.
InputSpec parse_input_spec(const std::string& text);
/// --static NAME=FILE.npy | NAME=V0,V1,...; malformed text raises UsageError.
StaticSpec parse_static_spec(const std::string& text);
/// --dim SYMBOL=N; malformed text raises UsageError.
std::pair<std::string, int64_t> parse_dim_spec(const std::string& text);

#ifdef SMELT_ONNX
/// One input as it will be fed, with the line the summary prints.
struct BoundInput {
  std::string name;
  onnx::Value value;
  std::string source;  // "file x.npy", "random uniform [-1, 1)", ...
  std::string notes;   // the defaults used for symbolic dims
};

struct ModelInputs {
  std::vector<BoundInput> bound;               // per graph input; source "" when an initializer backs it
  std::map<std::string, onnx::Value> feed;     // every input to feed, static ones included
  std::map<std::string, onnx::Value> statics;  // the --static inputs
};

/// The inputs of `model`: files and static values as given, random values for the rest (shaped
/// from the declarations, --dim and defaults; drawn from `seed`), evaluated. Unknown input names,
/// unused --dim symbols and values that do not fit their declaration raise InvalidArgument.
ModelInputs make_model_inputs(const onnx::Model& model, const std::vector<InputSpec>& inputs,
                              const std::vector<StaticSpec>& statics, const std::map<std::string, int64_t>& dims,
                              uint64_t seed);

/// A tensor made on the host, on `device` (other values as they are): `run` and `view` make their
/// inputs on the CPU and give a compiled model its inputs on its device, once.
onnx::Value to_device_value(const onnx::Value& v, Device device);
#endif

}  // namespace smelt::cli
