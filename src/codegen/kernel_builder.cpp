// Compiles generated C++ into shared objects, caches them (disk_cache.h), loads and unloads them.
#include "src/codegen/kernel_builder.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "smelt/errors.h"
#include "smelt/telemetry.h"
#include "src/backend/cpu/elementwise_math.h"
#include "src/codegen/kernel_params.h"

#ifndef SMELT_CXX_COMPILER
#define SMELT_CXX_COMPILER "c++"
#endif

extern char** environ;

namespace smelt::codegen {

namespace fs = std::filesystem;

namespace {

// Flags are part of the key. No fast math and no FMA contraction: the kernels must round exactly
// as the unfused kernels do. Without math errno a square root is the plain instruction (the same
// correctly rounded result) rather than a conditional library call, so loops with sqrt vectorize.
// -Bsymbolic binds the kernel's calls to its own copies of the embedded inline functions (the
// row order's reduce_run, minmax_contiguous, ...): without it the dynamic linker resolves them to
// libsmelt's instances of the same templates, built for the baseline ISA, not the kernel's.
constexpr const char* kBaseFlags =
    "-std=c++20 -O3 -ffp-contract=off -fno-fast-math -fno-math-errno -fPIC -shared -Wl,-Bsymbolic -w";

// The vector ISA from the running CPU, capped as the eager math is (cpu::cpu_isa(),
// SMELT_CPU_ISA): x86-64-v4 (AVX-512) when the eager float32 math uses it, else AVX2 when the CPU
// has AVX2 and FMA, else SSE4.2, else the x86-64 baseline. The float32 transcendentals compute
// in double, so AVX-512 doubles the lanes of the loops that dominate softmax and GELU; the
// softmax row kernel ran about 25% faster than with AVX2 (docs/compile.md, "Row kernels on the
// CPU"). The bits are the same on every ISA (no contraction; vector_math.h).
const std::string& isa_flags() {
  static const std::string flags = [] {
#if defined(__x86_64__)
    if (cpu::cpu_isa() == cpu::CpuIsa::Baseline) return std::string();
    if (cpu::cpu_isa() == cpu::CpuIsa::Avx512) return std::string("-march=x86-64-v4");
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return std::string("-march=x86-64-v3");
    if (__builtin_cpu_supports("sse4.2")) return std::string("-march=x86-64-v2");
#endif
    return std::string();
  }();
  return flags;
}


uint64_t fnv1a(const std::string& s, uint64_t h = 0xcbf29ce484222325ull) { return fnv1a64(s.data(), s.size(), h); }

std::string hex64(uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::string compiler() {
  const char* env = std::getenv("SMELT_CXX");
  return env && *env ? env : SMELT_CXX_COMPILER;
}

// The first line of `compiler --version`, run once per process.
const std::string& compiler_identity() {
  static const std::string id = [] {
    std::string cmd = compiler() + " --version 2>/dev/null";
    std::string line;
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char buf[256];
      if (fgets(buf, sizeof buf, p)) line = buf;
      pclose(p);
    }
    return line;
  }();
  return id;
}

// GCC marks inline variables and static locals of inline functions STB_GNU_UNIQUE, and glibc
// never unloads a library that has such symbols: dlclose would leave every kernel mapped. Clang
// emits none (and does not know the flag).
const std::string& flags() {
  static const std::string f = std::string(kBaseFlags) + " " + isa_flags() +
                               (compiler_identity().find("clang") == std::string::npos ? " -fno-gnu-unique" : "");
  return f;
}

// Compiler processes started by the background builder's threads, by process group: the
// builder kills them at exit instead of waiting seconds for a kernel nobody will run.
std::mutex g_children_mutex;
std::unordered_set<pid_t> g_children;
thread_local bool t_background_builder = false;
bool g_stopping = false;  // under g_children_mutex: the builder stopped at exit

// Runs `cmd` through /bin/sh in a process group of its own (so that a kill reaches the compiler
// the shell started) and returns the wait status, or -1 when it could not be started.
int run_shell(const std::string& cmd) {
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  const char* argv[] = {"sh", "-c", cmd.c_str(), nullptr};
  pid_t pid = -1;
  int rc = 0;
  if (t_background_builder) {
    // Started and registered under the lock, so that the builder's stop either sees it (and
    // kills it) or prevents it.
    std::lock_guard lock(g_children_mutex);
    rc = g_stopping ? -1 : posix_spawn(&pid, "/bin/sh", nullptr, &attr, const_cast<char* const*>(argv), environ);
    if (rc == 0) g_children.insert(pid);
  } else {
    rc = posix_spawn(&pid, "/bin/sh", nullptr, &attr, const_cast<char* const*>(argv), environ);
  }
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return -1;
  int status = 0;
  pid_t w;
  do {
    w = ::waitpid(pid, &status, 0);
  } while (w < 0 && errno == EINTR);
  if (t_background_builder) {
    std::lock_guard lock(g_children_mutex);
    g_children.erase(pid);
  }
  return w < 0 ? -1 : status;
}

std::string run_compiler(const std::string& src, const std::string& out) {
  std::string log = out + ".log";
  std::string cmd = compiler() + " " + flags() + " -o '" + out + "' '" + src + "' >'" + log + "' 2>&1";
  int rc = run_shell(cmd);
  std::string msg;
  if (rc != 0) {
    std::ifstream f(log);
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // A wait status: say what the compiler did, not the raw number.
    std::string how = rc == -1                ? "could not be started"
                      : WIFEXITED(rc)         ? "exited with status " + std::to_string(WEXITSTATUS(rc))
                      : WIFSIGNALED(rc)       ? "was killed by signal " + std::to_string(WTERMSIG(rc))
                                              : "failed (wait status " + std::to_string(rc) + ")";
    msg = "`" + compiler() + "` " + how + (all.empty() ? "" : ": " + all.substr(0, 2000));
  }
  std::error_code ec;
  fs::remove(log, ec);
  return msg;
}

// One loaded kernel library. Held by every FusedKernel that runs its code; the last holder
// unloads it, so kernels of dropped compiled functions (a new constant per call makes a new
// kernel each time) do not pile up in the process.
std::atomic<size_t> loaded_count{0};

//
// `path` is what the library was loaded from (/proc/self/fd/<fd> of a memory file, else a
// temporary file), kept in existence for as long as the library is loaded: the loader matches
// libraries by path before anything else, so a later kernel loaded under the same path would
// get this one back. Should the library outlive dlclose (a loader that keeps it), the path
// stays taken for the same reason.
struct LoadedKernel {
  void* handle;
  CpuKernelFn fn;
  std::string hash;
  int fd;              // the memory file, or -1
  std::string path;    // what dlopen was given
  bool temp_file;      // `path` is a temporary file to remove once unloaded
  LoadedKernel(void* h, CpuKernelFn f, std::string hs, int file, std::string p, bool temp)
      : handle(h), fn(f), hash(std::move(hs)), fd(file), path(std::move(p)), temp_file(temp) {
    loaded_count++;
  }
  ~LoadedKernel() {
    dlclose(handle);
    loaded_count--;
    if (fn && telemetry::enabled())
      telemetry::emit({"compile.kernel.unload", 0.0, {{"device", "cpu"}, {"hash", hash}}});
    if (void* still = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
      dlclose(still);
      return;  // still loaded: keep the path taken
    }
    if (fd >= 0) ::close(fd);
    if (temp_file) ::unlink(path.c_str());
  }
  LoadedKernel(const LoadedKernel&) = delete;
  LoadedKernel& operator=(const LoadedKernel&) = delete;
};

struct Cache {
  std::mutex mutex;
  std::condition_variable built;  // signalled when a build ends
  // hash -> loaded kernel, while anyone holds it.
  std::unordered_map<std::string, std::weak_ptr<LoadedKernel>> by_hash;
  std::unordered_set<std::string> building;  // hashes some thread is building now
  // program -> loaded kernel: a retrace finds its kernel without generating and hashing the
  // source (preamble included, about 100 KB). Keyed by the whole program (kernel_params.h), the
  // one thing the source is generated from.
  std::unordered_map<FusedProgram, std::weak_ptr<LoadedKernel>, ProgramHash> by_program;
  size_t prune_at = 256;

