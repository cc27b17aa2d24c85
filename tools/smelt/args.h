// The one command-line convention of every smelt subcommand: --opt value, --opt=value, -h/--help, suggestions.
#pragma once

#include <string>
#include <vector>

#include "smelt/device.h"

namespace smelt::cli {

/// One option a command accepts. `name` is the long form ("--repeat"); `short_name` ("-O") may be
/// null. An option with `takes_value` reads the next argument or the text after '='.
struct OptionSpec {
  const char* name;
  const char* short_name;
  bool takes_value;
};

/// One option as given, named by its long form whichever form the user typed.
struct ParsedOption {
  std::string name;
  std::string value;  // "" for a flag
};

struct ParsedArgs {
  bool help = false;                     // -h or --help appeared (other errors are then ignored)
  std::vector<ParsedOption> options;     // in command-line order
  std::vector<std::string> positionals;  // everything else ("--" ends the options)
};

/// Splits `args` by `specs`. Raises UsageError "MESSAGE\nUSAGE" for an unknown option (with the
/// closest valid one: "unknown option '--repat'; did you mean '--repeat'?"), a missing value, or a
/// value given to a flag. -h and --help are always accepted.
ParsedArgs parse_command_line(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs,
                              const std::string& usage);

/// The candidate closest to `text` (edit distance, or a unique prefix), or "" when none is close
/// enough to be what the user meant.
std::string closest_match(const std::string& text, const std::vector<std::string>& candidates);

/// The exit statuses every command shares; `smelt help` documents them.
/// The device a command's `--device` value names; empty (not given): the default device, so that
/// SMELT_DEFAULT_DEVICE and the first-GPU rule apply as everywhere else.
inline Device device_option(const std::string& value) {
  return value.empty() ? default_device() : parse_device(value, "--device");
}

constexpr int kExitFailure = 1;  // the command ran and failed (a model error, an unreadable file, a failed check)
constexpr int kExitUsage = 2;    // the command line is malformed (nothing was run)

}  // namespace smelt::cli
