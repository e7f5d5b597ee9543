// Properties over random small configs: a seeded generator draws dims, E, K, expert and
// tensor parallelism, capacity and the routing variant, then every no-drop path must compute
// the same function (dense dropless, dense dropping with a capacity that drops nothing,
// sparse_matmul with ragged_dot and with megablox on the drawn mesh) and every trace must keep
// its structural invariants: a sharded tensor's per-device shape times its mesh axes gives its
// global shape, every collective receives what it sends, and no listed invariant is violated.
// The draws are fixed by the seed, so a failure names a case that reproduces.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "check/trace_invariants.h"
#include "paths/moe_block.h"
#include "run/run.h"
#include "shard/mesh.h"
#include "test_support.h"

namespace shardtrace {
namespace {

constexpr int64_t kBatch = 8;

struct Draw {
  std::vector<std::string> model;  // the drawn dims and routing
  int64_t experts = 0;
  int64_t expert_parallelism = 1;
  int64_t tensor_parallelism = 1;
  // moe.py's dense_matmul has no routing weights for llama4's masks (weights is unbound).
  bool dense_dropping = true;
  int64_t devices() const { return expert_parallelism * tensor_parallelism; }
  // The model on the drawn mesh (or on one device), with the global batch kept at kBatch so
  // the seeded parameters and inputs are the same on every mesh.
  std::vector<std::string> On(bool drawn_mesh) const {
    std::vector<std::string> args = model;
    const int64_t ep = drawn_mesh ? expert_parallelism : 1;
    const int64_t tp = drawn_mesh ? tensor_parallelism : 1;
    args.push_back(fmt::format("ici_expert_parallelism={}", ep));
    args.push_back(fmt::format("ici_tensor_parallelism={}", tp));
    args.push_back(
        fmt::format("per_device_batch_size={}", static_cast<double>(kBatch) / (ep * tp)));
    return args;
  }
  std::string Describe() const {
    return fmt::format("{} on EP {} x TP {}", fmt::join(model, " "), expert_parallelism,
                       tensor_parallelism);
  }
};

// One random small MoE: every value below is a choice MaxText accepts for these keys.
Draw DrawConfig(std::mt19937& rng) {
  auto pick = [&rng](const std::vector<int64_t>& from) {
    return from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng)];
  };
  Draw d;
  d.experts = pick({2, 4, 8});
  const int64_t emb = pick({8, 16});
  const int64_t mlp = pick({8, 12, 24});
  const int variant = static_cast<int>(pick({0, 1, 2}));
  // llama4 routes each token to one expert.
  const int64_t top_k = variant == 2 ? 1 : std::min(pick({1, 2, 3}), d.experts);
  const int64_t ep = pick({1, 2, 4});
  d.expert_parallelism = d.experts % ep == 0 ? ep : 1;
  d.tensor_parallelism = pick({1, 2});
  const std::vector<std::string> decoders = {"mixtral", "qwen3_moe", "llama4"};
  d.model = {"dtype=float32",
             "weight_dtype=float32",
             "matmul_precision=highest",
             "max_target_length=8",
             "load_balance_loss_weight=0.01",
             "decoder_block=" + decoders[variant],
             fmt::format("base_emb_dim={}", emb),
             fmt::format("base_mlp_dim={}", mlp),
             fmt::format("base_moe_mlp_dim={}", mlp),
             fmt::format("num_experts={}", d.experts),
             fmt::format("num_experts_per_tok={}", top_k)};
  if (variant == 1) d.model.push_back("norm_topk_prob=true");
  d.dense_dropping = variant != 2;
  return d;
}

std::vector<std::string> With(std::vector<std::string> base,
                              std::initializer_list<std::string> extra) {
  base.insert(base.end(), extra);
  return base;
}

