// A progress line on a terminal's stderr during long steps (kernel builds, a check over a suite); silent otherwise.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

namespace smelt::telemetry {
class Subscription;
}

namespace smelt::cli {

/// One line on stderr, rewritten in place ("\r" then erase-to-end). Active only when stderr is a
/// terminal: piped or redirected output gets nothing extra. The destructor erases the line.
class ProgressLine {
 public:
  explicit ProgressLine(std::string prefix);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool active() const { return active_; }
  /// Shows "PREFIX: TEXT" (cut to the terminal's width).
  void show(const std::string& text);
  /// Erases the line, e.g. before printing a result line on the same terminal.
  void clear();

 private:
  std::string prefix_;
  bool active_ = false;
  bool shown_ = false;
  size_t width_ = 80;
};

/// While alive and stderr is a terminal: "smelt CMD: compiling: N kernels built (T s)", counted
/// by a telemetry subscriber on `compile.kernel.build` (CPU and CUDA builds both emit it).
class KernelBuildProgress {
 public:
  explicit KernelBuildProgress(const std::string& command);
  ~KernelBuildProgress();
  KernelBuildProgress(const KernelBuildProgress&) = delete;
  KernelBuildProgress& operator=(const KernelBuildProgress&) = delete;

 private:
  ProgressLine line_;
  std::mutex mutex_;  // builds may finish on several threads
  int built_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::unique_ptr<telemetry::Subscription> subscription_;
};

}  // namespace smelt::cli
