// The documented visualization pages (visualizations/*.md): which config each traces and
// the words around it, and the one function that runs a page's trace and renders it. The
// list is the documentation of what exists; `shardtrace generate` writes it, `--check`
// compares, and the tests assert the conventions on every page.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "check/trace_invariants.h"
#include "ir/trace.h"
#include "util/warnings.h"

namespace shardtrace {

// What a page's trace follows: moe.py at the seed revision, or a proposal on top of it.
enum class PageSource {
  kSeedMoe,      // src/MaxText/layers/moe.py at MaxText 313890777
  kSeedLinears,  // src/MaxText/layers/linears.py (MlpBlock) at MaxText 313890777
  kPr3981,       // MaxText PR 3981's refactored pipeline, as proposed (not in moe.py 313890777)
  kJaxPort,      // the masked-loop sparse MoE port (a PyTorch-to-JAX sparse-MoE port)
};

// A second trace shown on a page (the routing variants beside the main one): its routing
// stages and its routing tree.
struct PageRun {
  std::string heading;
  std::string intro;  // one markdown paragraph
  std::vector<std::string> args;
  int64_t devices = 1;
  std::string only_scope;    // draw only the stages whose scope contains this
  bool routing_tree = true;  // and the top-k routing tree
};

// One document: the trace to run and the words around it.
struct VisualizationPage {
  std::string file;
  std::string title;
  std::string summary;            // one markdown paragraph
  std::string selected_by;        // the index's "config keys that select it" (markdown)
  std::string learn;              // the index's "what the reader learns there"
  std::vector<std::string> args;  // key=value overrides of the embedded base.yml
  int64_t devices = 1;
  std::string block = "moe";
  std::string path;  // --path (empty: the one RoutedMoE selects)
  PageSource source = PageSource::kSeedMoe;
  // The rank >= 3 routing tensors the page draws as trees (batch row 0 of the seeded run):
  // top_k_indices/top_k_weights (Token -> choice -> expert; with "weights", named as the
  // dropless [B,S,E] weights they fill), dispatch_mask/combine_mask (Expert -> slot ->
  // tokens), group_scores/group_mask (Token -> routing group). The tests hold every page to
  // a tree per name.
  std::vector<std::string> trees = {"top_k_indices", "top_k_weights"};
  bool send_matrices = false;  // ragged_all_to_all: the per-device send matrices
  bool variants = true;        // the config-variant table of kernel specs
  // The boolean switches the variant table turns on one at a time (beside EP on/off).
  std::vector<std::string> variant_keys = {"shard_exp_on_fsdp", "use_2d_fsdp_sharding"};
  // Further variant columns: a label and its overrides.
  std::vector<std::pair<std::string, std::vector<std::string>>> extra_variants;
  std::vector<PageRun> more_runs;
  // Overrides of `args` for a second run on the same seed whose output the page's must
  // equal, checked as an invariant (the masked loop against dense dropless, the ring against
  // the all-to-all path); empty for none.
  std::vector<std::string> reference_overrides;
};

// The pages, in index order.
std::vector<VisualizationPage> VisualizationPages();

// "`src/MaxText/layers/moe.py` at MaxText 313890777", ...: the page header's source line.
std::string PageSourceText(PageSource source);

// Words joined with spaces, wrapped with shell continuations within 100 columns.
std::string ShellLine(const std::vector<std::string>& words);

// visualizations/README.md: one line per page (path, the config keys that select it, what
// the reader learns there). Generated and checked with the pages.
std::string VisualizationIndex(const std::vector<VisualizationPage>& pages);

struct RenderedPage {
  std::string text;                   // the whole markdown document
  Trace trace;                        // the trace it was rendered from
  SpmdResult spmd;                    // and its SPMD result
  std::vector<Invariant> invariants;  // as the page lists them
  std::vector<Warning> warnings;      // the page's config's (RunSetup::warnings)
};

// The page's Mermaid graphs, one per phase of the flow (MermaidFlowParts), titled by phase:
// first the one a page shows, the phase with the most collectives (the experts when none
// has any), then the others in flow order, which the page folds.
std::vector<std::pair<std::string, std::string>> PageGraphs(const Trace& trace,
                                                            const SpmdResult& spmd);

// Runs the page's trace (numeric, seeded) and renders it. Deterministic.
RenderedPage RenderPage(const VisualizationPage& page);

}  // namespace shardtrace