  // Drops the entries of unloaded kernels once the maps have doubled since the last sweep:
  // amortized constant time, and the maps stay proportional to the kernels loaded.
  void prune_locked() {
    if (by_hash.size() + by_program.size() < prune_at) return;
    std::erase_if(by_hash, [](const auto& kv) { return kv.second.expired(); });
    std::erase_if(by_program, [](const auto& kv) { return kv.second.expired(); });
    prune_at = std::max<size_t>(256, 2 * (by_hash.size() + by_program.size()));
  }
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: kernels may be unloaded during exit
  return *c;
}

/// A private folder under the system's temporary directory, removed with the object: builds
/// never depend on the cache folder being writable.
struct BuildDir {
  fs::path path;
  BuildDir() {
    std::error_code ec;
    fs::path base = fs::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string tmpl = (base / "smelt-kernel-build-XXXXXX").string();
    if (!::mkdtemp(tmpl.data()))
      throw UnsupportedError("fuse: cannot create a folder to build the kernel in under " + base.string() + ": " +
                             std::strerror(errno));
    path = tmpl;
  }
  ~BuildDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  BuildDir(const BuildDir&) = delete;
  BuildDir& operator=(const BuildDir&) = delete;
};

/// Compiles `source` and returns the shared library's bytes. Throws UnsupportedError.
std::string build_library(const std::string& source, const std::string& hash) {
  BuildDir dir;
  const fs::path src = dir.path / (hash + ".cpp"), so = dir.path / (hash + ".so");
  {
    std::ofstream f(src);
    f << source;
    if (!f) throw UnsupportedError("fuse: cannot write kernel source to " + src.string());
  }
  std::string err = run_compiler(src.string(), so.string());
  if (!err.empty()) throw UnsupportedError("fuse: building a fused kernel failed: " + err);
  std::ifstream f(so, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (!f.good() && !f.eof()) throw UnsupportedError("fuse: cannot read the built kernel " + so.string());
  return bytes;
}

bool write_fd(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

/// Loads a kernel library from its bytes, or returns null and says why. The bytes go to an
/// anonymous memory file (memfd) that is then loaded: the code mapped is exactly the bytes
/// verified, and nothing done to the cache file later (truncated in place, the SIGBUS of
/// issue #12) can reach this process. Without memfd or /proc, a private temporary file.
std::shared_ptr<LoadedKernel> load_library(const std::string& bytes, const std::string& hash, std::string& why) {
  int fd = -1;
  std::string path, temp_file;
  if (::access("/proc/self/fd", X_OK) == 0) fd = ::memfd_create(("smelt-kernel-" + hash).c_str(), MFD_CLOEXEC);
  if (fd >= 0) {
    path = "/proc/self/fd/" + std::to_string(fd);
  } else {
    std::error_code ec;
    fs::path base = fs::temp_directory_path(ec);
    std::string tmpl = ((ec ? fs::path("/tmp") : base) / "smelt-kernel-XXXXXX.so").string();
    fd = ::mkstemps(tmpl.data(), 3);
    if (fd < 0) {
      why = std::string("cannot create a temporary file: ") + std::strerror(errno);
      return nullptr;
    }
    path = temp_file = tmpl;
  }
  void* handle = nullptr;
  if (!write_fd(fd, bytes)) {
    why = std::string("cannot write the library to memory: ") + std::strerror(errno);
  } else {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) why = dlerror();
  }
  const bool temp = !temp_file.empty();
  if (temp) {  // the mapping keeps what it needs; the file stays while loaded (see LoadedKernel)
    ::close(fd);
    fd = -1;
  }
  if (!handle) {
    if (fd >= 0) ::close(fd);
    if (temp) ::unlink(temp_file.c_str());
    return nullptr;
  }
  auto fn = reinterpret_cast<CpuKernelFn>(dlsym(handle, kCpuKernelSymbol));
  if (!fn) {
    why = std::string("the library lacks ") + kCpuKernelSymbol;
    LoadedKernel unload(handle, nullptr, hash, fd, path, temp);  // unloads it the careful way
    return nullptr;
  }
  return std::make_shared<LoadedKernel>(handle, fn, hash, fd, path, temp);
}

}  // namespace

namespace {

/// What names a kernel: its program's bytes, its source, and the hash of the source with the
/// compiler, the flags and smelt's version (the build cache key).
struct KernelId {
  std::string source;
  std::string key_text;  // what the hash covers besides the source, stored in the entry
  std::string hash;
};

KernelId identify(const FusedProgram& program) {
  KernelId id;
  id.source = emit_cpu_kernel(program);
  std::string compiler_id = compiler_identity();
  while (!compiler_id.empty() && (compiler_id.back() == '\n' || compiler_id.back() == '\r')) compiler_id.pop_back();
  // An entry of another kernel (another source, compiler, flags or version) copied under this
  // hash is refused.
  id.key_text = "source-fnv1a=" + hex64(fnv1a(id.source)) + "\nsmelt=" SMELT_VERSION "\ncompiler=" + compiler_id +
                "\nflags=" + flags();
  id.hash = hex64(fnv1a(id.key_text, fnv1a(id.source)));
  return id;
}

BuiltKernel built_from(const std::shared_ptr<LoadedKernel>& lib) {
  return BuiltKernel{lib->fn, lib->hash, std::shared_ptr<const void>(lib)};
}

/// The kernel of `program` from memory, the disk cache, or the compiler.
BuiltKernel obtain_cpu_kernel(const FusedProgram& program) {
  auto& c = cache();
  {
    std::lock_guard lock(c.mutex);
    if (auto it = c.by_program.find(program); it != c.by_program.end())
      if (auto lib = it->second.lock()) return built_from(lib);
  }
  const KernelId id = identify(program);
  const std::string& hash = id.hash;

  // The lock is not held while compiling: other threads keep building and loading other
  // kernels; a thread that needs the kernel being built waits for it instead of building twice.
  {
    std::unique_lock lock(c.mutex);
    std::shared_ptr<LoadedKernel> lib;
    auto found = [&] {
      auto it = c.by_hash.find(hash);
      lib = it == c.by_hash.end() ? nullptr : it->second.lock();
      return lib || !c.building.count(hash);
    };
    c.built.wait(lock, found);
    if (lib) {
      c.by_program[program] = lib;
      c.prune_locked();
      return built_from(lib);
    }
    c.building.insert(hash);
  }
  struct EndBuild {
    Cache& c;
    const std::string& hash;
    ~EndBuild() {
      {
        std::lock_guard lock(c.mutex);
        c.building.erase(hash);
      }
      c.built.notify_all();
    }
  } end_build{c, hash};
  const auto t0 = std::chrono::steady_clock::now();
  const CacheEntry entry{"cpu", "cpu", hash, id.key_text, "cpp"};
  std::shared_ptr<LoadedKernel> lib;
  bool on_disk = false;
  if (auto bytes = read_cache_entry(entry)) {  // verified: header, key and checksum
    std::string why;
    lib = load_library(*bytes, hash, why);
    if (lib) on_disk = true;
    else reject_cache_entry(entry, "cannot load: " + why);
  }
  if (!lib) {
    const std::string bytes = build_library(id.source, hash);
    std::string why;
    lib = load_library(bytes, hash, why);
    if (!lib) throw UnsupportedError("fuse: cannot load the fused kernel " + hash + ": " + why);
    // Best effort: an unwritable or full disk costs a rebuild in the next process, and the
    // event compile.kernel.cache.write_failed says why. Written to a temporary file and renamed.
    write_cache_entry(entry, bytes, id.source);
  }
  {
    std::lock_guard lock(c.mutex);
    c.by_hash[hash] = lib;
    c.by_program[program] = lib;
    c.prune_locked();
  }
  if (telemetry::enabled()) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    telemetry::emit({"compile.kernel.build",
                     ms,
                     {{"device", "cpu"},
                      {"hash", hash},
                      {"cached_on_disk", on_disk ? "true" : "false"},
                      {"background", t_background_builder ? "true" : "false"},
                      {"program", describe_program(program)}}});
  }
  return built_from(lib);
}

}  // namespace

/// The threads that build kernels for tiered execution, and their queue of (batch, kernel).
/// Made once and never destroyed; a static guard stops it at exit: queued kernels are dropped,
/// running compiler processes are killed and the threads joined, so that no thread outlives
/// the statics it uses and no entry is left half written (entries are renamed into place).
struct BackgroundBuilder {
  std::mutex mutex;
  std::condition_variable work;
  std::condition_variable idle;
  std::deque<std::pair<std::shared_ptr<KernelBatch>, size_t>> queue;
  size_t running = 0;
  bool stopped = false;
  int pauses = 0;  // BackgroundBuildsPaused objects alive: no new kernel starts
  std::vector<std::thread> threads;
  // The threads exist in this process only: a child made by fork() has none of them, so there
  // the builder neither waits for nor joins them, and refuses new work (those groups stay unfused).
  const pid_t owner = ::getpid();

