// Byte counts as the text outputs print them: binary units with one decimal.
#pragma once

#include <cstdint>
#include <string>

namespace shardtrace {

// 1536 -> "1.5 KiB", 3221225472 -> "3.0 GiB"; below 1024: "812 B".
std::string HumanBytes(int64_t bytes);

}  // namespace shardtrace
