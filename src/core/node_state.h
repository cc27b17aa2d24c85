// Thread-safe reads of a node's evaluated flag, and the striped lock over its transition to evaluated.
#pragma once

#include <atomic>
#include <mutex>

#include "src/core/node.h"

namespace smelt::detail {

/// Whether `n` holds its data. Another thread may be evaluating the node: the flag is read
/// atomically (acquire), and eval sets it (release) after buffer, strides and offset, which never
/// change again. Every read outside the node's lock goes through here.
inline bool is_evaluated(const Node& n) {
  return std::atomic_ref<bool>(const_cast<bool&>(n.evaluated)).load(std::memory_order_acquire);
}
inline void set_evaluated(Node& n) { std::atomic_ref<bool>(n.evaluated).store(true, std::memory_order_release); }

/// The lock over `n`'s transition to evaluated (a striped table: nodes share a few mutexes;
/// siblings of a multi-output primitive share their group's). Held only for a few field reads or
/// writes, never while a kernel runs or a node is destroyed, so it nests with nothing.
std::mutex& node_mutex(const Node& n);

}  // namespace smelt::detail
