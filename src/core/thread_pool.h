// A fixed pool of worker threads and parallel_for over index ranges.
#pragma once

#include <cstdint>
#include <functional>

namespace smelt {

/// Number of threads kernels use (SMELT_NUM_THREADS, else the hardware concurrency).
int num_threads();
/// Changes the thread count for later kernels (1 = run on the calling thread).
void set_num_threads(int n);
/// True on a thread that runs a chunk of a parallel_for (a nested parallel_for runs inline there).
bool in_parallel_for();

/// Runs fn(begin, end) over [0, n) split in contiguous chunks, in parallel when n is at least
/// `grain` per thread. Chunks are fixed by n and the thread count, never by timing.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace smelt
