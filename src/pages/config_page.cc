#include "pages/config_page.h"

#include <optional>

#include "model/whole_step.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "check/trace_invariants.h"
#include "emit/ascii_flow.h"
#include "emit/flow_overview.h"
#include "emit/human_bytes.h"
#include "emit/mermaid_flow.h"
#include "emit/spec_markdown.h"
#include "emit/text_table.h"
#include "emit/xla_spmd_text.h"
#include "pages/config_page_html.h"
#include "pages/kernel_variants.h"
#include "pages/knob_variants.h"
#include "pages/page_sections.h"
#include "pages/visualization_pages.h"
#include "paths/moe_block.h"
#include "run/run.h"
#include "spmd/trace_totals.h"
#include "util/error.h"

namespace shardtrace {
namespace {

constexpr uint64_t kSeed = 1;
// Trees on a page: the first 8 devices, within the page's 100 columns.
constexpr DeviceTreeView kPageTrees = {.max_devices = 8, .width = 100};
// The routing example shows one batch row; more experts than this make a mask tree too
// long to read, so the dispatch/combine trees are left out above it.
constexpr int64_t kMaxMaskTreeExperts = 16;
// Simulating more devices than this numerically is slow; the trees are left out then.
constexpr int64_t kMaxNumericDevices = 512;

std::string KeyOf(const std::string& arg) { return arg.substr(0, arg.find('=')); }

// The config's own args with the model dims replaced by small ones (same mesh, experts,
// top-k, routing and path switches): what the routing trees run on. The batch and sequence
// only shrink, so a decode config (a global batch of 1, one token) stays on its path.
std::vector<std::string> ReducedArgs(const std::vector<std::string>& args, const Config& config,
                                     const MoeSetup& setup, int64_t devices) {
  // A kernel's embed dim must divide by its mesh axes (JAX refuses a parameter that does
  // not, and so does trace), and the embedding splits into shardtrace_pr3981_emb_chunks chunks on
  // each of its shards: a multiple of chunks x devices, at least 16, keeps both whole (the
  // devices bound the shards).
  const int64_t chunks = std::max<int64_t>(setup.emb_chunks, 1);
  const int64_t emb = (16 + chunks * devices - 1) / (chunks * devices) * chunks * devices;
  std::vector<std::string> reduced = {
      "override_model_config=true",
      fmt::format("base_emb_dim={}", emb),
      "base_mlp_dim=32",
      "base_moe_mlp_dim=32",
      fmt::format("max_target_length={}", std::min<int64_t>(setup.seq, 4)),
      fmt::format("per_device_batch_size={}",
                  std::min(config.Float("per_device_batch_size"), 1.0))};
  // The base dims above are the reduced dims themselves, not to be scaled up again.
  if (config.Int("global_parameter_scale") != 1) reduced.push_back("global_parameter_scale=1");
  std::vector<std::string> out;
  for (const std::string& a : args) {
    const bool replaced = a.find('=') != std::string::npos &&
                          std::any_of(reduced.begin(), reduced.end(),
                                      [&](const std::string& r) { return KeyOf(r) == KeyOf(a); });
    if (!replaced) out.push_back(a);
  }
  out.insert(out.end(), reduced.begin(), reduced.end());
  return out;
}

// The config is small enough for its trees to read as they are (a few tokens per row, rows
// of a few tokens per device); anything bigger runs ReducedArgs.
bool Small(const MoeSetup& s) {
  return s.seq <= 16 && s.batch * s.seq <= 256 && s.emb <= 256 && s.wi_hidden <= 512 &&
         s.mlp_dim <= 512;
}

std::string Dims(const MoeSetup& s) {
  return fmt::format("B={} S={} M={} E={} K={} H={}", s.batch, s.seq, s.emb, s.num_experts, s.top_k,
                     s.wi_hidden);
}

// The "Per-device totals" section: weights, communication (written and XLA-inserted) and
// the memory model's breakdown (docs/xla-model.md).
MarkdownExample TotalsExample(const Trace& trace, const SpmdResult& spmd) {
  const TraceTotals totals = ComputeTotals(trace, spmd);
  TextTable placed({"per device", "bytes"});
  placed.AddRow({"weights (kernel_axes)", HumanBytes(totals.weight_bytes_per_device)});
  placed.AddRow({"communication sent per layer (collectives in moe.py)",
                 HumanBytes(totals.collective_bytes_sent_per_device)});
  placed.AddRow({"communication sent per layer (inserted by XLA, \u21c4 xla)",
                 HumanBytes(totals.implied_bytes_sent_per_device)});
  placed.AddRow(
      {"communication sent per layer (total)",
       HumanBytes(totals.collective_bytes_sent_per_device + totals.implied_bytes_sent_per_device)});
  std::string text = placed.Render();
  const std::vector<std::string> memory = MemoryLines(trace, spmd);
  if (!memory.empty()) {
    text += "\nmemory per device (forward pass)\n";
    for (const std::string& line : memory) text += "  " + line + "\n";
  }
  return {"Per-device totals",
          "Weights placed by their kernel axes, the bytes the collectives moe.py writes and "
          "those XLA's SPMD partitioner inserts send, and the per-device memory of the forward "
          "pass: parameters, inputs and the peak of live temporaries with the buffers that "
          "hold it. Tensors no statement places get their sharding from shardtrace's model of "
          "XLA's propagation (docs/xla-model.md).",
          text};
}

// The page of the user's config from its symbolic run (a step wherever there is one).
std::string PageMarkdown(const ConfigPageRequest& request, const RunResult& symbolic) {
  const std::vector<std::string>& args = request.args;
  const Block block = ParseBlock(request.block);
  const RunSetup& in = symbolic.setup;
  const MoeSetup& setup = in.setup;
  const Trace& trace = symbolic.trace;
  const SpmdResult& spmd = symbolic.spmd;
  const int64_t devices = in.mesh.num_devices();

  VisualizationDoc doc;
  const std::string model = setup.model_name.empty() ? "default model" : setup.model_name;
  doc.title = fmt::format("{}: {} on {} devices", model, trace.path, devices);
  std::vector<std::string> words = {"shardtrace", "trace"};
  words.insert(words.end(), args.begin(), args.end());
  words.push_back(fmt::format("--devices {}", devices));
  if (request.block != "moe") words.push_back("--block " + request.block);
  doc.command = ShellLine(words);
  doc.source = setup.settings.revision.MoePySource();
  doc.config_files = in.config.loaded_files();
  doc.legend = "legend of shardtrace's `visualizations/README.md`";
  doc.overview = FlowOverview(trace, spmd);
  doc.flow = AsciiFlow(trace, spmd);
  doc.graphs = PageGraphs(trace, spmd);

  std::string trees_note;
  if (block == Block::kMoe && devices <= kMaxNumericDevices) {
    // What trace accepts, render draws: a reduced run the config's own constraints refuse
    // (or one too big to simulate) leaves the trees out and the page says why.
    try {
      const bool small = Small(setup);
      const std::vector<std::string> tree_args =
          small ? args : ReducedArgs(args, in.config, setup, devices);
      RunRequest tree_request = SymbolicRequest(tree_args, request.devices, block);
      tree_request.evaluation = Evaluation::kNumeric;
      tree_request.seed = kSeed;
      const RunResult run = Run(tree_request);
      const MoeSetup& tsetup = run.setup.setup;
      std::vector<std::string> twords = {"shardtrace", "trace"};
      twords.insert(twords.end(), tree_args.begin(), tree_args.end());
      twords.push_back(fmt::format("--devices {} --numeric --seed {}", devices, kSeed));
      const std::string origin =
          small ? fmt::format("a numeric run of this config ({}, seed {})", Dims(tsetup), kSeed)
                : fmt::format(
                      "a reduced numeric run of the same path on the same mesh: {} instead of {} "
                      "(the model dims reduced, experts, top-k, routing and path switches kept; "
                      "seed {})",
                      Dims(tsetup), Dims(setup), kSeed);
      if (run.trace.path != trace.path) {
        trees_note = fmt::format("The reduced run takes another path ({}), so no tree is shown.",
                                 run.trace.path);
      } else {
        std::vector<std::string> trees = DrawableTrees(run.captures);
        if (tsetup.num_experts > kMaxMaskTreeExperts &&
            std::erase_if(trees, [](const std::string& t) {
              return t == "dispatch_mask" || t == "combine_mask";
            }) > 0)
          trees_note = fmt::format("The dispatch/combine mask trees are left out: {} experts.",
                                   tsetup.num_experts);
        std::vector<MarkdownExample> sections =
            TreeSections(run.trace, run.captures, trees, kPageTrees);
        for (MarkdownExample& e : SendMatrixSections(run.trace, run.captures, kPageTrees))
          sections.push_back(std::move(e));
        if (!sections.empty())
          sections.front().intro =
              fmt::format("The trees and matrices below come from {}:\n\n```sh\n{}\n```\n\n{}",
                          origin, ShellLine(twords), sections.front().intro);
        for (MarkdownExample& e : sections) doc.examples.push_back(std::move(e));
      }
    } catch (const Error& e) {
      trees_note =
          fmt::format("No routing tree: the numeric run for the trees is refused ({}).", e.what());
    }
  } else if (block == Block::kMoe) {
    trees_note =
        fmt::format("No routing tree: a numeric run on {} devices is not attempted.", devices);
  }
  doc.summary = fmt::format(
      "A page rendered by `shardtrace render` for this config ({}): the summary, the tensor "
      "flow and the formal specification come from a symbolic trace at full size (nothing "
      "allocated); the buffers behind the peak are under Per-device totals in the worked "
      "examples.{}",
      Dims(setup), trees_note.empty() ? "" : " " + trees_note);
  doc.examples.push_back(TotalsExample(trace, spmd));
  // With a compile_topology the summary's HBM line is the whole training step's.
  std::optional<FitResult> whole;
  if (in.config.Has("compile_topology") && !in.config.Str("compile_topology").empty()) {
    FitRequest fit;
    fit.args = args;
    fit.variants = false;
    whole = Fit(fit);
  }
  doc.summary_section = SummaryMarkdown(
      {.trace = &trace,
       .spmd = &spmd,
       .step = symbolic.step ? &*symbolic.step : nullptr,
       .totals = symbolic.totals,
       .knobs = TraceKnobs({.args = args, .devices = devices, .block = request.block, .extra = {}},
                           trace),
       .accelerators = request.accelerators,
       .legend = "the symbols are explained in shardtrace's `visualizations/README.md` (legend)",
       .fit = whole ? &*whole : nullptr});
  doc.variants = KernelVariants({.args = args,
                                 .devices = devices,
                                 .block = request.block,
                                 .masked_loop = false,
                                 .keys = {"shard_exp_on_fsdp", "use_2d_fsdp_sharding"},
                                 .extra = {}},
                                trace);
  doc.invariants = TraceInvariants(trace, spmd, nullptr);
  std::string page = RenderVisualization(doc, trace, spmd);
  // The template's first line says generate wrote the page; this one comes from render.
  if (page.rfind("<!--", 0) == 0) {
    const size_t end = page.find("-->\n");
    if (end != std::string::npos)
      page = "<!-- Rendered by `shardtrace render`; regenerate with the command below. -->\n" +
             page.substr(end + 4);
  }
  return page;
}

}  // namespace

ConfigPage RenderConfigPage(const ConfigPageRequest& request) {
  RunRequest symbolic_request =
      SymbolicRequest(request.args, request.devices, ParseBlock(request.block));
  // The page shows the training step beside the forward pass wherever there is one.
  symbolic_request.step = !Prepare(symbolic_request).setup.inference;
  const RunResult symbolic = Run(symbolic_request);
  // The variants the page traces are shardtrace's, not the user's: their warnings are not.
  const std::vector<Warning>& warnings = symbolic.setup.warnings;
  return {WarnedBefore(warnings,
                       [&] {
                         const std::string markdown = PageMarkdown(request, symbolic);
                         if (request.format != "html") return markdown;
                         return ConfigPageHtml(
                             {.markdown = &markdown,
                              .trace = &symbolic.trace,
                              .spmd = &symbolic.spmd,
                              .step = symbolic.step ? &*symbolic.step : nullptr,
                              .accelerators = request.accelerators,
                              .command = request.command});
                       }),
          warnings};
}

}  // namespace shardtrace
