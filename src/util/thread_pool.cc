#include "util/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <exception>

#include "util/error.h"

namespace shardtrace {

namespace {
// Set on pool workers (and on a caller while it helps with its own job): a nested
// ParallelFor then runs inline instead of queueing behind the job it is part of.
thread_local bool in_parallel_region = false;
}  // namespace

struct ThreadPool::Job {
  int64_t n = 0;
  const std::function<void(int64_t)>* fn = nullptr;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  int active = 0;  // workers inside RunItems; guarded by the pool's mutex_
  std::vector<std::exception_ptr> errors;
  std::mutex mutex;
  std::condition_variable finished;
};

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads > kMaxThreads)
    Fail("--threads: expected at most {} threads, got {}", kMaxThreads, threads);
  try {
    workers_.reserve(static_cast<size_t>(std::max(threads - 1, 0)));
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  } catch (const std::exception& e) {
    // The destructor does not run for a constructor that throws: stop and join the workers
    // already started, or their std::thread objects would terminate the process.
    StopAndJoin();
    Fail("--threads: cannot start {} threads ({} started): {}", threads, workers_.size() + 1,
         e.what());
  }
}

ThreadPool::~ThreadPool() { StopAndJoin(); }

void ThreadPool::StopAndJoin() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& w : workers_)
    if (w.joinable()) w.join();
}

void ThreadPool::RunItems(Job& job) {
  const bool was_inside = in_parallel_region;
  in_parallel_region = true;
  for (int64_t i = job.next.fetch_add(1); i < job.n; i = job.next.fetch_add(1)) {
    try {
      (*job.fn)(i);
    } catch (...) {
      job.errors[static_cast<size_t>(i)] = std::current_exception();
    }
    if (job.done.fetch_add(1) + 1 == job.n) {
      const std::lock_guard<std::mutex> lock(job.mutex);
      job.finished.notify_all();
    }
  }
  in_parallel_region = was_inside;
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  for (;;) {
    Job* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      if (job != nullptr) ++job->active;
    }
    if (job == nullptr) continue;
    RunItems(*job);
    const std::lock_guard<std::mutex> lock(mutex_);
    if (--job->active == 0) idle_.notify_all();
  }
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1 || in_parallel_region) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  const std::lock_guard<std::mutex> submit(submit_mutex_);
  Job job;
  job.n = n;
  job.fn = &fn;
  job.errors.resize(static_cast<size_t>(n));
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    job_ = &job;
    ++generation_;
  }
  wake_.notify_all();
  RunItems(job);
  {
    std::unique_lock<std::mutex> lock(job.mutex);
    job.finished.wait(lock, [&] { return job.done.load() == job.n; });
  }
  {
    // Unpublish the job, then wait for workers still inside RunItems (they find it
    // exhausted) before `job` goes out of scope.
    std::unique_lock<std::mutex> lock(mutex_);
    job_ = nullptr;
    idle_.wait(lock, [&] { return job.active == 0; });
  }
  for (const std::exception_ptr& e : job.errors)
    if (e) std::rethrow_exception(e);
}

void ParallelFor(ThreadPool* pool, int64_t n, const std::function<void(int64_t)>& fn) {
  if (pool == nullptr) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  pool->ParallelFor(n, fn);
}

}  // namespace shardtrace
