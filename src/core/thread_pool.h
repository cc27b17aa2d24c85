// A fixed pool of worker threads and parallel_for over index ranges.
#pragma once

#include <cstdint>
#include <functional>

namespace smelt {

/// Number of threads kernels use (SMELT_NUM_THREADS, else the hardware concurrency).
int num_threads();
/// Changes the thread count for later kernels (1 = run on the calling thread).
void set_num_threads(int n);
/// Limits the calling thread's kernels while it lives: each num_threads() (so each parallel_for
/// and each oneDNN call) on this thread asks `cap` for the most threads it may use now (0: no
/// limit), so the limit follows a changing load; other threads do not see it. Results do not
/// depend on the thread count, so a capped call gives the same bits. Scopes nest (the innermost
/// applies).
class ThreadCapScope {
 public:
  explicit ThreadCapScope(int (*cap)());
  ~ThreadCapScope();
  ThreadCapScope(const ThreadCapScope&) = delete;
  ThreadCapScope& operator=(const ThreadCapScope&) = delete;

 private:
  int (*saved_)();
};
/// True on a thread that runs a chunk of a parallel_for (a nested parallel_for runs inline there).
bool in_parallel_for();

/// Runs fn(begin, end) over [0, n) split in contiguous chunks, in parallel when n is at least
/// `grain` per thread. Chunks are fixed by n and the thread count, never by timing.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace smelt
