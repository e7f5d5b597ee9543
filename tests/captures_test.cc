// The capture ids: every name round-trips, and the expected-output arrays `check` compares
// are exactly the ones testdata/golden-format.md's table lists.
#include "ir/captures.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "test_support.h"

namespace shardtrace {
namespace {

TEST_CASE("every capture name maps back to its id", "[capture]") {
  std::set<std::string_view> names;
  for (int i = 0; i <= static_cast<int>(Capture::kRingIntermediateOutputRowMaxPerDevice); ++i) {
    const auto id = static_cast<Capture>(i);
    INFO(CaptureName(id));
    CHECK(CaptureByName(CaptureName(id)) == id);
    CHECK(names.insert(CaptureName(id)).second);
  }
  CHECK_FALSE(CaptureByName("top_k_index").has_value());
  CHECK(ExchangeOperand(Exchange::kReturn) == "intermediate_output");
  CHECK(CaptureName(AllToAllParamCaptures(Exchange::kDispatch)[1]) == "x send_sizes per device");
}

TEST_CASE("check compares exactly the expected arrays golden-format.md lists", "[capture]") {
  std::ifstream in(testing::SourcePath("testdata/golden-format.md"));
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const size_t table = doc.find("Expected values");
  REQUIRE(table != std::string::npos);
  std::set<std::string> documented;
  const std::regex row(R"(\n\| `([a-z_]+)` \|)");
  const std::string rest = doc.substr(table, doc.find("Comparison:", table) - table);
  for (std::sregex_iterator it(rest.begin(), rest.end(), row), end; it != end; ++it)
    documented.insert((*it)[1]);
  std::set<std::string> compared;
  for (const Capture id : GoldenCaptures()) compared.insert(std::string(CaptureName(id)));
  CHECK(compared == documented);
}

}  // namespace
}  // namespace shardtrace
