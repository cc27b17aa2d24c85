// One run's bounds (RunOptions): deadline and cancellation checks, the memory budget, nesting depth.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "smelt/memory.h"

#include "smelt/onnx.h"

namespace smelt::onnx::detail {

/// The logical size in bytes of the tensors inside `v` (sequence items, optional contents and map
/// values included; a string counts its bytes plus a fixed overhead).
int64_t value_bytes(const Value& v);

/// Lives for one run and is shared (by pointer) by everything the run executes: the executor,
/// subgraphs and operators (through OpContext). Cheap when nothing is bounded: check() is a
/// branch then.
class RunGuard {
 public:
  explicit RunGuard(const RunOptions& options);
  /// Writes RunOptions::stats when set (also when the run raised).
  ~RunGuard();
  RunGuard(const RunGuard&) = delete;
  RunGuard& operator=(const RunGuard&) = delete;

  /// Records that `node` computed on the host on device inputs (an operator without a GPU
  /// kernel): RunStats::host_computed and the telemetry event onnx.host_compute.
  void note_host_compute(const Node& node, const std::string& what) const;
  /// The run's counters so far: this thread's transfers since the guard was made, host computations.
  RunStats stats() const;

  /// Raises Cancelled or DeadlineExceeded naming `node` (and the loop iteration when >= 0) when
  /// the run must stop.
  void check(const Node& node, int64_t iteration = -1) const {
    if (timed_ || options_.cancel) check_slow(node, iteration);
  }
  /// The same for a place that is not a node ("compiled segment 2").
  void check(const std::string& where) const;

  int max_depth() const { return options_.max_call_depth; }
  /// A fresh key split from the run's key (RunOptions::key), advancing it; nullopt when the run
  /// has none (random operators then draw from the thread's sequence, src/onnx/random_key.h).
  std::optional<Array> next_key() const;
  int64_t budget() const { return options_.memory_budget_bytes; }

  /// Raises OutOfMemory naming `node`, `what` (may be empty) and the bytes when `bytes` more than the run holds
  /// now would pass its budget; charges nothing. Checked before memory is taken (a node's outputs
  /// before they are evaluated, a host buffer an operator fills), so that a size from the model
  /// is refused at once instead of after the system spent seconds and gigabytes on it.
  void check_room(int64_t bytes, const Node& node, const std::string& what) const;

  /// Bytes held by one owner (a graph's scope, a Loop's states and scan outputs); released when
  /// it goes, exceptions included. set() raises OutOfMemory naming `node` when the run's total
  /// passes the budget (only when it grows: giving memory back never raises).
  class Charge {
   public:
    explicit Charge(const RunGuard* guard) : guard_(guard) {}
    Charge(const Charge&) = delete;
    Charge& operator=(const Charge&) = delete;
    ~Charge() {
      if (guard_ && bytes_) guard_->live_.fetch_sub(bytes_, std::memory_order_relaxed);
    }
    void set(int64_t bytes, const Node& node);
    int64_t bytes() const { return bytes_; }

   private:
    const RunGuard* guard_;
    int64_t bytes_ = 0;
  };

 private:
  [[noreturn]] void stop(const std::string& where) const;
  void check_slow(const Node& node, int64_t iteration) const;
  bool must_stop() const;

  RunOptions options_;
  bool timed_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point deadline_;
  mutable std::atomic<int64_t> live_{0};
  mutable std::mutex key_mutex_;
  mutable std::optional<Array> key_;  // the run's key sequence (RunOptions::key, then its splits)
  TransferCounts transfers_at_start_;
  mutable std::mutex host_mutex_;
  mutable std::vector<std::string> host_computed_;
};

}  // namespace smelt::onnx::detail
