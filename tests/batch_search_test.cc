// plan's batch search (model/batch_search.h) against memory curves with a known answer: it
// must stand at the largest batch that fits at or below the start, whatever the curve's
// shape, and a straight line should take few probes.
#include "model/batch_search.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>

namespace shardtrace {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

struct Searched {
  double batch;
  int probes;
};

// Runs the search from `start` over a config whose peak at batch b is need(b).
Searched Search(double start, int64_t state, int64_t hbm,
                const std::function<int64_t(double)>& need,
                BatchSearch::Direction direction = BatchSearch::Direction::kDown) {
  BatchSearch search(start, direction);
  int probes = 0;
  while (true) {
    ++probes;
    REQUIRE(probes < 64);
    const double b = search.batch();
    const int64_t n = need(b);
    if (!search.Record({n <= hbm, n, state, hbm})) break;
  }
  return {search.answer(), probes};
}

}  // namespace

TEST_CASE("plan's batch search stands at the largest batch that fits", "[plan]") {
  const int64_t hbm = 96 * kGiB, state = 40 * kGiB;
  // A straight line: 7 GiB a sequence; 8 fit (96 GiB), 9 do not.
  const auto line = [&](double b) { return state + static_cast<int64_t>(b * 7 * kGiB); };
  const Searched s = Search(12, state, hbm, line);
  CHECK(s.batch == 8);
  CHECK(s.probes <= 3);  // 12 misses, the line says 8, 9 misses
  // The user's batch fits: one probe.
  CHECK(Search(6, state, hbm, line).batch == 6);
  CHECK(Search(6, state, hbm, line).probes == 1);
  // A curve that bends up (quadratic attention logits): the line overshoots, bisection finds it.
  const auto bend = [&](double b) { return state + static_cast<int64_t>(b * b * kGiB); };
  const Searched q = Search(64, state, hbm, bend);
  CHECK(q.batch == 7);  // 40 + 49 fits, 40 + 64 does not
  CHECK(bend(q.batch) <= hbm);
  CHECK(bend(q.batch + 1) > hbm);
  // A step: the peak jumps at 5 (a buffer switching sharding), flat around it.
  const auto step = [&](double b) { return b < 5 ? 60 * kGiB : 100 * kGiB; };
  CHECK(Search(16, state, hbm, step).batch == 4);
  // The state alone over the HBM: straight to 1, the smallest miss.
  const Searched hopeless = Search(12, 100 * kGiB, hbm, [&](double b) {
    return 100 * kGiB + static_cast<int64_t>(b * kGiB);
  });
  CHECK(hopeless.batch == 1);
  CHECK(hopeless.probes == 2);
}

TEST_CASE("fit's upward batch search stands at the largest batch that fits above the user's",
          "[plan]") {
  constexpr auto kUp = BatchSearch::Direction::kUp;
  const int64_t hbm = 96 * kGiB, state = 40 * kGiB;
  const auto line = [&](double b) { return state + static_cast<int64_t>(b * 7 * kGiB); };
  // 2 fits, the line through it says 8, which fits; 9 does not.
  const Searched s = Search(2, state, hbm, line, kUp);
  CHECK(s.batch == 8);
  CHECK(s.probes == 3);
  // The user's batch is the largest: the next one up is probed, no more.
  CHECK(Search(8, state, hbm, line, kUp).batch == 8);
  CHECK(Search(8, state, hbm, line, kUp).probes == 2);
  // Down from a batch that does not fit, the same as plan's.
  CHECK(Search(12, state, hbm, line, kUp).batch == 8);
  // A curve that bends down (memory growing slower than the line says): the climb doubles.
  const auto sublinear = [&](double b) {
    return state + static_cast<int64_t>(std::sqrt(b) * 4 * kGiB);
  };
  const Searched root = Search(1, state, hbm, sublinear, kUp);
  CHECK(root.batch == 196);  // 40 + 4 * 14 = 96 fits, 197 does not
  CHECK(root.probes < 20);
  // One that bends up: the line overshoots and bisection finds it.
  const auto bend = [&](double b) { return state + static_cast<int64_t>(b * b * kGiB); };
  CHECK(Search(1, state, hbm, bend, kUp).batch == 7);
  // A fractional batch that fits climbs to whole batches.
  CHECK(Search(0.5, state, hbm, line, kUp).batch == 8);
  // Memory that never grows stops at the ceiling.
  CHECK(Search(
            1, state, hbm, [&](double) { return state; }, kUp)
            .batch == kLargestBatch);
}

}  // namespace shardtrace
