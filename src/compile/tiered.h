// Tiered execution: a compiled entry replays its tape unfused while its kernels build in the
// background, then switches to the fused tape.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "src/compile/graph_replay.h"
#include "src/compile/passes.h"
#include "src/compile/shapeless.h"
#include "src/compile/tape.h"

namespace smelt::codegen {
class KernelBatch;
}

namespace smelt::compiler {

/// Which program served a call: the tape with kernels still building left unfused (each step
/// through the eager primitives: the same bits by the bit-exact contract), or the final one.
enum class Tier : uint8_t { Interpreter, Fused };

const char* tier_name(Tier tier);

/// Whether entries compile tiered: `option` (CompileOptions::tiered and its ONNX twin), unless
/// the environment says SMELT_TIERED=0 (never) or SMELT_TIERED=1 (always). Read per trace.
bool tiered_enabled(bool option);

/// A tape that replays, what was planned for it, and its tier.
struct Program {
  Tape tape;
  std::optional<ShapelessPlan> shapeless;
  std::unique_ptr<GraphReplay> graph;
  Tier tier = Tier::Fused;
};

/// For ThreadCapScope around a call on the interpreter tier: while the background builder's
/// compiler processes run, the cores they do not take (at least one), else 0 (no limit), asked
/// again by every kernel of the call, since compilers start and end during it. A call that keeps
/// its usual team beside a compiler on a small machine waits at every barrier for the team's
/// descheduled thread: MobileNetV3-small's cold first call at 2 threads on 2 cores took 25-185
/// ms, at 1 thread 16-25 ms. Results do not depend on the thread count.
int threads_beside_compilers();

/// An entry's optimized program over time. Thread-safe: calls acquire concurrently; the switch
/// publishes the fused program with one atomic store, so a call sees either program whole.
class TieredProgram {
 public:
  /// Plans a program after its passes (the shapeless plan, the graph replay): may throw, as the
  /// trace may.
  using Plan = std::function<void(Program&)>;

  /// Runs the passes over `tape`. Tiered: kernels this process has not loaded stay unfused, and
  /// the background builder loads them from the disk cache or compiles them. Otherwise every
  /// kernel is loaded or built before this returns (the synchronous behaviour).
  TieredProgram(Tape tape, PassOptions options, bool tiered, Plan plan);
  ~TieredProgram();

  /// The program for this call. When the background kernels are ready, the first caller to see
  /// it fuses the tape again (the kernels are in memory now: no compiler) and switches; calls
  /// meanwhile keep the interpreter tier rather than wait.
  std::shared_ptr<const Program> acquire();

  /// The program now, without switching (overlays, dumps).
  std::shared_ptr<const Program> current() const { return current_.load(); }

  /// Kernels the interpreter tier waits for (0 when the entry started fused or has switched).
  size_t pending_kernels() const;

 private:
  void switch_to_fused();

  std::atomic<std::shared_ptr<const Program>> current_;
  std::mutex switch_mutex_;
  bool switch_failed_ = false;                     // under switch_mutex_: stays on the interpreter tier
  Tape unfused_;                                   // the tape as the fuse pass got it, until the switch
  std::shared_ptr<codegen::KernelBatch> batch_;    // set once in the constructor when tiered
  std::string function_;
  Plan plan_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace smelt::compiler
