// `shardtrace generate [--out DIR] [--check]`: renders visualizations/*.md, the pages that
// visualization_pages.h lists, each from a real numeric trace. `--check` renders the same
// bytes and compares them with DIR instead of writing, so CI and the tests catch stale
// documents.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <optional>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "io/atomic_file.h"
#include "io/input_file.h"
#include "pages/visualization_pages.h"
#include "util/error.h"

namespace shardtrace {
namespace {

struct GenerateOptions {
  std::string out = "visualizations";  // directory of the *.md files
  bool check = false;                  // compare with the files in `out`, write nothing
};

CommandOutcome RunGenerateCommand(const GenerateOptions& options, std::ostream& out) {
  namespace fs = std::filesystem;
  const fs::path dir = options.out;
  const std::string shown =
      options.out.ends_with('/') ? options.out : options.out + "/";  // "visualizations/"
  std::error_code ec;
  if (!options.check) {
    fs::create_directories(dir, ec);
    if (ec) Fail("generate --out ({}): cannot create the directory: {}", options.out, ec.message());
  } else if (const fs::file_status st = fs::status(dir, ec);
             st.type() != fs::file_type::directory) {
    // A mistyped --out is bad input (exit 2), not a stale directory of 14 missing pages.
    Fail("generate --check --out ({}): expected a directory of pages, found {}", options.out,
         st.type() == fs::file_type::not_found ? "no such directory"
         : ec                                  ? ec.message()
                                               : "a file that is not a directory");
  }
  std::vector<std::string> stale;
  const std::vector<VisualizationPage> pages = VisualizationPages();
  // The pages, then the index of them (README.md).
  std::vector<std::string> names;
  for (const VisualizationPage& v : pages) names.push_back(v.file);
  names.emplace_back("README.md");
  // Every file before any page renders: --check reads what is there (ReadInputFile refuses a
  // directory, FIFO or device in a page's place; only a name not there at all is missing),
  // a write checks each target, so a bad one stops the run before anything is written.
  std::vector<std::optional<std::string>> on_disk(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string path = (dir / names[i]).string();
    if (!options.check)
      CheckOutputFile(path);
    else if (fs::symlink_status(path, ec).type() != fs::file_type::not_found)
      on_disk[i] = ReadInputFile(path, "visualization page");
  }
  CommandOutcome outcome;  // the pages' config warnings
  // Every page renders before anything is written, so a page that fails writes none.
  std::vector<std::string> texts;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i < pages.size()) {
      RenderedPage page = WarnedBefore(outcome.warnings, [&] { return RenderPage(pages[i]); });
      AddWarnings(outcome.warnings, page.warnings);
      texts.push_back(std::move(page.text));
    } else {
      texts.push_back(VisualizationIndex(pages));
    }
  }
  if (!options.check) {
    // Standard output is tried before the first file: a closed or failing stdout is exit 2
    // with no page written, rather than after the first page.
    WriteStdout(fmt::format("writing  {} visualizations and their index in {}\n", pages.size(), shown),
                out);
  }
  for (size_t i = 0; i < names.size(); ++i) {
    const fs::path path = dir / names[i];
    const std::string& text = texts[i];
    if (options.check) {
      if (!on_disk[i]) {
        WriteStdout(fmt::format("missing  {}\n", path.string()), out);
        stale.push_back(names[i]);
      } else if (*on_disk[i] != text) {
        WriteStdout(fmt::format("differs  {}\n", path.string()), out);
        stale.push_back(names[i]);
      }
    } else {
      WriteTextAtomically(path.string(), text);
    }
  }
  if (!options.check) {
    // Reported once every page is written: a pipe closed early (`| head`) fails the report,
    // never leaves part of the pages old and part new.
    std::string wrote;
    for (const std::string& name : names) wrote += fmt::format("wrote    {}\n", (dir / name).string());
    WriteStdout(wrote, out);
  }
  if (!options.check) {
    WriteStdout(fmt::format("{} visualizations and their index in {}\n", pages.size(), shown), out);
    return outcome;
  }
  if (stale.empty()) {
    WriteStdout(fmt::format("{} is up to date ({} files)\n", shown, names.size()), out);
    return outcome;
  }
  const std::string fix = options.out == GenerateOptions().out
                              ? "shardtrace generate"
                              : "shardtrace generate --out " + options.out;
  WriteStdout(fmt::format("{} is stale: {}; run {}\n", shown, fmt::join(stale, ", "), fix), out);
  outcome.status = kExitMismatch;
  return outcome;
}

}  // namespace

Command AddGenerateCommand(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "generate", "render visualizations/*.md from real traces of the embedded configs");
  cmd->add_option("--out", options->out, "directory of the markdown files")->capture_default_str();
  cmd->add_flag("--check", options->check,
                "write nothing; exit 1 naming the files that differ from a fresh render");
  cmd->footer("Example: shardtrace generate --check");
  return {cmd, nullptr,
          [options] {
            if (!options->check) CheckOutputDirectory(options->out, "generate --out");
            return std::vector<std::string>();
          },
          [options](std::ostream& out) { return RunGenerateCommand(*options, out); }};
}

}  // namespace shardtrace
