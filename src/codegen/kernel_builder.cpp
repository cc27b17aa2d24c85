// Compiles generated C++ into shared objects, caches them on disk by source hash, and loads them.
#include "src/codegen/kernel_builder.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "smelt/errors.h"
#include "smelt/telemetry.h"

#ifndef SMELT_CXX_COMPILER
#define SMELT_CXX_COMPILER "c++"
#endif

namespace smelt::codegen {

namespace fs = std::filesystem;

namespace {

// Flags are part of the key. No fast math and no FMA contraction: the kernels must round exactly
// as the unfused kernels do. Without math errno a square root is the plain instruction (the same
// correctly rounded result) rather than a conditional library call, so loops with sqrt vectorize.
constexpr const char* kBaseFlags = "-std=c++20 -O3 -ffp-contract=off -fno-fast-math -fno-math-errno -fPIC -shared -w";

// The vector ISA from the running CPU: AVX2 when it has AVX2 and FMA, else SSE4.2, else the
// x86-64 baseline. AVX-512 is left out on purpose: fused kernels call the C library's scalar
// math, and on the machines we measured the 512-bit builds ran those loops slower.
const std::string& isa_flags() {
  static const std::string flags = [] {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return std::string("-march=x86-64-v3");
    if (__builtin_cpu_supports("sse4.2")) return std::string("-march=x86-64-v2");
#endif
    return std::string();
  }();
  return flags;
}

const std::string& flags() {
  static const std::string f = std::string(kBaseFlags) + " " + isa_flags();
  return f;
}

uint64_t fnv1a(const std::string& s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
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

std::string run_compiler(const std::string& src, const std::string& out) {
  std::string log = out + ".log";
  std::string cmd = compiler() + " " + flags() + " -o '" + out + "' '" + src + "' >'" + log + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::string msg;
  if (rc != 0) {
    std::ifstream f(log);
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // std::system returns a wait status: say what the compiler did, not the raw number.
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

struct Cache {
  std::mutex mutex;
  std::condition_variable built;                        // signalled when a build ends
  std::unordered_map<std::string, CpuKernelFn> loaded;  // hash -> function
  std::unordered_set<std::string> building;             // hashes some thread is building now
  // program_key -> hash of a loaded kernel: a retrace finds its kernel without generating and
  // hashing the source (preamble included, about 100 KB).
  std::unordered_map<std::string, std::string> hash_of_program;
};

/// The program's exact content as bytes (dtypes, instructions, constants' bits, outputs): equal
/// keys mean equal programs, hence equal sources.
std::string program_key(const FusedProgram& p) {
  std::string k;
  auto put = [&](uint64_t v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(p.input_dtypes.size());
  for (Dtype d : p.input_dtypes) put(static_cast<uint64_t>(d));
  put(p.instrs.size());
  for (const Instr& in : p.instrs) {
    put(static_cast<uint64_t>(in.kind));
    put(static_cast<uint64_t>(in.dtype));
    put(in.operands.size());
    for (int o : in.operands) put(static_cast<uint64_t>(o));
    put(static_cast<uint64_t>(in.index));
    put(static_cast<uint64_t>(in.unary));
    put(static_cast<uint64_t>(in.binary));
    uint64_t bits = 0;
    if (in.kind == InstrKind::Constant) in.value.cast(in.dtype).store(&bits);
    put(bits);
    put(static_cast<uint64_t>(in.reduce));
    put(static_cast<uint64_t>(in.ddof));
    put(static_cast<uint64_t>(in.per_row));
  }
  put(static_cast<uint64_t>(p.reduced_axes));
  put(p.outputs.size());
  for (int o : p.outputs) put(static_cast<uint64_t>(o));
  return k;
}

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: kernels stay loaded for the process
  return *c;
}

}  // namespace

std::string kernel_cache_dir() {
  const char* env = std::getenv("SMELT_CACHE_DIR");
  std::string dir;
  if (env && *env) {
    dir = env;
  } else {
    const char* home = std::getenv("HOME");
    dir = std::string(home && *home ? home : "/tmp") + "/.cache/smelt";
  }
  return dir;
}

BuiltKernel get_cpu_kernel(const FusedProgram& program) {
  const std::string key = program_key(program);
  auto& c = cache();
  {
    std::lock_guard lock(c.mutex);
    if (auto h = c.hash_of_program.find(key); h != c.hash_of_program.end())
      if (auto it = c.loaded.find(h->second); it != c.loaded.end()) return BuiltKernel{it->second, h->second};
  }
  std::string source = emit_cpu_kernel(program);
  uint64_t h = fnv1a(source);
  h = fnv1a(SMELT_VERSION, h);
  h = fnv1a(compiler_identity(), h);
  h = fnv1a(flags(), h);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  BuiltKernel k;
  k.hash = hex;

  // The lock is not held while compiling: other threads keep building and loading other
  // kernels; a thread that needs the kernel being built waits for it instead of building twice.
  {
    std::unique_lock lock(c.mutex);
    c.built.wait(lock, [&] { return c.loaded.count(k.hash) || !c.building.count(k.hash); });
    if (auto it = c.loaded.find(k.hash); it != c.loaded.end()) {
      c.hash_of_program.emplace(key, k.hash);
      k.fn = it->second;
      return k;
    }
    c.building.insert(k.hash);
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
  } end_build{c, k.hash};
  auto t0 = std::chrono::steady_clock::now();
  fs::path dir = fs::path(kernel_cache_dir()) / "cpu";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw UnsupportedError("fuse: cannot create the kernel cache folder " + dir.string() + ": " + ec.message());
  fs::path so = dir / (k.hash + ".so");
  void* handle = nullptr;
  bool on_disk = false;
  for (int attempt = 0; attempt < 2 && !handle; ++attempt) {
    on_disk = fs::exists(so);
    if (!on_disk) {
      // Build under unique names, then rename: concurrent processes never see a partial file.
      std::string tag = std::to_string(::getpid()) + "-" + std::to_string(attempt);
      fs::path src = dir / (k.hash + ".cpp");
      fs::path tmp_src = dir / (k.hash + "." + tag + ".cpp");
      fs::path tmp_so = dir / (k.hash + "." + tag + ".so");
      {
        std::ofstream f(tmp_src);
        f << source;
        if (!f) throw UnsupportedError("fuse: cannot write kernel source to " + tmp_src.string());
      }
      std::string err = run_compiler(tmp_src.string(), tmp_so.string());
      if (!err.empty()) {
        fs::remove(tmp_src, ec);
        fs::remove(tmp_so, ec);
        throw UnsupportedError("fuse: building a fused kernel failed: " + err);
      }
      fs::rename(tmp_src, src, ec);
      fs::rename(tmp_so, so, ec);
      if (ec) throw UnsupportedError("fuse: cannot move the kernel into " + so.string() + ": " + ec.message());
    }
    handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      std::string why = dlerror();
      fs::remove(so, ec);  // a damaged cache file: build it again once
      if (!on_disk) throw UnsupportedError("fuse: cannot load the fused kernel " + so.string() + ": " + why);
    }
  }
  if (!handle) throw UnsupportedError("fuse: cannot load the fused kernel " + so.string());
  auto fn = reinterpret_cast<CpuKernelFn>(dlsym(handle, kCpuKernelSymbol));
  if (!fn) throw UnsupportedError(std::string("fuse: the kernel library lacks ") + kCpuKernelSymbol);
  {
    std::lock_guard lock(c.mutex);
    c.loaded.emplace(k.hash, fn);
    c.hash_of_program.emplace(key, k.hash);
  }
  c.built.notify_all();
  k.fn = fn;
  if (telemetry::enabled()) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    telemetry::emit({"compile.kernel.build",
                     ms,
                     {{"device", "cpu"},
                      {"hash", k.hash},
                      {"cached_on_disk", on_disk ? "true" : "false"},
                      {"program", describe_program(program)}}});
  }
  return k;
}

}  // namespace smelt::codegen
