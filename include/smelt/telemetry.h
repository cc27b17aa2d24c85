// The telemetry event bus: subscribe to compile, cache, kernel-build and run events by name.
#pragma once

#include <functional>
#include <map>
#include <string>

namespace smelt::telemetry {

/// One event. `duration_ms` is the time the event measures (0 when it measures none).
struct Event {
  std::string name;  // "compile.trace", "compile.cache.miss", ...
  double duration_ms = 0.0;
  std::map<std::string, std::string> fields;

  const std::string& field(const std::string& key) const;
};

using Subscriber = std::function<void(const Event&)>;

/// Calls `fn` for every event whose name equals `pattern` or starts with it when it ends in '*'
/// ("compile.cache.*"), or for every event with "*". Returns an id for unsubscribe.
int subscribe(const std::string& pattern, Subscriber fn);
void unsubscribe(int id);

/// True when anyone listens: emitters check it first, so events cost a branch otherwise.
bool enabled();
void emit(const Event& event);

/// Subscribes for the lifetime of the object.
class Subscription {
 public:
  Subscription(const std::string& pattern, Subscriber fn) : id_(subscribe(pattern, std::move(fn))) {}
  ~Subscription() { unsubscribe(id_); }
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

 private:
  int id_;
};

}  // namespace smelt::telemetry
