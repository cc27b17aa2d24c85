// The worker pool behind parallel_for: one job at a time, the caller takes the first chunk;
// a caller that finds the pool busy runs its chunks itself. With oneDNN built in, the workers
// are OpenMP's (SMELT_POOL_OPENMP): oneDNN runs on that runtime's team, and a second team of
// smelt's own beside it took the cores in turns (each spins after its work, OpenMP for a few
// hundred microseconds): on 2 cores the bundled CNN spent a quarter of its compiled call in
// OpenMP's spin while smelt's poolings ran.
#include "src/core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if SMELT_POOL_OPENMP
#include <omp.h>
#endif

#include "smelt/errors.h"

namespace smelt {

namespace {

/// How long an idle worker (and a caller waiting for the last chunks) polls before it sleeps
/// on the condition variable. A model runs a parallel kernel every few microseconds; waking a
/// sleeping thread costs a futex call on each side and 10-50 µs before the worker runs, which
/// was the whole run time of a small GEMM or element-wise kernel. Polling is bounded, so an idle
/// process still sleeps (ONNX Runtime's pool spins the same way between kernels).
constexpr std::chrono::microseconds kSpin{200};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/// Polls `ready` for up to kSpin; true once it holds. The first few microseconds busy-wait
/// (the next kernel usually starts within them); after that each poll yields the core, so that
/// on a machine with more runnable threads than cores the poll does not take a time slice from
/// a thread with work (the caller's own thread included).
template <class Ready>
bool spin_until(Ready&& ready) {
  for (int i = 0; i < 1024; ++i) {
    if (ready()) return true;
    cpu_relax();
  }
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    std::this_thread::yield();
    if (ready()) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
  }
}

#if SMELT_POOL_OPENMP

/// parallel_for's chunks on the calling thread's OpenMP team (the one oneDNN's primitives run
/// on), one job at a time like the pool below; the team's threads take chunks in turn.
class ThreadPool {
 public:
  explicit ThreadPool(int n) { resize(n); }

  int size() const { return size_.load(std::memory_order_relaxed); }

  void resize(int n) {
    std::lock_guard job_lock(job_mutex_);  // waits for a running job
    size_ = std::max(1, n);
  }

  void run(int chunks, const std::function<void(int)>& task) {
    std::unique_lock job_lock(job_mutex_, std::try_to_lock);
    if (!job_lock.owns_lock()) {
      for (int c = 0; c < chunks; ++c) task(c);
      return;
    }
    std::atomic<int> next{1};
    std::mutex error_mutex;
    std::exception_ptr error;
    // The caller (the team's thread 0) takes the first chunk, as in the pool below; no exception
    // may leave the region: the first is kept and rethrown after it.
#pragma omp parallel num_threads(std::min(chunks, size()))
    {
      for (int c = omp_get_thread_num() == 0 ? 0 : next.fetch_add(1, std::memory_order_relaxed); c < chunks;
           c = next.fetch_add(1, std::memory_order_relaxed)) {
        try {
          task(c);
        } catch (...) {
          std::lock_guard lock(error_mutex);
          if (!error) error = std::current_exception();
        }
      }
    }
    if (error) std::rethrow_exception(error);
  }

 private:
  std::atomic<int> size_{1};
  std::mutex job_mutex_;
};

#else

class ThreadPool {
 public:
  explicit ThreadPool(int n) { resize(n); }
  ~ThreadPool() { stop(); }

  int size() const { return size_.load(std::memory_order_relaxed); }

  void resize(int n) {
    // Waits for a running job: its workers must not be joined under it.
    std::lock_guard job_lock(job_mutex_);
    stop();
    size_ = std::max(1, n);
    quit_ = false;
    quit_flag_ = false;
    for (int i = 1; i < size(); ++i) workers_.emplace_back([this, i] { work(i); });
  }

