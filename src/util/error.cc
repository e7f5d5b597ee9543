#include "util/error.h"

#include <utility>

namespace shardtrace {

std::string Error::WithVisibleNul(const std::string& message) {
  if (message.find('\0') == std::string::npos) return message;
  std::string out;
  out.reserve(message.size() + 8);
  for (const char c : message) {
    if (c == '\0')
      out.append("\\0");
    else
      out.push_back(c);
  }
  return out;
}

void Error::PrependWarnings(const std::vector<Warning>& earlier) {
  std::vector<Warning> all = earlier;
  AddWarnings(all, warnings_);
  warnings_ = std::move(all);
}

}  // namespace shardtrace