  bool forked() const { return ::getpid() != owner; }

  BackgroundBuilder() {
    // The statics the threads use are made before the guard, so they are destroyed after it.
    (void)cache();
    (void)flags();
    (void)telemetry::enabled();
    // One compiler process per thread. Builds run beside the calls they speed up: a quarter
    // of the cores (at least one, at most four) leaves the rest to the model.
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    const unsigned n = std::clamp(cores / 4, 1u, 4u);
    for (unsigned i = 0; i < n; ++i) threads.emplace_back([this] { loop(); });
  }

  void submit(const std::shared_ptr<KernelBatch>& batch) {
    if (!forked()) {  // (a forked child must not take the lock: a parent's thread may have held it)
      std::lock_guard lock(mutex);
      if (!stopped) {
        for (size_t i = 0; i < batch->programs_.size(); ++i) queue.emplace_back(batch, i);
        work.notify_all();
        return;
      }
    }
    const char* why = forked() ? "no background kernel builder in a forked child" : "the process is exiting";
    for (size_t i = 0; i < batch->programs_.size(); ++i) batch->finish(i, std::nullopt, why);
  }

  void wait_idle() {
    if (forked()) return;
    std::unique_lock lock(mutex);
    idle.wait(lock, [&] { return stopped || (queue.empty() && running == 0); });
  }

