// `smelt info MODEL`: a summary of an ONNX model (IR, opsets, inputs, outputs, weights, operators).
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "smelt/errors.h"
#include "tools/smelt/args.h"
#include "tools/smelt/commands.h"
#include "tools/smelt/model_file.h"
#include "tools/smelt/onnx_commands.h"
#ifdef SMELT_ONNX
#include "smelt/onnx.h"
#endif

namespace smelt::cli {

#ifdef SMELT_ONNX
namespace {

/// The load-time rewrites (LoadOptions::fuse) the model gets: each fused node is named after the
/// nodes it replaced ("attention(MatMul_0,Transpose_1,...)"), so the names list them.
void print_rewrites(const std::string& path) {
  onnx::Model fused = onnx::load(path, {.check_operators = false, .fuse = true});
  static const char* kTags[] = {"attention(", "gelu(", "gelu_tanh(", "layer_norm(", "conv_bn(", "gemm_wt("};
  std::map<std::string, std::vector<std::string>> by_tag;
  size_t count = 0;
  std::vector<const onnx::Graph*> work{fused.graph.get()};
  while (!work.empty()) {
    const onnx::Graph* cur = work.back();
    work.pop_back();
    for (const auto& n : cur->nodes) {
      for (const char* tag : kTags)
        if (n.name.rfind(tag, 0) == 0) {
          by_tag[std::string(tag, std::strlen(tag) - 1)].push_back(n.name);
          ++count;
          break;
        }
      for (const auto& a : n.attributes) {
        if (a.g) work.push_back(a.g.get());
        for (const auto& sub : a.graphs) work.push_back(sub.get());
      }
    }
  }
  std::printf("\nrewrites at load (%zu; --no-fuse or LoadOptions::fuse = false keeps the file's graph)\n", count);
  for (const auto& [tag, names] : by_tag) {
    std::printf("  %-12s %zu\n", tag.c_str(), names.size());
    for (const auto& name : names) std::printf("    %s\n", name.c_str());
  }
}

}  // namespace
#endif

constexpr const char* kInfoUsage = "usage: smelt info MODEL.onnx";
constexpr const char* kInfoHelp =
    "\n"
    "Prints the model as stored: IR version, producer, opsets, inputs, outputs, initializers (count and size),\n"
    "operator counts (subgraphs included), local functions, the rewrites a load makes (LoadOptions::fuse) and\n"
    "the operators smelt cannot run yet. Options: -h, --help (this text).\n";

int run_info(const std::vector<std::string>& args) {
  ParsedArgs parsed = parse_command_line(args, {}, kInfoUsage);
  if (parsed.help) {
    std::printf("%s\n%s", kInfoUsage, kInfoHelp);
    return 0;
  }
  if (parsed.positionals.empty()) throw UsageError(std::string("no model given\n") + kInfoUsage);
  if (parsed.positionals.size() > 1)
    throw UsageError("more than one model given ('" + parsed.positionals[0] + "' and '" + parsed.positionals[1] +
                     "')\n" + kInfoUsage);
#ifndef SMELT_ONNX
  throw UnsupportedError("this smelt was built without ONNX support (configure with -DSMELT_ONNX=ON)");
#else
  const std::string& path = parsed.positionals[0];
  // The model as stored: fusions at load would show ai.smelt operators the file does not have.
  onnx::Model m = load_model_file(path, {.check_operators = false, .fuse = false});
  const onnx::Graph& g = *m.graph;
  std::printf("model     %s\n", path.c_str());
  std::printf("ir        %lld\n", static_cast<long long>(m.ir_version));
  if (!m.producer_name.empty())
    std::printf("producer  %s %s\n", m.producer_name.c_str(), m.producer_version.c_str());
  std::string opsets;
  for (const auto& o : m.opsets)
    opsets += (opsets.empty() ? "" : ", ") + (o.domain.empty() ? std::string("ai.onnx") : o.domain) + " " +
              std::to_string(o.version);
  std::printf("opsets    %s\n", opsets.c_str());

  std::map<std::string, bool> initializer_names;
  int64_t weight_bytes = 0;
  for (const auto& [name, v] : g.initializers) {
    initializer_names[name] = true;
    if (v.is_tensor()) weight_bytes += static_cast<int64_t>(v.array().nbytes());
  }
  std::printf("\ninputs\n");
  for (const auto& in : g.inputs)
    if (!initializer_names.count(in.name)) std::printf("  %-24s %s\n", in.name.c_str(), in.type.to_string().c_str());
  std::printf("outputs\n");
  for (const auto& out : g.outputs) std::printf("  %-24s %s\n", out.name.c_str(), out.type.to_string().c_str());
  std::printf("initializers  %zu (%.2f MiB)\n", g.initializers.size(), static_cast<double>(weight_bytes) / (1 << 20));

  // Operator counts over the main graph and its subgraphs (a worklist, not recursion).
  std::map<std::string, int> counts;
  size_t nodes = 0;
  std::vector<const onnx::Graph*> work{&g};
  while (!work.empty()) {
    const onnx::Graph* cur = work.back();
    work.pop_back();
    for (const auto& n : cur->nodes) {
      ++nodes;
      ++counts[(n.domain.empty() ? std::string() : n.domain + "::") + n.op_type];
      for (const auto& a : n.attributes) {
        if (a.g) work.push_back(a.g.get());
        for (const auto& sub : a.graphs) work.push_back(sub.get());
      }
    }
  }
  std::printf("nodes     %zu\n\noperators\n", nodes);
  for (const auto& [op, count] : counts) std::printf("  %-28s %d\n", op.c_str(), count);
  if (!m.functions.empty()) {
    std::printf("functions\n");
    for (const auto& f : m.functions)
      std::printf("  %s%s%s (%zu nodes)\n", f.domain.empty() ? "" : (f.domain + "::").c_str(), f.name.c_str(),
                  f.overload.empty() ? "" : (":" + f.overload).c_str(), f.nodes.size());
  }
  print_rewrites(path);
  auto missing = onnx::unsupported_operators(m);
  if (missing.empty()) {
    std::printf("\nsupported: every operator can run\n");
  } else {
    std::printf("\nunsupported (%zu)\n", missing.size());
    for (const auto& u : missing)
      std::printf("  %s::%s opset %lld (node '%s')\n", u.domain.empty() ? "ai.onnx" : u.domain.c_str(),
                  u.op_type.c_str(), static_cast<long long>(u.version), u.node.c_str());
  }
  return 0;
#endif
}

}  // namespace smelt::cli
