#include "emit/tree_text.h"

#include <fmt/format.h>

#include <algorithm>
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

int64_t ShownDevices(int64_t devices, const DeviceTreeView& view) {
  return std::min(devices, std::max<int64_t>(view.max_devices, 1));
}

std::string DevicesLeftOut(int64_t shown, int64_t devices) {
  if (shown == devices) return "";
  return fmt::format("\n({} not shown: the first {} of {} devices are drawn.)\n",
                     shown + 1 == devices ? fmt::format("device {}", shown)
                                          : fmt::format("devices {}-{}", shown, devices - 1),
                     shown, devices);
}

}  // namespace shardtrace