  void loop() {
    t_background_builder = true;
    for (;;) {
      std::pair<std::shared_ptr<KernelBatch>, size_t> task;
      {
        std::unique_lock lock(mutex);
        work.wait(lock, [&] { return stopped || (!queue.empty() && pauses == 0); });
        if (stopped) return;
        task = std::move(queue.front());
        queue.pop_front();
        running++;
      }
      std::optional<BuiltKernel> built;
      std::string error;
      try {
        built = obtain_cpu_kernel(task.first->programs_[task.second]);
      } catch (const std::exception& e) {
        error = e.what();
      }
      task.first->finish(task.second, std::move(built), error);
      task.first.reset();
      std::lock_guard lock(mutex);
      running--;
      if (queue.empty() && running == 0) idle.notify_all();
    }
  }

  void stop() {
    if (forked()) return;
    std::deque<std::pair<std::shared_ptr<KernelBatch>, size_t>> dropped;
    {
      std::lock_guard lock(mutex);
      stopped = true;
      dropped.swap(queue);
    }
    work.notify_all();
    idle.notify_all();
    {
      std::lock_guard lock(g_children_mutex);
      g_stopping = true;  // run_shell starts no new compiler from a builder thread
      for (pid_t pid : g_children) ::kill(-pid, SIGKILL);
    }
    for (auto& t : threads) t.join();
    for (auto& [batch, i] : dropped) batch->finish(i, std::nullopt, "the process is exiting");
  }
};

namespace {

BackgroundBuilder& background_builder() {
  static BackgroundBuilder* b = new BackgroundBuilder();
  static struct Guard {
    BackgroundBuilder* builder;
    ~Guard() { builder->stop(); }
  } guard{b};
  return *b;
}

}  // namespace

KernelBatch::KernelBatch(std::vector<FusedProgram> programs)
    : programs_(std::move(programs)),
      built_(programs_.size()),
      errors_(programs_.size()),
      remaining_(programs_.size()),
      start_(std::chrono::steady_clock::now()) {}

void KernelBatch::finish(size_t i, std::optional<BuiltKernel> built, std::string error) {
  {
    std::lock_guard lock(mutex_);
    if (built) built_[i] = std::move(*built);
    errors_[i] = std::move(error);
    if (--remaining_ == 0) {
      build_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
      done_.store(true, std::memory_order_release);
    }
  }
  cv_.notify_all();
}

void KernelBatch::wait() const {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return remaining_ == 0; });
}

