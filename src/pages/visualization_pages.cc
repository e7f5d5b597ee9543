#include "pages/visualization_pages.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string_view>

#include "check/trace_invariants.h"
#include "config/moe_lines.h"
#include "emit/ascii_flow.h"
#include "emit/flow_overview.h"
#include "emit/mask_tree.h"
#include "emit/mermaid_flow.h"
#include "emit/spec_markdown.h"
#include "pages/kernel_variants.h"
#include "pages/knob_variants.h"
#include "pages/page_sections.h"
#include "pages/page_summary.h"
#include "paths/moe_block.h"
#include "run/run.h"
#include "spmd/trace_totals.h"
#include "util/error.h"

namespace shardtrace {
namespace {

constexpr uint64_t kSeed = 1;
// The catalog's pages trace the seed's moe.py (PageSource), so their prose cites its lines.
constexpr RevisionId kSeedRevision = RevisionId::kSeed;
using S = MoeStatement;
// Trees on a page: the first 8 devices, within the page's 100 columns.
constexpr DeviceTreeView kPageTrees = {.max_devices = 8, .width = 100};

}  // namespace

// The documented list. Every MoE page shares the same small Mixtral-style dims (M=16,
// H=32, K=2, S=4, one sequence per device) so values stay readable; only the path switches
// differ.
// Each page is a designated initializer that names only the fields it sets; every other
// field has a default member initializer. g++ (unlike clang) still warns about the omitted
// ones under -Wextra, so the warning is off for this table only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
std::vector<VisualizationPage> VisualizationPages() {
  const auto With = [](std::vector<std::string> args, const std::vector<std::string>& more) {
    return WithOverrides(std::move(args), more);
  };
  const std::vector<std::string> dims = {"base_emb_dim=16",      "base_mlp_dim=32",
                                         "base_moe_mlp_dim=32",  "num_experts_per_tok=2",
                                         "max_target_length=4",  "per_device_batch_size=1",
                                         "decoder_block=mixtral"};
  return {
      {.file = "mlp_block.md",
       .title = "MlpBlock: the dense feed-forward block",
       .summary =
           "The dense transformer MLP (`linears.py` `MlpBlock`, used by dense models and by the "
           "first dense layers of MoE models): `wi_0`/`wi_1` up-projections, the gated "
           "activation, and `wo` down-projection, on an fsdp x tensor mesh so the kernel "
           "shardings and the constrained hidden activation are visible.",
       .selected_by = "dense layers; `--block mlp`",
       .learn = "kernel shardings of wi_0/wi_1/wo and the one constrained hidden activation",
       .args = {"base_emb_dim=16", "base_mlp_dim=32", "base_moe_mlp_dim=32", "max_target_length=4",
                "per_device_batch_size=1", "ici_tensor_parallelism=2"},
       .devices = 4,
       .block = "mlp",
       .source = PageSource::kSeedLinears,
       .trees = {},
       // The MoE switches (shard_exp_on_fsdp, use_2d_fsdp_sharding) leave MlpBlock alone; its
       // kernels move with the tensor-parallel axes.
       .variant_keys = {},
       .extra_variants = {{"TP off (`ici_tensor_parallelism=1`)", {"ici_tensor_parallelism=1"}},
                          {"`ici_tensor_transpose_parallelism=2` instead",
                           {"ici_tensor_parallelism=1", "ici_tensor_transpose_parallelism=2"}}}},
      {.file = "moe_dense_dropless.md",
       .title = "MoE dense_matmul, dropless (`capacity_factor <= 0`)",
       .summary =
           "`RoutedMoE` with `sparse_matmul=false` and no capacity: every token goes through "
           "every expert's matmul and the top-k routing weights, scattered into a dense "
           "`[B,S,E]` tensor (the routing tree below), weight-sum the expert outputs. Nothing "
           "is dropped.",
       .selected_by = "`sparse_matmul=false`, `capacity_factor<=0`",
       .learn = "how top-k weights become a dense [B,S,E] weight tensor; every expert on "
                "every token",
       .args = With(dims, {"num_experts=4", "sparse_matmul=false", "ici_expert_parallelism=2"}),
       .devices = 4,
       .trees = {"top_k_indices", "top_k_weights", "weights"}},
      {.file = "moe_dense_dropping.md",
       .title = "MoE dense_matmul, token dropping in training (`capacity_factor > 0`)",
       .summary =
           "`RoutedMoE` with `sparse_matmul=false`, `capacity_factor=1` outside inference: "
           "`generate_masks` gives each expert `C` slots per batch row; `dispatch_mask` gathers "
           "tokens into the slots (`BSM,BSEC->EBCM`), `combine_mask` scatters the expert "
           "outputs back with their routing weights. Choices beyond capacity are dropped; the "
           "mask trees below show which.",
       .selected_by = "`sparse_matmul=false`, `capacity_factor>0`, `model_call_mode!=inference`",
       .learn = "capacity C, dispatch/combine masks as trees, which choices are dropped",
       .args = With(dims, {"num_experts=4", "sparse_matmul=false", "capacity_factor=1",
                           "ici_expert_parallelism=2"}),
       .devices = 4,
       .trees = {"top_k_indices", "top_k_weights", "dispatch_mask", "combine_mask"}},
      {.file = "moe_dense_dropping_inference.md",
       .title = "MoE dense_matmul, token dropping in inference (`generate_masks_subgroup`)",
       .summary =
           "`RoutedMoE` with `sparse_matmul=false`, `capacity_factor=1` and "
           "`model_call_mode=inference`: the masks come from `generate_masks_subgroup`, which "
           "splits each sequence into context-parallel subgroups (one here) and gives each "
           "expert its slots per subgroup, from the softmax probabilities rather than the "
           "scattered top-k weights. The mask trees show the slots of batch row 0.",
       .selected_by = "`sparse_matmul=false`, `capacity_factor>0`, `model_call_mode=inference`",
       .learn = "the subgroup masks of inference, their 5-D shardings, dropped choices",
       .args = With(dims, {"num_experts=4", "sparse_matmul=false", "capacity_factor=1",
                           "model_call_mode=inference", "ici_expert_parallelism=2"}),
       .devices = 4,
       .trees = {"top_k_indices", "top_k_weights", "dispatch_mask", "combine_mask"}},
      {.file = "moe_sparse_megablox.md",
       .title = "MoE sparse_matmul with megablox, no expert parallelism (EP=1)",
       .summary =
           "`RoutedMoE` with `sparse_matmul=true` and `megablox=true` on a pure fsdp mesh: "
           "inside `shard_map` each device sorts its routed rows by expert (`permute`), runs "
           "the grouped matmuls (`gmm`) over its own rows with every expert's full kernel, and "
           "unpermutes. No token crosses devices.",
       .selected_by = "`sparse_matmul=true`, `megablox=true`, expert parallelism 1",
       .learn = "permute/gmm/unpermute inside shard_map, group sizes, in_specs",
       .args = With(dims, {"num_experts=4"}),
       .devices = 4,
       .trees = {"top_k_indices", "top_k_weights", "sorted_inputs"}},
      {.file = "moe_sparse_ragged_all_to_all.md",
       .title = "MoE sparse_matmul with ragged_all_to_all expert parallelism (EP=4)",
       .summary =
           "`RoutedMoE` with `sparse_matmul=true` and 4-way expert parallelism: each device "
           "routes its tokens, all-gathers the group sizes, and sends each routed row to the "
           "device holding its expert with `ragged_all_to_all`; after the local `gmm`s a "
           "second `ragged_all_to_all` returns the rows. The send matrices below are the "
           "actual ragged sizes of this run.",
       .selected_by = "`sparse_matmul=true`, `ici_expert_parallelism>1`, global batch > 1",
       .learn = "all-to-all offsets and sizes, local_permute, the ragged send matrices",
       .args = With(dims, {"num_experts=8", "ici_expert_parallelism=4"}),
       .devices = 4,
       .trees = {"top_k_indices", "top_k_weights", "sorted_inputs", "x", "intermediate_output"},
       .send_matrices = true},
      {.file = "moe_sparse_ep_decode.md",
       .title = "MoE sparse_matmul with expert parallelism in decode (EP=4, batch not sharded)",
       .summary =
           "`RoutedMoE` with `sparse_matmul=true`, 4-way expert parallelism and a global batch "
           "of 1 (decode): `is_batch_sharded_by_ep` is false, so the batch is not split over "
           "`expert` and no tokens are sent ahead of the experts. Every device routes the same "
           "token, `local_permute(is_offset=True)` picks the sorted rows of its own experts "
           "(the others get the out-of-range expert id `L`), its experts run on them, and one "
           "`ragged_all_to_all` with the replicated case's parameters brings the outputs back "
           "for the weight-sum.",
       .selected_by = "`sparse_matmul=true`, `ici_expert_parallelism>1`, global batch 1",
       .learn = "the decode (batch-replicated) all-to-all parameters and collectives",
       .args =
           With(dims, {"num_experts=8", "ici_expert_parallelism=4", "per_device_batch_size=0.25",
                       "max_target_length=1", "model_call_mode=inference"}),
       .devices = 4,
       .trees = {"top_k_indices", "top_k_weights", "sorted_inputs", "intermediate_output"},
       .send_matrices = true},
      {.file = "moe_sparse_tensor_parallel.md",
       .title = "MoE sparse_matmul with tensor and tensor_transpose parallelism",
       .summary =
           "`RoutedMoE` with `sparse_matmul=true` on an fsdp x `tensor` mesh: the expert "
           "kernels' hidden dim is sharded over `tensor`, so each device's `gmm_wo` computes a "
           "partial sum over its slice of H, which `psum_scatter` over `tensor` adds up. The "
           "section after the flow shows the `tensor_transpose` variant, where the embedding "
           "dim is sharded and the wi outputs are `psum`'ed.",
       .selected_by = "`sparse_matmul=true`, `ici_tensor_parallelism>1` or "
                      "`ici_tensor_transpose_parallelism>1`",
       .learn = "which kernel dims tensor parallelism shards and the collectives it needs",
       .args = With(dims, {"num_experts=4", "ici_tensor_parallelism=2"}),
       .devices = 4,
       .trees = {"top_k_indices", "top_k_weights", "sorted_inputs"},
       // use_2d_fsdp_sharding's in_specs put 'mlp_no_fsdp' (here 'tensor') on the kernels'
       // embedding dim, which the tensor-sharded hidden activations cannot meet.
       .variant_keys = {"shard_exp_on_fsdp"},
       .more_runs = {{.heading = "tensor_transpose parallelism: the wi outputs psum'ed",
                      .intro = "The same config on a `tensor_transpose` mesh instead: the "
                               "kernels' embedding dim is sharded, so each `gmm_wi` output is "
                               "a partial sum over the local slice of M and is `psum`'ed over "
                               "`tensor_transpose` (the gmm stages of that trace).",
                      .args = With(dims, {"num_experts=4", "ici_tensor_transpose_parallelism=2"}),
                      .devices = 4,
                      .only_scope = "gmm",
                      .routing_tree = false}}},
      {.file = "moe_ring_of_experts.md",
       .title = "MoE sparse_matmul, ring of experts (EP=2)",
       .summary =
           "`RoutedMoE` with `use_ring_of_experts=true`: instead of an all-to-all, every device "
           "all-gathers the tokens (and router logits) of its expert-parallel group, runs its "
           "local experts on the rows routed to them, and a reduce-scatter (`psum_scatter`) "
           "returns each device the summed outputs of its own tokens.",
       .selected_by = "`sparse_matmul=true`, `use_ring_of_experts=true`, "
                      "`ici_expert_parallelism>1`",
       .learn = "the all-gather + psum_scatter alternative to all-to-all, rolled expert ids",
       .args =
           With(dims, {"num_experts=4", "use_ring_of_experts=true", "ici_expert_parallelism=2"}),
       .devices = 4,
       .trees = {"top_k_indices", "top_k_weights", "sorted_inputs"},
       // Both fsdp switches leave 'exp' unsharded in the shard_map specs, and the ring needs
       // expert parallelism: only the EP-on column applies.
       .variant_keys = {},
       .reference_overrides = {"use_ring_of_experts=false"}},
      {.file = "moe_shared_experts.md",
       .title = "RoutedAndSharedMoE: routed experts plus shared experts (deepseek3-tiny)",
       .summary =
           "DeepSeek-V3's MoE layer (`RoutedAndSharedMoE`, here `model_name=deepseek3-tiny`): "
           "sigmoid scores plus the routing bias pick each token's top-8 experts "
           "(`deepseek_routing`), whose unbiased scores are normalized and scaled by "
           "`routed_scaling_factor`; the routed experts run on the sparse ragged_all_to_all "
           "path, a shared-expert `MlpBlock` runs on every token, and the two outputs are "
           "added.",
       .selected_by = "`shared_experts>0` with decoder_block deepseek/llama4/gemma4",
       .learn = "the shared-expert MlpBlock beside the routed experts, DeepSeek routing",
       .args = {"model_name=deepseek3-tiny", "max_target_length=4", "per_device_batch_size=1",
                "ici_expert_parallelism=2"},
       .devices = 4,
       .trees = {"top_k_indices", "top_k_weights", "sorted_inputs", "x", "intermediate_output"}},
      {.file = "moe_routing_variants.md",
       .title =
           "Routing variants: DeepSeek group-limited top-k, Llama 4, Gemma 4 with norm_topk_prob",
       .summary =
           "How `get_topk` turns gate logits into each token's experts and weights, on three "
           "real configs. Main trace: DeepSeek-V3 routing (`deepseek3-tiny` with 4 routing "
           "groups of 4 experts, top 3 groups, so top-8 picks within the 12 kept experts; on "
           "the dense path so the group masks are global): sigmoid scores "
           "plus the routing bias choose the experts "
           "within the best groups, and the unbiased scores, normalized and scaled by "
           "`routed_scaling_factor`, weight them. Below it, Llama 4 (top-1, sigmoid of the "
           "chosen logit, applied to the inputs) and Gemma 4 (softmax over all experts, top-k, "
           "`norm_topk_prob`).",
       .selected_by = "`routed_score_func`, `routed_bias`, `n_routing_groups`, "
                      "`topk_routing_group`, `decoder_block`, `norm_topk_prob`",
       .learn = "each routing variant's ops and the real experts/weights they choose",
       .args = {"model_name=deepseek3-tiny", "max_target_length=4", "per_device_batch_size=1",
                "n_routing_groups=4", "topk_routing_group=3", "sparse_matmul=false"},
       .devices = 2,
       .trees = {"top_k_indices", "top_k_weights", "group_scores", "group_mask"},
       .more_runs =
           {{.heading = "Llama 4: top-1 with sigmoid scores on the inputs",
             .intro = fmt::format(
                 "`decoder_block=llama4` (sparse path, top-1): `get_topk` keeps the raw top "
                 "logit as the \"weight\" (no softmax, {}), `permute` multiplies each token's "
                 "input by its router score `sigmoid(logit)` before the experts run ({}), and "
                 "`unpermute` sums the outputs with weight 1 ({}). The tree shows logit and "
                 "score per choice.",
                 MoeRef(kSeedRevision, {S::kTopkSoftmax}),
                 MoeLines(kSeedRevision, S::kLlama4InputScaleSparse),
                 MoeLines(kSeedRevision, S::kLlama4UnitWeightsSparse)),
             .args = With(dims, {"decoder_block=llama4", "num_experts=4", "num_experts_per_tok=1"}),
             .devices = 2,
             .only_scope = "permute"},
            {.heading = "Gemma 4: softmax over all experts, top-k, `norm_topk_prob`",
             .intro = fmt::format(
                 "`decoder_block=gemma4` with `norm_topk_prob=true`: `get_topk` takes the "
                 "softmax over all E experts, picks the top-k by logit and keeps their "
                 "probabilities ({}), which sum to less than 1; `norm_topk_prob` then divides "
                 "by their sum ({}), so each token's weights sum to 1. Other decoder blocks "
                 "(Mixtral, Qwen3) take the softmax over the K chosen logits instead ({}), which "
                 "already sums to 1: there `norm_topk_prob` changes nothing but bf16 rounding.",
                 MoeRef(kSeedRevision, {S::kGemma4Routing}),
                 MoeLines(kSeedRevision, S::kNormTopkProb),
                 MoeLineList(kSeedRevision, {S::kTopkPlain, S::kTopkSoftmaxCall})),
             .args = With(dims, {"decoder_block=gemma4", "num_experts=4", "norm_topk_prob=true"}),
             .devices = 2,
             .only_scope = "get_topk"}}},
      {.file = "moe_pipeline_chunked.md",
       .title = "MoE sparse pipeline with 2 embedding chunks (PR 3981's end state, as modelled)",
       .summary =
           "The route / dispatch / gmm_up / maybe_tp_reduce / gmm_down / unpermute pipeline of "
           "the end-state pseudocode in MaxText PR 3981's description, with its chunking loop "
           "(`for x_chunk in chunks(x)`, each chunk dispatched and its gmm_up partial added "
           "into `intermediate`). The PR itself only extracts route and gmm_up and lists the "
           "chunking loop as a next step, so two things here are shardtrace's model, not "
           "MaxText's: the chunk count, read from the pseudo-key "
           "`shardtrace_pr3981_emb_chunks` (shardtrace's, not a MaxText key: neither base.yml "
           "313890777 nor "
           "the PR has one; MaxText main and 0.2.5 define `num_moe_emb_chunks`, which means "
           "another thing, a token all-gather chunked along the embed dim under ring of "
           "experts) and the shard_map in_spec "
           "`P('expert', 'fsdp', None)` for wi_0/wi_1, chosen so each chunk's wi all-gather "
           "over fsdp is visible (moe.py 313890777 gathers the kernels whole, "
           "`P('expert', None, None)`).",
       .selected_by = "`shardtrace_pr3981_emb_chunks>1` (shardtrace's pseudo-key, seed revision "
                      "only), `sparse_matmul=true`, EP>1",
       .learn = "the chunked pipeline as modelled: per-chunk all-gathers and partial gmms",
       .args = With(
           dims, {"num_experts=4", "shardtrace_pr3981_emb_chunks=2", "ici_expert_parallelism=2"}),
       .devices = 4,
       .source = PageSource::kPr3981,
       .trees = {"top_k_indices", "top_k_weights", "sorted_inputs", "x", "intermediate_output"}},
      {.file = "moe_masked_loop_port.md",
       .title = "Masked-loop sparse MoE (the JAX port's reference formulation)",
       .summary =
           "The masked-loop formulation of a PyTorch-to-JAX port of a sparse MoE "
           "(every expert masked by the router's top-k): instead of gathering each expert's "
           "tokens (dynamic shapes, not jittable), every expert runs on every token and a "
           "mask from the top-k choices zeroes the tokens that did not choose it, weighted by "
           "the routing weights. The same routing as moe.py, so its output equals "
           "dense_matmul's dropless output; shardtrace uses it as the reference path.",
       .selected_by = "`shardtrace trace --path masked_loop` (any MoE config)",
       .learn = "the jittable masked loop and why its output equals the dropless path",
       .args = With(dims, {"num_experts=4", "ici_expert_parallelism=2"}),
       .devices = 4,
       .path = "masked_loop",
       .source = PageSource::kJaxPort,
       .reference_overrides = {"sparse_matmul=false", "capacity_factor=-1"}},
  };
}
#pragma GCC diagnostic pop

std::string PageSourceText(PageSource source) {
  switch (source) {
    case PageSource::kSeedMoe:
      return "`src/MaxText/layers/moe.py` at MaxText 313890777 (the seed revision)";
    case PageSource::kSeedLinears:
      return "`MlpBlock` of `src/MaxText/layers/linears.py` at MaxText 313890777 (the seed "
             "revision; moe.py calls it for the shared experts)";
    case PageSource::kPr3981:
      return "the end state of MaxText PR 3981's description (its chunking loop is a next "
             "step there) on moe.py 313890777: a proposal; chunks from the pseudo-key "
             "`shardtrace_pr3981_emb_chunks`";
    case PageSource::kJaxPort:
      return "the masked-loop sparse MoE of the PyTorch-to-JAX sparse-MoE port, with "
             "moe.py 313890777's routing";
  }
  return "";
}

std::string ShellLine(const std::vector<std::string>& words) {
  std::string out, line;
  for (const std::string& w : words) {
    if (!line.empty() && line.size() + 1 + w.size() > 96) {
      out += line + " \\\n";
      line = "    ";
    } else if (!line.empty() && line != "    ") {
      line += " ";
    }
    line += w;
  }
  return out + line;
}

namespace {

// The reproducing command, wrapped with shell continuations to stay within 100 columns.
std::string CommandLine(const VisualizationPage& v) {
  std::vector<std::string> words = {"shardtrace", "trace"};
  words.insert(words.end(), v.args.begin(), v.args.end());
  for (const std::string& w :
       {fmt::format("--devices {}", v.devices), v.block == "moe" ? "" : "--block " + v.block,
        v.path.empty() ? "" : "--path " + v.path, std::string("--numeric"),
        fmt::format("--seed {}", kSeed)})
    if (!w.empty()) words.push_back(w);
  return ShellLine(words);
}

// A page's runs are numeric on the page seed.
RunResult SeededRun(const std::vector<std::string>& args, int64_t devices, const std::string& block,
                    const std::string& path) {
  RunRequest request = SymbolicRequest(args, devices, ParseBlock(block));
  request.evaluation = Evaluation::kNumeric;
  request.seed = kSeed;
  request.masked_loop = path == "masked_loop";
  // Pages show the training step beside the forward pass wherever there is one.
  request.step = !Prepare(request).setup.inference;
  return Run(request);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> PageGraphs(const Trace& trace,
                                                            const SpmdResult& spmd) {
  const std::vector<MermaidPart> parts = MermaidFlowParts(trace, spmd);
  // A graph's collectives: its `⇄` nodes, not the `↑ ⇄` ones that stand for another phase's.
  const auto collectives = [](const std::string& text) {
    int n = 0;
    for (size_t at = text.find("[\"⇄"); at != std::string::npos; at = text.find("[\"⇄", at + 1))
      ++n;
    for (size_t at = text.find("([\"⇄"); at != std::string::npos; at = text.find("([\"⇄", at + 1))
      ++n;
    return n;
  };
  size_t shown = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int have = collectives(parts[i].text), best = collectives(parts[shown].text);
    if (have > best || (best == 0 && have == 0 && parts[i].phase == FlowPhase::kExperts)) shown = i;
  }
  std::vector<std::pair<std::string, std::string>> out;
  if (parts.empty()) return out;
  const auto title = [](const MermaidPart& p) {
    return p.pieces > 1 ? fmt::format("{} ({} of {})", ToString(p.phase), p.piece, p.pieces)
                        : ToString(p.phase);
  };
  out.emplace_back(title(parts[shown]), parts[shown].text);
  for (size_t i = 0; i < parts.size(); ++i)
    if (i != shown) out.emplace_back(title(parts[i]), parts[i].text);
  return out;
}

RenderedPage RenderPage(const VisualizationPage& v) {
  const RunResult run = SeededRun(v.args, v.devices, v.block, v.path);
  const RunSetup& in = run.setup;
  VisualizationDoc doc;
  doc.title = v.title;
  doc.summary = v.summary;
  doc.command = CommandLine(v);
  doc.source = PageSourceText(v.source);
  doc.moe_line_refs = v.source == PageSource::kSeedMoe;
  doc.collectives_written_in = v.source == PageSource::kPr3981        ? "PR 3981 (as modelled)"
                               : v.source == PageSource::kJaxPort     ? "the JAX port"
                               : v.source == PageSource::kSeedLinears ? "linears.py"
                                                                      : "moe.py";
  doc.config_files = in.config.loaded_files();
  doc.overview = FlowOverview(run.trace, run.spmd);
  doc.flow = AsciiFlow(run.trace, run.spmd);
  doc.graphs = PageGraphs(run.trace, run.spmd);
  doc.examples = TreeSections(run.trace, run.captures, v.trees, kPageTrees);
  if (v.send_matrices)
    for (MarkdownExample& e : SendMatrixSections(run.trace, run.captures, kPageTrees))
      doc.examples.push_back(std::move(e));
  std::vector<Invariant> section_invariants;
  for (const PageRun& more : v.more_runs) {
    const RunResult other = SeededRun(more.args, more.devices, "moe", "");
    std::string text = AsciiFlow(other.trace, other.spmd, 100, more.only_scope);
    const Array* indices = other.captures.Find(Capture::kTopKIndices);
    const Array* weights = other.captures.Find(Capture::kTopKWeights);
    const Array* scores = other.captures.Find(Capture::kRouterScores);
    if (more.routing_tree && indices && weights)
      text += "\n" + RoutingTree(*indices, *weights, 0, {.router_scores = scores});
    // A section's own properties, listed as that run's (Llama 4's weights are raw logits,
    // which the page trace's non-negative weights do not cover).
    for (Invariant& inv :
         SectionInvariants(other.trace, other.captures, more.heading, more.routing_tree))
      section_invariants.push_back(std::move(inv));
    doc.examples.push_back({more.heading,
                            more.intro + fmt::format(" Traced with `{}` on {} devices.",
                                                     fmt::join(more.args, " "), more.devices),
                            text});
  }
  if (v.variants)
    doc.variants = KernelVariants({.args = v.args,
                                   .devices = v.devices,
                                   .block = v.block,
                                   .masked_loop = v.path == "masked_loop",
                                   .keys = v.variant_keys,
                                   .extra = v.extra_variants},
                                  run.trace);
  // The page's claim that its output equals another path's, checked on the same seed.
  std::optional<RunResult> other;
  std::optional<ReferenceRun> reference;
  if (!v.reference_overrides.empty()) {
    other = SeededRun(WithOverrides(v.args, v.reference_overrides), v.devices, v.block, "");
    reference = ReferenceRun{
        fmt::format("{} (`{}`)", other->trace.path, fmt::join(v.reference_overrides, " ")),
        &other->captures};
  }
  doc.summary_section =
      SummaryMarkdown({.trace = &run.trace,
                       .spmd = &run.spmd,
                       .step = run.step ? &*run.step : nullptr,
                       .totals = run.totals,
                       .knobs = TraceKnobs({.args = v.args,
                                            .devices = v.devices,
                                            .block = v.block,
                                            .masked_loop = v.path == "masked_loop",
                                            .extra = {}},
                                           run.trace),
                       .legend = "the symbols are explained in the [legend](README.md#legend)"});
  doc.invariants =
      TraceInvariants(run.trace, run.spmd, &run.captures, reference ? &*reference : nullptr);
  for (Invariant& inv : section_invariants) doc.invariants.push_back(std::move(inv));
  RenderedPage page;
  page.text = RenderVisualization(doc, run.trace, run.spmd);
  page.trace = run.trace;
  page.spmd = run.spmd;
  page.invariants = doc.invariants;
  page.warnings = in.warnings;
  return page;
}

namespace {

// The index's "models" cell: the source and, where the page loads one, the model's yml.
std::string PageModels(const VisualizationPage& p) {
  std::string out;
  switch (p.source) {
    case PageSource::kSeedMoe:
      out = "moe.py 313890777";
      break;
    case PageSource::kSeedLinears:
      out = "linears.py 313890777";
      break;
    case PageSource::kPr3981:
      out = "PR 3981's end state (modelled)";
      break;
    case PageSource::kJaxPort:
      out = "JAX port";
      break;
  }
  for (const std::string& a : p.args)
    if (a.rfind("model_name=", 0) == 0) out += fmt::format(", `models/{}.yml`", a.substr(11));
  return out;
}

}  // namespace

namespace {

// The one legend every page links to (README.md#legend): how to read the summary, the ASCII
// flow and the Mermaid graphs.
constexpr std::string_view kLegend = R"(
## Legend

**Summary.** Every page opens with it: the path and the conditions that chose it; the
per-device budget of one layer's forward pass (shardtrace traces no backward pass):
parameters at their `kernel_axes` sharding, the block's input, the peak of live temporaries
with the largest buffer at the peak, and the bytes each device sends per layer in the
collectives moe.py writes and in those XLA's SPMD partitioner inserts ([what XLA
adds](../docs/xla-model.md)); the peak against the HBM of common accelerators (`render --hbm NAME=GIB` adds
one); the collectives per layer; and the knobs that change this, each row a symbolic trace
of the page's config with that change (a parallelism traded with fsdp so the devices stay),
against the config as given.

**ASCII flow.** One `┌─┐` box per run of records in one scope (moe.py's modules, functions
and named scopes, by path; a `[bracketed]` segment is shardtrace's own grouping, no scope in
moe.py), tensors in program order, each as `name: weight|act [dims] dtype` and
`← op(inputs)` for the op that made it; a chain of casts and elementwise ops on one name is
one line (`← as f32, softmax, as bf16`). A `╔═╗` box is a tensor whose sharding an explicit
statement fixed (`kernel_axes`, `maybe_shard_with_logical`, `maybe_shard_with_pspec`,
shard_map in/out specs): per dim its logical axis and the mesh axes it resolves to, then the
PartitionSpec and the per-device block. Other activations have no sharding of their own (XLA
propagates one), so none is shown. `▼ a, b` names the tensors the next stage reads from
earlier ones; stages that read the same tensor but not each other (`wi_0`, `wi_1`) stand
side by side under a fork `├──┐`. `⇄` is a collective written in moe.py (`⇄ xla` one XLA
implies from the shardings), `(if ...)` the condition under which a box or line runs,
`# ...` a note on the value (such as who reads it), which is no condition.

**Mermaid graphs.** A node per tensor, double-bordered nodes for explicit constraints (with
their PartitionSpec), blue `⇄` nodes for collectives, weights shaded, and edges from each
op's inputs to its output.
)";

}  // namespace

