#include "util/warnings.h"

#include <algorithm>
#include <utility>

#include "util/printable.h"

namespace shardtrace {

void AddWarning(std::vector<Warning>& warnings, Warning warning) {
  if (std::find(warnings.begin(), warnings.end(), warning) == warnings.end())
    warnings.push_back(std::move(warning));
}

void AddWarnings(std::vector<Warning>& warnings, const std::vector<Warning>& more) {
  for (const Warning& w : more) AddWarning(warnings, w);
}

std::string WarningLines(const std::vector<Warning>& warnings) {
  std::string out;
  for (const Warning& w : warnings)
    out += "shardtrace: warning: " + PrintableMessage(w.message) + "\n";
  return out;
}

}  // namespace shardtrace
