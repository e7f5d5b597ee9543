#include "model/batch_search.h"

#include <algorithm>
#include <cmath>

namespace shardtrace {

bool BatchSearch::Record(const BatchProbe& probe) {
  const Point here{batch_, probe.need_bytes};
  same_side_ = last_fit_ && *last_fit_ == probe.fits ? same_side_ + 1 : 0;
  last_fit_ = probe.fits;
  if (probe.fits) {
    fits_ = here;
    if (!fails_) {
      // The user's own batch fits: nothing larger is asked for, unless upward.
      if (direction_ == Direction::kDown) return false;
      // Where the line from the state through this batch crosses the HBM, at least the next
      // batch up; at least double once the line has fallen short twice running (three fits).
      const double rise = static_cast<double>(probe.need_bytes - probe.state_bytes);
      double guess = rise > 0
                         ? batch_ * static_cast<double>(probe.hbm_bytes - probe.state_bytes) / rise
                         : 2 * batch_;
      if (same_side_ >= 2) guess = std::max(guess, 2 * batch_);
      const double next = std::max(std::floor(batch_) + 1, std::floor(guess));
      if (next > kLargestBatch) return false;
      batch_ = next;
      return true;
    }
  } else {
    fails_ = here;
    if (batch_ <= 1) return false;
    if (!fits_ && probe.state_bytes >= probe.hbm_bytes) {
      // No batch fits: batch 1 is the smallest miss.
      batch_ = 1;
      return true;
    }
  }
  const double low = fits_ ? fits_->batch : 0;  // batches at or below `low` are known to fit
  const double high = fails_->batch;
  const double lowest = std::floor(low) + 1, highest = std::ceil(high) - 1;
  if (lowest > highest) return false;
  // Where the line through the two nearest points crosses the HBM; with no fitting batch yet, the
  // line from the state alone (batch 0) to the smallest miss.
  const double low_need =
      fits_ ? static_cast<double>(fits_->need_bytes) : static_cast<double>(probe.state_bytes);
  const double rise = static_cast<double>(fails_->need_bytes) - low_need;
  double guess = rise > 0
                     ? low + (static_cast<double>(probe.hbm_bytes) - low_need) * (high - low) / rise
                     : (low + high) / 2;
  if (same_side_ >= 1) guess = (low + high) / 2;  // the line misled once: bisect
  batch_ = std::clamp(std::floor(guess), lowest, highest);
  return true;
}

}  // namespace shardtrace
