// The per_device_batch_size search of `plan` for a config without a batch of the user's, and of
// fit's variants: the largest batch that fits, at or below the user's (base.yml's) batch, or,
// searching upward from a batch that fits, above it. Each probe is a whole fit
// (milliseconds), so the search guesses where the line is from the bytes fit reports instead of
// halving blindly: a step's memory is its state (parameters, optimizer, gradients: no batch in
// it) plus what grows with the batch, close to a straight line in the batch, so the first guess
// is where that line crosses the HBM, and later ones interpolate between the largest batch that
// fit and the smallest that did not. The line is only a guess: the answer stands only once a
// batch fits and the next one up does not (or it is the user's own), and a guess that falls on
// the same side twice running gives way to bisection, so a bend in the line costs probes, never
// the answer. Upward, the line from the state through the largest batch that fit says where to
// probe until a batch does not fit (at least doubling once two guesses have fit running, so a
// line that bends down costs probes, not an endless climb), and the same interpolation follows. A
// config whose state alone is over the HBM goes straight to batch 1, its smallest miss, by which
// plan ranks the nearest configs that do not fit.
#pragma once

#include <cstdint>
#include <optional>

namespace shardtrace {

// The upward search's ceiling: a per_device_batch_size no step's memory reaches past.
inline constexpr double kLargestBatch = 65536;

// What one fit at a batch says.
struct BatchProbe {
  bool fits = false;
  int64_t need_bytes = 0;   // the step's peak per device
  int64_t state_bytes = 0;  // what does not grow with the batch: arguments without the batch,
                            // gradients, cast weights
  int64_t hbm_bytes = 0;
};

class BatchSearch {
 public:
  enum class Direction {
    kDown,  // the start's batch fits: done; else the largest below it that fits
    kUp,    // and if the start fits, the largest above it that fits
  };
  // `start`: the user's batch, the first probed.
  explicit BatchSearch(double start, Direction direction = Direction::kDown)
      : batch_(start), direction_(direction) {}

  // The batch to probe now.
  double batch() const { return batch_; }
  // Records the probe at batch(); returns false when the search is done, else moves batch() to
  // the next one to probe.
  bool Record(const BatchProbe& probe);
  // The batch that stands: the largest that fit, else the last probed (the smallest miss).
  double answer() const { return fits_ ? fits_->batch : batch_; }

 private:
  struct Point {
    double batch;
    int64_t need_bytes;
  };
  double batch_;
  Direction direction_;
  std::optional<Point> fits_;   // the largest batch that fit
  std::optional<Point> fails_;  // the smallest that did not
  int same_side_ = 0;           // how many probes running fell on the same side
  std::optional<bool> last_fit_;
};

}  // namespace shardtrace
