// Building fused CPU kernels: the system C++ compiler, an in-memory cache and a disk cache.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "src/codegen/cpp_emitter.h"
#include "src/codegen/disk_cache.h"

namespace smelt::codegen {

/// A loaded kernel. `library` keeps its code loaded: the shared library is unloaded (dlclose)
/// when the last BuiltKernel/FusedKernel holding it is gone, so `fn` is valid while it lives.
struct BuiltKernel {
  CpuKernelFn fn = nullptr;
  std::string hash;  // of the source, smelt's version and the compiler: the cache key
  std::shared_ptr<const void> library;
};

/// Returns the kernel for `program`, from memory, else from the disk cache, else by compiling
/// it (emitting `compile.kernel.build`). Throws UnsupportedError when no compiler works.
BuiltKernel get_cpu_kernel(const FusedProgram& program);

/// The kernel for `program` when this process has it loaded already (a lookup by the program's
/// bytes: no source generated, no disk read), else nullopt.
std::optional<BuiltKernel> find_cpu_kernel(const FusedProgram& program);

struct BackgroundBuilder;

/// CPU kernels being built on the background builder's threads (tiered execution: calls run
/// unfused meanwhile). The batch holds the kernels built so far, so they stay loaded and
/// find_cpu_kernel finds them until the caller has fused its tape with them.
class KernelBatch {
 public:
  explicit KernelBatch(std::vector<FusedProgram> programs);
  size_t size() const { return programs_.size(); }
  /// Every kernel is built or failed (or was dropped because the process is exiting).
  bool done() const { return done_.load(std::memory_order_acquire); }
  void wait() const;
  /// Why kernels could not be built, one line each (empty when all were). Once done().
  std::vector<std::string> errors() const;
  /// Wall time from queueing to done, once done().
  double build_ms() const;

 private:
  friend struct BackgroundBuilder;
  friend std::shared_ptr<KernelBatch> build_cpu_kernels_in_background(std::vector<FusedProgram>);
  void finish(size_t i, std::optional<BuiltKernel> built, std::string error);

  const std::vector<FusedProgram> programs_;
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  std::vector<BuiltKernel> built_;
  std::vector<std::string> errors_;
  size_t remaining_;
  std::chrono::steady_clock::time_point start_;
  double build_ms_ = 0.0;
  std::atomic<bool> done_{false};
};

/// Queues `programs` for the background builder and returns at once: each is loaded from the
/// disk cache or compiled (one compiler process per kernel, on a quarter of the cores), as
/// get_cpu_kernel does, and stored in the disk cache.
/// At exit, queued kernels are dropped and running compilers killed; nothing half written stays.
std::shared_ptr<KernelBatch> build_cpu_kernels_in_background(std::vector<FusedProgram> programs);

/// Blocks until the background builder has no kernel queued or building (not while paused).
void wait_for_background_builds();

/// Compiler processes the background builder is running now (each takes a core).
size_t background_compilers_running();

/// While alive, the background builder starts no kernel (those running finish): tests use it to
/// make "the first call ran on the interpreter tier" independent of how fast a build is.
struct BackgroundBuildsPaused {
  BackgroundBuildsPaused();
  ~BackgroundBuildsPaused();
  BackgroundBuildsPaused(const BackgroundBuildsPaused&) = delete;
  BackgroundBuildsPaused& operator=(const BackgroundBuildsPaused&) = delete;
};

/// How many generated CPU kernel libraries this process has loaded now.
size_t loaded_cpu_kernels();

}  // namespace smelt::codegen
