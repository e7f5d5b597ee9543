// Checked arithmetic for values that come from user input: sizes, element counts, mesh
// products and float-to-integer conversions. Each helper throws Error naming `what` (a key,
// tensor or flag) instead of overflowing or invoking undefined behaviour, so a hostile
// `ici_data_parallelism=4294967296` or `capacity_factor=1e30` gets one clear line.
#pragma once

#include <concepts>

#include <cmath>
#include <cstdint>
#include <string_view>

#include "util/error.h"

namespace shardtrace {

// a * b, or Error "<what>: <a> x <b> does not fit a 64-bit integer". `what` is the name, or a
// callable that builds it, called only on overflow: hot paths (plan shards every tensor of
// thousands of configs) would spend a tenth of their time formatting names up front.
template <typename Describe>
  requires std::invocable<const Describe&>
inline int64_t CheckedMul(int64_t a, int64_t b, const Describe& what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) Fail("{}: {} x {} does not fit a 64-bit integer", what(), a, b);
  return out;
}
inline int64_t CheckedMul(int64_t a, int64_t b, std::string_view what) {
  return CheckedMul(a, b, [what] { return what; });
}

// a + b, or Error naming `what` (a name, or a callable as above).
template <typename Describe>
  requires std::invocable<const Describe&>
inline int64_t CheckedAdd(int64_t a, int64_t b, const Describe& what) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) Fail("{}: {} + {} does not fit a 64-bit integer", what(), a, b);
  return out;
}
inline int64_t CheckedAdd(int64_t a, int64_t b, std::string_view what) {
  return CheckedAdd(a, b, [what] { return what; });
}

// `v` truncated toward zero as static_cast would, after checking that it is finite and within
// [lo, hi]; Error "<what>: expected a finite value in [lo, hi], got v" otherwise.
inline int64_t CheckedToInt(double v, std::string_view what, int64_t lo = INT64_MIN / 2,
                            int64_t hi = INT64_MAX / 2) {
  if (!std::isfinite(v) || v < static_cast<double>(lo) || v > static_cast<double>(hi))
    Fail("{}: expected a finite value in [{}, {}], got {}", what, lo, hi, v);
  return static_cast<int64_t>(v);
}

}  // namespace shardtrace
