// ThreadPool: the worker threads the numeric engine spreads simulated devices (and the
// experts of one device) over. ParallelFor(n, fn) runs fn(0..n-1) on the workers and the
// calling thread, returns when all are done and rethrows the exception of the lowest index
// that threw, so an error message does not depend on scheduling. Results are bit-identical
// to a serial run as long as each fn(i) writes only its own outputs, which is how every
// caller uses it (a device's shards, an expert's rows). A ParallelFor issued from inside a
// worker runs serially in that worker: nested loops never wait on a busy pool.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace shardtrace {

class ThreadPool {
 public:
  // More threads than this simulate no device faster; --threads says so before any starts.
  static constexpr int kMaxThreads = 1024;

  // `threads` <= 0 means std::thread::hardware_concurrency(); 1 means serial (no workers).
  // Throws Error above kMaxThreads, or when the system refuses a thread (the workers already
  // started are joined first).
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  void ParallelFor(int64_t n, const std::function<void(int64_t)>& fn);

 private:
  struct Job;
  void WorkerLoop();
  void StopAndJoin();
  static void RunItems(Job& job);

  std::vector<std::thread> workers_;
  std::mutex submit_mutex_;  // one job at a time
  std::mutex mutex_;         // guards job_, generation_, stop_ and Job::active
  std::condition_variable wake_;
  std::condition_variable idle_;
  Job* job_ = nullptr;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

// Runs fn(0..n-1) on `pool`, or serially when `pool` is null.
void ParallelFor(ThreadPool* pool, int64_t n, const std::function<void(int64_t)>& fn);

}  // namespace shardtrace