std::vector<std::string> KernelBatch::errors() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& e : errors_)
    if (!e.empty()) out.push_back(e);
  return out;
}

double KernelBatch::build_ms() const {
  std::lock_guard lock(mutex_);
  return build_ms_;
}

std::shared_ptr<KernelBatch> build_cpu_kernels_in_background(std::vector<FusedProgram> programs) {
  auto batch = std::make_shared<KernelBatch>(std::move(programs));
  if (batch->size() == 0) {
    batch->done_.store(true);
    return batch;
  }
  background_builder().submit(batch);
  return batch;
}

void wait_for_background_builds() { background_builder().wait_idle(); }

size_t background_compilers_running() {
  std::lock_guard lock(g_children_mutex);
  return g_children.size();
}

BackgroundBuildsPaused::BackgroundBuildsPaused() {
  BackgroundBuilder& b = background_builder();
  std::lock_guard lock(b.mutex);
  b.pauses++;
}

BackgroundBuildsPaused::~BackgroundBuildsPaused() {
  BackgroundBuilder& b = background_builder();
  {
    std::lock_guard lock(b.mutex);
    b.pauses--;
  }
  b.work.notify_all();
}

size_t loaded_cpu_kernels() { return loaded_count.load(); }

BuiltKernel get_cpu_kernel(const FusedProgram& program) { return obtain_cpu_kernel(program); }

std::optional<BuiltKernel> find_cpu_kernel(const FusedProgram& program) {
  // By the program's bytes only: generating and hashing the source (about 60 KB), asking the
  // compiler for its identity and reading the disk cache cost milliseconds per kernel, which a
  // first call need not wait for (the background builder does them).
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  if (auto it = c.by_program.find(program); it != c.by_program.end())
    if (auto lib = it->second.lock()) return built_from(lib);
  return std::nullopt;
}

}  // namespace smelt::codegen
