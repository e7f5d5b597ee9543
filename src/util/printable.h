// Making an error message safe to print as one line: messages quote user input (keys,
// values, paths), which may hold raw non-UTF-8 bytes, control characters or megabytes of
// text. Invalid UTF-8 and control bytes become \xNN, NUL \0, newlines \n, and any single token longer
// than kMaxToken bytes keeps its head and tail around "...(N bytes)...", so the line still
// names what failed and what was expected. Command output (not one line, possibly
// megabytes) keeps its text and only loses its terminal controls.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace shardtrace {

inline constexpr size_t kMaxToken = 160;

std::string PrintableMessage(std::string_view message);

// `text` with every terminal control character shown as text: C0 controls other than
// newline and tab, DEL, and the C1 controls (U+0080-U+009F, which some terminals obey as
// escape sequences) become \xNN or \u{NN}. A dump's axis name or a directory name echoed
// in a report then cannot move the cursor, retitle the window or hide lines.
std::string WithoutTerminalControls(std::string_view text);

}  // namespace shardtrace
