// "Did you mean" suggestions for a mistyped config key: the closest known keys by edit
// distance, plus keys that contain what was typed (num_expert -> num_experts,
// num_experts_per_tok), so a truncated key still finds its long relatives.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace shardtrace::config_internal {

// Levenshtein distance (insert, delete, substitute all cost 1).
size_t EditDistance(std::string_view a, std::string_view b);

// Up to `max_count` known keys close to `typed`, best first (distance, then name).
// A key qualifies when its distance is at most max(2, |typed| / 3), or when it contains
// `typed` (for typed keys of 4+ characters). Empty when nothing is close.
std::vector<std::string> SuggestKeys(std::string_view typed, const std::vector<std::string>& known,
                                     size_t max_count = 3);

}  // namespace shardtrace::config_internal
