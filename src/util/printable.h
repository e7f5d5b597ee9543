// Making an error message safe to print as one line: messages quote user input (keys,
// values, paths), which may hold raw non-UTF-8 bytes, control characters or megabytes of
// text. Invalid UTF-8 and control bytes become \xNN, newlines \n, and any single token longer
// than kMaxToken bytes keeps its head and tail around "...(N bytes)...", so the line still
// names what failed and what was expected.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace shardtrace {

inline constexpr size_t kMaxToken = 160;

std::string PrintableMessage(std::string_view message);

}  // namespace shardtrace
