// What a page looks like to its reader, on every committed page (visualizations/*.md) and on
// `render` of DeepSeek-V3 (EP32 x FSDP8, 256 devices, a golden file): at most 250 lines
// visible outside <details>, code blocks within 100 columns, table rows within 200
// characters, the legend once in visualizations/README.md and linked from each page.
#include <catch2/catch.hpp>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "emit/text_table.h"
#include "pages/visualization_pages.h"
#include "run/run.h"
#include "test_support.h"

namespace shardtrace {
namespace {

using testing::ReadFile;
using testing::SourcePath;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Lines a reader sees before unfolding anything: outside every <details> block, the
// <details>, <summary> and </details> lines themselves included.
size_t VisibleLines(const std::string& page) {
  size_t visible = 0;
  int depth = 0;
  for (const std::string& line : Lines(page)) {
    if (line.rfind("<details>", 0) == 0) {
      ++visible;
      ++depth;
    } else if (line.rfind("</details>", 0) == 0) {
      ++visible;
      --depth;
    } else if (depth == 0 || line.rfind("<summary>", 0) == 0) {
      ++visible;
    }
  }
  CHECK(depth == 0);
  return visible;
}

void CheckLayout(const std::string& page) {
  CHECK(VisibleLines(page) <= 250);
  bool fence = false;
  for (const std::string& line : Lines(page)) {
    INFO(line);
    if (line.rfind("```", 0) == 0) {
      fence = !fence;
      continue;
    }
    if (fence) CHECK(DisplayWidth(line) <= 100);
    if (!fence && line.rfind("|", 0) == 0) CHECK(line.size() <= 200);
  }
  // The symbols are explained once, in the index, not on the page.
  CHECK(page.find("The flow in stages: one `┌─┐` box per run of records") == std::string::npos);
}

TEST_CASE("every committed page keeps to one screen of answers and folds the rest",
          "[viz][layout]") {
  for (const VisualizationPage& v : VisualizationPages()) {
    INFO(v.file);
    const std::string page = ReadFile(SourcePath("visualizations/" + v.file));
    CheckLayout(page);
    CHECK(page.find("[legend](README.md#legend)") != std::string::npos);
    // Each folded block has a title a reader can scan.
    for (const std::string& line : Lines(page))
      if (line == "<details>") CHECK(page.find("<summary><b>") != std::string::npos);
  }
  const std::string index = ReadFile(SourcePath("visualizations/README.md"));
  CHECK(index.find("\n## Legend\n") != std::string::npos);
  for (const std::string& line : Lines(index)) {
    INFO(line);
    if (line.rfind("|", 0) == 0) CHECK(line.size() <= 200);
  }
}

TEST_CASE("render: DeepSeek-V3 EP32 x FSDP8 reads like the committed pages", "[viz][layout]") {
  testing::TempDir dir;
  const testing::CommandResult r = testing::RunShardtrace(
      {"render", "testdata/maxtext-configs/base.yml", "model_name=deepseek3-671b",
       "ici_expert_parallelism=32", "ici_fsdp_parallelism=8", "--devices", "256", "-o",
       dir.File("page.md")});
  REQUIRE(r.status == 0);
  const std::string page = ReadFile(dir / "page.md");
  testing::CompareWithGolden("expected/render_deepseek3-671b_ep32_fsdp8.md", page);
  CheckLayout(page);
  // A variant that turns expert parallelism off gives fsdp the devices (issue 21: with fsdp
  // pinned to 8 every variant column used to be "Not traced" for 256 devices).
  CHECK(page.find("| `wi_0` (kernel_axes) | `P('expert', 'fsdp', None)` |") != std::string::npos);
  CHECK(page.find("EP off (`ici_expert_parallelism=1`) |") != std::string::npos);
  CHECK(page.find("there are 256 devices per slice") == std::string::npos);
  // The summary opens the page and the flow follows; everything else is folded.
  CHECK(page.find("## Summary") < page.find("## Tensor flow"));
  CHECK(page.find("## Tensor flow") < page.find("<details>"));
  CHECK(page.find("## Formal Specification") > page.find("<summary><b>Formal specification"));
}

}  // namespace
}  // namespace shardtrace
