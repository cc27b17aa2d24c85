// One run's bounds: deadline and cancellation checks, the memory budget's accounting.
#include "src/onnx/run_guard.h"

#include <algorithm>
#include <vector>

#include "smelt/telemetry.h"
#include "src/onnx/random_key.h"

namespace smelt::onnx::detail {

namespace {

// What a std::string costs beyond its characters (the object itself); counted so that a loop
// piling up empty strings is bounded too.
constexpr int64_t kStringOverhead = static_cast<int64_t>(sizeof(std::string));

int64_t add_saturating(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }

std::string ms_text(std::chrono::steady_clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

}  // namespace

int64_t value_bytes(const Value& v) {
  int64_t total = 0;
  std::vector<const Value*> work{&v};
  while (!work.empty()) {
    const Value* x = work.back();
    work.pop_back();
    switch (x->kind()) {
      case Value::Kind::Tensor: {
        const Array& a = x->array();
        // Shapes were checked when the array was made: size() * itemsize fits in int64.
        total = add_saturating(total, a.size() * static_cast<int64_t>(a.itemsize()));
        break;
      }
      case Value::Kind::Strings:
        for (const auto& s : x->string_tensor().data)
          total = add_saturating(total, static_cast<int64_t>(s.size()) + kStringOverhead);
        break;
      case Value::Kind::Sequence:
        for (const auto& i : x->items()) work.push_back(&i);
        break;
      case Value::Kind::Optional:
        if (x->content()) work.push_back(&*x->content());
        break;
      case Value::Kind::Map: work.push_back(&x->map_values()); break;
      case Value::Kind::None: break;
    }
  }
  return total;
}

RunGuard::RunGuard(const RunOptions& options)
    : options_(options), start_(std::chrono::steady_clock::now()), transfers_at_start_(thread_transfer_counts()) {
  if (options_.key) {
    check_key(*options_.key, "run: RunOptions::key");
    key_ = options_.key;
  }
  if (options_.timeout.count() > 0) {
    timed_ = true;
    deadline_ = start_ + options_.timeout;
  }
  if (options_.deadline && (!timed_ || *options_.deadline < deadline_)) {
    timed_ = true;
    deadline_ = *options_.deadline;
  }
  if (options_.memory_budget_bytes < 0)
    throw InvalidArgument("run: RunOptions::memory_budget_bytes must be >= 0 (0: no limit), got " +
                          std::to_string(options_.memory_budget_bytes));
  if (options_.max_call_depth < 1)
    throw InvalidArgument("run: RunOptions::max_call_depth must be >= 1, got " +
                          std::to_string(options_.max_call_depth));
}

std::optional<Array> RunGuard::next_key() const {
  std::lock_guard lock(key_mutex_);
  if (!key_) return std::nullopt;
  return split_key(*key_);
}

bool RunGuard::must_stop() const {
  if (options_.cancel && options_.cancel->cancelled()) return true;
  return timed_ && std::chrono::steady_clock::now() >= deadline_;
}

void RunGuard::stop(const std::string& where) const {
  // Cancellation wins when both hold: it is what the caller asked for explicitly.
  if (options_.cancel && options_.cancel->cancelled())
    throw Cancelled(where + ": the run was cancelled (RunOptions::cancel)");
  std::string limit = options_.timeout.count() > 0 && start_ + options_.timeout == deadline_
                          ? "its timeout of " + ms_text(options_.timeout)
                      : deadline_ <= start_ ? std::string("its deadline (already past when it started)")
                                            : "its deadline (" + ms_text(deadline_ - start_) + " after it started)";
  throw DeadlineExceeded(where + ": the run passed " + limit + " after " +
                         ms_text(std::chrono::steady_clock::now() - start_));
}

void RunGuard::check_slow(const Node& node, int64_t iteration) const {
  if (!must_stop()) return;
  stop(node.label() + (iteration < 0 ? "" : " (iteration " + std::to_string(iteration) + ")"));
}

void RunGuard::check(const std::string& where) const {
  if ((timed_ || options_.cancel) && must_stop()) stop(where);
}

void RunGuard::check_room(int64_t bytes, const Node& node, const std::string& what) const {
  const int64_t budget = options_.memory_budget_bytes;
  if (budget <= 0 || bytes <= 0) return;
  const int64_t live = live_.load(std::memory_order_relaxed);
  // The same words as Charge::set: the outputs' check is that check, made before the work.
  if (bytes > budget - std::min(live, budget))
    throw OutOfMemory(node.label() + ": " + (what.empty() ? "" : what + ": ") + "the run would hold " +
                      std::to_string(add_saturating(live, bytes)) + " bytes of tensors, over its memory budget of " +
                      std::to_string(budget) + " bytes (RunOptions::memory_budget_bytes)");
}

void RunGuard::Charge::set(int64_t bytes, const Node& node) {
  if (!guard_) return;
  const int64_t delta = bytes - bytes_;
  bytes_ = bytes;
  const int64_t live = guard_->live_.fetch_add(delta, std::memory_order_relaxed) + delta;
  const int64_t budget = guard_->options_.memory_budget_bytes;
  if (delta > 0 && budget > 0 && live > budget)
    throw OutOfMemory(node.label() + ": the run would hold " + std::to_string(live) +
                      " bytes of tensors, over its memory budget of " + std::to_string(budget) +
                      " bytes (RunOptions::memory_budget_bytes)");
}

RunGuard::~RunGuard() {
  if (options_.stats) *options_.stats = stats();
}

void RunGuard::note_host_compute(const Node& node, const std::string& what) const {
  std::string text = node.label() + ": " + what;
  if (telemetry::enabled()) telemetry::emit({"onnx.host_compute", 0.0, {{"node", node.label()}, {"what", what}}});
  std::lock_guard lock(host_mutex_);
  host_computed_.push_back(std::move(text));
}

RunStats RunGuard::stats() const {
  const TransferCounts now = thread_transfer_counts();
  RunStats s;
  s.device_to_host_copies = now.device_to_host_copies - transfers_at_start_.device_to_host_copies;
  s.device_to_host_bytes = now.device_to_host_bytes - transfers_at_start_.device_to_host_bytes;
  s.host_to_device_copies = now.host_to_device_copies - transfers_at_start_.host_to_device_copies;
  s.host_to_device_bytes = now.host_to_device_bytes - transfers_at_start_.host_to_device_bytes;
  std::lock_guard lock(host_mutex_);
  s.host_computed = host_computed_;
  return s;
}

}  // namespace smelt::onnx::detail
