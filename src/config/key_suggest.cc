#include "config/key_suggest.h"

#include <algorithm>
#include <utility>

namespace shardtrace::config_internal {

size_t EditDistance(std::string_view a, std::string_view b) {
  // One rolling row of the DP table: row[j] = distance(a[0..i), b[0..j)).
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::vector<std::string> SuggestKeys(std::string_view typed, const std::vector<std::string>& known,
                                     size_t max_count) {
  const size_t threshold = std::max<size_t>(2, typed.size() / 3);
  // Substring hits on very short input (e.g. "ep") would match half the keys.
  const bool allow_contains = typed.size() >= 4;
  std::vector<std::pair<size_t, std::string>> candidates;
  for (const std::string& key : known) {
    const size_t distance = EditDistance(typed, key);
    const bool contains = allow_contains && key.find(typed) != std::string::npos;
    if (distance <= threshold || contains) candidates.emplace_back(distance, key);
  }
  std::sort(candidates.begin(), candidates.end());
  std::vector<std::string> out;
  for (size_t k = 0; k < candidates.size() && out.size() < max_count; ++k) {
    out.push_back(candidates[k].second);
  }
  return out;
}

}  // namespace shardtrace::config_internal