  /// Runs task(0..chunks-1) on the pool. When another thread's job holds the pool, runs them
  /// on the calling thread instead: callers never wait for each other's jobs (with several
  /// threads calling, the cores are busy anyway), and the chunks, hence the results, are the same.
  void run(int chunks, const std::function<void(int)>& task) {
    std::unique_lock job_lock(job_mutex_, std::try_to_lock);  // one parallel job at a time
    if (!job_lock.owns_lock()) {
      for (int c = 0; c < chunks; ++c) task(c);
      return;
    }
    {
      std::lock_guard lock(mutex_);
      task_ = &task;
      chunks_ = chunks;
      next_ = 1;
      pending_ = chunks - 1;
      error_ = nullptr;
      ++generation_;
      published_.store(generation_, std::memory_order_release);
    }
    cv_.notify_all();
    std::exception_ptr mine;
    try {
      task(0);
    } catch (...) {
      mine = std::current_exception();
    }
    // The caller helps with the remaining chunks.
    for (;;) {
      int c;
      {
        std::lock_guard lock(mutex_);
        if (next_ >= chunks_) break;
        c = next_++;
      }
      run_chunk(c);
    }
    spin_until([this] { return pending_.load(std::memory_order_acquire) == 0; });
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    task_ = nullptr;
    if (mine) std::rethrow_exception(mine);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void run_chunk(int c) {
    try {
      (*task_)(c);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    if (--pending_ == 0) done_cv_.notify_all();
  }

  void work(int) {
    uint64_t seen = 0;
    for (;;) {
      int c;
      spin_until([&] {
        return published_.load(std::memory_order_acquire) != seen || quit_flag_.load(std::memory_order_relaxed);
      });
      {
        std::unique_lock lock(mutex_);
        if (!quit_ && generation_ != seen && !(task_ && next_ < chunks_)) {
          seen = generation_;  // that job has no chunk left for this worker: poll for the next
          continue;
        }
        cv_.wait(lock, [&] { return quit_ || (generation_ != seen && task_ && next_ < chunks_); });
        if (quit_) return;
        c = next_++;
        if (next_ >= chunks_) seen = generation_;
      }
      run_chunk(c);
    }
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
      quit_flag_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  std::atomic<int> size_{1};
  std::vector<std::thread> workers_;
  std::mutex job_mutex_;
  std::mutex mutex_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int)>* task_ = nullptr;
  int chunks_ = 0, next_ = 0;
  std::atomic<int> pending_{0};  // changed under mutex_; read without it by the caller's poll
  uint64_t generation_ = 0;
  std::atomic<uint64_t> published_{0};  // generation_, for the workers' poll
  bool quit_ = false;
  std::atomic<bool> quit_flag_{false};
  std::exception_ptr error_;
};

#endif  // SMELT_POOL_OPENMP

int initial_threads() {
  if (const char* s = std::getenv("SMELT_NUM_THREADS")) {
    int n = std::atoi(s);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool& pool() {
  static ThreadPool* p = new ThreadPool(initial_threads());  // never destroyed: exit-safe
  return *p;
}

thread_local bool in_parallel_region = false;
thread_local int (*thread_cap)() = nullptr;  // ThreadCapScope's limit on this thread (null: none)

// Marks the thread as running a chunk, and unmarks it even when the chunk throws (a flag left
// set would make every later parallel_for on this thread run inline, silently serial).
class RegionGuard {
 public:
  RegionGuard() : saved_(in_parallel_region) { in_parallel_region = true; }
  ~RegionGuard() { in_parallel_region = saved_; }
  RegionGuard(const RegionGuard&) = delete;
  RegionGuard& operator=(const RegionGuard&) = delete;

 private:
  bool saved_;
};

}  // namespace

int num_threads() {
  const int n = pool().size();
  if (thread_cap == nullptr) return n;
  const int cap = thread_cap();
  return cap > 0 ? std::min(n, cap) : n;
}

ThreadCapScope::ThreadCapScope(int (*cap)()) : saved_(thread_cap) { thread_cap = cap; }
ThreadCapScope::~ThreadCapScope() { thread_cap = saved_; }

bool in_parallel_for() { return in_parallel_region; }

void set_num_threads(int n) {
  // The running job holds the pool; resizing from inside it would wait for itself.
  if (in_parallel_region)
    throw InvalidArgument("set_num_threads: cannot change the thread count from inside a parallel_for");
  pool().resize(n);
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int threads = num_threads();
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
  // Nested parallel_for (a kernel called from a kernel) runs inline.
  if (chunks <= 1 || in_parallel_region) {
    fn(0, n);
    return;
  }
  int64_t per = (n + chunks - 1) / chunks;
  pool().run(static_cast<int>(chunks), [&](int c) {
    int64_t b = c * per, e = std::min(n, b + per);
    RegionGuard guard;
    if (b < e) fn(b, e);
  });
}

}  // namespace smelt
