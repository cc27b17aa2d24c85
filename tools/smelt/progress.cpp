// The progress line of the smelt commands (progress.h).
#include "tools/smelt/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>

#include "smelt/telemetry.h"

namespace smelt::cli {

ProgressLine::ProgressLine(std::string prefix) : prefix_(std::move(prefix)), active_(isatty(STDERR_FILENO) == 1) {
  winsize ws{};
  if (active_ && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) width_ = ws.ws_col;
}

ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::show(const std::string& text) {
  if (!active_) return;
  std::string line = prefix_ + ": " + text;
  // One column short of the width: a full line would wrap on some terminals and "\r" would then
  // rewrite only its second half.
  if (line.size() >= width_) line.resize(width_ - 1);
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void ProgressLine::clear() {
  if (!active_ || !shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

KernelBuildProgress::KernelBuildProgress(const std::string& command)
    : line_("smelt " + command), start_(std::chrono::steady_clock::now()) {
  if (!line_.active()) return;  // no subscriber: not a terminal costs nothing
  line_.show("compiling...");
  subscription_ = std::make_unique<telemetry::Subscription>("compile.kernel.build", [this](const telemetry::Event&) {
    std::lock_guard lock(mutex_);
    ++built_;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    char text[96];
    std::snprintf(text, sizeof text, "compiling: %d kernel%s built (%.1f s)", built_, built_ == 1 ? "" : "s", s);
    line_.show(text);
  });
}

KernelBuildProgress::~KernelBuildProgress() {
  subscription_.reset();  // no event may arrive while the line is erased
  std::lock_guard lock(mutex_);
  line_.clear();
}

}  // namespace smelt::cli
