// The HTML report (emit/html_report.h, emit/markdown_html.h, render --format html): escaping,
// the Markdown subset of the pages, the report's structure, and render's HTML from the CLI.
// Chromium checks the report's behaviour (tools/html_check, ctest html_report_chromium).
#include "emit/html_report.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "emit/markdown_html.h"
#include "emit/plan_report.h"
#include "emit/svg_chart.h"
#include "test_support.h"

namespace shardtrace {

using testing::CommandResult;
using testing::RunShardtrace;
using testing::RunShardtraceBinary;

TEST_CASE("HTML text is escaped, Markdown's inline markup converted", "[html]") {
  CHECK(HtmlEscape("<a href=\"x\">&'") == "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  CHECK(InlineMarkdownToHtml("a `P('x', None) <b>` **bold** [docs](docs/x.md) [w](https://x.io)") ==
        "a <code>P(&#39;x&#39;, None) &lt;b&gt;</code> <b>bold</b> docs <a "
        "href=\"https://x.io\">w</a>");
}

TEST_CASE("The pages' Markdown converts: headings, tables, lists, code, folds", "[html]") {
  const std::string html = MarkdownToHtml(
      "# Title\n\nSome *text* <script>\nmore.\n\n| a | `b|c` |\n|---|---|\n| 1 \\| 2 | x |\n\n"
      "- one\n- two\n  continued\n\n```text\n<raw> & text\n```\n\n### Graph: g\n\n```mermaid\n"
      "graph TD\n```\n\n<details>\n<summary><b>Empty</b>: graphs only</summary>\n\n"
      "#### Graph: h\n\n```mermaid\nflowchart\n```\n\n</details>\n\n<details>\n"
      "<summary><b>Kept</b>: text</summary>\n\nbody\n\n</details>\n");
  CHECK_THAT(html, Catch::Contains("<h1>Title</h1>"));
  CHECK_THAT(html, Catch::Contains("<p>Some *text* &lt;script&gt;\nmore.</p>"));
  CHECK_THAT(html, Catch::Contains("<th>a</th><th><code>b|c</code></th>"));
  CHECK_THAT(html, Catch::Contains("<td>1 | 2</td><td>x</td>"));
  CHECK_THAT(html, Catch::Contains("<li>one</li>\n<li>two continued</li>"));
  CHECK_THAT(html, Catch::Contains("<pre>&lt;raw&gt; &amp; text\n</pre>"));
  CHECK_THAT(
      html, !Catch::Contains("mermaid") && !Catch::Contains("Graph:") && !Catch::Contains("Empty"));
  CHECK_THAT(html, Catch::Contains("<details>\n<summary><b>Kept</b>: text</summary>\n<p>body</p>\n"
                                   "</details>"));
}

TEST_CASE("A report is one self-contained page: summary first, sections folded", "[html]") {
  HtmlReport report{.command_name = "render",
                    .title = "t <1>",
                    .generator = "g",
                    .command = "shardtrace render x=1",
                    .summary = "<p>S</p>",
                    .sections = {}};
  report.sections.push_back({.id = "s", .title = "Section", .body = "<p>B</p>", .open = false});
  report.sections.push_back({.id = "raw", .title = "", .body = "<p>R</p>", .open = false});
  const std::string html = RenderHtmlReport(report);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK_THAT(html, Catch::Contains("<title>t &lt;1&gt;</title>"));
  CHECK_THAT(html, Catch::Contains("default-src 'none'"));
  CHECK(html.find("<p>S</p>") < html.find("<details id=\"s\""));
  CHECK_THAT(html, Catch::Contains("<details id=\"s\" class=\"section\">\n<summary>Section"));
  CHECK_THAT(html, Catch::Contains("<div class=\"page-block\" id=\"raw\">\n<p>R</p>"));
  CHECK_THAT(html, !Catch::Contains("http://") && !Catch::Contains("https://") &&
                       !Catch::Contains(" src="));
  HtmlTable table{.id = "t", .caption = "rows", .headers = {"name", "bytes"}, .rows = {}};
  table.rows.push_back({{"a<b", {}}, {"1.0 KiB", 1024.0}});
  CHECK_THAT(HtmlTableMarkup(table),
             Catch::Contains("<td>a&lt;b</td><td class=\"num\" data-v=\"1024\">1.0 KiB</td>") &&
                 Catch::Contains("data-table=\"t\"") && Catch::Contains("1 rows"));
}

TEST_CASE("A stacked bar chart: segments to scale, totals, limit lines, a legend", "[html]") {
  StackedBarChart chart;
  chart.id = "c";
  chart.title = "memory <per device>";
  chart.format = [](double v) { return fmt::format("{:g} B", v); };
  chart.bars = {{"forward", {{"params", 30}, {"temps", 10}}},
                {"step", {{"params", 30}, {"grads", 30}, {"temps", 0}, {"more", 20}}}};
  chart.lines = {{"chip 100", 100}, {"chip 50", 50}};
  const std::string svg = StackedBarsSvg(chart);
  CHECK(svg.rfind("<svg id=\"c\" class=\"chart\"", 0) == 0);
  CHECK_THAT(svg, Catch::Contains("memory &lt;per device&gt;"));
  // The axis runs to the largest of the bars (80) and the lines (100): 640 px for 100.
  CHECK_THAT(svg, Catch::Contains("<rect class=\"segment\" x=\"140.0\" y=\"58.0\" "
                                  "width=\"192.0\" height=\"26.0\" fill=\"#0072B2\">"
                                  "<title>forward: params (30 B)</title>"));
  CHECK_THAT(svg, Catch::Contains(">40 B</text>") && Catch::Contains(">80 B</text>"));
  CHECK_THAT(svg, !Catch::Contains("temps (0 B)"));  // an empty segment is not drawn
  CHECK_THAT(svg, Catch::Contains("x1=\"460.0\"") && Catch::Contains("x1=\"780.0\"") &&
                      Catch::Contains(">chip 50</text>"));
  // Every component once in the legend, the same colour in every bar.
  size_t params = 0;
  for (size_t at = svg.find(">params</text>"); at != std::string::npos;
       at = svg.find(">params</text>", at + 1))
    ++params;
  CHECK(params == 1);
  CHECK(StackedBarsSvg(StackedBarChart{}).empty());
}

TEST_CASE("A one-bar chart names each value in its legend, wrapped at the chart's width",
          "[html]") {
  StackedBarChart chart;
  chart.id = "one";
  chart.format = [](double v) { return fmt::format("{:g} B", v); };
  chart.bars = {{"step", {}}};
  for (int i = 0; i < 8; ++i) {
    chart.bars[0].segments.push_back({fmt::format("a long component name {}", i), 1.0 + i});
  }
  const std::string svg = StackedBarsSvg(chart);
  CHECK_THAT(svg, Catch::Contains(">a long component name 0 1 B</text>") &&
                      Catch::Contains(">a long component name 7 8 B</text>"));
  // No legend entry starts beyond the chart's 890 px; later rows start at the plot's left.
  size_t rows = 0;
  for (size_t at = svg.find("<rect x=\""); at != std::string::npos;
       at = svg.find("<rect x=\"", at + 1)) {
    const double x = std::stod(svg.substr(at + 9));
    CHECK(x < 890 - 150);
    if (x == 140) ++rows;
  }
  CHECK(rows >= 3);
}

TEST_CASE("render --format html: the report of a config, with its tables and flow SVG",
          "[html][cli]") {
  const testing::TempDir dir;
  const CommandResult r =
      RunShardtrace({"render", "base_emb_dim=16", "base_mlp_dim=32", "base_moe_mlp_dim=32",
                     "num_experts=4", "num_experts_per_tok=2", "max_target_length=4",
                     "per_device_batch_size=1", "decoder_block=mixtral", "ici_expert_parallelism=2",
                     "--devices", "2", "--format", "html", "-o", dir.File("page.html")});
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string html = testing::ReadFile(dir.File("page.html"));
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("<h2>Summary</h2>") < html.find("id=\"tensors-table\""));
  CHECK_THAT(html, Catch::Contains("<svg") && Catch::Contains("class=\"node\"") &&
                       Catch::Contains("<td>gate_logits</td>") &&
                       Catch::Contains("ragged_all_to_all") &&
                       Catch::Contains("shardtrace render base_emb_dim=16"));
  CHECK_THAT(html, Catch::Contains("Formal Specification") && !Catch::Contains("```"));
  CHECK_THAT(html, Catch::Contains("<svg id=\"memory-chart\"") &&
                       Catch::Contains("<title>forward pass: parameters (") &&
                       Catch::Contains("<title>training step: gradients ("));
  // A pipe is not a terminal: the report goes to stdout.
  const CommandResult piped =
      RunShardtraceBinary({"render", "base_emb_dim=16", "base_mlp_dim=32", "base_moe_mlp_dim=32",
                           "num_experts=4", "num_experts_per_tok=2", "max_target_length=4",
                           "per_device_batch_size=1", "decoder_block=mixtral", "--format", "html"});
  CHECK(piped.status == 0);
  CHECK(piped.out.rfind("<!DOCTYPE html>", 0) == 0);
}

TEST_CASE("fit --format html: the verdict, the memory chart against the HBM, the tables",
          "[html][fit][cli]") {
  const testing::TempDir dir;
  const std::vector<std::string> config = {
      testing::SourcePath("testdata/maxtext-moe-models/configs/base.yml"),
      "model_name=mixtral-8x7b",
      "override_model_config=true",
      "base_num_decoder_layers=2",
      "compile_topology=v5p-8",
      "compile_topology_num_slices=1",
      "per_device_batch_size=1",
      "max_target_length=1024"};
  std::vector<std::string> args = {"fit"};
  args.insert(args.end(), config.begin(), config.end());
  const CommandResult text = RunShardtrace(args);
  REQUIRE(text.status == 0);
  const std::string headline = text.out.substr(0, text.out.find('\n'));
  args.insert(args.end(), {"--format", "html", "-o", dir.File("fit.html")});
  const CommandResult r = RunShardtrace(args);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string html = testing::ReadFile(dir.File("fit.html"));
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  // The text's first line first, then the chart, then the folded tables.
  const size_t verdict = html.find("<p class=\"verdict fits\">" + HtmlEscape(headline) + "</p>");
  const size_t chart = html.find("<svg id=\"memory-chart\"");
  REQUIRE(verdict != std::string::npos);
  REQUIRE(chart != std::string::npos);
  CHECK(verdict < chart);
  CHECK(chart < html.find("<details id=\"memory\""));
  CHECK_THAT(html,
             Catch::Contains("<title>training step: parameters (2.9 GiB)</title>") &&
                 Catch::Contains("<title>training step: weights cast (") &&
                 Catch::Contains("<title>v5p HBM 95.7 GiB</title>") &&
                 // The 95% of HBM fit holds a TPU step to, its compiler's limit.
                 Catch::Contains("<title>95% scheduling limit 90.9 GiB</title>") &&
                 Catch::Contains(
                     " HBM (17%), held to the 90.9 GiB (95%) its compiler schedules within, ") &&
                 Catch::Contains("shardtrace fit ") &&
                 Catch::Contains("<td>decoder/layers/MoeBlock_0/wi_0</td>"));
  // The long tables sort and filter; the short ones are plain.
  for (const char* id : {"collectives-table", "params-table"}) {
    CHECK_THAT(html, Catch::Contains(fmt::format("<table class=\"sortable\" id=\"{}\">", id)));
  }
  for (const char* id : {"memory-table", "layers-table", "largest-table", "variants-table"}) {
    CHECK_THAT(html, Catch::Contains(fmt::format("<table id=\"{}\">", id)));
  }
  CHECK_THAT(html, Catch::Contains("<tr><td class=\"component\">optimizer state</td>"));
  CHECK_THAT(html, Catch::Contains("id=\"params-table-count\">13 rows</span>"));
  // Over the HBM: the verdict says by how much, the bar runs past the line.
  const CommandResult over =
      RunShardtrace({"fit", "model_name=mixtral-8x7b", "--devices", "8", "--hbm", "16", "--chip",
                     "h100", "--format", "html", "-o", dir.File("over.html")});
  REQUIRE(over.status == 0);
  const std::string over_html = testing::ReadFile(dir.File("over.html"));
  CHECK_THAT(over_html,
             Catch::Contains("<p class=\"verdict does-not-fit\">mixtral-8x7b on 8 devices, h100, "
                             "16.00 GiB HBM per device: does not fit by") &&
                 Catch::Contains("<title>h100 HBM 16.0 GiB</title>") &&
                 Catch::Contains("<h1>fit: mixtral-8x7b on h100</h1>") &&
                 !Catch::Contains("weights cast (") && !Catch::Contains("schedules within"));
  // The JSON names the capacity: on TPU the chip table's scheduler_memory_limit share of the
  // HBM, elsewhere the whole HBM.
  std::vector<std::string> json_args = {"fit"};
  json_args.insert(json_args.end(), config.begin(), config.end());
  json_args.insert(json_args.end(), {"--format", "json"});
  const CommandResult tpu = RunShardtrace(json_args);
  REQUIRE(tpu.status == 0);
  const nlohmann::json tpu_fit = nlohmann::json::parse(tpu.out);
  CHECK(tpu_fit.at("capacity_bytes").get<int64_t>() ==
        static_cast<int64_t>(0.95 * tpu_fit.at("hbm_bytes").get<double>()));
  CHECK(tpu_fit.at("headroom_bytes").get<int64_t>() ==
        tpu_fit.at("capacity_bytes").get<int64_t>() -
            tpu_fit.at("peak_memory_in_bytes").get<int64_t>());
  const CommandResult gpu = RunShardtrace({"fit", "model_name=mixtral-8x7b", "--devices", "8",
                                           "--hbm", "16", "--chip", "h100", "--format", "json"});
  REQUIRE(gpu.status == 0);
  const nlohmann::json gpu_fit = nlohmann::json::parse(gpu.out);
  CHECK(gpu_fit.at("capacity_bytes") == gpu_fit.at("hbm_bytes"));
}

TEST_CASE("plan --format html: the scatter of every fitting config, round ticks, the tables",
          "[html][plan]") {
  PlanResult plan;
  plan.model_name = "m";
  plan.target.topology = "v5p-8";
  plan.evaluated = 5;
  const auto config = [](std::string o, double seconds, double gib, bool pareto) {
    PlannedConfig c;
    c.overrides = {std::move(o)};
    c.fits = true;
    c.time.step_seconds = seconds;
    c.time.tokens_per_second_per_device = 1 / seconds;
    c.headroom_bytes = static_cast<int64_t>(gib * 1024 * 1024 * 1024);
    c.pareto = pareto;
    return c;
  };
  plan.fits = {config("a=1", 0.121, 77, true), config("a=2", 0.138, 78.5, true),
               config("a=3", 0.178, 38, false)};
  PlannedConfig near = config("a=4", 0.2, -1, false);
  near.fits = false;
  plan.near = {near};
  plan.excluded = {{{"a=5"}, "MaxText refuses <this>"}};
  const std::string html = PlanToHtml(plan, 2, "shardtrace plan m --format html");
  const std::string svg = PlanScatterSvg(plan);
  CHECK_THAT(html, Catch::Contains(svg));
  // One circle per fitting config (the legend's marks have no class), the front in red.
  size_t circles = 0;
  for (size_t at = svg.find("<circle class=\"config"); at != std::string::npos;
       at = svg.find("<circle class=\"config", at + 1))
    ++circles;
  for (size_t at = svg.find("<circle class=\"pareto"); at != std::string::npos;
       at = svg.find("<circle class=\"pareto", at + 1))
    ++circles;
  CHECK(circles == 3);
  CHECK_THAT(svg, Catch::Contains("class=\"pareto-front\"") &&
                      Catch::Contains("<circle class=\"fastest\"") &&
                      Catch::Contains("estimated step time (ms)"));
  // Ticks over the data's range at round steps: 120 to 180 ms, 30 to 80 GiB by 10.
  CHECK_THAT(svg, Catch::Contains(">120</text>") && Catch::Contains(">180</text>") &&
                      Catch::Contains(">30</text>") && Catch::Contains(">80</text>") &&
                      !Catch::Contains(">190</text>") && !Catch::Contains(">20</text>"));
  CHECK_THAT(html, Catch::Contains("The 2 of 3 configs that fit") &&
                       Catch::Contains("id=\"configs-table-count\">2 rows") &&
                       Catch::Contains("<td class=\"num\" data-v=\"0.121\">121.0 ms</td>") &&
                       Catch::Contains("MaxText refuses &lt;this&gt;") &&
                       Catch::Contains("does not fit by 1.0 GiB") &&
                       Catch::Contains("<pre class=\"command\">shardtrace plan m --format html") &&
                       Catch::Contains("<pre class=\"command\">python3 -m maxtext"));
  plan.fits.clear();
  CHECK(PlanScatterSvg(plan).empty());
  CHECK_THAT(PlanToHtml(plan, 2, ""),
             Catch::Contains("0 of 5 configs fit") && !Catch::Contains("<svg"));
}

}  // namespace shardtrace
