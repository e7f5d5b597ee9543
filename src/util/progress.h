// Progress: one self-overwriting status line on stderr for long numeric work (which npz
// member is being read, which op on which simulated device runs). It stays silent unless
// stderr is a terminal, `--quiet` was not given, and the work has already taken more than
// a second, so quick runs, pipes, CI logs and tests never see it. Updates are throttled
// (10 per second) and the line is erased when the Progress is destroyed.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

namespace shardtrace {

class Progress {
 public:
  // `quiet`: never print. Otherwise prints only when stderr is a terminal.
  explicit Progress(bool quiet);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Shows `what` (one line, e.g. "reading wi_0" or "gmm on device 3/16"). Thread-safe.
  void Update(const std::string& what);

 private:
  using Clock = std::chrono::steady_clock;
  const bool enabled_;
  const Clock::time_point start_;
  Clock::time_point last_;
  bool shown_ = false;
  std::mutex mutex_;
};

}  // namespace shardtrace
