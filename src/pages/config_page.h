// The page `shardtrace render` writes: one visualization page for any user config, composed like
// generate's pages from the same pieces (AsciiFlow, page_sections' trees and send matrices,
// KernelVariants' config-variant table, TraceInvariants, RenderVisualization and its template). The
// flow and the formal specification come from a symbolic trace at full size; the trees need real
// numbers, so they come from a numeric run of the same config on the same mesh, with the model dims
// reduced when the config is too big for a tree to read (the page says so and gives the
// reduced dims); on a big mesh the per-device trees draw the first devices. Per-device
// figures are the ones the trace supports: a "Per-device totals" section counts placed
// tensors and lists the activations no statement places as "unconstrained (XLA chooses)",
// never adding their global size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pages/page_summary.h"
#include "util/warnings.h"

namespace shardtrace {

struct ConfigPageRequest {
  std::vector<std::string> args;   // CONFIG.yml paths and key=value overrides, in order
  std::optional<int64_t> devices;  // --devices (default: the product of the parallelisms)
  std::string block = "moe";       // moe | mlp | shared
  std::vector<Accelerator> accelerators = DefaultAccelerators();  // the summary's HBM fits
  std::string format = "markdown";  // markdown | html (pages/config_page_html.h)
  std::string command;              // html: the shell line that writes the report
};

struct ConfigPage {
  std::string text;               // the page: markdown, or the HTML report
  std::vector<Warning> warnings;  // the config's (RunSetup::warnings): render prints them
};

ConfigPage RenderConfigPage(const ConfigPageRequest& request);

}  // namespace shardtrace
