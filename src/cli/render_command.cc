// `shardtrace render [CONFIG.yml ...] [key=value ...] [--block ...] [--devices N] -o FILE.md`:
// one visualization page for any user config; pages/config_page composes it.
#include "cli/cli.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "pages/config_page.h"
#include "pages/page_summary.h"

namespace shardtrace {
namespace {

struct RenderOptions {
  CommonOptions common;  // args: CONFIG.yml / key=value; output: the page (.md)
  std::string block = "moe";
  std::vector<std::string> hbm;  // --hbm NAME=GIB: accelerators the summary fits the peak to
};

std::vector<Warning> RunRenderCommand(const RenderOptions& options, std::ostream& out) {
  ConfigPageRequest request{
      .args = options.common.args, .devices = options.common.devices, .block = options.block};
  for (const std::string& hbm : options.hbm) request.accelerators.push_back(ParseAccelerator(hbm));
  ConfigPage page = RenderConfigPage(request);
  WriteOutput(options.common, page.text, out);
  return std::move(page.warnings);
}

}  // namespace

Command AddRenderCommand(CLI::App& app) {
  auto options = std::make_shared<RenderOptions>();
  CLI::App* cmd = app.add_subcommand(
      "render", "one visualization page (flow, trees, formal spec) for any config");
  AddCommon(cmd, options->common, {});
  cmd->add_option("--hbm", options->hbm,
                  "NAME=GIB: also fit the peak per device to this accelerator's HBM "
                  "(repeatable; e.g. MI300X=192)");
  AddBlock(cmd, options->block);
  cmd->footer(
      "Example: shardtrace render maxtext/src/maxtext/configs/base.yml "
      "model_name=deepseek3-671b ici_expert_parallelism=64 --devices 256 -o deepseek3.md");
  return PlainCommand(cmd, options, std::shared_ptr<CommonOptions>(options, &options->common),
                      &RunRenderCommand);
}

}  // namespace shardtrace
