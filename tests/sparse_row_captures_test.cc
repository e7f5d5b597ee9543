// The per-device arrays a numeric sparse_matmul run captures for the pages' row trees (the
// ring of experts' rolled sort, local_permute's order, the return all-to-all's row sources),
// checked against each other and against a second path: every routed (token, choice) row
// is where the routing says it is, on exactly one device.
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "paths/moe_block.h"
#include "paths/moe_params.h"
#include "paths/moe_setup.h"
#include "run/run.h"
#include "test_support.h"

namespace shardtrace {
namespace {

RunResult NumericRun(std::vector<std::string> args, int64_t devices) {
  const std::vector<std::string>& dims = testing::SmallMoeDims();
  args.insert(args.begin(), dims.begin(), dims.end());
  return testing::SeededRun(args, devices);
}

const Array& At(const RunResult& run, Capture id) {
  INFO("capture " << CaptureName(id));
  REQUIRE(run.captures.Has(id));
  return run.captures.At(id);
}

int64_t Int(const Array& a, int64_t flat) { return static_cast<int64_t>(a.values()[flat]); }

}  // namespace

// The ring sorts the all-gathered tokens by rolled ids; read back through the roll, each
// device's local rows are exactly the group's (device, token, choice) rows routed to its
// experts, with the experts the plain (unrolled) path routes them to.
TEST_CASE("ring of experts rows are the group's choices of the device's experts", "[capture]") {
  const std::vector<std::string> ring = {"num_experts=4", "use_ring_of_experts=true",
                                         "ici_expert_parallelism=2"};
  const RunResult run = NumericRun(ring, 4);
  const RunResult plain = NumericRun({"num_experts=4", "ici_expert_parallelism=2"}, 4);
  const Array& sel = At(run, Capture::kRingSortedSelectedExpertsPerDevice);
  const Array& rolled = At(run, Capture::kRingSortedExpertsPerDevice);
  const Array& roll = At(run, Capture::kRingRollToExpertIdPerDevice);
  const Array& sizes = At(run, Capture::kRingGroupSizesPerDevice);
  const Array& sources = At(run, Capture::kRingTokenSourcesPerDevice);
  const int64_t d_size = 4, k = 2, e_size = 4, l_size = 2;
  REQUIRE(sel.shape == Shape({d_size, 16}));  // 2 gathered batch rows x 4 tokens x K=2
  REQUIRE(rolled.shape == sel.shape);
  REQUIRE(roll.shape == Shape({d_size}));
  REQUIRE(sizes.shape == Shape({d_size, l_size}));
  REQUIRE(sources.shape == Shape({d_size, 8, 2}));
  const int64_t r_size = sel.shape[1], t_size = sources.shape[1];

  // (device, token, choice) -> expert, from each device's own (plain) sort.
  const Array& plain_sel = At(plain, Capture::kSortedSelectedExpertsPerDevice);
  const Array& plain_exp = At(plain, Capture::kSortedExpertsPerDevice);
  REQUIRE(plain_sel.shape == Shape({d_size, 8}));
  std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> expert_of;
  for (int64_t d = 0; d < d_size; ++d)
    for (int64_t r = 0; r < 8; ++r) {
      const int64_t flat = Int(plain_sel, d * 8 + r);
      expert_of[{d, flat / k, flat % k}] = Int(plain_exp, d * 8 + r);
    }

  std::multiset<std::tuple<int64_t, int64_t, int64_t>> local_rows;
  for (int64_t d = 0; d < d_size; ++d) {
    const int64_t local = Int(sizes, d * l_size) + Int(sizes, d * l_size + 1);
    for (int64_t r = 0; r < r_size; ++r) {
      const int64_t id = Int(rolled, d * r_size + r);
      const int64_t flat = Int(sel, d * r_size + r);
      const int64_t token = flat / k;
      REQUIRE(token < t_size);
      const int64_t src = Int(sources, (d * t_size + token) * 2);
      const int64_t src_token = Int(sources, (d * t_size + token) * 2 + 1);
      const int64_t expert = (id + Int(roll, d)) % e_size;
      INFO("device " << d << " row " << r << ": rolled " << id << " <- D" << src << ".T"
                     << src_token << " k=" << flat % k);
      CHECK(expert == expert_of.at({src, src_token, flat % k}));
      // The rows before sum(group_sizes) are the local experts' (rolled id < L); the ring
      // masks the rest.
      CHECK((r < local) == (id < l_size));
      if (id < l_size) {
        CHECK(expert / l_size == Int(roll, d) / l_size);
        local_rows.insert({src, src_token, flat % k});
      }
    }
  }
  // Every device's every choice is computed exactly once in the whole mesh.
  CHECK(local_rows.size() == expert_of.size());
  CHECK(std::set<std::tuple<int64_t, int64_t, int64_t>>(local_rows.begin(), local_rows.end())
            .size() == expert_of.size());
}

// local_permute sorts the receive buffer by local expert; read through the forward
// exchange's row sources, each sorted local row is a (sender, sorted row) routed to one of
// the device's experts, and the return exchange sends each row back to where it came from.
TEST_CASE("local_permute order and the return all-to-all invert the forward exchange",
          "[capture]") {
  const RunResult run = NumericRun({"num_experts=8", "ici_expert_parallelism=4"}, 4);
  const Array& fwd = At(run, Capture::kXRowSourcesPerDevice);
  const Array& experts = At(run, Capture::kSortedExpertsPerDevice);
  const Array& order = At(run, Capture::kLocalPermuteSortedIndicesPerDevice);
  const Array& ids = At(run, Capture::kLocalPermuteSortedExpertsIdsPerDevice);
  const Array& sizes = At(run, Capture::kLocalGroupSizePerDevice);
  const Array& shard = At(run, Capture::kExpertShardIdPerDevice);
  const Array& back = At(run, Capture::kIntermediateOutputRowSourcesPerDevice);
  const int64_t d_size = 4, l_size = 2, r_size = experts.shape[1];
  REQUIRE(r_size == 8);
  REQUIRE(order.shape[0] == d_size);
  REQUIRE(ids.shape == order.shape);
  REQUIRE(sizes.shape == Shape({d_size, l_size}));
  REQUIRE(back.shape == Shape({d_size, r_size}));
  const int64_t u_size = order.shape[1], buffer = fwd.shape[1];
  REQUIRE(u_size <= buffer);
  for (int64_t d = 0; d < d_size; ++d) {
    const int64_t filled = Int(sizes, d * l_size) + Int(sizes, d * l_size + 1);
    std::set<int64_t> seen;
    int64_t previous = 0;
    for (int64_t i = 0; i < u_size; ++i) {
      const int64_t u = Int(order, d * u_size + i), id = Int(ids, d * u_size + i);
      seen.insert(u);
      INFO("device " << d << " local row " << i << " = buffer row " << u << ", local id " << id);
      CHECK(id >= previous);  // sorted by local expert
      previous = id;
      const int64_t src = Int(fwd, d * buffer + u);
      CHECK((i < filled) == (src >= 0));  // the received rows first, the empty tail after
      if (src < 0) continue;
      const int64_t expert = Int(experts, src);  // [sender, sorted row] flattened
      CHECK(expert == Int(shard, d) * l_size + id);
    }
    CHECK(static_cast<int64_t>(seen.size()) == u_size);  // a permutation of the buffer rows
  }
  // Returned row r of device d came from the buffer row that received d's sorted row r.
  for (int64_t d = 0; d < d_size; ++d)
    for (int64_t r = 0; r < r_size; ++r) {
      const int64_t from = Int(back, d * r_size + r);
      INFO("device " << d << " returned row " << r << " <- " << from);
      REQUIRE(from >= 0);
      const int64_t sender = from / u_size, u = from % u_size;
      CHECK(Int(fwd, sender * buffer + u) == d * r_size + r);
    }
}

// Decode (batch replicated over the expert shards): local_permute(is_offset=True) keeps the
// globally sorted rows of the device's experts, first and in order, and gives the others
// the out-of-range id L; the return exchange rebuilds the full sorted order on every device.
TEST_CASE("decode's local selection keeps exactly the device's experts' rows", "[capture]") {
  const RunResult run =
      NumericRun({"num_experts=8", "ici_expert_parallelism=4", "per_device_batch_size=0.25",
                  "max_target_length=1", "model_call_mode=inference"},
                 4);
  const Array& experts = At(run, Capture::kSortedExpertsPerDevice);
  const Array& order = At(run, Capture::kLocalPermuteSortedIndicesPerDevice);
  const Array& ids = At(run, Capture::kLocalPermuteSortedExpertsIdsPerDevice);
  const Array& sizes = At(run, Capture::kLocalGroupSizePerDevice);
  const Array& shard = At(run, Capture::kExpertShardIdPerDevice);
  const Array& back = At(run, Capture::kIntermediateOutputRowSourcesPerDevice);
  const int64_t d_size = 4, l_size = 2, r_size = experts.shape[1];
  REQUIRE(r_size == 2);  // one token, K=2
  REQUIRE(order.shape == Shape({d_size, r_size}));
  int64_t kept_total = 0;
  for (int64_t d = 0; d < d_size; ++d) {
    const int64_t kept = Int(sizes, d * l_size) + Int(sizes, d * l_size + 1);
    kept_total += kept;
    for (int64_t i = 0; i < r_size; ++i) {
      const int64_t u = Int(order, d * r_size + i), id = Int(ids, d * r_size + i);
      const int64_t expert = Int(experts, d * r_size + u);
      INFO("device " << d << " local row " << i << " = sorted row " << u << " (expert " << expert
                     << "), id " << id);
      CHECK((i < kept) == (id < l_size));
      if (id < l_size)
        CHECK(expert == Int(shard, d) * l_size + id);
      else
        CHECK(expert / l_size != Int(shard, d));
    }
    // Every device ends with every sorted row, each from the device holding its expert.
    for (int64_t r = 0; r < r_size; ++r) {
      const int64_t from = Int(back, d * r_size + r);
      REQUIRE(from >= 0);
      const int64_t sender = from / r_size, i = from % r_size;
      CHECK(Int(order, sender * r_size + i) == r);
      CHECK(Int(experts, d * r_size + r) / l_size == Int(shard, sender));
    }
  }
  CHECK(kept_total == r_size);
}

}  // namespace shardtrace

