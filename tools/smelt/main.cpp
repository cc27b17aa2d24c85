// The smelt command-line tool: dispatches `smelt <command> [args]` to the subcommands.
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "smelt/errors.h"
#include "tools/smelt/args.h"
#include "tools/smelt/commands.h"
#include "tools/smelt/onnx_commands.h"

namespace {

struct Command {
  const char* name;
  const char* args;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

int run_help(const std::vector<std::string>& args);
int run_version(const std::vector<std::string>& args);

const Command kCommands[] = {
    {"demo", "", "build, evaluate and print a few computations with timings (MLP, matmul, element-wise eager and compiled, sum)",
     smelt::cli::run_demo},
    {"run", "MODEL", "run an ONNX model on given or random inputs: outputs, leading values, timings (--help for options)",
     smelt::cli::run_model},
    {"check", "DIR", "run ONNX backend-format test cases in DIR and compare their outputs", smelt::cli::run_check},
    {"info", "MODEL", "summarize an ONNX model: inputs, outputs, opsets, operators", smelt::cli::run_info},
    {"view", "MODEL", "write an offline HTML view of an ONNX model's graph (--compile: colored by compiled segment)",
     smelt::cli::run_view},
    {"help", "[CMD]", "show this help, or CMD's (the same as smelt CMD --help)", run_help},
    {"version", "", "print the version (also --version)", run_version},
};

void print_usage(FILE* out) {
  std::fprintf(out, "usage: smelt <command> [arguments]\n\ncommands:\n");
  for (const auto& c : kCommands) {
    std::string head = std::string(c.name) + (c.args[0] ? std::string(" ") + c.args : "");
    std::fprintf(out, "  %-12s %s\n", head.c_str(), c.summary);
  }
  std::fprintf(out,
               "\nevery command takes -h/--help (or: smelt help CMD), options as --opt value or --opt=value,\n"
               "and -o, where a command has it, names its one output file. On a terminal, long steps (kernel\n"
               "builds, a check over a suite) show a progress line on stderr; nothing extra otherwise.\n"
               "\nexit status: 0 success; 1 the command failed (a model error, an unreadable file, a failed\n"
               "check); 2 a usage error (a malformed command line: nothing was run).\n"
               "\nenvironment:\n"
               "  SMELT_NUM_THREADS  threads for CPU kernels (default: all cores)\n");
}

const Command* find_command(const std::string& name) {
  for (const auto& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

/// "unknown command 'NAME'" with the closest command's name when one is close.
std::string unknown_command(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& c : kCommands) names.push_back(c.name);
  std::string suggestion = smelt::cli::closest_match(name, names);
  return "unknown command '" + name + "'" + (suggestion.empty() ? "" : "; did you mean '" + suggestion + "'?");
}

int run_help(const std::vector<std::string>& args) {
  auto parsed = smelt::cli::parse_command_line(args, {}, "usage: smelt help [CMD]");
  if (parsed.positionals.size() > 1) throw smelt::cli::UsageError("more than one command given\nusage: smelt help [CMD]");
  if (parsed.positionals.size() == 1 && parsed.positionals[0] != "help") {
    const Command* c = find_command(parsed.positionals[0]);
    if (!c) throw smelt::cli::UsageError(unknown_command(parsed.positionals[0]) + "\nusage: smelt help [CMD]");
    return c->run({"--help"});
  }
  std::printf("smelt %s: a tensor compiler for C++ (arrays, compile, ONNX)\n\n", SMELT_VERSION);
  print_usage(stdout);
  return 0;
}

int run_version(const std::vector<std::string>& args) {
  auto parsed = smelt::cli::parse_command_line(args, {}, "usage: smelt version");
  if (parsed.help) {
    std::printf("usage: smelt version (also smelt --version, smelt -V)\n\nPrints the version.\n");
    return 0;
  }
  if (!parsed.positionals.empty())
    throw smelt::cli::UsageError("unexpected argument '" + parsed.positionals[0] + "'\nusage: smelt version");
  std::printf("smelt %s\n", SMELT_VERSION);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return smelt::cli::kExitUsage;
  }
  std::string name = argv[1];
  if (name == "--version" || name == "-V") name = "version";
  if (name == "--help" || name == "-h") name = "help";
  std::vector<std::string> args(argv + 2, argv + argc);
  if (const Command* found = find_command(name)) {
    const Command& c = *found;
    try {
      return c.run(args);
    } catch (const smelt::cli::UsageError& e) {
      std::fprintf(stderr, "smelt %s: %s\n", c.name, e.what());
      return smelt::cli::kExitUsage;
    } catch (const smelt::Error& e) {
      std::fprintf(stderr, "smelt %s: %s\n", c.name, e.what());
      return smelt::cli::kExitFailure;
    } catch (const std::bad_alloc& e) {
      // Model-made failures arrive as smelt errors naming the node; this is what is left (a
      // host allocation outside any node, e.g. while reading an input file).
      std::fprintf(stderr, "smelt %s: out of memory (%s)\n", c.name, e.what());
      return smelt::cli::kExitFailure;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "smelt %s: internal error: %s\n", c.name, e.what());
      return smelt::cli::kExitFailure;
    }
  }
  std::fprintf(stderr, "smelt: %s\n\n", unknown_command(name).c_str());
  print_usage(stderr);
  return smelt::cli::kExitUsage;
}
