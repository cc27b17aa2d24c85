// The smelt command-line tool: dispatches `smelt <command> [args]` to the subcommands.
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "smelt/errors.h"
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
    {"help", "", "show this help", run_help},
    {"version", "", "print the version (also --version)", run_version},
};

void print_usage(FILE* out) {
  std::fprintf(out, "usage: smelt <command> [arguments]\n\ncommands:\n");
  for (const auto& c : kCommands) {
    std::string head = std::string(c.name) + (c.args[0] ? std::string(" ") + c.args : "");
    std::fprintf(out, "  %-12s %s\n", head.c_str(), c.summary);
  }
  std::fprintf(out,
               "\nenvironment:\n"
               "  SMELT_NUM_THREADS  threads for CPU kernels (default: all cores)\n");
}

int run_help(const std::vector<std::string>&) {
  std::printf("smelt %s: a tensor compiler for C++ (arrays, compile, ONNX)\n\n", SMELT_VERSION);
  print_usage(stdout);
  return 0;
}

int run_version(const std::vector<std::string>&) {
  std::printf("smelt %s\n", SMELT_VERSION);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  std::string name = argv[1];
  if (name == "--version" || name == "-V") name = "version";
  if (name == "--help" || name == "-h") name = "help";
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const auto& c : kCommands) {
    if (name != c.name) continue;
    try {
      return c.run(args);
    } catch (const smelt::cli::UsageError& e) {
      std::fprintf(stderr, "smelt %s: %s\n", c.name, e.what());
      return 2;
    } catch (const smelt::Error& e) {
      std::fprintf(stderr, "smelt %s: %s\n", c.name, e.what());
      return 1;
    } catch (const std::bad_alloc& e) {
      // Model-made failures arrive as smelt errors naming the node; this is what is left (a
      // host allocation outside any node, e.g. while reading an input file).
      std::fprintf(stderr, "smelt %s: out of memory (%s)\n", c.name, e.what());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "smelt %s: internal error: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "smelt: unknown command '%s'\n\n", name.c_str());
  print_usage(stderr);
  return 2;
}
