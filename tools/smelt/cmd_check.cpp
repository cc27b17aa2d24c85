// `smelt check DIR`: runs ONNX backend-format test cases (model.onnx + test_data_set_N) on a device and
// compares the outputs with the tolerance rule of docs/onnx.md; --compile also checks the compiled model bit for bit.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "smelt/errors.h"
#include "tools/smelt/args.h"
#include "tools/smelt/commands.h"
#include "tools/smelt/model_inputs.h"
#include "tools/smelt/onnx_commands.h"
#include "tools/smelt/progress.h"
#ifdef SMELT_ONNX
#include "smelt/onnx.h"
#include "tools/smelt/value_diff.h"
#endif

namespace fs = std::filesystem;

namespace smelt::cli {

namespace {

struct CheckOptions {
  std::string dir;
  std::string skip_list;
  std::string filter;
  bool verbose = false;
  bool fork = true;
  bool run_skipped = false;  // also run the skipped cases and name those that pass now
  int timeout_s = 120;
  std::string device;  // --device: empty follows the default-device rule
  bool compile = false;  // also run the compiled model and compare it with the eager run bit for bit
};

constexpr const char* kUsage =
    "usage: smelt check DIR [--skip-list FILE] [--filter TEXT] [--device cpu|cuda[:N]] [--compile]\n"
    "                   [--timeout SECONDS] [--verbose] [--no-fork] [--run-skipped]";

constexpr const char* kHelp =
    "\n"
    "Runs every case of DIR in the ONNX backend-test format (a folder with model.onnx and test_data_set_N/,\n"
    "or a folder of such folders) on the device, compares the outputs (count, type, shape; values within the\n"
    "tolerance rule of docs/onnx.md: |got - want| <= 1e-7 + rtol*|want| + K*u*max|want|, rtol 1e-3 (float16\n"
    "2^-10, bfloat16 2^-7), K*u only for cases with a reducing operator; NaN equals NaN), prints one line per\n"
    "failing case and then `N passed, N failed, N skipped`. Exit status 0 when no case failed, 1 when one did\n"
    "or when no case was found (or none matches --filter). On a terminal a progress line (cases done / total)\n"
    "is shown on stderr.\n"
    "\n"
    "  --skip-list FILE      cases to skip: one name per line with a `# reason`; `name [cuda]  # reason`\n"
    "                        skips it on that device type only (cpu or cuda: an expected failure there)\n"
    "  --compile             also compile each case's model for the device and require its outputs to equal\n"
    "                        the eager outputs bit for bit (the line ends with `N compiled bit-equal`)\n"
    "  --filter TEXT         run only the cases whose name contains TEXT\n"
    "  --device D            cpu, cuda or cuda:N (default: the first GPU when there is one, else the CPU)\n"
    "  --timeout SECONDS     a case running longer fails (default 120; with forking only)\n"
    "  -v, --verbose         also print passing (PASS) and skipped (SKIP) cases\n"
    "  --no-fork             run the cases in this process (a crash then ends the whole check)\n"
    "  --run-skipped         also run the skipped cases and name those that pass now\n"
    "  -h, --help            this text\n";

[[noreturn]] void usage_error(const std::string& message) { throw UsageError(message + "\n" + kUsage); }

CheckOptions parse_args(const std::vector<std::string>& args, bool& help) {
  static const std::vector<OptionSpec> kOptions = {
      {"--skip-list", nullptr, true}, {"--filter", nullptr, true},   {"--verbose", "-v", false},
      {"--no-fork", nullptr, false},  {"--run-skipped", nullptr, false}, {"--timeout", nullptr, true},
      {"--device", nullptr, true},    {"--compile", nullptr, false},
  };
  CheckOptions o;
  ParsedArgs parsed = parse_command_line(args, kOptions, kUsage);
  help = parsed.help;
  if (help) return o;
  for (const auto& [a, v] : parsed.options) {
    if (a == "--skip-list") o.skip_list = v;
    else if (a == "--filter") o.filter = v;
    else if (a == "--verbose") o.verbose = true;
    else if (a == "--no-fork") o.fork = false;
    else if (a == "--run-skipped") o.run_skipped = true;
    else if (a == "--device") o.device = v;
    else if (a == "--compile") o.compile = true;
    else if (a == "--timeout") {
      auto n = parse_count(v);
      if (!n || *n < 1 || *n > 86400) usage_error("--timeout needs a whole number of seconds from 1 to 86400, got '" + v + "'");
      o.timeout_s = static_cast<int>(*n);
    }
  }
  for (const auto& p : parsed.positionals) {
    if (o.dir.empty()) o.dir = p;
    else usage_error("more than one folder given ('" + o.dir + "' and '" + p + "')");
  }
  if (o.dir.empty()) usage_error("no folder given");
  // The text only: the cases run in forked children, and a parent that initialized CUDA would
  // leave them unable to use it.
  if (!o.device.empty() && o.device != "auto") {
    try {
      parse_device(o.device, "--device", false);
    } catch (const InvalidArgument& e) {
      usage_error(e.what());
    }
  }
  return o;
}

#ifdef SMELT_ONNX

/// One line of the skip list: everywhere (device empty), or on one device type ("cpu", "cuda").
struct Skip {
  std::string device;
  std::string reason;
};
using SkipList = std::map<std::string, std::vector<Skip>>;

/// The skip list: one case name per line, optionally `[cpu]` or `[cuda]` after it (skipped on that
/// device type only), then a `# reason`; blank lines and comment lines are ignored. A line without a
/// reason or with another tag is an error, so every skip says why and where.
SkipList read_skip_list(const std::string& path) {
  SkipList skips;
  if (path.empty()) return skips;
  std::ifstream f(path);
  if (!f) throw InvalidArgument("cannot open the skip list '" + path + "'");
  std::string line;
  int number = 0;
  while (std::getline(f, line)) {
    ++number;
    auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    auto hash = line.find('#');
    std::string name = line.substr(first, hash == std::string::npos ? std::string::npos : hash - first);
    name.erase(name.find_last_not_of(" \t\r") + 1);
    std::string device;
    if (auto open = name.find('['); open != std::string::npos) {
      const auto close = name.find(']', open);
      const std::string tag = name.substr(open, close == std::string::npos ? std::string::npos : close - open + 1);
      device = close == std::string::npos ? "" : name.substr(open + 1, close - open - 1);
      name.erase(open);
      name.erase(name.find_last_not_of(" \t") + 1);
      if (device != "cpu" && device != "cuda")
        throw InvalidArgument(path + ":" + std::to_string(number) + ": skipped case '" + name + "' has the device tag '" +
                              tag + "'; accepted tags are [cpu] and [cuda]");
    }
    std::string reason = hash == std::string::npos ? "" : line.substr(hash + 1);
    reason.erase(0, reason.find_first_not_of(" \t"));
    reason.erase(reason.find_last_not_of(" \t\r") + 1);
    if (reason.empty())
      throw InvalidArgument(path + ":" + std::to_string(number) + ": skipped case '" + name +
                            "' has no reason (write `name  # reason`)");
    skips[name].push_back({device, reason});
  }
  return skips;
}

std::vector<fs::path> list_cases(const fs::path& dir) {
  if (!fs::exists(dir)) throw InvalidArgument("cannot open '" + dir.string() + "': no such folder");
  if (!fs::is_directory(dir))
    throw InvalidArgument("'" + dir.string() + "' is not a folder (check takes a folder of ONNX backend-test cases)");
  if (fs::exists(dir / "model.onnx")) return {dir};
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx")) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  return cases;
}

using onnx::ElemType;
using onnx::Value;

bool is_float_type(ElemType t) {
  switch (t) {
    case ElemType::Float:
    case ElemType::Double:
    case ElemType::Float16:
    case ElemType::BFloat16:
    case ElemType::Float8E4M3FN:
    case ElemType::Float8E4M3FNUZ:
    case ElemType::Float8E5M2:
    case ElemType::Float8E5M2FNUZ:
    case ElemType::Float4E2M1:
    case ElemType::Float8E8M0: return true;
    default: return false;
  }
}

std::string number(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

/// How closely a case's outputs must match (docs/onnx.md, "Conformance tolerance").
struct Tolerance {
  /// K of the K*u*max|want| term: the element count of the case's largest input or initializer
  /// (no reduction of the case can be longer), or 0 when the case has no reducing operator.
  double reduction_length = 0;
};

/// The relative part of the rule for an element type: the float32 rule's 1e-3, or one rounding of
/// the type itself where that is coarser (bfloat16: 2^-7; float16's 2^-10 is below 1e-3).
double relative_tolerance(ElemType t) { return t == ElemType::BFloat16 ? 0x1p-7 : 1e-3; }

/// The unit roundoff of the arithmetic an output was accumulated in: float64 for double outputs,
/// float32 for every narrower float type (half types accumulate in float32 on both devices).
double unit_roundoff(ElemType t) { return t == ElemType::Double ? 0x1p-53 : 0x1p-24; }

/// Whether the operator sums many terms, so that another summation order (another device, a
/// blocked kernel) may move its result by up to K*u of the terms' magnitude.
bool is_reducing_op(const std::string& op) {
  static const std::set<std::string> ops{
      "ReduceSum", "ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
      "ReduceSumSquare", "MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum", "Softmax", "LogSoftmax",
      "LayerNormalization", "GroupNormalization", "InstanceNormalization", "BatchNormalization",
      "RMSNormalization", "AveragePool", "GlobalAveragePool", "LpPool", "GlobalLpPool", "LpNormalization",
      "MeanVarianceNormalization", "CumSum", "Attention", "RNN", "GRU", "LSTM", "DFT", "STFT", "Det",
      "QLinearMatMul", "QLinearConv", "DeformConv", "RoiAlign", "SoftmaxCrossEntropyLoss",
      "NegativeLogLikelihoodLoss", "Col2Im"};
  return ops.count(op) > 0;
}

/// Whether any node of the model (subgraphs and functions included) is a reducing operator.
bool has_reducing_op(const onnx::Model& model) {
  for (const auto& f : model.functions)
    for (const auto& n : f.nodes)
      if (is_reducing_op(n.op_type)) return true;
  std::vector<const onnx::Graph*> work{model.graph.get()};
  while (!work.empty()) {
    const onnx::Graph* g = work.back();
    work.pop_back();
    for (const auto& n : g->nodes) {
      if (is_reducing_op(n.op_type)) return true;
      for (const auto& a : n.attributes) {
        if (a.g) work.push_back(a.g.get());
        for (const auto& h : a.graphs) work.push_back(h.get());
      }
    }
  }
  return false;
}

/// "" when `got` matches `want` within `tol`, else why not.
std::string compare(const Value& got, const Value& want, const Tolerance& tol) {
  if (got.kind() != want.kind()) return "expected " + want.describe() + ", got " + got.describe();
  switch (want.kind()) {
    case Value::Kind::None: return "";
    case Value::Kind::Strings:
      if (got.shape() != want.shape()) return "expected " + want.describe() + ", got " + got.describe();
      for (size_t i = 0; i < want.string_tensor().data.size(); ++i)
        if (got.string_tensor().data[i] != want.string_tensor().data[i])
          return "string " + std::to_string(i) + " differs: got \"" + got.string_tensor().data[i] + "\", expected \"" +
                 want.string_tensor().data[i] + "\"";
      return "";
    case Value::Kind::Tensor: {
      if (got.elem_type() != want.elem_type() || got.shape() != want.shape())
        return "expected " + want.describe() + ", got " + got.describe();
      bool fl = is_float_type(want.elem_type());
      auto as_doubles = [&](const Value& v) {
        if (onnx::is_storage_type(v.elem_type()) && fl) return onnx::cast(v, ElemType::Double).array().to_vector<double>();
        return v.array().to_vector<double>();
      };
      if (!fl && (want.elem_type() == ElemType::Int64 || want.elem_type() == ElemType::UInt64)) {
        auto g = got.array().to_vector<int64_t>(), w = want.array().to_vector<int64_t>();
        int64_t bad = 0;
        size_t first = 0;
        for (size_t i = 0; i < w.size(); ++i)
          if (g[i] != w[i] && bad++ == 0) first = i;
        if (!bad) return "";
        return std::to_string(bad) + " of " + std::to_string(w.size()) + " values differ (first at " +
               std::to_string(first) + ": got " + std::to_string(g[first]) + ", expected " + std::to_string(w[first]) + ")";
      }
      auto g = as_doubles(got), w = as_doubles(want);
      const double rtol = relative_tolerance(want.elem_type());
      double reduction_atol = 0;
      if (fl && tol.reduction_length > 0) {
        double scale = 0;
        for (double x : w)
          if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
        reduction_atol = tol.reduction_length * unit_roundoff(want.elem_type()) * scale;
      }
      int64_t bad = 0;
      size_t first = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        bool ok;
        if (std::isnan(w[i]) || std::isnan(g[i])) ok = std::isnan(w[i]) && std::isnan(g[i]);
        else if (!fl) ok = g[i] == w[i];
        else if (std::isinf(w[i]) || std::isinf(g[i])) ok = g[i] == w[i];
        else ok = std::fabs(g[i] - w[i]) <= 1e-7 + rtol * std::fabs(w[i]) + reduction_atol;
        if (!ok && bad++ == 0) first = i;
      }
      if (!bad) return "";
      return std::to_string(bad) + " of " + std::to_string(w.size()) + " values differ (first at " +
             std::to_string(first) + ": got " + number(g[first]) + ", expected " + number(w[first]) + ")";
    }
    case Value::Kind::Sequence: {
      if (got.items().size() != want.items().size())
        return "expected a sequence of " + std::to_string(want.items().size()) + ", got " + std::to_string(got.items().size());
      for (size_t i = 0; i < want.items().size(); ++i) {
        std::string r = compare(got.items()[i], want.items()[i], tol);
        if (!r.empty()) return "sequence item " + std::to_string(i) + ": " + r;
      }
      return "";
    }
    case Value::Kind::Optional: {
      if (got.content().has_value() != want.content().has_value())
        return "expected " + want.describe() + ", got " + got.describe();
      return want.content() ? compare(*got.content(), *want.content(), tol) : "";
    }
    case Value::Kind::Map: return "map outputs are not compared";
  }
  return "";
}

/// What the parent asks of one case.
struct CaseRequest {
  std::string device;              // --device text
  bool compile = false;            // --compile
  bool run_skipped = false;        // --run-skipped
  std::vector<Skip> device_skips;  // the skip list's lines for this case with a device tag
};

// A case's result travels from the child as text: a kind letter, a compiled letter, then the text.
// Kinds: 'R' ran (text empty: passed, else why it failed), 'S' skipped on this device (text: the
// reason), 'P' skipped on this device but passes now (--run-skipped). Compiled: '1' when the
// compiled model ran every data set and equaled the eager run bit for bit.
std::string result_text(char kind, bool compiled, const std::string& text) {
  return std::string(1, kind) + (compiled ? '1' : '0') + text;
}

/// The elements of the case's largest input or initializer: a bound on any reduction's length.
double largest_input(const onnx::Model& model, const std::vector<Value>& given) {
  int64_t n = 1;
  for (const auto& v : given)
    if (v.is_tensor()) n = std::max(n, v.array().size());
  for (const auto& [name, v] : model.graph->initializers)
    if (v.is_tensor()) n = std::max(n, v.array().size());
  return static_cast<double>(n);
}

/// Runs one case; "" when it passes, else the reason. With request.compile, also runs the
/// compiled model (on the same device) on every data set and compares it with the eager outputs
/// bit for bit; `compiled_equal` tells whether it did and they were equal.
std::string run_case(const fs::path& dir, const CaseRequest& request, bool& compiled_equal) {
  compiled_equal = false;
  onnx::RunOptions options;
  options.device = device_option(request.device);
  onnx::Model model = onnx::load((dir / "model.onnx").string());
  std::vector<const onnx::ValueInfo*> inputs;
  std::set<std::string> init;
  for (const auto& [name, v] : model.graph->initializers) init.insert(name);
  for (const auto& in : model.graph->inputs)
    if (!init.count(in.name)) inputs.push_back(&in);
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return "no test_data_set_N folder";
  const bool reducing = has_reducing_op(model);
  std::optional<onnx::CompiledModel> compiled;
  if (request.compile) {
    onnx::CompileModelOptions co;
    co.device = options.device;
    compiled = onnx::compile(model, {}, co);
  }
  for (const auto& set : sets) {
    std::vector<Value> given;
    for (size_t k = 0;; ++k) {
      fs::path p = set / ("input_" + std::to_string(k) + ".pb");
      if (!fs::exists(p)) break;
      onnx::TypeInfo t = k < inputs.size() ? inputs[k]->type : onnx::TypeInfo{};
      given.push_back(onnx::load_value(p.string(), t));
    }
    std::map<std::string, Value> named;
    for (size_t k = 0; k < given.size() && k < inputs.size(); ++k) named[inputs[k]->name] = given[k];
    if (given.size() > inputs.size())
      return set.filename().string() + ": " + std::to_string(given.size()) + " input files for " +
             std::to_string(inputs.size()) + " graph inputs";
    std::map<std::string, Value> out = onnx::run_named(model, named, options);
    const auto& outs = model.graph->outputs;
    size_t expected_count = 0;
    while (fs::exists(set / ("output_" + std::to_string(expected_count) + ".pb"))) ++expected_count;
    if (expected_count != outs.size())
      return set.filename().string() + ": " + std::to_string(outs.size()) + " outputs, " +
             std::to_string(expected_count) + " expected";
    Tolerance tol;
    if (reducing) tol.reduction_length = largest_input(model, given);
    for (size_t k = 0; k < outs.size(); ++k) {
      Value want = onnx::load_value((set / ("output_" + std::to_string(k) + ".pb")).string(), outs[k].type);
      std::string r = compare(out.at(outs[k].name), want, tol);
      if (!r.empty()) return set.filename().string() + " output " + std::to_string(k) + " '" + outs[k].name + "': " + r;
    }
    if (!compiled) continue;
    std::map<std::string, Value> again;
    try {
      again = compiled->run_named(named, options);
    } catch (const std::exception& e) {
      return set.filename().string() + ": the compiled model raised: " + e.what();
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      std::string diff = first_difference(out.at(outs[k].name), again.at(outs[k].name));
      if (!diff.empty())
        return set.filename().string() + " output " + std::to_string(k) + " '" + outs[k].name +
               "': compiled differs from eager: " + diff;
    }
  }
  compiled_equal = compiled.has_value();
  return "";
}

/// The skip list's line for this case on the run's device type, or null.
const Skip* device_skip(const CaseRequest& request) {
  if (request.device_skips.empty()) return nullptr;
  const Device d = device_option(request.device);
  const char* type = d.type == Device::Type::Cpu ? "cpu" : "cuda";
  for (const auto& s : request.device_skips)
    if (s.device == type) return &s;
  return nullptr;
}

/// One case in this process; its result as result_text.
std::string run_case_caught(const fs::path& dir, const CaseRequest& request) {
  bool compiled_equal = false;
  try {
    const Skip* skip = device_skip(request);
    if (skip && !request.run_skipped) return result_text('S', false, skip->reason);
    std::string why = run_case(dir, request, compiled_equal);
    if (skip) return result_text(why.empty() ? 'P' : 'S', false, skip->reason);
    return result_text('R', compiled_equal, why);
  } catch (const std::exception& e) {
    std::string m = e.what();
    std::replace(m.begin(), m.end(), '\n', ' ');
    return result_text('R', false, m);
  }
}

/// Runs a case in a child process, so a crash or a hang fails that case only.
std::string run_case_forked(const fs::path& dir, int timeout_s, const CaseRequest& request) {
  int fds[2];
  if (pipe(fds) != 0) return run_case_caught(dir, request);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return run_case_caught(dir, request);
  }
  if (pid == 0) {
    close(fds[0]);
    alarm(static_cast<unsigned>(timeout_s));
    std::string r = run_case_caught(dir, request);
    const char* p = r.data();
    size_t left = r.size();
    while (left > 0) {
      ssize_t n = write(fds[1], p, left);
      if (n <= 0) break;
      p += n;
      left -= static_cast<size_t>(n);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string r;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) r.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return result_text('R', false,
                       sig == SIGALRM ? "timed out after " + std::to_string(timeout_s) + " s"
                                      : "crashed (signal " + std::to_string(sig) + ": " + strsignal(sig) + ")");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || r.size() < 2)
    return result_text('R', false, "the case's process failed");
  return r;
}

#endif  // SMELT_ONNX

}  // namespace

