// Running the built smelt CLI from tests: its path, the repository's models, capture of stdout, stderr and status.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace smelt::test {

/// The repository root: this file lives in tests/tools/ (CMake compiles the tests by absolute path).
inline std::filesystem::path repo_root() {
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
}
inline std::string model(const std::string& name) { return (repo_root() / "models" / (name + ".onnx")).string(); }
inline std::string fixture(const std::string& name) {
  return (repo_root() / "tests" / "onnx" / "fixtures" / name).string();
}

/// The smelt binary: $SMELT_CLI, else tools/smelt/smelt in the build folder holding this test.
inline std::string cli_path() {
  if (const char* env = std::getenv("SMELT_CLI")) return env;
  return (std::filesystem::canonical("/proc/self/exe").parent_path().parent_path() / "tools" / "smelt" / "smelt")
      .string();
}

/// `s` quoted for sh.
inline std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct CliResult {
  int status = -1;
  std::string out;
  std::string err;
};

/// Runs `smelt ARGS...` with one thread; stdout and stderr go through files in `dir`.
inline CliResult run_cli(const std::vector<std::string>& args, const std::filesystem::path& dir) {
  // The CPU unless a test passes --device: with a GPU present the default would be the GPU, and
  // the tests' tiers, transfers and timings are the CPU's.
  std::string cmd = "SMELT_NUM_THREADS=1 SMELT_DEFAULT_DEVICE=cpu " + quote(cli_path());
  for (const auto& a : args) cmd += " " + quote(a);
  cmd += " >" + quote((dir / "stdout").string()) + " 2>" + quote((dir / "stderr").string());
  int raw = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_text(dir / "stdout");
  r.err = read_text(dir / "stderr");
  return r;
}

}  // namespace smelt::test
