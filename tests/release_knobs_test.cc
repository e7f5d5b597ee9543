// The release's MoE knobs that change what the forward pass moves or computes, through the
// commands a user runs: each changes the trace as moe.py 0.2.5 does (its oracle case under
// testdata/maxtext/cases/ holds the numbers, the dump and the HLO's collectives, checked by
// tests/maxtext_oracle_test.cc), MaxText's validation of it is shardtrace's, and a revision
// whose moe.py lacks the key refuses it by name. Also shardtrace's own pseudo-key of its PR
// 3981 model, which is not MaxText's num_moe_emb_chunks.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "test_support.h"

namespace shardtrace {
namespace {

using testing::CommandResult;
using testing::RunShardtrace;
using testing::SourcePath;

const std::string kRelease = SourcePath("testdata/maxtext/configs/base.yml");

std::string CaseConfig(const std::string& name) {
  return SourcePath("testdata/maxtext/cases/" + name + "/config.yml");
}

CommandResult Trace(const std::string& config, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"trace", config};
  args.insert(args.end(), extra.begin(), extra.end());
  return RunShardtrace(args);
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Each of the two token chunks has every row of `rows`: trace-table lines with {} where the
// chunk's scope name (token_chunk_0, token_chunk_1) goes.
void CheckEachTokenChunk(const std::string& out, const std::vector<std::string>& rows) {
  for (const char* chunk : {"token_chunk_0", "token_chunk_1"}) {
    for (const std::string& row : rows) {
      INFO(chunk);
      CHECK(Has(out, fmt::format(fmt::runtime(row), chunk)));
    }
  }
}

TEST_CASE("moe_use_direct_token_gather gathers the rows from the tokens", "[keys]") {
  const std::string config = CaseConfig("sparse_ep2_direct_gather");
  const CommandResult direct = Trace(config);
  const CommandResult plain = Trace(config, {"moe_use_direct_token_gather=false"});
  REQUIRE(direct.status == 0);
  REQUIRE(plain.status == 0);
  // The [R, M] top-k copies exist only without the knob; with it, the rows' token ids.
  CHECK(Has(plain.out, "replicated_inputs_2d"));
  CHECK_FALSE(Has(direct.out, "replicated_inputs_2d"));
  CHECK(Has(direct.out, "token_indices"));
  CHECK(Has(direct.out, "moe_use_direct_token_gather"));
  // MaxText's validation: the Mosaic gather kernel cannot take it.
  const CommandResult refused = Trace(config, {"use_gather_mosaic_kernel=true"});
  CHECK(refused.status == 2);
  CHECK(refused.err ==
        "shardtrace: error: moe_use_direct_token_gather=true needs use_gather_mosaic_kernel=false: "
        "MaxText's config validation refuses it\n");
}

TEST_CASE("moe_topk_before_ep_all_gather gathers the top-k instead of the logits", "[keys]") {
  const std::string config = CaseConfig("sparse_ep2_ring_topk_first");
  const CommandResult first = Trace(config);
  const CommandResult plain = Trace(config, {"moe_topk_before_ep_all_gather=false"});
  REQUIRE(first.status == 0);
  REQUIRE(plain.status == 0);
  // The ring's written all-gathers over 'expert' (the collectives table): the [4,8,8] logits
  // without the knob; the [4,8,2] weights and ids and the [4,8] per-sequence probabilities
  // with it, 128 B per device each, as the compiled HLO of the case has them.
  CHECK(Has(plain.out, "all_gather        expert  2             logits "));
  CHECK_FALSE(Has(first.out, "all_gather        expert  2             logits "));
  CHECK(Has(first.out, "all_gather        expert  2             weights           "));
  CHECK(Has(first.out, "all_gather        expert  2             selected_experts  "));
  CHECK(Has(first.out, "all_gather        expert  2             density_prob      "));
  const CommandResult no_ring = Trace(config, {"use_ring_of_experts=false"});
  CHECK(no_ring.status == 2);
  CHECK(no_ring.err ==
        "shardtrace: error: moe_topk_before_ep_all_gather=true needs sparse_matmul=true and "
        "use_ring_of_experts=true (it moves the ring's all-gather): MaxText's config validation "
        "refuses it\n");
}

TEST_CASE("num_moe_emb_chunks gathers and routes the ring's tokens in embed-dim chunks", "[keys]") {
  const std::string config = CaseConfig("sparse_ep2_ring_emb_chunks");
  const CommandResult chunked = Trace(config);
  REQUIRE(chunked.status == 0);
  CHECK(Has(chunked.out,
            "sparse_matmul/ring_of_experts in 2 emb chunks (EP=2, TP=1, megablox "
            "(tokamax gmm v2))"));
  // Two chunks of the tokens gathered (512 B per device each, [4,8,8] over the group) and the
  // logits once: chunk 1's routing is chunk 0's, which XLA keeps once, as the case's HLO has.
  CHECK(Has(chunked.out,
            "  all_gather        expert  2             x            "
            "RoutedMoE/sparse_matmul/wrapper              512 B"));
  CHECK(Has(chunked.out,
            "  all_gather        expert  2             logits       "
            "RoutedMoE/sparse_matmul/wrapper              512 B"));
  CHECK(Has(chunked.out,
            "  all_gather        expert  2             x            "
            "RoutedMoE/sparse_matmul/wrapper/emb_chunk_0  512 B"));
  // embed_dim // count columns per chunk: the rest never reaches the gmm, as in moe.py.
  const CommandResult three = Trace(config, {"num_moe_emb_chunks=3"});
  REQUIRE(three.status == 0);
  CHECK(Has(three.out,
            "note   num_moe_emb_chunks=3: embed_dim 16 // 3 = 5 columns per chunk; "
            "the last 1 never reach the wi gmm"));
  const CommandResult no_v2 = Trace(config, {"use_gmm_v2=false"});
  CHECK(no_v2.status == 2);
  CHECK(Has(no_v2.err, "num_moe_emb_chunks=2 needs use_gmm_v2=true and use_ring_of_experts=true"));
}

TEST_CASE("moe_dispatch_no_expert_sharding peels 'expert' off the dispatch's batch dim", "[keys]") {
  const std::string config = CaseConfig("dense_drop_train_fsdp2_ep2_no_expert_dispatch");
  const CommandResult peeled = Trace(config, {"--devices", "4"});
  const CommandResult plain =
      Trace(config, {"moe_dispatch_no_expert_sharding=false", "--devices", "4"});
  REQUIRE(peeled.status == 0);
  REQUIRE(plain.status == 0);
  // MaxText's dump of the case: dispatch (and layer_w0, layer_w1) keep 'expert' on the expert
  // dim and only fsdp on the batch; without the key the batch takes both.
  CHECK(Has(plain.out, "P(None, ('fsdp', 'expert'), None, None)"));
  CHECK(Has(peeled.out, "P('expert', 'fsdp', None, None)"));
  // What XLA then does (the case's compiled HLO): the dispatched tokens move with an
  // all-to-all over 'expert' and the kernels are no longer all-gathered over it.
  CHECK(Has(peeled.out,
            "all-to-all ⇄ xla  expert       2             dispatch            "
            "RoutedMoE/dense_matmul/dispatch"));
  CHECK_FALSE(Has(plain.out, "all-to-all ⇄ xla"));
  CHECK(Has(peeled.out, "moe_dispatch_no_expert_sharding: dispatch, layer_w0 and layer_w1"));
  // Dropless and inference do not read it: a note says so.
  const CommandResult dropless = Trace(config, {"capacity_factor=-1", "--devices", "4"});
  REQUIRE(dropless.status == 0);
  CHECK(Has(dropless.out,
            "note   moe_dispatch_no_expert_sharding=True: read only by dense_matmul's training "
            "branch with capacity_factor > 0"));
  const CommandResult seed = Trace(config, {"--devices", "4", "--maxtext-revision", "seed"});
  CHECK(seed.status == 2);
  CHECK(Has(seed.err, "moe_dispatch_no_expert_sharding=True: the moe.py of MaxText 313890777"));
}

TEST_CASE("num_moe_token_chunks runs the ring once per sequence chunk", "[keys]") {
  const std::string config = CaseConfig("sparse_ep2_ring_token_chunks");
  const CommandResult chunked = Trace(config);
  const CommandResult plain = Trace(config, {"num_moe_token_chunks=1"});
  REQUIRE(chunked.status == 0);
  REQUIRE(plain.status == 0);
  CHECK(Has(chunked.out, "sparse_matmul/ring_of_experts in 2 token chunks (EP=2, TP=1, megablox)"));
  // Each chunk gathers its [4,4,16] tokens and [4,4,8] logits and reduce-scatters its output
  // (the case's compiled HLO: two of each); without the key, one of each, twice the size.
  CheckEachTokenChunk(chunked.out, {"  all_gather        expert  2             x            "
                                    "RoutedMoE/sparse_matmul/wrapper/{}  512 B",
                                    "  psum_scatter      expert  2             output       "
                                    "RoutedMoE/sparse_matmul/wrapper/{}  512 B"});
  CHECK(Has(plain.out,
            "  all_gather        expert  2             x            "
            "RoutedMoE/sparse_matmul/wrapper  1.0 KiB"));
  // MaxText's validation.
  const CommandResult three = Trace(config, {"num_moe_token_chunks=3"});
  CHECK(three.status == 2);
  CHECK(three.err ==
        "shardtrace: error: num_moe_token_chunks=3 must evenly divide max_target_length=8: "
        "MaxText's config validation refuses it\n");
  const CommandResult no_ring = Trace(config, {"use_ring_of_experts=false"});
  CHECK(no_ring.status == 2);
  CHECK(Has(no_ring.err, "num_moe_token_chunks=2 needs use_ring_of_experts=true"));
  const CommandResult seed = Trace(config, {"--maxtext-revision", "seed"});
  CHECK(seed.status == 2);
  CHECK(Has(seed.err, "num_moe_token_chunks=2: the moe.py of MaxText 313890777"));
}

TEST_CASE("num_moe_token_chunks with num_moe_emb_chunks runs each token chunk in emb chunks",
          "[keys]") {
  // The release's config validation accepts the two together (measured with
  // pyconfig.initialize): moe.py runs _moe_body per token chunk, and each body chunks the
  // embed dim. The case's numbers are MaxText's (check passes it with the other cases).
  const std::string config = CaseConfig("sparse_ep2_ring_token_emb_chunks");
  const CommandResult both = Trace(config);
  REQUIRE(both.status == 0);
  CHECK(Has(both.out,
            "sparse_matmul/ring_of_experts in 2 emb chunks in 2 token chunks (EP=2, TP=1, "
            "megablox (tokamax gmm v2))"));
  // Per token chunk: [2,4,8] tokens gathered per emb chunk (256 B per device), the logits once,
  // and the chunk's output reduce-scattered.
  CheckEachTokenChunk(both.out, {"  all_gather        expert  2             x            "
                                 "RoutedMoE/sparse_matmul/wrapper/{}/emb_chunk_0  256 B",
                                 "  psum_scatter      expert  2             output       "
                                 "RoutedMoE/sparse_matmul/wrapper/{}              512 B"});
  const CommandResult check = RunShardtrace(
      {"check", SourcePath("testdata/maxtext/cases/sparse_ep2_ring_token_emb_chunks"), "--quiet"});
  CHECK(check.status == 0);
  CHECK(Has(check.out, "output           pass"));
}

TEST_CASE("defer_small_all_reduces returns the ring's local expert counts", "[keys]") {
  const std::string config = CaseConfig("shared_deepseek3_fsdp2_ep2_ring_defer");
  const CommandResult deferred = Trace(config);
  const CommandResult plain = Trace(config, {"defer_small_all_reduces=false"});
  REQUIRE(deferred.status == 0);
  REQUIRE(plain.status == 0);
  // Without the key the counts are psummed over fsdp in the layer (the case's HLO: psum
  // s32[16]); with it no psum, and bias_updates is the [2, 1, 16] counts, one row per fsdp
  // shard, as MaxText's layer returns them.
  const std::string psum = "  psum              fsdp         2             expert_counts";
  CHECK(Has(plain.out, psum));
  CHECK_FALSE(Has(deferred.out, psum));
  CHECK(Has(deferred.out, "  bias_updates  act   int32    [2,1,16] PNE"));
  CHECK(Has(deferred.out, "P('fsdp', None, None)"));
  const CommandResult no_ring = Trace(config, {"use_ring_of_experts=false"});
  CHECK(no_ring.status == 2);
  CHECK(Has(no_ring.err, "defer_small_all_reduces=true needs use_ring_of_experts=true"));
  const CommandResult main = Trace(config, {"--maxtext-revision", "main"});
  CHECK(main.status == 2);
  CHECK(Has(main.err, "defer_small_all_reduces=True: the moe.py of MaxText e591f30"));
}

TEST_CASE("return_routed_experts is noted, shard_embed_moe_on_fsdp refused as MaxText does",
          "[keys]") {
  const std::string config = CaseConfig("sparse_ep2_direct_gather");
  // The release reads return_routed_experts only in fused_moe_matmul (vllm_rpa), which
  // shardtrace refuses: the sparse trace is the same, with a note.
  const CommandResult plain = Trace(config);
  const CommandResult routed = Trace(config, {"return_routed_experts=true"});
  REQUIRE(routed.status == 0);
  const std::string note =
      "\nnote   return_routed_experts=True: forward-neutral, not traced: read only by "
      "fused_moe_matmul";
  const size_t at = routed.out.find(note);
  REQUIRE(at != std::string::npos);
  std::string without = routed.out;
  without.erase(at, without.find('\n', at + 1) - at);
  CHECK(without == plain.out);
  // shard_embed_moe_on_fsdp: MaxText's validation without quantization, and with it the
  // quantized path shardtrace does not model.
  const CommandResult bare = Trace(config, {"shard_embed_moe_on_fsdp=true"});
  CHECK(bare.status == 2);
  CHECK(bare.err ==
        "shardtrace: error: shard_embed_moe_on_fsdp=true needs quantization set and "
        "weight_quantization_calibration_method fixed (static scaling): MaxText's config "
        "validation refuses it\n");
  const CommandResult quantized =
      Trace(config, {"shard_embed_moe_on_fsdp=true", "quantization=fp8_full",
                     "use_qwix_quantization=true", "weight_quantization_calibration_method=fixed"});
  CHECK(quantized.status == 2);
  CHECK(Has(quantized.err, "shardtrace: error: shard_embed_moe_on_fsdp=True is not modelled"));
  const CommandResult both =
      Trace(config, {"shard_embed_moe_on_fsdp=true", "shard_exp_on_fsdp=true",
                     "quantization=fp8_full", "weight_quantization_calibration_method=fixed"});
  CHECK(both.status == 2);
  CHECK(Has(both.err, "only one of shard_exp_on_fsdp, use_2d_fsdp_sharding and"));
}

TEST_CASE("A release knob under a revision whose moe.py lacks it is refused by name", "[keys]") {
  const CommandResult seed =
      Trace(CaseConfig("sparse_ep2_direct_gather"), {"--maxtext-revision", "seed"});
  CHECK(seed.status == 2);
  CHECK(seed.err ==
        "shardtrace: error: moe_use_direct_token_gather=True: the moe.py of MaxText 313890777 "
        "(the seed revision) has no such key (it reads it from MaxText 0.2.5 (the PyPI release) "
        "on); expected False or another --maxtext-revision (docs/maxtext-keys.md)\n");
  // A base.yml without the key (the embedded seed's) does not know it at all.
  const CommandResult unknown = Trace("moe_topk_before_ep_all_gather=true", {});
  CHECK(unknown.status == 2);
  CHECK(unknown.err == "shardtrace: error: unknown config key 'moe_topk_before_ep_all_gather'\n");
}

TEST_CASE("shardtrace's PR 3981 model has its own pseudo-key, not num_moe_emb_chunks", "[keys]") {
  const std::vector<std::string> seed = {"trace",
                                         "base_mlp_dim=64",
                                         "base_moe_mlp_dim=64",
                                         "num_experts=4",
                                         "num_experts_per_tok=2",
                                         "ici_expert_parallelism=2",
                                         "--devices",
                                         "2"};
  std::vector<std::string> chunked = seed;
  chunked.push_back("shardtrace_pr3981_emb_chunks=2");
  const CommandResult pipeline = RunShardtrace(chunked);
  REQUIRE(pipeline.status == 0);
  CHECK(Has(pipeline.out, "route/dispatch/gmm pipeline, 2 emb chunks"));
  // Under the seed, MaxText's name is no longer shardtrace's.
  std::vector<std::string> maxtext_name = seed;
  maxtext_name.push_back("num_moe_emb_chunks=2");
  const CommandResult refused = RunShardtrace(maxtext_name);
  CHECK(refused.status == 2);
  CHECK(Has(refused.err,
            "num_moe_emb_chunks=2: the moe.py of MaxText 313890777 (the seed revision) has no "
            "such key"));
  CHECK(
      Has(refused.err, "shardtrace's model of PR 3981's pipeline is shardtrace_pr3981_emb_chunks"));
  // The proposal is written against the seed's moe.py: the release refuses the pseudo-key.
  const CommandResult release =
      RunShardtrace({"trace", kRelease, "base_emb_dim=16", "base_mlp_dim=32", "base_moe_mlp_dim=32",
                     "num_experts=4", "num_experts_per_tok=2", "ici_expert_parallelism=2",
                     "--devices", "2", "shardtrace_pr3981_emb_chunks=2"});
  CHECK(release.status == 2);
  CHECK(Has(release.err,
            "shardtrace_pr3981_emb_chunks=2: shardtrace's model of PR 3981's "
            "proposed pipeline is a proposal against moe.py 313890777"));
}

}  // namespace
}  // namespace shardtrace
