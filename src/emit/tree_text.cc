#include "emit/tree_text.h"

#include <vector>

#include "emit/text_table.h"

namespace shardtrace {

std::string TreeLine(const std::string& prefix, const std::string& continuation,
                     const std::string& text, size_t width) {
  const size_t used = DisplayWidth(prefix);
  // The continuation's rules are as wide as the prefix's; never wrap into nothing.
  const size_t room = width > used + 16 ? width - used : 16;
  const std::vector<std::string> lines = WrapText(text, room, 4);
  std::string out = prefix + lines.front() + "\n";
  for (size_t i = 1; i < lines.size(); ++i) {
    std::string pad = continuation;
    while (DisplayWidth(pad) < used) pad += ' ';
    out += pad + lines[i] + "\n";
  }
  return out;
}

const char* Branch(size_t i, size_t n) { return i + 1 == n ? "└── " : "├── "; }

const char* UnderBranch(size_t i, size_t n) { return i + 1 == n ? "    " : "│   "; }

}  // namespace shardtrace
