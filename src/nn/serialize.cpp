// smelt::nn loading: checks a .safetensors file's tensors against a model's parameters.
#include <string>

#include "smelt/nn.h"

namespace smelt::nn::detail {

std::vector<Array> match_loaded(const std::vector<std::pair<std::string, Array>>& params,
                                const std::map<std::string, Array>& loaded, const std::string& path, bool strict) {
  std::vector<Array> out;
  std::vector<std::string> missing;
  for (const auto& [name, current] : params) {
    auto it = loaded.find(name);
    if (it == loaded.end()) {
      missing.push_back(name);
      continue;
    }
    const Array& a = it->second;
    if (a.dtype() != current.dtype() || a.shape() != current.shape())
      throw ShapeError("nn::load: " + path + ": tensor '" + name + "' is " + dtype_name(a.dtype()) +
                       shape_to_string(a.shape()) + ", the model's parameter is " + dtype_name(current.dtype()) +
                       shape_to_string(current.shape()));
    out.push_back(to_device(a, current.device()));
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 8; ++i) list += (i ? ", " : "") + missing[i];
    if (missing.size() > 8) list += ", ... (" + std::to_string(missing.size()) + " in all)";
    throw InvalidArgument("nn::load: " + path + " has no tensor for the parameters " + list);
  }
  if (strict && loaded.size() > params.size()) {
    std::map<std::string, int> known;
    for (const auto& [name, a] : params) known[name] = 1;
    std::string list;
    int n = 0;
    for (const auto& [name, a] : loaded)
      if (!known.count(name) && n++ < 8) list += (list.empty() ? "" : ", ") + name;
    throw InvalidArgument("nn::load: " + path + " has tensors the model has no parameter for: " + list +
                          " (pass strict = false to ignore them)");
  }
  return out;
}

}  // namespace smelt::nn::detail