namespace shardtrace {

// The refactored pipeline (shardtrace_pr3981_emb_chunks > 0) routes in route() and the seed's
// wrapper inline; both capture the same per-device rows, value for value.
TEST_CASE("the sparse pipeline captures the wrapper's per-device rows", "[capture]") {
  const std::vector<std::vector<std::string>> configs = {
      {"num_experts=4", "use_ring_of_experts=true", "ici_expert_parallelism=2"},
      {"num_experts=8", "ici_expert_parallelism=4"},
      {"num_experts=8", "ici_expert_parallelism=4", "per_device_batch_size=0.25",
       "max_target_length=1", "model_call_mode=inference"}};
  for (const std::vector<std::string>& config : configs) {
    const RunResult wrapper = NumericRun(config, 4);
    std::vector<std::string> chunked = config;
    chunked.push_back("shardtrace_pr3981_emb_chunks=1");
    const RunResult pipeline = NumericRun(chunked, 4);
    int64_t compared = 0;
    for (const auto& [id, array] : wrapper.captures.all()) {
      if (CaptureName(id).find("per device") == std::string_view::npos) continue;
      INFO(config[1] << " " << config.back() << ": " << CaptureName(id));
      const Array& other = At(pipeline, id);
      REQUIRE(other.shape == array.shape);
      CHECK(other.values() == array.values());
      ++compared;
    }
    CHECK(compared >= 5);
  }
}

}  // namespace shardtrace