std::string VisualizationIndex(const std::vector<VisualizationPage>& pages) {
  std::string out =
      "<!-- Generated by `shardtrace generate`; do not edit: regenerate with `shardtrace "
      "generate` or `make golden`. -->\n"
      "# Visualizations\n\n"
      "One page per path of MaxText's MoE layer (`src/MaxText/layers/moe.py`) and the dense "
      "MLP, each rendered by `shardtrace generate` from a real numeric trace of a small config "
      "(the `shardtrace trace` command that reproduces it is on the page). Every page opens "
      "with a summary: the path and why it runs, the per-device budget of the forward pass "
      "against the HBM of common accelerators, the collectives, and the knobs that change "
      "them, each a traced variant. Then the flow in phases and one Mermaid graph; folded "
      "below: the other phases' graphs, the whole ASCII flow (`┌─┐` scopes, `╔═╗` explicit "
      "sharding constraints), how the page was traced, a config-variant table of the kernel "
      "specs, trees of the routing tensors, and a formal specification (definitions, data "
      "structures, algorithm, einsums, collectives, invariants). `shardtrace render` draws "
      "the same page for any config. The [legend](#legend) below explains the symbols.\n\n"
      "| page | what you learn there | models |\n"
      "|---|---|---|\n";
  for (const VisualizationPage& p : pages)
    out += fmt::format("| [{}]({}) | {} | {} |\n", p.file, p.file, p.learn, PageModels(p));
  out += "\nThe config keys that select each page's path:\n\n| page | config keys |\n|---|---|\n";
  for (const VisualizationPage& p : pages)
    out += fmt::format("| [{}]({}) | {} |\n", p.file, p.file, p.selected_by);
  return out + std::string(kLegend);
}

}  // namespace shardtrace
