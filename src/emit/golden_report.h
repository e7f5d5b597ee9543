// What `shardtrace check` prints for its golden cases: per case PASS/FAIL, the path and the
// MaxText revision it ran, and every array's status and error, as a table or JSON.
#pragma once

#include <string>
#include <vector>

#include "check/golden_check.h"

namespace shardtrace {

std::string GoldenReportsToText(const std::vector<GoldenReport>& reports);
std::string GoldenReportsToJson(const std::vector<GoldenReport>& reports);

}  // namespace shardtrace
