// The thread's key sequence: a per-thread key that next_key splits, threaded through compile_mut.
#include <optional>

#include "smelt/ops.h"
#include "smelt/random.h"
#include "src/ops/op_utils.h"

namespace smelt::random {

namespace {

// One key per thread, so draws on one thread never depend on another thread's draws.
thread_local std::optional<Array> t_key;

Array& current() {
  if (!t_key) t_key = key(0);
  return *t_key;
}

}  // namespace

void seed(uint64_t s) { t_key = key(s); }

Array next_key() {
  Array keys = random::split(current(), 2);
  // Row 0 continues the sequence and row 1 is handed out, as jax.random.split is used in loops.
  t_key = smelt::reshape(smelt::slice(keys, {0, 0}, {1, 2}), {2});
  return smelt::reshape(smelt::slice(keys, {1, 0}, {2, 2}), {2});
}

Array thread_key() { return current(); }

void set_thread_key(const Array& k) {
  check_valid(k, "random::set_thread_key");
  if (k.dtype() != uint32 || k.shape() != Shape{2})
    throw InvalidArgument("random::set_thread_key: the key must be uint32[2] (from random::key), got " + describe(k));
  t_key = k;
}

}  // namespace smelt::random
