// `smelt check DIR`: runs ONNX backend-format test cases (model.onnx + test_data_set_N) and compares
// the outputs as the ONNX runner does (count, type, shape; rtol 1e-3, atol 1e-7; NaN equals NaN).
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
};

constexpr const char* kUsage =
    "usage: smelt check DIR [--skip-list FILE] [--filter TEXT] [--device cpu|cuda[:N]] [--timeout SECONDS]\n"
    "                   [--verbose] [--no-fork] [--run-skipped]";

constexpr const char* kHelp =
    "\n"
    "Runs every case of DIR in the ONNX backend-test format (a folder with model.onnx and test_data_set_N/,\n"
    "or a folder of such folders), compares the outputs (count, type, shape; rtol 1e-3, atol 1e-7; NaN\n"
    "equals NaN), prints one line per failing case and then `N passed, N failed, N skipped`. Exit status 0\n"
    "when no case failed, 1 when one did or when no case was found (or none matches --filter). On a\n"
    "terminal a progress line (cases done / total) is shown on stderr.\n"
    "\n"
    "  --skip-list FILE      cases to skip: one name per line with a `# reason`\n"
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
      {"--device", nullptr, true},
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

/// The skip list: one case name per line with a `# reason`; blank lines and comment lines are
/// ignored. A line without a reason is an error, so every skip says why.
std::map<std::string, std::string> read_skip_list(const std::string& path) {
  std::map<std::string, std::string> skips;
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
    std::string reason = hash == std::string::npos ? "" : line.substr(hash + 1);
    reason.erase(0, reason.find_first_not_of(" \t"));
    reason.erase(reason.find_last_not_of(" \t\r") + 1);
    if (reason.empty())
      throw InvalidArgument(path + ":" + std::to_string(number) + ": skipped case '" + name +
                            "' has no reason (write `name  # reason`)");
    skips[name] = reason;
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

/// "" when `got` matches `want`, else why not.
std::string compare(const Value& got, const Value& want) {
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
      int64_t bad = 0;
      size_t first = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        bool ok;
        if (std::isnan(w[i]) || std::isnan(g[i])) ok = std::isnan(w[i]) && std::isnan(g[i]);
        else if (!fl) ok = g[i] == w[i];
        else if (std::isinf(w[i]) || std::isinf(g[i])) ok = g[i] == w[i];
        else ok = std::fabs(g[i] - w[i]) <= 1e-7 + 1e-3 * std::fabs(w[i]);
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
        std::string r = compare(got.items()[i], want.items()[i]);
        if (!r.empty()) return "sequence item " + std::to_string(i) + ": " + r;
      }
      return "";
    }
    case Value::Kind::Optional: {
      if (got.content().has_value() != want.content().has_value())
        return "expected " + want.describe() + ", got " + got.describe();
      return want.content() ? compare(*got.content(), *want.content()) : "";
    }
    case Value::Kind::Map: return "map outputs are not compared";
  }
  return "";
}

/// Runs one case; "" when it passes, else the reason.
std::string run_case(const fs::path& dir, const std::string& device) {
  onnx::RunOptions options;
  options.device = parse_device(device, "--device");
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
    for (size_t k = 0; k < outs.size(); ++k) {
      Value want = onnx::load_value((set / ("output_" + std::to_string(k) + ".pb")).string(), outs[k].type);
      std::string r = compare(out.at(outs[k].name), want);
      if (!r.empty()) return set.filename().string() + " output " + std::to_string(k) + " '" + outs[k].name + "': " + r;
    }
  }
  return "";
}

std::string run_case_caught(const fs::path& dir, const std::string& device) {
  try {
    return run_case(dir, device);
  } catch (const std::exception& e) {
    std::string m = e.what();
    std::replace(m.begin(), m.end(), '\n', ' ');
    return m;
  }
}

/// Runs a case in a child process, so a crash or a hang fails that case only.
std::string run_case_forked(const fs::path& dir, int timeout_s, const std::string& device) {
  int fds[2];
  if (pipe(fds) != 0) return run_case_caught(dir, device);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return run_case_caught(dir, device);
  }
  if (pid == 0) {
    close(fds[0]);
    alarm(static_cast<unsigned>(timeout_s));
    std::string r = run_case_caught(dir, device);
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
    return sig == SIGALRM ? "timed out after " + std::to_string(timeout_s) + " s"
                          : "crashed (signal " + std::to_string(sig) + ": " + strsignal(sig) + ")";
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "the case's process failed";
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
    for (const auto& [name, reason] : skips)
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
  int passed = 0, failed = 0, skipped = 0;
  size_t done = 0;
  for (const auto& dir : selected) {
    std::string name = dir.filename().string();
    progress.show(std::to_string(done) + "/" + std::to_string(selected.size()) + " cases, " + std::to_string(failed) +
                  " failed: " + name);
    ++done;
    if (skips.count(name)) {
      ++skipped;
      if (o.run_skipped) {
        std::string why = o.fork ? run_case_forked(dir, o.timeout_s, o.device) : run_case_caught(dir, o.device);
        progress.clear();
        if (why.empty()) std::printf("SKIPPED BUT PASSES %s: delete it from the skip list\n", name.c_str());
      } else if (o.verbose) {
        progress.clear();
        std::printf("SKIP %s: %s\n", name.c_str(), skips[name].c_str());
      }
      continue;
    }
    std::string reason = o.fork ? run_case_forked(dir, o.timeout_s, o.device) : run_case_caught(dir, o.device);
    progress.clear();  // a result line must not land after the progress text on a shared terminal
    if (reason.empty()) {
      ++passed;
      if (o.verbose) std::printf("PASS %s\n", name.c_str());
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", name.c_str(), reason.c_str());
    }
    std::fflush(stdout);
  }
  progress.clear();
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed == 0 ? 0 : 1;
#endif
}

}  // namespace smelt::cli
