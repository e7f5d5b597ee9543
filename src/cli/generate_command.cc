// `shardtrace generate [--out DIR] [--check]`: renders visualizations/*.md, the pages that
// visualization_pages.h lists, each from a real numeric trace. `--check` renders the same
// bytes and compares them with DIR instead of writing, so CI and the tests catch stale
// documents.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "cli/commands.h"
#include "cli/visualization_pages.h"
#include "io/atomic_file.h"
#include "util/error.h"

namespace shardtrace {
namespace {

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
  if (!options.check) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) Fail("generate --out ({}): cannot create the directory: {}", options.out, ec.message());
  }
  std::vector<std::string> stale;
  const std::vector<VisualizationPage> pages = VisualizationPages();
  // The pages, then the index of them (README.md).
  std::vector<std::pair<std::string, std::string>> files;
  for (const VisualizationPage& v : pages) files.emplace_back(v.file, RenderPage(v).text);
  files.emplace_back("README.md", VisualizationIndex(pages));
  for (const auto& [file, text] : files) {
    const fs::path path = dir / file;
    if (options.check) {
      if (!fs::exists(path)) {
        out << fmt::format("missing  {}\n", path.string());
        stale.push_back(file);
      } else if (ReadWhole(path) != text) {
        out << fmt::format("differs  {}\n", path.string());
        stale.push_back(file);
      }
    } else {
      WriteTextAtomically(path.string(), text);
      out << fmt::format("wrote    {}\n", path.string());
    }
  }
  if (!options.check) {
    out << fmt::format("{} visualizations and their index in {}\n", pages.size(), shown);
    return true;
  }
  if (stale.empty()) {
    out << fmt::format("{} is up to date ({} files)\n", shown, files.size());
    return true;
  }
  const std::string fix = options.out == GenerateOptions().out
                              ? "shardtrace generate"
                              : "shardtrace generate --out " + options.out;
  out << fmt::format("{} is stale: {}; run {}\n", shown, fmt::join(stale, ", "), fix);
  return false;
}

}  // namespace shardtrace
