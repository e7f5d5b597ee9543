#include "emit/flow_overview.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

#include "emit/ascii_flow.h"
#include "emit/flow_phases.h"
#include "emit/human_bytes.h"
#include "emit/text_table.h"

namespace shardtrace {
namespace {

// The last segment of a scope, brackets kept ("[gmm_wo]"); "(top)" for none.
std::string LastSegment(const std::string& scope) {
  if (scope.empty()) return "(top)";
  return scope.substr(scope.rfind('/') + 1);
}

// `text` cut at spaces into lines of at most `width` columns, continuations indented.
std::vector<std::string> Wrap(const std::string& text, size_t width, const std::string& indent) {
  std::vector<std::string> out;
  std::string line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && DisplayWidth(line) + 1 + DisplayWidth(word) > width) {
      out.push_back(line);
      line = indent + word;
    } else {
      line += (line.empty() ? "" : " ") + word;
    }
    start = end + 1;
  }
  if (!line.empty()) out.push_back(line);
  return out;
}

std::vector<std::string> Box(const std::string& title, const std::vector<std::string>& lines) {
  size_t inner = DisplayWidth(title) + 2;
  for (const std::string& l : lines) inner = std::max(inner, DisplayWidth(l));
  const auto rule = [](size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += "─";
    return s;
  };
  std::vector<std::string> out = {"┌─ " + title + " " + rule(inner - DisplayWidth(title) - 1) +
                                  "┐"};
  for (const std::string& l : lines)
    out.push_back("│ " + l + std::string(inner - DisplayWidth(l), ' ') + " │");
  out.push_back("└" + rule(inner + 2) + "┘");
  return out;
}

}  // namespace

std::string FlowOverview(const Trace& trace, const SpmdResult& spmd, size_t max_width) {
  const std::vector<FlowPhase> phase = TensorPhases(trace);
  const size_t width = max_width - 4;  // inside the box's borders
  // A tensor a later phase reads is its phase's output; so is the block's last tensor.
  std::vector<bool> handed(trace.tensors.size(), false);
  for (const OpRecord& op : trace.ops) {
    if (op.outputs.empty()) continue;
    const FlowPhase at = phase[op.outputs.front()];
    for (const int in : op.inputs)
      if (in >= 0 && phase[in] != at) handed[in] = true;
  }
  if (!trace.tensors.empty()) handed.back() = true;
  std::string out;
  int n = 0;
  for (const FlowPhase p : PhasesOf(phase)) {
    std::vector<std::string> scopes, lines, names;
    for (const TensorRecord& t : trace.tensors) {
      if (phase[t.id] != p) continue;
      const std::string seg = LastSegment(t.scope);
      if (std::find(scopes.begin(), scopes.end(), seg) == scopes.end()) scopes.push_back(seg);
    }
    // Each handed-on name once, as its last record in the phase shows it.
    std::vector<const TensorRecord*> outputs;
    for (const TensorRecord& t : trace.tensors) {
      if (phase[t.id] != p || !handed[t.id]) continue;
      const auto same = std::find_if(outputs.begin(), outputs.end(), [&](const TensorRecord* o) {
        return o->name == t.name && o->kind == t.kind;
      });
      if (same != outputs.end())
        *same = &t;
      else
        outputs.push_back(&t);
    }
    for (const TensorRecord* t : outputs) {
      std::string text = "→ " + TensorHead(*t);
      if (t->constraint != Constraint::kNone && t->partition_spec)
        text += fmt::format("  ╔{}╗", t->partition_spec->ToString());
      for (const std::string& l : Wrap(text, width, "      ")) lines.push_back(l);
    }
    for (const OpRecord& op : trace.ops) {
      if (op.outputs.empty() || phase[op.outputs.front()] != p) continue;
      if (op.collective) {
        const CollectiveRecord& c = *op.collective;
        const int64_t sent =
            c.bytes_sent.empty() ? 0 : *std::max_element(c.bytes_sent.begin(), c.bytes_sent.end());
        const std::string text = fmt::format(
            "⇄ {}{} over {}: {} → {}, {} per device",
            c.origin == CollectiveOrigin::kImplied ? "xla " : "", ToString(c.kind),
            fmt::join(c.axes, ","), op.inputs.empty() ? "" : trace.tensors[op.inputs.front()].name,
            trace.tensors[op.outputs.front()].name, HumanBytes(sent));
        for (const std::string& l : Wrap(text, width, "      ")) lines.push_back(l);
      }
      for (const ImpliedCollective& c : spmd.implied_at(op.id)) {
        if (c.kind == CollectiveKind::kSlice) continue;
        const std::string text =
            fmt::format("⇄ xla {} over {}: {} for {}, {} per device", HloName(c.kind),
                        fmt::join(c.axes, ","), trace.tensors[c.tensor].name,
                        trace.tensors[op.outputs.front()].name, HumanBytes(c.bytes_per_device));
        for (const std::string& l : Wrap(text, width, "      ")) lines.push_back(l);
      }
    }
    std::string title = fmt::format("{} {}: {}", ++n, ToString(p), fmt::join(scopes, ", "));
    if (DisplayWidth(title) > width - 4) {
      title = fmt::format("{} {}: {}", n, ToString(p), scopes.front());
      for (size_t i = 1; i < scopes.size(); ++i) {
        const std::string more = fmt::format("{}, {}", title, scopes[i]);
        if (DisplayWidth(more) + 6 > width - 4) {
          title += ", …";
          break;
        }
        title = more;
      }
    }
    if (n > 1) out += "  ▼\n";
    for (const std::string& l : Box(title, lines)) out += l + "\n";
  }
  return out;
}

}  // namespace shardtrace
