#include "emit/golden_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "emit/text_table.h"

namespace shardtrace {
namespace {

std::string StatusText(ArrayCheck::Status s) {
  switch (s) {
    case ArrayCheck::Status::kPass:
      return "pass";
    case ArrayCheck::Status::kFail:
      return "FAIL";
    case ArrayCheck::Status::kSkipped:
      return "skipped";
    case ArrayCheck::Status::kUnknown:
      return "UNKNOWN";
  }
  return "?";
}

int Passed(const std::vector<GoldenReport>& reports) {
  int passed = 0;
  for (const GoldenReport& r : reports) passed += r.passed();
  return passed;
}

}  // namespace

std::string GoldenReportsToJson(const std::vector<GoldenReport>& reports) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const GoldenReport& r : reports) {
    nlohmann::ordered_json checks = nlohmann::ordered_json::array();
    for (const ArrayCheck& c : r.checks)
      checks.push_back({{"array", c.name},
                        {"status", StatusText(c.status)},
                        {"detail", c.detail},
                        {"max_abs_error", c.max_abs_error}});
    nlohmann::ordered_json report = {{"case", r.case_dir},
                                     {"path", r.path},
                                     {"maxtext_revision", r.maxtext_revision},
                                     {"passed", r.passed()}};
    if (!r.warnings.empty()) report["warnings"] = r.warnings;
    if (r.step) report["gradients_compared"] = r.gradients_compared;
    report["arrays"] = checks;
    j.push_back(report);
  }
  return j.dump(2) + "\n";
}

std::string GoldenReportsToText(const std::vector<GoldenReport>& reports) {
  const int passed = Passed(reports);
  std::string text;
  for (const GoldenReport& r : reports) {
    text += fmt::format("{}  {}\n  path: {}\n  moe.py: {}\n", r.passed() ? "PASS" : "FAIL",
                        r.case_dir, r.path, r.maxtext_revision);
    for (const std::string& w : r.warnings) text += fmt::format("  warning: {}\n", w);
    TextTable table({"array", "status", "detail"});
    for (const ArrayCheck& c : r.checks) table.AddRow({c.name, StatusText(c.status), c.detail});
    text += table.Render("  ") + "\n";
    if (r.step)
      text += fmt::format("  training step: loss and {} gradient arrays compared\n",
                          r.gradients_compared);
  }
  text += fmt::format("{} passed, {} failed\n", passed, static_cast<int>(reports.size()) - passed);
  return text;
}

}  // namespace shardtrace
