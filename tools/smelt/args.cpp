// The shared argument parser of the smelt subcommands (args.h): one loop instead of one per command.
#include "tools/smelt/args.h"

#include <algorithm>
#include <optional>

#include "tools/smelt/commands.h"

namespace smelt::cli {
namespace {

/// Optimal-string-alignment distance: insertions, deletions, substitutions and swaps of two
/// neighbours each cost 1, so the common typos ("--repat", "rnu") are one step away.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_match(const std::string& text, const std::vector<std::string>& candidates) {
  // A unique prefix ("--rep" for "--repeat") is what the user meant before anything by distance.
  std::vector<std::string> prefixed;
  for (const auto& c : candidates)
    if (text.size() >= 3 && c.rfind(text, 0) == 0) prefixed.push_back(c);
  if (prefixed.size() == 1) return prefixed[0];
  std::string best;
  size_t best_distance = 0;
  for (const auto& c : candidates) {
    size_t d = edit_distance(text, c);
    if (best.empty() || d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  // Close means a typo or two, not a different word: at most a third of the name may differ.
  if (best.empty() || best_distance > std::max<size_t>(1, std::min(text.size(), best.size()) / 3)) return "";
  return best;
}

ParsedArgs parse_command_line(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs,
                              const std::string& usage) {
  ParsedArgs parsed;
  // The first error is kept, not thrown: -h anywhere on the line still prints the help.
  std::optional<std::string> error;
  auto fail = [&](const std::string& message) {
    if (!error) error = message;
  };
  std::vector<std::string> names{"--help", "-h"};
  for (const auto& s : specs) {
    names.push_back(s.name);
    if (s.short_name) names.push_back(s.short_name);
  }
  bool options_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (options_done || a.size() < 2 || a[0] != '-') {
      parsed.positionals.push_back(a);
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    if (a == "-h" || a == "--help") {
      parsed.help = true;
      continue;
    }
    // --opt=value; a short option takes its value as the next argument only.
    std::string name = a;
    std::optional<std::string> inline_value;
    if (auto eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
      name = a.substr(0, eq);
      inline_value = a.substr(eq + 1);
    }
    const OptionSpec* spec = nullptr;
    for (const auto& s : specs)
      if (name == s.name || (s.short_name && name == s.short_name)) spec = &s;
    if (!spec) {
      std::string suggestion = closest_match(name, names);
      fail("unknown option '" + name + "'" + (suggestion.empty() ? "" : "; did you mean '" + suggestion + "'?"));
      continue;
    }
    ParsedOption option{spec->name, ""};
    if (spec->takes_value) {
      if (inline_value) {
        option.value = *inline_value;
      } else if (i + 1 < args.size()) {
        option.value = args[++i];
      } else {
        fail(name + " needs a value");
        continue;
      }
    } else if (inline_value) {
      fail(name + " takes no value (got '" + a + "')");
      continue;
    }
    parsed.options.push_back(std::move(option));
  }
  if (error && !parsed.help) throw UsageError(*error + "\n" + usage);
  return parsed;
}

}  // namespace smelt::cli