int run_check(const std::vector<std::string>& args) {
  bool help = false;
  CheckOptions o = parse_args(args, help);
  if (help) {
    std::printf("%s\n%s", kUsage, kHelp);
    return 0;
  }
#ifndef SMELT_ONNX
  throw UnsupportedError("this smelt was built without ONNX support (configure with -DSMELT_ONNX=ON)");
#else
  auto skips = read_skip_list(o.skip_list);
  auto cases = list_cases(o.dir);
  {
    // A skip that names no case is stale (a renamed or removed test): say so, don't fail.
    std::set<std::string> names;
    for (const auto& d : cases) names.insert(d.filename().string());
    for (const auto& [name, lines] : skips)
      if (!names.count(name) && cases.size() > 1) std::fprintf(stderr, "note: skip list names no case '%s'\n", name.c_str());
  }
  if (cases.empty())
    throw InvalidArgument("no test case in '" + o.dir + "' (a case is a folder with model.onnx and test_data_set_N/)");
  std::vector<fs::path> selected;
  for (const auto& dir : cases)
    if (o.filter.empty() || dir.filename().string().find(o.filter) != std::string::npos) selected.push_back(dir);
  if (selected.empty())
    throw InvalidArgument("no case name in '" + o.dir + "' contains '" + o.filter + "' (--filter; " +
                          std::to_string(cases.size()) + " case" + (cases.size() == 1 ? "" : "s") + " there)");
  ProgressLine progress("smelt check");
  int passed = 0, failed = 0, skipped = 0, device_skipped = 0, compiled_equal = 0;
  size_t done = 0;
  for (const auto& dir : selected) {
    std::string name = dir.filename().string();
    progress.show(std::to_string(done) + "/" + std::to_string(selected.size()) + " cases, " + std::to_string(failed) +
                  " failed: " + name);
    ++done;
    CaseRequest request;
    request.device = o.device;
    request.compile = o.compile;
    request.run_skipped = o.run_skipped;
    const Skip* everywhere = nullptr;
    if (auto it = skips.find(name); it != skips.end())
      for (const auto& s : it->second) {
        if (s.device.empty()) everywhere = &s;
        else request.device_skips.push_back(s);
      }
    auto run = [&] { return o.fork ? run_case_forked(dir, o.timeout_s, request) : run_case_caught(dir, request); };
    if (everywhere) {
      ++skipped;
      if (o.run_skipped) {
        request.device_skips.clear();
        std::string r = run();
        progress.clear();
        if (r[0] == 'R' && r.size() == 2) std::printf("SKIPPED BUT PASSES %s: delete it from the skip list\n", name.c_str());
      } else if (o.verbose) {
        progress.clear();
        std::printf("SKIP %s: %s\n", name.c_str(), everywhere->reason.c_str());
      }
      continue;
    }
    // The child decides device skips: only it resolves the device (a parent that touched CUDA
    // would leave its forked children unable to use it).
    const std::string r = run();
    progress.clear();  // a result line must not land after the progress text on a shared terminal
    const char kind = r[0];
    const std::string text = r.substr(2);
    if (kind == 'S' || kind == 'P') {
      ++skipped;
      ++device_skipped;
      if (kind == 'P')
        std::printf("SKIPPED BUT PASSES %s on this device: delete its device line from the skip list\n", name.c_str());
      else if (o.verbose)
        std::printf("SKIP %s (on this device): %s\n", name.c_str(), text.c_str());
    } else if (text.empty()) {
      ++passed;
      if (r[1] == '1') ++compiled_equal;
      if (o.verbose) std::printf("PASS %s\n", name.c_str());
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", name.c_str(), text.c_str());
    }
    std::fflush(stdout);
  }
  progress.clear();
  std::printf("%d passed, %d failed, %d skipped", passed, failed, skipped);
  if (device_skipped) std::printf(" (%d of them on this device only)", device_skipped);
  if (o.compile) std::printf("; %d compiled bit-equal to eager", compiled_equal);
  std::printf("\n");
  return failed == 0 ? 0 : 1;
#endif
}

}  // namespace smelt::cli
