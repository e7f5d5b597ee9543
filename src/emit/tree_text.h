// The lines of the tree views (mask, routing and sparse-row trees): one node per line after
// its branch (`├── `, `└── `, nested under `│   `), wrapped within the 100 columns of a
// visualization code block. A long list of leaves (the tokens of an expert's rows on a big
// config) continues on lines that keep the tree's vertical rules, so the tree still reads
// as a tree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace shardtrace {

// `prefix` + `text` and a newline, wrapped at `width` display columns: continuation lines
// start with `continuation` (the rules of the levels above, e.g. "│   ") and four spaces.
std::string TreeLine(const std::string& prefix, const std::string& continuation,
                     const std::string& text, size_t width = 100);

// "├── " or "└── " for child `i` of `n`, and the rule its children continue under.
const char* Branch(size_t i, size_t n);
const char* UnderBranch(size_t i, size_t n);

// How much of a per-device tree (sorted rows, ragged buffers, local_permute, ...) to show.
struct DeviceTreeView {
  int64_t max_devices = 8;  // devices 0 .. max_devices-1; a closing line counts the rest
  size_t width = 120;       // display columns per line (the pages draw within 100)
};

// How many of `devices` a tree with `view` draws (at least one).
int64_t ShownDevices(int64_t devices, const DeviceTreeView& view);

// The closing line of a tree that drew `shown` of `devices` ("" when it drew them all).
std::string DevicesLeftOut(int64_t shown, int64_t devices);

}  // namespace shardtrace
