// `smelt view MODEL`: writes the offline HTML graph view of an ONNX model, with --compile its overlay for a device.
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "smelt/device.h"
#include "smelt/errors.h"
#include "tools/smelt/args.h"
#include "tools/smelt/commands.h"
#include "tools/smelt/model_file.h"
#include "tools/smelt/model_inputs.h"
#include "tools/smelt/progress.h"
#include "tools/smelt/onnx_commands.h"
#ifdef SMELT_ONNX
#include "smelt/onnx.h"
#include "smelt/view.h"
#endif

namespace smelt::cli {
namespace {

constexpr const char* kUsage =
    "usage: smelt view MODEL [-o FILE.html] [--title TEXT]\n"
    "                  [--compile [--input NAME=FILE.npy | NAME=random[:D0xD1...]]... [--dim SYMBOL=N]...\n"
    "                             [--static NAME=FILE.npy | NAME=V0,V1,...]... [--eager-below N] [--seed S]\n"
    "                             [--device cpu|cuda[:N]]]";

constexpr const char* kHelp =
    "\n"
    "Writes one self-contained HTML file (no network needed) drawing the model's top-level graph, its nodes\n"
    "grouped by the scopes of their names (/model/layers.0/attn/...): click a group to open or close it, a\n"
    "node for its inputs, outputs, types and attributes; drag to pan, wheel to zoom, 'fit', search by node\n"
    "name, op type or tensor name, a minimap. Default output: MODEL's stem + .html here.\n"
    "\n"
    "  -o, --output FILE.html  where to write the view (-o is an output file in every command that has it)\n"
    "  --title TEXT            the page title (default: the graph's name)\n"
    "  --compile               compile the model and run it once (on the given or random inputs, as\n"
    "                          `smelt run` makes them), then color each node by its compiled segment: a\n"
    "                          legend lists the segments (Compiled, EagerSmall, Break) and why each ends;\n"
    "                          break nodes have a thick red outline, fused nodes a dashed one and\n"
    "                          each fused kernel is a group of its own, host-folded nodes are grey\n"
    "  --device D              with --compile: the device the model is compiled for and run on, whose\n"
    "                          segments and fused kernels are drawn: cpu, cuda (GPU 0) or cuda:N (default:\n"
    "                          the first GPU when there is one, else the CPU, as for `smelt run`)\n"
    "  -i, --input, --dim, --static, --eager-below, --seed   with --compile: as for `smelt run` (see\n"
    "                          `smelt help run`: random integer indices stay inside the gathered axis)\n"
    "  -h, --help              this text\n";

[[noreturn]] void usage_error(const std::string& message) { throw UsageError(message + "\n" + kUsage); }

struct ViewOptions {
  std::string model;
  std::string output;
  std::string title;
  bool compile = false;
  std::vector<InputSpec> inputs;
  std::vector<StaticSpec> statics;
  std::map<std::string, int64_t> dims;
  std::optional<int> eager_below;
  uint64_t seed = 0;
  std::string device;  // --device; empty: the default device
  bool help = false;
};

ViewOptions parse_args(const std::vector<std::string>& args) {
  static const std::vector<OptionSpec> kOptions = {
      {"--output", "-o", true}, {"--title", nullptr, true}, {"--compile", nullptr, false},
      {"--input", "-i", true},  {"--static", nullptr, true}, {"--dim", nullptr, true},
      {"--eager-below", nullptr, true}, {"--seed", nullptr, true}, {"--device", nullptr, true},
  };
  ViewOptions o;
  ParsedArgs parsed = parse_command_line(args, kOptions, kUsage);
  o.help = parsed.help;
  if (o.help) return o;
  bool compile_only = false;  // an option that needs --compile was given
  for (const auto& [a, v] : parsed.options) {
    try {
      if (a == "--output") {
        o.output = v;
      } else if (a == "--title") {
        o.title = v;
      } else if (a == "--compile") {
        o.compile = true;
      } else if (a == "--input") {
        o.inputs.push_back(parse_input_spec(v));
        compile_only = true;
      } else if (a == "--static") {
        o.statics.push_back(parse_static_spec(v));
        compile_only = true;
      } else if (a == "--dim") {
        auto [symbol, n] = parse_dim_spec(v);
        o.dims[symbol] = n;
        compile_only = true;
      } else if (a == "--device") {
        o.device = v;
        compile_only = true;
        try {
          parse_device(o.device, "--device", false);  // the text only: a missing GPU is a failure, not a usage error
        } catch (const InvalidArgument& e) {
          usage_error(e.what());
        }
      } else if (a == "--eager-below" || a == "--seed") {
        auto n = parse_count(v);
        if (!n || *n > 1000000000) usage_error(a + " needs a non-negative integer, got '" + v + "'");
        if (a == "--seed") o.seed = static_cast<uint64_t>(*n);
        else o.eager_below = static_cast<int>(*n);
        compile_only = true;
      }
    } catch (const UsageError& e) {
      const std::string what = e.what();
      if (what.find("usage: smelt view") != std::string::npos) throw;
      usage_error(what);
    }
  }
  for (const auto& p : parsed.positionals) {
    if (o.model.empty()) o.model = p;
    else usage_error("more than one model given ('" + o.model + "' and '" + p + "')");
  }
  if (o.help) return o;
  if (o.model.empty()) usage_error("no model given");
  if (compile_only && !o.compile)
    usage_error("--input, --static, --dim, --eager-below, --seed and --device choose the compiled run: add --compile");
  std::set<std::string> seen;
  for (const auto& in : o.inputs)
    if (!seen.insert(in.name).second) usage_error("input '" + in.name + "' given twice");
  for (const auto& st : o.statics)
    if (!seen.insert(st.name).second) usage_error("input '" + st.name + "' given twice");
  return o;
}

}  // namespace

int run_view(const std::vector<std::string>& args) {
  ViewOptions o = parse_args(args);
  if (o.help) {
    std::printf("%s\n%s", kUsage, kHelp);
    return 0;
  }
#ifndef SMELT_ONNX
  throw UnsupportedError("this smelt was built without ONNX support (configure with -DSMELT_ONNX=ON)");
#else
  onnx::Model model = load_model_file(o.model);
  const std::string out = o.output.empty() ? std::filesystem::path(o.model).stem().string() + ".html" : o.output;
  std::optional<onnx::Overlay> overlay;
  view::GraphViewOptions vo{o.title, ""};
  if (o.compile) {
    // As `smelt run --device` does: the same default and the same error for a GPU it cannot use.
    const Device device = device_option(o.device);
    vo.device = device.str();
    ModelInputs in = make_model_inputs(model, o.inputs, o.statics, o.dims, o.seed);
    onnx::CompileModelOptions co;
    co.static_inputs = in.statics;
    co.device = device;
    if (o.eager_below) co.eager_below = *o.eager_below;
    co.tiered = false;  // the one call the view shows runs with its kernels built
    // A compiled model takes its inputs where they are: the host-made inputs go to its device.
    std::map<std::string, onnx::Value> dynamic_feed;
    for (const auto& [name, v] : in.feed)
      if (!in.statics.count(name)) dynamic_feed[name] = to_device_value(v, device);
    onnx::CompiledModel compiled = onnx::compile(model, {}, co);
    {
      KernelBuildProgress progress("view");  // the first call traces and builds the kernels
      compiled.run_named(dynamic_feed);
    }
    overlay = compiled.overlay();
  }
  view::write_graph_html(out, model, overlay ? &*overlay : nullptr, vo);
  std::printf("%s\n", out.c_str());
  if (overlay)
    std::fprintf(stderr, "smelt view: %zu nodes, %zu segments compiled for %s\n", model.graph->nodes.size(),
                 overlay->segments.size(), vo.device.c_str());
  return 0;
#endif
}

}  // namespace smelt::cli
