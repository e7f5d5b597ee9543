// plan's batch search (plan/batch_search.h) against memory curves with a known answer: it
// must stand at the largest batch that fits at or below the start, whatever the curve's
// shape, and a straight line should take few probes.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>

#include "plan/batch_search.h"

namespace shardtrace {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

struct Searched {
  double batch;
  int probes;
};

// Runs the search from `start` over a config whose peak at batch b is need(b).
Searched Search(double start, int64_t state, int64_t hbm, const std::function<int64_t(double)>& need) {
  BatchSearch search(start);
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

}  // namespace shardtrace
