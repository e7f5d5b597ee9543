// Helpers the visualization tests share (tests/visualization_test.cc, the emitters;
// tests/page_conventions_test.cc, the committed pages): a UTF-8 text grid for box drawings, a
// small hand-built trace, the code and Mermaid blocks of a page and a strict structural reading
// of the flowcharts MermaidFlow writes.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "ir/trace.h"
#include "spmd/spmd_result.h"

namespace shardtrace::viz_testing {

// A line as code points, so box corners can be found by column.
std::vector<std::u32string> Grid(const std::string& text);
char32_t At(const std::vector<std::u32string>& grid, size_t row, size_t col);
// The boxes drawn with corners (tl, tr, bl, br) and side `v`, each checked to be a rectangle.
int CheckBoxes(const std::vector<std::u32string>& grid, char32_t tl, char32_t tr, char32_t bl,
               char32_t br, char32_t v);
TensorRecord Tensor(int id, std::string name, std::string scope, std::string dims, Shape shape);
// Every tensor replicated: the SPMD result of a one-device trace.
SpmdResult Whole(const Trace& trace);
Trace SmallTrace();
SpmdResult SmallSpmd(const Trace& trace);
// The lines of every fenced code block of a markdown document.
std::vector<std::string> CodeLines(const std::string& markdown);
std::string BlockAfter(const std::string& markdown, const std::string& heading);
std::string Utf8(const std::u32string& text);
std::vector<std::string> HeavyBoxHeads(const std::string& flow);
// Every ```mermaid block of the page, in order.
std::vector<std::string> MermaidBlocks(const std::string& markdown);
// The problems a strict structural reading finds in a flowchart; `labels` gets each node's.
std::vector<std::string> MermaidProblems(const std::string& text,
                                         std::map<std::string, std::string>* labels);

}  // namespace shardtrace::viz_testing