RunResult Run(const std::vector<std::string>& overrides, int64_t devices) {
  RunRequest request = SymbolicRequest(overrides, devices);
  request.evaluation = Evaluation::kNumeric;
  request.seed = 11;
  request.summaries = false;
  RunResult run = shardtrace::Run(request);
  REQUIRE(run.setup.setup.batch == kBatch);
  return run;
}

using testing::MaxDiff;

// The structural invariants every trace keeps, whatever the path and mesh.
void CheckInvariants(const RunResult& run, const Mesh& mesh) {
  const Trace& trace = run.trace;
  for (const TensorRecord& t : trace.tensors) {
    if (t.in_shard_map) continue;  // `shape` is already the per-device block there
    const PartitionSpec* spec = run.spmd.SpecOf(t);
    if (!spec) continue;
    INFO(t.stable_id << " " << spec->ToString());
    REQUIRE(spec->entries().size() <= t.shape.size());
    const Shape& local = run.spmd.tensor(t.id).local_shape;
    REQUIRE(local.size() == t.shape.size());
    for (size_t dim = 0; dim < t.shape.size(); ++dim) {
      const int64_t n = dim < spec->entries().size() ? mesh.Size((*spec)[dim]) : 1;
      CHECK(local[dim] == (t.shape[dim] + n - 1) / n);  // XLA pads an uneven split
      if (t.shape[dim] % n == 0) CHECK(local[dim] * n == t.shape[dim]);
    }
  }
  for (const OpRecord& op : trace.ops) {
    if (!op.collective) continue;
    INFO(op.Name());
    const std::vector<int64_t>& sent = op.collective->bytes_sent;
    const std::vector<int64_t>& received = op.collective->bytes_received;
    CHECK(std::accumulate(sent.begin(), sent.end(), int64_t{0}) ==
          std::accumulate(received.begin(), received.end(), int64_t{0}));
  }
  for (const Invariant& inv : TraceInvariants(trace, run.spmd, &run.captures)) {
    INFO(inv.statement << ": " << inv.result);
    CHECK_FALSE(inv.violated);
  }
}

}  // namespace

TEST_CASE("Random small configs: every no-drop path agrees and every trace keeps its invariants",
          "[paths][property]") {
  std::mt19937 rng(20261123);
  constexpr int kCases = 16;
  for (int c = 0; c < kCases; ++c) {
    const Draw d = DrawConfig(rng);
    INFO("case " << c << ": " << d.Describe());
    // The dense paths run on one device: the reference has no mesh to get wrong.
    const std::vector<std::string> single = d.On(false);
    const std::vector<std::string> drawn_mesh = d.On(true);
    const RunResult dropless = Run(With(single, {"sparse_matmul=false", "capacity_factor=-1"}), 1);
    const RunResult ragged = Run(With(drawn_mesh, {"megablox=false"}), d.devices());
    const RunResult megablox = Run(With(drawn_mesh, {"megablox=true"}), d.devices());
    const Array& reference = dropless.captures.At(Capture::kOutput);
    if (d.dense_dropping) {  // a capacity of E * (tokens * K / E) slots drops nothing
      const RunResult dropping = Run(
          With(single, {"sparse_matmul=false", fmt::format("capacity_factor={}", d.experts)}), 1);
      CHECK(MaxDiff(reference, dropping.captures.At(Capture::kOutput)) < 1e-5);
      CheckInvariants(dropping, LoadInputs(SymbolicRequest(single, 1)).mesh);
    }
    CHECK(MaxDiff(reference, ragged.captures.At(Capture::kOutput)) < 1e-5);
    CHECK(MaxDiff(reference, megablox.captures.At(Capture::kOutput)) < 1e-5);
    const Mesh one = LoadInputs(SymbolicRequest(single, 1)).mesh;
    const Mesh drawn = LoadInputs(SymbolicRequest(drawn_mesh, d.devices())).mesh;
    CheckInvariants(dropless, one);
    CheckInvariants(ragged, drawn);
    CheckInvariants(megablox, drawn);
  }
}

}  // namespace shardtrace
