// The event bus: a lock-protected list of subscribers and an atomic flag for the no-listener path.
#include <atomic>
#include <mutex>
#include <vector>

#include "smelt/telemetry.h"

namespace smelt::telemetry {

namespace {

struct Entry {
  int id;
  std::string pattern;
  Subscriber fn;
};

struct Bus {
  std::mutex mutex;
  std::vector<Entry> entries;
  int next_id = 1;
  std::atomic<bool> any{false};
};

Bus& bus() {
  static Bus* b = new Bus();  // never destroyed: events may be emitted during exit
  return *b;
}

bool matches(const std::string& pattern, const std::string& name) {
  if (pattern == "*") return true;
  if (!pattern.empty() && pattern.back() == '*')
    return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  return pattern == name;
}

}  // namespace

const std::string& Event::field(const std::string& key) const {
  static const std::string empty;
  auto it = fields.find(key);
  return it == fields.end() ? empty : it->second;
}

int subscribe(const std::string& pattern, Subscriber fn) {
  auto& b = bus();
  std::lock_guard lock(b.mutex);
  int id = b.next_id++;
  b.entries.push_back({id, pattern, std::move(fn)});
  b.any = true;
  return id;
}

void unsubscribe(int id) {
  auto& b = bus();
  std::lock_guard lock(b.mutex);
  std::erase_if(b.entries, [&](const Entry& e) { return e.id == id; });
  b.any = !b.entries.empty();
}

bool enabled() { return bus().any.load(std::memory_order_relaxed); }

void emit(const Event& event) {
  auto& b = bus();
  if (!enabled()) return;
  std::vector<Subscriber> targets;
  {
    std::lock_guard lock(b.mutex);
    for (auto& e : b.entries)
      if (matches(e.pattern, event.name)) targets.push_back(e.fn);
  }
  // Outside the lock: a subscriber may subscribe or emit.
  for (auto& fn : targets) fn(event);
}

}  // namespace smelt::telemetry
