// `shardtrace generate [--out DIR] [--check]`: renders visualizations/*.md, one document per
// MoE/MLP path, each from a real numeric trace of the embedded seed-era base.yml with small
// dims (so the numbers in the flow and the mask tree are readable) on a small simulated mesh.
// The list below is fixed and is the documentation of what exists; each document starts with
// the `shardtrace trace` line that reproduces its trace. `--check` renders the same bytes
// and compares them with DIR instead of writing, so CI and the tests catch stale documents.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "cli/commands.h"
#include "config/run_inputs.h"
#include "emit/ascii_flow.h"
#include "emit/fact_text.h"
#include "emit/mask_tree.h"
#include "emit/spec_markdown.h"
#include "emit/text_table.h"
#include "emit/trace_invariants.h"
#include "io/atomic_file.h"
#include "trace/moe_block.h"
#include "util/error.h"

namespace shardtrace {
namespace {

// One document: the trace to run and the words around it.
struct VisualizationSpec {
  std::string file;
  std::string title;
  std::string summary;
  std::vector<std::string> args;  // key=value overrides of the embedded base.yml
  int64_t devices = 1;
  std::string block = "moe";
  bool mask_trees = false;     // dense_matmul with capacity: dispatch/combine mask trees
  bool send_matrices = false;  // ragged_all_to_all: the per-device send matrices
};

constexpr uint64_t kSeed = 1;

std::vector<std::string> With(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// The documented list. Every MoE document shares the same small Mixtral-style dims
// (M=16, H=32, K=2, S=4, one sequence per device); only the path switches differ.
std::vector<VisualizationSpec> Visualizations() {
  const std::vector<std::string> dims = {"base_emb_dim=16",      "base_mlp_dim=32",
                                         "base_moe_mlp_dim=32",  "num_experts_per_tok=2",
                                         "max_target_length=4",  "per_device_batch_size=1",
                                         "decoder_block=mixtral"};
  return {
      {"mlp_block.md",
       "MlpBlock: the dense feed-forward block",
       "The dense transformer MLP (`linears.py` `MlpBlock`, used by dense models and by the "
       "first dense layers of MoE models): `wi_0`/`wi_1` up-projections, the gated activation, "
       "and `wo` down-projection, on an fsdp x tensor mesh so the kernel shardings and the "
       "constrained hidden activation are visible.",
       {"base_emb_dim=16", "base_mlp_dim=32", "base_moe_mlp_dim=32", "max_target_length=4",
        "per_device_batch_size=1", "ici_tensor_parallelism=2"},
       4,
       "mlp"},
      {"moe_dense_dropless.md", "MoE dense_matmul, dropless (`capacity_factor <= 0`)",
       "`RoutedMoE` with `sparse_matmul=false` and no capacity: every token goes through every "
       "expert's matmul and the top-k routing weights, scattered into a dense `[B,S,E]` tensor, "
       "weight-sum the expert outputs. Nothing is dropped.",
       With(dims, {"num_experts=4", "sparse_matmul=false", "ici_expert_parallelism=2"}), 4},
      {"moe_dense_dropping.md", "MoE dense_matmul, token dropping (`capacity_factor > 0`)",
       "`RoutedMoE` with `sparse_matmul=false` and `capacity_factor=1`: `generate_masks` gives "
       "each expert `C` slots per batch row; `dispatch_mask` gathers tokens into the slots "
       "(`BSM,BSEC->EBCM`), `combine_mask` scatters the expert outputs back with their routing "
       "weights. Choices beyond capacity are dropped; the mask trees below show which.",
       With(dims, {"num_experts=4", "sparse_matmul=false", "capacity_factor=1",
                   "ici_expert_parallelism=2"}),
       4, "moe",
       /*mask_trees=*/true},
      {"moe_sparse_megablox.md", "MoE sparse_matmul with megablox, no expert parallelism (EP=1)",
       "`RoutedMoE` with `sparse_matmul=true` and `megablox=true` on a pure fsdp mesh: inside "
       "`shard_map` each device sorts its routed rows by expert (`permute`), runs the grouped "
       "matmuls (`gmm`) over its own rows with every expert's full kernel, and unpermutes. No "
       "token crosses devices.",
       With(dims, {"num_experts=4"}), 4},
      {"moe_sparse_ragged_all_to_all.md",
       "MoE sparse_matmul with ragged_all_to_all expert parallelism (EP=4)",
       "`RoutedMoE` with `sparse_matmul=true` and 4-way expert parallelism: each device "
       "routes its tokens, all-gathers the group sizes, and sends each routed row to the device "
       "holding its expert with `ragged_all_to_all`; after the local `gmm`s a second "
       "`ragged_all_to_all` returns the rows. The send matrices below are the actual ragged "
       "sizes of this run.",
       With(dims, {"num_experts=8", "ici_expert_parallelism=4"}), 4, "moe", false,
       /*send_matrices=*/true},
      {"moe_ring_of_experts.md", "MoE sparse_matmul, ring of experts (EP=2)",
       "`RoutedMoE` with `use_ring_of_experts=true`: instead of an all-to-all, every device "
       "all-gathers the tokens (and router logits) of its expert-parallel group, runs its "
       "local experts on the rows routed to them, and a reduce-scatter (`psum_scatter`) "
       "returns each device the summed outputs of its own tokens.",
       With(dims, {"num_experts=4", "use_ring_of_experts=true", "ici_expert_parallelism=2"}), 4},
      {"moe_shared_experts.md",
       "RoutedAndSharedMoE: routed experts plus shared experts (deepseek3-tiny)",
       "DeepSeek-V3's MoE layer (`RoutedAndSharedMoE`, here `model_name=deepseek3-tiny`): "
       "sigmoid scores plus the routing bias pick each token's top-8 experts "
       "(`deepseek_routing`), whose unbiased scores are normalized and scaled by "
       "`routed_scaling_factor`; the routed experts run on the sparse ragged_all_to_all path, "
       "a shared-expert `MlpBlock` runs on every token, and the two outputs are added.",
       {"model_name=deepseek3-tiny", "max_target_length=4", "per_device_batch_size=1",
        "ici_expert_parallelism=2"},
       4},
      {"moe_pipeline_chunked.md",
       "MoE sparse pipeline with 2 embedding chunks (`num_moe_emb_chunks=2`)",
       "The refactored route / dispatch / gmm_up / maybe_tp_reduce / gmm_down / unpermute "
       "pipeline of MaxText PR 3981 with `num_moe_emb_chunks=2`: the embedding dim is split in "
       "two chunks, each with its own wi all-gather and dispatch, and the gmm_up partials are "
       "accumulated before the activation.",
       With(dims, {"num_experts=4", "num_moe_emb_chunks=2", "ici_expert_parallelism=2"}), 4},
  };
}

std::string CommandLine(const VisualizationSpec& v) {
  return fmt::format("shardtrace trace {} --devices {}{} --numeric --seed {}",
                     fmt::join(v.args, " "), v.devices,
                     v.block == "moe" ? "" : " --block " + v.block, kSeed);
}

const Fact* FindFact(const Trace& trace, const std::string& name) {
  for (const Fact& f : trace.facts)
    if (f.name == name) return &f;
  return nullptr;
}

std::vector<MarkdownExample> MaskExamples(const BlockRun& run) {
  std::string facts;
  for (const char* name : {"expert_capacity_per_batch", "tokens dropped per expert"})
    if (const Fact* f = FindFact(run.trace, name))
      facts += fmt::format(" `{} = {}`{}.", f->name, FactValuesText(*f),
                           f->note.empty() ? "" : " (" + f->note + ")");
  std::vector<MarkdownExample> out;
  const auto dispatch = run.captures.find("dispatch_mask");
  const auto combine = run.captures.find("combine_mask");
  const auto indices = run.captures.find("top_k_indices");
  if (dispatch == run.captures.end() || combine == run.captures.end() ||
      indices == run.captures.end())
    Fail("generate: the dense dropping run captured no dispatch/combine masks or top_k_indices");
  out.push_back({"Routing example: dispatch_mask",
                 "Batch row 0 of this run, as a tree Expert → slot → tokens: the dispatch "
                 "einsum `BSM,BSEC->EBCM` contracts the tokens `S`, so they are the leaves; a "
                 "slot holds at most one token, and a choice that finds its expert's `C` slots "
                 "full is dropped (it appears in no slot)." +
                     facts,
                 MaskTree("dispatch_mask", dispatch->second, 0, &indices->second)});
  out.push_back({"Routing example: combine_mask",
                 "The same slots with the routing weights the combine einsum `EBCM,BSEC->BSM` "
                 "applies when it scatters expert outputs back to their tokens; a token whose "
                 "choice was dropped gets fewer than K weighted outputs.",
                 MaskTree("combine_mask", combine->second, 0, &indices->second)});
  return out;
}

// Each `rows sent [device, peer]` fact as a grid, rows = sending device.
std::vector<MarkdownExample> SendMatrixExamples(const Trace& trace) {
  std::string text;
  for (const Fact& f : trace.facts) {
    if (f.name.find("rows sent [device, peer]") == std::string::npos || f.shape.size() != 2)
      continue;
    std::vector<std::string> header = {"device"};
    for (int64_t p = 0; p < f.shape[1]; ++p) header.push_back(fmt::format("to {}", p));
    header.push_back("total");
    TextTable table(header);
    for (int64_t d = 0; d < f.shape[0]; ++d) {
      std::vector<std::string> row = {std::to_string(d)};
      double total = 0;
      for (int64_t p = 0; p < f.shape[1]; ++p) {
        const double v = f.values[d * f.shape[1] + p];
        total += v;
        row.push_back(FactValueText(v));
      }
      row.push_back(FactValueText(total));
      table.AddRow(row);
    }
    text += fmt::format("{}{}\n{}", text.empty() ? "" : "\n", f.name, table.Render("  "));
  }
  if (text.empty()) return {};
  return {{"Routing example: ragged all-to-all send sizes",
           "Rows each device sends to each expert-parallel peer in the forward all-to-all "
           "(`x`, the routed token rows) and back (`intermediate_output`, the expert outputs): "
           "the second matrix is the transpose of the first.",
           text}};
}

std::string Render(const VisualizationSpec& v) {
  const RunInputs in = LoadRunInputs(v.args, v.devices);
  const MoeSetup setup = MakeMoeSetup(in.config, in.mesh);
  const int n_act = static_cast<int>(in.config.StrList("mlp_activations").size());
  const MoeParams params = MakeParams(setup, n_act, /*numeric=*/true, kSeed);
  const BlockRun run = RunBlock(in.config, in.mesh, setup, params, ParseBlock(v.block), true);
  VisualizationDoc doc;
  doc.title = v.title;
  doc.summary = v.summary;
  doc.command = CommandLine(v);
  doc.flow = AsciiFlow(run.trace);
  if (v.mask_trees) doc.examples = MaskExamples(run);
  if (v.send_matrices) doc.examples = SendMatrixExamples(run.trace);
  doc.invariants = TraceInvariants(run.trace, &run.captures);
  return RenderVisualization(doc, run.trace);
}

std::string ReadWhole(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

bool RunGenerateCommand(const GenerateOptions& options, std::ostream& out) {
  namespace fs = std::filesystem;
  const fs::path dir = options.out;
  const std::string shown =
      options.out.ends_with('/') ? options.out : options.out + "/";  // "visualizations/"
  if (!options.check) fs::create_directories(dir);
  std::vector<std::string> stale;
  const std::vector<VisualizationSpec> specs = Visualizations();
  for (const VisualizationSpec& v : specs) {
    const std::string text = Render(v);
    const fs::path path = dir / v.file;
    if (options.check) {
      if (!fs::exists(path)) {
        out << fmt::format("missing  {}\n", path.string());
        stale.push_back(v.file);
      } else if (ReadWhole(path) != text) {
        out << fmt::format("differs  {}\n", path.string());
        stale.push_back(v.file);
      }
    } else {
      WriteTextAtomically(path.string(), text);
      out << fmt::format("wrote    {}\n", path.string());
    }
  }
  if (!options.check) {
    out << fmt::format("{} visualizations in {}\n", specs.size(), shown);
    return true;
  }
  if (stale.empty()) {
    out << fmt::format("{} is up to date ({} files)\n", shown, specs.size());
    return true;
  }
  const std::string fix = options.out == GenerateOptions().out
                              ? "shardtrace generate"
                              : "shardtrace generate --out " + options.out;
  out << fmt::format("{} is stale: {}; run {}\n", shown, fmt::join(stale, ", "), fix);
  return false;
}

}  // namespace shardtrace
