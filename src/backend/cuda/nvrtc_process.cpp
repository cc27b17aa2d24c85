// NVRTC compiles in the smelt-nvrtc helper process: finding the helper, running it, reading back.
//
// Why: NVRTC serializes the compiles of one process on some machines (8 threads compiling a
// 40 ms kernel took 311 ms on the H200 host, 8 processes 30-45 ms each), so the kernels a first
// call prebuilds side by side would build one after another. The helper is started with
// posix_spawn, never fork(): the process may hold a CUDA context and many threads, and
// posix_spawn (vfork-like in glibc) neither copies the address space nor runs anything of ours
// in the child before exec.
#include "src/backend/cuda/nvrtc_process.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

extern char** environ;

#ifndef SMELT_LIBDIR_TO_LIBEXEC
#define SMELT_LIBDIR_TO_LIBEXEC "../libexec"
#endif

namespace smelt::cuda {

namespace {

bool executable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

/// smelt-nvrtc where the build tree or an install put it, relative to the loaded libsmelt.
std::string find_helper_near_library() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&find_helper_near_library), &info) || !info.dli_fname) return "";
  std::string dir = info.dli_fname;
  const size_t slash = dir.rfind('/');
  dir = slash == std::string::npos ? "." : dir.substr(0, slash);
  for (const std::string& candidate : {dir + "/smelt-nvrtc", dir + "/" SMELT_LIBDIR_TO_LIBEXEC "/smelt/smelt-nvrtc",
                                       dir + "/../libexec/smelt/smelt-nvrtc"})
    if (executable(candidate)) return candidate;
  return "";
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::ostringstream s;
  s << f.rdbuf();
  if (f.bad()) return std::nullopt;
  return s.str();
}

bool write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  f.close();
  return static_cast<bool>(f);
}

std::string first_line(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

/// A private temporary folder (mode 0700), removed with its files.
struct TempDir {
  std::string path;
  std::vector<std::string> files;
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base ? base : "/tmp") + "/smelt-nvrtc-XXXXXX";
    if (::mkdtemp(templ.data())) path = templ;
  }
  std::string file(const std::string& name) {
    files.push_back(path + "/" + name);
    return files.back();
  }
  ~TempDir() {
    if (path.empty()) return;
    for (const auto& f : files) ::unlink(f.c_str());
    ::rmdir(path.c_str());
  }
};

}  // namespace

std::string nvrtc_helper_path(std::string& why, bool& always) {
  always = false;
  const char* env = std::getenv("SMELT_CUDA_NVRTC_HELPER");
  const std::string mode = env ? env : "";
  if (mode == "0") {
    why = "SMELT_CUDA_NVRTC_HELPER=0";
    return "";
  }
  if (!mode.empty() && mode != "auto" && mode != "1") {
    always = true;
    return mode;  // a wrong path is found out by the spawn, and reported the same way as a crash
  }
  static const std::string found = find_helper_near_library();
  if (found.empty()) why = "smelt-nvrtc not found next to libsmelt or in its libexec folder";
  always = mode == "1";
  return found;
}

std::string nvrtc_library_path(const NvrtcApi& api) {
  Dl_info info{};
  if (!api.nvrtcVersion || !dladdr(reinterpret_cast<void*>(api.nvrtcVersion), &info) || !info.dli_fname) return "";
  return info.dli_fname;
}

std::optional<NvrtcOutcome> compile_in_helper(const std::string& helper, const std::string& nvrtc_library,
                                              int compute_capability, const std::string& source, bool sass,
                                              std::string& why) {
  TempDir dir;
  if (dir.path.empty()) {
    why = std::string("cannot make a temporary folder: ") + std::strerror(errno);
    return std::nullopt;
  }
  const std::string source_path = dir.file("kernel.cu"), output_path = dir.file("kernel.out"),
                    log_path = dir.file("helper.log");
  if (!write_file(source_path, source)) {
    why = "cannot write " + source_path;
    return std::nullopt;
  }
  std::vector<std::string> args = {helper, "--arch", std::to_string(compute_capability)};
  if (!sass) args.push_back("--ptx");
  if (!nvrtc_library.empty()) args.insert(args.end(), {"--nvrtc", nvrtc_library});
  args.insert(args.end(), {source_path, output_path});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // The helper reads nothing, writes its complaints to a file of the folder, and inherits no
  // other descriptor (a pipe of the application kept open by it would delay the reader's EOF).
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#endif
  // The calling thread may block signals (a prebuild thread, an application's worker): the
  // helper starts with none blocked.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, helper.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    why = "cannot start " + helper + ": " + std::strerror(rc);
    return std::nullopt;
  }
  int status = 0;
  pid_t waited;
  while ((waited = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (waited != pid) {  // e.g. SIGCHLD ignored, or an application's handler reaped it first
    why = std::string("cannot wait for ") + helper + ": " + std::strerror(errno);
    return std::nullopt;
  }
  if (WIFSIGNALED(status)) {
    why = helper + " was killed by signal " + std::to_string(WTERMSIG(status));
    return std::nullopt;
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code != 0 && code != 1) {
    const auto log = read_file(log_path);
    why = helper + " exited with status " + std::to_string(code) + (log && !log->empty() ? ": " + first_line(*log) : "");
    return std::nullopt;
  }
  auto output = read_file(output_path);
  if (!output || (code == 0 && output->empty())) {
    why = "cannot read " + helper + "'s output " + output_path;
    return std::nullopt;
  }
  NvrtcOutcome out;
  if (code == 0) {
    out.status = NvrtcOutcome::Compiled;
    out.image = std::move(*output);
  } else {
    const size_t nl = output->find('\n');
    if (nl == std::string::npos) {
      why = helper + " rejected the source without NVRTC's log";
      return std::nullopt;
    }
    out.status = NvrtcOutcome::Rejected;
    out.error = output->substr(0, nl);
    out.log = output->substr(nl + 1);
  }
  return out;
}

}  // namespace smelt::cuda
